r"""Fast exact-GP Bayesian optimization engine (private; used by :mod:`headstart.strategy`).

Modules, one job each:

* :mod:`~headstart._gp.kernel` -- Matérn-5/2 ARD kernel with Hamming distance on categoricals;
* :mod:`~headstart._gp.prior` -- hyperpriors;
* :mod:`~headstart._gp.model` -- exact GP: robust Cholesky, MAP fit, posterior;
* :mod:`~headstart._gp.acquisition` -- LogEI, UCB, piBO weighting;
* :mod:`~headstart._gp.lbfgsb` -- decoupled multi-start L-BFGS-B with batched evaluations;
* :mod:`~headstart._gp.optimize` -- mixed continuous / discrete acquisition search, Thompson
  sampling;
* :mod:`~headstart._gp.threads` -- thread limiting;
* :mod:`~headstart._gp.engine` -- :class:`GPOptimizer`, the entry point.
"""

from headstart._gp.engine import DimSpec, FitSummary, GPOptimizer

__all__ = ["DimSpec", "FitSummary", "GPOptimizer"]
