"""The Matérn GP's option values, in one place for the GP core (:mod:`headstart._gp`) and the
method options that check them when a study is created (:mod:`headstart._methods.gp`), which
must not import torch."""

from __future__ import annotations

import numbers

from headstart.exceptions import InvalidSettingError

OUTPUT_WARPS = ("none", "yeo-johnson", "copula")  # headstart._gp.warping
INPUT_WARPS = ("none", "kumaraswamy")  # headstart._gp.input_warping
PRIOR_MEANS = ("mean", "auto")  # or a quantile in [0, 1] (headstart._gp.warping.center_targets)


def check_prior_mean(prior_mean: float | str) -> float | str:
    """``"mean"``, ``"auto"`` or a quantile in ``[0, 1]`` (a NumPy number becomes a ``float``);
    raises :class:`~headstart.exceptions.InvalidSettingError` (a ``ValueError``) otherwise."""
    if isinstance(prior_mean, str):
        ok = prior_mean in PRIOR_MEANS
    else:
        number = isinstance(prior_mean, numbers.Real) and not isinstance(prior_mean, bool)
        ok = number and 0.0 <= prior_mean <= 1.0
    if not ok:
        raise InvalidSettingError(
            "prior_mean must be 'mean', 'auto' or a quantile in [0, 1] of the observed values "
            f"(0: the worst); got {prior_mean!r}."
        )
    return prior_mean if isinstance(prior_mean, str) else float(prior_mean)


__all__ = ["INPUT_WARPS", "OUTPUT_WARPS", "PRIOR_MEANS", "check_prior_mean"]
