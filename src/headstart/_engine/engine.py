r"""The one BO engine: condition any :class:`~headstart._engine.protocols.Surrogate`, then maximize
the acquisition on the encoded unit cube.

One :meth:`BOEngine.suggest` call

1. cleans the data (drops non-finite rows, snaps integer / categorical columns to their grids)
   and appends the pending points at the worst observed value (the "constant liar" of Ginsbourger
   et al., 2010), so parallel workers are not sent to the same point;
2. with no data and a surrogate whose prior says nothing (``informative_prior = False``), returns a
   uniform point; otherwise conditions the surrogate (:meth:`Surrogate.condition`);
3. maximizes LogEI, EI, PI or UCB (:func:`headstart._engine.optimize.optimize_criterion`,
   preconditioned by the posterior's lengthscales), or draws a Thompson sample
   (:func:`headstart._engine.optimize.thompson_sample`), optionally prior-weighted (piBO). With
   no observation yet there is no incumbent, so the prior's optimistic optimum (UCB) is used, as
   in ScaML-GP's experiments, which start "from scratch without initial samples";
4. returns a point whose integer / categorical entries lie exactly on their grids.

Everything runs in float64 under :func:`headstart._engine.threads.limit_threads`. Targets are
**maximized**; the study flips the sign of minimize studies and nothing else mixes directions.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from headstart._engine.acquisition import UCB_BETA, Criterion, PriorWeight
from headstart._engine.optimize import MixedSpace, optimize_criterion, thompson_sample
from headstart._engine.protocols import Surrogate
from headstart._engine.threads import limit_threads

KINDS = ("continuous", "integer", "categorical")
ACQUISITIONS = ("logei", "ei", "pi", "ucb", "ts")
DEFAULT_SEARCH_LENGTHSCALE = 0.2  # preconditioning when a posterior gives no lengthscales


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


class BOEngine:
    r"""Suggests the next point of a BO loop for any surrogate.

    Args:
        dims: One :class:`DimSpec` per encoded column.
        surrogate: A :class:`~headstart._engine.protocols.Surrogate`, or a callable that builds
            one; it is called once, on first use, under the thread limit (transfer surrogates
            fit their meta part then).
        acquisition: ``"logei"``, ``"ei"``, ``"pi"``, ``"ucb"`` or ``"ts"``.
        ucb_beta: UCB's ``beta`` in ``mu + sqrt(beta) sigma``.

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
    ) -> None:
        if acquisition not in ACQUISITIONS:
            raise ValueError(f"acquisition must be one of {ACQUISITIONS}; got {acquisition!r}.")
        if len(dims) == 0:
            raise ValueError("BOEngine needs at least one column.")
        self.dims = tuple(dims)
        self.acquisition = acquisition
        self.ucb_beta = float(ucb_beta)
        is_cat = np.array([dim.kind == "categorical" for dim in self.dims])
        self._space = MixedSpace(tuple(dim.grid for dim in self.dims), is_cat)
        if hasattr(surrogate, "condition"):
            self._surrogate, self._build = surrogate, None
        else:
            self._surrogate, self._build = None, surrogate

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
        r"""Next point to evaluate.

        The maximized criterion is ``acq(x) * pi(x)^gamma`` (piBO, Hvarfner et al. 2022, Eq. 6),
        in log space; see :mod:`headstart._engine.acquisition`.

        Args:
            train_X: ``n x d`` evaluated points in ``[0, 1]`` (``n`` may be 0).
            train_y: ``n`` values to be *maximized*; non-finite rows are ignored.
            rng: Source of all randomness of this suggestion.
            prior: piBO's ``pi(x)^gamma`` factor, or ``None``.
            pending: ``p x d`` points being evaluated right now; the model sees them at ``liar``.
            liar: Their value; default the worst observed value (required when ``n = 0``).
            q: Points to suggest; only 1 for now.

        Returns:
            ``d`` point in ``[0, 1]``, integer / categorical entries exactly on their grids.

        Raises:
            NotImplementedError: ``q > 1`` (batch suggestions come with fantasies).
        """
        if q != 1:
            raise NotImplementedError("BOEngine.suggest returns one point (q = 1) for now.")
        train_X, train_y = self._with_pending(train_X, train_y, pending, liar)
        train_X, train_y = self._clean(train_X, train_y)
        if len(train_y) == 0 and not self.surrogate.informative_prior:
            return self._space.snap(rng.random((1, len(self.dims))))[0]
        with limit_threads():
            criterion, y_model = self._criterion(train_X, train_y, prior, rng)
            if self.acquisition == "ts" and len(y_model):
                x = thompson_sample(
                    criterion.posterior, self._space, train_X, y_model, rng, criterion
                )
            else:
                ell = criterion.posterior.lengthscales
                if ell is None:
                    ell = np.full(len(self.dims), DEFAULT_SEARCH_LENGTHSCALE)
                x = optimize_criterion(
                    criterion, self._space, train_X, y_model, rng, np.asarray(ell, dtype=float)
                )
        return self._space.snap(x[None, :])[0]

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

    def _with_pending(self, train_X, train_y, pending, liar):
        if pending is None or len(pending) == 0:
            return train_X, train_y
        train_y = np.asarray(train_y, dtype=np.float64).reshape(-1)
        if liar is None:
            if not len(train_y):
                raise ValueError("Pending points without observations need an explicit liar.")
            liar = float(train_y.min())
        pending = np.asarray(pending, dtype=np.float64).reshape(-1, len(self.dims))
        X = np.concatenate(
            [np.asarray(train_X, dtype=np.float64).reshape(-1, len(self.dims)), pending]
        )
        return X, np.concatenate([train_y, np.full(len(pending), liar)])

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

    def _criterion(self, train_X, train_y, prior, rng) -> tuple[Criterion, np.ndarray]:
        posterior, y_model = self.surrogate.condition(train_X, train_y, rng)
        if not len(y_model):
            kind, best_f = "ucb", 0.0
        else:
            kind = "logei" if self.acquisition == "ts" else self.acquisition
            best_f = float(y_model.max())
        return Criterion(posterior, kind, best_f, prior, beta=self.ucb_beta), y_model


__all__ = ["ACQUISITIONS", "BOEngine", "DimSpec"]
