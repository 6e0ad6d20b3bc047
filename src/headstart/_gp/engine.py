r"""The GP-BO engine behind ``Strategy(method="gp")``: fit, then maximize the acquisition.

One :meth:`GPOptimizer.suggest` call

1. standardizes ``y`` (mean 0, std 1; a constant ``y`` gets std 1);
2. fits the GP hyperparameters by MAP (:func:`headstart._gp.model.fit_map`), *warm-started* from
   the previous call's fit (Optuna's ``GPSampler`` does the same). Every
   :data:`DEFAULT_RESTART_EVERY` new points -- and on the first call, or if the warm fit fails --
   it also fits from the default starting point and keeps the better MAP objective, so a stale
   local optimum cannot persist;
3. maximizes LogEI, EI, PI or UCB (:func:`headstart._gp.optimize.optimize_criterion`), or draws a Thompson
   sample (:func:`headstart._gp.optimize.thompson_sample`), optionally prior-weighted (piBO);
4. returns a point whose integer / categorical entries lie exactly on their grids.

Everything runs in float64 under :func:`headstart._gp.threads.limit_threads`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

from headstart._gp.acquisition import UCB_BETA, Criterion, PriorWeight
from headstart._gp.model import ExactGP, GPParams, fit_map
from headstart._gp.optimize import MixedSpace, optimize_criterion, thompson_sample
from headstart._gp.threads import limit_threads
from headstart.exceptions import ModelFittingError

KINDS = ("continuous", "integer", "categorical")
ACQUISITIONS = ("logei", "ei", "pi", "ucb", "ts")
DEFAULT_RESTART_EVERY = 5  # refit from defaults after this many new points (cheap insurance)


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


@dataclass(frozen=True)
class FitSummary:
    """Hyperparameters of the last fit (for plots and diagnostics)."""

    lengthscales: np.ndarray
    outputscale: float
    noise: float
    mll: float
    """Log marginal likelihood of the standardized targets."""
    map_objective: float
    """Minimized ``-(log p(y | theta) + log p(theta))``."""
    n_train: int
    warm_started: bool


class GPOptimizer:
    r"""Suggests the next point of a GP-BO loop on the encoded unit cube.

    Args:
        dims: One :class:`DimSpec` per encoded column.
        acquisition: ``"logei"`` (default), ``"ei"``, ``"pi"``, ``"ucb"`` or ``"ts"``.
        seed: Kept for reproducibility bookkeeping; randomness comes from ``suggest``'s ``rng``.
        deterministic: The objective is noise-free: fix the noise variance at its minimum
            (1e-6 of the standardized variance) instead of fitting it. On Hartmann-6 (budget 50,
            40 seeds) this lowered the mean final regret from 0.247 to 0.155.
        ucb_beta: UCB's ``beta`` in ``mu + sqrt(beta) sigma`` (default 2).

    Example:
        >>> opt = GPOptimizer([DimSpec("continuous"), DimSpec("integer", np.array([0.25, 0.75]))])
        >>> X = np.array([[0.1, 0.25], [0.5, 0.75], [0.9, 0.25]])
        >>> x = opt.suggest(X, -np.sum((X - 0.5) ** 2, axis=1), rng=np.random.default_rng(0))
        >>> x.shape, x[1] in (0.25, 0.75)
        ((2,), True)
    """

    def __init__(
        self,
        dims: Sequence[DimSpec],
        *,
        acquisition: str = "logei",
        seed: int = 0,
        deterministic: bool = False,
        ucb_beta: float = UCB_BETA,
    ) -> None:
        if acquisition not in ACQUISITIONS:
            raise ValueError(f"acquisition must be one of {ACQUISITIONS}; got {acquisition!r}.")
        if len(dims) == 0:
            raise ValueError("GPOptimizer needs at least one column.")
        self.dims = tuple(dims)
        self.acquisition = acquisition
        self.seed = seed
        self.deterministic = deterministic
        self.ucb_beta = float(ucb_beta)
        is_cat = np.array([dim.kind == "categorical" for dim in self.dims])
        self._space = MixedSpace(tuple(dim.grid for dim in self.dims), is_cat)
        self._is_cat = torch.from_numpy(is_cat)
        self._params: GPParams | None = None
        self._n_at_default_fit = 0
        self._last_fit: FitSummary | None = None

    @property
    def last_fit(self) -> FitSummary | None:
        """Summary of the most recent fit (``None`` before the first :meth:`suggest`)."""
        return self._last_fit

    def suggest(
        self,
        train_X: np.ndarray,
        train_y: np.ndarray,
        *,
        rng: np.random.Generator,
        prior: PriorWeight | None = None,
    ) -> np.ndarray:
        r"""Next point to evaluate.

        The maximized criterion is ``acq(x) * pi(x)^gamma`` (piBO, Hvarfner et al. 2022, Eq. 6),
        in log space; see :mod:`headstart._gp.acquisition`.

        Args:
            train_X: ``n x d`` evaluated points in ``[0, 1]``.
            train_y: ``n`` values to be *maximized*; non-finite rows are ignored.
            rng: Source of all randomness of this suggestion.
            prior: piBO's ``pi(x)^gamma`` factor (:class:`~headstart._gp.acquisition.PriorWeight`),
                or ``None``.

        Returns:
            ``d`` point in ``[0, 1]``, integer / categorical entries exactly on their grids.
        """
        d = len(self.dims)
        train_X, train_y = self._clean(train_X, train_y)
        if len(train_y) == 0:
            return self._space.snap(rng.random((1, d)))[0]
        with limit_threads():
            criterion, y = self._criterion(train_X, train_y, prior)
            if self.acquisition == "ts":
                x = thompson_sample(criterion.gp, self._space, train_X, y, rng, criterion)
            else:
                ell = criterion.gp.params.lengthscales
                x = optimize_criterion(criterion, self._space, train_X, y, rng, ell)
        return self._space.snap(x[None, :])[0]

    def criterion(
        self, train_X: np.ndarray, train_y: np.ndarray, prior: PriorWeight | None = None
    ) -> Criterion:
        """The criterion :meth:`suggest` would maximize on this data (for plots and diagnostics).

        Thompson sampling has no deterministic criterion; LogEI stands in for it.
        """
        train_X, train_y = self._clean(train_X, train_y)
        if len(train_y) == 0:
            raise ValueError("The criterion needs at least one finite observation.")
        with limit_threads():
            return self._criterion(train_X, train_y, prior)[0]

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

    def _criterion(
        self, train_X: np.ndarray, train_y: np.ndarray, prior: PriorWeight | None
    ) -> tuple[Criterion, np.ndarray]:
        std = train_y.std()
        y = (train_y - train_y.mean()) / (std if std > 0 else 1.0)
        params = self._fit(torch.from_numpy(train_X), torch.from_numpy(y))
        gp = ExactGP(train_X, y, self._space.is_cat, params)
        self._last_fit = FitSummary(
            lengthscales=params.lengthscales,
            outputscale=params.outputscale,
            noise=params.noise,
            mll=gp.mll,
            map_objective=self._map_objective,
            n_train=len(y),
            warm_started=self._warm_started,
        )
        kind = "logei" if self.acquisition == "ts" else self.acquisition
        return Criterion(gp, kind, float(y.max()), prior, beta=self.ucb_beta), y

    def _fit(self, X: torch.Tensor, y: torch.Tensor) -> GPParams:
        n, d = X.shape
        candidates: list[tuple[float, GPParams, bool]] = []
        if self._params is not None and len(self._params.inv_sq_lengthscales) == d:
            try:
                params, objective = fit_map(
                    X, y, self._is_cat, self._params, deterministic=self.deterministic
                )
                candidates.append((objective, params, True))
            except ModelFittingError:
                pass
        if not candidates or n - self._n_at_default_fit >= DEFAULT_RESTART_EVERY:
            try:
                params, objective = fit_map(
                    X, y, self._is_cat, GPParams.default(d), deterministic=self.deterministic
                )
                candidates.append((objective, params, False))
                self._n_at_default_fit = n
            except ModelFittingError:
                if not candidates:
                    raise
        objective, params, warm = min(candidates, key=lambda c: c[0])
        self._params, self._map_objective, self._warm_started = params, objective, warm
        return params


__all__ = ["DimSpec", "FitSummary", "GPOptimizer"]
