r"""Output warping: a monotone map of the targets before the GP sees them, for heavy tails.

Real objectives have heavy tails: one diverged training run scores a log-loss ten times the
others', and a GP on standardized values then spends its outputscale on that one point and sees
the good region as flat. A monotone, increasing warp keeps the order of the targets (so the
incumbent and the argmax of the GP mean stay where they are in data terms) and pulls the tail in.

* ``"yeo-johnson"``: the Yeo-Johnson power transform (Yeo & Johnson 2000, Sec. 2) of the
  standardized targets, ``lambda`` by maximum likelihood (SciPy's ``yeojohnson_normmax``),
  standardized again: the output transform of HEBO (Cowen-Rivers et al. 2022), the winner of the
  NeurIPS 2020 black-box optimization challenge.
* ``"copula"``: the normal scores ``Phi^{-1}((rank - 1/2) / n)`` (ties share their mean rank):
  only the order of the targets is kept, as in the Gaussian-copula transform of Salinas et al.
  2020 ("A quantile-based approach for hyperparameter transfer learning").

Targets are *maximized* here (the engine's convention), so a diverged run is a long *lower* tail.

**The prior mean** (:func:`center_targets`). The GP has mean zero on the mapped targets, so an
unexplored region is predicted at their mean. ``prior_mean=q`` shifts the targets so that zero is
their ``q``-quantile instead: ``q = 0`` puts the prior mean at the worst observed value (De Ath,
Fieldsend & Everson 2020, "What do you mean? The role of the mean function in Bayesian
optimisation", Sec. 5: the best of eight mean functions on their synthetic problems of five or
more dimensions), so EI looks for improvement near the data rather than in far corners whose
prediction the few good values pull up. ``"auto"`` takes the worst observed value that is not
an outlier (:func:`lower_fence`: a diverged training run would put the prior mean far below every
other value) while every observed value is distinct, and the mean once two are equal: a tie is
evidence of a plateau (a quantized metric, a table scored at its nearest entry), where the better
values lie elsewhere and a pessimistic prior would keep the search on the flat patch.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
from scipy import stats

from headstart._engine.numerics import standardize
from headstart._model_options import OUTPUT_WARPS, PRIOR_MEANS, check_prior_mean

MIN_POINTS = 3  # below this, a fitted lambda says nothing: plain standardization


def yeo_johnson(y: np.ndarray, lam: float) -> np.ndarray:
    r"""The Yeo-Johnson transform with parameter ``lam`` (Yeo & Johnson 2000, Sec. 2).

    ``((y + 1)^lam - 1) / lam`` for ``y >= 0`` (``log(y + 1)`` at ``lam = 0``) and
    ``-((1 - y)^(2 - lam) - 1) / (2 - lam)`` for ``y < 0`` (``-log(1 - y)`` at ``lam = 2``).
    """
    y = np.asarray(y, dtype=np.float64)
    pos = y >= 0
    out = np.empty_like(y)
    if abs(lam) < 1e-12:
        out[pos] = np.log1p(y[pos])
    else:
        out[pos] = np.expm1(lam * np.log1p(y[pos])) / lam
    if abs(lam - 2.0) < 1e-12:
        out[~pos] = -np.log1p(-y[~pos])
    else:
        out[~pos] = -np.expm1((2.0 - lam) * np.log1p(-y[~pos])) / (2.0 - lam)
    return out


def warp_targets(y: np.ndarray, kind: str) -> np.ndarray:
    """The standardized, warped targets (``kind`` one of :data:`OUTPUT_WARPS`).

    Increasing in ``y``; a constant ``y`` and fewer than :data:`MIN_POINTS` values are only
    standardized.
    """
    if kind not in OUTPUT_WARPS:
        raise ValueError(f"output_warp must be one of {OUTPUT_WARPS}; got {kind!r}.")
    z = standardize(y)[0]
    if kind == "none" or len(z) < MIN_POINTS or np.ptp(z) == 0:
        return z
    if kind == "copula":
        ranks = stats.rankdata(z)  # ties: mean rank
        return standardize(stats.norm.ppf((ranks - 0.5) / len(z)))[0]
    return yeo_johnson_targets(y)[0]


def lower_fence(z: np.ndarray) -> float:
    """The lowest value of ``z`` inside Tukey's lower fence ``Q1 - 1.5 IQR`` (Tukey 1977, Sec.
    2H): the worst value that is not an outlier, e.g. not a diverged training run. ``z``: finite,
    not empty (as :func:`center_targets` passes it); with fewer than 4 values nothing lies below
    the fence."""
    q1, q3 = np.quantile(z, [0.25, 0.75])
    return float(np.min(z[z >= q1 - 1.5 * (q3 - q1)]))


def center_targets(z: np.ndarray, prior_mean: float | str) -> np.ndarray:
    """``z`` shifted so that the GP's zero prior mean is its ``prior_mean``-quantile (``"auto"``:
    the worst value inside Tukey's lower fence, :func:`lower_fence`, while no two values of ``z``
    are equal, else unchanged); unchanged for ``"mean"``, a constant ``z`` or fewer than
    :data:`MIN_POINTS` values. See the module docs."""
    z = np.asarray(z, dtype=np.float64)
    if prior_mean == "mean" or len(z) < MIN_POINTS or np.ptp(z) == 0:
        return z
    if prior_mean == "auto":
        return z if len(np.unique(z)) < len(z) else z - lower_fence(z)
    return z - float(np.quantile(z, float(prior_mean)))


def yeo_johnson_targets(y: np.ndarray, lam: float | None = None) -> tuple[np.ndarray, float, float]:
    r"""``warp_targets(y, "yeo-johnson")`` and the log Jacobian of that map against plain
    standardization, ``sum_i log |du_i / dz_i|`` (``z`` the standardized ``y``, ``u`` the output):
    what a model of ``u`` adds to its log evidence to be compared with a model of ``z`` (the
    change of variables; Rios & Tobar 2019, Sec. 2). With ``u = (YJ_lam(z) - m) / s_u``,

        log |du/dz| = (lam - 1) log(1 + z) (z >= 0),   (1 - lam) log(1 - z) (z < 0),   - log s_u.

    0 where the map falls back to ``z`` (constant or too few values, or a non-finite output).

    Returns ``(u, log Jacobian, lam)``. ``lam``: a given parameter instead of the maximum
    likelihood one (SciPy's ``yeojohnson_normmax``, which costs milliseconds at a few hundred
    values), e.g. the last fit's between refits.
    """
    z = standardize(y)[0]
    if len(z) < MIN_POINTS or np.ptp(z) == 0:
        return z, 0.0, 1.0
    if lam is None:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # SciPy's optimizer warns on extreme lambdas
            lam = float(stats.yeojohnson_normmax(z))
    lam = float(np.clip(lam, -3.0, 5.0))  # keep the map tame on degenerate samples
    warped = yeo_johnson(z, lam)
    out, _, scale = standardize(warped)
    if not np.all(np.isfinite(out)):
        return z, 0.0, 1.0
    slope = np.where(z >= 0, (lam - 1.0) * np.log1p(np.abs(z)), (1.0 - lam) * np.log1p(np.abs(z)))
    return out, float(slope.sum() - len(z) * math.log(scale)), lam


__all__ = [
    "OUTPUT_WARPS",
    "PRIOR_MEANS",
    "center_targets",
    "check_prior_mean",
    "warp_targets",
    "yeo_johnson",
    "yeo_johnson_targets",
]
