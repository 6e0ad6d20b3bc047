r"""The one BO engine every model plugs into (private; used by :mod:`headstart._strategy`).

Modules, one job each (none imports torch at import time):

* :mod:`~headstart._engine.protocols` -- the seam: ``Posterior``, ``Surrogate``, ``ModelCache``;
* :mod:`~headstart._engine.engine` -- :class:`BOEngine`: pending points, acquisition search;
* :mod:`~headstart._engine.acquisition` -- LogEI, EI, PI, UCB and the piBO-weighted criterion;
* :mod:`~headstart._engine.prior_weight` -- piBO's ``pi(x)^gamma`` factor;
* :mod:`~headstart._engine.optimize` -- mixed continuous / discrete search, Thompson sampling;
* :mod:`~headstart._engine.lbfgsb` -- decoupled multi-start L-BFGS-B with batched evaluations;
* :mod:`~headstart._engine.numerics` -- the one standardiser and the one jittered Cholesky;
* :mod:`~headstart._engine.threads` -- thread limiting.
"""

UCB_BETA = 2.0  # UCB exploration weight: mu + sqrt(2) sigma (Srinivas et al. 2010; common practice)
FIRST_RULES = (
    "acquisition",
    "mean",
    "lcb",
    "candidates",
    "lcb-winner",
)  # a transfer model's first trial
ACQUISITIONS = ("logei", "ei", "pi", "ucb", "ts")  # the acquisition= names the engine knows
