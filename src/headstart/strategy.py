r"""How the next configuration is chosen: an initial design, then the model-based method.

The initial design is a scrambled Sobol sequence (Owen scrambling, seeded by the study's seed):
the k-th design point is the k-th point of that sequence, so suggestions are reproducible across
processes and restarts. After ``n_initial`` completed (or imported) trials, ``method="gp"`` asks
the GP engine (:mod:`headstart._gp`); ``method="random"`` keeps sampling uniformly. The transfer
methods (``"scaml"``, ``"rgpe"``, ``"stackgp"``, ``"mtgp"``) ask :mod:`headstart._transfer` and
need no initial design by default: their first suggestion already uses the meta-data.

With a user belief (parameter priors or a joint density, :mod:`headstart.pibo`), every
model-based suggestion maximizes piBO's ``alpha(x) * pi(x)^(beta / n)``, ``n = 1`` at the first
step after the initial design, and the initial design starts at the belief's mode followed by
draws from the belief (Alg. 1 of Hvarfner et al. 2022) instead of Sobol points.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence

import numpy as np
from scipy.stats import qmc

from headstart.exceptions import InvalidSettingError
from headstart.pibo import (
    DEFAULT_CANDIDATE_SHARE,
    UserBelief,
    default_prior_strength,
    pibo_active,
)
from headstart.space import SearchSpace

TRANSFER_METHODS = ("scaml", "rgpe", "stackgp", "mtgp")
METHODS = ("gp", "random", *TRANSFER_METHODS)
ACQUISITIONS = ("logei", "ei", "pi", "ucb", "ts")
TRANSFER_UCB_BETA = 9.0  # ScaML-GP's experiments: UCB with beta^(1/2) = 3 for every method


def default_acquisition(method: str, priors: bool = False) -> str:
    """``"ucb"`` for transfer methods (as in ScaML-GP's experiments); ``"ei"`` with active
    priors (piBO's EI, Eq. 6 of Hvarfner et al. 2022); else ``"logei"``.

    With priors, plain EI matched LogEI under strong and weak priors and recovered faster from
    wrong ones (final regret 1.5x vs 2.0x vanilla GP-BO's on Branin and 1.4x vs 2.1x on
    Hartmann-6, 20 seeds; docs/benchmarks/pibo.md): EI's exact zeros in explored regions stop a
    wrong prior from pulling the search back, which LogEI's finite log values do not.
    """
    if method in TRANSFER_METHODS:
        return "ucb"
    return "ei" if priors else "logei"


def default_ucb_beta(method: str) -> float:
    """UCB's ``beta``: 9 for transfer methods (ScaML-GP, Sec. 5), else 2."""
    from headstart._gp.acquisition import UCB_BETA

    return TRANSFER_UCB_BETA if method in TRANSFER_METHODS else UCB_BETA


def default_n_initial(dim: int, budget: int | None) -> int:
    """``min(2 d + 1, budget / 5)`` (at least 1); ``2 d + 1`` when the budget is unknown."""
    n = 2 * dim + 1
    if budget is not None:
        n = min(n, budget // 5)
    return max(n, 1)


def sobol_point(dim: int, index: int, seed: int) -> np.ndarray:
    """The ``index``-th point of a scrambled Sobol sequence in ``[0, 1]^dim``."""
    engine = qmc.Sobol(dim, scramble=True, seed=seed)
    if index:
        engine.fast_forward(index)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # balance warnings are about n != 2^m; one point is fine
        return engine.random(1)[0]


class Strategy:
    r"""Turns a study's history into the next configuration.

    Args:
        space: The study's search space.
        method: ``"gp"`` (GP-BO with the fast engine) or ``"random"``.
        seed: Seed of the Sobol design and of every suggestion.
        n_initial: Size of the initial design; ``None`` for :func:`default_n_initial`.
        budget: Planned number of trials, used for the default ``n_initial``.
        acquisition: ``"logei"``, ``"ei"``, ``"pi"``, ``"ucb"`` or ``"ts"`` (Thompson sampling);
            ``None`` for :func:`default_acquisition`.
        deterministic: The objective is noise-free; the GP's noise is fixed at a tiny value.
        meta_tasks: Earlier tasks (:class:`headstart.sources.MetaTask`) for transfer methods.
        ucb_beta: UCB's ``beta``; ``None`` for :func:`default_ucb_beta`.
        cache: A storage whose model cache keeps fitted meta-task GPs across studies.
        belief: The user's belief (:class:`headstart.pibo.UserBelief`); piBO is on when it is
            not flat and ``prior_strength > 0``.
        prior_strength: piBO's ``beta``; ``None`` for ``budget / 10`` (10 without a budget).
        prior_design: Start the initial design at the belief's mode, then draw from the belief.
        prior_candidate_share: Share of the acquisition search's screening points drawn from
            the belief (the rest are Sobol points).
        kernel: The GP's kernel: ``"matern"`` (Matérn-5/2 ARD, the fast default), ``"auto"``
            (searched by BOSOT on the study's data and re-searched as it grows) or a kernel
            expression such as ``"SE[0] * SE[1] + LIN[0]"`` (``[i]`` = i-th parameter).
        kernel_search: Options of ``kernel="auto"``
            (:class:`headstart.kernels.engine.KernelSearchSettings`).
    """

    def __init__(
        self,
        space: SearchSpace,
        *,
        method: str = "gp",
        seed: int = 0,
        n_initial: int | None = None,
        budget: int | None = None,
        acquisition: str | None = None,
        deterministic: bool = False,
        meta_tasks: Sequence = (),
        ucb_beta: float | None = None,
        cache=None,
        belief: UserBelief | None = None,
        prior_strength: float | None = None,
        prior_design: bool = True,
        prior_candidate_share: float = DEFAULT_CANDIDATE_SHARE,
        kernel: str = "matern",
        kernel_search: Mapping | None = None,
    ) -> None:
        if method not in METHODS:
            raise InvalidSettingError(f"method must be one of {METHODS}; got {method!r}.")
        acquisition = acquisition or default_acquisition(
            method, pibo_active(belief, prior_strength)
        )
        if acquisition not in ACQUISITIONS:
            raise InvalidSettingError(
                f"acquisition must be one of {ACQUISITIONS}; got {acquisition!r}."
            )
        self.space = space
        self.method = method
        self.seed = seed
        self.acquisition = acquisition
        self.deterministic = deterministic
        self.meta_tasks = list(meta_tasks)
        self.is_transfer = method in TRANSFER_METHODS
        if self.is_transfer and not self.meta_tasks:
            raise InvalidSettingError(
                f"method={method!r} learns from earlier tasks; pass transfer_from=... (study "
                "names, 'all', a DataFrame or MetaTasks), or use method='gp'."
            )
        self.ucb_beta = float(ucb_beta) if ucb_beta is not None else default_ucb_beta(method)
        self.cache = cache
        if n_initial is None:
            n_initial = 0 if self.is_transfer else default_n_initial(space.dim, budget)
        self.n_initial = n_initial
        self.prior_strength = (
            default_prior_strength(budget) if prior_strength is None else float(prior_strength)
        )
        self.belief = belief if pibo_active(belief, self.prior_strength) else None
        self.prior_design = prior_design
        self.prior_candidate_share = prior_candidate_share
        self.kernel = kernel
        self.kernel_search = kernel_search
        if kernel != "matern":
            from headstart.kernels.engine import KernelSearchSettings, check_kernel

            if method != "gp":
                raise InvalidSettingError(
                    f"kernel={kernel!r} needs method='gp'; method={method!r} uses its own model."
                )
            self.kernel = check_kernel(kernel, [c.kind for c in space.columns])
            self._kernel_settings = KernelSearchSettings.from_mapping(kernel_search)
        self._engine = None

    @property
    def kernel_expression(self) -> str | None:
        """The grammar kernel the GP uses now (``None`` for Matérn or before the first fit)."""
        if self.kernel == "matern":
            return None
        if self._engine is None:
            return None if self.kernel == "auto" else self.kernel
        return self._engine.expression

    def bo_step(self, n_evaluated: int) -> int:
        """piBO's ``n``: 1 at the first model-based suggestion after the initial design."""
        return max(n_evaluated - self.n_initial + 1, 1)

    def prior_exponent(self, n_evaluated: int) -> float:
        """``beta / n`` for the next model-based suggestion (0 when piBO is off)."""
        if self.belief is None:
            return 0.0
        return self.belief.exponent(self.prior_strength, self.bo_step(n_evaluated))

    def _design_point(self, design_index: int) -> dict:
        if self.belief is not None and self.prior_design:
            if design_index == 0:
                return self.space.decode(self.belief.mode())[0]
            rng = np.random.default_rng([self.seed, design_index, 0x9B0])
            return self.space.decode(self.belief.sample(1, rng))[0]
        return self.space.decode(sobol_point(self.space.dim, design_index, self.seed))[0]

    def _gp_engine(self):
        if self._engine is None:
            from headstart._gp import DimSpec, GPOptimizer

            dims = [DimSpec(kind=c.kind, grid=c.grid) for c in self.space.columns]
            engine_class, grammar_kernel = GPOptimizer, {}
            if self.kernel != "matern":
                from headstart.kernels.engine import KernelSearchOptimizer

                engine_class = KernelSearchOptimizer
                grammar_kernel = {"kernel": self.kernel, "settings": self._kernel_settings}
            self._engine = engine_class(
                dims,
                acquisition=self.acquisition,
                seed=self.seed,
                deterministic=self.deterministic,
                ucb_beta=self.ucb_beta,
                **grammar_kernel,
            )
        return self._engine

    def _transfer_engine(self):
        if self._engine is None:
            from headstart._gp import DimSpec
            from headstart._transfer.engine import TransferOptimizer
            from headstart._transfer.registry import make_surrogate

            dims = [DimSpec(kind=c.kind, grid=c.grid) for c in self.space.columns]
            is_cat = np.array([c.kind == "categorical" for c in self.space.columns])

            def build():
                return make_surrogate(
                    self.method,
                    self.meta_tasks,
                    is_cat,
                    seed=self.seed,
                    deterministic=self.deterministic,
                    cache=self.cache,
                )

            self._engine = TransferOptimizer(
                dims, build, acquisition=self.acquisition, ucb_beta=self.ucb_beta
            )
        return self._engine

    def transfer_surrogate(self, completed: Sequence[Mapping], values: Sequence[float]):
        """The transfer surrogate conditioned on ``completed`` / ``values`` (maximize convention)."""
        engine = self._transfer_engine()
        X = self.space.encode(list(completed)) if len(completed) else np.zeros((0, self.space.dim))
        engine.surrogate.condition(
            X, np.asarray(values, dtype=np.float64), np.random.default_rng(0)
        )
        return engine.surrogate

    def criteria(self, completed: Sequence[Mapping], values: Sequence[float]):
        """The plain and the piBO criterion the next suggestion would use (for plots).

        Returns:
            ``(plain, pibo)``: :class:`~headstart._gp.acquisition.Criterion` objects on the
            encoded cube; ``pibo`` is ``None`` when piBO is off.
        """
        if self.method == "random":
            raise InvalidSettingError("method='random' has no acquisition function to show.")
        engine = self._transfer_engine() if self.is_transfer else self._gp_engine()
        X = self.space.encode(list(completed)) if len(completed) else np.zeros((0, self.space.dim))
        y = np.asarray(values, dtype=np.float64)
        plain = engine.criterion(X, y)
        if self.belief is None:
            return plain, None
        step = self.bo_step(len(completed))
        prior = self.belief.weight(self.prior_strength, step, self.prior_candidate_share)
        return plain, engine.criterion(X, y, prior)

    def suggest(
        self,
        completed: Sequence[Mapping],
        values: Sequence[float],
        *,
        design_index: int,
        trial_number: int,
        pending: Sequence[Mapping] = (),
    ) -> dict:
        """Next configuration.

        Args:
            completed: Configurations of completed (and imported) trials.
            values: Their objective values in the *maximize* convention (already sign-flipped).
            design_index: How many suggestions the strategy has made before (Sobol index).
            trial_number: Number of the trial being created (seeds this suggestion).
            pending: Configurations being evaluated right now (e.g. by other workers). The model
                sees them with the worst observed value (the "constant liar" of Ginsbourger et
                al., 2010), so parallel workers are not sent to the same point.
        """
        rng = np.random.default_rng([self.seed, trial_number])
        if self.method == "random":
            return self.space.decode(rng.random(self.space.dim))[0]
        if len(completed) < self.n_initial:
            return self._design_point(design_index)
        train_X = self.space.encode(list(completed) + list(pending))
        train_y = np.asarray(values, dtype=np.float64)
        if len(pending):
            if len(train_y):
                liar = train_y.min()
            else:  # transfer, nothing completed yet: the worst value seen in the meta-data
                liar = min(float(t.y_max().min()) for t in self.meta_tasks)
            train_y = np.concatenate([train_y, np.full(len(pending), liar)])
        engine = self._transfer_engine() if self.is_transfer else self._gp_engine()
        prior = None
        if self.belief is not None:
            step = self.bo_step(len(completed) + len(pending))
            prior = self.belief.weight(self.prior_strength, step, self.prior_candidate_share)
        x = engine.suggest(train_X, train_y, rng=rng, prior=prior)
        return self.space.decode(x)[0]
