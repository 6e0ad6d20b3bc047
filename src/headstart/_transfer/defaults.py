r"""The transfer models' tunable defaults, in one light module (no torch): the models use them as
their constructors' defaults and :mod:`headstart._methods` as the defaults of each method's typed
options (``create_study(method="scaml", fit_factr=1e7)`` overrides one).
"""

from __future__ import annotations

# --- ScaML-GP (headstart._transfer.scaml) --------------------------------------------------------
SCAML_PRUNE_THRESHOLD = 1e-3  # drop tasks with w_i sd_i M / sum_j w_j sd_j below this at prediction
SCAML_RESTART_EVERY = 5  # prior-drawn restarts after at least this many new observations ...
SCAML_RESTART_GROWTH = 0.25  # ... and at least this share of the observations at the last restart
# Stop when an L-BFGS-B step lowers the per-observation objective by less than ~2e-7 relative
# (SciPy's factr; its default 1e7 is ~2e-9). Warm refits then end within ~1e-4 nats of the
# default's optimum (posterior means within ~5e-4 sd) in 2x fewer evaluations at M = 256
# (measured for issue 18; regret in docs/benchmarks/scaml_paper_fit/).
SCAML_FIT_FACTR = 1e9
# Suggest from GP-BO's target-only GP once it explains the target better (ScaML.handover; issue 31)
SCAML_HANDOVER = False
SCAML_HANDOVER_MARGIN = 0.0  # nats by which the target-only GP's log evidence must win
SCAML_HANDOVER_MODES = ("switch", "average")  # one model by its evidence, or both weighted by it
SCAML_HANDOVER_MODE = "switch"
# A constant target-vs-sources offset ~ N(0, sd^2) in ScaML-GP's normalized units (ScaML's
# target_offset); 0: the paper's model, which has none
SCAML_TARGET_OFFSET = 0.0
SCAML_OUTPUT_WARP = "none"  # each task's values as they are (the paper's); or a warp of each task
SCAML_MAX_TARGET_OFFSET = 100.0  # beyond it the offset's prior is flat for every purpose


def check_target_offset(value: object) -> None:
    """Refuse a ``target_offset`` other than ``"fit"`` or a finite number in ``[0, 100]``
    (``InvalidSettingError``, a ``ValueError``): one check for ``ScaMLOptions`` and ``ScaML``."""
    import math
    import numbers

    from headstart.exceptions import InvalidSettingError

    if isinstance(value, str) and value == "fit":
        return
    number = isinstance(value, numbers.Real) and not isinstance(value, bool)
    if not (number and math.isfinite(value) and 0.0 <= value <= SCAML_MAX_TARGET_OFFSET):
        raise InvalidSettingError(
            f"target_offset must be 'fit' or a finite number >= 0 and <= "
            f"{SCAML_MAX_TARGET_OFFSET:g} (pooled standard deviations); got {value!r}."
        )


SCAML_SCREENING_POINTS = 1024  # acquisition screening: the reference code's raw_samples (App. C)

# --- RGPE (headstart._transfer.rgpe) ---------------------------------------------------------------
RGPE_N_SAMPLES = 256  # posterior samples for the weights (BoTorch's RGPE tutorial, transfergpbo)

# --- StackGP (headstart._transfer.stackgp) ---------------------------------------------------------
STACKGP_ALPHA = 1.0  # [Vizier] Sec. 3.3: the relative weight of a level's own data in beta

# --- ABLR / ABRAC (headstart._transfer.neural) -----------------------------------------------------
NEURAL_ACTIVE = "n_obs"  # ABRAC's active basis r = min(n, 20): our reading, the paper states none
# A Matérn GP beside the neural head (issue 32): chosen on forrester-loo and quadratic-loo,
# confirmed on the FC-Net tables (docs/benchmarks/abrac.md); False is the papers' method
NEURAL_RESIDUAL = True
# ABRAC's head beside the residual (issue 32): one precision for every basis function, as ABLR's,
# instead of the paper's ARD over the first min(n, 20) (n + 1 evidence parameters from n points:
# at n = 3 the fit pruned every function and the residual carried the data, GP-BO-like). Chosen
# on forrester-loo and quadratic-loo; on the FC-Net tables and the SVM space, which did not choose
# it, even with the ARD head (41 of 104 paired runs better, 42 worse; docs/benchmarks/abrac.md);
# True (with residual=False) is the paper's method
ABRAC_ARD = False
# Beyond this many target points (issue 32, speed at n >= 500): the residual's correlations are
# kept for the points nearest the incumbent only (neural_residual.fit_residual's max_points; each
# prediction is also conditioned on its nearest other point), and
# the head's and the residual's hyperparameters are refitted once the data have grown by
# NEURAL_REFIT_GROWTH since the last fit (conditioned at the last fit's values in between)
NEURAL_LOCAL_POINTS = 100
# the target's values before the neural methods' fits: see headstart._gp.warping (issue 32)
NEURAL_OUTPUT_WARP = "none"  # ABLR's (not measured with a warp)
# ABRAC's: chosen on the FC-Net tables and quadratic-loo, checked on forrester-loo, the SVM study
# and budget 200 (docs/benchmarks/abrac_warp/README.md)
ABRAC_OUTPUT_WARP = "auto"
# "auto": the standardized or the Yeo-Johnson targets, by their evidence (NeuralTransfer)
NEURAL_OUTPUT_WARPS = ("none", "yeo-johnson", "copula", "auto")
NEURAL_REFIT_GROWTH = 0.05
NEURAL_TRUNCATION = "uniform"  # nested dropout's truncation distribution
# The acquisition search's effort past the residual's exact block (issue 32, item 4): Sobol
# points screened and local searches. ABLR's: the engine's own (headstart._engine.optimize.N_SOBOL
# / N_STARTS, Optuna GPSampler's); ABRAC's: lighter, as the ABRAC paper's Emukit search (1,000
# random points, one local search) and ScaML-GP's reference code (1,024). Past the block the
# search was most of a suggestion's time. Chosen on the FC-Net tables and quadratic-loo at budget
# 200 (unchanged up to trial 100 by construction; at 200 within noise), checked on the SVM study
# at budget 150; applied from the first trial it cost rank at trial 25 on the tables, so it is
# not (docs/benchmarks/abrac_search/README.md)
NEURAL_SCREENING_POINTS = 2048
NEURAL_SEARCH_STARTS = 10
ABRAC_SCREENING_POINTS = 1024
ABRAC_SEARCH_STARTS = 5
NEURAL_BASES = ("nested", "ablr", "plain")  # how the basis is trained (features.train_features)
