r"""The method registry: one :class:`MethodSpec` per ``create_study(method=...)``.

A method is its name, which earlier tasks it needs (``sources``: none, the same search space, or
any search space), its default acquisition and UCB ``beta``, whether it starts with an initial
design, and a builder of its :class:`~headstart._engine.protocols.Surrogate`. Adding a method is
one :func:`register_method` call; the study, the strategy, the CLI and the checks read this table.
Builders import their model lazily, so ``import headstart`` loads no torch.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from headstart._engine import ACQUISITIONS, UCB_BETA
from headstart.exceptions import InvalidSettingError

SOURCES = ("none", "same-space", "any-space")
TRANSFER_UCB_BETA = 9.0  # ScaML-GP's experiments: UCB with beta^(1/2) = 3 for every method


@dataclass(frozen=True)
class BuildContext:
    """What a builder may use to make a surrogate.

    Attributes:
        is_cat: ``d`` mask of categorical columns of the encoded space.
        seed: The study's seed.
        deterministic: The objective is noise-free.
        meta_tasks: Earlier tasks (:class:`headstart._meta.MetaTask`), for transfer methods.
        cache: A :class:`~headstart._engine.protocols.ModelCache` for fitted meta-models.
        kinds: ``"continuous"``, ``"integer"`` or ``"categorical"`` per encoded column.
        prior_model: The study's pre-trained MPHD prior (:class:`headstart.mphd.PriorModel`),
            for methods whose sources may come from any search space.
        kernel: ``"matern"``, ``"auto"`` or a kernel expression.
        kernel_search: Options of ``kernel="auto"`` (a mapping).
        map: ``map(function, payloads)`` that runs pieces of a large fit elsewhere (a Dask
            cluster); ``None`` runs everything in this process.
    """

    is_cat: np.ndarray
    seed: int = 0
    deterministic: bool = False
    meta_tasks: Sequence[Any] = ()
    cache: Any = None
    kinds: tuple[str, ...] = ()
    prior_model: Any = None
    kernel: str = "matern"
    kernel_search: Any = None
    map: Callable[[Callable, list], Any] | None = None


@dataclass(frozen=True)
class MethodSpec:
    r"""One optimization method.

    Args:
        name: The ``method=`` string.
        sources: ``"none"``, ``"same-space"`` (``transfer_from`` required, same space) or
            ``"any-space"`` (``transfer_from`` required, any space).
        description: One line for ``--help`` and errors.
        build: ``BuildContext -> Surrogate``; ``None`` for model-free methods (random search).
        acquisition: Default acquisition without user priors.
        acquisition_with_priors: Default acquisition when piBO is active.
        ucb_beta: Default UCB ``beta``.
        first_trial: Default rule for the suggestion before any target observation
            (``"mean"`` or ``"acquisition"``; see :class:`headstart._config.StudyConfig`).
        initial_design: Start with a Sobol design (``False``: the model is used from trial 1).
        kernels: Accepts ``kernel="auto"`` or an expression.
        warm_start: The initial design is the sources' best configurations (ranked per source,
            interleaved; :func:`headstart._meta.ranked_configurations`) instead of Sobol points.
        prefit: ``BuildContext -> None``: fits and caches what every process of the study
            shares (meta-task GPs), so that parallel workers load it instead of each fitting it.
        n_initial: Initial-design size when the study sets none (``None``: the general rule
            ``min(2 d + 1, 10, budget / 5)``).
        check_sources: ``meta_tasks -> None``, raising a :class:`~headstart.HeadstartError` for
            sources the method cannot use; ``create_study`` calls it before storing anything.
        prefit_at_creation: ``create_study`` runs ``prefit`` (with its progress bar), so a long
            training happens there rather than inside a later ``ask``.
    """

    name: str
    sources: str
    description: str
    build: Callable[[BuildContext], Any] | None
    acquisition: str = "logei"
    acquisition_with_priors: str = "ei"
    ucb_beta: float = UCB_BETA
    first_trial: str = "acquisition"
    initial_design: bool = True
    kernels: bool = False
    warm_start: bool = False
    prefit: Callable[[BuildContext], Any] | None = None
    n_initial: int | None = None
    check_sources: Callable[[Sequence[Any]], None] | None = None
    prefit_at_creation: bool = False

    def __post_init__(self) -> None:
        if self.sources not in SOURCES:
            raise ValueError(f"sources must be one of {SOURCES}; got {self.sources!r}.")
        for acq in (self.acquisition, self.acquisition_with_priors):
            if acq not in ACQUISITIONS:
                raise ValueError(f"acquisition must be one of {ACQUISITIONS}; got {acq!r}.")

    @property
    def uses_sources(self) -> bool:
        """Whether the method learns from ``transfer_from``."""
        return self.sources != "none"

    @property
    def same_space(self) -> bool:
        """Whether the method's sources must share the study's search space (meta-tasks)."""
        return self.sources == "same-space"

    @property
    def model_based(self) -> bool:
        return self.build is not None

    def default_acquisition(self, priors: bool) -> str:
        """The acquisition used when the study does not choose one."""
        return self.acquisition_with_priors if priors else self.acquisition


_REGISTRY: dict[str, MethodSpec] = {}


def register_method(spec: MethodSpec) -> MethodSpec:
    """Add ``spec`` to the registry (a name can be registered once)."""
    if spec.name in _REGISTRY:
        raise ValueError(f"Method {spec.name!r} is already registered.")
    _REGISTRY[spec.name] = spec
    return spec


def get_method(name: Any) -> MethodSpec:
    """The spec of ``name``; :class:`InvalidSettingError` listing the methods otherwise."""
    if not isinstance(name, str) or name not in _REGISTRY:
        raise InvalidSettingError(f"method must be one of {method_names()}; got {name!r}.")
    return _REGISTRY[name]


def method_names(*, sources: str | None = None) -> tuple[str, ...]:
    """Registered method names, optionally only those with this ``sources`` kind."""
    return tuple(n for n, s in _REGISTRY.items() if sources is None or s.sources == sources)


def transfer_method_names() -> tuple[str, ...]:
    """Methods that learn from ``transfer_from``."""
    return tuple(n for n, s in _REGISTRY.items() if s.uses_sources)


DEFAULT_TRANSFER_METHOD = "scaml"


def default_method(transfer_from: Any, prior_model: Any) -> str:
    """The method when none is given: ``"mphd"`` with a ``prior_model``, the transfer default
    (ScaML-GP) with sources, else GP-BO. A user who passes sources means "use them"."""
    if prior_model is not None:
        return "mphd"
    if transfer_from is not None and not (
        isinstance(transfer_from, list | tuple) and not transfer_from
    ):
        return DEFAULT_TRANSFER_METHOD
    return "gp"


def check_source_arguments(method: Any, transfer_from: Any, prior_model: Any) -> MethodSpec:
    """The spec of ``method`` once ``transfer_from`` / ``prior_model`` are known to suit it.

    The one check of ``create_study`` and the Optuna sampler: MPHD takes exactly one of the two;
    other transfer methods need ``transfer_from``; the rest take neither.

    Raises:
        InvalidSettingError: an unknown method, or arguments the method does not take.
    """
    from headstart.sources._domains import check_prior_arguments

    spec = get_method(method)
    if spec.sources == "any-space":
        check_prior_arguments(transfer_from, prior_model)
    elif prior_model is not None:
        raise InvalidSettingError(
            f"prior_model is for method='mphd' (a prior pre-trained on other search spaces); "
            f"method={method!r} does not use it."
        )
    elif transfer_from is not None and not spec.uses_sources:
        raise InvalidSettingError(
            f"transfer_from needs a transfer method; method={method!r} ignores earlier tasks. "
            f"Use method='scaml' (or one of {transfer_method_names()})."
        )
    elif transfer_from is None and spec.uses_sources:
        raise InvalidSettingError(
            f"method={method!r} learns from earlier tasks; pass transfer_from=... (study names, "
            "'all', a DataFrame, MetaTasks or Optuna studies), or use method='gp'."
        )
    return spec


# --- the built-in methods ---------------------------------------------------------------------
def _build_gp(ctx: BuildContext):
    if ctx.kernel == "matern":
        from headstart._gp import MaternGP

        return MaternGP(ctx.is_cat, deterministic=ctx.deterministic)
    from headstart.kernels.settings import KernelSearchSettings
    from headstart.kernels.surrogate import GrammarKernelGP

    return GrammarKernelGP(
        len(ctx.is_cat),
        kernel=ctx.kernel,
        settings=KernelSearchSettings.from_mapping(ctx.kernel_search),
        seed=ctx.seed,
    )


def _prefit_meta_gps(ctx: BuildContext):
    """The meta-task GPs from the model cache, fitted (spread by ``ctx.map``) and cached if new."""
    from headstart._transfer.cache import cached_meta_gps

    return cached_meta_gps(ctx.meta_tasks, ctx.is_cat, ctx.cache, map=ctx.map)


def _transfer_builder(
    module: str, name: str, *, meta_gps: bool, **settings: Any
) -> Callable[[BuildContext], Any]:
    """A builder of ``headstart._transfer.<module>.<name>``; ``meta_gps``: it takes the cached
    meta-task GPs (ScaML-GP, and RGPE whose base models are the same GPs); ``settings`` are
    passed to the model."""

    def build(ctx: BuildContext):
        model = getattr(importlib.import_module(f"headstart._transfer.{module}"), name)
        kwargs = dict(settings)
        if meta_gps:
            kwargs["meta"] = _prefit_meta_gps(ctx)
        return model(
            ctx.meta_tasks, ctx.is_cat, seed=ctx.seed, deterministic=ctx.deterministic, **kwargs
        )

    return build


def _neural_builder(variant: str) -> Callable[[BuildContext], Any]:
    """A builder of the ABLR / ABRAC surrogate (:mod:`headstart._transfer.neural`)."""

    def build(ctx: BuildContext):
        from headstart._transfer.neural import NeuralTransfer

        return NeuralTransfer(
            ctx.meta_tasks, ctx.is_cat, seed=ctx.seed, variant=variant, cache=ctx.cache
        )

    return build


def _neural_check(meta_tasks) -> None:
    from headstart._transfer.neural import check_sources

    check_sources(meta_tasks)


def _neural_prefit(variant: str) -> Callable[[BuildContext], Any]:
    """Train and cache the sources' basis once, before parallel workers start."""

    def prefit(ctx: BuildContext):
        from headstart._transfer.neural import VARIANTS, load_or_train

        return load_or_train(
            ctx.meta_tasks, VARIANTS[variant], seed=ctx.seed, cache=ctx.cache, progress=True
        )

    return prefit


