r"""Hyperpriors of every GP in headstart: one family of objects, passed to the one MAP fit.

A :class:`HyperPrior` holds one prior per hyperparameter of a stationary GP -- each lengthscale
``ell_j``, the output scale ``s`` and the noise variance ``sigma^2`` -- and the first start of a
fit. Every prior is written on the *log* of its parameter, because the fits optimize ``log ell``,
``log s`` and ``log sigma^2``: each gives ``log_prob(log x)``, its gradient in ``log x`` (closed
form, for the fits' closed-form gradients), draws of ``log x`` for restarts, and a JSON form. The
hyperprior is passed to the fit as an object, as Optuna passes ``log_prior`` to
``fit_kernel_params``.

The priors (``Gamma`` in shape / rate form; "on x" means the density of ``x`` itself, written in
``log x`` without the Jacobian ``x``, as GPyTorch applies priors):

* :data:`DEFAULT_HYPERPRIOR` -- the Matérn GP of GP-BO: the heuristic prior of Optuna's
  ``GPSampler`` (``optuna/_gp/prior.py``), on ``w = 1/ell^2``, ``s`` and ``sigma^2``:
  ``log p(w_j) = -(0.1 / w_j + 0.1 w_j)`` (mode at ``ell_j = 1``), ``s ~ Gamma(2, 1)``,
  ``sigma^2 ~ Gamma(1.1, 30)``, constants dropped. On Hartmann-6 (budget 50, 10 Sobol points, 20
  seeds) it gave the same median final regret (~0.19) as the log-normal prior below; that one had
  fewer very bad runs but converged less finely inside the right basin (best regret ~5e-3 vs
  ~2e-4), and the Optuna prior matches the ``GPSampler`` reference we benchmark against.
* :data:`DIM_SCALED_HYPERPRIOR` -- Hvarfner et al. (2024), "Vanilla Bayesian Optimization
  Performs Great in High Dimensions" (ICML), Sec. 4, as BoTorch's default ``SingleTaskGP``:
  ``ell_j ~ LogNormal(sqrt(2) + log(d) / 2, sqrt(3))``, ``sigma^2 ~ LogNormal(-4, 1)``,
  ``s ~ Gamma(2, 1)`` (BoTorch fixes ``s = 1``; we keep an output scale), constants dropped.
* :data:`FLAT_HYPERPRIOR` -- none: the MAP fit is the type-II maximum-likelihood fit.
* :data:`META_HYPERPRIOR` -- the SE GPs of the transfer models (ScaML-GP App. C.5: the meta-task
  GPs, and the baselines' GPs): ``ell_j ~ Gamma(3, 6)``, ``s ~ Gamma(2, 0.15)``,
  ``sigma^2 ~ LogNormal(-8, 2)``, normalized densities.
* :data:`SCAML_TEST_HYPERPRIOR` -- ScaML-GP's test-task residual kernel (App. C.5):
  ``LogNormal(0.5, 1.5)``, ``LogNormal(-2, 3)``, ``LogNormal(-8, 2)`` up to a constant.
* :func:`gamma_hyperprior` -- MPHD's hierarchical GP (Fan et al. 2024, Sec. 2 and App. E):
  independent Gammas per lengthscale (from a pre-trained context network, :mod:`headstart.mphd`),
  on ``s`` and on ``sigma^2``, taken in the log-parametrization *with* the Jacobian,
  ``log p = a log x - b x``. This deviates from the paper's MAP on ``theta`` itself (Eq. 6,
  ``(a - 1) log theta``): a learned shape ``a < 1`` -- 0.71 for the continuous dimensions of a
  16-dimensional HPO-B space -- makes that density unbounded at ``theta -> 0``, and the MAP then
  collapses the lengthscales to their lower bound (measured: every continuous lengthscale at 0.01
  on a 16-d problem). The log-density has its mode at the Gamma mean ``a / b`` and is bounded for
  every ``a > 0``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

_LOG_2PI = math.log(2.0 * math.pi)


def _floats(v: Any) -> float | tuple[float, ...]:
    return tuple(float(x) for x in v) if isinstance(v, list | tuple | np.ndarray) else float(v)


Array = torch.Tensor | np.ndarray  # the priors work on either: torch in autograd, numpy in fits


def _as_tensor(v: float | tuple[float, ...], like: Array) -> float | Array:
    if isinstance(v, float):
        return v
    return torch.tensor(v, dtype=like.dtype) if isinstance(like, torch.Tensor) else np.asarray(v)


def _xp(x: Array):
    """The array module of ``x``: torch for tensors, numpy for arrays (same ``exp`` / ``log``)."""
    return torch if isinstance(x, torch.Tensor) else np


@dataclass(frozen=True)
class Gamma:
    r"""``x ~ Gamma(shape, rate)`` written in ``log x``; ``shape`` and ``rate`` may be per-dimension.

        log_prob(log x) = [a log b - lgamma(a)] + (a - 1 + J) log x - b x

    the bracket only if ``normalized``, ``J = 1`` if ``jacobian`` (the density of ``log x``).

    Example:
        >>> round(float(Gamma(2.0, 1.0, normalized=False).log_prob(torch.zeros(()))), 6)
        -1.0
    """

    shape: float | tuple[float, ...]
    rate: float | tuple[float, ...]
    normalized: bool = True
    jacobian: bool = False

    def __post_init__(self) -> None:
        object.__setattr__(self, "shape", _floats(self.shape))
        object.__setattr__(self, "rate", _floats(self.rate))
        flat = np.concatenate([np.ravel(self.shape), np.ravel(self.rate)])
        if not (np.isfinite(flat).all() and (flat > 0).all()):
            raise ValueError(f"Gamma needs positive, finite shapes and rates; got {self}.")
        if np.shape(self.shape) != np.shape(self.rate):
            raise ValueError("Gamma's shape and rate need the same number of entries.")

    def log_prob(self, log_x: torch.Tensor) -> torch.Tensor:
        return self.value_and_grad(log_x)[0]

    def grad(self, log_x: torch.Tensor) -> torch.Tensor:
        """``d log_prob / d log x = (a - 1 + J) - b x``."""
        return self.value_and_grad(log_x)[1]

    def value_and_grad(self, log_x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """:meth:`log_prob` and :meth:`grad`, sharing ``x = exp(log x)``."""
        a, b = _as_tensor(self.shape, log_x), _as_tensor(self.rate, log_x)
        power = a - 1.0 + float(self.jacobian)
        bx = b * _xp(log_x).exp(log_x)
        if self.normalized:
            a_np, b_np = np.asarray(self.shape), np.asarray(self.rate)
            const = _floats(a_np * np.log(b_np) - np.vectorize(math.lgamma)(a_np))
            return _as_tensor(const, log_x) + power * log_x - bx, power - bx
        return power * log_x - bx, power - bx

    def sample_log(self, rng: np.random.Generator, size: tuple[int, ...]) -> np.ndarray:
        """``log x`` for ``x`` drawn from the prior."""
        return np.log(rng.gamma(np.asarray(self.shape), 1.0 / np.asarray(self.rate), size))

    def mean(self) -> np.ndarray:
        """``a / b``."""
        return np.asarray(self.shape) / np.asarray(self.rate)

    def to_json(self) -> dict[str, Any]:
        as_list = lambda v: list(v) if isinstance(v, tuple) else v  # noqa: E731
        return {
            "kind": "gamma",
            "shape": as_list(self.shape),
            "rate": as_list(self.rate),
            "normalized": self.normalized,
            "jacobian": self.jacobian,
        }


@dataclass(frozen=True)
class LogNormal:
    """``log x ~ Normal(mu, sigma)`` (the density of ``x``); ``normalized=False`` drops the
    constant."""

    mu: float
    sigma: float
    normalized: bool = True

    def log_prob(self, log_x: torch.Tensor) -> torch.Tensor:
        return self.value_and_grad(log_x)[0]

    def grad(self, log_x: torch.Tensor) -> torch.Tensor:
        """``d log_prob / d log x = -1 - (log x - mu) / sigma^2``."""
        return self.value_and_grad(log_x)[1]

    def value_and_grad(self, log_x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        z = (log_x - self.mu) / self.sigma
        value = -log_x - 0.5 * z * z
        if self.normalized:
            value = value - (math.log(self.sigma) + 0.5 * _LOG_2PI)
        return value, -1.0 - z / self.sigma

    def sample_log(self, rng: np.random.Generator, size: tuple[int, ...]) -> np.ndarray:
        return rng.normal(self.mu, self.sigma, size)

    def mean(self) -> np.ndarray:
        return np.asarray(math.exp(self.mu + 0.5 * self.sigma**2))

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": "lognormal",
            "mu": self.mu,
            "sigma": self.sigma,
            "normalized": self.normalized,
        }


@dataclass(frozen=True)
class DimScaledLogNormal:
    """``ell_j ~ LogNormal(sqrt(2) + log(d) / 2, sigma)`` (Hvarfner et al. 2024), unnormalized;
    ``d`` is the number of lengthscales it is evaluated on."""

    sigma: float = math.sqrt(3.0)

    def _of(self, d: int) -> LogNormal:
        return LogNormal(math.sqrt(2.0) + 0.5 * math.log(d), self.sigma, normalized=False)

    def log_prob(self, log_x: torch.Tensor) -> torch.Tensor:
        return self._of(log_x.shape[-1]).log_prob(log_x)

    def grad(self, log_x: torch.Tensor) -> torch.Tensor:
        return self._of(log_x.shape[-1]).grad(log_x)

    def value_and_grad(self, log_x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return self._of(log_x.shape[-1]).value_and_grad(log_x)

    def sample_log(self, rng: np.random.Generator, size: tuple[int, ...]) -> np.ndarray:
        return self._of(size[-1]).sample_log(rng, size)

    def to_json(self) -> dict[str, Any]:
        return {"kind": "dim-scaled-lognormal", "sigma": self.sigma}


@dataclass(frozen=True)
class OptunaLengthscale:
    r"""Optuna ``GPSampler``'s lengthscale prior, ``log p(w) = -(c / w + c w)``, ``w = 1/ell^2``,
    ``c = 0.1`` (mode at ``ell = 1``); on ``w`` it is a generalized inverse Gaussian."""

    c: float = 0.1

    def log_prob(self, log_x: torch.Tensor) -> torch.Tensor:
        return self.value_and_grad(log_x)[0]

    def grad(self, log_x: torch.Tensor) -> torch.Tensor:
        """``d / d log ell = -2 w d/dw = -2 (c / w - c w)``."""
        return self.value_and_grad(log_x)[1]

    def value_and_grad(self, log_x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        w = _xp(log_x).exp(-2.0 * log_x)
        inv, lin = self.c / w, self.c * w
        return -(inv + lin), -2.0 * (inv - lin)

    def sample_log(self, rng: np.random.Generator, size: tuple[int, ...]) -> np.ndarray:
        from scipy.stats import geninvgauss

        # p(w) ~ exp(-(a w + b / w) / 2) with a = b = 2c: GIG(p = 1, sqrt(a b), scale sqrt(b / a))
        w = geninvgauss.rvs(1.0, 2.0 * self.c, size=size, random_state=rng)
        return -0.5 * np.log(w)

    def to_json(self) -> dict[str, Any]:
        return {"kind": "optuna-lengthscale", "c": self.c}


@dataclass(frozen=True)
class Flat:
    """No prior (a constant density)."""

    def log_prob(self, log_x: torch.Tensor) -> torch.Tensor:
        return log_x * 0.0

    def grad(self, log_x: torch.Tensor) -> torch.Tensor:
        return log_x * 0.0

    def value_and_grad(self, log_x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return self.log_prob(log_x), self.grad(log_x)

    def sample_log(self, rng: np.random.Generator, size: tuple[int, ...]) -> np.ndarray:
        raise ValueError("A flat prior has no draws; give the fit its starting points.")

    def to_json(self) -> dict[str, Any]:
        return {"kind": "flat"}


Prior = Gamma | LogNormal | DimScaledLogNormal | OptunaLengthscale | Flat
_KINDS = {
    "gamma": Gamma,
    "lognormal": LogNormal,
    "dim-scaled-lognormal": DimScaledLogNormal,
    "optuna-lengthscale": OptunaLengthscale,
    "flat": Flat,
}


def prior_from_json(data: dict[str, Any]) -> Prior:
    """The prior whose ``to_json`` gave ``data``."""
    kind = data.get("kind") if isinstance(data, dict) else None
    if kind not in _KINDS:
        raise ValueError(f"Unknown prior kind {kind!r}; expected one of {sorted(_KINDS)}.")
    return _KINDS[kind](**{k: v for k, v in data.items() if k != "kind"})


@dataclass(frozen=True)
class HyperPrior:
    r"""Priors of ``(ell_1..d, s, sigma^2)`` of a stationary GP, and the first start of its fits.

        log p(theta) = sum_j log p(ell_j) + log p(s) + log p(sigma^2)

    Args:
        lengthscale: Prior of each ``ell_j`` (a per-dimension :class:`Gamma` has ``d`` entries).
        outputscale: Prior of ``s``.
        noise: Prior of ``sigma^2``.
        initial: ``(ell, s, sigma^2)`` of a fit's first start, or ``"mean"``: the priors' means
            (lengthscales clipped to ``[0.01, 100]``, ``s`` to ``[0.01, 100]``, ``sigma^2`` to
            ``[1e-6, 1]``).
    """

    lengthscale: Prior
    outputscale: Prior
    noise: Prior
    initial: tuple[float, float, float] | str = (1.0, 1.0, 1e-2)

    def __post_init__(self) -> None:
        if not isinstance(self.initial, str):
            object.__setattr__(self, "initial", tuple(float(v) for v in self.initial))
        elif self.initial != "mean":
            raise ValueError(f"initial must be (ell, s, noise) or 'mean'; got {self.initial!r}.")

    @property
    def dim(self) -> int | None:
        """The number of lengthscales a per-dimension prior is for (``None``: any)."""
        shape = getattr(self.lengthscale, "shape", None)
        return len(shape) if isinstance(shape, tuple) else None

    def log_prob(
        self, log_ell: torch.Tensor, log_s: torch.Tensor, log_noise: torch.Tensor
    ) -> torch.Tensor:
        """``R`` log densities for ``R x d`` log lengthscales, ``R`` log scales and noises."""
        return self.value_and_grad(log_ell, log_s, log_noise)[0]

    def grad(
        self, log_ell: torch.Tensor, log_s: torch.Tensor, log_noise: torch.Tensor
    ) -> torch.Tensor:
        """Gradient of :meth:`log_prob` in ``(log ell, log s, log sigma^2)``: ``R x (d + 2)``."""
        return self.value_and_grad(log_ell, log_s, log_noise)[1]

    def value_and_grad(
        self, log_ell: torch.Tensor, log_s: torch.Tensor, log_noise: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """:meth:`log_prob` and :meth:`grad` in one pass (what every fit evaluation needs)."""
        if self.dim is not None and log_ell.shape[-1] != self.dim:
            raise ValueError(
                f"This prior has {self.dim} lengthscales; the GP has {log_ell.shape[-1]}."
            )
        v_ell, g_ell = self.lengthscale.value_and_grad(log_ell)
        v_s, g_s = self.outputscale.value_and_grad(log_s)
        v_noise, g_noise = self.noise.value_and_grad(log_noise)
        xp = _xp(log_ell)
        join = torch.cat if xp is torch else np.concatenate
        grad = join([g_ell, g_s[..., None], g_noise[..., None]], -1)
        return v_ell.sum(-1) + v_s + v_noise, grad

    def sample_log(self, rng: np.random.Generator, batch: tuple[int, ...], d: int) -> np.ndarray:
        """``batch x (d + 2)`` vectors ``(log ell, log s, log sigma^2)`` drawn from the prior."""
        return np.concatenate(
            [
                self.lengthscale.sample_log(rng, (*batch, d)),
                self.outputscale.sample_log(rng, (*batch, 1)),
                self.noise.sample_log(rng, (*batch, 1)),
            ],
            axis=-1,
        )

    def initial_values(self, d: int) -> tuple[np.ndarray, float, float]:
        """``(ell (d), s, sigma^2)`` of the first start."""
        if self.initial != "mean":
            ell, s, noise = self.initial
            return np.full(d, ell), s, noise
        ell = np.ones(d)
        if self.dim == d:
            ell = np.clip(self.lengthscale.mean(), 1e-2, 1e2)
        s = float(np.clip(self.outputscale.mean(), 1e-2, 1e2))
        noise = float(np.clip(self.noise.mean(), 1e-6, 1.0))
        return ell, s, noise

    def initial_raw(self, d: int) -> np.ndarray:
        """``d + 2`` vector ``(log ell, log s, log sigma^2)`` of :meth:`initial_values`."""
        ell, s, noise = self.initial_values(d)
        return np.r_[np.log(ell), math.log(s), math.log(noise)]

    def to_json(self) -> dict[str, Any]:
        return {
            "lengthscale": self.lengthscale.to_json(),
            "outputscale": self.outputscale.to_json(),
            "noise": self.noise.to_json(),
            "initial": self.initial if isinstance(self.initial, str) else list(self.initial),
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> HyperPrior:
        """Inverse of :meth:`to_json` (``ValueError`` for anything else)."""
        if not isinstance(data, dict) or not {"lengthscale", "outputscale", "noise"} <= set(data):
            raise ValueError(f"Not a hyperprior: {data!r}.")
        initial = data.get("initial", (1.0, 1.0, 1e-2))
        return cls(
            prior_from_json(data["lengthscale"]),
            prior_from_json(data["outputscale"]),
            prior_from_json(data["noise"]),
            initial if isinstance(initial, str) else tuple(initial),
        )


def gamma_hyperprior(
    lengthscale: tuple[Any, Any], outputscale: tuple[float, float], noise: tuple[float, float]
) -> HyperPrior:
    r"""MPHD's Gamma priors (module docstring): ``lengthscale = (shapes, rates)`` per dimension,
    ``(shape, rate)`` of ``s`` and of ``sigma^2``; log-densities with the Jacobian, unnormalized,
    and the first start at the prior means.

    Example:
        >>> prior = gamma_hyperprior(((2.0,), (1.0,)), (1.0, 1.0), (1.0, 1.0))
        >>> zero = torch.zeros(1, dtype=torch.float64)
        >>> round(float(prior.log_prob(zero[None], zero, zero)[0]), 6)
        -3.0
    """
    a, b = (tuple(float(v) for v in part) for part in lengthscale)
    return HyperPrior(
        Gamma(a, b, normalized=False, jacobian=True),
        Gamma(*outputscale, normalized=False, jacobian=True),
        Gamma(*noise, normalized=False, jacobian=True),
        initial="mean",
    )


DEFAULT_HYPERPRIOR = HyperPrior(
    OptunaLengthscale(), Gamma(2.0, 1.0, normalized=False), Gamma(1.1, 30.0, normalized=False)
)
DIM_SCALED_HYPERPRIOR = HyperPrior(
    DimScaledLogNormal(), Gamma(2.0, 1.0, normalized=False), LogNormal(-4.0, 1.0, normalized=False)
)
FLAT_HYPERPRIOR = HyperPrior(Flat(), Flat(), Flat())
META_HYPERPRIOR = HyperPrior(
    Gamma(3.0, 6.0), Gamma(2.0, 0.15), LogNormal(-8.0, 2.0), initial=(0.5, 1.0, 1e-3)
)
SCAML_TEST_HYPERPRIOR = HyperPrior(
    LogNormal(0.5, 1.5, normalized=False),
    LogNormal(-2.0, 3.0, normalized=False),
    LogNormal(-8.0, 2.0, normalized=False),
    initial=(1.0, 0.1, 1e-3),
)
NAMED = {
    "optuna": DEFAULT_HYPERPRIOR,
    "lognormal": DIM_SCALED_HYPERPRIOR,
    "flat": FLAT_HYPERPRIOR,
    "meta": META_HYPERPRIOR,
}

__all__ = [
    "DEFAULT_HYPERPRIOR",
    "DIM_SCALED_HYPERPRIOR",
    "FLAT_HYPERPRIOR",
    "META_HYPERPRIOR",
    "NAMED",
    "SCAML_TEST_HYPERPRIOR",
    "DimScaledLogNormal",
    "Flat",
    "Gamma",
    "HyperPrior",
    "LogNormal",
    "OptunaLengthscale",
    "Prior",
    "gamma_hyperprior",
    "prior_from_json",
]
