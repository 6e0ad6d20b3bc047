r"""GP-BO (``method="gp"``), random search and the warm start: the methods without a transfer model.

``gp`` is the exact Matérn GP (:class:`headstart._gp.MaternGP`), or a GP with a searched
(``kernel="auto"``, BOSOT) or given kernel expression; ``warmstart`` is ``gp`` whose initial
design is the sources' best configurations (Feurer et al. 2015); ``random`` has no model.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any, ClassVar

from headstart._methods.registry import (
    BuildContext,
    MethodOptions,
    MethodSpec,
    ReportContext,
    check_choice,
    register_method,
)
from headstart._model_options import INPUT_WARPS, OUTPUT_WARPS, check_prior_mean
from headstart.exceptions import InvalidSettingError

GP_HYPERPRIORS = ("optuna", "lognormal")  # headstart._gp.hyperprior.NAMED that suit GP-BO


@dataclass(frozen=True)
class GPOptions(MethodOptions):
    r"""Options of ``method="gp"`` (and ``"warmstart"``).

    Attributes:
        kernel: ``"matern"`` (default), ``"auto"`` (BOSOT kernel search on the study's data,
            re-run every ``kernel_search["every"]`` observations; numeric parameters) or a
            fixed expression such as ``"SE[0] * SE[1] + LIN[1]"``, ``[i]`` being the i-th
            parameter.
        kernel_search: Options of ``kernel="auto"``: ``every`` (10), ``budget`` (kernels scored
            per search, 20), ``space`` (``"se-rq"`` or ``"full"``), ``restarts`` (3),
            ``ea_steps`` (6).
        hyperprior: The Matérn GP's hyperprior: ``"optuna"`` (default; Optuna ``GPSampler``'s)
            or ``"lognormal"`` (Hvarfner et al. 2024's dimension-scaled log-normal, BoTorch's).
        output_warp: How the Matérn GP maps the objective values before fitting, for heavy
            tails: ``"none"`` (default; standardized), ``"yeo-johnson"`` (HEBO's power
            transform) or ``"copula"`` (normal scores of the ranks). Off by default: on the
            selection tables (``docs/benchmarks/real_objectives_warp.md``, 10 seeds) both helped
            the heavy-tailed FC-Net slice and lost on the MLP tables.
        input_warp: ``"none"`` (default) or ``"kumaraswamy"``: every numeric parameter through
            a Kumaraswamy CDF learned with the GP (Snoek et al. 2014; HEBO, BoTorch's ``Warp``),
            for parameters whose effect is concentrated at one end of their range. Off by
            default: on the selection half of ``benchmarks/real_objectives.py`` (19 tasks, 10
            seeds) it lowered the mean normalized score from 0.555 to 0.438 at budget 50
            (``docs/benchmarks/real_objectives_ablations.md``).
        prior_mean: Where the Matérn GP's constant prior mean sits: ``"auto"`` (default): the
            worst observed value that is not an outlier (inside Tukey's lower fence, so a
            diverged run does not set it) while every observed value is distinct, the observed
            values' mean once two are equal (a plateau); ``"mean"`` (the observed values' mean
            always, as Optuna's ``GPSampler`` and BoTorch); or a quantile ``q`` in ``[0, 1]`` of
            the observed values (``0``: the worst, De Ath et al. 2020). A low prior mean predicts
            unexplored regions as mediocre rather than average, so EI spends fewer trials in far
            corners. Studies with several objectives or constraints, and grammar kernels, use
            the mean (``docs/benchmarks/real_objectives_ablations.md``).
    """

    kernel: str = "matern"
    kernel_search: dict | None = None
    hyperprior: str = "optuna"
    output_warp: str = "none"
    input_warp: str = "none"
    prior_mean: float | str = "auto"
    # studies stored before the default became "auto" (stop 61) resume with the mean they ran with
    STORED_DEFAULTS: ClassVar[dict[str, Any]] = {"prior_mean": "mean"}

    def __post_init__(self) -> None:
        if not isinstance(self.kernel, str):
            raise InvalidSettingError(
                "kernel must be 'matern', 'auto' or an expression like 'SE[0] * SE[1]'; "
                f"got {self.kernel!r}."
            )
        if self.kernel_search is not None:
            from headstart.kernels.settings import KernelSearchSettings

            KernelSearchSettings.from_mapping(self.kernel_search)
            object.__setattr__(self, "kernel_search", dict(self.kernel_search))
        check_choice("hyperprior", self.hyperprior, GP_HYPERPRIORS)
        check_choice("output_warp", self.output_warp, OUTPUT_WARPS)
        check_choice("input_warp", self.input_warp, INPUT_WARPS)
        object.__setattr__(self, "prior_mean", check_prior_mean(self.prior_mean))
        if not isinstance(self.prior_mean, str) and self.kernel != "matern":  # "auto": the mean
            raise InvalidSettingError(
                f"prior_mean={self.prior_mean!r} is the Matérn GP's; kernel={self.kernel!r} "
                "fits its own kernel on the standardized values."
            )
        for name in ("output_warp", "input_warp"):
            if getattr(self, name) != "none" and self.kernel != "matern":
                raise InvalidSettingError(
                    f"{name}={getattr(self, name)!r} is the Matérn GP's; kernel={self.kernel!r} "
                    "fits its own kernel on the standardized values."
                )
        if self.hyperprior != "optuna" and self.kernel != "matern":
            raise InvalidSettingError(
                f"hyperprior={self.hyperprior!r} is the Matérn GP's; kernel={self.kernel!r} "
                "fits its own kernel's hyperparameters."
            )

    def check_space(self, kinds: Sequence[str]) -> GPOptions:
        """The kernel in canonical form, checked against the space's column kinds."""
        if self.kernel == "matern":
            return self
        from headstart.kernels.settings import check_kernel

        return replace(self, kernel=check_kernel(self.kernel, kinds))


def build_gp(ctx: BuildContext):
    """The Matérn GP, or a grammar-kernel GP for ``kernel="auto"`` or an expression."""
    options = ctx.options
    if options.kernel == "matern":
        from headstart._gp import MaternGP
        from headstart._gp.fit_settings import CONSTRAINT_COORDS, MATERN_COORDS
        from headstart._gp.hyperprior import NAMED

        prior = NAMED[options.hyperprior]
        return MaternGP(
            ctx.is_cat,
            # ``deterministic`` is about the objective: a constraint learns its noise (pinned at
            # its floor of 1e-10, a slightly noisy constraint's fit collapses)
            deterministic=ctx.deterministic and not ctx.constraint,
            hyperprior=prior,
            output_warp=options.output_warp,
            input_warp=options.input_warp,
            # several outputs: the mean (issue 30's measurements are of one objective)
            prior_mean="mean" if ctx.multi_output else options.prior_mean,
            # a constraint's boundary resolved finer than the objective's 1e-3 sd noise floor
            coords=CONSTRAINT_COORDS if ctx.constraint else MATERN_COORDS,
        )
    from headstart.kernels.settings import KernelSearchSettings
    from headstart.kernels.surrogate import GrammarKernelGP

    return GrammarKernelGP(
        len(ctx.is_cat),
        kernel=options.kernel,
        settings=KernelSearchSettings.from_mapping(options.kernel_search),
        seed=ctx.seed,
    )


def warm_start_report(ctx: ReportContext) -> dict[str, Any]:
    """A warm start learns no weights: it reports the configurations it begins with."""
    return {"weights": {}, "warm_start": [dict(c) for c in ctx.warm_start]}


register_method(
    MethodSpec(
        "gp",
        "none",
        "GP-BO with the fast exact GP (Matérn-5/2, or a searched / given kernel)",
        build_gp,
        options=GPOptions,
        # issue 30: Branin's mean regret at trial 30 0.070 -> 0.011 (30 seeds); on the real
        # objectives it changes only smooth tasks: selection half 0.559 -> 0.558, held-out
        # half 0.541 -> 0.548 at budget 50; docs/benchmarks/real_objectives_ablations.md
        stall_rule=True,
    )
)
register_method(MethodSpec("random", "none", "uniform random search", None))
register_method(
    MethodSpec(
        "warmstart",
        "same-space",
        "the sources' best configurations first, then GP-BO (Feurer et al. 2015), baseline",
        build_gp,
        options=GPOptions,
        warm_start=True,
        report=warm_start_report,
    )
)

__all__ = ["GPOptions", "build_gp", "warm_start_report"]
