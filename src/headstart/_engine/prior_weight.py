r"""piBO's prior factor ``pi(x)^gamma`` (Hvarfner et al., ICLR 2022, Eq. 6): numpy only.

Kept apart from :mod:`headstart._engine.acquisition` so that :mod:`headstart.pibo` (and so
``import headstart``) need not load SciPy's special functions.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

LOG_PRIOR_FLOOR = math.log(1e-12)  # piBO: log max(pi, 1e-12), see STYLE.md section 5


@dataclass(frozen=True)
class PriorWeight:
    r"""piBO's prior factor ``pi(x)^gamma`` (Hvarfner et al. 2022, Eq. 6) on the encoded unit cube.

    Args:
        log_pdf: Maps an ``m x d`` array in ``[0, 1]`` to ``m`` log densities ``log pi(x)``
            (unnormalized is fine: a constant factor does not move the argmax). It is floored at
            ``log 1e-12`` here, as in the paper, so the prior stays strictly positive.
        exponent: ``gamma = beta / n >= 0``; 0 switches the prior off.
        sample: Draws ``m x d`` encoded points from the prior (``(m, rng) -> array``), used to
            seed a share of the acquisition search's candidates; ``None`` for uniform only.
        candidate_share: Share of the screening candidates drawn by ``sample`` (default half, as
            SMAC3's ``LocalAndSortedPriorRandomSearch`` and the authors' HyperMapper code).
    """

    log_pdf: Callable[[np.ndarray], np.ndarray]
    exponent: float
    sample: Callable[[int, np.random.Generator], np.ndarray] | None = None
    candidate_share: float = 0.5

    def __post_init__(self) -> None:
        if not (math.isfinite(self.exponent) and self.exponent >= 0.0):
            raise ValueError(f"exponent must be finite and >= 0; got {self.exponent!r}.")
        if not 0.0 <= self.candidate_share <= 1.0:
            raise ValueError(f"candidate_share must lie in [0, 1]; got {self.candidate_share!r}.")

    @property
    def active(self) -> bool:
        return self.exponent > 0.0

    def term(self, X: np.ndarray) -> np.ndarray:
        """``gamma * log max(pi(X), 1e-12)`` for ``X`` (``m x d``): returns ``m``."""
        lp = np.asarray(self.log_pdf(X), dtype=np.float64).reshape(X.shape[0])
        lp = np.where(np.isnan(lp), -np.inf, lp)
        return self.exponent * np.maximum(lp, LOG_PRIOR_FLOOR)


__all__ = ["LOG_PRIOR_FLOOR", "PriorWeight"]
