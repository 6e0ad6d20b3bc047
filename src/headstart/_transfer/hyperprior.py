r"""Hyperprior objects of the SE-ARD GPs of the transfer models (ScaML-GP App. C.5).

Each prior is an object with ``log_prob`` (on the log of the parameter, as the fits optimize
``log ell``, ``log s``, ``log sigma^2``), its gradient, draws for restarts, an initial value and a
JSON form; :class:`SEHyperPrior` bundles one per hyperparameter and is passed to the fits, as
Optuna passes ``log_prior`` to ``fit_kernel_params``. The defaults:

* :data:`META_HYPERPRIOR` -- the meta-task GPs and the baselines' GPs ([ScaML] App. C.5):
  ``ell_j ~ Gamma(3, 6)``, ``s ~ Gamma(2, 0.15)``, ``sigma^2 ~ LogNormal(-8, 2)``, normalized
  densities of the parameters themselves (no Jacobian of the log transform, as GPyTorch);
* :data:`SCAML_TEST_HYPERPRIOR` -- ScaML-GP's test-task residual kernel: log-normal priors
  ``LogNormal(0.5, 1.5)``, ``LogNormal(-2, 3)``, ``LogNormal(-8, 2)`` up to a constant.

Gamma is in shape / rate form: ``log Gamma(x; a, b) = a log b - lgamma(a) + (a - 1) log x - b x``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

_LOG_2PI = math.log(2.0 * math.pi)


@dataclass(frozen=True)
class Gamma:
    """``x ~ Gamma(shape, rate)``, its density written in ``log_x``."""

    shape: float
    rate: float

    def log_prob(self, log_x: torch.Tensor) -> torch.Tensor:
        """Normalized ``log Gamma(exp(log_x); shape, rate)``."""
        a, b = self.shape, self.rate
        return a * math.log(b) - math.lgamma(a) + (a - 1.0) * log_x - b * torch.exp(log_x)

    def grad(self, log_x: torch.Tensor) -> torch.Tensor:
        """``d log_prob / d log_x = (shape - 1) - rate x``."""
        return (self.shape - 1.0) - self.rate * torch.exp(log_x)

    def sample_log(self, rng: np.random.Generator, size: tuple[int, ...]) -> np.ndarray:
        """``log x`` for ``x`` drawn from the prior."""
        return np.log(rng.gamma(self.shape, 1.0 / self.rate, size))

    def to_json(self) -> dict[str, Any]:
        return {"kind": "gamma", "shape": self.shape, "rate": self.rate}


@dataclass(frozen=True)
class LogNormal:
    """``log x ~ Normal(mu, sigma)``; ``normalized=False`` drops the constant."""

    mu: float
    sigma: float
    normalized: bool = True

    def log_prob(self, log_x: torch.Tensor) -> torch.Tensor:
        """``log LogNormal(exp(log_x); mu, sigma)`` (up to a constant unless normalized)."""
        z2 = 0.5 * ((log_x - self.mu) / self.sigma) ** 2
        if self.normalized:
            return -log_x - math.log(self.sigma) - 0.5 * _LOG_2PI - z2
        return -log_x - z2

    def grad(self, log_x: torch.Tensor) -> torch.Tensor:
        """``d log_prob / d log_x = -1 - (log_x - mu) / sigma^2``."""
        return -1.0 - (log_x - self.mu) / self.sigma**2

    def sample_log(self, rng: np.random.Generator, size: tuple[int, ...]) -> np.ndarray:
        return rng.normal(self.mu, self.sigma, size)

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": "lognormal",
            "mu": self.mu,
            "sigma": self.sigma,
            "normalized": self.normalized,
        }


Prior = Gamma | LogNormal


@dataclass(frozen=True)
class SEHyperPrior:
    r"""Priors of ``(ell_1..d, s, sigma^2)`` of an SE-ARD GP, and the first start of its fits.

    Args:
        lengthscale: Prior of each ``ell_j``.
        outputscale: Prior of ``s``.
        noise: Prior of ``sigma^2``.
        initial: ``(ell, s, sigma^2)`` of the first start (the reference code's values).
    """

    lengthscale: Prior
    outputscale: Prior
    noise: Prior
    initial: tuple[float, float, float] = (0.5, 1.0, 1e-3)

    def log_prob(
        self, log_ell: torch.Tensor, log_s: torch.Tensor, log_noise: torch.Tensor
    ) -> torch.Tensor:
        """``sum_j log p(ell_j) + log p(s) + log p(sigma^2)``: ``R`` values for ``R x d``, ``R``."""
        return (
            self.lengthscale.log_prob(log_ell).sum(-1)
            + self.outputscale.log_prob(log_s)
            + self.noise.log_prob(log_noise)
        )

    def grad(
        self, log_ell: torch.Tensor, log_s: torch.Tensor, log_noise: torch.Tensor
    ) -> torch.Tensor:
        """Gradient of :meth:`log_prob` in ``(log ell, log s, log sigma^2)``: ``R x (d + 2)``."""
        return torch.cat(
            [
                self.lengthscale.grad(log_ell),
                self.outputscale.grad(log_s).unsqueeze(-1),
                self.noise.grad(log_noise).unsqueeze(-1),
            ],
            dim=-1,
        )

    def sample_log(self, rng: np.random.Generator, batch: tuple[int, ...], d: int) -> np.ndarray:
        """``batch x (d + 2)`` raw vectors ``(log ell, log s, log sigma^2)`` drawn from the prior."""
        return np.concatenate(
            [
                self.lengthscale.sample_log(rng, (*batch, d)),
                self.outputscale.sample_log(rng, (*batch, 1)),
                self.noise.sample_log(rng, (*batch, 1)),
            ],
            axis=-1,
        )

    def initial_raw(self, d: int) -> np.ndarray:
        """``d + 2`` raw vector of :attr:`initial`."""
        ell, s, noise = self.initial
        return np.r_[np.full(d, math.log(ell)), math.log(s), math.log(noise)]

    def to_json(self) -> dict[str, Any]:
        return {
            "lengthscale": self.lengthscale.to_json(),
            "outputscale": self.outputscale.to_json(),
            "noise": self.noise.to_json(),
            "initial": list(self.initial),
        }


META_HYPERPRIOR = SEHyperPrior(Gamma(3.0, 6.0), Gamma(2.0, 0.15), LogNormal(-8.0, 2.0))
SCAML_TEST_HYPERPRIOR = SEHyperPrior(
    LogNormal(0.5, 1.5, normalized=False),
    LogNormal(-2.0, 3.0, normalized=False),
    LogNormal(-8.0, 2.0, normalized=False),
)

__all__ = ["META_HYPERPRIOR", "SCAML_TEST_HYPERPRIOR", "Gamma", "LogNormal", "SEHyperPrior"]
