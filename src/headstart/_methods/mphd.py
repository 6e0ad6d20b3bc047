r"""MPHD (``method="mphd"``): the Matérn GP under hyperpriors pre-trained on earlier studies of any
search space (Fan, Han & Wang 2024; :mod:`headstart.mphd`)."""

from __future__ import annotations

from typing import Any

import numpy as np

from headstart._methods.registry import BuildContext, MethodSpec, ReportContext, register_method


def build_mphd(ctx: BuildContext):
    """The Matérn GP, MAP-fit under the pre-trained MPHD priors of this space's dimensions."""
    from headstart._gp import MaternGP

    hyperprior = ctx.prior_model.hyperprior(ctx.kinds)
    return MaternGP(ctx.is_cat, deterministic=ctx.deterministic, hyperprior=hyperprior)


def mphd_report(ctx: ReportContext) -> dict[str, Any]:
    """Each parameter's pre-trained lengthscale prior (mean ``a / b``, shape ``a``) beside the
    lengthscale the MAP fit chose under it, and the spaces the prior was trained on."""
    diagnostics = ctx.surrogate().diagnostics()
    prior = diagnostics["hyperprior"]["lengthscale"]
    a, b = (np.asarray(prior[part], dtype=np.float64) for part in ("shape", "rate"))
    fitted = diagnostics.get("lengthscales")
    per_param = {
        name: {
            "prior_mean": float(a[j] / b[j]),
            "prior_shape": float(a[j]),
            "fitted": None if fitted is None else float(fitted[j]),
        }
        for j, name in enumerate(ctx.names)
    }
    model = ctx.build.prior_model
    spaces = [] if model is None else model.trained_on.get("spaces", [])
    return {"weights": {}, "prior": per_param, "trained_on": [s["name"] for s in spaces]}


register_method(
    MethodSpec(
        "mphd",
        "any-space",
        "GP with priors pre-trained on earlier studies of any search space (MPHD, Fan et al. 2024)",
        build_mphd,
        report=mphd_report,
    )
)

__all__ = ["build_mphd", "mphd_report"]
