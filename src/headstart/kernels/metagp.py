r"""The meta-GP of BOSOT: a GP over kernel expressions with the SOT kernel-kernel (Sec. 3.3).

    g ~ GP(c, K_SOT),   K_SOT(k1, k2) = s^2 exp(-d(k1, k2) / l^2)                     (Eq. 4)
    d = a1 sum_i W(base_i) + a2 W(paths) + a3 W(subtrees),   a_i = sigmoid(a~_i) / sum sigmoid(a~)

with a Gaussian likelihood of variance ``s_g^2``. ``K_SOT`` is positive semi-definite (Prop. 2:
it is a product of Laplace kernels on the feature vectors). The hyperparameters
``(s^2, l, a~_1..3, c, s_g^2)`` are fitted by type-II maximum likelihood at every BO iteration
(Eq. 5), without priors, from the authors' initial values (``s^2 = l = 1``, equal weights,
``c = 0``, ``s_g^2 = 1e-4``) and two starts perturbed by ``U(0.8, 1.2)`` factors. A jitter of
``1e-4`` is added to the diagonal, as in the authors' code.

Expected improvement on the latent ``g`` (the authors' form): ``m*`` is the largest posterior mean
at the observed kernels and ``xi = 0.01``.
"""

from __future__ import annotations

import math
from collections.abc import MutableMapping, Sequence

import numpy as np
import scipy.stats
import torch
import torch.nn.functional as F

from headstart._gp.fit import minimize
from headstart.kernels.grammar import Tree
from headstart.kernels.sot import TreeFeatures, distance_matrices, sot_kernel

JITTER = 1e-4
_INIT = np.array([math.log(math.e - 1), math.log(math.e - 1), 0.5, 0.5, 0.5, 0.0, math.log(1e-4)])


def _unpack(raw: torch.Tensor):
    outputscale = F.softplus(raw[..., 0])
    lengthscale = F.softplus(raw[..., 1])
    s = torch.sigmoid(raw[..., 2:5])
    alpha = s / s.sum(-1, keepdim=True)
    mean = raw[..., 5]
    noise = F.softplus(raw[..., 6])
    return outputscale, lengthscale, alpha, mean, noise


def _neg_mll(raw: torch.Tensor, D: torch.Tensor, g: torch.Tensor) -> torch.Tensor:
    """``-log N(g; c, K_SOT + (s_g^2 + jitter) I)`` for a batch of raw parameter vectors."""
    outputscale, lengthscale, alpha, mean, noise = _unpack(raw)
    n = len(g)
    d = torch.tensordot(alpha, D, dims=1)
    K = outputscale[:, None, None] * torch.exp(-d / lengthscale[:, None, None] ** 2)
    K = K + (noise + JITTER)[:, None, None] * torch.eye(n, dtype=D.dtype)
    L, info = torch.linalg.cholesky_ex(K)
    r = (g - mean[:, None])[..., None]
    a = torch.linalg.solve_triangular(L, r, upper=False)[..., 0]
    value = 0.5 * (a * a).sum(-1) + torch.log(torch.diagonal(L, dim1=-2, dim2=-1)).sum(-1)
    value = value + 0.5 * n * math.log(2 * math.pi)
    return torch.where(info != 0, torch.nan, value)


