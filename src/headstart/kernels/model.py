r"""A GP with a kernel-tree covariance at fixed hyperparameters, for prediction and acquisition.

:class:`TreeGP` works on the scaled data the search used (inputs in ``[0, 1]``, standardised
targets) and exposes the posterior interface of the BO engine (``posterior``,
``posterior_and_grad``, ``joint_posterior``), so the acquisition search of
:mod:`headstart._engine.optimize` runs unchanged on a searched kernel. :class:`KernelModel` adds the
scalers and predicts in the user's units.

Posterior (Rasmussen & Williams, Eqs. 2.25-2.26), with ``K_y = K + s_n^2 I``:

    mean(x) = k(x, X) K_y^-1 y,    var(x) = k(x, x) - k(x, X) K_y^-1 k(X, x).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from headstart._engine.numerics import robust_cholesky, standardize
from headstart.exceptions import DatasetError
from headstart.kernels.covariance import covariance, leaf_offsets
from headstart.kernels.grammar import Tree


class TreeGP:
    """Exact GP posterior for a kernel tree at given hyperparameters (scaled units).

    Args:
        tree: The kernel.
        values: Kernel hyperparameters (then optionally the noise variance, ignored here).
        noise: Noise variance (floor included).
        train_X: ``n x D`` inputs in ``[0, 1]``.
        train_y: ``n`` standardised targets.
    """

    includes_noise = False

    def __init__(
        self,
        tree: Tree,
        values: np.ndarray,
        noise: float,
        train_X: np.ndarray,
        train_y: np.ndarray,
    ) -> None:
        self.tree = tree
        self.values = torch.as_tensor(np.asarray(values, dtype=np.float64))
        self.noise = float(noise)
        self.train_X = np.asarray(train_X, dtype=np.float64)
        self.train_y = np.asarray(train_y, dtype=np.float64)
        self._X = torch.from_numpy(self.train_X)
        K = covariance(tree, self.values, self._X)
        K = K + self.noise * torch.eye(len(self.train_y), dtype=torch.float64)
        L = robust_cholesky(K, label=f"The covariance of {tree}")
        self._L = L
        self._alpha = torch.cholesky_solve(torch.from_numpy(self.train_y)[:, None], L)[:, 0]
        self.lengthscales = self._lengthscales()
        self.outputscale = float(covariance(tree, self.values, self._X, diag=True).max())

    def _lengthscales(self) -> np.ndarray:
        """Per input, the shortest lengthscale of a stationary base kernel on it (else 1)."""
        ell = np.ones(self.train_X.shape[1])
        seen = np.zeros(len(ell), dtype=bool)
        for leaf, start in leaf_offsets(self.tree):
            if leaf.kind != "LIN":
                v = float(self.values[start + 1])
                ell[leaf.dim] = v if not seen[leaf.dim] else min(ell[leaf.dim], v)
                seen[leaf.dim] = True
        return ell

    def _moments(self, X: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        k = covariance(self.tree, self.values, X, self._X)
        V = torch.linalg.solve_triangular(self._L, k.T, upper=False)
        prior = covariance(self.tree, self.values, X, diag=True)
        return k @ self._alpha, prior - (V * V).sum(0)

    def posterior(self, X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Marginal posterior mean and variance of ``f`` at ``X`` (``m x D``)."""
        with torch.no_grad():
            mean, var = self._moments(torch.as_tensor(np.asarray(X, dtype=np.float64)))
        return mean.numpy(), np.maximum(var.numpy(), 1e-12)

    def posterior_and_grad(self, X: np.ndarray):
        """``(mean, var, dmean/dX, dvar/dX)``; row ``i`` depends on ``X[i]`` only (autodiff)."""
        Xt = torch.as_tensor(np.array(X, dtype=np.float64)).requires_grad_(True)
        mean, var = self._moments(Xt)
        (dmean,) = torch.autograd.grad(mean.sum(), Xt, retain_graph=True)
        (dvar,) = torch.autograd.grad(var.sum(), Xt)
        raw_var = var.detach().numpy()
        dvar = dvar.numpy()
        dvar[raw_var < 1e-12] = 0.0
        return mean.detach().numpy(), np.maximum(raw_var, 1e-12), dmean.numpy(), dvar

    def joint_posterior(self, X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Joint posterior mean and covariance of ``f`` at ``X``."""
        with torch.no_grad():
            Xt = torch.as_tensor(np.asarray(X, dtype=np.float64))
            k = covariance(self.tree, self.values, Xt, self._X)
            V = torch.linalg.solve_triangular(self._L, k.T, upper=False)
            cov = covariance(self.tree, self.values, Xt) - V.T @ V
        return (k @ self._alpha).numpy(), cov.numpy()


@dataclass(frozen=True)
class Scaler:
    """Min-max scaling of the inputs to ``[0, 1]`` and standardisation of the target."""

    x_min: np.ndarray
    x_range: np.ndarray
    y_mean: float
    y_std: float

    @classmethod
    def fit(cls, X: np.ndarray, y: np.ndarray) -> Scaler:
        x_min, x_max = X.min(axis=0), X.max(axis=0)
        x_range = np.where(x_max > x_min, x_max - x_min, 1.0)
        _, y_mean, y_std = standardize(y)  # the one rule: a constant y gets std 1
        return cls(x_min, x_range, y_mean, y_std)

    def x(self, X: np.ndarray) -> np.ndarray:
        return (np.asarray(X, dtype=np.float64) - self.x_min) / self.x_range

    def y(self, y: np.ndarray) -> np.ndarray:
        return (np.asarray(y, dtype=np.float64) - self.y_mean) / self.y_std


class KernelModel:
    """The searched kernel fitted to the user's data; predicts in the user's units.

    Example:
        >>> import numpy as np
        >>> from headstart.kernels import search
        >>> X = np.linspace(0, 10, 30)[:, None]
        >>> result = search(X, np.sin(X[:, 0]), budget=3, restarts=1, progress=False)
        >>> mean, std = result.model.predict(np.array([[5.0]]))
        >>> mean.shape, bool(std[0] > 0)
        ((1,), True)
    """

    def __init__(self, gp: TreeGP, scaler: Scaler) -> None:
        self.gp, self.scaler = gp, scaler

    def predict(
        self, X: np.ndarray, *, include_noise: bool = False
    ) -> tuple[np.ndarray, np.ndarray]:
        """Posterior mean and standard deviation at ``X`` (``m x D``, original units)."""
        d = self.gp.train_X.shape[1]
        X = np.asarray(X, dtype=np.float64)
        X = X.reshape(-1, 1) if X.ndim == 1 and d == 1 else X
        if X.ndim != 2 or X.shape[1] != d:
            raise DatasetError(
                f"predict() needs an m x {d} array (one column per input of the search); got "
                f"shape {X.shape}."
            )
        mean, var = self.gp.posterior(self.scaler.x(X))
        if include_noise:
            var = var + self.gp.noise
        s = self.scaler
        return s.y_mean + s.y_std * mean, s.y_std * np.sqrt(var)


__all__ = ["KernelModel", "Scaler", "TreeGP"]
