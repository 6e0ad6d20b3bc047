r"""ScaML-GP's test-task model: weighted meta-task posteriors plus a residual GP.

Reference: P. Tighineanu, L. Grossberger, P. Baireuther, K. Skubch, S. Falkner, J. Vinogradska,
F. Berkenkamp. Scalable Meta-Learning with Gaussian Processes. AISTATS 2024 (below: [ScaML]).

Conditioning the joint multi-task kernel of [ScaML] Lemma 1 on the meta-data gives the test-task
prior of Theorem 1, built from the fitted meta-task GPs (:mod:`headstart._transfer.metafit`):

    m(x)     = sum_m w_m mu_m(x)
    k(x, x') = k_t(x, x') + sum_m w_m^2 Sigma_m(x, x')

with ``mu_m`` and ``Sigma_m`` meta-task ``m``'s posterior mean and covariance, ``w_m >= 0`` the
task weights and ``k_t`` a squared-exponential ARD residual kernel (``ScaML(target_offset=c)``
adds the constant ``c^2`` to ``k_t``: an offset ``delta ~ N(0, c^2)`` between the target and
the weighted sources, integrated out; ``target_offset="fit"`` fits ``c^2`` with the other
hyperparameters; an extension, not the paper's). The test posterior is
standard GP conditioning on this prior ([ScaML] Eq. 7; the paper's Eq. 1 writes ``m(x)`` where
``m(X_t)`` is meant):

    mu_t(x)  = m(x) + k(x, X_t) A^{-1} (y_t - m(X_t))
    var_t(x) = k(x, x) - k(x, X_t) A^{-1} k(X_t, x),       A = k(X_t, X_t) + sigma_t^2 I

**Units** ([ScaML] App. C.2). The test targets are normalized with the mean and standard
deviation of the *pooled* targets ``y_t`` and ``y_{1:M}`` (test statistics alone are volatile
early on). The meta posteriors are used in raw units and mapped into that space:
``m <- (m - ybar) / s``, ``Sigma <- Sigma / s^2``; ``k_t`` lives in the normalized space, hence its
broad priors. Everything here uses targets to be *maximized*.

**Fit** ([ScaML] Eq. 9). ``theta_t = (ell, s_t, sigma_t^2, w_1..w_M)`` (and ``c^2`` with
``target_offset="fit"``, prior as ``s_t``'s; ``c^2 = 0`` before any test data) maximizes
``log N(z_t; m(X_t), A) + log p(theta_t)`` with ``mu_m(X_t)`` and ``Sigma_m(X_t, X_t)`` cached, so
one evaluation costs ``O(M N_t^2 + N_t^3)``. Priors (App. C.5, densities in the parameter itself,
as GPyTorch applies them): ``ell ~ LogNormal(0.5, 1.5)``, ``s_t ~ LogNormal(-2, 3)``,
``sigma_t^2 ~ LogNormal(-8, 2)``, ``w_m ~ Gamma(1, 1)``; bounds ``ell, s_t in [1e-4, 1e2]``,
``sigma_t^2 in [1e-8, 1e-2]``, ``w_m >= 1e-10``. L-BFGS-B runs from the previous fit (with
``w = 1/M``, as the reference code, and with the previous ``w``) and from :data:`N_PRIOR_STARTS`
prior draws, batched and decoupled; the best MAP wins. The gradient is in closed form
(:meth:`_TestObjective.value_and_grad`), and L-BFGS-B stops at a relative decrease of
:data:`FIT_FACTR` (``ScaML(fit_factr=1e7)``: SciPy's and BoTorch's default). With no test data the
model keeps the initial values ``w = 1/M``, ``ell = 1``, ``s_t = 0.1``, ``sigma_t^2 = 1e-3``.
Against the settings of before issue 18 (``factr`` 1e7, restarts every 5 observations, 2,048
screening points) the regret stayed within noise on four of the paper's families, 10 seeds each
(``docs/benchmarks/scaml_paper_fit/``).

**Restart schedule** (a speed/quality trade-off the paper leaves open). The paper re-draws the
five prior starts at every BO iteration. The prior starts are the slow ones (they often run to the
iteration cap, while warm starts converge in a few dozen steps), so :class:`ScaML` draws them for
the first :data:`FULL_RESTARTS_UNTIL` observations and then on a geometric schedule: after
:data:`RESTART_EVERY` new observations or a share :data:`RESTART_GROWTH` of the observations at
the last restart, whichever is more (as :class:`headstart._gp.surrogate.MaternGP`'s insurance
refits; ``O(log n)`` restarts over a study). ``ScaML(restart_every=1, restart_growth=0)``
restores the paper's schedule.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import scipy.linalg
import torch

from headstart._engine.numerics import robust_cholesky, standardize
from headstart._gp.batched import BatchedGP
from headstart._gp.fit import minimize
from headstart._gp.fit_settings import N_PRIOR_STARTS, SE_COORDS, Limits
from headstart._gp.hyperprior import SCAML_TEST_HYPERPRIOR, HyperPrior
from headstart._gp.kernels import se_np
from headstart._gp.surrogate import MaternGP
from headstart._gp.warping import warp_targets
from headstart._model_options import OUTPUT_WARPS
from headstart._transfer.averaging import AveragedPosterior, Part, evidence_weights
from headstart._transfer.base import TransferSurrogate
from headstart._transfer.defaults import SCAML_FIT_FACTR as FIT_FACTR
from headstart._transfer.defaults import SCAML_HANDOVER as HANDOVER
from headstart._transfer.defaults import SCAML_HANDOVER_MARGIN as HANDOVER_MARGIN
from headstart._transfer.defaults import SCAML_HANDOVER_MODE as HANDOVER_MODE
from headstart._transfer.defaults import SCAML_HANDOVER_MODES as HANDOVER_MODES
from headstart._transfer.defaults import SCAML_OUTPUT_WARP as OUTPUT_WARP
from headstart._transfer.defaults import SCAML_PRUNE_THRESHOLD as PRUNE_THRESHOLD
from headstart._transfer.defaults import SCAML_RESTART_EVERY as RESTART_EVERY
from headstart._transfer.defaults import SCAML_RESTART_GROWTH as RESTART_GROWTH
from headstart._transfer.defaults import SCAML_SCREENING_POINTS as SCREENING_POINTS
from headstart._transfer.defaults import check_target_offset
from headstart._transfer.metafit import fit_meta_gps, warped_tasks
from headstart.exceptions import ModelFittingError

MIN_WEIGHT = 1e-10
FULL_RESTARTS_UNTIL = 5  # prior restarts at every call while there are at most this many points
MIN_TRIALS_FOR_SHARES = 3  # weight_summary() apportions variation from this many observations
HANDOVER_MIN_TRIALS = 5  # the hand-over compares the models from this many observations on
# A fitted offset variance c^2 (ScaML(target_offset="fit")): its prior is k_t's signal variance's,
# LogNormal(-2, 3), whose density peaks near 0 (exp(-11)), so the offset stays off unless the
# target's observations ask for it; the box (normalized units) and the first start
OFFSET_VARIANCE_BOUNDS = (1e-8, 1e2)
INITIAL_OFFSET_VARIANCE = 1e-2


def raw_log_evidence(mll: float, scale: float, n: int) -> float:
    r"""``log p(y)`` of ``n`` raw targets from ``log p(z)`` of ``z = (y - c) / scale``: the
    change of variables subtracts ``n log scale``, so models that normalize differently (ScaML-GP
    with the pooled statistics, GP-BO with the target's own) compare on the same ``y``."""
    return float(mll) - n * math.log(scale)


@dataclass(frozen=True)
class ScaMLParams:
    r"""Test-task hyperparameters ``theta_t``.

    Args:
        weights: ``M`` task weights ``w_m >= 0``.
        lengthscales: ``d`` lengthscales of the residual kernel ``k_t``.
        outputscale: Signal variance of ``k_t`` (normalized units).
        noise: Test noise variance ``sigma_t^2`` (normalized units).
        offset_variance: A fitted offset's variance ``c^2`` (``ScaML(target_offset="fit")``;
            normalized units), ``None`` when it is not a parameter.
    """

    weights: np.ndarray
    lengthscales: np.ndarray
    outputscale: float
    noise: float
    offset_variance: float | None = None

    @classmethod
    def initial(cls, n_tasks: int, dim: int, *, fit_offset: bool = False) -> ScaMLParams:
        """The starting values of [ScaML]'s reference setup: ``w = 1/M``, ``ell = 1``, ``s = 0.1``,
        ``sigma^2 = 1e-3`` (:data:`~headstart._gp.hyperprior.SCAML_TEST_HYPERPRIOR`'s); a fitted
        offset variance starts at :data:`INITIAL_OFFSET_VARIANCE`."""
        ell, s, noise = SCAML_TEST_HYPERPRIOR.initial_values(dim)
        offset = INITIAL_OFFSET_VARIANCE if fit_offset else None
        return cls(np.full(n_tasks, 1.0 / max(n_tasks, 1)), ell, s, noise, offset)

    def to_raw(self) -> np.ndarray:
        """``(log ell, log s_t, log sigma_t^2, w[, log c^2])``: the vector L-BFGS-B works on."""
        scales = [math.log(self.outputscale), math.log(self.noise)]
        offset = [] if self.offset_variance is None else [math.log(self.offset_variance)]
        return np.concatenate([np.log(self.lengthscales), scales, self.weights, offset])

    @classmethod
    def from_raw(cls, raw: np.ndarray, dim: int, *, fit_offset: bool = False) -> ScaMLParams:
        raw = np.asarray(raw, dtype=np.float64)
        end = len(raw) - 1 if fit_offset else len(raw)
        return cls(
            np.maximum(raw[dim + 2 : end], MIN_WEIGHT),
            np.exp(raw[:dim]),
            float(np.exp(raw[dim])),
            float(np.exp(raw[dim + 1])),
            float(np.exp(raw[-1])) if fit_offset else None,
        )


@dataclass(frozen=True)
class TaskMoments:
    """Per-task count, mean and (population) variance of the raw meta-task targets."""

    n: np.ndarray
    mean: np.ndarray
    var: np.ndarray

    @classmethod
    def of(cls, ys: list[np.ndarray]) -> TaskMoments:
        return cls(
            np.array([len(y) for y in ys], dtype=np.float64),
            np.array([float(np.mean(y)) for y in ys]),
            np.array([float(np.var(y)) for y in ys]),
        )


def pooled_stats(moments: TaskMoments, y_t: np.ndarray) -> tuple[float, float]:
    r"""Mean and standard deviation of the pooled targets ``y_t`` and ``y_{1:M}`` ([ScaML] C.2).

    A constant pool gets standard deviation 1.
    """
    n = moments.n
    total = n.sum() + len(y_t)
    mean = (float((moments.mean * n).sum()) + float(np.sum(y_t))) / total
    sq = float((n * (moments.var + moments.mean**2)).sum()) + float(np.sum(np.square(y_t)))
    std = math.sqrt(max(sq / total - mean * mean, 0.0))
    return mean, (std if std > 1e-12 * max(1.0, abs(mean)) else 1.0)


class ScaMLPosterior:
    r"""ScaML-GP's test posterior (Eq. 7) at fixed hyperparameters, in normalized units.

    Implements the posterior interface of :mod:`headstart._transfer` (means, variances and their
    gradients in ``x``), so :class:`headstart._engine.acquisition.Criterion` works on it unchanged.

    Args:
        meta: Fitted meta-task GPs (raw units, maximized targets).
        X_t: ``n x d`` test inputs in ``[0, 1]``; ``n`` may be 0.
        z_t: ``n`` normalized test targets ``(y_t - ybar) / s``.
        params: Test hyperparameters.
        ybar, scale: The pooled normalization (:func:`pooled_stats`).
        task_sd: ``M`` standard deviations of the raw meta targets (for pruning).
        prune_threshold: Tasks with ``w_i sd_i M / sum_j w_j sd_j`` below this are left out of
            the prediction (the reference implementation's speed-up; 0 keeps every task).
        screening_points: Sobol points the acquisition search screens (each point costs
            ~``M_active N_m (2 N_m + N_t)`` flops: as many as the reference code screens).
        offset_variance: ``c^2``: a constant offset ``delta ~ N(0, c^2)`` (normalized units)
            between the target and the weighted sources, integrated out, so ``k_t`` gains the
            constant ``c^2`` (0: the paper's model, without the offset).
    """

    includes_noise = False
    mll: float  # log N(z_t; m(X_t), A) of the normalized targets at these hyperparameters

    def __init__(
        self,
        meta: BatchedGP,
        X_t: np.ndarray,
        z_t: np.ndarray,
        params: ScaMLParams,
        ybar: float,
        scale: float,
        *,
        task_sd: np.ndarray | None = None,
        prune_threshold: float = PRUNE_THRESHOLD,
        screening_points: int = SCREENING_POINTS,
        offset_variance: float = 0.0,
    ) -> None:
        self.meta = meta
        self.is_cat = np.asarray(meta.is_cat, dtype=bool)
        self.X_t = np.asarray(X_t, dtype=np.float64).reshape(-1, len(self.is_cat))
        self.z_t = np.asarray(z_t, dtype=np.float64).reshape(-1)
        self.params = params
        self.ybar, self.scale = float(ybar), float(scale)
        self.screening_points = int(screening_points)
        self.offset_variance = float(offset_variance)
        self._settings = {
            "task_sd": task_sd,
            "prune_threshold": prune_threshold,
            "screening_points": self.screening_points,
            "offset_variance": self.offset_variance,
        }
        w = np.asarray(params.weights, dtype=np.float64)
        if prune_threshold > 0.0 and len(w) and task_sd is not None:
            sd = np.asarray(task_sd, dtype=np.float64)
            share = w * sd * len(w) / max(float((w * sd).sum()), 1e-300)
            w = np.where(share >= prune_threshold, w, 0.0)
        self.active_weights = w
        # s_t of the residual kernel k_t, plus the offset's constant c^2 (the prior variance
        # wherever k_t(x, x) enters; the gradients in x see only the SE part)
        self.residual_scale = float(params.outputscale) + self.offset_variance
        # The protocol's prior variance scale of f: the residual's plus the weighted meta GPs'
        # (each s_m y_std_m^2 in raw units), in the normalized units of this posterior.
        meta_scales = meta.params.outputscale * meta.y_std**2 / self.scale**2
        self.outputscale = self.residual_scale + float(np.sum(w * w * meta_scales))
        self.lengthscales = _search_lengthscales(meta, w, params.lengthscales)
        self._inv_sq_ell = np.asarray(params.lengthscales, dtype=np.float64) ** -2.0
        self._meta = meta.weighted(w, w * w, self.X_t)
        n = len(self.z_t)
        if n:
            mean_X, _, cross_X = self._meta(self.X_t)
            K = cross_X / scale**2 + self._test_kernel(self.X_t)
            K[np.diag_indices(n)] += params.noise
            self.L = robust_cholesky(torch.from_numpy(K)).numpy()
            resid = self.z_t - (mean_X - self.ybar) / self.scale
            a = scipy.linalg.solve_triangular(self.L, resid, lower=True)
            self.alpha = scipy.linalg.solve_triangular(self.L, a, lower=True, trans="T")
            self.mll = float(
                -0.5 * (a @ a) - np.log(np.diagonal(self.L)).sum() - 0.5 * n * math.log(2 * math.pi)
            )
        else:
            self.L = np.zeros((0, 0))
            self.alpha = np.zeros(0)
            self.mll = 0.0

    def fantasize(self, X: np.ndarray, z: np.ndarray) -> ScaMLPosterior:
        """This posterior after also observing ``z`` (normalized units) at ``X``, same parameters."""
        X = np.asarray(X, dtype=np.float64).reshape(-1, len(self.is_cat))
        return ScaMLPosterior(
            self.meta,
            np.concatenate([self.X_t, X]),
            np.concatenate([self.z_t, np.asarray(z, dtype=np.float64).reshape(-1)]),
            self.params,
            self.ybar,
            self.scale,
            **self._settings,
        )

    # -- prior pieces ---------------------------------------------------------------------------
    def _se(self, X: np.ndarray, Z: np.ndarray | None = None) -> np.ndarray:
        """``k_t``'s SE part at ``(X, Z)`` (``Z`` the test inputs by default)."""
        Z = self.X_t if Z is None else Z
        return se_np(X, Z, self.is_cat, self.params.lengthscales, self.params.outputscale)

    def _test_kernel(self, X: np.ndarray, Z: np.ndarray | None = None) -> np.ndarray:
        """``k_t(X, Z)``: the SE part plus the offset's constant (if any)."""
        k = self._se(X, Z)
        if self.offset_variance:
            k += self.offset_variance
        return k

    def prior(self, X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Theorem 1 prior mean and variance at ``X`` (normalized units), before test data."""
        mean, var, _ = self._meta(X)
        return (mean - self.ybar) / self.scale, var / self.scale**2 + self.residual_scale

    def _solve(self, X: np.ndarray, cross: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``k(X, X_t)`` (``m x n``) and ``beta = A^{-1} k(X_t, X)`` (``m x n``)."""
        kx = cross / self.scale**2 + self._test_kernel(X)
        beta = scipy.linalg.cho_solve((self.L, True), kx.T, check_finite=False).T
        return kx, beta

    # -- posterior interface --------------------------------------------------------------------
    def posterior(self, X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        r"""Marginal posterior mean and variance (Eq. 7): ``m`` each."""
        X = np.asarray(X, dtype=np.float64)
        mean, var, cross = self._meta(X)
        prior_mean = (mean - self.ybar) / self.scale
        prior_var = var / self.scale**2 + self.residual_scale
        if not len(self.z_t):
            return prior_mean, np.maximum(prior_var, 1e-12)
        kx = cross / self.scale**2 + self._test_kernel(X)  # m x n
        V = scipy.linalg.solve_triangular(self.L, kx.T, lower=True, check_finite=False)
        return prior_mean + kx @ self.alpha, np.maximum(prior_var - (V * V).sum(0), 1e-12)

    def posterior_and_grad(
        self, X: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        r"""Posterior mean and variance with gradients in ``X``.

        With ``k_x = k(x, X_t)`` and ``beta = A^{-1} k_x``:

            d mu_t / dx  = d m / dx + (d k_x / dx)^T alpha
            d var_t / dx = d k(x, x) / dx - 2 (d k_x / dx)^T beta

        where ``d k_t(x, x) / dx = 0`` (stationary) and the meta terms come from
        :meth:`~headstart._transfer.metafit.BatchedGP.weighted`.
        """
        X = np.asarray(X, dtype=np.float64)
        s2 = self.scale**2
        if not len(self.z_t):
            mean, var, _, dmean, dvar, _ = self._meta(X, grad=True)
            mu, dmu = (mean - self.ybar) / self.scale, dmean / self.scale
            v, dv = var / s2 + self.residual_scale, dvar / s2
        else:
            # The meta cross-covariance gradient is only needed contracted with alpha and beta
            # (d x n_t numbers per point instead of d x n_t x n_t): let the meta GPs contract it.
            def weights(X_chunk: np.ndarray, cross_chunk: np.ndarray) -> np.ndarray:
                _, beta_chunk = self._solve(X_chunk, cross_chunk)
                alpha = np.broadcast_to(self.alpha, beta_chunk.shape)
                return np.stack([alpha, beta_chunk], axis=1) / s2  # c x 2 x n

            mean, var, cross, dmean, dvar, dproj = self._meta(X, grad=True, contract=weights)
            kx, beta = self._solve(X, cross)
            kt = self._se(X)
            diff = X[:, None, :] - self.X_t[None, :, :]  # m x n x d
            num = np.where(self.is_cat, 0.0, self._inv_sq_ell)
            dkt = -kt[:, :, None] * diff * num  # d k_t(x, X_t) / dx (the constant has none)
            mu = (mean - self.ybar) / self.scale + kx @ self.alpha
            dmu = dmean / self.scale + dproj[:, 0] + np.einsum("mnd,n->md", dkt, self.alpha)
            v = var / s2 + self.residual_scale - (kx * beta).sum(1)
            dv = dvar / s2 - 2.0 * (dproj[:, 1] + np.einsum("mnd,mn->md", dkt, beta))
        small = v < 1e-12
        dv[small] = 0.0
        return mu, np.maximum(v, 1e-12), dmu, dv

    def joint_posterior(self, X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        r"""Joint posterior mean (``m``) and covariance (``m x m``) at ``X``."""
        X = np.asarray(X, dtype=np.float64)
        w = self.active_weights
        mean, _, cov_meta = self.meta.weighted(w, w * w, X)(X)
        prior_mean = (mean - self.ybar) / self.scale
        cov = cov_meta / self.scale**2 + self._test_kernel(X, X)
        if not len(self.z_t):
            return prior_mean, cov
        _, _, cross = self._meta(X)
        kx = cross / self.scale**2 + self._test_kernel(X)
        V = scipy.linalg.solve_triangular(self.L, kx.T, lower=True, check_finite=False)
        return prior_mean + kx @ self.alpha, cov - V.T @ V


def _search_lengthscales(meta: BatchedGP, w: np.ndarray, test_ell: np.ndarray) -> np.ndarray:
    """Per-column length scale for preconditioning the acquisition search.

    The weighted geometric mean of the active meta GPs' lengthscales, capped by ``k_t``'s.
    """
    ell = np.asarray(test_ell, dtype=np.float64)
    if len(w) and w.sum() > 0:
        log_meta = -0.5 * np.log(meta.params.inv_sq_lengthscales)  # M x d
        ell = np.minimum(ell, np.exp((w[:, None] * log_meta).sum(0) / w.sum()))
    return ell


# --- the MAP fit of the test hyperparameters (Eq. 9) ----------------------------------------
class _TestObjective:
    r"""``-(log N(z_t; m(X_t), A) + log p(theta_t))`` for a batch of raw parameter vectors."""

    def __init__(
        self,
        U: np.ndarray,
        S: np.ndarray,
        X_t: np.ndarray,
        z_t: np.ndarray,
        is_cat: np.ndarray,
        ybar: float,
        scale: float,
        prior: HyperPrior = SCAML_TEST_HYPERPRIOR,
        offset_variance: float = 0.0,
        fit_offset: bool = False,
    ) -> None:
        n, d = X_t.shape
        self.d, self.M = d, len(U)
        self.prior = prior
        self.offset_variance = float(offset_variance)  # c^2: a constant added to A
        # c^2 a parameter instead (the raw vectors' last column, log c^2), prior as s_t's
        self.fit_offset = bool(fit_offset)
        self.U = torch.from_numpy((U - ybar) / scale)  # M x n, the meta means normalized
        # (w @ U - ybar) / s = w @ ((U - ybar) / s) + ybar (sum w - 1) / s
        self.offset = ybar / scale
        self.S = torch.from_numpy(S / scale**2)  # M x n x n
        self.S_flat = self.S.reshape(len(self.S), n * n)  # for the gradient's matmuls
        diff = X_t[:, None, :] - X_t[None, :, :]
        sq = np.where(is_cat, (diff != 0).astype(np.float64), diff * diff)
        self.sq = torch.from_numpy(sq)  # n x n x d
        self.sq_flat = self.sq.reshape(n * n, d)
        self.z = torch.from_numpy(z_t)
        self.eye = torch.eye(n, dtype=torch.float64)

    def __call__(self, raw: torch.Tensor) -> torch.Tensor:
        """``b`` MAP objectives for ``b x (d + 2 + M [+ 1])`` raw vectors."""
        d = self.d
        log_ell, log_s, log_noise = raw[:, :d], raw[:, d], raw[:, d + 1]
        w = raw[:, d + 2 : d + 2 + self.M]
        n = self.z.shape[0]
        mean = w @ self.U + self.offset * (w.sum(-1, keepdim=True) - 1.0)  # b x n
        r2 = self.sq @ torch.exp(-2.0 * log_ell).T  # n x n x b
        K = torch.exp(log_s)[:, None, None] * torch.exp(-0.5 * r2.permute(2, 0, 1))
        K = K + torch.einsum("bm,mij->bij", w * w, self.S)
        K = K + torch.exp(log_noise)[:, None, None] * self.eye
        if self.offset_variance:
            K = K + self.offset_variance
        if self.fit_offset:
            K = K + torch.exp(raw[:, -1])[:, None, None]
        L = robust_cholesky(K)
        resid = (self.z - mean).unsqueeze(-1)
        a = torch.linalg.solve_triangular(L, resid, upper=False).squeeze(-1)
        mll = (
            -0.5 * (a * a).sum(-1)
            - torch.log(torch.diagonal(L, dim1=-2, dim2=-1)).sum(-1)
            - 0.5 * n * math.log(2.0 * math.pi)
        )
        ell, s_t, noise = torch.exp(log_ell), torch.exp(log_s), torch.exp(log_noise)
        log_prior = (
            self.prior.log_prob(torch.log(ell), torch.log(s_t), torch.log(noise))
            - w.sum(-1)  # Gamma(1, 1) on the weights
        )
        if self.fit_offset:
            log_prior = log_prior + self.prior.outputscale.value_and_grad(raw[:, -1])[0]
        return -(mll + log_prior)

    def value_and_grad(self, raw: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        r"""The objective of ``b`` raw vectors and its gradient, in closed form (no autograd).

        With ``A = s_t E + sum_m w_m^2 S_m + sigma_t^2 I + c^2 1 1^T`` (``E = exp(-r^2 / 2)``;
        ``c^2`` the offset variance, fixed or fitted; ``P`` below uses ``E``'s part only), the
        residual
        ``r = z_t - m(X_t)``, ``alpha = A^{-1} r`` and ``W = A^{-1} - alpha alpha^T`` (R&W Eq.
        5.9, as :func:`headstart._transfer.metafit.neg_log_posterior_and_grad`):

            d / d log ell_j   = 1/2 ell_j^{-2} sum_ik (W * s_t E)_ik D_j,ik
            d / d log s_t     = 1/2 sum_ik (W * s_t E)_ik
            d / d log sigma^2 = 1/2 sigma^2 tr(W)
            d / d w_m         = w_m sum_ik W_ik S_m,ik - alpha^T (u_m + ybar / s) + 1

        (``u_m`` the normalized meta mean at ``X_t``; the last 1 is the Gamma(1, 1) prior), minus
        the hyperprior's gradient. A fitted offset (``fit_offset``) adds
        ``d / d log c^2 = 1/2 c^2 sum_ik W_ik`` and its prior's gradient. Autograd through the
        batched Cholesky costs more than the factorization itself; the values equal
        :meth:`__call__` (tested).
        """
        d = self.d
        log_ell, log_s, log_noise = raw[:, :d], raw[:, d], raw[:, d + 1]
        w = raw[:, d + 2 : d + 2 + self.M]
        n = self.z.shape[0]
        b = raw.shape[0]
        inv_sq_ell = torch.exp(-2.0 * log_ell)  # b x d
        # every contraction below is one matmul on flattened n x n matrices
        Kf = torch.exp(log_s[:, None, None] - 0.5 * (inv_sq_ell @ self.sq_flat.T).view(b, n, n))
        noise = torch.exp(log_noise)
        K = Kf + ((w * w) @ self.S_flat).view(b, n, n)
        if self.offset_variance:
            K += self.offset_variance
        if self.fit_offset:
            K += torch.exp(raw[:, -1])[:, None, None]
        K.diagonal(dim1=-2, dim2=-1).add_(noise.unsqueeze(-1))
        L = robust_cholesky(K)
        resid = self.z - (w @ self.U + self.offset * (w.sum(-1, keepdim=True) - 1.0))  # b x n
        W = torch.cholesky_inverse(L)
        alpha = (W @ resid.unsqueeze(-1)).squeeze(-1)  # b x n
        nll = (
            0.5 * (resid * alpha).sum(-1)
            + torch.log(torch.diagonal(L, dim1=-2, dim2=-1)).sum(-1)
            + 0.5 * n * math.log(2.0 * math.pi)
        )
        W -= alpha.unsqueeze(-1) * alpha.unsqueeze(-2)
        P = (W * Kf).reshape(b, n * n)
        g_ell = 0.5 * inv_sq_ell * (P @ self.sq_flat)
        g_s = 0.5 * P.sum(-1)
        g_noise = 0.5 * noise * torch.diagonal(W, dim1=-2, dim2=-1).sum(-1)
        g_w = (
            w * (W.reshape(b, n * n) @ self.S_flat.T)
            - alpha @ self.U.T
            - self.offset * alpha.sum(-1, keepdim=True)
            + 1.0
        )
        parts = [g_ell, g_s[:, None], g_noise[:, None], g_w]
        log_prior, g_prior = self.prior.value_and_grad(log_ell, log_s, log_noise)  # one pass
        value = nll - log_prior + w.sum(-1)
        if self.fit_offset:
            v_c, g_prior_c = self.prior.outputscale.value_and_grad(raw[:, -1])
            g_c = 0.5 * torch.exp(raw[:, -1]) * W.sum((-2, -1)) - g_prior_c
            parts.append(g_c[:, None])
            value = value - v_c
        grad = torch.cat(parts, dim=-1)
        grad[:, : d + 2] -= g_prior
        return value, grad


def _bounds(d: int, M: int, deterministic: bool, fit_offset: bool = False) -> np.ndarray:
    """``(log ell, log s_t, log sigma_t^2)`` in the SE GPs' box, then ``w_m >= MIN_WEIGHT``
    (and ``log c^2`` in :data:`OFFSET_VARIANCE_BOUNDS`)."""
    rows = [SE_COORDS.bounds(d, deterministic=deterministic), np.tile([MIN_WEIGHT, np.inf], (M, 1))]
    if fit_offset:
        rows.append(np.log([OFFSET_VARIANCE_BOUNDS]))
    return np.vstack(rows)


def prior_starts(
    n: int,
    d: int,
    M: int,
    rng: np.random.Generator,
    bounds: np.ndarray,
    fit_offset: bool = False,
) -> np.ndarray:
    """``n`` raw starting vectors drawn from the hyperpriors, clipped to the bounds (with
    ``fit_offset``, a last column ``log c^2`` from ``s_t``'s prior)."""
    parts = [SCAML_TEST_HYPERPRIOR.sample_log(rng, (n,), d), rng.gamma(1.0, 1.0, (n, M))]
    if fit_offset:
        parts.append(SCAML_TEST_HYPERPRIOR.outputscale.sample_log(rng, (n, 1)))
    return np.clip(np.concatenate(parts, axis=1), bounds[:, 0], bounds[:, 1])


def fit_test_params(
    meta: BatchedGP,
    moments: TaskMoments,
    X_t: np.ndarray,
    y_t: np.ndarray,
    *,
    rng: np.random.Generator,
    previous: ScaMLParams | None = None,
    n_prior_starts: int = N_PRIOR_STARTS,
    deterministic: bool = False,
    meta_at_train: tuple[np.ndarray, np.ndarray] | None = None,
    factr: float = FIT_FACTR,
    offset_variance: float = 0.0,
    fit_offset: bool = False,
) -> tuple[ScaMLParams, float, float, float]:
    r"""MAP of ``theta_t`` ([ScaML] Eq. 9) given the fitted meta GPs.

    Args:
        meta: Fitted meta-task GPs.
        moments: The meta targets' moments (pooled normalization).
        X_t: ``n x d`` test inputs; y_t: ``n`` raw targets to maximize.
        rng: Draws the prior starts.
        previous: Warm starts: its ``ell``, ``s_t``, ``sigma_t^2`` with ``w = 1/M`` and with
            its own ``w`` (only the latter when ``n_prior_starts == 0``).
        n_prior_starts: Starts drawn from the priors.
        deterministic: Pin ``sigma_t^2`` at
            :data:`~headstart._gp.fit_settings.DETERMINISTIC_NOISE`.
        meta_at_train: Cached ``(mu_m(X_t), Sigma_m(X_t, X_t))`` (``M x n``, ``M x n x n``).
        factr: L-BFGS-B's relative-decrease tolerance (:data:`FIT_FACTR`).
        offset_variance: ``c^2`` of :class:`ScaMLPosterior`.
        fit_offset: Fit ``c^2`` too (``offset_variance`` must then be 0): the result's
            ``offset_variance``.

    Returns:
        ``(params, objective, ybar, scale)``: the fit, its MAP objective and the pooled
        normalization.
    """
    X_t = np.asarray(X_t, dtype=np.float64)
    y_t = np.asarray(y_t, dtype=np.float64)
    n, d = X_t.shape
    M = meta.n_tasks
    ybar, scale = pooled_stats(moments, y_t)
    init = ScaMLParams.initial(M, d, fit_offset=fit_offset)
    if n == 0:
        return init, float("nan"), ybar, scale
    warm = [init]
    same_form = previous is not None and (previous.offset_variance is not None) == fit_offset
    if previous is not None and same_form and len(previous.lengthscales) == d:
        warm = [
            ScaMLParams(
                init.weights,
                previous.lengthscales,
                previous.outputscale,
                previous.noise,
                previous.offset_variance,
            )
        ]
        if len(previous.weights) == M:
            # without prior restarts, only the previous fit itself (a quick, local refit)
            warm = [*warm, previous] if n_prior_starts else [previous]
    U, S = meta_at_train if meta_at_train is not None else (meta.mean(X_t), meta.cov(X_t, X_t))
    objective = _TestObjective(
        U, S, X_t, (y_t - ybar) / scale, meta.is_cat, ybar, scale,
        offset_variance=offset_variance, fit_offset=fit_offset,
    )  # fmt: skip
    bounds = _bounds(d, M, deterministic, fit_offset)
    warm_raw = np.clip(np.stack([p.to_raw() for p in warm]), bounds[:, 0], bounds[:, 1])
    x0 = np.concatenate([warm_raw, prior_starts(n_prior_starts, d, M, rng, bounds, fit_offset)])

    def fun(_: np.ndarray, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        # per-observation objective, as BoTorch's ExactMarginalLogLikelihood: tolerances then
        # mean the same for every N_t
        values, grad = objective.value_and_grad(torch.from_numpy(x))
        return values.numpy() / n, grad.numpy() / n

    xs, fs = minimize(fun, x0, bounds, limits=Limits(factr=factr))
    fs = fs * n
    best = int(np.argmin(fs))
    return ScaMLParams.from_raw(xs[best], d, fit_offset=fit_offset), float(fs[best]), ybar, scale


class ScaML(TransferSurrogate):
    r"""ScaML-GP as a transfer surrogate: meta GPs fitted once, test model refitted per call.

    Args:
        meta_tasks: The earlier tasks (:class:`headstart.sources.MetaTask`).
        is_cat: ``d`` mask of categorical columns.
        seed: Seeds the meta fit's prior starts.
        deterministic: Pin the test noise (noise-free objectives).
        meta: Already fitted meta GPs for exactly these tasks (e.g. from the storage cache).
        prune_threshold: See :class:`ScaMLPosterior`.
        restart_every: Draw the prior restarts after at least this many new observations
            (after the first :data:`FULL_RESTARTS_UNTIL`) ...
        restart_growth: ... and at least this share of the observations at the last restart;
            ``restart_every=1, restart_growth=0`` re-draws them at every call, as the paper.
        fit_factr: L-BFGS-B's relative-decrease tolerance of the test fit (:data:`FIT_FACTR`;
            SciPy's and BoTorch's default is ``1e7``).
        screening_points: Sobol points the acquisition search screens
            (:data:`SCREENING_POINTS`).
        handover: From :data:`HANDOVER_MIN_TRIALS` observations on, also fit GP-BO's own
            target-only GP (:class:`headstart._gp.surrogate.MaternGP`) and suggest from it
            whenever it explains the target's observations better: a larger log marginal
            likelihood of the raw targets (:func:`raw_log_evidence`) than ScaML-GP's. The
            sources then stop steering the search once the target contradicts them.
        handover_margin: How many nats the target-only GP's log evidence must exceed
            ScaML-GP's for the hand-over (0: any excess; Kass and Raftery 1995 call a log Bayes
            factor above 1 positive and above 3 strong evidence). With ``"average"``, the prior
            log odds against the target-only GP.
        handover_mode: ``"switch"`` suggests from the model with the larger evidence;
            ``"average"`` from both, weighted by their posterior probabilities
            (:mod:`headstart._transfer.averaging`): the sources keep part of their pull while
            the evidence is close, and lose it as the target contradicts them.
        target_offset: The prior standard deviation of a constant offset between the target
            and the weighted sources, in the pooled normalized units (``offset_variance`` of
            :class:`ScaMLPosterior` is its square): the sources then predict the target's
            shape wherever it has no observations, not also its level. 0 is the paper's model,
            where the zero-mean ``k_t`` can only shift the prediction near the observations.
            ``"fit"``: ``c^2`` is a hyperparameter, fitted with the others (prior LogNormal(-2,
            3) as ``s_t``'s, whose density peaks near 0): the offset then grows only as far as
            the target's observations ask for it.
        output_warp: A monotone map of each task's values, each by its own values, before
            anything is fitted (:func:`headstart._transfer.metafit.warped_tasks`): ``"none"``
            (the paper's), ``"yeo-johnson"`` or ``"copula"`` (the per-task Gaussian copula of
            Salinas et al., ICML 2020). The target's values are mapped the same way at every
            ``condition``, so the model and the acquisition work in the warped units. The
            target is then standardized by its own values: its level relative to the sources
            is not used (one observation says nothing; two, only their order), and the
            weights, residual variance and evidence are in warped units.
    """

    def __init__(
        self,
        meta_tasks,
        is_cat: np.ndarray,
        *,
        seed: int = 0,
        deterministic: bool = False,
        meta: BatchedGP | None = None,
        prune_threshold: float = PRUNE_THRESHOLD,
        restart_every: int = RESTART_EVERY,
        restart_growth: float = RESTART_GROWTH,
        fit_factr: float = FIT_FACTR,
        screening_points: int = SCREENING_POINTS,
        handover: bool = HANDOVER,
        handover_margin: float = HANDOVER_MARGIN,
        handover_mode: str = HANDOVER_MODE,
        target_offset: float | str = 0.0,
        output_warp: str = OUTPUT_WARP,
    ) -> None:
        if handover_mode not in HANDOVER_MODES:
            raise ValueError(
                f"handover_mode must be one of {HANDOVER_MODES}; got {handover_mode!r}."
            )
        if output_warp not in OUTPUT_WARPS:
            raise ValueError(f"output_warp must be one of {OUTPUT_WARPS}; got {output_warp!r}.")
        self.output_warp = output_warp
        meta_tasks = warped_tasks(meta_tasks, output_warp)
        self.names = [t.name for t in meta_tasks]
        self.handover = bool(handover)
        self.handover_margin = float(handover_margin)
        self.handover_mode = handover_mode
        self.target_gp_weight = 0.0  # the target-only GP's share of the last suggestion's model
        self._plain: MaternGP | None = None  # the target-only GP of the hand-over
        self.handed_over = False  # the target-only GP led the last condition() (weight > 0.5)
        self.restart_every = max(int(restart_every), 1)
        self.restart_growth = max(float(restart_growth), 0.0)
        self.fit_factr = float(fit_factr)
        self.screening_points = int(screening_points)
        check_target_offset(target_offset)
        self.fit_offset = target_offset == "fit"
        self.offset_variance = 0.0 if self.fit_offset else float(target_offset) ** 2
        self._n_at_restart = -(10**9)
        self.is_cat = np.asarray(is_cat, dtype=bool)
        self.meta = meta if meta is not None else fit_meta_gps(meta_tasks, self.is_cat, seed=seed)
        self.moments = TaskMoments.of([t.y_max() for t in meta_tasks])
        self.deterministic = deterministic
        self.prune_threshold = prune_threshold
        self.params: ScaMLParams | None = None
        self.ybar, self.scale = pooled_stats(self.moments, np.zeros(0))
        self._last_X, self._last_y = np.zeros((0, len(self.is_cat))), np.zeros(0)
        self._cached_X: np.ndarray | None = None
        self._cached: tuple[np.ndarray, np.ndarray] | None = None

    def _meta_at(self, X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``(mu_m(X), Sigma_m(X, X))`` for all tasks, reusing the rows of the previous call."""
        old = self._cached_X
        if old is None or len(old) > len(X) or not np.array_equal(old, X[: len(old)]):
            U, S = self.meta.mean(X), self.meta.cov(X, X)
        elif len(old) == len(X):
            U, S = self._cached
        else:
            o, n = len(old), len(X)
            U_old, S_old = self._cached
            new = X[o:]
            C = self.meta.cov(new, X)  # M x (n - o) x n
            S = np.empty((S_old.shape[0], n, n))
            S[:, :o, :o] = S_old
            S[:, o:, :] = C
            S[:, :o, o:] = np.swapaxes(C[:, :, :o], 1, 2)
            U = np.concatenate([U_old, self.meta.mean(new)], axis=1)
        self._cached_X, self._cached = X.copy(), (U, S)
        return U, S

    def condition(
        self, X_t: np.ndarray, y_t: np.ndarray, rng: np.random.Generator
    ) -> tuple[ScaMLPosterior, np.ndarray]:
        """Refit ``theta_t`` on the test data and return ``(posterior, normalized y_t)``."""
        X_t, y_t = self._test_data(X_t, y_t)
        if self.output_warp != "none":
            y_t = warp_targets(y_t, self.output_warp)
        cached = self._meta_at(X_t) if len(y_t) else None
        n = len(y_t)
        gap = max(self.restart_every, math.ceil(self.restart_growth * self._n_at_restart))
        restart = n <= FULL_RESTARTS_UNTIL or n - self._n_at_restart >= gap
        if restart:
            self._n_at_restart = n
        params, _, ybar, scale = fit_test_params(
            self.meta,
            self.moments,
            X_t,
            y_t,
            rng=rng,
            previous=self.params,
            n_prior_starts=N_PRIOR_STARTS if restart else 0,
            deterministic=self.deterministic,
            meta_at_train=cached,
            factr=self.fit_factr,
            offset_variance=self.offset_variance,
            fit_offset=self.fit_offset,
        )
        self.params, self.ybar, self.scale = params, ybar, scale
        self._last_X, self._last_y = X_t, y_t
        z_t = (y_t - ybar) / scale
        posterior = ScaMLPosterior(
            self.meta,
            X_t,
            z_t,
            params,
            ybar,
            scale,
            task_sd=np.sqrt(self.moments.var),
            prune_threshold=self.prune_threshold,
            screening_points=self.screening_points,
            offset_variance=self._offset_variance(params),
        )
        self.handed_over, self.target_gp_weight = False, 0.0
        if self.handover and n >= HANDOVER_MIN_TRIALS:
            try:
                gp, z_plain = self._plain_gp().condition(X_t, y_t, rng)
            except ModelFittingError:  # the target-only GP is a hedge: without it, stay
                return posterior, z_t
            _, centre, spread = standardize(y_t)  # MaternGP's own scaling
            own = raw_log_evidence(posterior.mll, scale, n)
            other = raw_log_evidence(gp.mll, spread, n)
            if self.handover_mode == "average":
                w = evidence_weights(np.array([own, other]), np.array([0.0, self.handover_margin]))
                self.target_gp_weight = float(w[1])
                self.handed_over = self.target_gp_weight > 0.5
                parts = [
                    Part(posterior, float(w[0])),
                    Part(gp, float(w[1]), (centre - ybar) / scale, spread / scale),
                ]
                return AveragedPosterior(parts), z_t
            if other > own + self.handover_margin:
                self.handed_over, self.target_gp_weight = True, 1.0
                return gp, z_plain
        return posterior, z_t

    def _offset_variance(self, params: ScaMLParams) -> float:
        """``c^2``: fitted (``target_offset="fit"``; 0 before any test data) or fixed."""
        fitted = params.offset_variance
        if not self.fit_offset:
            return self.offset_variance
        return float(fitted) if fitted is not None and len(self._last_y) else 0.0

    def _initial(self) -> ScaMLParams:
        return ScaMLParams.initial(len(self.names), len(self.is_cat), fit_offset=self.fit_offset)

    def _plain_gp(self) -> MaternGP:
        if self._plain is None:
            self._plain = MaternGP(self.is_cat, deterministic=self.deterministic)
        return self._plain

    def weight_summary(self) -> dict[str, Any]:
        r"""Readable weights: each source's share of the model's variation, and standard errors.

        With ``X`` the sources' and the target's inputs together and ``r = y_t - sum_j w_j
        mu_j(X_t)`` what the weighted sources leave unexplained of the observed values (raw
        units):

            share_m = Var_X[w_m mu_m] / (sum_j Var_X[w_j mu_j] + Var[r])

        and the residual share ``Var[r] / (...)``. Unlike the raw weights, shares do not depend
        on a source's scale (a source 1000x larger gets a 1000x smaller weight, the same share).
        ``None`` with fewer than :data:`MIN_TRIALS_FOR_SHARES` observations. The standard errors
        are a Laplace approximation: the square roots of the diagonal of the inverse Hessian of
        the MAP objective (Eq. 9) at the fit (``nan`` before any target data, or where the
        Hessian is not positive definite).

        Returns:
            ``{"shares": {name: share} | None, "residual_share": float | None,
            "weight_se": {name: se}}``.
        """
        params = self.params or self._initial()
        se = {n: float(v) for n, v in zip(self.names, self._weightse_np(params), strict=True)}
        out: dict[str, Any] = {"shares": None, "residual_share": None, "weight_se": se}
        if len(self._last_y) < MIN_TRIALS_FOR_SHARES:
            return out
        X = np.concatenate([self._meta_inputs(), self._last_X])
        spread = np.var(params.weights[:, None] * self.meta.mean(X), axis=1)  # raw units
        fitted = params.weights @ self.meta.mean(self._last_X)
        residual = float(np.var(self._last_y - fitted))
        total = max(float(spread.sum()) + residual, 1e-300)
        out["shares"] = {n: float(v / total) for n, v in zip(self.names, spread, strict=True)}
        out["residual_share"] = residual / total
        return out

    def _meta_inputs(self, limit: int = 2048) -> np.ndarray:
        """Up to ``limit`` of the sources' inputs (evenly spaced rows, deterministic)."""
        X = self.meta.inputs()
        if len(X) > limit:
            X = X[np.linspace(0, len(X) - 1, limit).astype(int)]
        return X

    def _weightse_np(self, params: ScaMLParams) -> np.ndarray:
        """The weights' standard errors: the square roots of the diagonal of their block of the
        inverse Hessian (``nan`` where an entry is not positive)."""
        var = np.diagonal(self._inverse_hessian_block(params))
        return np.where(var > 0, np.sqrt(np.abs(var)), np.nan)

    def weight_covariance(self, params: ScaMLParams | None = None) -> np.ndarray:
        """``M x M`` Laplace covariance of the weights at ``params`` (the last fit by default):
        their block of the inverse Hessian of the MAP objective (Eq. 9) over the free test
        parameters. ``nan`` before any target data, where the Hessian is singular, or where the
        block is not positive semi-definite (a fit whose weights sit on their bound of 0 is not
        a local maximum in every direction, and the approximation does not hold there)."""
        block = self._inverse_hessian_block(self.params if params is None else params)
        if not np.isfinite(block).all():
            return block
        block = 0.5 * (block + block.T)
        tolerance = 1e-10 * max(float(np.abs(np.diagonal(block)).max()), 1e-300)
        if np.linalg.eigvalsh(block).min() < -tolerance:
            return np.full_like(block, np.nan)
        return block

    def _inverse_hessian_block(self, params: ScaMLParams | None) -> np.ndarray:
        """The weights' ``M x M`` block of the inverse Hessian of the MAP objective at
        ``params`` (``nan`` without target data or where the Hessian is singular)."""
        M, d = len(self.names), len(self.is_cat)
        X_t, y_t = self._last_X, self._last_y
        if params is None or self.params is None or not len(y_t):
            return np.full((M, M), np.nan)
        U, S = self._meta_at(X_t)
        z = (y_t - self.ybar) / self.scale
        objective = _TestObjective(
            U, S, X_t, z, self.is_cat, self.ybar, self.scale,
            offset_variance=self.offset_variance, fit_offset=self.fit_offset,
        )  # fmt: skip
        raw = torch.from_numpy(params.to_raw())
        free = np.ones(len(raw), dtype=bool)
        free[d + 1] = not self.deterministic  # a pinned noise is not a parameter
        idx = torch.from_numpy(np.flatnonzero(free))

        def f(sub: torch.Tensor) -> torch.Tensor:
            full = raw.clone()
            full[idx] = sub
            return objective(full[None])[0]

        try:
            H = torch.autograd.functional.hessian(f, raw[idx]).numpy()
            cov = np.linalg.inv(0.5 * (H + H.T))
        except (np.linalg.LinAlgError, ModelFittingError):
            return np.full((M, M), np.nan)
        block = slice(-M - 1, -1) if self.fit_offset else slice(-M, None)
        return cov[block, block]

    def diagnostics(self) -> dict[str, Any]:
        """The base diagnostics, :meth:`weight_summary`, a fitted offset's standard deviation
        ``c`` (normalized units) and, with the hand-over, the target-only GP's weight in the last
        suggestion (0 or 1 when switching)."""
        out = {**super().diagnostics(), **self.weight_summary()}
        if self.fit_offset:  # None until a fit on test data
            fitted = self.params is not None and len(self._last_y)
            out["target_offset"] = math.sqrt(self._offset_variance(self.params)) if fitted else None
        if self.handover:
            out["target_gp_weight"] = self.target_gp_weight
        return out

    def report(self) -> dict[str, float]:
        """Each source's weight ``w_m`` (the initial ``1/M`` before any test data)."""
        params = self.params or self._initial()
        return {name: float(w) for name, w in zip(self.names, params.weights, strict=True)}

    def state(self) -> dict:
        """The last MAP test hyperparameters and weights (warm start of the next fit)."""
        if self.params is None:
            return {}
        state = {"params": self.params.to_raw().tolist(), "n_at_restart": self._n_at_restart}
        if self.fit_offset:  # the raw vector's last entry is log c^2, not a weight
            state["fit_offset"] = True
        if self._plain is not None and self._plain.state():
            state["target_gp"] = self._plain.state()
        return state

    def load_state(self, state: dict) -> None:
        raw = np.asarray(state.get("params", []), dtype=np.float64)
        same_form = bool(state.get("fit_offset", False)) == self.fit_offset
        if same_form and len(raw) == len(self._initial().to_raw()):
            self.params = ScaMLParams.from_raw(raw, len(self.is_cat), fit_offset=self.fit_offset)
            self._n_at_restart = int(state.get("n_at_restart", self._n_at_restart))
        if isinstance(state.get("target_gp"), dict):
            self._plain_gp().load_state(state["target_gp"])

    def residual_variance(self) -> float:
        """Signal variance of the residual kernel ``k_t``'s SE part in raw units
        (``s_t * scale^2``; without ``target_offset``'s constant)."""
        params = self.params or self._initial()
        return float(params.outputscale * self.scale**2)


__all__ = [
    "ScaML",
    "ScaMLParams",
    "ScaMLPosterior",
    "TaskMoments",
    "fit_test_params",
    "pooled_stats",
]
