r"""The method registry: one :class:`MethodSpec` per ``create_study(method=...)``.

A method is its name, which earlier tasks it needs (``sources``: none, the same search space, or
any search space), its typed options (a :class:`MethodOptions` dataclass, validated and stored
with the study), its default acquisition and UCB ``beta``, whether it starts with an initial
design, a builder of its :class:`~headstart._engine.protocols.Surrogate`, and a hook that turns
what the model learned into the fields of a :class:`~headstart.transfer.TransferReport`. Adding a
method is one :func:`register_method` call (see ``docs/extending.md``); the study, the strategy,
the CLI and the checks read this table and name no method. Builders import their model lazily,
so ``import headstart`` loads no torch.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from headstart._engine import ACQUISITIONS, UCB_BETA
from headstart.exceptions import InvalidSettingError

SOURCES = ("none", "same-space", "any-space")
TRANSFER_UCB_BETA = 9.0  # ScaML-GP's experiments: UCB with beta^(1/2) = 3 for every method


# --- typed options ------------------------------------------------------------------------------
@dataclass(frozen=True)
class MethodOptions:
    r"""Base of a method's options: a frozen dataclass whose fields are the options.

    Subclasses declare each option as a field with its default and check values in
    ``__post_init__`` (raising :class:`~headstart.exceptions.InvalidSettingError`). The study
    stores :meth:`to_json`; :meth:`parse` reads what a user passes (a mapping or an instance).

    Example:
        >>> @dataclass(frozen=True)
        ... class Tolerance(MethodOptions):
        ...     tol: float = 1e-3
        >>> Tolerance.parse({"tol": 0.1}, method="toy").to_json()
        {'tol': 0.1}
    """

    @classmethod
    def names(cls) -> tuple[str, ...]:
        """The option names."""
        return tuple(f.name for f in dataclasses.fields(cls))

    @classmethod
    def parse(
        cls,
        values: Mapping[str, Any] | MethodOptions | None,
        *,
        method: str,
        settings: Sequence[str] = (),
    ) -> Any:
        """The options of ``values`` (``None``: every default); ``settings`` names the
        study-level settings the caller also takes (for the message about a misspelling).

        Raises:
            InvalidSettingError: an option the method does not have, or a bad value.
        """
        if isinstance(values, cls):
            return values
        if isinstance(values, MethodOptions):
            raise InvalidSettingError(
                f"method={method!r} takes {cls.__name__}; got {type(values).__name__}."
            )
        values = dict(values or {})
        unknown = sorted(set(values) - set(cls.names()))
        if unknown:
            raise InvalidSettingError(
                unknown_options_message(method, unknown, cls.names(), settings)
            )
        return cls(**values)

    def to_json(self) -> dict[str, Any]:
        """The stored form (plain JSON types)."""
        return dataclasses.asdict(self)

    def check_space(self, kinds: Sequence[str]) -> MethodOptions:
        """These options checked against a space's column kinds (and made canonical); the default
        has nothing to check."""
        return self


@dataclass(frozen=True)
class NoOptions(MethodOptions):
    """A method without options."""


def unknown_options_message(
    method: str, unknown: Sequence[str], names: Sequence[str], settings: Sequence[str] = ()
) -> str:
    """Why ``unknown`` options are refused, naming the methods that do take them, and the
    closest setting or option when one is a likely misspelling (``settings``: the study-level
    settings the caller also accepts)."""
    import difflib

    close = [
        match
        for name in unknown
        for match in difflib.get_close_matches(name, [*settings, *names], n=1, cutoff=0.75)
    ]
    takers = {
        name: [m for m, spec in _REGISTRY.items() if name in spec.options.names()]
        for name in unknown
    }
    hints = "; ".join(
        f"{name!r} is an option of method {', '.join(map(repr, ms))}"
        for name, ms in takers.items()
        if ms
    )
    have = f"its options are {', '.join(names)}" if names else "it has no options"
    what = "setting or option" if settings else "option"
    return (
        f"Unknown {what} {', '.join(map(repr, unknown))}: method={method!r} has no option of "
        f"that name; {have}"
        + (f" ({hints})" if hints else "")
        + (f". Did you mean {', '.join(map(repr, close))}?" if close else ".")
    )


def check_number(
    label: str, value: Any, *, low: float | None = None, integer: bool = False, above: bool = False
) -> None:
    """Refuse ``value`` unless it is a finite number (an integer) ``>= low`` (``> low``)."""
    kinds = (int, np.integer) if integer else (int, float, np.integer, np.floating)
    ok = isinstance(value, kinds) and not isinstance(value, bool) and math.isfinite(value)
    if ok and low is not None:
        ok = value > low if above else value >= low
    if not ok:
        what = "an integer" if integer else "a finite number"
        bound = "" if low is None else f" {'>' if above else '>='} {low:g}"
        raise InvalidSettingError(f"{label} must be {what}{bound}; got {value!r}.")


def check_bool(label: str, value: Any) -> None:
    """Refuse ``value`` unless it is ``True`` or ``False``."""
    if not isinstance(value, bool):
        raise InvalidSettingError(f"{label} must be True or False; got {value!r}.")


def check_choice(label: str, value: Any, choices: tuple) -> None:
    """Refuse ``value`` unless it is one of ``choices``."""
    if value not in choices:
        raise InvalidSettingError(f"{label} must be one of {choices}; got {value!r}.")


# --- what a builder and a report hook see ----------------------------------------------------------
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
        options: The method's options (its :class:`MethodOptions` subclass).
        map: ``map(function, payloads)`` that runs pieces of a large fit elsewhere (a Dask
            cluster); ``None`` runs everything in this process.
        multi_output: The study has several objectives or constraints (one model per output).
        constraint: This model is one of the study's constraints (``False``: an objective).
    """

    is_cat: np.ndarray
    seed: int = 0
    deterministic: bool = False
    meta_tasks: Sequence[Any] = ()
    cache: Any = None
    kinds: tuple[str, ...] = ()
    prior_model: Any = None
    options: MethodOptions = NoOptions()
    map: Callable[[Callable, list], Any] | None = None
    multi_output: bool = False
    constraint: bool = False


