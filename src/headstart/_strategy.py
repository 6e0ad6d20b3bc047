r"""How the next configuration is chosen: an initial design, then the method's model.

The initial design is a scrambled Sobol sequence (Owen scrambling, seeded by the study's seed):
the k-th design point is the k-th point of that sequence, so suggestions are reproducible across
processes and restarts. After ``n_initial`` completed (or imported) trials, a model-based method
asks the one BO engine (:class:`headstart._engine.engine.BOEngine`) with the surrogate its
registered spec builds (:mod:`headstart._methods`); ``method="random"`` keeps sampling uniformly.
Transfer methods need no initial design by default: their first suggestion already uses the
meta-data; ``method="warmstart"`` fills the initial design with the sources' best configurations.

With a user belief (parameter priors or a joint density, :mod:`headstart.pibo`), every
model-based suggestion maximizes piBO's ``alpha(x) * pi(x)^(beta / n)``, ``n = 1`` at the first
step after the initial design, and the initial design starts at the belief's mode followed by
draws from the belief (Alg. 1 of Hvarfner et al. 2022) instead of Sobol points.
"""

from __future__ import annotations

import contextlib
import copy
import warnings
from collections.abc import Callable, Mapping, Sequence

import numpy as np

from headstart._cached import cached
from headstart._config import StudyConfig, to_max
from headstart._engine.threads import limit_threads
from headstart._meta import ranked_configurations
from headstart._methods import BuildContext, ReportContext
from headstart.exceptions import InvalidSettingError
from headstart.pibo import UserBelief, default_prior_strength, pibo_active
from headstart.space import SearchSpace

N_SOURCE_CANDIDATES = 256  # sources' best configurations screened by every transfer search


MAX_DEFAULT_N_INITIAL = 10
MODEL_RETRIES = 2  # model suggestions refused as duplicates before a retry draws a random point
"""Cap of the default initial design (Optuna's GPSampler starts the GP after 10 trials too).

Measured (``docs/benchmarks/initial_design/initial_design.md``, Levy-20 and Ackley-20, budget 100, 8 seeds):
the uncapped ``2 d + 1`` = 41 Sobol points, or ``budget / 5`` = 20, left the GP too few trials;
10 points lowered the final regret on Levy-20 from 50.0 to 36.4 and on Ackley-20 from 15.6 to
14.9. For ``d <= 4`` the cap changes nothing."""


