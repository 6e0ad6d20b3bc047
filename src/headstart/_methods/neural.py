r"""ABRAC and ABLR (``method="abrac"``, ``"ablr"``, ``"ablr-sgd-fixed"``): a neural basis trained on
the sources, frozen, under a Bayesian linear regression head on the target
(:mod:`headstart._transfer.neural`). The three methods are three settings of one surrogate: how
the basis is trained and whether the head has one precision per basis function.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar

from headstart._methods.registry import (
    BuildContext,
    MethodOptions,
    MethodSpec,
    ReportContext,
    check_bool,
    check_choice,
    check_number,
    register_method,
)
from headstart._transfer import defaults
from headstart.exceptions import InvalidSettingError

TRUNCATIONS = ("uniform", "geometric")


@dataclass(frozen=True)
class NeuralOptions(MethodOptions):
    r"""Options of ``method="ablr"`` and ``"ablr-sgd-fixed"`` (and ``"abrac"``).

    Attributes:
        residual: A Matérn GP beside the head (``f = phi^T w + g``, fitted with it by MAP;
            :mod:`headstart._transfer.neural_residual`), so the model refines past what the
            frozen basis represents (default). ``False`` is the paper's method: faster (no
            ``n x n`` matrix), but it stalls where the basis does.
        source_mean: Centre the head's prior at the sources' average head instead of 0 (off:
            better on quadratic-loo, worse on forrester-loo, no better on the FC-Net tables).
        local_points: Past this many trials (default 100) a suggestion's cost stops growing:
            the residual GP is exact only among the trials nearest the best one (and each
            prediction's nearest other trial), the others enter the head's prior, and the
            hyperparameters (the head's too, with
            ``residual=False``) are refitted once the data have grown by 5%. ``None``: exact
            and fitted as below that size at every size (slower: an ``n x n`` matrix per
            suggestion).
        output_warp: How the target's values are mapped before the head and the residual GP
            see them: ``"none"`` (standardized), ``"yeo-johnson"`` (HEBO's power transform) or
            ``"copula"`` (normal scores of the ranks); :mod:`headstart._gp.warping`. ``"auto"``:
            the standardized or the Yeo-Johnson targets, whichever model has the higher
            evidence for the observed values (the map's Jacobian counted), chosen again at each
            fit from every start.
        screening_points: Past ``local_points`` trials (with ``residual``), the Sobol points
            the acquisition search screens (below: the engine's 2,048) ...
        search_starts: ... and the local searches (L-BFGS-B from the best screened points and
            the best trial) it runs (below: the engine's 10).
    """

    residual: bool = defaults.NEURAL_RESIDUAL
    source_mean: bool = False
    local_points: int | None = defaults.NEURAL_LOCAL_POINTS
    output_warp: str = defaults.NEURAL_OUTPUT_WARP
    screening_points: int = defaults.NEURAL_SCREENING_POINTS
    search_starts: int = defaults.NEURAL_SEARCH_STARTS

    def __post_init__(self) -> None:
        check_bool("residual", self.residual)
        check_number("screening_points", self.screening_points, low=1, integer=True)
        check_number("search_starts", self.search_starts, low=1, integer=True)
        check_bool("source_mean", self.source_mean)
        check_choice("output_warp", self.output_warp, defaults.NEURAL_OUTPUT_WARPS)
        n = self.local_points
        if n is not None and (isinstance(n, bool) or not isinstance(n, int) or n < 1):
            raise InvalidSettingError(
                f"local_points must be an integer >= 1 or None (exact at every size); got {n!r}."
            )


@dataclass(frozen=True)
class ABRACOptions(NeuralOptions):
    r"""Options of ``method="abrac"``.

    Attributes:
        residual, source_mean, local_points: As :class:`NeuralOptions`.
        ard: One precision per basis function in the head, over the leading ``active`` ones
            (the paper's ARD head). Off by default: one precision for every basis function, as
            ABLR's head (beside the residual GP it was better in the first trials of the papers'
            families and even on the FC-Net tables and the SVM space;
            ``docs/benchmarks/abrac.md``). The paper's method is ``ard=True, residual=False``.
        active: With ``ard=True``: how many of the ordered basis functions the head uses:
            ``"n_obs"`` (default, ``min(n, 20)`` after ``n`` observations: our reading, the
            paper states no rule), ``"all"`` (the paper's "ABRAC fixed") or a fixed integer.
        truncation: Nested dropout's truncation distribution, ``"uniform"`` or ``"geometric"``.
        output_warp: As :class:`NeuralOptions`, but ``"auto"`` by default: on the FC-Net
            tables (heavy-tailed validation errors) the mean rank went from 5.66 to 5.12 at trial
            10 and from 5.09 to 4.15 at trial 25, and at budget 200 parkinsons reached the
            optimum on every seed; it costs a little polishing on the smooth families
            (``docs/benchmarks/abrac_warp/README.md``). ``"none"`` is the earlier default.
        screening_points, search_starts: As :class:`NeuralOptions`, but lighter by default
            (1,024 and 5; the ABRAC paper's own search screened 1,000 random points and ran
            one local search). At 500 trials a suggestion then cost 0.12x GP-BO's instead of
            0.14x with the full search (same run), with the regret at budgets 150-200 on the
            FC-Net tables, quadratic-loo and the SVM study within noise of the full search's
            (``docs/benchmarks/abrac_search/README.md``).
    """

    ard: bool = defaults.ABRAC_ARD
    active: str | int = defaults.NEURAL_ACTIVE
    truncation: str = defaults.NEURAL_TRUNCATION
    output_warp: str = defaults.ABRAC_OUTPUT_WARP
    screening_points: int = defaults.ABRAC_SCREENING_POINTS
    search_starts: int = defaults.ABRAC_SEARCH_STARTS
    # studies stored before these options existed ran without a warp and with the engine's full
    # search: they resume so
    STORED_DEFAULTS: ClassVar[dict[str, Any]] = {
        "output_warp": "none",
        "screening_points": 2048,
        "search_starts": 10,
    }

    def __post_init__(self) -> None:
        super().__post_init__()
        check_bool("ard", self.ard)
        count = isinstance(self.active, int) and not isinstance(self.active, bool)
        if not (self.active in ("n_obs", "all") or (count and self.active >= 1)):
            raise InvalidSettingError(
                f"active must be 'n_obs', 'all' or an integer >= 1; got {self.active!r}."
            )
        if not self.ard and self.active != defaults.NEURAL_ACTIVE:
            raise InvalidSettingError(
                f"active={self.active!r} chooses the basis functions of an ARD head; with "
                "ard=False the head uses all of them. Pass ard=True with it (the paper's head)."
            )
        check_choice("truncation", self.truncation, TRUNCATIONS)


# method -> (how the basis is trained, ARD head by default; ABRAC's is its option ``ard``)
PRESETS = {
    "abrac": ("nested", defaults.ABRAC_ARD),
    "ablr": ("ablr", False),
    "ablr-sgd-fixed": ("plain", False),
}


def _settings(name: str, options: MethodOptions) -> dict[str, Any]:
    basis, ard = PRESETS[name]
    return {"basis": basis, "ard": ard, **options.to_json()}  # ABRACOptions.ard overrides


def neural_builder(name: str) -> Callable[[BuildContext], Any]:
    """A builder of the ABLR / ABRAC surrogate with ``name``'s preset and options."""

    def build(ctx: BuildContext):
        from headstart._transfer.neural import NeuralTransfer

        settings = _settings(name, ctx.options)
        return NeuralTransfer(
            ctx.meta_tasks,
            ctx.is_cat,
            seed=ctx.seed,
            cache=ctx.cache,
            deterministic=ctx.deterministic,
            **settings,
        )

    return build


def neural_prefit(name: str) -> Callable[[BuildContext], Any]:
    """Train and cache the sources' basis once, before parallel workers start."""

    def prefit(ctx: BuildContext):
        from headstart._transfer.neural import load_or_train

        settings = _settings(name, ctx.options)
        return load_or_train(
            ctx.meta_tasks,
            settings["basis"],
            seed=ctx.seed,
            cache=ctx.cache,
            truncation=settings.get("truncation", defaults.NEURAL_TRUNCATION),
            progress=True,
        )

    return prefit


def check_neural_sources(meta_tasks) -> None:
    from headstart._transfer.neural import check_sources

    check_sources(meta_tasks)


def neural_report(ctx: ReportContext) -> dict[str, Any]:
    """Each source's training error of the shared basis, and the target head."""
    diagnostics = ctx.surrogate().diagnostics()
    return {
        "weights": {},
        "source_fit": diagnostics["source_rmse"],
        "head": diagnostics.get("head"),
    }


for _name, _options, _description in (
    (
        "abrac",
        ABRACOptions,
        "ABRAC: nested-dropout neural basis, BLR head and residual GP (Horváth et al. 2021)",
    ),
    (
        "ablr",
        NeuralOptions,
        "ABLR: neural basis shared by Bayesian linear regression heads (Perrone et al. 2018)",
    ),
    (
        "ablr-sgd-fixed",
        NeuralOptions,
        "ABLR with a frozen MSE-trained basis (ABRAC paper's ablation), baseline",
    ),
):
    register_method(
        MethodSpec(
            _name,
            "same-space",
            _description,
            neural_builder(_name),
            options=_options,
            prefit=neural_prefit(_name),
            n_initial=3,  # the ABRAC paper's 3 random points: the head's prior mean is 0
            check_sources=check_neural_sources,
            prefit_at_creation=True,
            report=neural_report,
        )
    )

__all__ = ["PRESETS", "ABRACOptions", "neural_builder", "neural_prefit", "neural_report"]
