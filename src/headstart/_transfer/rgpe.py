r"""RGPE: the ranking-weighted Gaussian process ensemble.

Reference: M. Feurer, B. Letham, E. Bakshy. Scalable Meta-Learning for Bayesian Optimization using
Ranking-Weighted Gaussian Process Ensembles. ICML 2018 AutoML Workshop (arXiv:1802.02219v1;
below: [RGPE]); P. Tighineanu et al. Scalable Meta-Learning with Gaussian Processes. AISTATS 2024
(below: [ScaML]), which runs RGPE as a baseline. Also read: the BoTorch tutorial ``meta_learning_with_rgpe`` (MIT) and the
authors' ``automl/transfer-hpo-framework`` (MIT); no code is taken from either.

**Model.** One GP per meta-task (the *base* models, fitted once: the meta-GPs of
:func:`headstart._transfer.metafit.fit_meta_gps`) and one GP on the test data (the *target* model,
refitted on every :meth:`RGPE.condition`). The ensemble ([RGPE] Sec. 3) is

    mu(x)     = sum_i w_i mu_i(x)
    sigma^2(x) = sum_i w_i^2 sigma_i^2(x)

over the base models and the target model, with weights that sum to 1.

**Weights** ([RGPE] Sec. 3.1-3.2). The ranking loss of model ``f`` on the ``n`` test points is the
number of misranked pairs,

    L(f) = sum_{j, k} 1[(f(x_j) < f(x_k)) xor (y_j < y_k)],

evaluated on :data:`N_SAMPLES` joint posterior samples of ``f(X_t)`` per model. The target model
is scored by leave-one-out: pair ``(j, k)`` uses a sample of the target GP conditioned on all
points but ``j`` (same hyperparameters), drawn jointly at all test points. ``w_i`` is the fraction
of samples in which model ``i`` has the smallest loss; ties are split evenly among the tied
models (as in the authors' later framework; v1 gave ties to the target, which would starve an
exactly matching source). *Weight dilution*: a base model whose median loss exceeds the 95th
percentile of the target's loss samples is dropped ([RGPE] v1 Sec. 3.2).

**Units.** Every model works on its own standardized targets (zero mean, unit variance;
Yogatama & Mann 2014, as [RGPE] does): base model ``i`` predicts ``(mu_i^raw - ybar_i) / sd_i``
and ``Sigma_i^raw / sd_i^2``; the target model is fitted on the standardized ``y_t``, which is
the ``y_model`` returned by :meth:`RGPE.condition` (so ``y_model.max()`` is a valid incumbent).

**Few test points.** With ``n < 2`` there is no pair to rank: the weights are uniform over the
models that have data (the ``M`` base models for ``n = 0``; base models and target for ``n = 1``),
as the authors' framework does for the first points.

**Target model.** Squared-exponential ARD with the meta-GPs' priors ([ScaML] App. C.5 gives the
baselines those priors), MAP by :func:`headstart._transfer._common.fit_se_gp`, warm-started from
the previous fit; ``deterministic=True`` pins its noise at 1e-6.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch

from headstart._engine.numerics import robust_cholesky, standardize
from headstart._gp.batched import MIN_VAR, BatchedGP
from headstart._gp.kernels import batched_kernel
from headstart._gp.params import GPParams
from headstart._transfer._common import psd_sample, weighted_log_mean_lengthscales
from headstart._transfer.base import TransferSurrogate
from headstart._transfer.defaults import RGPE_N_SAMPLES as N_SAMPLES
from headstart._transfer.metafit import fit_meta_gps

DILUTION_BASE_QUANTILE = 50.0  # [RGPE] v1: a base model's median loss ...
DILUTION_TARGET_QUANTILE = 95.0  # ... against the target's 95th percentile
_LOSS_CHUNK_ELEMENTS = 1 << 24  # pairwise comparisons per block when scoring base models


def ranking_loss(F: np.ndarray, y: np.ndarray) -> np.ndarray:
    r"""Misranked pairs ``sum_{j,k} 1[(F_j < F_k) xor (y_j < y_k)]`` of each sample: ``B x S``.

    Args:
        F: ``B x S x n`` samples of ``f(X_t)`` (``B`` models, ``S`` samples each).
        y: ``n`` observed targets.

    Example:
        >>> ranking_loss(np.array([[[0.0, 1.0, 2.0], [2.0, 1.0, 0.0]]]), np.array([0.0, 1.0, 2.0]))
        array([[0, 6]])
    """
    order = y[:, None] < y[None, :]
    B, S, n = F.shape
    out = np.empty((B, S), dtype=np.int64)
    step = max(1, _LOSS_CHUNK_ELEMENTS // max(1, S * n * n))
    for b in range(0, B, step):
        Fb = F[b : b + step]
        out[b : b + step] = ((Fb[..., :, None] < Fb[..., None, :]) ^ order).sum((-1, -2))
    return out


def loo_ranking_loss(F_loo: np.ndarray, y: np.ndarray) -> np.ndarray:
    r"""Leave-one-out ranking loss of the target model ([RGPE] Sec. 3.1): ``S``.

        L = sum_{j,k} 1[(f^{-j}(x_j) < f^{-j}(x_k)) xor (y_j < y_k)]

    Args:
        F_loo: ``n x S x n``: row ``j`` holds joint samples of ``f^{-j}(X_t)``, the target GP
            conditioned on every point but ``j``.
        y: ``n`` observed targets.
    """
    n = len(y)
    held_out = F_loo[np.arange(n), :, np.arange(n)]  # n x S: f^{-j}(x_j)
    wrong = (held_out[:, :, None] < F_loo) ^ (y[:, None] < y[None, :])[:, None, :]
    return wrong.sum((0, 2))


def loo_posteriors(
    X: np.ndarray, z: np.ndarray, is_cat: np.ndarray, params: GPParams
) -> tuple[np.ndarray, np.ndarray]:
    r"""Joint posteriors of ``f`` at all of ``X`` given all points but ``j``, for every ``j``.

    With ``K_f = k(X, X)`` and ``K_{-j}`` the noisy Gram matrix without row and column ``j``
    (R&W Eqs. 2.24-2.25, hyperparameters fixed):

        mean_j = K_f[:, -j] K_{-j}^{-1} z_{-j},   cov_j = K_f - K_f[:, -j] K_{-j}^{-1} K_f[-j, :]

    Args:
        X: ``n x d`` (``n >= 2``); z: ``n`` standardized targets; is_cat: ``d`` mask;
        params: One-row hyperparameters of the target GP.

    Returns:
        ``(mean n x n, cov n x n x n)``: batch index ``j`` is the left-out point.
    """
    n = len(z)
    Xt = torch.from_numpy(np.asarray(X, dtype=np.float64))
    K_f = batched_kernel(
        Xt,
        Xt,
        torch.from_numpy(np.asarray(is_cat, dtype=bool)),
        torch.from_numpy(params.inv_sq_lengthscales),
        torch.from_numpy(params.outputscale),
        symmetric=True,
    )[0]
    keep = torch.from_numpy(np.array([np.delete(np.arange(n), j) for j in range(n)]))  # n x n-1
    K_keep = K_f[keep[:, :, None], keep[:, None, :]]  # n x (n-1) x (n-1)
    K_keep = K_keep + float(params.noise[0]) * torch.eye(n - 1, dtype=K_f.dtype)
    L = robust_cholesky(K_keep)
    V = torch.linalg.solve_triangular(L, K_f[keep], upper=False)  # n x (n-1) x n
    zt = torch.from_numpy(np.asarray(z, dtype=np.float64))
    a = torch.linalg.solve_triangular(L, zt[keep].unsqueeze(-1), upper=False)  # n x (n-1) x 1
    mean = (V.transpose(-1, -2) @ a).squeeze(-1)
    cov = K_f - V.transpose(-1, -2) @ V
    return mean.numpy(), cov.numpy()


def rank_weights(base_losses: np.ndarray, target_loss: np.ndarray) -> np.ndarray:
    r"""``M + 1`` ensemble weights from loss samples (target last; [RGPE] Sec. 3.1-3.2).

    Base models with ``median(L_i) > percentile_95(L_target)`` are dropped; each sample's
    smallest loss wins, ties split evenly.

    Args:
        base_losses: ``M x S``; target_loss: ``S``.

    Example:
        >>> rank_weights(np.array([[0, 0, 0, 4]]), np.array([1, 1, 1, 1])).tolist()
        [0.75, 0.25]
    """
    losses = np.vstack([base_losses, target_loss[None, :]]).astype(np.float64)
    threshold = np.percentile(target_loss, DILUTION_TARGET_QUANTILE)
    diluted = np.percentile(base_losses, DILUTION_BASE_QUANTILE, axis=1) > threshold
    losses[:-1][diluted] = np.inf
    best = losses == losses.min(axis=0, keepdims=True)  # (M + 1) x S
    return (best / best.sum(axis=0, keepdims=True)).mean(axis=1)


class RGPEPosterior:
    r"""The RGPE ensemble at fixed weights, in standardized units.

    Implements the posterior interface of :mod:`headstart._transfer`.

    Args:
        meta: Base models (raw units).
        weights: ``M`` base-model weights.
        target: The target GP on standardized ``y_t`` (``None`` without test data).
        target_weight: Its weight.
    """

    includes_noise = False

    def __init__(
        self,
        meta: BatchedGP,
        weights: np.ndarray,
        target: BatchedGP | None,
        target_weight: float,
    ) -> None:
        self.meta = meta
        self.d = len(meta.is_cat)
        w = np.asarray(weights, dtype=np.float64)
        self.weights = w
        self.target = target if target is not None and target_weight > 0 else None
        self.target_weight = float(target_weight) if self.target is not None else 0.0
        # sum_m w_m (mu_m^raw - ybar_m) / sd_m  and  sum_m w_m^2 Sigma_m^raw / sd_m^2
        self._a, self._b = w / meta.y_std, (w / meta.y_std) ** 2
        self._offset = float(self._a @ meta.y_mean)
        self._meta = meta.weighted(self._a, self._b, np.zeros((0, self.d)))
        scales = list(w**2 * meta.params.outputscale)
        ells, ell_w = [meta.params.lengthscales], [w]
        if self.target is not None:
            scales.append(self.target_weight**2 * float(self.target.prior_var[0]))
            ells.append(self.target.params.lengthscales)
            ell_w.append([self.target_weight])
        self.outputscale = max(float(np.sum(scales)), MIN_VAR)
        self.lengthscales = weighted_log_mean_lengthscales(
            np.vstack(ells), np.concatenate([np.ravel(v) for v in ell_w])
        )

    def posterior(self, X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Ensemble mean and variance: ``m`` each."""
        mean, var, _ = self._meta(X)
        mean = mean - self._offset
        if self.target is not None:
            mt, vt = self.target.moments(X)
            mean = mean + self.target_weight * mt[0]
            var = var + self.target_weight**2 * vt[0]
        return mean, np.maximum(var, MIN_VAR)

    def posterior_and_grad(
        self, X: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Ensemble mean and variance with their gradients in ``X`` (``m``, ``m``, ``m x d`` x2)."""
        mean, var, _, dmean, dvar, _ = self._meta(X, grad=True)
        mean = mean - self._offset
        if self.target is not None:
            mt, vt, dmt, dvt = self.target.moments(X, grad=True)
            w = self.target_weight
            mean, var = mean + w * mt[0], var + w * w * vt[0]
            dmean, dvar = dmean + w * dmt[0], dvar + w * w * dvt[0]
        dvar = np.where((var < MIN_VAR)[:, None], 0.0, dvar)
        return mean, np.maximum(var, MIN_VAR), dmean, dvar

    def joint_posterior(self, X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Ensemble mean (``m``) and covariance ``sum_i w_i^2 Sigma_i(X, X)`` (``m x m``)."""
        X = np.asarray(X, dtype=np.float64).reshape(-1, self.d)
        mean, _, cov = self.meta.weighted(self._a, self._b, X)(X)
        mean = mean - self._offset
        if self.target is not None:
            mean = mean + self.target_weight * self.target.moments(X)[0][0]
            cov = cov + self.target_weight**2 * self.target.cov(X, X)[0]
        return mean, cov


class RGPE(TransferSurrogate):
    r"""RGPE as a transfer surrogate: base GPs fitted once, target GP and weights per call.

    Args:
        meta_tasks: The earlier tasks (:class:`headstart.sources.MetaTask` or ``(X, y)`` pairs).
        is_cat: ``d`` mask of categorical columns.
        seed: Seeds the base-model fit.
        deterministic: Pin the target GP's noise (noise-free objectives).
        meta: Already fitted base GPs for exactly these tasks (e.g. from the storage cache).
        n_samples: Posterior samples per model for the ranking loss.

    Example:
        >>> rng = np.random.default_rng(0)
        >>> X = rng.random((12, 1))
        >>> model = RGPE([(X, np.sin(6 * X[:, 0]))], np.array([False]))
        >>> post, y_model = model.condition(X[:4], np.sin(6 * X[:4, 0]), rng)
        >>> weights = model.report()  # the ensemble weights: the source's and the target GP's
        >>> sorted(weights), round(sum(weights.values()), 9)
        (['target', 'task0'], 1.0)
    """

    def __init__(
        self,
        meta_tasks: Sequence,
        is_cat: np.ndarray,
        *,
        seed: int = 0,
        deterministic: bool = False,
        meta: BatchedGP | None = None,
        n_samples: int = N_SAMPLES,
    ) -> None:
        self.is_cat = np.asarray(is_cat, dtype=bool)
        self.meta = meta if meta is not None else fit_meta_gps(meta_tasks, self.is_cat, seed=seed)
        self.names = list(self.meta.names)
        self.deterministic = deterministic
        self.n_samples = int(n_samples)
        self.weights = np.full(self.meta.n_tasks, 1.0 / self.meta.n_tasks)
        self.target_weight = 0.0
        self._target_params: GPParams | None = None

    def condition(
        self, X_t: np.ndarray, y_t: np.ndarray, rng: np.random.Generator
    ) -> tuple[RGPEPosterior, np.ndarray]:
        """Refit the target GP and the weights; return ``(posterior, standardized y_t)``."""
        X_t, y_t = self._test_data(X_t, y_t)
        z, _, _ = standardize(y_t)
        n, M = len(z), self.meta.n_tasks
        target = self._refit_target(X_t, z, rng, 0.0, 1.0) if n else None
        if n < 2:
            k = M + n  # uniform over the models that have data
            weights = np.full(M + 1, 1.0 / k)
            weights[-1] = 1.0 / k if n else 0.0
        else:
            weights = self._rank_weights(X_t, z, rng)
        self.weights, self.target_weight = weights[:-1], float(weights[-1])
        return RGPEPosterior(self.meta, self.weights, target, self.target_weight), z

    def _rank_weights(self, X_t: np.ndarray, z: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        S = self.n_samples
        base = psd_sample(self.meta.mean(X_t), self.meta.cov(X_t, X_t), S, rng)  # M x S x n
        loo_mean, loo_cov = loo_posteriors(X_t, z, self.is_cat, self._target_params)
        loo = psd_sample(loo_mean, loo_cov, S, rng)  # n x S x n
        return rank_weights(ranking_loss(base, z), loo_ranking_loss(loo, z))

    def diagnostics(self) -> dict:
        """The base diagnostics; the ensemble weights are already shares (they sum to 1)."""
        out = super().diagnostics()
        weights = dict(out["weights"])
        target = weights.pop("target")
        return {**out, "shares": weights, "residual_share": target}

    def report(self) -> dict[str, float]:
        """Each source's ensemble weight, and the target model's under ``"target"``."""
        out = {name: float(w) for name, w in zip(self.names, self.weights, strict=True)}
        out["target"] = self.target_weight
        return out


__all__ = [
    "RGPE",
    "RGPEPosterior",
    "loo_posteriors",
    "loo_ranking_loss",
    "rank_weights",
    "ranking_loss",
]