def default_n_initial(dim: int, budget: int | None, multi_output: bool = False) -> int:
    """``min(2 d + 1, 10, budget / 5)`` (at least 1); the budget term only when it is known.

    A study with several objectives or with constraints starts its models after
    ``min(10, budget / 5)`` points whatever ``d``: each output's GP must see the shape of its
    own function before the joint criterion (log EHVI, log constrained EI) can trade them off.
    Measured (``docs/benchmarks/multi_objective.md``; the old design is the
    ``headstart-init2d1`` arm): on the 2-D problems where ``2 d + 1 = 5`` points left seeds stuck
    (ConstrainedGramacy and ConstrainedBraninCurrin, 30 seeds) 10 points removed every stuck
    seed, and on the held-out BNH, SRN, CONSTR and GMM (10 seeds) they raised the mean
    hypervolume share from 0.832 to 0.945."""
    n = MAX_DEFAULT_N_INITIAL if multi_output else min(2 * dim + 1, MAX_DEFAULT_N_INITIAL)
    if budget is not None:
        n = min(n, budget // 5)
    return max(n, 1)


def sobol_point(dim: int, index: int, seed: int) -> np.ndarray:
    """The ``index``-th point of a scrambled Sobol sequence in ``[0, 1]^dim``."""
    from scipy.stats import qmc

    engine = qmc.Sobol(dim, scramble=True, seed=seed)
    if index:
        engine.fast_forward(index)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # balance warnings are about n != 2^m; one point is fine
        return engine.random(1)[0]


def pareto_candidates(output_tasks: Sequence[Sequence], k: int) -> np.ndarray:
    """Each source's Pareto-optimal configurations (encoded), feasible ones only when the source
    has every constraint output, the knee point (closest to the ideal point, objectives scaled
    to [0, 1]) first; sources in order."""
    from headstart._engine.multi_output import pareto_mask

    rows = []
    by_name = [{t.name: t for t in tasks} for tasks in output_tasks]  # a source's tasks, by name
    for s, first in enumerate(output_tasks[0]):
        Y = np.stack([output_tasks[j][s].y_max() for j in range(k)], axis=1)
        keep = np.ones(len(Y), dtype=bool)
        limits = [named.get(first.name) for named in by_name[k:]]
        if limits and all(t is not None and len(t.y) == len(Y) for t in limits):
            keep = np.all([t.y <= 0.0 for t in limits], axis=0)
        if not keep.any():
            continue
        X, Y = first.X[keep], Y[keep]
        front = pareto_mask(Y)
        X, Y = X[front], Y[front]
        span = np.where(np.ptp(Y, axis=0) > 0, np.ptp(Y, axis=0), 1.0)
        gap = ((Y.max(axis=0) - Y) / span) ** 2
        rows.append(X[np.argsort(gap.sum(axis=1), kind="stable")])
    if not rows:
        return np.zeros((0, output_tasks[0][0].X.shape[1]))
    return np.concatenate(rows)[:N_SOURCE_CANDIDATES]


def build_strategy(
    space: SearchSpace,
    config: StudyConfig,
    *,
    storage=None,
    belief: UserBelief | None = None,
    meta_tasks: Sequence | None = None,
    state_key: str | None = None,
    output_tasks: Sequence[Sequence] | None = None,
) -> Strategy:
    r"""The one way a :class:`Strategy` is made (the study, parameter importance, the Optuna
    sampler, the transfer check).

    Args:
        space: The search space.
        config: The study's configuration.
        storage: The storage (its model cache keeps fitted meta-models; a transfer study's frozen
            meta-data are read from it when ``meta_tasks`` is ``None``).
        belief: The user's belief (piBO).
        meta_tasks: The sources, when the caller has them already.
        state_key: Where the surrogate's warm-start state is kept in the storage's cache.
        output_tasks: Several objectives / constraints: the sources per output, when the
            caller has them already.
    """
    if meta_tasks is None:
        meta_tasks = ()
        if config.transfer:
            from headstart.storage.meta_data import load_meta_data

            meta_tasks = load_meta_data(storage, config.transfer["data_key"])
            outputs = config.transfer.get("outputs")
            if outputs is not None:  # several objectives / constraints: sources per output
                output_tasks = [
                    load_meta_data(storage, entry["data_key"]) if entry else [] for entry in outputs
                ]
    return Strategy(
        space,
        config,
        belief=belief,
        meta_tasks=meta_tasks,
        cache=storage,
        state_key=state_key,
        output_tasks=output_tasks,
    )


class Strategy:
    r"""Turns a study's history into the next configuration (build one with
    :func:`build_strategy`).

    Args:
        space: The study's search space.
        config: The study's :class:`~headstart._config.StudyConfig`.
        belief: The user's belief (:class:`headstart.pibo.UserBelief`); piBO is on when it is
            not flat and the prior strength is not 0.
        meta_tasks: Earlier tasks (:class:`headstart._meta.MetaTask`) for transfer methods.
        cache: A model cache (:class:`~headstart._engine.protocols.ModelCache`) that keeps fitted
            meta-task GPs across studies.
        state_key: Where in ``cache`` the surrogate's warm-start state is kept between
            suggestions (``None``: not kept).
        output_tasks: Several objectives / constraints with a transfer method: the sources'
            meta-tasks per output (the objectives, then the constraints); an output without any
            gets a plain GP.
    """

    def __init__(
        self,
        space: SearchSpace,
        config: StudyConfig,
        *,
        belief: UserBelief | None = None,
        meta_tasks: Sequence = (),
        cache=None,
        state_key: str | None = None,
        output_tasks: Sequence[Sequence] | None = None,
    ) -> None:
        spec = config.spec
        config = config.resolved(priors=pibo_active(belief, config.prior_strength))
        config = config.with_options_checked([c.kind for c in space.columns])
        self.space = space
        self.config = config
        self.spec = spec
        self.method = config.method
        self.seed = config.seed
        self.acquisition = config.acquisition
        self.meta_tasks = list(meta_tasks)
        self.output_tasks = None if output_tasks is None else [list(t) for t in output_tasks]
        if spec.same_space and not self.meta_tasks:
            raise InvalidSettingError(
                f"method={self.method!r} learns from earlier tasks; pass transfer_from=... (study "
                "names, 'all', a DataFrame or MetaTasks), or use method='gp'."
            )
        if spec.sources == "any-space" and not config.prior_model:
            raise InvalidSettingError(
                f"method={self.method!r} needs a pre-trained prior: pass transfer_from=... "
                "(earlier studies on any search space) or prior_model=... to create_study."
            )
        self.ucb_beta = config.ucb_beta if config.ucb_beta is not None else spec.ucb_beta
        self.first_trial = config.first_trial or spec.first_trial
        self.plateau_rule = (
            spec.plateau_rule if config.plateau_rule is None else config.plateau_rule
        )
        self.stall_rule = spec.stall_rule if config.stall_rule is None else config.stall_rule
        self.cache = cache
        self.state_key = state_key
        self._saved_state: dict | None = None  # what _save_state wrote last
        n_initial = config.n_initial
        if n_initial is None:
            n_initial = (
                default_n_initial(space.dim, config.budget, config.multi_output)
                if spec.initial_design
                else 0
            )
            if spec.initial_design and spec.n_initial is not None:
                n_initial = spec.n_initial
        self.n_initial = n_initial
        self._warm_start: list[dict] = []
        if spec.warm_start:  # the sources' winners replace the Sobol points of the design
            rows = ranked_configurations(self.meta_tasks, n_initial)
            self._warm_start = self.space.decode(rows) if len(rows) else []
        self.prior_strength = (
            default_prior_strength(config.budget)
            if config.prior_strength is None
            else config.prior_strength
        )
        self.belief = belief if pibo_active(belief, self.prior_strength) else None
        self._engine = None

    @property
    def engine(self):
        """The :class:`~headstart._engine.engine.BOEngine` (built on first use)."""
        if self._engine is None:
            if not self.spec.model_based:
                raise InvalidSettingError(
                    f"method={self.method!r} has no model or acquisition function."
                )
            from headstart._engine.engine import BOEngine, DimSpec

            dims = [DimSpec(kind=c.kind, grid=c.grid) for c in self.space.columns]
            context = self._context()
            self._engine = BOEngine(
                dims,
                lambda: self._restored(self.spec.build(context)),
                output_builder=self._output_builder(context),
                acquisition=self.acquisition,
                ucb_beta=self.ucb_beta,
                pi_margin=self.config.pi_margin or 0.0,
                first_rule=self.first_trial,
                candidates=self._candidates(),
                n_first=len(self.meta_tasks) or None,
                plateau_rule=self.plateau_rule,
                stall_rule=self.stall_rule,
            )
        return self._engine

    def _output_builder(self, context: BuildContext) -> Callable[[int], object] | None:
        """Several outputs: output ``j``'s model, told whether it is a constraint (``j`` past
        the objectives); with a transfer method, from its own sources' values, a plain GP where
        no source has that output (a constraint the sources did not record). ``None`` for one
        output."""
        if not self.config.multi_output:
            return None
        import dataclasses

        from headstart._methods import get_method

        k = self.config.n_objectives

        def role(j: int) -> BuildContext:
            return dataclasses.replace(context, constraint=j >= k)

        if self.output_tasks is None:  # (the saved warm-start state is the first output's)
            return lambda j: self.spec.build(role(j))
        gp = get_method("gp")
        plain = dataclasses.replace(
            context, meta_tasks=(), options=gp.options.parse(None, method="gp")
        )

        def build(j: int):
            tasks = self.output_tasks[j] if j < len(self.output_tasks) else []
            if not tasks:
                return gp.build(dataclasses.replace(plain, constraint=j >= k))
            return self.spec.build(dataclasses.replace(role(j), meta_tasks=tuple(tasks)))

        return build

    def _candidates(self) -> np.ndarray | None:
        """The sources' best configurations (encoded), which every acquisition search screens;
        several outputs: each source's feasible Pareto-optimal ones, its knee point first."""
        if not self.spec.same_space or self.spec.warm_start:
            return None
        if self.output_tasks is not None:
            return pareto_candidates(self.output_tasks, self.config.n_objectives)
        return ranked_configurations(self.meta_tasks, N_SOURCE_CANDIDATES)

    def _context(self, map: Callable | None = None) -> BuildContext:
        return BuildContext(
            is_cat=np.array([c.kind == "categorical" for c in self.space.columns]),
            seed=self.seed,
            deterministic=self.config.deterministic,
            meta_tasks=tuple(self.meta_tasks),
            cache=self.cache,
            kinds=tuple(c.kind for c in self.space.columns),
            prior_model=self.prior_model(),
            options=self.config.method_options,
            map=map,
            multi_output=self.config.multi_output,
        )

    @property
    def warm_start_configurations(self) -> list[dict]:
        """``method="warmstart"``: the sources' best configurations the design begins with."""
        return [dict(c) for c in self._warm_start]

    def prior_model(self):
        """The study's MPHD prior, read from the model cache (``None`` for other methods)."""
        if not self.config.prior_model:
            return None
        from headstart.sources._domains import stored_prior_model

        return stored_prior_model(self.cache, self.config.prior_model)

    def prefit(self, map: Callable | None = None) -> None:
        """Fit and cache what all processes of the study share (meta-task GPs), once, here.

        Called before parallel workers start, so they load the fit from the storage instead of
        each fitting it at the same moment; ``map`` spreads a large fit over a Dask cluster.
        """
        if self.spec.prefit is not None:
            self.spec.prefit(self._context(map))

    def _restored(self, surrogate):
        """``surrogate`` with the warm-start state the study saved last (a resumed study then
        suggests what a continuous run would)."""
        if self.cache is not None and self.state_key is not None:
            cached(self.cache, self.state_key, surrogate.load_state, "surrogate state")
        return surrogate

    def _maximized_reference(self) -> np.ndarray | None:
        """The study's ``reference_point`` in the maximize convention of ``values``."""
        ref, directions = self.config.reference_point, self.config.directions
        return None if ref is None or directions is None else to_max(ref, directions)

    def _save_state(self) -> None:
        if self.cache is None or self.state_key is None or not self._engine.built:
            return
        state = self._engine.surrogate.state()
        # unchanged since this strategy wrote it (a neural model between its refits): no write.
        # So a worker whose state did not change no longer overwrites another worker's newer
        # one; an entry deleted meanwhile (clear_cache) returns at the next change.
        if state and state != self._saved_state:
            self.cache.put_cache(self.state_key, "surrogate-state", state)
            self._saved_state = copy.deepcopy(state)  # the surrogate may mutate its own

    def diagnostics(self) -> dict:
        """What the surrogate learned at its last fit (empty before the model is built)."""
        if self._engine is None or not self._engine.built:
            return {}
        return self._engine.surrogate.diagnostics()

    @property
    def kernel_expression(self) -> str | None:
        """The kernel expression the model has (a kernel-search surrogate's ``expression``),
        else a fixed expression its options give, else ``None`` (Matérn, or a search not run
        yet). Every ``ask`` stores it, so it reads the one property rather than the model's
        :meth:`diagnostics` (ScaML-GP's take a Hessian for the weights' standard errors: 29% of
        its ask at 20 trials)."""
        built = self._engine is not None and self._engine.built
        fitted = getattr(self._engine.surrogate, "expression", None) if built else None
        if isinstance(fitted, str):  # (a plug-in model's unrelated attribute is not stored)
            return fitted
        given = (self.config.options or {}).get("kernel")
        return given if given not in (None, "matern", "auto") else None

    def report(self, completed: Sequence[Mapping], values: Sequence[float]) -> dict:
        """The method's report fields (its spec's ``report`` hook) for these completed trials:
        the hook conditions the surrogate on them only if it needs the model."""
        context = ReportContext(
            surrogate=lambda: self.conditioned_surrogate(completed, values),
            names=tuple(c.name for c in self.space.columns),
            build=self._context(),
            warm_start=tuple(self.warm_start_configurations),
        )
        return self.spec.report(context)

    def bo_step(self, n_evaluated: int) -> int:
        """piBO's ``n``: 1 at the first model-based suggestion after the initial design."""
        return max(n_evaluated - self.n_initial + 1, 1)

    def prior_exponent(self, n_evaluated: int) -> float:
        """``beta / n`` for the next model-based suggestion (0 when piBO is off)."""
        if self.belief is None:
            return 0.0
        return self.belief.exponent(self.prior_strength, self.bo_step(n_evaluated))

    def _prior_weight(self, n_evaluated: int):
        if self.belief is None:
            return None
        step = self.bo_step(n_evaluated)
        return self.belief.weight(self.prior_strength, step, self.config.prior_candidate_share)

    def _design_point(self, design_index: int) -> dict:
        if design_index < len(self._warm_start):
            return dict(self._warm_start[design_index])
        if self.belief is not None and self.config.prior_design:
            if design_index == 0:
                return self.space.decode(self.belief.mode())[0]
            rng = np.random.default_rng([self.seed, design_index, 0x9B0])
            return self.space.decode(self.belief.sample(1, rng))[0]
        return self.space.decode(sobol_point(self.space.dim, design_index, self.seed))[0]

    def _encode(self, configs: Sequence[Mapping]) -> np.ndarray:
        return self.space.encode(list(configs)) if len(configs) else np.zeros((0, self.space.dim))

    def conditioned_surrogate(self, completed: Sequence[Mapping], values: Sequence[float]):
        """The surrogate conditioned on ``completed`` / ``values`` (maximize convention)."""
        engine = self.engine
        with limit_threads():  # as the engine's own fits: one thread for small matrices
            engine.surrogate.condition(
                self._encode(completed),
                np.asarray(values, dtype=np.float64),
                np.random.default_rng(0),
            )
        return engine.surrogate

    def criteria(self, completed: Sequence[Mapping], values: Sequence[float]):
        """The plain and the piBO criterion the next suggestion would use (for plots).

        Returns:
            ``(plain, pibo)``: :class:`~headstart._engine.acquisition.Criterion` objects on the
            encoded cube; ``pibo`` is ``None`` when piBO is off.
        """
        engine = self.engine
        X, y = self._encode(completed), np.asarray(values, dtype=np.float64)
        plain = engine.criterion(X, y)
        if self.belief is None:
            return plain, None
        return plain, engine.criterion(X, y, self._prior_weight(len(completed)))

    def batch(self) -> contextlib.AbstractContextManager:
        """Suggestions inside share one model fit on the same completed trials (``ask(n=q)``)."""
        if not self.spec.model_based:
            return contextlib.nullcontext()
        return self.engine.reuse_fit()

    def suggest(
        self,
        completed: Sequence[Mapping],
        values: Sequence[float],
        *,
        design_index: int,
        trial_number: int,
        pending: Sequence[Mapping] = (),
        retry: int = 0,
        diversify: bool = False,
    ) -> dict:
        """Next configuration.

        Args:
            completed: Configurations of completed (and imported) trials.
            values: Their objective values in the *maximize* convention (already sign-flipped);
                with several objectives or constraints an ``n x (k + r)`` array: the ``k``
                maximized objectives, then the ``r`` constraint values (feasible: ``<= 0``).
            design_index: How many suggestions the strategy has made before (Sobol index).
            trial_number: Number of the trial being created (seeds this suggestion).
            pending: Configurations being evaluated right now (e.g. by other workers); the
                engine conditions on them as fantasies (:data:`~headstart._engine.engine.
                PENDING_RULES`).
            retry: How many earlier suggestions for this trial were refused as duplicates of a
                concurrent worker's; each retry draws fresh randomness (a uniform point in the
                initial design).
            diversify: Other workers are asking too: after :data:`MODEL_RETRIES` refused model
                suggestions, a uniform random point instead of the model's (many workers asking
                at once all compute the same best point, and on a discrete space the fantasies
                at the refused points do not move it off its grid cell).
        """
        seed = [self.seed, trial_number] if not retry else [self.seed, trial_number, retry]
        rng = np.random.default_rng(seed)
        if not self.spec.model_based or (diversify and retry > MODEL_RETRIES):
            return self.space.decode(rng.random(self.space.dim))[0]
        if len(completed) < self.n_initial:
            if retry:
                return self.space.decode(rng.random(self.space.dim))[0]
            return self._design_point(design_index)
        values = np.asarray(values, dtype=np.float64)
        if self.config.multi_output:  # one model per objective and per constraint
            x = self.engine.suggest_multi(
                self._encode(completed),
                values if values.ndim == 2 else values.reshape(len(completed), -1),
                self.config.n_objectives,
                rng=rng,
                prior=self._prior_weight(len(completed) + len(pending)),
                pending=self._encode(pending) if len(pending) else None,
                reference=self._maximized_reference(),
            )
            return self.space.decode(x)[0]
        liar = None
        if len(pending) and not len(values):  # nothing completed yet: worst meta-data value
            liar = min(float(t.y_max().min()) for t in self.meta_tasks)
        x = self.engine.suggest(
            self._encode(completed),
            values,
            rng=rng,
            prior=self._prior_weight(len(completed) + len(pending)),
            pending=self._encode(pending) if len(pending) else None,
            liar=liar,
        )
        self._save_state()
        return self.space.decode(x)[0]
