r"""Every MAP fit's settings, in one place: limits, tolerances, starts and the coordinates moved.

**L-BFGS-B** (:func:`headstart._gp.fit.minimize`, the one optimizer every fit of headstart runs):
at most :data:`FIT_MAXITER` iterations; a fit stops when the projected gradient is below its
``pgtol`` or an iteration lowers the objective by less than ``factr`` times the machine epsilon
(relative). The SE GPs of the transfer models see their objective divided by the number of
observations (BoTorch's scale) and stop at :data:`FIT_PGTOL`; the Matérn GP of GP-BO stops at the
looser :data:`MATERN_GTOL` of Optuna's ``GPSampler`` (a loose fit is enough for BO and is much
cheaper).

**Starts.** The transfer models draw :data:`N_PRIOR_STARTS` extra initial guesses from their
priors (Tighineanu et al. 2024, App. C.5).

**Coordinates** (:class:`Coordinates`): which variables L-BFGS-B moves and in which box. Two sets
exist, each the one its model was tuned with:

* :data:`MATERN_COORDS` (the Matérn GP, as Optuna's engine): ``(log w_1..d, log s,
  log(sigma^2 - 1e-6))``, ``w = 1/ell^2``, with ``ell in [e^-5, e^5] ~ [0.0067, 148]`` on the unit
  cube, ``s in [e^-7, e^7]`` and ``sigma^2 <= 1 + 1e-6`` (standardized units); a deterministic
  objective pins ``sigma^2 = 1e-6 + e^-30`` (Optuna's ``deterministic_objective=True`` does the
  same); :data:`CONSTRAINT_COORDS`, a constraint's Matérn GP, the same with the floor at
  :data:`CONSTRAINT_MIN_NOISE`;
* :data:`SE_COORDS` (the SE GPs of ScaML-GP and the baselines, App. C.5): ``(log ell_1..d,
  log s, log sigma^2)`` with ``ell, s in [1e-4, 1e2]``, ``sigma^2 in`` :data:`NOISE_BOUNDS`, and
  ``sigma^2`` pinned at :data:`DETERMINISTIC_NOISE` for noise-free objectives.

L-BFGS-B is not invariant to a rescaling of its variables, so the two are kept apart rather than
unified: each reproduces the fits its model was measured with.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np

FIT_MAXITER = 200
FIT_PGTOL = 1e-5
FIT_FACTR = 1e7
MATERN_GTOL = 1e-2  # as Optuna's GPSampler: a loose fit is enough for BO and is much cheaper
N_PRIOR_STARTS = 5
NOISE_BOUNDS = (1e-8, 1e-2)
SE_SCALE_BOUNDS = (1e-4, 1e2)  # the SE GPs' lengthscales and output scale (App. C.5)
DETERMINISTIC_NOISE = 1e-6  # noise-free objectives: sigma^2 pinned here (standardized units)
MIN_NOISE = 1e-6  # the Matérn GP's smallest noise variance; deterministic objectives are common
# A constraint's GP: the best feasible point lies on a constraint's boundary, and a noise floor of
# 1e-6 (standardized; a standard deviation of 1e-3) hides violations smaller than that, so the
# proposals creep up to the boundary from outside (ConstrainedGramacy, issue 34). Its floor is
# lower; a noisy constraint still learns its noise above it, and the Cholesky factor's jitter
# retries keep near-duplicate points factorable (float64: condition up to ~1e12 is exact enough).
CONSTRAINT_MIN_NOISE = 1e-10


@dataclass(frozen=True)
class Limits:
    """When L-BFGS-B stops: after ``maxiter`` iterations, at a projected gradient below
    ``pgtol``, or at a relative decrease below ``factr`` machine epsilons."""

    maxiter: int = FIT_MAXITER
    pgtol: float = FIT_PGTOL
    factr: float = FIT_FACTR


DEFAULT_LIMITS = Limits()
MATERN_LIMITS = Limits(pgtol=MATERN_GTOL)  # the Matérn GP of GP-BO: Optuna's loose tolerance


@dataclass(frozen=True)
class Coordinates:
    r"""The variables a GP fit moves: ``raw = (l_1..d, log s, log(sigma^2 - floor))``.

    Args:
        log_w: ``l_j = log w_j = -2 log ell_j`` (else ``l_j = log ell_j``).
        noise_floor: ``sigma^2 = floor + exp(raw_noise)``.
        lengthscale_bounds: Box of each ``l_j``.
        outputscale_bounds: Box of ``log s``.
        noise_bounds: Box of ``raw_noise``.
        deterministic_noise: ``raw_noise`` pinned for noise-free objectives.
    """

    log_w: bool
    noise_floor: float
    lengthscale_bounds: tuple[float, float]
    outputscale_bounds: tuple[float, float]
    noise_bounds: tuple[float, float]
    deterministic_noise: float

    def bounds(self, d: int, *, deterministic: bool = False) -> np.ndarray:
        """``(d + 2) x 2`` lower / upper bounds of ``raw``."""
        noise = (self.deterministic_noise,) * 2 if deterministic else self.noise_bounds
        rows = [self.lengthscale_bounds] * d + [self.outputscale_bounds, noise]
        return np.asarray(rows, dtype=np.float64)

    def ls_to_log_ell(self) -> float:
        """``d log ell / d l``: ``-1/2`` in ``log w`` coordinates, else 1."""
        return -0.5 if self.log_w else 1.0


_LOG = tuple(map(math.log, SE_SCALE_BOUNDS))
MATERN_COORDS = Coordinates(
    log_w=True,
    noise_floor=MIN_NOISE,
    lengthscale_bounds=(-10.0, 10.0),
    outputscale_bounds=(-7.0, 7.0),
    noise_bounds=(-25.0, 0.0),
    deterministic_noise=-30.0,
)
CONSTRAINT_COORDS = replace(MATERN_COORDS, noise_floor=CONSTRAINT_MIN_NOISE)
SE_COORDS = Coordinates(
    log_w=False,
    noise_floor=0.0,
    lengthscale_bounds=_LOG,
    outputscale_bounds=_LOG,
    noise_bounds=tuple(map(math.log, NOISE_BOUNDS)),
    deterministic_noise=math.log(DETERMINISTIC_NOISE),
)

__all__ = [
    "CONSTRAINT_COORDS",
    "CONSTRAINT_MIN_NOISE",
    "DEFAULT_LIMITS",
    "DETERMINISTIC_NOISE",
    "FIT_FACTR",
    "FIT_MAXITER",
    "FIT_PGTOL",
    "MATERN_COORDS",
    "MATERN_GTOL",
    "MATERN_LIMITS",
    "MIN_NOISE",
    "NOISE_BOUNDS",
    "N_PRIOR_STARTS",
    "SE_COORDS",
    "SE_SCALE_BOUNDS",
    "Coordinates",
    "Limits",
]
