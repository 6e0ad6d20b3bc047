r"""Bayesian linear regression on fixed basis functions: the head of ABLR and ABRAC.

Model (Perrone et al. 2018, Eq. 2; Horváth et al. 2021, Eq. 4): for features ``Phi`` (``n x r``),

    y | w ~ N(Phi w, beta^{-1} I),      w ~ N(0, A^{-1}),   A = diag(alpha)  (ARD; ABLR: alpha I)

With ``L L^T = Phi^T Phi + A / beta`` (always positive definite), ``S = (L L^T)^{-1}`` and the
posterior mean of the weights ``m = S Phi^T y``, the negative log marginal likelihood is
(ABRAC App. A, with the 1/2 on the quadratic term that its printed form drops):

    NLL = -(n - r)/2 log beta - 1/2 sum_i log alpha_i + sum_i log L_ii
          + beta/2 (y^T y - ||L^{-1} Phi^T y||^2) + n/2 log(2 pi)

-- O(n r^2 + r^3), no ``n x n`` matrix -- and its gradient in the log-parameters is

    d NLL / d log alpha_i = -1/2 + alpha_i S_ii / (2 beta) + alpha_i m_i^2 / 2
    d NLL / d log beta    = -(n - r)/2 - tr(S A) / (2 beta) + beta/2 (y^T y - y^T Phi m)
                            - m^T A m / 2

The predictive distribution at features ``f`` (Bishop 2006, Eq. 3.58-3.59):

    mean = f^T m,     var = ||L^{-1} f||^2 / beta  (+ 1 / beta with the observation noise)
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import scipy.linalg

from headstart._gp.fit import minimize, row_by_row

LOG_ALPHA_BOUNDS = (-10.0, 12.0)  # ARD precisions of pruned basis functions grow without bound
LOG_BETA_BOUNDS = (-6.0, 16.0)
_EYE_JITTER = 1e-10


@dataclass(frozen=True)
class BLRFit:
    """A fitted head: precisions, the Cholesky factor and the posterior mean of the weights."""

    alpha: np.ndarray
    beta: float
    L: np.ndarray
    mean_w: np.ndarray
    nll: float

    def predict(self, F: np.ndarray, *, noise: bool = True) -> tuple[np.ndarray, np.ndarray]:
        """Predictive mean and variance at features ``F`` (``m x r``)."""
        mean = F @ self.mean_w
        u = scipy.linalg.solve_triangular(self.L, F.T, lower=True)
        var = (u * u).sum(0) / self.beta + (1.0 / self.beta if noise else 0.0)
        return mean, np.maximum(var, 1e-12)

    def solve(self, F: np.ndarray) -> np.ndarray:
        """``S F^T`` (``r x m``), for gradients of the variance."""
        return scipy.linalg.cho_solve((self.L, True), F.T)


@dataclass(frozen=True)
class _Stats:
    """What the evidence needs of the data, computed once per fit: ``n``, ``Phi^T Phi``,
    ``Phi^T y`` and ``y^T y`` (every evaluation is then ``O(r^3)``, whatever ``n``)."""

    n: int
    PtP: np.ndarray
    Pty: np.ndarray
    yy: float

    @classmethod
    def of(cls, Phi: np.ndarray, y: np.ndarray) -> _Stats:
        return cls(len(y), Phi.T @ Phi, Phi.T @ y, float(y @ y))


def _parts(theta: np.ndarray, stats: _Stats):
    r = len(stats.Pty)
    alpha, beta = np.exp(theta[:r]), float(np.exp(theta[r]))
    M = stats.PtP + np.diag(alpha / beta + _EYE_JITTER)
    L = np.linalg.cholesky(M)
    v = scipy.linalg.solve_triangular(L, stats.Pty, lower=True, check_finite=False)
    return alpha, beta, L, v


def _nll_and_grad(theta: np.ndarray, stats: _Stats) -> tuple[float, np.ndarray]:
    n, r, Pty, yy = stats.n, len(stats.Pty), stats.Pty, stats.yy
    alpha, beta, L, v = _parts(theta, stats)
    nll = (
        -0.5 * (n - r) * math.log(beta)
        - 0.5 * float(np.log(alpha).sum())
        + float(np.log(np.diag(L)).sum())
        + 0.5 * beta * (yy - float(v @ v))
        + 0.5 * n * math.log(2 * math.pi)
    )
    L_inv = scipy.linalg.solve_triangular(L, np.eye(r), lower=True, check_finite=False)
    S = L_inv.T @ L_inv
    m = S @ Pty
    g_alpha = -0.5 + alpha * np.diag(S) / (2 * beta) + alpha * m * m / 2
    g_beta = (
        -0.5 * (n - r)
        - float(np.diag(S) @ alpha) / (2 * beta)
        + 0.5 * beta * (yy - float(Pty @ m))
        - 0.5 * float(m @ (alpha * m))
    )
    return nll, np.concatenate([g_alpha, [g_beta]])


def neg_log_marginal_likelihood(
    theta: np.ndarray, Phi: np.ndarray, y: np.ndarray
) -> tuple[float, np.ndarray]:
    r"""``(NLL, dNLL/dtheta)`` at ``theta = (log alpha_1..r, log beta)`` (module docstring)."""
    return _nll_and_grad(np.asarray(theta, dtype=np.float64), _Stats.of(Phi, y))


def fit_blr(
    Phi: np.ndarray,
    y: np.ndarray,
    *,
    ard: bool = True,
    init: np.ndarray | None = None,
    fixed_beta: float | None = None,
    warm_only: bool = False,
) -> BLRFit:
    r"""Maximize the marginal likelihood over ``(alpha, beta)`` by L-BFGS-B in log space.

    Args:
        Phi: ``n x r`` features; ``y``: ``n`` targets (standardized by the caller).
        ard: One precision per basis function (ABRAC) or one for all (ABLR).
        init: A warm start ``theta`` (its length must match). The default start ``alpha = 1``,
            ``beta = 10`` always runs beside it and the better fit is kept: "all noise" (every
            precision at its bound, ``beta`` = 1 on standardized targets) is a stationary point
            of the evidence, so a warm start there never leaves it (issue 32: ABLR's head sat
            there for a whole run once a 3-point fit had put it there).
        fixed_beta: Keep ``beta`` fixed (noise-free objectives: a large precision).
        warm_only: Fit from ``init`` alone (the caller's refit schedule decides when the default
            start runs again, as for the Matérn GP: :func:`headstart._gp.surrogate.
            default_refit_due`). The default start still runs when the warm fit ends at "all
            noise" (every precision within 1 of its bound), the stationary point it cannot
            leave. At n = 500 the default start took 80-90 of a fit's 110-150 evaluations.
    """
    r = Phi.shape[1]
    k = r if ard else 1
    default = np.concatenate([np.zeros(k), [math.log(10.0)]])
    starts = [default]
    if init is not None and len(init) == k + 1 and np.isfinite(init).all():
        starts.append(np.asarray(init, dtype=np.float64))
    x0 = np.array(starts)
    bounds = [LOG_ALPHA_BOUNDS] * k + [LOG_BETA_BOUNDS]
    if fixed_beta is not None:
        x0[:, -1] = math.log(fixed_beta)
        bounds[-1] = (x0[0, -1], x0[0, -1])

    stats = _Stats.of(Phi, y)

    def fun(theta):
        full = theta if ard else ard_theta(theta, r)
        value, grad = _nll_and_grad(full, stats)
        if not ard:
            grad = np.array([grad[:r].sum(), grad[r]])
        return value, grad

    if warm_only and len(x0) == 2:
        xs, fs = minimize(row_by_row(fun), x0[1:], np.asarray(bounds), penalize_failures=False)
        if np.all(xs[0, :k] >= LOG_ALPHA_BOUNDS[1] - 1.0):  # all noise: the default start too
            more = minimize(row_by_row(fun), x0[:1], np.asarray(bounds), penalize_failures=False)
            xs, fs = np.vstack([xs, more[0]]), np.concatenate([fs, more[1]])
    else:
        xs, fs = minimize(row_by_row(fun), x0, np.asarray(bounds), penalize_failures=False)
    best = xs[int(np.argmin(fs))]
    theta = best if ard else ard_theta(best, r)
    return blr_at(theta, Phi, y)


def blr_at(theta: np.ndarray, Phi: np.ndarray, y: np.ndarray) -> BLRFit:
    """The head at fixed ``theta = (log alpha_1..r, log beta)`` (no optimization)."""
    theta, stats = np.asarray(theta, dtype=np.float64), _Stats.of(Phi, y)
    alpha, beta, L, v = _parts(theta, stats)
    mean_w = scipy.linalg.solve_triangular(L.T, v, lower=False)
    value = _nll_and_grad(theta, stats)[0]
    return BLRFit(alpha, beta, L, mean_w, value)


def ard_theta(theta: np.ndarray, r: int) -> np.ndarray:
    """One precision's ``(log alpha, log beta)`` (ABLR) as the ``r + 1`` values of an ARD head."""
    return np.concatenate([np.full(r, theta[0]), theta[1:]])


def theta_of(fit: BLRFit, ard: bool) -> np.ndarray:
    """The log-parameters of ``fit`` (a warm start for the next :func:`fit_blr`)."""
    alpha = np.log(fit.alpha) if ard else np.log(fit.alpha[:1])
    return np.concatenate([alpha, [math.log(fit.beta)]])


__all__ = [
    "BLRFit",
    "ard_theta",
    "blr_at",
    "fit_blr",
    "neg_log_marginal_likelihood",
    "theta_of",
]