@dataclass(frozen=True)
class ReportContext:
    """What a method's report hook may use.

    Attributes:
        surrogate: Returns the method's surrogate conditioned on the completed trials
            (conditioning costs a fit: call it only when the report needs the model).
        names: The encoded columns' parameter names.
        build: The :class:`BuildContext` the surrogate was built with.
        warm_start: The configurations a warm-started design begins with.
    """

    surrogate: Callable[[], Any]
    names: tuple[str, ...]
    build: BuildContext
    warm_start: tuple[dict, ...] = ()


# --- the spec and the registry --------------------------------------------------------------------
@dataclass(frozen=True)
class MethodSpec:
    r"""One optimization method.

    Args:
        name: The ``method=`` string.
        sources: ``"none"``, ``"same-space"`` (``transfer_from`` required, same space) or
            ``"any-space"`` (``transfer_from`` required, any space).
        description: One line for ``--help`` and errors.
        build: ``BuildContext -> Surrogate``; ``None`` for model-free methods (random search).
        options: The method's :class:`MethodOptions` subclass (:class:`NoOptions` by default).
        acquisition: Default acquisition without user priors.
        acquisition_with_priors: Default acquisition when piBO is active.
        ucb_beta: Default UCB ``beta``.
        first_trial: Default rule for the suggestion before any target observation
            (see :class:`headstart._config.StudyConfig`).
        initial_design: Start with a Sobol design (``False``: the model is used from trial 1).
        plateau_rule: Default of the study setting ``plateau_rule`` (exact ties between trials
            exclude their neighbourhoods from the acquisition search).
        stall_rule: Default of the study setting ``stall_rule`` (stalled refinement at the
            incumbent sends the next trial out of its neighbourhood).
        warm_start: The initial design is the sources' best configurations (ranked per source,
            interleaved; :func:`headstart._meta.ranked_configurations`) instead of Sobol points.
        prefit: ``BuildContext -> None``: fits and caches what every process of the study
            shares (meta-task GPs), so that parallel workers load it instead of each fitting it.
        n_initial: Initial-design size when the study sets none (``None``: the general rule
            ``min(2 d + 1, 10, budget / 5)``, or ``min(10, budget / 5)`` with several
            objectives or constraints; :func:`headstart._strategy.default_n_initial`).
        check_sources: ``meta_tasks -> None``, raising a :class:`~headstart.HeadstartError` for
            sources the method cannot use; ``create_study`` calls it before storing anything.
        prefit_at_creation: ``create_study`` runs ``prefit`` (with its progress bar), so a long
            training happens there rather than inside a later ``ask``.
        report: ``ReportContext -> dict``: the fields of the study's
            :class:`~headstart.transfer.TransferReport` beyond its name, method, trial count and
            check (``weights`` at least); ``None`` for methods that learn nothing from sources.
    """

    name: str
    sources: str
    description: str
    build: Callable[[BuildContext], Any] | None
    options: type[MethodOptions] = NoOptions
    acquisition: str = "logei"
    acquisition_with_priors: str = "ei"
    ucb_beta: float = UCB_BETA
    first_trial: str = "acquisition"
    initial_design: bool = True
    plateau_rule: bool = False
    stall_rule: bool = False
    warm_start: bool = False
    prefit: Callable[[BuildContext], Any] | None = None
    n_initial: int | None = None
    check_sources: Callable[[Sequence[Any]], None] | None = None
    prefit_at_creation: bool = False
    report: Callable[[ReportContext], dict[str, Any]] | None = None

    def __post_init__(self) -> None:
        if self.sources not in SOURCES:
            raise ValueError(f"sources must be one of {SOURCES}; got {self.sources!r}.")
        for acq in (self.acquisition, self.acquisition_with_priors):
            if acq not in ACQUISITIONS:
                raise ValueError(f"acquisition must be one of {ACQUISITIONS}; got {acq!r}.")
        if not (isinstance(self.options, type) and issubclass(self.options, MethodOptions)):
            raise ValueError(f"options must be a MethodOptions subclass; got {self.options!r}.")
        if self.uses_sources and self.report is None:
            raise ValueError(f"Method {self.name!r} learns from sources: give it a report hook.")

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
OptionsValue = MethodOptions | Mapping[str, Any] | None


