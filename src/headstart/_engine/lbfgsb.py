r"""Many independent L-BFGS-B runs that share batched function evaluations.

Each start keeps its own SciPy L-BFGS-B state (its own inverse-Hessian approximation and its own
convergence test), but whenever the runs ask for ``f(x)``, their points are collected and
evaluated in one batched call. This is the "decoupled optimizer, batched evaluation" scheme of
Optuna's ``_gp/batched_lbfgsb.py`` (arXiv 2511.13625): a multi-start search costs about as many
batched evaluations as its slowest start needs, instead of the sum over starts, and unlike
minimizing the *sum* of the objectives, no start slows another's convergence.

The runs are coroutines built on ``greenlet``. Without ``greenlet`` installed, the starts run one
after another (same results, more calls).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import scipy.optimize

try:
    import greenlet as _greenlet
except ImportError:  # pragma: no cover - exercised only without the optional dependency
    _greenlet = None

BatchedFun = Callable[[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]]


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
        ``(x, f)``: ``b x k`` final points and ``b`` final values.
    """
    x0 = np.asarray(x0, dtype=np.float64)
    b, k = x0.shape
    bounds = np.broadcast_to(np.asarray(bounds, dtype=np.float64), (b, k, 2))
    options = {"maxiter": maxiter, "gtol": pgtol, "ftol": factr * np.finfo(np.float64).eps}
    xs, fs = x0.copy(), np.empty(b)
    if _greenlet is None:
        for i in range(b):

            def one(x: np.ndarray, i: int = i) -> tuple[float, np.ndarray]:
                f, g = fun(np.array([i]), x[None, :])
                return float(f[0]), g[0]

            res = scipy.optimize.minimize(
                one, x0[i], jac=True, method="L-BFGS-B", bounds=bounds[i], options=options
            )
            xs[i], fs[i] = res.x, res.fun
        return xs, fs

    def make_run(i: int) -> _greenlet.greenlet:
        def body() -> tuple[str, int, object]:
            def request(x: np.ndarray) -> tuple[float, np.ndarray]:
                # Hand x to the parent, which resumes us with (f, g) once the batch is evaluated.
                return _greenlet.getcurrent().parent.switch(("eval", i, x))

            res = scipy.optimize.minimize(
                request, x0[i], jac=True, method="L-BFGS-B", bounds=bounds[i], options=options
            )
            return ("done", i, res)

        return _greenlet.greenlet(body)

    runs = [make_run(i) for i in range(b)]
    pending: dict[int, np.ndarray] = {}

    def handle(message: tuple[str, int, object]) -> None:
        tag, i, payload = message
        if tag == "eval":
            pending[i] = np.array(payload, dtype=np.float64)
        else:
            xs[i], fs[i] = payload.x, payload.fun

    for run in runs:
        handle(run.switch())
    while pending:
        order = sorted(pending)
        values, grads = fun(np.array(order), np.stack([pending[i] for i in order]))
        pending = {}
        for row, i in enumerate(order):
            handle(runs[i].switch((float(values[row]), np.asarray(grads[row], dtype=np.float64))))
    return xs, fs
