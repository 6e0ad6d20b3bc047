r"""Extend headstart: a new method -- a surrogate, its options, its report -- in one file.

A method is a :class:`MethodSpec` given to :func:`register_method`. Its builder returns a
:class:`Surrogate` (``condition(train_X, train_y, rng) -> (Posterior, y_model)``); the one BO
engine does the rest (initial design, pending points, the acquisitions, piBO, the search), so the
new method works with studies, the CLI, parallel workers and the Optuna sampler at once. Typed
options (a :class:`MethodOptions` dataclass) are validated by ``create_study`` and stored with the
study; a transfer method also gives a ``report`` hook for ``study.transfer_report()``. The
conformance suite (:func:`check_all`) tests a surrogate against the protocol.

``docs/extending.md`` walks through a complete example, ``examples/rff_method.py`` (a GP
approximated by random Fourier features, in one file) and its test.

Example:
    >>> import numpy as np
    >>> import headstart as hs
    >>> from headstart import extend
    >>> class Flat:  # a (useless) surrogate: the same prediction everywhere
    ...     informative_prior = False
    ...     def condition(self, X, y, rng):
    ...         return FlatPosterior(), np.asarray(y, dtype=float)
    ...     def state(self): return {}
    ...     def load_state(self, state): pass
    ...     def diagnostics(self): return {}
    >>> class FlatPosterior:
    ...     outputscale, lengthscales, includes_noise = 1.0, None, False
    ...     def posterior(self, X): return np.zeros(len(X)), np.ones(len(X))
    ...     def posterior_and_grad(self, X):
    ...         return np.zeros(len(X)), np.ones(len(X)), np.zeros(X.shape), np.zeros(X.shape)
    ...     def joint_posterior(self, X): return np.zeros(len(X)), np.eye(len(X))
    >>> spec = extend.register_method(
    ...     extend.MethodSpec("flat", "none", "a flat model", lambda ctx: Flat()))
    >>> study = hs.create_study("f", hs.SearchSpace({"x": hs.Float(0, 1)}), storage=None,
    ...                         method="flat", seed=0)
    >>> study.tell(study.ask(), 1.0).state
    'complete'
    >>> extend.unregister_method("flat")
"""

from __future__ import annotations

from headstart._engine.protocols import FantasizingPosterior, ModelCache, Posterior, Surrogate
from headstart._methods import (
    BuildContext,
    MethodOptions,
    MethodSpec,
    NoOptions,
    ReportContext,
    get_method,
    method_names,
    register_method,
    unregister_method,
)
from headstart._methods.registry import check_number
from headstart.testing.surrogates import SurrogateCase, check_all, check_fantasize

__all__ = [
    "BuildContext",
    "FantasizingPosterior",
    "MethodOptions",
    "MethodSpec",
    "ModelCache",
    "NoOptions",
    "Posterior",
    "ReportContext",
    "Surrogate",
    "SurrogateCase",
    "check_all",
    "check_fantasize",
    "check_number",
    "get_method",
    "method_names",
    "register_method",
    "unregister_method",
]