def register_method(spec: MethodSpec) -> MethodSpec:
    """Add ``spec`` to the registry (a name can be registered once)."""
    if spec.name in _REGISTRY:
        raise ValueError(f"Method {spec.name!r} is already registered.")
    _REGISTRY[spec.name] = spec
    return spec


def unregister_method(name: str) -> None:
    """Remove a method registered by :func:`register_method` (tests, notebooks)."""
    if name not in _REGISTRY:
        raise InvalidSettingError(f"Method {name!r} is not registered.")
    del _REGISTRY[name]


def get_method(name: Any) -> MethodSpec:
    """The spec of ``name``; :class:`InvalidSettingError` listing the methods otherwise."""
    if not isinstance(name, str) or name not in _REGISTRY:
        raise InvalidSettingError(
            f"method must be one of {method_names()}; got {name!r}. A method registered by your "
            "own code (headstart.extend.register_method) must be registered in every process "
            "that opens its studies."
        )
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


def merge_options(
    method: str,
    options: OptionsValue,
    extra: Mapping[str, Any],
    *,
    settings: Sequence[str] = (),
) -> dict[str, Any]:
    """``options`` (a mapping or the method's options object) with keyword ``extra`` options on
    top, as the JSON the study stores, every default filled in (``settings``: the caller's
    other keyword names, for the message about a misspelling).

    Raises:
        InvalidSettingError: an option the method does not have (the message names the methods
            that have it), a bad value, or an option given twice.
    """
    spec = get_method(method)
    if isinstance(options, MethodOptions):
        options = spec.options.parse(options, method=method).to_json()
    base = dict(options or {})
    twice = sorted(set(base) & set(extra))
    if twice:
        raise InvalidSettingError(f"Option(s) {twice} given both in options= and as keywords.")
    return spec.options.parse({**base, **extra}, method=method, settings=settings).to_json()


__all__ = [
    "DEFAULT_TRANSFER_METHOD",
    "SOURCES",
    "TRANSFER_UCB_BETA",
    "BuildContext",
    "MethodOptions",
    "MethodSpec",
    "NoOptions",
    "ReportContext",
    "check_bool",
    "check_choice",
    "check_number",
    "check_source_arguments",
    "default_method",
    "get_method",
    "merge_options",
    "method_names",
    "register_method",
    "transfer_method_names",
    "unknown_options_message",
    "unregister_method",
]
