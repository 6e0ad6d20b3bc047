r"""The MAP hyperparameter fits' settings, in one place: every GP fit of headstart (the Matérn
GP, the meta-task GPs, ScaML-GP's test GP, RGPE / StackGP, the multi-task GP) reads them here.

* L-BFGS-B runs at most :data:`FIT_MAXITER` iterations; the SE-GP fits stop when the projected
  gradient of the per-datum objective is below :data:`FIT_PGTOL` (BoTorch's scale) or an
  iteration lowers it by less than SciPy's default relative tolerance :data:`FIT_FACTR`.
* The transfer models draw :data:`N_PRIOR_STARTS` extra initial guesses from their priors
  (Tighineanu et al. 2024, App. C.5) and bound the SE GPs' noise variance (standardized units)
  to :data:`NOISE_BOUNDS`.
"""

from __future__ import annotations

FIT_MAXITER = 200
FIT_PGTOL = 1e-5
FIT_FACTR = 1e7
N_PRIOR_STARTS = 5
NOISE_BOUNDS = (1e-8, 1e-2)

__all__ = ["FIT_FACTR", "FIT_MAXITER", "FIT_PGTOL", "NOISE_BOUNDS", "N_PRIOR_STARTS"]
