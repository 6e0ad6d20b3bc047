r"""The GP core (private): every Gaussian process of headstart is built from these modules.

One job each:

* :mod:`~headstart._gp.kernels` -- Matérn-5/2 and SE ARD kernels (Hamming distance on
  categoricals), per-column differences and the batched feature maps;
* :mod:`~headstart._gp.hyperprior` -- one family of hyperprior objects (log-density, gradient,
  draws, JSON);
* :mod:`~headstart._gp.fit_settings` -- every fit's limits, starts and coordinates, in one place;
* :mod:`~headstart._gp.params` -- hyperparameters of ``M`` GPs and their fit coordinates;
* :mod:`~headstart._gp.fit` -- :func:`~headstart._gp.fit.minimize`, the one optimizer of every
  hyperparameter fit (decoupled multi-start L-BFGS-B, batched evaluations);
* :mod:`~headstart._gp.exact` -- the batched exact GP's marginal likelihood (padding, masks,
  Cholesky with jitter, closed-form gradients) and :func:`~headstart._gp.exact.fit_exact_gp`;
* :mod:`~headstart._gp.batched` -- ``M`` fitted GPs' posteriors, batched (meta-task GPs, the
  baselines' GPs); :mod:`~headstart._gp.weighted` -- weighted sums of them (ScaML-GP, RGPE);
* :mod:`~headstart._gp.model` -- the Matérn GP's numpy posterior (the acquisition search's
  many small calls);
* :mod:`~headstart._gp.warping` -- monotone output warps for heavy-tailed targets, and where
  the prior mean sits (:func:`~headstart._gp.warping.center_targets`);
* :mod:`~headstart._gp.surrogate` -- :class:`MaternGP`, the warm-started GP-BO surrogate.

Importing this package loads torch; :mod:`headstart` imports it only when a model is needed.
"""

from headstart._gp.surrogate import FitSummary, MaternGP

__all__ = ["FitSummary", "MaternGP"]
