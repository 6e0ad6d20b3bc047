r"""Many independent L-BFGS-B runs that share batched function evaluations.

Each start keeps its own L-BFGS-B state (its own inverse-Hessian approximation and its own
convergence test), but whenever the runs ask for ``f(x)``, their points are collected and
evaluated in one batched call. This is the "decoupled optimizer, batched evaluation" scheme of
Optuna's ``_gp/batched_lbfgsb.py`` (arXiv 2511.13625): a multi-start search costs about as many
batched evaluations as its slowest start needs, instead of the sum over starts, and unlike
minimizing the *sum* of the objectives, no start slows another's convergence.

The runs are driven here by calling SciPy's L-BFGS-B step routine (``scipy.optimize._lbfgsb.
setulb``, SciPy >= 1.15) directly, in the loop that ``scipy.optimize.minimize(method="L-BFGS-B")``
runs, so every start takes exactly SciPy's steps. Driving it directly saves what the public
wrapper costs per evaluation (its ``ScalarFunction`` bookkeeping, and the coroutine switches that
batching through it needed): about 50 us per start and evaluation, which was a quarter of a
suggestion with ABRAC's cheap posterior at n = 500 (issue 32). If the step routine's signature is
not the one this module knows (another SciPy), the starts run one after another through the
public API instead: the same steps, more calls.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import scipy.optimize

try:
    from scipy.optimize import _lbfgsb
except ImportError:  # pragma: no cover - a SciPy without the module
    _lbfgsb = None

BatchedFun = Callable[[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]]

MAXCOR = 10  # SciPy's defaults: stored corrections, line-search steps, evaluations
MAXLS = 20
MAXFUN = 15000
_SIGNATURE = "setulb(m,x,l,u,nbd,f,g,factr,pgtol,wa,iwa,task,lsave,isave,dsave,maxls,ln_task)"
DIRECT = _lbfgsb is not None and (getattr(_lbfgsb.setulb, "__doc__", "") or "").startswith(
    _SIGNATURE
)
"""Whether the step routine is driven directly (else: the public API, start by start)."""
_FG, _NEW_X, _STOP = 3, 1, 5  # SciPy's task codes: evaluate, iteration done, stop


def batched_lbfgsb(
    fun: BatchedFun,
    x0: np.ndarray,
    bounds: np.ndarray,
    *,
    maxiter: int = 200,
    pgtol: float = 1e-5,
    factr: float = 1e7,
) -> tuple[np.ndarray, np.ndarray]:
    r"""Minimize ``fun`` from every row of ``x0`` with independent L-BFGS-B runs.

    Args:
        fun: ``fun(starts, x)`` maps ``m`` start indices and their ``m x k`` current points to
            ``(values m, gradients m x k)``; rows must be independent of each other.
        x0: ``b x k`` starting points.
        bounds: ``b x k x 2`` or ``k x 2`` lower/upper bounds.
        maxiter: Iteration cap per run.
        pgtol: Projected-gradient tolerance.
        factr: Relative-decrease tolerance in units of machine epsilon (SciPy's ``factr``).

    Returns:
        ``(x, f)``: ``b x k`` final points and ``b`` final values, those of
        ``scipy.optimize.minimize(method="L-BFGS-B")`` from each start.
    """
    x0 = np.asarray(x0, dtype=np.float64)
    b, k = x0.shape
    bounds = np.broadcast_to(np.asarray(bounds, dtype=np.float64), (b, k, 2))
    if (bounds[..., 0] > bounds[..., 1]).any():  # as SciPy (the step routine would just stop)
        raise ValueError("L-BFGS-B: a lower bound is greater than its upper bound.")
    if b == 0:
        return x0.copy(), np.empty(0)
    if DIRECT:
        return _direct(fun, x0, bounds, maxiter, pgtol, factr)
    options = {"maxiter": maxiter, "gtol": pgtol, "ftol": factr * np.finfo(np.float64).eps}
    xs, fs = x0.copy(), np.empty(b)
    for i in range(b):

        def one(x: np.ndarray, i: int = i) -> tuple[float, np.ndarray]:
            f, g = fun(np.array([i]), x[None, :])
            return float(f[0]), g[0]

        res = scipy.optimize.minimize(
            one, x0[i], jac=True, method="L-BFGS-B", bounds=bounds[i], options=options
        )
        xs[i], fs[i] = res.x, res.fun
    return xs, fs


class _Run:
    """One start's L-BFGS-B state: the arrays SciPy's ``_minimize_lbfgsb`` keeps for its loop."""

    def __init__(self, x0: np.ndarray, bounds: np.ndarray) -> None:
        k, m = len(x0), MAXCOR
        low, up = bounds[:, 0], bounds[:, 1]
        # SciPy's bound codes: 0 none, 1 lower only, 2 both, 3 upper only
        has_low, has_up = np.isfinite(low), np.isfinite(up)
        self.nbd = np.where(has_low, np.where(has_up, 2, 1), np.where(has_up, 3, 0)).astype(
            np.int32
        )
        self.low, self.up = np.where(has_low, low, 0.0), np.where(has_up, up, 0.0)
        self.x = np.clip(x0, low, up).astype(np.float64)
        self.f, self.g = 0.0, np.zeros(k)
        self.wa = np.zeros(2 * m * k + 5 * k + 11 * m * m + 8 * m)
        self.iwa = np.zeros(3 * k, dtype=np.int32)
        self.task, self.ln_task = np.zeros(2, dtype=np.int32), np.zeros(2, dtype=np.int32)
        self.lsave = np.zeros(4, dtype=np.int32)
        self.isave = np.zeros(44, dtype=np.int32)
        self.dsave = np.zeros(29)
        self.iterations = self.evaluations = 0
        self.evaluated: bytes | None = None  # the last point evaluated (SciPy's cache), as bytes

    def advance(self, maxiter: int, pgtol: float, factr: float) -> bool:
        """Step until the run needs ``f(self.x)`` (``True``) or has stopped (``False``)."""
        while True:
            _lbfgsb.setulb(
                MAXCOR, self.x, self.low, self.up, self.nbd, self.f, self.g.astype(np.float64),
                factr, pgtol, self.wa, self.iwa, self.task, self.lsave, self.isave, self.dsave,
                MAXLS, self.ln_task,
            )  # fmt: skip
            if self.task[0] == _FG:
                if self.x.tobytes() == self.evaluated:  # 20x cheaper than np.array_equal
                    continue  # SciPy's wrapper answers a repeated point from its cache
                return True
            if self.task[0] != _NEW_X:
                return False
            self.iterations += 1
            if self.iterations >= maxiter:
                self.task[:] = (_STOP, 504)
            elif self.evaluations > MAXFUN:
                self.task[:] = (_STOP, 502)

    def told(self, f: float, g: np.ndarray) -> None:
        self.evaluated, self.f, self.g = self.x.tobytes(), f, g
        self.evaluations += 1


def _direct(
    fun: BatchedFun, x0: np.ndarray, bounds: np.ndarray, maxiter: int, pgtol: float, factr: float
) -> tuple[np.ndarray, np.ndarray]:
    """:func:`batched_lbfgsb` by SciPy's step routine: every run steps until it needs an
    evaluation, the needed points are evaluated in one call (in start order), repeat."""
    runs = [_Run(x0[i], bounds[i]) for i in range(len(x0))]
    # SciPy's wrapper evaluates the (clipped) start before the first step, which then asks for
    # that same point and gets it from the cache: so the first batch is every start
    waiting = list(range(len(runs)))
    while waiting:
        values, grads = fun(np.array(waiting), np.stack([runs[i].x for i in waiting]))
        for row, i in enumerate(waiting):
            runs[i].told(float(values[row]), np.array(grads[row], dtype=np.float64))
        waiting = [i for i in waiting if runs[i].advance(maxiter, pgtol, factr)]
    return np.stack([run.x for run in runs]), np.array([run.f for run in runs])
