r"""The methods of ``create_study(method=...)``: the registry and the built-in methods.

:mod:`~headstart._methods.registry` holds :class:`MethodSpec`, :class:`MethodOptions` and the
registry; each built-in family registers itself from one module (a model of what
``docs/extending.md`` asks of a new method): :mod:`~headstart._methods.gp` (``gp``, ``random``,
``warmstart``), :mod:`~headstart._methods.transfer` (``scaml``, ``rgpe``, ``stackgp``, ``mtgp``),
:mod:`~headstart._methods.neural` (``abrac``, ``ablr``, ``ablr-sgd-fixed``) and
:mod:`~headstart._methods.mphd`. The public face of this package is :mod:`headstart.extend`.
"""

from headstart._engine import ACQUISITIONS
from headstart._methods import gp, mphd, neural, registry, transfer  # noqa: F401  (built-ins)
from headstart._methods.registry import *  # noqa: F403  (the registry is this package's API)

__all__ = ["ACQUISITIONS", *registry.__all__]
