r"""How the next configuration is chosen: an initial design, then the model-based method.

The initial design is a scrambled Sobol sequence (Owen scrambling, seeded by the study's seed):
the k-th design point is the k-th point of that sequence, so suggestions are reproducible across
processes and restarts. After ``n_initial`` completed (or imported) trials, ``method="gp"`` asks
the GP engine (:mod:`headstart._gp`); ``method="random"`` keeps sampling uniformly.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence

import numpy as np
from scipy.stats import qmc

from headstart.exceptions import InvalidSettingError
from headstart.space import SearchSpace

METHODS = ("gp", "random")
ACQUISITIONS = ("logei", "ucb", "ts")


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
        acquisition: ``"logei"`` (default), ``"ucb"`` or ``"ts"`` (Thompson sampling).
        deterministic: The objective is noise-free; the GP's noise is fixed at a tiny value.
    """

    def __init__(
        self,
        space: SearchSpace,
        *,
        method: str = "gp",
        seed: int = 0,
        n_initial: int | None = None,
        budget: int | None = None,
        acquisition: str = "logei",
        deterministic: bool = False,
    ) -> None:
        if method not in METHODS:
            raise InvalidSettingError(f"method must be one of {METHODS}; got {method!r}.")
        if acquisition not in ACQUISITIONS:
            raise InvalidSettingError(
                f"acquisition must be one of {ACQUISITIONS}; got {acquisition!r}."
            )
        self.space = space
        self.method = method
        self.seed = seed
        self.acquisition = acquisition
        self.deterministic = deterministic
        self.n_initial = (
            n_initial if n_initial is not None else default_n_initial(space.dim, budget)
        )
        self._engine = None

    def _gp_engine(self):
        if self._engine is None:
            from headstart._gp import DimSpec, GPOptimizer

            dims = [DimSpec(kind=c.kind, grid=c.grid) for c in self.space.columns]
            self._engine = GPOptimizer(
                dims,
                acquisition=self.acquisition,
                seed=self.seed,
                deterministic=self.deterministic,
            )
        return self._engine

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
            return self.space.decode(sobol_point(self.space.dim, design_index, self.seed))[0]
        train_X = self.space.encode(list(completed) + list(pending))
        train_y = np.asarray(values, dtype=np.float64)
        if len(pending):
            train_y = np.concatenate([train_y, np.full(len(pending), train_y.min())])
        x = self._gp_engine().suggest(train_X, train_y, rng=rng)
        return self.space.decode(x)[0]
