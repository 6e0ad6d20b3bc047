r"""The Matérn GP's posterior at fixed hyperparameters, in numpy: what GP-BO's acquisition search calls.

With ``K = k(X, X) + sigma^2 I = L L^T`` and ``alpha = K^{-1} y`` (standardized ``y``;
Rasmussen & Williams 2006, Ch. 2):

    log p(y | theta) = -1/2 y^T alpha - sum_i log L_ii - n/2 log(2 pi)          (R&W Eq. 2.30)
    mean(x)  = k(x, X) alpha                                                    (R&W Eq. 2.25)
    var(x)   = s - ||L^{-1} k(X, x)||^2                                         (R&W Eq. 2.26)

The hyperparameters come from the GP core's MAP fit (:func:`headstart._gp.exact.fit_exact_gp`).
This posterior is the one hand-written single-GP prediction kept beside the batched
:class:`~headstart._gp.batched.BatchedGP`: the acquisition search makes thousands of small calls,
for which numpy's per-call overhead is far below torch's (``benchmarks/gp_posterior.py``,
``docs/benchmarks/gp_posterior.md``); its gradients are tested against autograd.
"""

from __future__ import annotations

import math

import numpy as np
import scipy.linalg
import torch

from headstart._engine.numerics import extend_cholesky, robust_cholesky
from headstart._gp.kernels import matern52_np, matern52_value_np, sq_dist_np
from headstart._gp.params import GPParams


