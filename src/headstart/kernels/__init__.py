r"""Automatic GP kernel structure search (BOSOT, Bitzer et al. NeurIPS 2022) and its baselines.

Quick start::

    from headstart.kernels import search
    result = search(X, y, budget=50)            # BOSOT over SE/LIN/PER/RQ with + and *
    print(result.expression, result.score)     # e.g. "SE[0] * PER[0] + LIN[0]", log evidence / N
    mean, std = result.model.predict(X_new)

Modules: :mod:`~headstart.kernels.grammar` (expression trees, parsing, grammar moves),
:mod:`~headstart.kernels.simplify` (canonical forms), :mod:`~headstart.kernels.cost` (oracle time),
:mod:`~headstart.kernels.covariance` (kernel math, priors, GPyTorch conversion),
:mod:`~headstart.kernels.oracle` (Laplace evidence / BIC), :mod:`~headstart.kernels.sot` (SOT
distances), :mod:`~headstart.kernels.metagp` (the GP over kernels),
:mod:`~headstart.kernels.strategies` (BOSOT, greedy, random), :mod:`~headstart.kernels.model`
(prediction with a searched kernel), :mod:`~headstart.kernels.api` (the entry point).
"""

from __future__ import annotations

import importlib
from typing import Any

# Loaded on first use: the kernel math needs torch, and `import headstart` must not load it.
_EXPORTS = {
    "to_gpytorch": "covariance",
    "Base": "grammar",
    "KernelGrammar": "grammar",
    "Op": "grammar",
    "canonical": "grammar",
    "parse": "grammar",
    "simplify": "simplify",
    "KernelModel": "model",
    "TreeGP": "model",
    "Oracle": "oracle",
    "OracleResult": "oracle",
    "evaluate": "oracle",
    "KernelSearchResult": "api",
    "load_csv": "api",
    "search": "api",
    "BOSOT": "strategies",
    "Evaluation": "strategies",
    "GreedySearch": "strategies",
    "RandomSearch": "strategies",
}


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        return getattr(importlib.import_module(f"{__name__}.{_EXPORTS[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "BOSOT",
    "Base",
    "Evaluation",
    "GreedySearch",
    "KernelGrammar",
    "KernelModel",
    "KernelSearchResult",
    "Op",
    "Oracle",
    "OracleResult",
    "RandomSearch",
    "TreeGP",
    "canonical",
    "evaluate",
    "load_csv",
    "parse",
    "search",
    "simplify",
    "to_gpytorch",
]
