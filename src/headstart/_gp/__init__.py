r"""The exact Matérn GP surrogate (private; built by :mod:`headstart._methods`).

Modules, one job each:

* :mod:`~headstart._gp.kernel` -- Matérn-5/2 ARD kernel with Hamming distance on categoricals;
* :mod:`~headstart._gp.prior` -- hyperprior objects;
* :mod:`~headstart._gp.model` -- exact GP: MAP fit, posterior;
* :mod:`~headstart._gp.surrogate` -- :class:`MaternGP`, the warm-started surrogate.

Importing this package loads torch; :mod:`headstart` imports it only when a model is needed.
"""

from headstart._gp.surrogate import FitSummary, MaternGP

__all__ = ["FitSummary", "MaternGP"]
