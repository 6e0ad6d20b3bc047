r"""Optuna distributions ↔ headstart parameters.

* ``FloatDistribution(low, high, log)`` ↔ ``Float(low, high, log=log)``;
* ``IntDistribution(low, high, log)`` ↔ ``Int(low, high, log=log)``;
* a ``step`` (float or int > 1) is modelled as the continuous or integer range and each suggestion
  is snapped to the nearest grid point ``low + k * step`` (:func:`to_optuna_value`);
* ``CategoricalDistribution(choices)`` ↔ ``Categorical(choices)``;
* a distribution with a single value ↔ ``Fixed(value)``.

``priors`` attach headstart beliefs (piBO) to the parameters Optuna's API cannot carry them on.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from headstart.exceptions import InvalidSettingError
from headstart.priors import Prior
from headstart.space import Categorical, Fixed, Float, Int, SearchSpace


def param_from_distribution(name: str, distribution: Any, prior: Any = None) -> Any:
    """The headstart parameter of one Optuna distribution (``prior`` on numeric ones)."""
    kind = type(distribution).__name__
    if kind == "CategoricalDistribution":
        choices = list(distribution.choices)
        if prior is not None:
            raise InvalidSettingError(
                f"Parameter {name!r} is categorical: give its belief as weights, "
                f"priors={{{name!r}: [w1, w2, ...]}}, one per choice of {choices}."
            )
        return Fixed(choices[0]) if len(choices) == 1 else Categorical(choices)
    if kind not in ("FloatDistribution", "IntDistribution"):
        raise InvalidSettingError(
            f"Parameter {name!r} has an Optuna distribution headstart cannot model ({kind})."
        )
    if distribution.single():
        return Fixed(distribution.low)
    make = Int if kind == "IntDistribution" else Float
    kwargs = {} if prior is None else {"prior": prior}
    return make(distribution.low, distribution.high, log=distribution.log, **kwargs)


def space_from_distributions(
    distributions: Mapping[str, Any], priors: Mapping[str, Any] | None = None
) -> SearchSpace:
    """A :class:`SearchSpace` of Optuna distributions, in name order (Optuna's order).

    Args:
        distributions: ``{name: optuna.distributions.BaseDistribution}``.
        priors: Optional beliefs: ``{name: hs.Normal(...) | hs.Beta(...)}`` on numeric
            parameters, ``{name: [weights]}`` on categorical ones.
    """
    priors = dict(priors or {})
    unknown = sorted(set(priors) - set(distributions))
    params = {}
    for name in sorted(distributions):
        prior = priors.get(name)
        if isinstance(prior, Prior) or prior is None:
            params[name] = param_from_distribution(name, distributions[name], prior)
        else:
            choices = list(getattr(distributions[name], "choices", ()))
            if not choices:
                raise InvalidSettingError(
                    f"priors[{name!r}] must be hs.Normal(...), hs.Beta(...) or hs.Uniform() for a "
                    f"numeric parameter; got {prior!r}."
                )
            params[name] = Categorical(choices, weights=list(prior))
    if unknown and params:
        raise InvalidSettingError(
            f"priors name parameter(s) {unknown} that the objective does not suggest; its "
            f"parameters are {sorted(distributions)}."
        )
    return SearchSpace(params)


def to_optuna_value(value: Any, distribution: Any) -> Any:
    """A headstart suggestion as a value ``distribution`` contains (snapped to its ``step``)."""
    kind = type(distribution).__name__
    if kind == "CategoricalDistribution":
        return value
    step = getattr(distribution, "step", None)
    low, high = distribution.low, distribution.high
    if step is not None and (kind == "FloatDistribution" or step != 1):
        k = round((value - low) / step)
        value = min(max(low + k * step, low), low + math.floor((high - low) / step) * step)
    if kind == "IntDistribution":
        return round(float(value))
    return float(min(max(value, low), high))


def distributions_from_space(space: SearchSpace) -> dict[str, Any]:
    """Optuna distributions of a :class:`SearchSpace` (priors are dropped: Optuna has none)."""
    from optuna.distributions import CategoricalDistribution, FloatDistribution, IntDistribution

    out: dict[str, Any] = {}
    for name, p in space.items():
        if isinstance(p, Fixed):
            out[name] = CategoricalDistribution([p.value])
        elif isinstance(p, Categorical):
            out[name] = CategoricalDistribution(list(p.choices))
        elif isinstance(p, Int):
            out[name] = IntDistribution(p.low, p.high, log=p.log)
        else:
            out[name] = FloatDistribution(p.low, p.high, log=p.log)
    return out


__all__ = [
    "distributions_from_space",
    "param_from_distribution",
    "space_from_distributions",
    "to_optuna_value",
]
