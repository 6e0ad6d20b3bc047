r"""Hyperparameters of ``M`` stationary GPs, and their map to and from a fit's coordinates."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from headstart._gp.fit_settings import Coordinates


@dataclass(frozen=True)
class GPParams:
    r"""Hyperparameters of ``M`` GPs (standardized-``y`` units).

    Attributes:
        inv_sq_lengthscales: ``M x d`` weights ``w = 1 / ell^2`` (a ``d`` vector is one GP).
        outputscale: ``M`` output scales ``s``.
        noise: ``M`` noise variances ``sigma^2``.

    Example:
        >>> p = GPParams(np.ones(2), 1.0, 1e-2)
        >>> p.inv_sq_lengthscales.shape, p.n_gps
        ((1, 2), 1)
    """

    inv_sq_lengthscales: np.ndarray
    outputscale: np.ndarray
    noise: np.ndarray

    def __post_init__(self) -> None:
        w = np.atleast_2d(np.asarray(self.inv_sq_lengthscales, dtype=np.float64))
        object.__setattr__(self, "inv_sq_lengthscales", w)
        for name in ("outputscale", "noise"):
            value = np.asarray(getattr(self, name), dtype=np.float64).reshape(-1)
            if value.shape != (w.shape[0],):
                raise ValueError(f"{name} must have {w.shape[0]} entries; got {value.shape}.")
            object.__setattr__(self, name, value)

    @property
    def n_gps(self) -> int:
        return self.inv_sq_lengthscales.shape[0]

    @property
    def lengthscales(self) -> np.ndarray:
        """``M x d`` lengthscales ``ell = w^{-1/2}``."""
        return 1.0 / np.sqrt(self.inv_sq_lengthscales)

    def select(self, idx: np.ndarray | int) -> GPParams:
        """The rows ``idx``."""
        idx = np.atleast_1d(idx)
        return GPParams(self.inv_sq_lengthscales[idx], self.outputscale[idx], self.noise[idx])

    @classmethod
    def stack(cls, params: list[GPParams]) -> GPParams:
        """All rows of ``params``, in order."""
        return cls(
            np.vstack([p.inv_sq_lengthscales for p in params]),
            np.concatenate([p.outputscale for p in params]),
            np.concatenate([p.noise for p in params]),
        )

    @classmethod
    def from_values(cls, ell: np.ndarray, s: float, noise: float) -> GPParams:
        """One GP from its lengthscales (``d``), output scale and noise variance."""
        return cls(np.asarray(ell, dtype=np.float64) ** -2.0, s, noise)

    def to_raw(self, coords: Coordinates, *, deterministic: bool = False) -> np.ndarray:
        """``M x (d + 2)`` coordinates ``raw`` (:class:`Coordinates`), clipped to their box."""
        w = self.inv_sq_lengthscales
        excess = np.maximum(self.noise - coords.noise_floor, 1e-300)
        ls = np.log(w) if coords.log_w else -0.5 * np.log(w)
        raw = np.column_stack([ls, np.log(self.outputscale), np.log(excess)])
        bounds = coords.bounds(w.shape[1], deterministic=deterministic)
        return np.clip(raw, bounds[:, 0], bounds[:, 1])

    @classmethod
    def from_raw(cls, raw: np.ndarray, coords: Coordinates) -> GPParams:
        """Inverse of :meth:`to_raw` (``raw``: ``M x (d + 2)`` or one ``d + 2`` row)."""
        raw = np.atleast_2d(np.asarray(raw, dtype=np.float64))
        ls = raw[:, :-2]
        w = np.exp(ls) if coords.log_w else np.exp(-2.0 * ls)
        return cls(w, np.exp(raw[:, -2]), np.exp(raw[:, -1]) + coords.noise_floor)


def unpack_raw(
    raw: torch.Tensor, coords: Coordinates
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    r"""``(w, log ell, log s, sigma^2, exp(raw_noise))`` of ``R x (d + 2)`` coordinates."""
    ls, log_s, raw_noise = raw[:, :-2], raw[:, -2], raw[:, -1]
    if coords.log_w:
        w, log_ell = torch.exp(ls), -0.5 * ls
    else:
        w, log_ell = torch.exp(-2.0 * ls), ls
    excess = torch.exp(raw_noise)
    return w, log_ell, log_s, excess + coords.noise_floor if coords.noise_floor else excess, excess


__all__ = ["GPParams", "unpack_raw"]
