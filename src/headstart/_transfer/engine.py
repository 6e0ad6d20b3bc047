r"""The transfer-learning BO engine: condition a transfer surrogate, then maximize the acquisition.

A *surrogate* (ScaML-GP, RGPE, StackGP, multi-task GP) is built once from the meta-tasks and, on
every :meth:`TransferOptimizer.suggest`, conditioned on the test data; it returns a posterior with
the interface of :class:`headstart._gp.model.ExactGP` and the targets in the posterior's units.
The acquisition search is the single-task engine's (:mod:`headstart._gp.optimize`).

With no test data yet, the posterior is the meta-learned prior. LogEI has no incumbent then, so the
first suggestion maximizes UCB instead (the prior's optimistic optimum), as in ScaML-GP's
experiments, which start "from scratch without initial samples".
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from headstart._gp.acquisition import UCB_BETA, Criterion, PriorWeight
from headstart._gp.engine import DimSpec
from headstart._gp.optimize import MixedSpace, optimize_criterion, thompson_sample
from headstart._gp.threads import limit_threads

DEFAULT_SEARCH_LENGTHSCALE = 0.2  # preconditioning when a surrogate gives no lengthscales


class TransferOptimizer:
    r"""Suggests the next point of a transfer-learning BO loop on the encoded unit cube.

    Args:
        dims: One :class:`~headstart._gp.engine.DimSpec` per encoded column.
        make_surrogate: Called once (on the first suggestion) to build the surrogate; it fits the
            meta-task part then.
        acquisition: ``"ucb"``, ``"logei"``, ``"ei"``, ``"pi"`` or ``"ts"``.
        ucb_beta: UCB's ``beta`` (``mu + sqrt(beta) sigma``).
    """

    def __init__(
        self,
        dims: Sequence[DimSpec],
        make_surrogate: Callable[[], object],
        *,
        acquisition: str = "ucb",
        ucb_beta: float = UCB_BETA,
    ) -> None:
        self.dims = tuple(dims)
        is_cat = np.array([dim.kind == "categorical" for dim in self.dims])
        self._space = MixedSpace(tuple(dim.grid for dim in self.dims), is_cat)
        self._make_surrogate = make_surrogate
        self.acquisition = acquisition
        self.ucb_beta = float(ucb_beta)
        self._surrogate = None

    @property
    def surrogate(self):
        """The surrogate, built on first use."""
        if self._surrogate is None:
            with limit_threads():
                self._surrogate = self._make_surrogate()
        return self._surrogate

    def suggest(
        self,
        train_X: np.ndarray,
        train_y: np.ndarray,
        *,
        rng: np.random.Generator,
        prior: PriorWeight | None = None,
    ) -> np.ndarray:
        r"""Next point to evaluate.

        Args:
            train_X: ``n x d`` evaluated points in ``[0, 1]`` (``n`` may be 0).
            train_y: ``n`` values to be *maximized*; non-finite rows are ignored.
            rng: Source of all randomness of this suggestion.
            prior: piBO's ``pi(x)^gamma`` factor (:class:`~headstart._gp.acquisition.PriorWeight`),
                or ``None``.

        Returns:
            ``d`` point in ``[0, 1]``, integer / categorical entries exactly on their grids.
        """
        d = len(self.dims)
        train_X, train_y = self._clean(train_X, train_y)
        with limit_threads():
            criterion, y_model = self._criterion(train_X, train_y, prior, rng)
            if self.acquisition == "ts" and len(y_model):
                x = thompson_sample(criterion.gp, self._space, train_X, y_model, rng, criterion)
            else:
                ell = getattr(criterion.gp, "lengthscales", None)
                if ell is None:
                    ell = np.full(d, DEFAULT_SEARCH_LENGTHSCALE)
                x = optimize_criterion(
                    criterion, self._space, train_X, y_model, rng, np.asarray(ell, dtype=float)
                )
        return self._space.snap(x[None, :])[0]

    def criterion(
        self, train_X: np.ndarray, train_y: np.ndarray, prior: PriorWeight | None = None
    ) -> Criterion:
        """The criterion :meth:`suggest` would maximize on this data (for plots and diagnostics)."""
        train_X, train_y = self._clean(train_X, train_y)
        with limit_threads():
            return self._criterion(train_X, train_y, prior, np.random.default_rng(0))[0]

    def _clean(self, train_X: np.ndarray, train_y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        d = len(self.dims)
        train_X = np.asarray(train_X, dtype=np.float64).reshape(-1, d)
        train_y = np.asarray(train_y, dtype=np.float64).reshape(-1)
        keep = np.isfinite(train_y) & np.isfinite(train_X).all(axis=1)
        return self._space.snap(train_X[keep]), train_y[keep]

    def _criterion(self, train_X, train_y, prior, rng) -> tuple[Criterion, np.ndarray]:
        posterior, y_model = self.surrogate.condition(train_X, train_y, rng)
        improvement = self.acquisition in ("logei", "ei", "pi")
        kind = self.acquisition if improvement and len(y_model) else "ucb"
        best_f = float(y_model.max()) if len(y_model) else 0.0
        return Criterion(posterior, kind, best_f, prior, beta=self.ucb_beta), y_model


__all__ = ["TransferOptimizer"]
