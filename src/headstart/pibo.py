r"""piBO: the user's belief about where the optimum lies, folded into every acquisition.

piBO ([Hvarfner2022]_, Eq. 6) maximizes ``alpha(x) * pi(x)^(beta / n)`` at the ``n``-th BO step
(``n = 1`` at the first step after the initial design): the belief ``pi`` dominates early and fades
towards uniform, so a wrong belief costs a bounded number of steps (Theorem 1). This module turns
a search space's per-parameter priors (:mod:`headstart.priors`, categorical weights) and an
optional joint density into

* ``log pi(x)`` on the encoded unit cube, floored at ``log 1e-12`` (the paper's ``+1e-12``);
* draws from the belief (initial design and a share of the acquisition search's candidates);
* its mode (the first point of the prior-aware initial design, as in Alg. 1 of the paper);
* the :class:`~headstart._engine.acquisition.PriorWeight` handed to the acquisition.

References:
    .. [Hvarfner2022] C. Hvarfner, D. Stoll, A. Souza, M. Lindauer, F. Hutter, L. Nardi.
       piBO: Augmenting Acquisition Functions with User Beliefs for Bayesian Optimization.
       ICLR 2022.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping

import numpy as np

from headstart._engine.prior_weight import PriorWeight
from headstart.exceptions import InvalidSettingError, PriorDensityError
from headstart.space import SearchSpace

DEFAULT_PRIOR_STRENGTH = 10.0  # beta when the budget is unknown (the paper's 100-step runs)
DEFAULT_CANDIDATE_SHARE = 0.5  # share of acquisition candidates drawn from the prior
LOG_FLOOR = math.log(1e-12)
_MODE_SEARCH = 4096  # candidates scanned for the mode of a joint density

JointDensity = Callable[[Mapping], float]


def default_prior_strength(budget: int | None) -> float:
    """``beta = budget / 10`` when the budget is known, else 10 ([Hvarfner2022]_, Sec. 4)."""
    return DEFAULT_PRIOR_STRENGTH if budget is None else max(budget / 10.0, 1e-3)


def check_prior_strength(value: object) -> float:
    """Validate ``prior_strength`` (a finite number >= 0)."""
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not math.isfinite(value)
        or value < 0
    ):
        raise InvalidSettingError(
            f"prior_strength must be a finite number >= 0 (piBO's beta; 0 ignores the priors); "
            f"got {value!r}."
        )
    return float(value)


def check_candidate_share(value: object) -> float:
    """Validate ``prior_candidate_share`` (a number in [0, 1])."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value <= 1:
        raise InvalidSettingError(
            f"prior_candidate_share must be a number in [0, 1] (the share of acquisition "
            f"candidates drawn from the prior); got {value!r}."
        )
    return float(value)


def pibo_active(belief: UserBelief | None, prior_strength: float | None) -> bool:
    """Whether piBO weights the acquisition: a non-flat belief and a strength that is not 0
    (``None`` means the default strength, which is positive)."""
    return belief is not None and belief.active and prior_strength != 0


class UserBelief:
    r"""The belief ``pi(x)`` of a study: per-parameter priors times an optional joint density.

    ``pi(x) = prod_j pi_j(u_j) * p(x)``, where ``pi_j`` are the parameters' priors on the encoded
    coordinate (see :meth:`SearchSpace.prior_log_pdf`) and ``p`` is ``density``, a callable on
    decoded configurations (a dict of parameter values) returning a non-negative number, for
    correlated beliefs. ``p`` need not be normalized: a constant factor does not move piBO's
    argmax.

    Args:
        space: The study's search space.
        density: Optional joint density ``p(config) -> float >= 0``.

    Example:
        >>> import headstart as hs
        >>> space = hs.SearchSpace({"x": hs.Float(0.0, 1.0, prior=hs.Normal(0.2, 0.05))})
        >>> belief = UserBelief(space)
        >>> round(float(belief.mode()[0]), 3), belief.exponent(strength=5.0, step=2)
        (0.2, 2.5)
    """

    def __init__(self, space: SearchSpace, density: JointDensity | None = None) -> None:
        if density is not None and not callable(density):
            raise InvalidSettingError(
                f"prior_density must be a callable config -> density >= 0; got {density!r}."
            )
        self.space = space
        self.density = density
        self._mode: np.ndarray | None = None

    @property
    def active(self) -> bool:
        """Whether the belief is not flat (some parameter has a prior, or a joint density)."""
        return self.density is not None or self.space.has_priors

    def _log_density(self, U: np.ndarray) -> np.ndarray:
        configs = self.space.decode(U)
        out = np.empty(len(configs))
        for i, config in enumerate(configs):
            try:
                value = float(self.density(config))
            except Exception as e:  # the user's code: whatever it raises, say where
                raise PriorDensityError(
                    f"prior_density must return a number; at {config!r} it raised {e!r}. It "
                    "receives a configuration dict of the study's space."
                ) from e
            if not (math.isfinite(value) and value >= 0.0):
                raise PriorDensityError(
                    f"prior_density returned {value!r} at {config!r}; it must return a finite "
                    "number >= 0 (0 is allowed and floored at 1e-12)."
                )
            out[i] = math.log(value) if value > 0 else -math.inf
        return out

    def log_pdf(self, U: np.ndarray) -> np.ndarray:
        r"""``log max(pi(u), 1e-12)`` at encoded points ``U`` (``m x d``): returns ``m``."""
        U = np.atleast_2d(np.asarray(U, dtype=np.float64))
        out = self.space.prior_log_pdf(U)
        if self.density is not None:
            out = out + self._log_density(U)
        return np.maximum(out, LOG_FLOOR)

    def sample(self, n: int, rng: np.random.Generator) -> np.ndarray:
        """``n x d`` encoded draws from the per-parameter priors, snapped to the grids.

        A joint density is not sampled (it is only known up to a constant); the per-parameter
        priors (uniform where there are none) propose instead.
        """
        return self.space.snap(self.space.sample_prior_encoded(n, rng))

    def mode(self) -> np.ndarray:
        """Encoded point of highest belief: the per-parameter modes, refined for a joint density.

        With a joint density, the best of the per-parameter mode and :data:`_MODE_SEARCH` draws
        (computed once).
        """
        if self._mode is None:
            mode = self.space.snap(self.space.encode([self.space.prior_mode()]))
            if self.density is not None:
                cand = np.concatenate([mode, self.sample(_MODE_SEARCH, np.random.default_rng(0))])
                mode = cand[[int(np.argmax(self.log_pdf(cand)))]]
            self._mode = mode[0]
        return self._mode.copy()

    @staticmethod
    def exponent(strength: float, step: int) -> float:
        """piBO's decaying exponent ``beta / n`` (``n >= 1``, the BO step after the design)."""
        return float(strength) / max(int(step), 1)

    def weight(
        self, strength: float, step: int, candidate_share: float = DEFAULT_CANDIDATE_SHARE
    ) -> PriorWeight:
        """The acquisition's prior factor ``pi(x)^(beta / n)`` at BO step ``n = step``."""
        return PriorWeight(
            self.log_pdf,
            self.exponent(strength, step),
            sample=self.sample,
            candidate_share=candidate_share,
        )

    def validate(self) -> None:
        """Evaluate the belief at its mode and a few draws, so a broken density fails early."""
        rng = np.random.default_rng(0)
        self.log_pdf(np.concatenate([self.mode()[None, :], self.sample(8, rng)]))


__all__ = [
    "DEFAULT_CANDIDATE_SHARE",
    "DEFAULT_PRIOR_STRENGTH",
    "UserBelief",
    "default_prior_strength",
]
