r"""A new headstart method in one file: a GP approximated by random Fourier features.

Rahimi & Recht (2007), "Random Features for Large-Scale Kernel Machines" (NeurIPS): with
``m`` features ``phi(x) = sqrt(2 / m) cos(W x + b)``, rows of ``W`` drawn from ``N(0, ell^-2 I)``
and ``b`` from ``U(0, 2 pi)``, ``phi(x) . phi(x') ~ exp(-|x - x'|^2 / (2 ell^2))``: the SE kernel.
Bayesian linear regression on the features, ``y = phi(x)^T w + eps``, ``w ~ N(0, I)``,
``eps ~ N(0, sigma^2)``, is then an approximate GP whose cost is linear in the observations:

    A = Phi^T Phi / sigma^2 + I,   mean(x) = phi(x)^T A^{-1} Phi^T y / sigma^2,
    var(x) = phi(x)^T A^{-1} phi(x)                                  (Bishop 2006, Eq. 3.58-3.59)

What makes it a headstart method (see ``docs/extending.md``):

1. a :class:`~headstart.extend.Posterior` (mean, variance, their gradients in ``x``, the joint
   posterior; here also ``fantasize``, so pending points cost no refit);
2. a :class:`~headstart.extend.Surrogate` whose ``condition`` returns it;
3. typed options (:class:`~headstart.extend.MethodOptions`), stored with the study;
4. one :func:`~headstart.extend.register_method` call.

Usage::

    import headstart as hs
    import rff_method  # registers method="rff"
    study = hs.create_study("rff-demo", space, method="rff", n_features=128)
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import scipy.linalg

from headstart import extend
from headstart.exceptions import InvalidValueError


@dataclass(frozen=True)
class RFFOptions(extend.MethodOptions):
    """Options of ``method="rff"``.

    Attributes:
        n_features: Random Fourier features ``m``.
        lengthscale: The SE kernel's lengthscale on the unit cube.
        noise: The noise variance ``sigma^2`` (standardized values).
    """

    n_features: int = 256
    lengthscale: float = 0.2
    noise: float = 1e-3

    def __post_init__(self) -> None:
        extend.check_number("n_features", self.n_features, low=1, integer=True)
        extend.check_number("lengthscale", self.lengthscale, low=0.0, above=True)
        extend.check_number("noise", self.noise, low=0.0, above=True)


class RFFPosterior:
    """The Bayesian linear regression posterior on the features (module docstring)."""

    outputscale = 1.0  # phi(x) . phi(x) ~ 1: the prior variance of f
    includes_noise = False

    def __init__(self, W, b, noise, lengthscales, Phi, y) -> None:
        self.W, self.b, self.noise, self.lengthscales = W, b, noise, lengthscales
        self.Phi, self.y = Phi, y
        m = W.shape[0]
        A = Phi.T @ Phi / noise + np.eye(m)
        self.L = np.linalg.cholesky(A)
        self.mean_w = scipy.linalg.cho_solve((self.L, True), Phi.T @ y / noise)

    def features(self, X: np.ndarray) -> np.ndarray:
        return math.sqrt(2.0 / len(self.b)) * np.cos(X @ self.W.T + self.b)

    def _solve(self, F: np.ndarray) -> np.ndarray:
        return scipy.linalg.cho_solve((self.L, True), F.T)  # A^-1 phi, m x n

    def posterior(self, X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        F = self.features(np.asarray(X, dtype=np.float64))
        var = (F * self._solve(F).T).sum(1)
        return F @ self.mean_w, np.maximum(var, 1e-12)

    def posterior_and_grad(self, X: np.ndarray):
        X = np.asarray(X, dtype=np.float64)
        Z = X @ self.W.T + self.b
        scale = math.sqrt(2.0 / len(self.b))
        F, dF = scale * np.cos(Z), -scale * np.sin(Z)  # d phi_k / dx = dF_k W_k
        AF = self._solve(F).T  # n x m
        var = (F * AF).sum(1)
        dmean = (dF * self.mean_w) @ self.W
        dvar = 2.0 * (dF * AF) @ self.W
        small = var < 1e-12
        dvar[small] = 0.0
        return F @ self.mean_w, np.maximum(var, 1e-12), dmean, dvar

    def joint_posterior(self, X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        F = self.features(np.asarray(X, dtype=np.float64))
        cov = F @ self._solve(F)
        return F @ self.mean_w, 0.5 * (cov + cov.T)

    def fantasize(self, X: np.ndarray, y: np.ndarray) -> RFFPosterior:
        """Bayesian linear regression conditions exactly on more observations."""
        Phi = np.vstack([self.Phi, self.features(np.asarray(X, dtype=np.float64))])
        values = np.concatenate([self.y, np.asarray(y, dtype=np.float64).reshape(-1)])
        return RFFPosterior(self.W, self.b, self.noise, self.lengthscales, Phi, values)


class RFFSurrogate:
    """Random features drawn once from the study's seed; the head refit on every call."""

    informative_prior = False

    def __init__(self, dim: int, options: RFFOptions, seed: int) -> None:
        rng = np.random.default_rng(seed)
        m = options.n_features
        self.W = rng.standard_normal((m, dim)) / options.lengthscale
        self.b = rng.uniform(0.0, 2.0 * math.pi, m)
        self.noise = options.noise
        self.lengthscales = np.full(dim, options.lengthscale)
        self._n = 0

    def condition(self, train_X: np.ndarray, train_y: np.ndarray, rng: np.random.Generator):
        X = np.asarray(train_X, dtype=np.float64)
        y = np.asarray(train_y, dtype=np.float64)
        if not (np.isfinite(X).all() and np.isfinite(y).all()):
            raise InvalidValueError("The training data hold NaN or infinite values; drop them.")
        sd = float(y.std()) if len(y) > 1 and y.std() > 0 else 1.0
        z = (y - (y.mean() if len(y) else 0.0)) / sd
        Phi = self._features(X)
        posterior = RFFPosterior(self.W, self.b, self.noise, self.lengthscales, Phi, z)
        self._n = len(z)
        return posterior, z

    def _features(self, X: np.ndarray) -> np.ndarray:
        return math.sqrt(2.0 / len(self.b)) * np.cos(X @ self.W.T + self.b)

    def state(self) -> dict[str, Any]:
        return {}  # nothing is fitted: the features come from the seed

    def load_state(self, state: dict[str, Any]) -> None:
        pass

    def diagnostics(self) -> dict[str, Any]:
        return {"n_features": len(self.b), "n_train": self._n}


def build(ctx: extend.BuildContext) -> RFFSurrogate:
    return RFFSurrogate(len(ctx.is_cat), ctx.options, ctx.seed)


SPEC = extend.MethodSpec(
    "rff",
    "none",
    "GP-BO on random Fourier features (Rahimi & Recht 2007), an extension example",
    build,
    options=RFFOptions,
)
if "rff" not in extend.method_names():
    extend.register_method(SPEC)
