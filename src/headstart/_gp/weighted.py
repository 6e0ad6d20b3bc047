r"""Weighted sums of the posteriors of a batch of GPs: ScaML-GP's test prior and RGPE's ensemble.

For GPs ``m`` with posteriors ``mu_m``, ``Sigma_m`` (:class:`~headstart._gp.batched.BatchedGP`)
and weights ``a_m``, ``b_m >= 0``, the sum ``sum_m a_m f_m`` of independent GPs has

    mean(x)     = sum_m a_m mu_m(x),      cov(x, x') = sum_m b_m Sigma_m(x, x')   (b_m = a_m^2)

which is how ScaML-GP's Theorem 1 builds the test-task prior from the meta-task GPs (Tighineanu
et al. 2024) and how RGPE ensembles its base models (Feurer et al. 2018).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import torch

from headstart._engine.threads import limit_threads
from headstart._gp.batched import BatchedGP
from headstart._gp.kernels import DTYPE, SE, log_kernel


class WeightedSum:
    r"""Weighted sums of the meta posteriors, as in ScaML-GP's test prior (Theorem 1) and RGPE.

    For weights ``a_m``, ``b_m`` and fixed points ``Z`` (``p x d``, typically the test inputs
    ``X_t``; ``p`` may be 0), a call at ``X`` (``m x d``) returns, in raw units,

        mean(x)     = sum_m a_m mu_m(x)
        var(x)      = sum_m b_m Sigma_m(x, x)         (each Sigma_m(x, x) clamped at 0)
        cross(x, z) = sum_m b_m Sigma_m(x, z)

    (ScaML-GP: ``a_m = w_m``, ``b_m = w_m^2``; ``b_m >= 0``.) Tasks with ``a_m = b_m = 0`` are
    dropped. ``B_m = K_m^{-1} k_m(X_m, Z)`` is precomputed and stacked with ``L_m^{-1}`` and
    ``alpha_m``, so that after the kernel rows ``k_m(x, X_m)`` (one ``bmm`` and an ``exp``) one
    batched matmul yields the mean, variance and cross terms of every task; the task sums are then
    reductions over the leading dimension. The cost of a call is about
    ``2 M m N (N + p)`` flops plus ``M m (N + p)`` exponentials (and ~3x that with ``grad``), so
    ``M = 512, N = 64, p = 50`` is ~15 GFLOP per 2048 points: seconds on one core. A gradient
    call first builds (once) a stack of ``M N (2 N + 1 + p (d + 1))`` doubles; pass ``contract``
    to skip the ``d p`` part when only contractions of ``d cross`` are needed.

    Gradients in ``x`` (numeric columns; 0 on categorical ones), with ``k_i = k_m(x, X_{m,i})``,
    ``dk_i / dx_j = -w_mj k_i (x_j - X_{m,ij})`` and ``beta_m = K_m^{-1} k_m(X_m, x)``:

        d mean  / dx_j = -sum_m a_m w_mj sum_i alpha_mi k_i (x_j - X_mij)
        d var   / dx_j =  2 sum_m b_m w_mj sum_i beta_mi k_i (x_j - X_mij)
        d cross / dx_j = -sum_m b_m w_mj [k_m(x, z) (x_j - z_j) - sum_i k_i (x_j - X_mij) B_m,iz]

    Args:
        gps: The GPs (SE kernel).
        a: ``M`` mean weights.
        b: ``M`` covariance weights.
        Z: ``p x d`` fixed points.
    """

    def __init__(self, gps: BatchedGP, a: np.ndarray, b: np.ndarray, Z: np.ndarray) -> None:
        a = np.asarray(a, dtype=np.float64).reshape(-1)
        b = np.asarray(b, dtype=np.float64).reshape(-1)
        if a.shape != (gps.n_tasks,) or b.shape != (gps.n_tasks,):
            raise ValueError(f"a and b need {gps.n_tasks} entries; got {a.shape}, {b.shape}.")
        if not (np.isfinite(a).all() and np.isfinite(b).all() and (b >= 0).all()):
            raise ValueError("The weights a must be finite and the weights b finite and >= 0.")
        if gps.kernel is not SE:  # the log-kernel folding below is the SE kernel's
            raise ValueError(f"Weighted sums need SE GPs; these have the {gps.kernel} kernel.")
        self.d = len(gps.is_cat)
        self.active = np.flatnonzero((a != 0) | (b != 0))
        self._g = g = gps.select(self.active)
        self.Z = np.asarray(Z, dtype=np.float64).reshape(-1, self.d)
        Zt = torch.from_numpy(self.Z)
        a, b = a[self.active], b[self.active]
        self._const = float(a @ g.y_mean)
        self._a_alpha = torch.from_numpy(a * g.y_std)[:, None] * g.alpha  # Ma x N, raw units
        bs = b * g.y_std**2  # b_m for standardized-unit posteriors
        self._bs = torch.from_numpy(bs)
        self._bs_w = self._bs[:, None] * g.w_num  # Ma x d
        self._Z = Zt
        with torch.no_grad(), limit_threads():
            self._maps, self._psi_train = g.features(g.X[g.mask > 0], Zt)
            # psi of Z with log b_m folded into h: exp(phi(x) . psi_b(z)) = b_m k_m(x, z)
            psi_Z = self._maps.psi(Zt)
            with np.errstate(divide="ignore"):
                log_bs = torch.from_numpy(np.log(bs))
            psi_Z[..., self.d + 1] += log_bs.unsqueeze(-1)
            self._psi_Z_b = psi_Z
            V = g.L_inv @ g.k_train(self._maps.phi(Zt), self._psi_train).transpose(-1, -2)
            self._bB = self._bs[:, None, None] * (g.L_inv.transpose(-1, -2) @ V)  # b K^-1 k(X, Z)
            # [L^-1; a s^y alpha^T; (b B)^T], stored transposed (Ma x N x R): one matmul
            # k(x, X_m) @ it gives, per point, V = L^-1 k(X_m, x), the mean and the cross terms in
            # rows of R contiguous numbers (sums over them are then cheap)
            self._stacked = (
                torch.cat(
                    [g.L_inv, self._a_alpha.unsqueeze(-2), self._bB.transpose(-1, -2)], dim=-2
                )
                .transpose(-1, -2)
                .contiguous()
            )
        self._stacked_grad: dict[str, torch.Tensor] = {}  # built on the first call with grad

    def _grad_stack(self, full: bool) -> torch.Tensor:
        """``[L^-1; a s^y alpha^T; (b B)^T; K^-1]`` and, if ``full``, ``(X_:j * b B)^T`` for each
        ``j``: one matmul with ``k(X_m, x)`` then gives everything a gradient call needs.
        """
        key = "full" if full else "contracted"
        if key not in self._stacked_grad:
            L_inv = self._g.L_inv
            parts = [self._stacked, L_inv.transpose(-1, -2) @ L_inv]  # K^-1 is symmetric
            if full:
                XbB = self._g.X.unsqueeze(-1) * self._bB.unsqueeze(-2)  # Ma x N x d x p
                parts.append(XbB.reshape(self._g.n_tasks, XbB.shape[1], -1))
            self._stacked_grad[key] = torch.cat(parts, dim=-1).contiguous()
        return self._stacked_grad[key]

    @property
    def n_active(self) -> int:
        """Number of tasks with a non-zero weight."""
        return len(self.active)

    def __call__(
        self,
        X: np.ndarray,
        grad: bool = False,
        contract: Callable[[np.ndarray, np.ndarray], np.ndarray] | None = None,
    ) -> tuple[np.ndarray, ...]:
        r"""Weighted mean, variance and cross-covariance at ``X`` (``m x d``).

        Rows are processed in chunks whose temporaries hold at most ~``2^18`` entries.

        Args:
            X: ``m x d`` points.
            grad: Also return the gradients in ``X``.
            contract: Optional ``(X_chunk c x d, cross_chunk c x p) -> v (c x q x p)``. With
                ``grad``, the last output is then ``sum_z v[x, q, z] dcross[x, z, :]`` (``m x q x
                d``) instead of ``dcross``: what a GP posterior on top of this prior needs (e.g.
                ScaML-GP's ``v = [A^{-1} r, A^{-1} k(x, X_t)]``), at a fraction of the cost and
                memory of the full ``m x p x d`` gradient.

        Returns:
            ``(mean m, var m, cross m x p)`` and, if ``grad``,
            ``(dmean m x d, dvar m x d, dcross m x p x d)`` (or ``m x q x d``, see ``contract``).
        """
        Xt = torch.from_numpy(np.asarray(X, dtype=np.float64).reshape(-1, self.d))
        m, p, d = len(Xt), len(self._Z), self.d
        out = [
            torch.full((m,), self._const, dtype=DTYPE),
            torch.zeros(m, dtype=DTYPE),
            torch.zeros(m, p, dtype=DTYPE),
        ]
        if grad:
            out += [torch.zeros(m, d, dtype=DTYPE), torch.zeros(m, d, dtype=DTYPE)]
            out.append(None if contract is not None else torch.zeros(m, p, d, dtype=DTYPE))
        # temporaries per row and task: kernels (N, p); with a full gradient also d p
        per_row = max(self._g.mask.shape[1], p * (d if grad and contract is None else 1))
        with torch.no_grad():
            for c in self._g.chunks(m, per_row):
                parts = self._chunk(Xt[c], grad, contract)
                if grad and out[5] is None:
                    out[5] = torch.zeros(m, parts[5].shape[1], d, dtype=DTYPE)
                for total, part in zip(out, parts, strict=True):
                    total[c] += part
        if grad and out[5] is None:  # no rows
            out[5] = torch.zeros(0, 0, d, dtype=DTYPE)
        return tuple(t.numpy() for t in out)

    def _chunk(
        self,
        X: torch.Tensor,
        grad: bool,
        contract: Callable[[np.ndarray, np.ndarray], np.ndarray] | None,
    ) -> tuple[torch.Tensor, ...]:
        g = self._g
        c, d = len(X), self.d
        N, p, Ma = g.mask.shape[1], len(self._Z), g.n_tasks
        if Ma:
            phi = self._maps.phi(X)
            k = g.k_train(phi, self._psi_train)  # Ma x c x N
            stack = self._grad_stack(contract is None) if grad else self._stacked
            VAB = torch.bmm(k, stack)  # Ma x c x R
        else:  # no active task: every sum is empty
            k = torch.zeros(0, c, N, dtype=DTYPE)
            VAB = torch.zeros(0, c, 2 * N + 1 + p * (d + 1), dtype=DTYPE)
        mean = VAB[:, :, N].sum(0)
        V = VAB[:, :, :N]  # (L^-1 k(X_m, x))^T
        var_m = g.s.unsqueeze(-1) - torch.linalg.vecdot(V, V)  # Ma x c, standardized units
        var = self._bs @ var_m.clamp_min(0.0)
        kB = VAB[:, :, N + 1 : N + 1 + p]  # sum_i k_i b_m B_m,iz: Ma x c x p
        bk_xz = log_kernel(phi, self._psi_Z_b).exp_() if Ma else kB  # b_m k_m(x, z)
        cross = bk_xz.sum(0) - kB.sum(0)
        if not grad:
            return mean, var, cross
        # Every gradient is sum_m w_mj sum_i u_mi (x_j - X_mij) for some weights u.
        X_train, w = g.X, g.w_num
        G = k * self._a_alpha.unsqueeze(-2)  # a_m alpha_mi k_i
        dmean = torch.einsum("mcj,mj->cj", G @ X_train, w) - X * (G.sum(-1).T @ w)
        beta = VAB[:, :, N + 1 + p : 2 * N + 1 + p]  # (K^-1 k(X_m, x))^T: Ma x c x N
        H = beta * k * (var_m >= 0).to(DTYPE).unsqueeze(-1)  # 0 if clamped
        dvar = 2.0 * (
            X * (H.sum(-1).T @ self._bs_w) - torch.einsum("mcj,mj->cj", H @ X_train, self._bs_w)
        )
        # d cross / dx_j = sum_m w_mj [z_j b k_xz - x_j b Sigma_m(x, z) - sum_i k_i X_mij bB_iz]
        per_task = bk_xz - kB  # b_m Sigma_m(x, z)
        if contract is None:
            kXbB = VAB[:, :, 2 * N + 1 + p :].reshape(Ma, c, d, p)
            dcross = torch.einsum("mcp,mj->cpj", bk_xz, w) * self._Z.unsqueeze(0)
            dcross -= X.unsqueeze(1) * torch.einsum("mcp,mj->cpj", per_task, w)
            dcross -= torch.einsum("mcjp,mj->cpj", kXbB, w)
            return mean, var, cross, dmean, dvar, dcross
        v = torch.as_tensor(np.asarray(contract(X.numpy(), cross.numpy()), dtype=np.float64))
        if v.ndim != 3 or v.shape[0] != c or v.shape[2] != p:
            raise ValueError(f"contract must return a ({c}, q, {p}) array; got {tuple(v.shape)}.")
        q = v.shape[1]
        # the same three terms, each contracted with v over z before the task sum
        bkv = bk_xz.unsqueeze(2) * v.unsqueeze(0)  # Ma x c x q x p
        dcross_v = torch.einsum("mcqj,mj->cqj", bkv @ self._Z, w)
        dcross_v -= X.unsqueeze(1) * torch.einsum(
            "mcq,mj->cqj", (per_task.unsqueeze(2) * v).sum(-1), w
        )
        Bv = (self._bB @ v.reshape(c * q, p).T).reshape(Ma, N, c, q)  # sum_z bB_iz v_xqz
        kBv = (k.unsqueeze(-1) * Bv.permute(0, 2, 1, 3)).transpose(-1, -2)  # Ma x c x q x N
        kBvX = (kBv.reshape(Ma, c * q, N) @ X_train).reshape(Ma, c, q, d)
        dcross_v -= torch.einsum("mcqj,mj->cqj", kBvX, w)
        return mean, var, cross, dmean, dvar, dcross_v


__all__ = ["WeightedSum"]