class ExactGP:
    r"""A GP with fixed hyperparameters, its Cholesky factor and ``alpha = K^{-1} y`` cached.

    Prediction runs in numpy (float64): an acquisition search makes many tiny batched calls, for
    which numpy's per-call overhead is far below torch's, and the gradients are closed forms.

    Args:
        train_X: ``n x d`` inputs in ``[0, 1]``.
        train_y: ``n`` standardized targets.
        is_cat: ``d`` boolean mask of categorical columns.
        params: Kernel hyperparameters.

    Example:
        >>> X = np.array([[0.2], [0.8]])
        >>> gp = ExactGP(X, np.array([1.0, -1.0]), np.array([False]), GPParams(np.ones(1), 1.0, 1e-6))
        >>> mean, var = gp.posterior(X)
        >>> [round(v, 4) for v in mean.tolist()]
        [1.0, -1.0]
    """

    includes_noise = False

    def __init__(
        self, train_X: np.ndarray, train_y: np.ndarray, is_cat: np.ndarray, params: GPParams
    ) -> None:
        self.train_X = np.asarray(train_X, dtype=np.float64)
        self.train_y = np.asarray(train_y, dtype=np.float64)
        self.is_cat = np.asarray(is_cat, dtype=bool)
        self.params = params
        self.inv_sq_lengthscales = params.inv_sq_lengthscales[0]
        self.outputscale = float(params.outputscale[0])
        n = self.train_X.shape[0]
        diff = self.train_X[:, None, :] - self.train_X[None, :, :]
        sq = np.where(self.is_cat, diff != 0, diff * diff)  # exact zeros on the diagonal
        K = matern52_value_np(sq @ self.inv_sq_lengthscales)
        K *= self.outputscale
        K[np.diag_indices(n)] += params.noise[0]
        self._set_factor(robust_cholesky(torch.from_numpy(K)).numpy())

    def _set_factor(self, L: np.ndarray) -> None:
        self.L = L
        self.lengthscales = self.params.lengthscales[0]
        a = scipy.linalg.solve_triangular(self.L, self.train_y, lower=True)
        self.alpha = scipy.linalg.solve_triangular(self.L, a, lower=True, trans="T")
        n = len(self.train_y)
        self.mll = float(
            -0.5 * (a @ a) - np.log(np.diagonal(self.L)).sum() - 0.5 * n * math.log(2 * math.pi)
        )
        """Log marginal likelihood ``log p(y | theta)`` of the standardized targets (Eq. 2.30)."""

    def fantasize(self, X: np.ndarray, y: np.ndarray) -> ExactGP:
        r"""This GP after also observing ``y`` (standardized units) at ``X`` (``p x d``).

        The hyperparameters stay as fitted and the Cholesky factor is extended by the new block
        (:func:`~headstart._engine.numerics.extend_cholesky`), ``O(n^2 p)`` instead of a refit.
        """
        X = np.asarray(X, dtype=np.float64).reshape(-1, self.train_X.shape[1])
        K_pp = self.kernel(X, X)
        K_pp[np.diag_indices(len(X))] += self.params.noise[0]
        out = object.__new__(ExactGP)
        out.train_X = np.concatenate([self.train_X, X])
        out.train_y = np.concatenate([self.train_y, np.asarray(y, dtype=np.float64).reshape(-1)])
        out.is_cat, out.params = self.is_cat, self.params
        out.inv_sq_lengthscales, out.outputscale = self.inv_sq_lengthscales, self.outputscale
        out._set_factor(extend_cholesky(self.L, self.kernel(X).T, K_pp))
        return out

    def kernel(self, X: np.ndarray, Z: np.ndarray | None = None) -> np.ndarray:
        """``k(X, Z)`` (``Z`` defaults to the training inputs): ``m x n``."""
        Z = self.train_X if Z is None else Z
        k = matern52_value_np(sq_dist_np(X, Z, self.is_cat, self.inv_sq_lengthscales))
        k *= self.outputscale
        return k

    def posterior(self, X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        r"""Marginal posterior mean and variance of ``f`` (R&W Eqs. 2.25-2.26).

        Args:
            X: ``m x d``.

        Returns:
            ``(mean, var)``, each ``m``; ``var`` is clamped at ``1e-12``.
        """
        k = self.kernel(X)  # m x n
        V = scipy.linalg.solve_triangular(self.L, k.T, lower=True, check_finite=False)  # n x m
        return k @ self.alpha, np.maximum(self.outputscale - (V * V).sum(0), 1e-12)

    def posterior_and_grad(
        self, X: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        r"""Posterior mean and variance with their gradients in ``X`` (numeric columns).

        With ``G_i = s f'(r_i^2)`` and ``beta = K^{-1} k(X, x)``:

            d mean / d x_j = 2 w_j sum_i alpha_i G_i (x_j - X_ij)
            d var  / d x_j = -4 w_j sum_i beta_i G_i (x_j - X_ij)

        Categorical columns get gradient 0 (they are searched discretely).

        Args:
            X: ``m x d``.

        Returns:
            ``(mean m, var m, dmean m x d, dvar m x d)``.
        """
        r2 = sq_dist_np(X, self.train_X, self.is_cat, self.inv_sq_lengthscales)
        f, df = matern52_np(r2)
        k, G = self.outputscale * f, self.outputscale * df  # m x n
        V = scipy.linalg.solve_triangular(self.L, k.T, lower=True, check_finite=False)  # n x m
        beta = scipy.linalg.solve_triangular(
            self.L, V, lower=True, trans="T", check_finite=False
        ).T  # m x n
        mean = k @ self.alpha
        raw_var = self.outputscale - (V * V).sum(0)
        var = np.maximum(raw_var, 1e-12)
        two_w = 2.0 * np.where(self.is_cat, 0.0, self.inv_sq_lengthscales)
        Ga, Gb = G * self.alpha, G * beta
        dmean = two_w * (X * Ga.sum(1)[:, None] - Ga @ self.train_X)
        dvar = -2.0 * two_w * (X * Gb.sum(1)[:, None] - Gb @ self.train_X)
        dvar[raw_var < 1e-12] = 0.0
        return mean, var, dmean, dvar

    def joint_posterior(self, X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        r"""Joint posterior mean (``m``) and covariance (``m x m``) of ``f`` at ``X`` (``m x d``).

        cov = k(X, X) - V^T V,   V = L^{-1} k(train_X, X)      (R&W Eq. 2.24)
        """
        k = self.kernel(X)
        V = scipy.linalg.solve_triangular(self.L, k.T, lower=True, check_finite=False)
        return k @ self.alpha, self.kernel(X, X) - V.T @ V


__all__ = ["ExactGP"]
