r"""How long the oracle takes to score a kernel, predicted from its size (issue 17).

An oracle call fits ``d`` hyperparameters by L-BFGS-B (each step one ``N x N`` Cholesky and a
gradient with ``d`` terms) and then takes a ``d x d`` Hessian, so on one data set its time grows
with ``d``: on the benchmark's runs a 20-parameter kernel takes 5-30x as long as a base kernel.
:class:`OracleCostModel` fits

    log t = a + b log d

by least squares to the calls a search has made so far (``N`` is fixed within a search, so it is
absorbed in ``a``), with ``b`` clipped to ``[0.5, 3]`` and set to 1 until the calls span two
sizes. BOSOT divides its expected improvement by the predicted time (cost-aware acquisition,
:class:`~headstart.kernels.strategies.BOSOT`); users pay for a kernel search in seconds.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from headstart.kernels.grammar import Tree
from headstart.kernels.simplify import size

SLOPE_RANGE = (0.5, 3.0)


class OracleCostModel:
    """``seconds ~ exp(a) d^b`` with ``d`` the number of hyperparameters (noise included).

    Args:
        intercept: ``a``.
        slope: ``b``.
    """

    def __init__(self, intercept: float, slope: float) -> None:
        self.intercept, self.slope = float(intercept), float(slope)

    @staticmethod
    def n_params(tree: Tree) -> int:
        return size(tree) + 1

    @classmethod
    def fit(cls, trees: Sequence[Tree], seconds: Sequence[float]) -> OracleCostModel:
        """Least squares on ``(log d, log seconds)`` of the calls so far (at least one)."""
        d = np.log([cls.n_params(t) for t in trees])
        t = np.log(np.maximum(np.asarray(seconds, dtype=np.float64), 1e-4))
        if len(d) == 0:
            return cls(0.0, 1.0)
        slope = 1.0 if np.ptp(d) < 1e-09 else float(np.clip(np.polyfit(d, t, 1)[0], *SLOPE_RANGE))
        return cls(float(np.mean(t - slope * d)), slope)

    def predict(self, trees: Sequence[Tree]) -> np.ndarray:
        """Predicted oracle seconds of each tree."""
        d = np.log([self.n_params(t) for t in trees])
        return np.exp(self.intercept + self.slope * d)


__all__ = ["OracleCostModel"]
