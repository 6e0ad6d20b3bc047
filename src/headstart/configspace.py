r"""Import a ConfigSpace ``ConfigurationSpace`` as a headstart :class:`~headstart.space.SearchSpace`.

ConfigSpace (the search-space package of SMAC3) is optional: ``pip install ConfigSpace``.
Mapping:

* ``UniformFloat/UniformInteger`` → ``Float/Int`` (``log`` kept);
* ``NormalFloat/NormalInteger(mu, sigma)`` → ``prior=Normal(mu, sigma)``; with ``log=True``
  ConfigSpace (>= 1.0) takes ``mu`` in the parameter's units and scales ``sigma`` to the unit
  interval as ``|ln(lower + sigma)| / (ln upper - ln lower)``, so the equivalent headstart prior is
  ``Normal(mu, std=|ln(lower + sigma)|)`` (same truncated normal on the encoded interval);
* ``BetaFloat/BetaInteger(alpha, beta)`` → ``prior=Beta(alpha, beta)`` on the scaled range;
* ``Categorical(choices, weights)`` → ``Categorical`` with the same weights;
  ``Ordinal(sequence)`` → ``Categorical`` (order is not used by the model);
* ``Constant`` → ``Fixed``.

Conditional spaces (conditions, forbidden clauses) are refused with an error naming each one.
ConfigSpace orders parameters by name, so a round trip returns them in that order.
"""

from __future__ import annotations

import math
from typing import Any

from headstart.exceptions import SearchSpaceError
from headstart.priors import Beta, Normal, Uniform
from headstart.space import Categorical, Fixed, Float, Int, SearchSpace


def _plain(value: Any) -> Any:
    return value.item() if hasattr(value, "item") else value


def _convert(hp: Any) -> Any:
    cls = type(hp).__name__
    if cls == "Constant":
        return Fixed(_plain(hp.value))
    if cls in ("CategoricalHyperparameter",):
        weights = getattr(hp, "weights", None)
        return Categorical(
            [_plain(c) for c in hp.choices],
            weights=None if weights is None else [float(w) for w in weights],
        )
    if cls == "OrdinalHyperparameter":
        return Categorical([_plain(c) for c in hp.sequence])
    is_int = "Integer" in cls
    if not is_int and "Float" not in cls:
        raise SearchSpaceError(f"Unsupported ConfigSpace hyperparameter type {cls} ({hp.name!r}).")
    log = bool(getattr(hp, "log", False))
    prior: Any = Uniform()
    if cls.startswith("Normal"):
        std = abs(math.log(hp.lower + hp.sigma)) if log else float(hp.sigma)
        prior = Normal(float(hp.mu), std)
    elif cls.startswith("Beta"):
        prior = Beta(float(hp.alpha), float(hp.beta))
    make = Int if is_int else Float
    return make(_plain(hp.lower), _plain(hp.upper), log=log, prior=prior)


def from_configspace(configspace: Any) -> SearchSpace:
    """Convert a ``ConfigSpace.ConfigurationSpace`` (no conditions or forbiddens) to a SearchSpace.

    Example:
        >>> from ConfigSpace import ConfigurationSpace, Float as CSFloat, Normal as CSNormal
        >>> cs = ConfigurationSpace({"x": (0.0, 1.0)})
        >>> from_configspace(cs)["x"].high
        1.0
    """
    conditions = list(getattr(configspace, "conditions", None) or [])
    forbidden = list(getattr(configspace, "forbidden_clauses", None) or [])
    if conditions or forbidden:
        named = [f"condition {c}" for c in conditions] + [
            f"forbidden clause {f}" for f in forbidden
        ]
        raise SearchSpaceError(
            f"headstart does not support ConfigSpace {'; '.join(named)}. Flatten the space "
            "(make every parameter active, and score forbidden configurations as failed trials), "
            "or optimize it through Optuna with headstart.integrations.optuna.HeadstartSampler, "
            "whose conditional parameters are sampled independently."
        )
    try:
        hps = list(configspace.values())
    except AttributeError as e:
        raise SearchSpaceError(
            f"Expected a ConfigSpace ConfigurationSpace; got {type(configspace).__name__}."
        ) from e
    return SearchSpace({hp.name: _convert(hp) for hp in hps})


def _log_sigma(name: str, lower: float, std: float) -> float:
    """ConfigSpace's ``sigma`` of a log-scaled Normal whose headstart ``std`` (in ln units) is
    ``std``: the inverse of ``std = |ln(lower + sigma)|`` (see the module docstring)."""
    for target in (math.exp(std), math.exp(-std)):
        if target - lower > 0:
            return target - lower
    raise SearchSpaceError(
        f"Parameter {name!r}: ConfigSpace cannot express a log-scaled Normal with std {std} "
        f"above a lower bound of {lower} (its sigma would be negative); use a Beta prior."
    )


def to_configspace(space: SearchSpace, seed: int | None = None) -> Any:
    """Export a SearchSpace to a ``ConfigSpace.ConfigurationSpace`` (priors included).

    The inverse of :func:`from_configspace`: every parameter type, ``Normal`` (linear and
    log-scaled) and ``Beta`` priors, and weighted categoricals. A log-scaled ``Normal`` whose
    ConfigSpace ``sigma`` would be negative (``exp(std) <= lower`` and ``exp(-std) <= lower``)
    raises.

    Example:
        >>> import headstart as hs
        >>> cs = to_configspace(hs.SearchSpace({"x": hs.Float(0.0, 2.0, prior=hs.Normal(0.5, 0.1))}))
        >>> type(cs["x"]).__name__, cs["x"].mu
        ('NormalFloatHyperparameter', 0.5)
    """
    import ConfigSpace as CS

    cs = CS.ConfigurationSpace(seed=seed)
    for name, p in space.items():
        if isinstance(p, Fixed):
            cs.add(CS.Constant(name, p.value))
            continue
        if isinstance(p, Categorical):
            cs.add(CS.Categorical(name, list(p.choices), weights=p.weights))
            continue
        make = CS.Integer if isinstance(p, Int) else CS.Float
        distribution: Any = None
        if isinstance(p.prior, Normal):
            sigma = float(p.prior.std)
            if p.log:
                sigma = _log_sigma(name, float(p.low), sigma)
            distribution = CS.Normal(float(p.prior.mean), sigma)
        elif isinstance(p.prior, Beta):
            distribution = CS.Beta(float(p.prior.a), float(p.prior.b))
        kwargs = {} if distribution is None else {"distribution": distribution}
        cs.add(make(name, (p.low, p.high), log=p.log, **kwargs))
    return cs
