r"""``M`` fitted exact GPs with cached factors: predictions batched over the GPs, in raw units.

GP ``m`` (its own data ``X_m``, ``z_m``, hyperparameters and kernel ``k_m = s_m f(r^2)``) predicts

    mu_m(x)        = k_m(x, X_m) K_m^{-1} z_m                              (R&W Eq. 2.25)
    Sigma_m(x, x') = k_m(x, x') - k_m(x, X_m) K_m^{-1} k_m(X_m, x')        (R&W Eq. 2.26)

with ``K_m = k_m(X_m, X_m) + sigma_m^2 I``, mapped to raw units by ``y = y_mean_m + y_std_m z``.
The meta-task GPs of ScaML-GP and RGPE, StackGP's levels and the baselines' target GPs are such a
batch. Gradients in ``x`` (numeric columns; categorical columns have gradient 0), with
``k_i = k_m(x, X_mi)``, ``G_i = s_m f'(r_i^2)`` (``= -k_i / 2`` for SE),
``dk_i / dx_j = 2 w_j G_i (x_j - X_ij)`` and ``beta = K^{-1} k(X, x)``:

    d mean / dx_j = 2 w_j sum_i alpha_i G_i (x_j - X_ij)
    d var  / dx_j = -4 w_j sum_i beta_i G_i (x_j - X_ij)

Internally the GPs are padded to ``N = max_m n_m`` rows (``X`` at the cube centre, ``z = 0``,
kernel rows masked to 0, ``K`` identity on the padding), which leaves every posterior exactly
unchanged. Cached per GP: ``L^{-1}`` of ``K = L L^T`` and ``alpha = K^{-1} z``. Kernel rows come
from :class:`~headstart._gp.kernels.FeatureMaps` (one ``bmm`` per chunk of points).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

from headstart._engine.numerics import robust_cholesky, standardize
from headstart._engine.threads import limit_threads
from headstart._gp.kernels import (
    DTYPE,
    SE,
    FeatureMaps,
    StationaryKernel,
    batched_kernel,
    log_kernel,
    vocabulary,
)
from headstart._gp.params import GPParams

MIN_VAR = 1e-12  # variances of moments() are clamped here (raw units)
# prediction works on row chunks of ~this many entries (2 MB: cache-sized)
_CHUNK_ELEMENTS = 1 << 18
_LOG_2PI = math.log(2.0 * math.pi)


def unpack_tasks(
    tasks: Sequence[Any], d: int | None = None, names: Sequence[str] | None = None
) -> tuple[list[np.ndarray], list[np.ndarray], list[str]]:
    """``(Xs, ys, names)`` of :class:`~headstart._meta.MetaTask` objects or ``(X, y)`` pairs.

    ``y`` is in the *maximize* convention (``MetaTask.y_max()``; pairs are taken as given). With
    ``d``, each task is checked: ``X`` of shape ``n x d`` with ``n >= 1`` finite rows.

    Raises:
        ValueError: no task, or (with ``d``) a task of another shape, empty or not finite.
    """
    Xs, ys, task_names = [], [], []
    for m, task in enumerate(tasks):
        if hasattr(task, "y_max"):
            X, y, name = task.X, task.y_max(), str(task.name)
        else:
            X, y = task
            name = f"task{m}"
        X = np.asarray(X, dtype=np.float64)
        y = np.asarray(y, dtype=np.float64).reshape(-1)
        if d is not None:
            if X.ndim != 2 or X.shape[1] != d or X.shape[0] != len(y):
                raise ValueError(
                    f"Meta-task {m}: expected X of shape (n, {d}) and n values of y; got X "
                    f"{X.shape} and {len(y)} values."
                )
            if len(y) == 0:
                raise ValueError(f"Meta-task {m} ({name!r}) has no observations.")
            if not (np.isfinite(X).all() and np.isfinite(y).all()):
                raise ValueError(f"Meta-task {m} ({name!r}) contains NaN or infinite values.")
        Xs.append(X)
        ys.append(y)
        task_names.append(name)
    if not Xs:
        raise ValueError("At least one meta-task is needed.")
    if names is not None:
        task_names = [str(v) for v in names]
        if len(task_names) != len(Xs):
            raise ValueError(f"Got {len(task_names)} names for {len(Xs)} meta-tasks.")
    return Xs, ys, task_names


def standardize_each(ys: Sequence[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """Per-task mean and standard deviation (:func:`headstart._engine.numerics.standardize`)."""
    stats = np.array([standardize(y)[1:] for y in ys]).reshape(-1, 2)
    return stats[:, 0], stats[:, 1]


class BatchedGP:
    r"""``M`` fitted GPs with cached factors; build with :meth:`build` or :meth:`from_json`.

    Attributes:
        names: GP (task) names.
        is_cat: ``d`` boolean mask of categorical columns.
        params: Hyperparameters (standardized units).
        y_mean, y_std: ``M`` unit maps ``raw = y_mean + y_std * standardized``.
        n_train: ``M`` numbers of observations.
        log_marginal_likelihoods: ``M`` values of ``log p(z_m | X_m, theta_m)`` (standardized).
        kernel: :data:`~headstart._gp.kernels.SE` or :data:`~headstart._gp.kernels.MATERN52`.
    """

    def __init__(
        self,
        names: list[str],
        is_cat: np.ndarray,
        params: GPParams,
        y_mean: np.ndarray,
        y_std: np.ndarray,
        X: torch.Tensor,
        mask: torch.Tensor,
        L_inv: torch.Tensor,
        alpha: torch.Tensor,
        log_marginal_likelihoods: np.ndarray,
        kernel: StationaryKernel = SE,
    ) -> None:
        self.names = list(names)
        self.is_cat = np.asarray(is_cat, dtype=bool)
        self.params = params
        self.kernel = kernel
        self.y_mean = np.asarray(y_mean, dtype=np.float64).reshape(-1)
        self.y_std = np.asarray(y_std, dtype=np.float64).reshape(-1)
        self.log_marginal_likelihoods = np.asarray(log_marginal_likelihoods, dtype=np.float64)
        self.X, self.mask, self.L_inv, self.alpha = X, mask, L_inv, alpha
        self.n_train = mask.sum(-1).numpy().astype(int)
        self.is_cat_t = torch.from_numpy(self.is_cat)
        self.w = torch.from_numpy(params.inv_sq_lengthscales)
        self.w_num = self.w * (~self.is_cat_t).to(DTYPE)  # gradients: 0 on categorical columns
        self.s = torch.from_numpy(params.outputscale)
        self.log_s = torch.log(self.s)
        self.maps, self.psi_train = self.features(X[mask > 0])

    # --- construction --------------------------------------------------------------------------
    @classmethod
    def build(
        cls,
        Xs: Sequence[np.ndarray],
        zs: Sequence[np.ndarray],
        is_cat: np.ndarray,
        params: GPParams,
        *,
        names: Sequence[str] | None = None,
        y_mean: Sequence[float] | None = None,
        y_std: Sequence[float] | None = None,
        kernel: StationaryKernel = SE,
    ) -> BatchedGP:
        """Factorize every GP's ``K`` at ``params`` (standardized targets ``zs``; ``y_mean`` /
        ``y_std`` map them to raw units, default 0 / 1)."""
        from headstart._gp.exact import pad

        M = len(zs)
        X, z, mask, n = pad(list(Xs), list(zs), len(is_cat))
        with torch.no_grad(), limit_threads():
            K = batched_kernel(
                X,
                X,
                torch.from_numpy(np.asarray(is_cat, dtype=bool)),
                torch.from_numpy(params.inv_sq_lengthscales),
                torch.from_numpy(params.outputscale),
                kernel=kernel,
                symmetric=True,
            )
            K = K * (mask.unsqueeze(-1) * mask.unsqueeze(-2))
            K = K + torch.diag_embed(torch.from_numpy(params.noise)[:, None] * mask + (1.0 - mask))
            L = robust_cholesky(K, diag_mask=mask, label="A GP kernel matrix")
            eye = torch.eye(L.shape[-1], dtype=DTYPE).expand_as(L).contiguous()
            L_inv = torch.linalg.solve_triangular(L, eye, upper=False)
            a = (L_inv @ z.unsqueeze(-1)).squeeze(-1)
            alpha = (L_inv.transpose(-1, -2) @ a.unsqueeze(-1)).squeeze(-1)
            diag = torch.diagonal(L, dim1=-2, dim2=-1)
            lml = -0.5 * (a * a).sum(-1) - torch.log(diag).sum(-1) - 0.5 * n * _LOG_2PI
        return cls(
            [f"task{m}" for m in range(M)] if names is None else list(names),
            is_cat,
            params,
            np.zeros(M) if y_mean is None else y_mean,
            np.ones(M) if y_std is None else y_std,
            X,
            mask,
            L_inv,
            alpha,
            lml.numpy(),
            kernel,
        )

    @classmethod
    def from_tasks(
        cls,
        tasks: Sequence[Any],
        is_cat: np.ndarray,
        params: GPParams,
        *,
        names: Sequence[str] | None = None,
        y_mean: np.ndarray | None = None,
        y_std: np.ndarray | None = None,
    ) -> BatchedGP:
        """GPs at given hyperparameters on tasks' data (no fit), each standardized by its own
        mean and standard deviation unless ``y_mean`` / ``y_std`` are given."""
        is_cat = np.asarray(is_cat, dtype=bool).reshape(-1)
        Xs, ys, task_names = unpack_tasks(tasks, len(is_cat), names)
        if params.inv_sq_lengthscales.shape != (len(Xs), len(is_cat)):
            raise ValueError(
                f"params hold {params.inv_sq_lengthscales.shape} lengthscales for "
                f"{len(Xs)} tasks of dimension {len(is_cat)}."
            )
        mean, std = standardize_each(ys)
        mean = mean if y_mean is None else np.asarray(y_mean, dtype=np.float64)
        std = std if y_std is None else np.asarray(y_std, dtype=np.float64)
        zs = [(y - mu) / sd for y, mu, sd in zip(ys, mean, std, strict=True)]
        return cls.build(Xs, zs, is_cat, params, names=task_names, y_mean=mean, y_std=std)

    def to_json(self) -> dict:
        """Names, hyperparameters and ``y`` statistics as JSON-safe values (not the data)."""
        p = self.params
        return {
            "names": list(self.names),
            "inv_sq_lengthscales": [[float(v) for v in row] for row in p.inv_sq_lengthscales],
            "outputscale": [float(v) for v in p.outputscale],
            "noise": [float(v) for v in p.noise],
            "y_mean": [float(v) for v in self.y_mean],
            "y_std": [float(v) for v in self.y_std],
        }

    @classmethod
    def from_json(cls, data: dict, tasks: Sequence[Any], is_cat: np.ndarray) -> BatchedGP:
        """Rebuild from :meth:`to_json` output and the same data (no refit)."""
        params = GPParams(
            np.asarray(data["inv_sq_lengthscales"], dtype=np.float64).reshape(
                len(data["names"]), -1
            ),
            np.asarray(data["outputscale"], dtype=np.float64),
            np.asarray(data["noise"], dtype=np.float64),
        )
        return cls.from_tasks(
            tasks,
            is_cat,
            params,
            names=data["names"],
            y_mean=np.asarray(data["y_mean"], dtype=np.float64),
            y_std=np.asarray(data["y_std"], dtype=np.float64),
        )

    # --- selection -----------------------------------------------------------------------------
    @property
    def n_tasks(self) -> int:
        """Number of GPs ``M``."""
        return len(self.names)

    @property
    def prior_var(self) -> np.ndarray:
        """``M`` prior variances ``y_std^2 s`` (raw units)."""
        return self.y_std**2 * self.params.outputscale

    def inputs(self) -> np.ndarray:
        """All GPs' training inputs, stacked (``sum_m n_m x d``)."""
        return self.X[self.mask > 0].numpy()

    def select(self, idx: Sequence[int] | np.ndarray) -> BatchedGP:
        """The GPs ``idx`` (no refit; padding trimmed to their largest)."""
        idx = np.asarray(idx, dtype=int).reshape(-1)
        t = torch.from_numpy(idx)
        size = int(self.mask[t].sum(-1).max()) if len(idx) else 0
        return BatchedGP(
            [self.names[i] for i in idx],
            self.is_cat,
            self.params.select(idx),
            self.y_mean[idx],
            self.y_std[idx],
            self.X[t, :size],
            self.mask[t, :size],
            self.L_inv[t, :size, :size],
            self.alpha[t, :size],
            self.log_marginal_likelihoods[idx],
            self.kernel,
        )

    # --- kernel rows ---------------------------------------------------------------------------
    def features(self, *extra: torch.Tensor) -> tuple[FeatureMaps, torch.Tensor]:
        """Feature maps whose vocabulary covers the training data and ``extra``; train features."""
        maps = FeatureMaps(self.w, self.log_s, self.is_cat_t, vocabulary(self.is_cat_t, *extra))
        return maps, maps.psi(self.X, self.mask > 0)

    def k_train(self, phi: torch.Tensor, psi_train: torch.Tensor | None = None) -> torch.Tensor:
        """``k_m(X, X_m)`` from the features of ``X``: ``M x m x N``, 0 in the padded columns."""
        E = log_kernel(phi, self.psi_train if psi_train is None else psi_train)
        if self.kernel is SE:
            return E.exp_()
        return self.kernel.gram_from_log_se(E.nan_to_num_(neginf=-1e300), self.log_s)

    def _k_and_g(self, phi: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``k_m(X, X_m)`` and ``G = s f'(r^2)`` (``M x m x N`` each; 0 in padded columns)."""
        E = log_kernel(phi, self.psi_train)
        if self.kernel is SE:
            k = E.exp_()
            return k, -0.5 * k
        r2 = E.nan_to_num_(neginf=-1e300).neg_().add_(self.log_s[:, None, None]).mul_(2.0)
        f, df = self.kernel.f_and_df(r2.clamp_min_(0.0))
        s = self.s[:, None, None]
        return s * f, s * df

    def chunks(self, m: int, per_row: int) -> list[slice]:
        """Row chunks of ``m`` points whose ``M x chunk x per_row`` temporaries are cache-sized."""
        step = max(1, _CHUNK_ELEMENTS // max(1, self.n_tasks * per_row))
        return [slice(i, min(i + step, m)) for i in range(0, m, step)]

    def _as_tensor(self, X: np.ndarray) -> torch.Tensor:
        X = np.asarray(X, dtype=np.float64)
        return torch.from_numpy(X.reshape(-1, len(self.is_cat)))

    # --- prediction ----------------------------------------------------------------------------
    def mean(self, X: np.ndarray) -> np.ndarray:
        r"""Posterior means ``mu_m(X)`` in raw units: ``M x m``."""
        Xt = self._as_tensor(X)
        out = torch.empty(self.n_tasks, len(Xt), dtype=DTYPE)
        with torch.no_grad():
            for c in self.chunks(len(Xt), self.mask.shape[1]):
                k = self.k_train(self.maps.phi(Xt[c]))
                out[:, c] = (k @ self.alpha.unsqueeze(-1)).squeeze(-1)
        return self.y_mean[:, None] + self.y_std[:, None] * out.numpy()

    def moments(self, X: np.ndarray, grad: bool = False) -> tuple[np.ndarray, ...]:
        r"""Per-GP posterior means and variances of ``f_m`` (raw units) at ``X``.

        Args:
            X: ``m x d`` points.
            grad: Also return the gradients in ``X`` (module docstring).

        Returns:
            ``(mean M x m, var M x m)`` and, if ``grad``, ``(dmean M x m x d, dvar M x m x d)``.
            Variances are clamped at :data:`MIN_VAR` (their gradient is 0 there).
        """
        Xt = self._as_tensor(X)
        M, m, d = self.n_tasks, len(Xt), len(self.is_cat)
        N = self.mask.shape[1]
        mean = torch.empty(M, m, dtype=DTYPE)
        var = torch.empty(M, m, dtype=DTYPE)
        if grad:
            dmean = torch.empty(M, m, d, dtype=DTYPE)
            dvar = torch.empty(M, m, d, dtype=DTYPE)
        scale2 = torch.from_numpy(self.y_std)[:, None] ** 2
        with torch.no_grad():
            for c in self.chunks(m, N * (d if grad else 1)):
                Xc = Xt[c]
                phi = self.maps.phi(Xc)
                k, G = self._k_and_g(phi) if grad else (self.k_train(phi), None)
                mean[:, c] = torch.einsum("mcn,mn->mc", k, self.alpha)
                V = self.L_inv @ k.transpose(-1, -2)  # M x N x c
                v = self.s[:, None] - (V * V).sum(-2)
                var[:, c] = (scale2 * v).clamp_min(MIN_VAR)
                if grad:
                    two_w = 2.0 * self.w_num[:, None, :]
                    Ga = G * self.alpha.unsqueeze(-2)  # M x c x N
                    dmean[:, c] = two_w * (Xc[None] * Ga.sum(-1, keepdim=True) - Ga @ self.X)
                    beta = self.L_inv.transpose(-1, -2) @ V  # M x N x c
                    Gb = beta.transpose(-1, -2) * G  # M x c x N
                    dv = -2.0 * two_w * (Xc[None] * Gb.sum(-1, keepdim=True) - Gb @ self.X)
                    dvar[:, c] = scale2.unsqueeze(-1) * dv * (scale2 * v >= MIN_VAR).unsqueeze(-1)
        out = (self.y_mean[:, None] + self.y_std[:, None] * mean.numpy(), var.numpy())
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
            tasks: Indices of the GPs to return (default: all).
        """
        gps = self if tasks is None else self.select(tasks)
        Xt, Zt = self._as_tensor(X), self._as_tensor(Z)
        with torch.no_grad():
            maps, psi_train = gps.features(gps.X[gps.mask > 0], Xt, Zt)
            phi_X, phi_Z = maps.phi(Xt), maps.phi(Zt)
            VX = gps.L_inv @ gps.k_train(phi_X, psi_train).transpose(-1, -2)
            VZ = gps.L_inv @ gps.k_train(phi_Z, psi_train).transpose(-1, -2)
            k_xz = gps.kernel.gram_from_log_se(log_kernel(phi_X, maps.psi(Zt)), gps.log_s)
            cov = k_xz - VX.transpose(-1, -2) @ VZ
        return (gps.y_std**2)[:, None, None] * cov.numpy()

    def weighted(self, a: np.ndarray, b: np.ndarray, Z: np.ndarray):
        """Weighted sums of the posteriors against fixed points ``Z``
        (:class:`~headstart._gp.weighted.WeightedSum`)."""
        from headstart._gp.weighted import WeightedSum

        return WeightedSum(self, a, b, Z)


__all__ = ["MIN_VAR", "BatchedGP", "standardize_each", "unpack_tasks"]
