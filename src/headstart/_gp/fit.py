r"""The one optimizer of every hyperparameter fit: decoupled multi-start L-BFGS-B, batched.

:func:`minimize` runs one SciPy L-BFGS-B per start (:func:`headstart._engine.lbfgsb.
batched_lbfgsb`: each start keeps its own Hessian approximation and convergence test, and the
starts' function evaluations are batched into one call), with the limits of
:mod:`headstart._gp.fit_settings`. The exact GPs (:func:`headstart._gp.exact.fit_exact_gp`: the
Matérn GP, the meta-task GPs, RGPE's and StackGP's GPs, MPHD's pre-training) and the models that
combine GPs (ScaML-GP's test GP, the BOSOT oracle and its meta-GP, the ABLR / ABRAC head) all fit
through it.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable

import numpy as np

from headstart._engine.lbfgsb import batched_lbfgsb
from headstart._gp.fit_settings import DEFAULT_LIMITS, Limits
from headstart.exceptions import ModelFittingError, NumericsWarning

BatchedObjective = Callable[[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]]
PointObjective = Callable[[np.ndarray], tuple[float, np.ndarray]]
# What a start whose kernel fails reports to L-BFGS-B (with a zero gradient): far above any real
# objective (MPHD's learned priors alone can add 1e15), so the line search backs off from it.
PENALTY = 1e250


def minimize(
    fun: BatchedObjective,
    x0: np.ndarray,
    bounds: np.ndarray,
    *,
    limits: Limits = DEFAULT_LIMITS,
    penalize_failures: bool = True,
    callback: Callable[[int], None] | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    r"""Minimize ``fun`` from every row of ``x0`` (independent L-BFGS-B runs, batched calls).

    Args:
        fun: ``fun(starts, x)`` maps ``m`` start indices and their ``m x k`` points to
            ``(values m, gradients m x k)``.
        x0: ``b x k`` starting points (clipped to ``bounds``).
        bounds: ``k x 2`` or ``b x k x 2`` boxes.
        limits: When each run stops (:class:`~headstart._gp.fit_settings.Limits`).
        penalize_failures: A start for which ``fun`` raises
            :class:`~headstart.exceptions.ModelFittingError` (it wandered into a kernel that is
            not positive definite) reports :data:`PENALTY` with a zero gradient there, and the
            others go on (a failing batch is re-evaluated start by start); ``False`` lets the
            error through.
        callback: Called with the number of batched evaluations so far, after each (progress).

    Returns:
        ``(x b x k, f b)``; ``f`` is ``inf`` for a start that ended where ``fun`` failed (or at a
        non-finite value).
    """
    x0 = np.asarray(x0, dtype=np.float64)
    bounds = np.asarray(bounds, dtype=np.float64)
    x0 = np.clip(x0, bounds[..., 0], bounds[..., 1])

    failed_at: dict[int, np.ndarray] = {}  # each start's last point where fun failed

    def guarded(idx: np.ndarray, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        try:
            return fun(idx, x)
        except ModelFittingError:
            if not penalize_failures:
                raise
            if len(x) == 1:
                failed_at[int(idx[0])] = x[0].copy()
                return np.full(1, PENALTY), np.zeros_like(x)
        # one start's kernel failed: evaluate the batch start by start, so only it is penalized
        parts = [guarded(idx[i : i + 1], x[i : i + 1]) for i in range(len(x))]
        return np.concatenate([v for v, _ in parts]), np.concatenate([g for _, g in parts])

    calls = 0

    def counted(idx: np.ndarray, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        nonlocal calls
        out = guarded(idx, x)
        calls += 1
        callback(calls)
        return out

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", NumericsWarning)  # jitter retries mid-fit are harmless
        xs, fs = batched_lbfgsb(
            guarded if callback is None else counted,
            x0,
            bounds,
            maxiter=limits.maxiter,
            pgtol=limits.pgtol,
            factr=limits.factr,
        )
    for i, x in failed_at.items():
        if np.array_equal(xs[i], x):
            fs[i] = np.inf
    return xs, np.where(np.isfinite(fs), fs, np.inf)


def row_by_row(fun: PointObjective) -> BatchedObjective:
    """A :data:`BatchedObjective` for :func:`minimize` from ``fun(x) -> (value, gradient)`` of one
    point: every start's row in turn (for objectives that are not batched themselves)."""

    def batched(_: np.ndarray, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        parts = [fun(row) for row in x]
        return np.array([v for v, _ in parts]), np.array([g for _, g in parts])

    return batched


__all__ = ["PENALTY", "minimize", "row_by_row"]
