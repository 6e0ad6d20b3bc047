r"""Input warping: the Matérn GP on ``w(x)``, with ``w`` a learned Kumaraswamy CDF per column.

A stationary kernel assumes the objective varies as fast everywhere in a column. Real
hyperparameters rarely do: a decision tree's ``min_samples_split`` changes nothing above some
value and everything below it; a learning rate matters near its good decade only. Snoek et al.
2014 ("Input warping for Bayesian optimization of non-stationary functions", Sec. 3) map each
numeric column through the CDF of a Kumaraswamy distribution,

    w(x) = 1 - (1 - x^a)^b,        a, b > 0                                     (Snoek 2014, Eq. 5)

which can stretch either end of ``[0, 1]`` (``a < 1`` the low end, ``b < 1`` the high end) or
both, or neither (``a = b = 1`` is the identity), and learn ``(a, b)`` jointly with the GP's
hyperparameters by MAP. HEBO (Cowen-Rivers et al. 2022) and BoTorch's ``Warp`` do the same. The
priors here are BoTorch's, ``log a, log b ~ N(0, 0.75)``; inputs are first pulled into
``[EPS, 1 - EPS]`` (the CDF's derivative is infinite at 0 when ``a < 1``).

The fit (:func:`fit_warped_gp`) maximizes

    log p(y | w(X), theta) + log p(theta) + sum_j [log p(log a_j) + log p(log b_j)]

over ``(theta, log a, log b)`` by the GP core's :func:`~headstart._gp.fit.minimize` (the one
optimizer of every fit), with the gradient in closed form
(:func:`warped_objective_and_grad`; autograd through the Cholesky factor cost 0.5-1.8 s per fit
at ``n = 20..100``). :class:`WarpedPosterior` then evaluates the fitted GP at ``w(x)``,
with ``d/dx = d/dw * w'(x)`` for the acquisition search.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import scipy.linalg

from headstart._gp.exact import prior_and_grad
from headstart._gp.fit import minimize, row_by_row
from headstart._gp.fit_settings import MATERN_COORDS, MATERN_LIMITS, Coordinates
from headstart._gp.hyperprior import HyperPrior
from headstart._gp.kernels import matern52_np
from headstart._gp.model import ExactGP
from headstart._gp.params import GPParams
from headstart.exceptions import ModelFittingError

EPS = 1e-6  # inputs are pulled into [EPS, 1 - EPS] before the warp
WARP_PRIOR_VAR = 0.75  # log a, log b ~ N(0, 0.75): BoTorch's LogNormal(0, 0.75 ** 0.5)
WARP_BOUNDS = (-3.0, 3.0)  # box of log a and log b (a, b in [0.05, 20])
_LOG_2PI = math.log(2.0 * math.pi)


def kumaraswamy_cdf(x: Any, a: Any, b: Any) -> Any:
    r"""``w(x) = 1 - (1 - x^a)^b`` (Eq. 5) after ``x -> EPS + (1 - 2 EPS) x``; numpy or torch.

    ``a`` and ``b`` broadcast against ``x``'s last axis (one pair per column).
    """
    x = EPS + (1.0 - 2.0 * EPS) * x
    return 1.0 - (1.0 - x**a) ** b


def kumaraswamy_cdf_and_grad(
    x: np.ndarray, a: np.ndarray, b: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    r"""``w(x)`` and ``dw/dx = (1 - 2 EPS) a b x'^(a - 1) (1 - x'^a)^(b - 1)``, ``x'`` the pulled
    input (numpy)."""
    u = EPS + (1.0 - 2.0 * EPS) * x
    ua = u**a
    w = 1.0 - (1.0 - ua) ** b
    dw = (1.0 - 2.0 * EPS) * a * b * ua / u * (1.0 - ua) ** (b - 1.0)
    return w, dw


def warp_inputs(X: np.ndarray, cols: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """A copy of ``X`` (``m x d``) with columns ``cols`` mapped through their CDFs."""
    out = np.array(X, dtype=np.float64, copy=True)
    out[:, cols] = kumaraswamy_cdf(out[:, cols], a, b)
    return out


class WarpedPosterior:
    r"""The posterior of a GP fitted on warped inputs, seen from the unwarped cube.

    Args:
        gp: The GP on ``w(X)``.
        cols: The warped columns.
        a, b: Their Kumaraswamy parameters.
    """

    includes_noise = False

    def __init__(self, gp: ExactGP, cols: np.ndarray, a: np.ndarray, b: np.ndarray) -> None:
        self.gp, self.cols, self.a, self.b = gp, cols, a, b
        self.outputscale = gp.outputscale
        self.lengthscales = gp.lengthscales
        self.mll = gp.mll

    def warp(self, X: np.ndarray) -> np.ndarray:
        """``X`` with the warped columns mapped through their CDFs."""
        return warp_inputs(X, self.cols, self.a, self.b)

    def posterior(self, X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return self.gp.posterior(self.warp(X))

    def posterior_and_grad(
        self, X: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """The GP's at ``w(X)``, gradients times ``w'(X)`` on the warped columns (chain rule)."""
        X = np.asarray(X, dtype=np.float64)
        W = X.copy()
        W[:, self.cols], dw = kumaraswamy_cdf_and_grad(X[:, self.cols], self.a, self.b)
        mean, var, dmean, dvar = self.gp.posterior_and_grad(W)
        dmean[:, self.cols] *= dw
        dvar[:, self.cols] *= dw
        return mean, var, dmean, dvar

    def joint_posterior(self, X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return self.gp.joint_posterior(self.warp(X))

    def fantasize(self, X: np.ndarray, y: np.ndarray) -> WarpedPosterior:
        """This posterior after also observing ``y`` at ``X`` (same hyperparameters and warp)."""
        X = np.asarray(X, dtype=np.float64).reshape(-1, self.gp.train_X.shape[1])
        return WarpedPosterior(self.gp.fantasize(self.warp(X), y), self.cols, self.a, self.b)


def warped_objective_and_grad(
    raw: np.ndarray,
    X: np.ndarray,
    y: np.ndarray,
    is_cat: np.ndarray,
    prior: HyperPrior,
    coords: Coordinates = MATERN_COORDS,
) -> tuple[float, np.ndarray]:
    r"""The negative log posterior of one start and its gradient, in closed form (numpy).

    With ``u = w(x)`` the warped inputs, ``K = s f(r^2(u)) + sigma^2 I``, ``W = K^{-1} - alpha
    alpha^T`` and ``P = W o G``, ``G = s f'(r^2)`` (the unwarped fit's quantities,
    :mod:`headstart._gp.exact`), the likelihood's gradient in the warped inputs is

        d(-log p) / d u_ij = 2 w_j sum_k P_ik (u_ij - u_kj)

    and reaches ``log a_j``, ``log b_j`` through ``du/d log a = a b (1 - x^a)^(b - 1) x^a log x``
    and ``du/d log b = -b (1 - x^a)^b log(1 - x^a)``. Tested against autograd.

    Args:
        raw: ``d + 2 + 2 k`` coordinates (:func:`fit_warped_gp`).
        X: ``n x d`` inputs; y: ``n`` standardized targets; is_cat: ``d`` mask (``k`` numeric).
        coords: The Matérn GP's coordinates (its noise floor).

    Returns:
        ``(value, gradient d + 2 + 2 k)``.
    """
    n, d = X.shape
    cols = np.flatnonzero(~is_cat)
    k = len(cols)
    theta = raw[None, : d + 2]
    a, b = np.exp(raw[d + 2 : d + 2 + k]), np.exp(raw[d + 2 :][k:])
    # the warp and its derivatives in log a, log b
    x = EPS + (1.0 - 2.0 * EPS) * X[:, cols]
    xa = x**a
    rest = 1.0 - xa
    U = X.copy()
    U[:, cols] = 1.0 - rest**b
    du_dloga = a * b * rest ** (b - 1.0) * xa * np.log(x)
    du_dlogb = -b * rest**b * np.log(np.maximum(rest, 1e-300))
    # the GP on U
    params = GPParams.from_raw(theta, coords)
    w, s, noise = params.inv_sq_lengthscales[0], params.outputscale[0], params.noise[0]
    diff = U[:, None, :] - U[None, :, :]
    D = np.where(is_cat, diff != 0, diff * diff)  # n x n x d
    f, df = matern52_np(D @ w)
    Kf, G = s * f, s * df
    K = Kf.copy()
    K[np.diag_indices(n)] += noise
    try:
        L = np.linalg.cholesky(K)
    except np.linalg.LinAlgError as err:  # minimize() backs off from this start's step
        raise ModelFittingError("A warped GP's kernel matrix is not positive definite.") from err
    alpha = scipy.linalg.cho_solve((L, True), y)
    K_inv = scipy.linalg.cho_solve((L, True), np.eye(n))
    value = 0.5 * y @ alpha + np.log(np.diagonal(L)).sum() + 0.5 * n * _LOG_2PI
    W = K_inv - np.outer(alpha, alpha)
    P = W * G
    grad = np.empty(d + 2 + 2 * k)
    grad[:d] = 0.5 * w * np.einsum("ik,ikj->j", P, D)  # d / d log w_j
    grad[d] = 0.5 * (W * Kf).sum()  # d / d log s
    grad[d + 1] = 0.5 * (noise - coords.noise_floor) * np.trace(W)
    Uc = U[:, cols]
    dU = 2.0 * w[cols] * (Uc * P.sum(1)[:, None] - P @ Uc)  # n x k
    grad[d + 2 : d + 2 + k] = (dU * du_dloga).sum(0)
    grad[d + 2 + k :] = (dU * du_dlogb).sum(0)
    # the priors
    log_prior, prior_grad = prior_and_grad(theta, prior, coords)
    warp = raw[d + 2 :]
    value = value - float(log_prior[0]) + 0.5 * (warp @ warp) / WARP_PRIOR_VAR
    grad[: d + 2] -= prior_grad[0]
    grad[d + 2 :] += warp / WARP_PRIOR_VAR
    return float(value), grad


def fit_warped_gp(
    X: np.ndarray,
    y: np.ndarray,
    is_cat: np.ndarray,
    starts: np.ndarray,
    prior: HyperPrior,
    *,
    deterministic: bool = False,
    coords: Coordinates = MATERN_COORDS,
) -> tuple[np.ndarray, np.ndarray]:
    r"""MAP ``(theta, log a, log b)`` of the Matérn GP on warped inputs, one L-BFGS-B run per start.

    Args:
        X: ``n x d`` inputs in ``[0, 1]``; y: ``n`` standardized targets.
        is_cat: ``d`` mask; the other columns are warped (``k`` of them).
        starts: ``R x (d + 2 + 2 k)`` starts: the Matérn coordinates
            (:data:`~headstart._gp.fit_settings.MATERN_COORDS`), then ``log a``, then ``log b``.
        prior: The GP hyperparameters' prior.
        deterministic: Pin the noise at its floor.
        coords: The Matérn GP's coordinates (its noise floor).

    Returns:
        ``(raw R x (d + 2 + 2 k), objective R)``; ``inf`` where a run failed.
    """
    X = np.asarray(X, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    is_cat = np.asarray(is_cat, dtype=bool)
    d = X.shape[1]
    k = int((~is_cat).sum())
    bounds = np.concatenate(
        [
            coords.bounds(d, deterministic=deterministic),
            np.tile(np.asarray(WARP_BOUNDS), (2 * k, 1)),
        ]
    )

    objective = row_by_row(lambda row: warped_objective_and_grad(row, X, y, is_cat, prior, coords))
    return minimize(objective, np.atleast_2d(starts), bounds, limits=MATERN_LIMITS)


def identity_warp_raw(k: int) -> np.ndarray:
    """``log a = log b = 0`` for ``k`` columns: the identity warp (a fit's default start)."""
    return np.zeros(2 * k)


__all__ = [
    "EPS",
    "WARP_BOUNDS",
    "WARP_PRIOR_VAR",
    "WarpedPosterior",
    "fit_warped_gp",
    "identity_warp_raw",
    "kumaraswamy_cdf",
    "kumaraswamy_cdf_and_grad",
    "warp_inputs",
    "warped_objective_and_grad",
]
