r"""The methods of ``create_study(method=...)``: the registry and the built-in methods.

:mod:`~headstart._methods.registry` holds :class:`MethodSpec`, :class:`MethodOptions` and the
registry; each built-in family registers itself from one module (a model of what
``docs/extending.md`` asks of a new method): :mod:`~headstart._methods.gp` (``gp``, ``random``,
``warmstart``), :mod:`~headstart._methods.transfer` (``scaml``, ``rgpe``, ``stackgp``, ``mtgp``),
:mod:`~headstart._methods.neural` (``abrac``, ``ablr``, ``ablr-sgd-fixed``) and
:mod:`~headstart._methods.mphd`. The public face of this package is :mod:`headstart.extend`.
"""

from headstart._engine import ACQUISITIONS
from headstart._methods import gp, mphd, neural, transfer  # noqa: F401  (register the built-ins)
from headstart._methods.registry import (
    DEFAULT_TRANSFER_METHOD,
    SOURCES,
    TRANSFER_UCB_BETA,
    BuildContext,
    MethodOptions,
    MethodSpec,
    NoOptions,
    ReportContext,
    check_source_arguments,
    default_method,
    get_method,
    merge_options,
    method_names,
    register_method,
    transfer_method_names,
    unregister_method,
)

__all__ = [
    "ACQUISITIONS",
    "DEFAULT_TRANSFER_METHOD",
    "SOURCES",
    "TRANSFER_UCB_BETA",
    "BuildContext",
    "MethodOptions",
    "MethodSpec",
    "NoOptions",
    "ReportContext",
    "check_source_arguments",
    "default_method",
    "get_method",
    "merge_options",
    "method_names",
    "register_method",
    "transfer_method_names",
    "unregister_method",
]
