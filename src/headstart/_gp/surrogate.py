r"""The default surrogate: the exact Matérn-5/2 GP with warm-started MAP hyperparameters.

One :meth:`MaternGP.condition` call

1. standardizes ``y`` (:func:`headstart._engine.numerics.standardize`);
2. fits the GP hyperparameters by MAP (:func:`headstart._gp.model.fit_map`) under the hyperprior
   object it was given (:mod:`headstart._gp.prior`), *warm-started* from the previous call's fit
   (Optuna's ``GPSampler`` does the same). On the first call, if the warm fit fails, and then on
   a geometric schedule -- after :data:`DEFAULT_RESTART_EVERY` new points or a share
   :data:`DEFAULT_RESTART_GROWTH` of the points at the last default fit, whichever is more -- it
   also fits from the default starting point and keeps the better MAP objective, so a stale local
   optimum cannot persist. The schedule makes these insurance fits ``O(log n)`` over a study (21
   up to n = 1,000 instead of 200 every 5 points), once the fit has settled (issue 18);
3. returns the :class:`~headstart._gp.model.ExactGP` posterior and the standardized targets.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
import torch

from headstart._engine.numerics import check_training_data, standardize
from headstart._gp.model import ExactGP, GPParams, fit_map
from headstart._gp.prior import DEFAULT_HYPERPRIOR, HyperPrior
from headstart.exceptions import ModelFittingError

DEFAULT_RESTART_EVERY = 5  # refit from defaults after at least this many new points ...
DEFAULT_RESTART_GROWTH = 0.25  # ... and at least this share of the points at the last one


def default_refit_due(n: int, n_at_default_fit: int) -> bool:
    """Whether ``condition`` on ``n`` points also fits from the defaults (the schedule above)."""
    gap = max(DEFAULT_RESTART_EVERY, int(np.ceil(DEFAULT_RESTART_GROWTH * n_at_default_fit)))
    return n - n_at_default_fit >= gap


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


class MaternGP:
    r"""Exact GP surrogate (Matérn-5/2 ARD, Hamming distance on categoricals).

    Args:
        is_cat: ``d`` mask of categorical columns.
        deterministic: The objective is noise-free: fix the noise variance at its minimum
            (1e-6 of the standardized variance) instead of fitting it. On Hartmann-6 (budget 50,
            40 seeds) this lowered the mean final regret from 0.247 to 0.155.
        hyperprior: The hyperprior object (:class:`headstart._gp.prior.HyperPrior`).
    """

    informative_prior = False

    def __init__(
        self,
        is_cat: np.ndarray,
        *,
        deterministic: bool = False,
        hyperprior: HyperPrior = DEFAULT_HYPERPRIOR,
    ) -> None:
        self.is_cat = np.asarray(is_cat, dtype=bool)
        self.deterministic = deterministic
        self.hyperprior = hyperprior
        self._is_cat_t = torch.from_numpy(self.is_cat)
        self._params: GPParams | None = None
        self._n_at_default_fit = 0
        self.last_fit: FitSummary | None = None

    def condition(
        self, train_X: np.ndarray, train_y: np.ndarray, rng: np.random.Generator
    ) -> tuple[ExactGP, np.ndarray]:
        """Standardize, fit (warm-started MAP) and return ``(ExactGP, standardized y)``."""
        check_training_data(train_X, train_y)
        y = standardize(train_y)[0]
        params, objective, warm = self._fit(torch.from_numpy(train_X), torch.from_numpy(y))
        gp = ExactGP(train_X, y, self.is_cat, params)
        self.last_fit = FitSummary(
            lengthscales=params.lengthscales,
            outputscale=params.outputscale,
            noise=params.noise,
            mll=gp.mll,
            map_objective=objective,
            n_train=len(y),
            warm_started=warm,
        )
        return gp, y

    def _fit(self, X: torch.Tensor, y: torch.Tensor) -> tuple[GPParams, float, bool]:
        n, d = X.shape
        options = {"deterministic": self.deterministic, "prior": self.hyperprior}
        candidates: list[tuple[float, GPParams, bool]] = []
        if self._params is not None and len(self._params.inv_sq_lengthscales) == d:
            try:
                params, objective = fit_map(X, y, self._is_cat_t, self._params, **options)
                candidates.append((objective, params, True))
            except ModelFittingError:
                pass
        if not candidates or default_refit_due(n, self._n_at_default_fit):
            try:
                params, objective = fit_map(X, y, self._is_cat_t, self._initial(d), **options)
                candidates.append((objective, params, False))
                self._n_at_default_fit = n
            except ModelFittingError:
                if not candidates:
                    raise
        objective, params, warm = min(candidates, key=lambda c: c[0])
        self._params = params
        return params, objective, warm

    def _initial(self, d: int) -> GPParams:
        return GPParams(*self.hyperprior.initial(d))

    def state(self) -> dict[str, Any]:
        """The last fitted hyperparameters (raw log form) and when defaults were last tried."""
        if self._params is None:
            return {}
        return {"raw": self._params.to_raw().tolist(), "n_at_default_fit": self._n_at_default_fit}

    def load_state(self, state: dict[str, Any]) -> None:
        """Restore :meth:`state`; a damaged one (non-numbers, log-parameters beyond +-50, i.e.
        lengthscales or variances outside e^+-50) raises ``ValueError`` (the caller drops it)."""
        raw = state.get("raw")
        if raw is not None and len(raw) == len(self.is_cat) + 2:
            raw = np.asarray(raw, dtype=np.float64)
            if not (np.isfinite(raw).all() and np.abs(raw).max() <= 50.0):
                raise ValueError(f"GP state holds log-parameters {raw.tolist()} (need |x| <= 50)")
            self._params = GPParams.from_raw(raw)
            self._n_at_default_fit = int(state.get("n_at_default_fit", 0))

    def diagnostics(self) -> dict[str, Any]:
        """The last :class:`FitSummary` as a dict (empty before the first fit), and the
        hyperprior's JSON form under ``"hyperprior"``."""
        fit = {} if self.last_fit is None else asdict(self.last_fit)
        return {**fit, "hyperprior": self.hyperprior.to_json()}


__all__ = [
    "DEFAULT_RESTART_EVERY",
    "DEFAULT_RESTART_GROWTH",
    "FitSummary",
    "MaternGP",
    "default_refit_due",
]
