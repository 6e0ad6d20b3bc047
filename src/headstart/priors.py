r"""User beliefs about a parameter: priors on the encoded unit interval.

Every prior is a density on the parameter's *encoded* coordinate ``u in [0, 1]`` (see
:mod:`headstart.space`): linear parameters are scaled to ``[0, 1]``, ``log=True`` parameters are
scaled in log space, so a ``Normal`` prior on a log parameter is a (truncated) log-normal belief in
the parameter's own units. Densities are normalised on ``[0, 1]``, which makes the uniform prior
exactly 1 and lets piBO ([Hvarfner2022]_, Eq. 6) multiply the acquisition by
``pi(x) ** (beta / n)`` without any further scaling.

References:
    .. [Hvarfner2022] C. Hvarfner, D. Stoll, A. Souza, M. Lindauer, F. Hutter, L. Nardi.
       piBO: Augmenting Acquisition Functions with User Beliefs for Bayesian Optimization.
       ICLR 2022.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from headstart.exceptions import SearchSpaceError


def _stats():
    from scipy import stats  # ~0.5 s to import: loaded when a prior is first evaluated

    return stats


def _special():
    from scipy import special

    return special


_LOG_TINY = math.log(1e-300)  # keeps a Beta density finite at its boundary


def _check_finite(name: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float | np.integer | np.floating):
        raise SearchSpaceError(f"{name} must be a number; got {value!r}.")
    value = float(value)
    if not math.isfinite(value):
        raise SearchSpaceError(f"{name} must be finite; got {value!r}.")
    return value


@dataclass(frozen=True)
class Uniform:
    r"""Flat belief: density 1 on the encoded interval (the default for every parameter)."""

    def bind(self, to_unit: Any, span: float, name: str) -> _UnitDensity:
        return _UnitDensity(kind="uniform")

    def to_json(self) -> dict:
        return {"type": "uniform"}


@dataclass(frozen=True)
class Normal:
    r"""Gaussian belief, truncated to the parameter's bounds.

    ``p(x) ∝ N(t(x); t(mean), std_t)`` on ``low <= x <= high``, where ``t`` is the identity for
    linear parameters and ``ln`` for ``log=True`` parameters (a truncated log-normal belief).

    Args:
        mean: The most likely value, in the parameter's own units; must lie within the bounds.
        std: Standard deviation of ``t(x)``: in the parameter's units for linear parameters, in
            natural-log units for ``log=True`` parameters (``std=1.0`` ≈ a factor of e).

    Example:
        >>> import headstart as hs
        >>> hs.Float(1e-5, 1e-1, log=True, prior=hs.Normal(1e-3, 1.0)).prior.mean
        0.001
    """

    mean: float
    std: float

    def __post_init__(self) -> None:
        _check_finite("Normal prior mean", self.mean)
        std = _check_finite("Normal prior std", self.std)
        if std <= 0:
            raise SearchSpaceError(
                f"Normal prior std must be > 0; got {std!r}. Use a small positive std."
            )

    def bind(self, to_unit: Any, span: float, name: str) -> _UnitDensity:
        try:
            mu = float(to_unit(self.mean))
        except SearchSpaceError as e:
            raise SearchSpaceError(
                f"Normal prior mean {self.mean!r} of {name!r} must lie within the bounds: {e}"
            ) from e
        if not 0.0 <= mu <= 1.0:
            raise SearchSpaceError(
                f"Normal prior mean {self.mean!r} of {name!r} lies outside the bounds; "
                "put the mean inside the range or widen the range."
            )
        return _UnitDensity(kind="normal", loc=mu, scale=float(self.std) / span)

    def to_json(self) -> dict:
        return {"type": "normal", "mean": self.mean, "std": self.std}


@dataclass(frozen=True)
class Beta:
    r"""Beta(a, b) belief on the scaled range ``u in [0, 1]`` (log-scaled for ``log=True``).

    ``p(u) = u^(a-1) (1-u)^(b-1) / B(a, b)``.

    Args:
        a: First shape parameter, > 0.
        b: Second shape parameter, > 0.
    """

    a: float
    b: float

    def __post_init__(self) -> None:
        for label, v in (("a", self.a), ("b", self.b)):
            if _check_finite(f"Beta prior {label}", v) <= 0:
                raise SearchSpaceError(f"Beta prior {label} must be > 0; got {v!r}.")

    def bind(self, to_unit: Any, span: float, name: str) -> _UnitDensity:
        return _UnitDensity(kind="beta", loc=float(self.a), scale=float(self.b))

    def to_json(self) -> dict:
        return {"type": "beta", "a": self.a, "b": self.b}


Prior = Uniform | Normal | Beta


def prior_from_json(data: dict | None) -> Prior:
    """Rebuild a prior from :meth:`to_json` output."""
    if data is None:
        return Uniform()
    kind = data.get("type")
    if kind == "uniform":
        return Uniform()
    if kind == "normal":
        return Normal(data["mean"], data["std"])
    if kind == "beta":
        return Beta(data["a"], data["b"])
    raise SearchSpaceError(f"Unknown prior type {kind!r}; expected 'uniform', 'normal' or 'beta'.")


@dataclass(frozen=True)
class _UnitDensity:
    r"""A prior bound to one column: log-density, sampling and mode on ``u in [0, 1]``.

    Normal: truncated normal with location ``loc`` and scale ``scale`` on [0, 1].
    Beta: ``loc = a``, ``scale = b``.
    """

    kind: str
    loc: float = 0.0
    scale: float = 1.0

    @property
    def is_uniform(self) -> bool:
        return self.kind == "uniform"

    def _normal_log_mass(self) -> float:
        a, b = (0.0 - self.loc) / self.scale, (1.0 - self.loc) / self.scale
        return float(np.log(_special().ndtr(b) - _special().ndtr(a)))

    def log_pdf(self, u: np.ndarray) -> np.ndarray:
        """Log density at encoded values ``u`` (any shape); finite for every ``u`` in [0, 1]."""
        u = np.asarray(u, dtype=np.float64)
        if self.kind == "uniform":
            out = np.zeros_like(u)
        elif self.kind == "normal":
            z = (u - self.loc) / self.scale
            out = -0.5 * z**2 - 0.5 * math.log(2 * math.pi) - math.log(self.scale)
            out = out - self._normal_log_mass()
        else:
            uc = np.clip(u, 1e-300, 1.0 - 1e-16)
            out = _stats().beta.logpdf(uc, self.loc, self.scale)
        return np.maximum(out, _LOG_TINY)

    def sample(self, n: int, rng: np.random.Generator) -> np.ndarray:
        """Draw ``n`` encoded values from the prior."""
        if self.kind == "uniform":
            return rng.random(n)
        if self.kind == "normal":
            a, b = (0.0 - self.loc) / self.scale, (1.0 - self.loc) / self.scale
            return _stats().truncnorm.rvs(
                a, b, loc=self.loc, scale=self.scale, size=n, random_state=rng
            )
        return rng.beta(self.loc, self.scale, size=n)

    def mode(self) -> float:
        """The encoded value of highest density."""
        if self.kind == "uniform":
            return 0.5
        if self.kind == "normal":
            return min(max(self.loc, 0.0), 1.0)
        a, b = self.loc, self.scale
        if a > 1 and b > 1:
            return (a - 1) / (a + b - 2)
        if a <= 1 < b or (a < 1 and b == 1):
            return 0.0
        if b <= 1 < a or (b < 1 and a == 1):
            return 1.0
        return 0.5  # a, b <= 1: bimodal or flat; the centre is the neutral choice
