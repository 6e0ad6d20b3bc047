r"""piBO benchmark tasks: Branin and Hartmann-6 with the paper's strong, weak and wrong priors.

Construction of App. D of Hvarfner et al. (ICLR 2022), one prior per seed (Eqs. 10-11):

* **strong**: Gaussian with ``sigma_i`` = 1% of the range of dimension ``i``, centred at the
  optimum ``x*_i`` plus an offset ``N(0, sigma_i)`` (redrawn until it lies inside the box);
* **weak**: the same with ``sigma_i`` = 10% of the range;
* **wrong**: ``sigma_i`` = 1%, centred at the empirical *maximizer* of the function, the same
  for every seed: ``(-5.0, 0.002)`` for Branin and ``(0.99, 0.98, 1.0, 1.0, 0.99, 0.02)`` for
  Hartmann-6 (the authors' prior files).

Branin's priors are placed on its minimum at ``(pi, 2.275)`` (it has three); Hartmann-6's optimum
is ``(0.20169, 0.150011, 0.476874, 0.275332, 0.311652, 0.6573)``. Task families are registered as
``branin-prior-strong`` ... ``hartmann6-prior-wrong``. The objectives are noise-free.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from headstart.benchmarks.functions import Task, TaskFamily, get_task, register_task
from headstart.priors import Normal
from headstart.space import Float, SearchSpace

QUALITIES = {"strong": 0.01, "weak": 0.10, "wrong": 0.01}  # sigma as a share of the range
OPTIMA = {
    "branin": (np.pi, 2.275),
    "hartmann6": (0.20169, 0.150011, 0.476874, 0.275332, 0.311652, 0.6573),
}
WRONG_MEANS = {
    "branin": (-5.0, 0.002),
    "hartmann6": (0.99, 0.98, 1.0, 1.0, 0.99, 0.02),
}
_SEED_STREAM = 0x9B0


def prior_space(base: SearchSpace, means, stds) -> SearchSpace:
    """``base`` with a Normal prior of the given mean and std on each (Float) parameter."""
    params = {}
    for (name, p), mu, sd in zip(base.items(), means, stds, strict=True):
        if not isinstance(p, Float):  # pragma: no cover - both tasks are continuous
            raise TypeError(f"prior tasks need Float parameters; {name!r} is {p!r}")
        params[name] = replace(p, prior=Normal(float(mu), float(sd)))
    return SearchSpace(params)


def prior_means(function: str, quality: str, seed: int, base: SearchSpace) -> np.ndarray:
    """The prior's mean for ``seed`` (App. D): optimum + offset, or the fixed wrong location."""
    if quality == "wrong":
        return np.asarray(WRONG_MEANS[function], dtype=np.float64)
    rng = np.random.default_rng([_SEED_STREAM, seed, list(QUALITIES).index(quality)])
    means = []
    for (_, p), opt in zip(base.items(), OPTIMA[function], strict=True):
        sd = QUALITIES[quality] * (p.high - p.low)
        while True:  # redraw offsets that leave the box
            mu = opt + sd * rng.standard_normal()
            if p.low <= mu <= p.high:
                break
        means.append(mu)
    return np.asarray(means)


@dataclass(frozen=True)
class PriorSampler:
    """``seed -> Task``: the base task with that seed's prior (picklable for worker processes)."""

    function: str
    quality: str

    def __call__(self, seed: int) -> Task:
        base = get_task(self.function)
        means = prior_means(self.function, self.quality, seed, base.space)
        stds = [QUALITIES[self.quality] * (p.high - p.low) for _, p in base.space.items()]
        return replace(
            base,
            name=f"{self.function}-prior-{self.quality}",
            space=prior_space(base.space, means, stds),
        )


def prior_family(function: str, quality: str) -> TaskFamily:
    """The family ``<function>-prior-<quality>`` (one prior per seed)."""
    base = get_task(function)
    return TaskFamily(
        f"{function}-prior-{quality}",
        base.space,
        PriorSampler(function, quality),
        f"{base.description}; piBO {quality} prior (Hvarfner et al. 2022, App. D)",
    )


for _function in OPTIMA:
    for _quality in QUALITIES:
        register_task(prior_family(_function, _quality))

__all__ = ["OPTIMA", "QUALITIES", "WRONG_MEANS", "PriorSampler", "prior_family", "prior_means"]