def _build_mphd(ctx: BuildContext):
    """The Matérn GP, MAP-fit under the pre-trained MPHD priors of this space's dimensions."""
    from headstart._gp import MaternGP

    return MaternGP(
        ctx.is_cat,
        deterministic=ctx.deterministic,
        hyperprior=ctx.prior_model.hyperprior(ctx.kinds),
    )


# Transfer defaults chosen by measurement (docs/benchmarks/transfer_defaults.md): the first trial
# maximizes the pessimistic mu - sigma of the sources' prior (where they agree), then LogEI. The
# ScaML-GP paper's setting (UCB beta = 9 throughout) is acquisition="ucb", first_trial=
# "acquisition" (ucb_beta stays 9 for transfer methods).
_TRANSFER = {
    "sources": "same-space",
    "acquisition": "logei",
    "acquisition_with_priors": "logei",
    "ucb_beta": TRANSFER_UCB_BETA,
    "first_trial": "lcb",
    "initial_design": False,  # the first suggestion already uses the meta-data
}

register_method(
    MethodSpec(
        "gp",
        "none",
        "GP-BO with the fast exact GP (Matérn-5/2, or a searched / given kernel)",
        _build_gp,
        kernels=True,
    )
)
register_method(MethodSpec("random", "none", "uniform random search", None))
register_method(
    MethodSpec(
        "warmstart",
        "same-space",
        "the sources' best configurations first, then GP-BO (Feurer et al. 2015), baseline",
        _build_gp,
        kernels=True,
        warm_start=True,
    )
)
register_method(
    MethodSpec(
        "mphd",
        "any-space",
        "GP with priors pre-trained on earlier studies of any search space (MPHD, Fan et al. 2024)",
        _build_mphd,
    )
)
for _name, _description in (
    ("abrac", "ABRAC: nested-dropout neural basis, ARD head of growing size (Horváth et al. 2021)"),
    ("ablr", "ABLR: neural basis shared by Bayesian linear regression heads (Perrone et al. 2018)"),
    ("ablr-sgd-fixed", "ABLR with a frozen MSE-trained basis (ABRAC paper's ablation), baseline"),
):
    register_method(
        MethodSpec(
            _name,
            "same-space",
            _description,
            _neural_builder(_name),
            prefit=_neural_prefit(_name),
            n_initial=3,  # the ABRAC paper's 3 random points: the head's prior mean is 0
            check_sources=_neural_check,
            prefit_at_creation=True,
        )
    )
for _name, _module, _class, _meta_gps, _description in (
    ("scaml", "scaml", "ScaML", True, "ScaML-GP (Tighineanu et al., AISTATS 2024)"),
    ("rgpe", "rgpe", "RGPE", True, "RGPE (Feurer et al. 2018), baseline"),
    (
        "stackgp",
        "stackgp",
        "StackGP",
        False,
        "stacked residual GPs (Golovin et al. 2017), baseline",
    ),
    ("mtgp", "mtgp", "MultiTaskGPSurrogate", False, "BoTorch's multi-task GP, baseline"),
):
    register_method(
        MethodSpec(
            _name,
            description=_description,
            build=_transfer_builder(_module, _class, meta_gps=_meta_gps),
            prefit=_prefit_meta_gps if _meta_gps else None,
            **_TRANSFER,
        )
    )

__all__ = [
    "ACQUISITIONS",
    "BuildContext",
    "MethodSpec",
    "get_method",
    "method_names",
    "register_method",
    "transfer_method_names",
]
