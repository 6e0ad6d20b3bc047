r"""Automatic GP kernel structure search (BOSOT, Bitzer et al. NeurIPS 2022) and its baselines.

Quick start::

    from headstart.kernels import search
    result = search(X, y, budget=50)            # BOSOT over SE/LIN/PER/RQ with + and *
    print(result.expression, result.score)     # e.g. "SE[0] * PER[0] + LIN[0]", log evidence / N
    mean, std = result.model.predict(X_new)

Modules: :mod:`~headstart.kernels.grammar` (expression trees, parsing, grammar moves),
:mod:`~headstart.kernels.covariance` (kernel math, priors, GPyTorch conversion),
:mod:`~headstart.kernels.oracle` (Laplace evidence / BIC), :mod:`~headstart.kernels.sot` (SOT
distances), :mod:`~headstart.kernels.metagp` (the GP over kernels),
:mod:`~headstart.kernels.strategies` (BOSOT, greedy, random), :mod:`~headstart.kernels.model`
(prediction with a searched kernel), :mod:`~headstart.kernels.search` (the entry point).
"""

from __future__ import annotations

from headstart.kernels.covariance import to_gpytorch
from headstart.kernels.grammar import Base, KernelGrammar, Op, canonical, parse
from headstart.kernels.model import KernelModel, TreeGP
from headstart.kernels.oracle import Oracle, OracleResult, evaluate
from headstart.kernels.search import KernelSearchResult, load_csv, search
from headstart.kernels.strategies import BOSOT, Evaluation, GreedySearch, RandomSearch

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
    "to_gpytorch",
]
