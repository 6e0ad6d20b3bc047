r"""The one BO engine: condition any :class:`~headstart._engine.protocols.Surrogate`, then maximize
the acquisition on the encoded unit cube.

One :meth:`BOEngine.suggest` call

1. cleans the data (drops non-finite rows, snaps integer / categorical columns to their grids);
2. with no data and a surrogate whose prior says nothing (``informative_prior = False``), returns a
   uniform point; otherwise conditions the surrogate on the *completed* data
   (:meth:`Surrogate.condition`, which fits its hyperparameters);
3. conditions that posterior on the *pending* points (other workers' running trials) as
   **fantasies** at fixed hyperparameters (:data:`PENDING_RULES`): by default at their posterior
   mean (the "Kriging believer" of Ginsbourger et al., 2010, which Optuna's GP sampler also uses),
   so the variance near a running trial collapses and parallel workers are not sent to the same
   point. A posterior offering ``fantasize(X, y)`` does this without a refit (the exact GP extends
   its Cholesky factor); for the others the surrogate is refitted on the data plus the pending
   points at the worst observed value (the "constant liar");
4. maximizes LogEI, EI, PI or UCB (:func:`headstart._engine.optimize.optimize_criterion`,
   preconditioned by the posterior's lengthscales), or draws a Thompson sample
   (:func:`headstart._engine.optimize.thompson_sample`), optionally prior-weighted (piBO). With
   no observation yet there is no incumbent; an informative prior's first point then follows
   ``first_rule`` (:data:`FIRST_RULES`): UCB with ``ucb_beta`` as in ScaML-GP's experiments,
   which start "from scratch without initial samples", the prior mean, the pessimistic
   ``mu - sigma``, or the best of the screened candidates;
5. for a batch (``q > 1``, or ``study.ask(n)`` through :meth:`BOEngine.reuse_fit`), treats the
   chosen point as pending and repeats 3-4 (sequential greedy with fantasies: one hyperparameter
   fit per batch). The batch's own earlier points are fantasized at the worst observed value
   (the constant liar) whatever the rule for other workers' points: they all come from one
   posterior and need the liar's repulsion to spread out. ``benchmarks/pending.py`` measured
   both (``docs/benchmarks/pending.md``): the believer is better for asynchronous workers, the
   liar for synchronous batches;
6. returns points whose integer / categorical entries lie exactly on their grids.

Everything runs in float64 under :func:`headstart._engine.threads.limit_threads`. Targets are
**maximized**; the study flips the sign of minimize studies and nothing else mixes directions.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

import numpy as np

from headstart._engine import ACQUISITIONS, FIRST_RULES
from headstart._engine.acquisition import UCB_BETA, Criterion, PriorWeight
from headstart._engine.optimize import (
    MixedSpace,
    is_duplicate,
    optimize_criterion,
    stalled_incumbent,
    thompson_sample,
)
from headstart._engine.protocols import Surrogate
from headstart._engine.threads import limit_threads

KINDS = ("continuous", "integer", "categorical")
DEFAULT_SEARCH_LENGTHSCALE = 0.2  # preconditioning when a posterior gives no lengthscales
# UCB beta of each first-trial rule
FIRST_BETA = {"mean": 0.0, "lcb": -1.0, "candidates": 0.0, "lcb-winner": -1.0}
PENDING_RULES = ("believer", "liar", "refit")
N_PARETO_STARTS = 4  # with several objectives: other front trials the local search starts from
N_REFERENCE_POINTS = 512  # uniform points whose predicted front widens the EHVI reference
DEFAULT_PENDING_RULE = "believer"
"""How pending points enter the model: ``"believer"`` -- fantasies at the posterior mean, fixed
hyperparameters (the default; see ``docs/benchmarks/pending.md`` for the measurement that chose
it); ``"liar"`` -- fantasies at the worst observed value, fixed hyperparameters; ``"refit"`` --
the constant liar with a refit on the augmented data (headstart <= 0.x; the fallback for
posteriors without ``fantasize``)."""


@dataclass(frozen=True)
class DimSpec:
    r"""One encoded column.

    Args:
        kind: ``"continuous"``, ``"integer"`` or ``"categorical"``.
        grid: Sorted valid encoded values in ``[0, 1]`` (integer and categorical columns).
    """

    kind: str
    grid: np.ndarray | None = None

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"DimSpec.kind must be one of {KINDS}; got {self.kind!r}.")
        if self.kind == "continuous":
            object.__setattr__(self, "grid", None)
            return
        if self.grid is None or len(self.grid) == 0:
            raise ValueError(f"A {self.kind} DimSpec needs a non-empty grid of encoded values.")
        grid = np.sort(np.asarray(self.grid, dtype=np.float64).ravel())
        if grid[0] < 0.0 or grid[-1] > 1.0:
            raise ValueError(f"Grid values must lie in [0, 1]; got [{grid[0]}, {grid[-1]}].")
        object.__setattr__(self, "grid", grid)


def _pareto_starts(
    X: np.ndarray, front_rows: np.ndarray, incumbent: int, rng: np.random.Generator
) -> np.ndarray | None:
    """Up to :data:`N_PARETO_STARTS` rows of ``X`` among ``front_rows`` (the Pareto-optimal
    trials), drawn at random, one per configuration and none equal to the incumbent's: where
    the acquisition search also starts with several objectives (``optimize_criterion``'s
    ``warm_starts``). ``None`` when there is no other front trial."""
    _, first = np.unique(X[front_rows], axis=0, return_index=True)  # one per configuration
    rows = front_rows[np.sort(first)]
    rows = rows[~(X[rows] == X[incumbent]).all(axis=1)]
    size = min(N_PARETO_STARTS, len(rows))
    return X[rng.choice(rows, size=size, replace=False)] if size else None


class BOEngine:
    r"""Suggests the next point of a BO loop for any surrogate.

    Args:
        dims: One :class:`DimSpec` per encoded column.
        surrogate: A :class:`~headstart._engine.protocols.Surrogate`, or a callable that builds
            one; it is called once, on first use, under the thread limit (transfer surrogates
            fit their meta part then).
        acquisition: ``"logei"``, ``"ei"``, ``"pi"``, ``"ucb"`` or ``"ts"``.
        ucb_beta: UCB's ``beta`` in ``mu + sqrt(beta) sigma``.
        pi_margin: PI's target above the incumbent, in standardized units (``"pi"`` only).
        pending_rule: One of :data:`PENDING_RULES`; default :data:`DEFAULT_PENDING_RULE`.
        first_rule: The suggestion before any observation, with nothing pending (informative
            priors only; :data:`FIRST_RULES`): ``"acquisition"`` -- UCB with ``ucb_beta`` on the
            prior; ``"mean"`` -- the prior mean's maximizer; ``"lcb"`` -- the maximizer of the
            pessimistic ``mu - sigma`` (where the sources agree); ``"candidates"`` -- of the
            first ``n_first`` candidates, the one with the highest prior mean (for transfer:
            of the sources' own best configurations, the one the model expects to be best);
            ``"lcb-winner"`` -- ``"lcb"`` first, then, as the second point (after one completed
            or pending one; a pending one as a fantasy), the candidate of the first ``n_first``
            with the highest posterior mean: the prior's cautious choice and the sources'
            best-rated winner both in the first two trials. Without candidates, or with
            ``acquisition="ts"`` (which draws its own points), it is ``"lcb"``.
        candidates: ``c x d`` points the acquisition search always screens (for transfer: the
            sources' best configurations, best first), or ``None``.
        n_first: How many leading rows of ``candidates`` the ``"candidates"`` rule chooses
            among (for transfer: one per source, each source's best); default all.
        plateau_rule: Exact ties between completed trials exclude their neighbourhoods from
            the search (:func:`headstart._engine.optimize.tie_radii`; issue 31).
        stall_rule: When the latest completed trials all sit at the incumbent, the next point
            leaves its neighbourhood (:func:`headstart._engine.optimize.stalled_incumbent`;
            the acquisition search only: Thompson sampling draws its point without it).
        output_builder: :meth:`suggest_multi`'s ``output_builder(j)``: output ``j``'s surrogate
            (output 0 is :attr:`surrogate`); default: every output built like the first.

    Example:
        >>> from headstart._gp import MaternGP
        >>> dims = [DimSpec("continuous"), DimSpec("integer", np.array([0.25, 0.75]))]
        >>> engine = BOEngine(dims, MaternGP(np.array([False, False])))
        >>> X = np.array([[0.1, 0.25], [0.5, 0.75], [0.9, 0.25]])
        >>> x = engine.suggest(X, -np.sum((X - 0.5) ** 2, axis=1), rng=np.random.default_rng(0))
        >>> x.shape, x[1] in (0.25, 0.75)
        ((2,), True)
    """

    def __init__(
        self,
        dims: Sequence[DimSpec],
        surrogate: Surrogate | Callable[[], Surrogate],
        *,
        acquisition: str = "logei",
        ucb_beta: float = UCB_BETA,
        pi_margin: float = 0.0,
        pending_rule: str | None = None,
        first_rule: str = "acquisition",
        candidates: np.ndarray | None = None,
        n_first: int | None = None,
        plateau_rule: bool = False,
        stall_rule: bool = False,
        output_builder: Callable[[int], Surrogate] | None = None,
    ) -> None:
        if acquisition not in ACQUISITIONS:
            raise ValueError(f"acquisition must be one of {ACQUISITIONS}; got {acquisition!r}.")
        pending_rule = DEFAULT_PENDING_RULE if pending_rule is None else pending_rule
        if pending_rule not in PENDING_RULES:
            raise ValueError(f"pending_rule must be one of {PENDING_RULES}; got {pending_rule!r}.")
        if len(dims) == 0:
            raise ValueError("BOEngine needs at least one column.")
        self.dims = tuple(dims)
        self.acquisition = acquisition
        self.ucb_beta = float(ucb_beta)
        self.pi_margin = float(pi_margin)
        self.pending_rule = pending_rule
        is_cat = np.array([dim.kind == "categorical" for dim in self.dims])
        self._space = MixedSpace(tuple(dim.grid for dim in self.dims), is_cat)
        if first_rule not in FIRST_RULES:
            raise ValueError(f"first_rule must be one of {FIRST_RULES}; got {first_rule!r}.")
        self.first_rule = first_rule
        self.candidates = None
        if candidates is not None and len(candidates):
            self.candidates = self._space.snap(
                np.asarray(candidates, dtype=np.float64).reshape(-1, len(self.dims))
            )
        if first_rule == "candidates" and self.candidates is None:
            raise ValueError('first_rule="candidates" needs candidates.')
        if n_first is not None and n_first < 1:
            raise ValueError(f"n_first must be >= 1; got {n_first}.")
        self.n_first = n_first
        self.plateau_rule = bool(plateau_rule)
        self.stall_rule = bool(stall_rule)
        if hasattr(surrogate, "condition"):
            self._surrogate, self._build = surrogate, None
        else:
            self._surrogate, self._build = None, surrogate
        self._reuse: list | None = None  # [(data key, posterior, y_model)] inside reuse_fit()
        self._batch: set[bytes] = set()  # points suggested inside reuse_fit() (a batch)
        self._extra_outputs: list[Surrogate] = []  # suggest_multi's models of outputs 2, 3, ...
        self._output_builder = output_builder

    @property
    def built(self) -> bool:
        """Whether the surrogate exists yet (reading :attr:`surrogate` builds it)."""
        return self._surrogate is not None

    @property
    def surrogate(self) -> Surrogate:
        """The surrogate, built on first use."""
        if self._surrogate is None:
            with limit_threads():
                self._surrogate = self._build()
        return self._surrogate

    @contextlib.contextmanager
    def reuse_fit(self) -> Iterator[None]:
        """Inside, suggestions on the same completed data share one fitted posterior.

        For a batch asked point by point (``study.ask(n=q)``): the first suggestion fits, the
        next ones only add fantasies, as :meth:`suggest` with ``q`` does.
        """
        outer = (self._reuse, self._batch)
        if self._reuse is None:
            self._reuse, self._batch = [], set()
        try:
            yield
        finally:
            self._reuse, self._batch = outer

    def suggest(
        self,
        train_X: np.ndarray,
        train_y: np.ndarray,
        *,
        rng: np.random.Generator,
        prior: PriorWeight | None = None,
        pending: np.ndarray | None = None,
        liar: float | None = None,
        q: int = 1,
    ) -> np.ndarray:
        r"""Next point (or ``q`` points) to evaluate.

        The maximized criterion is ``acq(x) * pi(x)^gamma`` (piBO, Hvarfner et al. 2022, Eq. 6),
        in log space; see :mod:`headstart._engine.acquisition`.

        Args:
            train_X: ``n x d`` evaluated points in ``[0, 1]`` (``n`` may be 0).
            train_y: ``n`` values to be *maximized*; non-finite rows are ignored.
            rng: Source of all randomness of this suggestion.
            prior: piBO's ``pi(x)^gamma`` factor, or ``None``.
            pending: ``p x d`` points being evaluated right now (see :data:`PENDING_RULES`).
            liar: Their value in ``train_y``'s units for the ``"refit"`` rule; default the worst
                observed value (required when ``n = 0``).
            q: Points to suggest, chosen greedily, each seeing the ones before as pending.

        Returns:
            A ``d`` point in ``[0, 1]`` for ``q = 1``, else ``q x d`` points; integer /
            categorical entries exactly on their grids.
        """
        if isinstance(q, bool) or not isinstance(q, int) or q < 1:
            raise ValueError(f"q must be an integer >= 1; got {q!r}.")
        X, y = self._clean(train_X, train_y)
        P = self._clean_pending(pending)
        if len(y) == 0 and not self.surrogate.informative_prior:
            points = self._space.snap(rng.random((q, len(self.dims))))
            return points[0] if q == 1 else points
        points = []
        with limit_threads():
            fitted = None  # the posterior on the completed data, when it is of use
            if self.pending_rule != "refit" or not len(P):
                fitted = self._condition(X, y, rng)
            own = self._batch_mates(P)
            for _ in range(q):
                if fitted is not None and (not len(P) or self._fantasizes(fitted[0])):
                    X_all, crit, y_all = self._fantasy_criterion(*fitted, X, P, own, prior)
                else:  # the constant liar, refitted on the data plus the pending points
                    X_all, y_all = self._with_pending(X, y, P, liar)
                    crit, y_all = self._criterion(X_all, y_all, prior, rng)
                ties = y if self.plateau_rule else None
                x = self._maximize(crit, X_all, y_all, rng, ties, stall=(X, y))
                x = self._space.snap(x[None, :])
                points.append(x[0])
                P, own = np.concatenate([P, x]), np.append(own, True)
        if self._reuse is not None:
            self._batch.update(p.tobytes() for p in points)
        points = np.stack(points)
        return points[0] if q == 1 else points

    def _batch_mates(self, P: np.ndarray) -> np.ndarray:
        """Which pending points this engine suggested inside the current :meth:`reuse_fit`."""
        return np.array([p.tobytes() in self._batch for p in P], dtype=bool)

    def _condition(self, X: np.ndarray, y: np.ndarray, rng: np.random.Generator):
        """``surrogate.condition`` on the completed data (shared inside :meth:`reuse_fit`)."""
        key = (X.tobytes(), y.tobytes())
        if self._reuse:
            last_key, posterior, y_model = self._reuse[0]
            if last_key == key:
                return posterior, y_model
        posterior, y_model = self.surrogate.condition(X, y, rng)
        if self._reuse is not None:
            self._reuse[:] = [(key, posterior, y_model)]
        return posterior, y_model

    def _fantasizes(self, posterior) -> bool:
        return self.pending_rule != "refit" and hasattr(posterior, "fantasize")

    def _fantasy_criterion(self, posterior, y_model, X, P, own, prior):
        """The criterion after conditioning ``posterior`` on fantasies at the pending ``P``.

        Other workers' points (``own`` False) get the pending rule's value; this batch's own
        earlier points get the worst observed value (see the module docstring). Before any
        observation there is nothing to lie with, and every fantasy is at the posterior mean.
        """
        if not len(P):
            return X, self._make_criterion(posterior, y_model, prior, pending=False), y_model
        values = posterior.posterior(P)[0]
        if len(y_model):
            lie = own if self.pending_rule == "believer" else np.ones(len(P), dtype=bool)
            values = np.where(lie, float(y_model.min()), values)
        crit = self._make_criterion(posterior.fantasize(P, values), y_model, prior, pending=True)
        return np.concatenate([X, P]), crit, np.concatenate([y_model, values])

    def _maximize(
        self,
        criterion: Criterion,
        X: np.ndarray,
        y: np.ndarray,
        rng,
        ties: np.ndarray | None,
        stall: tuple[np.ndarray, np.ndarray] | None = None,
        warm_starts: np.ndarray | None = None,
    ) -> np.ndarray:
        """The criterion's maximizer; ``ties``: the completed trials' values (the first rows of
        ``X``), whose exact ties exclude their neighbourhoods (``optimize.tie_radii``), or
        ``None`` (the plateau rule off); ``stall``: the completed trials ``(X, y)`` the stall
        rule looks at (when it is on); ``warm_starts``: more points for the local search to
        start from (:func:`~headstart._engine.optimize.optimize_criterion`)."""
        if self.acquisition == "ts" and len(y):
            return thompson_sample(
                criterion.posterior, self._space, X, y, rng, criterion, tie_values=ties
            )
        if self.first_rule == "candidates" and not len(X):  # the first trial: a known winner
            pool = self.candidates[: self.n_first]
            return pool[int(np.argmax(criterion.value(pool)))]
        if self.first_rule == "lcb-winner" and len(X) == 1 and self.candidates is not None:
            pool = self._space.snap(self.candidates[: self.n_first])  # a snapped copy
            fresh = pool[~is_duplicate(pool, X)]
            if len(fresh):  # the second trial: the winner the model now rates best
                return fresh[int(np.argmax(criterion.posterior.posterior(fresh)[0]))]
        ell = criterion.posterior.lengthscales
        if ell is None:
            ell = np.full(len(self.dims), DEFAULT_SEARCH_LENGTHSCALE)
        ell = np.asarray(ell, dtype=float)
        avoid = stalled_incumbent(*stall, ell) if self.stall_rule and stall is not None else None
        return optimize_criterion(
            criterion, self._space, X, y, rng, ell, self.candidates, tie_values=ties, avoid=avoid,
            warm_starts=warm_starts,
        )  # fmt: skip

    def suggest_multi(
        self,
        train_X: np.ndarray,
        train_Y: np.ndarray,
        n_objectives: int,
        *,
        rng: np.random.Generator,
        prior: PriorWeight | None = None,
        pending: np.ndarray | None = None,
        reference: np.ndarray | None = None,
    ) -> np.ndarray:
        r"""Next point for several objectives and / or constraints (one model per output).

        Every output gets its own surrogate from this engine's builder, conditioned on its own
        column; the criterion is log EHVI (``k >= 2``) or LogEI above the best feasible value
        (``k = 1``), times each constraint's probability of feasibility, in log space
        (:class:`headstart._engine.multi_output.MultiOutputCriterion`), maximized by the same
        search as :meth:`suggest`. Pending points enter every output's posterior as fantasies
        at its mean (the Kriging believer), so the variance near them collapses.

        Args:
            train_X: ``n x d`` evaluated points in ``[0, 1]``.
            train_Y: ``n x (k + r)``: the ``k`` objectives (*maximized*), then the ``r``
                constraint values (feasible when ``<= 0``); rows with a non-finite entry are
                ignored.
            n_objectives: ``k``.
            rng, prior, pending: As in :meth:`suggest`.
            reference: ``k`` EHVI reference values in ``train_Y``'s units (maximized), or
                ``None``: :func:`~headstart._engine.multi_output.infer_reference` on the
                observed and the predicted fronts.

        Returns:
            A ``d`` point in ``[0, 1]``.
        """
        from headstart._engine.multi_output import (
            NO_INCUMBENT,
            MultiOutputCriterion,
            StackedPosterior,
            hypercells,
            infer_reference,
            pareto_mask,
            to_model_units,
        )

        d, k = len(self.dims), int(n_objectives)
        X = np.asarray(train_X, dtype=np.float64).reshape(-1, d)
        Y = np.asarray(train_Y, dtype=np.float64)
        Y = Y.reshape(len(X), -1) if len(X) else Y.reshape(0, Y.shape[-1] if Y.ndim == 2 else k)
        keep = np.isfinite(Y).all(axis=1) & np.isfinite(X).all(axis=1)
        X, Y = self._space.snap(X[keep]), Y[keep]
        if not len(Y):  # the sources' knee point (transfer), else a uniform point
            if self.candidates is not None and len(self.candidates):
                return self.candidates[0].copy()
            return self._space.snap(rng.random((1, d)))[0]
        P = self._clean_pending(pending)
        with limit_threads():
            posteriors, models, believed = [], [], []
            for j, surrogate in enumerate(self._output_surrogates(Y.shape[1])):
                posterior, y_model = surrogate.condition(X, Y[:, j], rng)
                if len(P):
                    believed.append(posterior.posterior(P)[0])
                    if self._fantasizes(posterior):
                        posterior = posterior.fantasize(P, believed[-1])
                posteriors.append(posterior)
                models.append(np.asarray(y_model, dtype=np.float64))
            thresholds = np.array(
                [to_model_units(Y[:, j], models[j], 0.0) for j in range(k, Y.shape[1])]
            )
            feasible = (Y[:, k:] <= 0.0).all(axis=1)
            objectives = np.stack(models[:k], axis=1)[feasible]
            if len(P):  # believed outcomes of the pending points join the incumbents
                B = np.stack(believed, axis=1)
                ok = (B[:, k:] <= thresholds).all(axis=1)
                objectives = np.concatenate([objectives, B[ok, :k]])
            stacked = StackedPosterior(posteriors)
            if k == 1:
                best = float(objectives[:, 0].max()) if len(objectives) else NO_INCUMBENT
                crit = MultiOutputCriterion(stacked, 1, thresholds, best_f=best, prior=prior)
            else:
                cells = None
                if len(objectives):
                    on_front = pareto_mask(objectives)
                    front = objectives[on_front]
                    if reference is not None:  # the user's, in each model's units
                        ref = np.array(
                            [
                                to_model_units(Y[:, j], models[j], reference[j], beyond="range")
                                for j in range(k)
                            ]
                        )
                    else:
                        expected = self._expected_front(stacked, k, thresholds, rng)
                        ref = infer_reference(np.vstack([front, expected]), k)
                    cells = hypercells(front, ref)
                crit = MultiOutputCriterion(stacked, k, thresholds, cells=cells, prior=prior)
            # the search's incumbent start: the best feasible first objective, else the point
            # nearest to feasibility
            violation = np.clip(Y[:, k:], 0.0, None).sum(axis=1)
            start = np.where(feasible, Y[:, 0], -np.inf) if feasible.any() else -violation
            warm = None
            if k > 1 and len(objectives) and feasible.any():  # other front trials start too
                front_rows = np.flatnonzero(feasible)[on_front[: int(feasible.sum())]]
                warm = _pareto_starts(X, front_rows, int(np.argmax(start)), rng)
            if len(P):  # pending points are never proposed again (the search skips duplicates)
                X, start = np.concatenate([X, P]), np.concatenate([start, np.full(len(P), -np.inf)])
            x = self._maximize(crit, X, start, rng, None, warm_starts=warm)
            return self._space.snap(x[None, :])[0]

    def _expected_front(self, stacked, k: int, thresholds: np.ndarray, rng) -> np.ndarray:
        """The Pareto front of the posterior means at :data:`N_REFERENCE_POINTS` uniform points
        predicted feasible: with the observed front, it sets the reference point, so a front
        whose points lie close together (a transfer model's first trials near the sources'
        knee) does not shut out the rest of the front the model expects."""
        from headstart._engine.multi_output import pareto_mask

        pool = self._space.snap(rng.random((N_REFERENCE_POINTS, len(self.dims))))
        mean = stacked.posterior(pool)[0]
        mean = mean[(mean[:, k:] <= thresholds).all(axis=1), :k]
        return mean[pareto_mask(mean)] if len(mean) else mean.reshape(0, k)

    def _output_surrogates(self, n_outputs: int) -> list[Surrogate]:
        """One surrogate per output (the first is :attr:`surrogate`), built on first use."""
        builder = self._output_builder
        if builder is None and self._build is None and n_outputs > 1:
            raise ValueError("Several outputs need a surrogate builder, not one surrogate.")
        outputs = [self.surrogate, *self._extra_outputs]
        with limit_threads():
            for j in range(len(outputs), n_outputs):
                outputs.append(self._build() if builder is None else builder(j))
        self._extra_outputs = outputs[1:]
        return outputs[:n_outputs]

    def criterion(
        self, train_X: np.ndarray, train_y: np.ndarray, prior: PriorWeight | None = None
    ) -> Criterion:
        """The criterion :meth:`suggest` would maximize on this data (for plots and diagnostics).

        Thompson sampling has no deterministic criterion; LogEI stands in for it.
        """
        train_X, train_y = self._clean(train_X, train_y)
        if len(train_y) == 0 and not self.surrogate.informative_prior:
            raise ValueError("The criterion needs at least one finite observation.")
        with limit_threads():
            return self._criterion(train_X, train_y, prior, np.random.default_rng(0))[0]

    def _clean_pending(self, pending: np.ndarray | None) -> np.ndarray:
        d = len(self.dims)
        if pending is None:
            return np.zeros((0, d))
        P = np.asarray(pending, dtype=np.float64).reshape(-1, d)
        return self._space.snap(P[np.isfinite(P).all(axis=1)])

    def _with_pending(self, X, y, P, liar):
        if not len(P):
            return X, y
        if liar is None:
            if not len(y):
                raise ValueError("Pending points without observations need an explicit liar.")
            liar = float(y.min())
        return np.concatenate([X, P]), np.concatenate([y, np.full(len(P), liar)])

    def _clean(self, train_X: np.ndarray, train_y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        d = len(self.dims)
        train_X = np.asarray(train_X, dtype=np.float64).reshape(-1, d)
        train_y = np.asarray(train_y, dtype=np.float64).reshape(-1)
        if len(train_X) != len(train_y):
            raise ValueError(
                f"train_X has {len(train_X)} rows but train_y has {len(train_y)} values."
            )
        keep = np.isfinite(train_y) & np.isfinite(train_X).all(axis=1)
        return self._space.snap(train_X[keep]), train_y[keep]

    def _make_criterion(self, posterior, y_model, prior, *, pending: bool) -> Criterion:
        """The acquisition on ``posterior``; UCB on the prior before any observation."""
        if len(y_model):
            kind = "logei" if self.acquisition == "ts" else self.acquisition
            target = float(y_model.max()) + (self.pi_margin if kind == "pi" else 0.0)
            return Criterion(posterior, kind, target, prior, beta=self.ucb_beta)
        beta = self.ucb_beta if pending else FIRST_BETA.get(self.first_rule, self.ucb_beta)
        return Criterion(posterior, "ucb", 0.0, prior, beta=beta)

    def _criterion(self, train_X, train_y, prior, rng) -> tuple[Criterion, np.ndarray]:
        posterior, y_model = self.surrogate.condition(train_X, train_y, rng)
        return self._make_criterion(posterior, y_model, prior, pending=False), y_model


__all__ = ["ACQUISITIONS", "FIRST_RULES", "PENDING_RULES", "BOEngine", "DimSpec"]
