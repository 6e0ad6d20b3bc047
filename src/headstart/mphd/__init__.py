r"""MPHD: pre-trained hierarchical GP priors for any search space (Fan, Han & Wang, 2024).

Earlier studies rarely share one search space. MPHD learns from all of them how a good GP for
*this kind* of space looks -- a Gamma prior for each lengthscale from that dimension's context
(:mod:`headstart.mphd.context`), and shared Gammas for the signal and noise variances -- and
applies it to a space never seen before: the GP is then fit by MAP under these priors at every
step (:func:`headstart._gp.hyperprior.gamma_hyperprior`).

Typical use goes through the study::

    study = hs.create_study("new", space, storage=url, method="mphd", transfer_from="all")

which pre-trains on every study in the storage, whatever its space, or uses a saved prior::

    prior = hs.mphd.pretrain(domains)          # a list of hs.mphd.Domain
    prior.save("my-prior.json")
    study = hs.create_study("new", space, method="mphd", prior_model="my-prior.json")
"""

from headstart.mphd.context import FEATURES, dimension_context
from headstart.mphd.pretrain import Domain, fit_domains, gamma_mle, pretrain
from headstart.mphd.prior_model import PriorModel

__all__ = [
    "FEATURES",
    "Domain",
    "PriorModel",
    "dimension_context",
    "fit_domains",
    "gamma_mle",
    "pretrain",
]
