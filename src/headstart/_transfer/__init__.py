r"""Transfer-learning surrogates (private; used by :mod:`headstart.strategy`).

Every surrogate here exposes the posterior interface of :class:`headstart._gp.model.ExactGP`, so
the acquisition criteria and optimizers of :mod:`headstart._gp` work unchanged:

* ``posterior(X) -> (mean m, var m)``;
* ``posterior_and_grad(X) -> (mean m, var m, dmean m x d, dvar m x d)``;
* ``joint_posterior(X) -> (mean m, cov m x m)``;
* ``outputscale`` (a float: the prior variance scale, used for jitter).

All values are in the engine's units: targets to be *maximized*, standardized.
"""
