r"""Shared pieces of the transfer baselines (RGPE, StackGP): single SE-ARD GPs and sampling.

The baselines use the meta-GPs' model (Tighineanu et al., AISTATS 2024, App. C.5: "other
baselines" share the meta-GP priors): a zero-mean squared-exponential ARD GP on standardized
targets (:mod:`headstart._transfer.se_kernel`) with

    ell_j ~ Gamma(3, 6),  s ~ Gamma(2, 0.15),  log sigma^2 ~ N(-8, 2^2),
    ell_j, s in [1e-4, 1e2],  sigma^2 in [1e-8, 1e-2],

fitted by MAP exactly as :func:`headstart._transfer.metafit.fit_meta_gps` does (same objective
:func:`~headstart._transfer.metafit.neg_log_posterior`, per-datum scaling, L-BFGS-B from a first
start plus prior draws). :func:`fit_se_gp` adds what the test-task model of a baseline needs: a
warm start and a noise variance pinned at :data:`DETERMINISTIC_NOISE` for noise-free objectives.

:class:`GPBatch` evaluates ``M`` such GPs (each with its own data and hyperparameters) *per task*
-- means, variances, their gradients in ``x`` and covariances -- where
:class:`~headstart._transfer.metafit.MetaGPs` offers weighted *sums* over tasks. The posterior
formulas are R&W Eqs. 2.25-2.26; with ``k_i = k(x, X_i)`` and ``dk_i / dx_j = -w_j k_i (x_j -
X_ij)`` (numeric columns; categorical columns have gradient 0):

    d mean / dx_j = -w_j sum_i alpha_i k_i (x_j - X_ij)
    d var  / dx_j =  2 w_j sum_i beta_i k_i (x_j - X_ij),     beta = K^{-1} k(X, x)
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

from headstart._engine.lbfgsb import batched_lbfgsb
from headstart._engine.numerics import robust_cholesky
from headstart._gp.fit_settings import FIT_MAXITER, FIT_PGTOL, N_PRIOR_STARTS, NOISE_BOUNDS
from headstart._transfer.hyperprior import META_HYPERPRIOR
from headstart._transfer.metafit import (
    LENGTHSCALE_BOUNDS,
    OUTPUTSCALE_BOUNDS,
    MetaGPParams,
    neg_log_posterior,
)
from headstart._transfer.se_kernel import DTYPE, se_kernel

DETERMINISTIC_NOISE = 1e-6  # noise-free objectives: sigma^2 pinned here (standardized units)
MIN_VAR = 1e-12  # posterior variances are clamped here (as headstart._gp.model.ExactGP)
_CHUNK_ELEMENTS = 1 << 20  # prediction works on row chunks of at most ~this many kernel entries


def unpack_tasks(tasks: Sequence[Any]) -> tuple[list[np.ndarray], list[np.ndarray], list[str]]:
    """``(Xs, ys, names)`` of :class:`~headstart.sources.MetaTask` objects or ``(X, y)`` pairs.

    ``y`` is in the *maximize* convention (``MetaTask.y_max()``; pairs are taken as given).
    """
    Xs, ys, names = [], [], []
    for m, task in enumerate(tasks):
        if hasattr(task, "y_max"):
            X, y, name = task.X, task.y_max(), str(task.name)
        else:
            X, y = task
            name = f"task{m}"
        Xs.append(np.asarray(X, dtype=np.float64))
        ys.append(np.asarray(y, dtype=np.float64).reshape(-1))
        names.append(name)
    if not Xs:
        raise ValueError("At least one meta-task is needed.")
    return Xs, ys, names


def _raw_bounds(d: int, deterministic: bool) -> np.ndarray:
    noise = (DETERMINISTIC_NOISE, DETERMINISTIC_NOISE) if deterministic else NOISE_BOUNDS
    rows = [LENGTHSCALE_BOUNDS] * d + [OUTPUTSCALE_BOUNDS, noise]
    return np.log(np.asarray(rows, dtype=np.float64))


def fit_se_gp(
    X: np.ndarray,
    z: np.ndarray,
    is_cat: np.ndarray,
    *,
    rng: np.random.Generator,
    init: MetaGPParams | None = None,
    n_prior_starts: int = N_PRIOR_STARTS,
    deterministic: bool = False,
) -> MetaGPParams:
    r"""MAP hyperparameters of one zero-mean SE-ARD GP on standardized targets ``z``.

    Minimizes ``-(log p(z | theta) + log p(theta)) / n`` (the meta-GP objective) by L-BFGS-B from
    ``init`` (default ``ell = 0.5, s = 1, sigma^2 = 1e-3``) and ``n_prior_starts`` prior draws,
    batched and decoupled; the best start wins.

    Args:
        X: ``n x d`` inputs in ``[0, 1]`` (``n >= 1``).
        z: ``n`` standardized targets.
        is_cat: ``d`` boolean mask of categorical columns.
        rng: Draws the prior starts.
        init: First start (e.g. the previous fit: a warm start).
        n_prior_starts: Starts drawn from the hyperprior.
        deterministic: Pin ``sigma^2`` at :data:`DETERMINISTIC_NOISE`.

    Returns:
        One-row :class:`~headstart._transfer.metafit.MetaGPParams`.
    """
    X = np.asarray(X, dtype=np.float64)
    n, d = X.shape
    bounds = _raw_bounds(d, deterministic)
    first = META_HYPERPRIOR.initial_raw(d) if init is None else init.to_raw()[0]
    drawn = META_HYPERPRIOR.sample_log(rng, (n_prior_starts,), d)
    x0 = np.clip(np.vstack([first[None, :], drawn]), bounds[:, 0], bounds[:, 1])
    Xt = torch.from_numpy(X)[None]
    zt = torch.from_numpy(np.asarray(z, dtype=np.float64).reshape(1, n))
    mask = torch.ones(1, n, dtype=DTYPE)
    is_cat_t = torch.from_numpy(np.asarray(is_cat, dtype=bool))

    def fun(_: np.ndarray, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        R = len(x)
        raw = torch.from_numpy(x).requires_grad_(True)
        try:
            objective, _ = neg_log_posterior(
                raw,
                Xt.expand(R, n, d),
                zt.expand(R, n),
                mask.expand(R, n),
                torch.full((R,), float(n), dtype=DTYPE),
                is_cat_t,
            )
            (grad,) = torch.autograd.grad(objective.sum() / n, raw)
        except Exception:  # a start wandered into a non-PD kernel: report it as very bad
            return np.full(R, 1e10), np.zeros_like(x)
        return objective.detach().numpy() / n, grad.numpy()

    xs, fs = batched_lbfgsb(fun, x0, bounds, maxiter=FIT_MAXITER, pgtol=FIT_PGTOL)
    fs = np.where(np.isfinite(fs), fs, np.inf)
    return MetaGPParams.from_raw(xs[int(np.argmin(fs))][None, :])


def _chunks(m: int, per_row: int) -> list[slice]:
    step = max(1, _CHUNK_ELEMENTS // max(1, per_row))
    return [slice(i, min(i + step, m)) for i in range(0, m, step)]


class GPBatch:
    r"""``M`` independent SE-ARD GPs with cached factors; per-task predictions in raw units.

    Task ``m`` was fitted on standardized targets ``z_m``; predictions are mapped back with
    ``raw = y_mean_m + y_std_m * standardized``. Tasks are padded to a common size as in
    :class:`~headstart._transfer.metafit.MetaGPs` (kernel rows masked to 0, ``K`` identity on the
    padding), which leaves every posterior unchanged.

    Args:
        Xs: ``M`` input arrays ``n_m x d`` (``n_m >= 1``).
        zs: ``M`` standardized target vectors.
        is_cat: ``d`` boolean mask of categorical columns.
        params: ``M``-row hyperparameters.
        y_mean, y_std: ``M`` standardization constants.
    """

    def __init__(
        self,
        Xs: Sequence[np.ndarray],
        zs: Sequence[np.ndarray],
        is_cat: np.ndarray,
        params: MetaGPParams,
        y_mean: Sequence[float],
        y_std: Sequence[float],
    ) -> None:
        self.is_cat = np.asarray(is_cat, dtype=bool)
        self.params = params
        self.y_mean = np.asarray(y_mean, dtype=np.float64).reshape(-1)
        self.y_std = np.asarray(y_std, dtype=np.float64).reshape(-1)
        self.n_train = np.array([len(z) for z in zs])
        M, N, d = len(zs), int(self.n_train.max()), len(self.is_cat)
        X = np.full((M, N, d), 0.5)
        z = np.zeros((M, N))
        mask = np.zeros((M, N))
        for m, (Xm, zm) in enumerate(zip(Xs, zs, strict=True)):
            X[m, : len(zm)], z[m, : len(zm)], mask[m, : len(zm)] = Xm, zm, 1.0
        self._X, self._mask = torch.from_numpy(X), torch.from_numpy(mask)
        self._is_cat_t = torch.from_numpy(self.is_cat)
        self._w = torch.from_numpy(params.inv_sq_lengthscales)
        self._w_num = self._w * (~self._is_cat_t).to(DTYPE)
        self._s = torch.from_numpy(params.outputscale)
        with torch.no_grad():
            K = se_kernel(self._X, self._X, self._is_cat_t, self._w, self._s, symmetric=True)
            K = K * (self._mask.unsqueeze(-1) * self._mask.unsqueeze(-2))
            noise = torch.from_numpy(params.noise)
            K = K + torch.diag_embed(noise[:, None] * self._mask + (1.0 - self._mask))
            L = robust_cholesky(K)
            eye = torch.eye(N, dtype=DTYPE).expand_as(L)
            self._L_inv = torch.linalg.solve_triangular(L, eye, upper=False)
            a = self._L_inv @ torch.from_numpy(z).unsqueeze(-1)
            self._alpha = (self._L_inv.transpose(-1, -2) @ a).squeeze(-1)  # M x N

    @property
    def n_tasks(self) -> int:
        return len(self.y_mean)

    @property
    def prior_var(self) -> np.ndarray:
        """``M`` prior variances ``y_std^2 s`` (raw units)."""
        return self.y_std**2 * self.params.outputscale

    def _k_train(self, X: torch.Tensor) -> torch.Tensor:
        """``k_m(X, X_m)``: ``M x m x N``, zero in the padded columns."""
        k = se_kernel(X, self._X, self._is_cat_t, self._w, self._s)
        return k * self._mask.unsqueeze(-2)

    def moments(self, X: np.ndarray, grad: bool = False) -> tuple[np.ndarray, ...]:
        r"""Per-task posterior means and variances of ``f_m`` (raw units) at ``X``.

        Args:
            X: ``m x d`` points.
            grad: Also return the gradients in ``X``.

        Returns:
            ``(mean M x m, var M x m)`` and, if ``grad``, ``(dmean M x m x d, dvar M x m x d)``.
            Variances are clamped at :data:`MIN_VAR` (their gradient is 0 there).
        """
        Xt = torch.from_numpy(np.asarray(X, dtype=np.float64).reshape(-1, len(self.is_cat)))
        M, m, d = self.n_tasks, len(Xt), len(self.is_cat)
        N = self._mask.shape[1]
        mean = torch.empty(M, m, dtype=DTYPE)
        var = torch.empty(M, m, dtype=DTYPE)
        if grad:
            dmean = torch.empty(M, m, d, dtype=DTYPE)
            dvar = torch.empty(M, m, d, dtype=DTYPE)
        ys = torch.from_numpy(self.y_std)
        with torch.no_grad():
            for c in _chunks(m, M * N * (d if grad else 1)):
                Xc = Xt[c]
                k = self._k_train(Xc)  # M x c x N
                mean[:, c] = torch.einsum("mcn,mn->mc", k, self._alpha)
                V = self._L_inv @ k.transpose(-1, -2)  # M x N x c
                v = self._s[:, None] - (V * V).sum(-2)
                scale2 = ys[:, None] ** 2
                var[:, c] = (scale2 * v).clamp_min(MIN_VAR)
                if grad:
                    G = k * self._alpha.unsqueeze(-2)  # M x c x N
                    dmean[:, c] = -self._w_num[:, None, :] * (
                        Xc[None] * G.sum(-1, keepdim=True) - G @ self._X
                    )
                    beta = self._L_inv.transpose(-1, -2) @ V  # M x N x c
                    H = beta.transpose(-1, -2) * k  # M x c x N
                    dv = (
                        2.0
                        * self._w_num[:, None, :]
                        * (Xc[None] * H.sum(-1, keepdim=True) - H @ self._X)
                    )
                    dvar[:, c] = scale2.unsqueeze(-1) * dv * (scale2 * v >= MIN_VAR).unsqueeze(-1)
        out = (
            self.y_mean[:, None] + self.y_std[:, None] * mean.numpy(),
            var.numpy(),
        )
        if grad:
            out += (self.y_std[:, None, None] * dmean.numpy(), dvar.numpy())
        return out

    def cov(
        self, X: np.ndarray, Z: np.ndarray, tasks: Sequence[int] | np.ndarray | None = None
    ) -> np.ndarray:
        r"""Posterior covariances ``Sigma_m(X, Z)`` of ``f_m`` (raw units): ``M' x m x p``.

        Sigma_m(x, z) = y_std_m^2 [k_m(x, z) - k_m(x, X_m) K_m^{-1} k_m(X_m, z)]   (R&W Eq. 2.26)

        Args:
            X: ``m x d``; Z: ``p x d``.
            tasks: Indices of the tasks to return (default: all).
        """
        idx = torch.arange(self.n_tasks) if tasks is None else torch.as_tensor(tasks)
        d = len(self.is_cat)
        Xt = torch.from_numpy(np.asarray(X, dtype=np.float64).reshape(-1, d))
        Zt = torch.from_numpy(np.asarray(Z, dtype=np.float64).reshape(-1, d))
        sub = _Subset(self, idx)
        with torch.no_grad():
            VX = sub.L_inv @ sub.k_train(Xt).transpose(-1, -2)
            VZ = sub.L_inv @ sub.k_train(Zt).transpose(-1, -2)
            cov = se_kernel(Xt, Zt, self._is_cat_t, sub.w, sub.s) - VX.transpose(-1, -2) @ VZ
        return (self.y_std[idx.numpy()] ** 2)[:, None, None] * cov.numpy()


class _Subset:
    """The cached tensors of some tasks of a :class:`GPBatch`."""

    def __init__(self, gps: GPBatch, idx: torch.Tensor) -> None:
        self.gps, self.idx = gps, idx
        self.L_inv = gps._L_inv[idx]
        self.w, self.s = gps._w[idx], gps._s[idx]

    def k_train(self, X: torch.Tensor) -> torch.Tensor:
        g, idx = self.gps, self.idx
        k = se_kernel(X, g._X[idx], g._is_cat_t, self.w, self.s)
        return k * g._mask[idx].unsqueeze(-2)


def psd_sample(
    mean: np.ndarray, cov: np.ndarray, n_samples: int, rng: np.random.Generator
) -> np.ndarray:
    r"""Joint Gaussian samples for a batch of ``(mean, cov)``: ``B x n_samples x n``.

    Uses the symmetric square root ``Q diag(sqrt(max(lambda, 0))) Q^T`` of each covariance, which
    needs no jitter for the (near-)singular covariances of posteriors at training points.

    Args:
        mean: ``B x n``; cov: ``B x n x n`` (PSD up to rounding).
        n_samples: Samples per batch member.
        rng: Source of the standard normals.
    """
    evals, evecs = np.linalg.eigh(cov)
    root = evecs * np.sqrt(np.maximum(evals, 0.0))[:, None, :]  # B x n x n, root root^T = cov
    eps = rng.standard_normal((cov.shape[0], n_samples, cov.shape[-1]))
    return mean[:, None, :] + eps @ np.swapaxes(root, -1, -2)


def weighted_log_mean_lengthscales(
    lengthscales: np.ndarray, weights: np.ndarray, fallback: np.ndarray | None = None
) -> np.ndarray:
    """Per-column weighted geometric mean of ``K x d`` lengthscales (acquisition preconditioning)."""
    weights = np.asarray(weights, dtype=np.float64)
    if weights.sum() <= 0:
        return np.ones(lengthscales.shape[1]) if fallback is None else fallback
    return np.exp((weights[:, None] * np.log(lengthscales)).sum(0) / weights.sum())