class SOTMetaGP:
    """A fitted GP over kernel trees; build it with :meth:`fit`.

    Attributes:
        outputscale, lengthscale, alpha, mean, noise: The fitted hyperparameters.
    """

    def __init__(
        self,
        trees: Sequence[Tree],
        g: np.ndarray,
        n_dims: int,
        raw: np.ndarray,
        features: MutableMapping[str, TreeFeatures],
    ) -> None:
        self.trees, self.g, self.n_dims = list(trees), np.asarray(g, dtype=np.float64), n_dims
        self._features = features
        self._raw = np.asarray(raw, dtype=np.float64)
        with torch.no_grad():
            s2, ell, alpha, c, noise = _unpack(torch.from_numpy(raw))
        self.outputscale, self.lengthscale = float(s2), float(ell)
        self.alpha, self.mean, self.noise = alpha.numpy(), float(c), float(noise)
        K_f = self.kernel_matrix(self.trees, self.trees)
        self._L = np.linalg.cholesky(K_f + (self.noise + JITTER) * np.eye(len(g)))
        self._a = scipy.linalg.cho_solve((self._L, True), self.g - self.mean)
        self.best_mean = float((self.mean + K_f @ self._a).max())
        """``m*`` of EI: the largest posterior mean at the observed kernels (fixed once fitted)."""

    @classmethod
    def fit(
        cls,
        trees: Sequence[Tree],
        g: np.ndarray,
        n_dims: int,
        features: MutableMapping[str, TreeFeatures] | None = None,
        *,
        seed: int = 0,
    ) -> SOTMetaGP:
        """Type-II ML fit on the scored kernels; failed (non-finite) scores are left out."""
        g = np.asarray(g, dtype=np.float64)
        keep = np.isfinite(g)
        trees = [t for t, k in zip(trees, keep, strict=True) if k]
        g = g[keep]
        features = {} if features is None else features
        D = torch.from_numpy(distance_matrices(*[cls._feats(trees, n_dims, features)] * 2))
        gt = torch.from_numpy(g)
        rng = np.random.default_rng(seed + len(g))
        starts = np.stack(
            [_INIT, _INIT * rng.uniform(0.8, 1.2, 7), _INIT * rng.uniform(0.8, 1.2, 7)]
        )

        def fun(_: np.ndarray, raw_np: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
            raw = torch.from_numpy(raw_np).requires_grad_(True)
            value = _neg_mll(raw, D, gt)
            (grad,) = torch.autograd.grad(torch.nan_to_num(value).sum(), raw)
            value, grad = value.detach().numpy(), grad.numpy()
            bad = ~np.isfinite(value) | ~np.isfinite(grad).all(1)
            return np.where(bad, 1e25, value), np.where(bad[:, None], 0.0, grad)

        bounds = np.array(
            [[-10, 10], [-10, 10], [-10, 10], [-10, 10], [-10, 10], [-50, 50], [-15, 5]]
        )
        x, f = minimize(fun, starts, bounds.astype(np.float64), penalize_failures=False)
        best = x[int(np.argmin(f))] if np.isfinite(f).any() and f.min() < 1e24 else _INIT
        return cls(trees, g, n_dims, best, features)

    def with_fantasy(self, tree: Tree) -> SOTMetaGP:
        """The same GP after observing ``tree`` at its posterior mean ("kriging believer").

        Hyperparameters stay fixed; the variance near ``tree`` shrinks, so a batch picked by
        repeated EI maximisation spreads out instead of proposing ``tree``'s neighbours again.
        """
        mean = float(self.predict([tree])[0][0])
        return SOTMetaGP(
            [*self.trees, tree], np.append(self.g, mean), self.n_dims, self._raw, self._features
        )

    @staticmethod
    def _feats(trees, n_dims, cache) -> list[TreeFeatures]:
        out = []
        for t in trees:
            key = str(t)
            if key not in cache:
                cache[key] = TreeFeatures.of(t, n_dims)
            out.append(cache[key])
        return out

    def distances(self, rows: Sequence[Tree], cols: Sequence[Tree]) -> np.ndarray:
        """``3 x len(rows) x len(cols)`` per-feature TV distances."""
        f = self._features
        return distance_matrices(
            self._feats(rows, self.n_dims, f), self._feats(cols, self.n_dims, f)
        )

    def kernel_matrix(self, rows: Sequence[Tree], cols: Sequence[Tree]) -> np.ndarray:
        """``K_SOT(rows, cols)`` at the fitted hyperparameters."""
        return sot_kernel(
            self.distances(rows, cols), self.alpha, self.outputscale, self.lengthscale
        )

    def predict(self, trees: Sequence[Tree]) -> tuple[np.ndarray, np.ndarray]:
        """Posterior mean and variance of the latent criterion ``g`` at ``trees``."""
        k = self.kernel_matrix(trees, self.trees)
        V = scipy.linalg.solve_triangular(self._L, k.T, lower=True)
        var = np.maximum(self.outputscale - (V * V).sum(0), 1e-12)
        return self.mean + k @ self._a, var

    def expected_improvement(self, trees: Sequence[Tree], xi: float = 0.01) -> np.ndarray:
        """``EI = (mu - m* - xi) Phi(z) + s phi(z)``, ``m*`` the best posterior mean observed."""
        mu, var = self.predict(trees)
        s = np.sqrt(var)
        imp = mu - self.best_mean - xi
        z = imp / s
        return imp * scipy.stats.norm.cdf(z) + s * scipy.stats.norm.pdf(z)


__all__ = ["SOTMetaGP"]
