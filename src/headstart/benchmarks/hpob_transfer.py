r"""HPO-B transfer families: a held-out OpenML task tuned with its space's other tasks as sources.

For one HPO-B search space (:mod:`headstart.benchmarks.hpob`; 6-7 OpenML tasks per space), the
instance of seed ``s`` tunes task ``s mod T`` (every task is a target in turn) and gives the
others as sources:

* ``hpob-<space>``: every other task, :data:`N_PER_SOURCE` random configurations each;
* ``hpob-<space>-s<k>``: only ``k`` of them, drawn per seed, :data:`N_PER_FEW` configurations
  each (the "one or two earlier studies" case).

The target is a pool of at most :data:`POOL_SIZE` of its own evaluated configurations (drawn
per seed); a suggestion is scored at the nearest pool configuration in the unit cube, so the
objective has plateaus. The value minimized is the **normalized regret**
``(best - err) / (best - median)`` in error terms, i.e. ``(err - err_best) / (err_median -
err_best)`` with ``err = 1 - accuracy`` over the target's pool: 0 at the pool's best, 1 at its
median configuration (issue 31's measure; comparable across targets). The sources keep their raw
``1 - accuracy``.

The families need the HPO-B data (downloaded from PyPI on first use), so they are registered on
demand by :func:`register_hpob_transfer_families`, not at import.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from headstart.benchmarks.families import family_rng
from headstart.benchmarks.functions import Task, TaskFamily, get_task, register_task
from headstart.benchmarks.hpob import PoolObjective, load_hpob, space_of
from headstart.exceptions import InvalidSettingError
from headstart.sources import MetaTask

POOL_SIZE = 2000  # target pool configurations (the "fixed pool of 2,000")
N_PER_SOURCE = 64  # configurations per source, all-sources families
N_PER_FEW = 40  # configurations per source, few-sources families

#: HPO-B spaces by role (issue 31's protocol, docs/benchmarks/transfer_protocol.md): the sorted
#: space ids alternate between the two sets, so each holds small and large spaces.
SELECTION_SPACES = ("4796", "5636", "5889", "5906", "5970", "6766", "6794", "7609")
CONFIRMATION_SPACES = ("5527", "5859", "5891", "5965", "5971", "6767", "7607")


@dataclass(frozen=True)
class NormalizedPool:
    r"""``(err - err_best) / (err_median - err_best)`` at the nearest pool configuration."""

    pool: PoolObjective
    best: float
    median: float

    def __call__(self, params) -> float:
        return (self.pool(params) - self.best) / (self.median - self.best)


@dataclass(frozen=True)
class HpobTransferSampler:
    """``sampler(seed) -> Task`` of one HPO-B transfer family (module docstring)."""

    family: str
    space_id: str
    n_sources: int | None = None
    n_per_source: int | None = None

    def __call__(self, seed: int) -> Task:
        return _instance(self, int(seed))


@lru_cache(maxsize=32)
def _instance(sampler: HpobTransferSampler, seed: int) -> Task:
    tasks = load_hpob()[sampler.space_id]
    space = space_of(tasks)
    target = seed % len(tasks)
    rng = family_rng(sampler.family, seed)
    name, X, acc = tasks[target]
    keep = rng.choice(len(acc), size=min(POOL_SIZE, len(acc)), replace=False)
    X, err = X[keep], 1.0 - acc[keep]
    best, median = float(err.min()), float(np.median(err))
    if median <= best:  # a flat pool: no regret scale
        median = best + 1e-12
    others = [t for i, t in enumerate(tasks) if i != target]
    n_per = N_PER_SOURCE
    if sampler.n_sources is not None:
        pick = family_rng(sampler.family, seed, stream=1).choice(
            len(others), size=sampler.n_sources, replace=False
        )
        others, n_per = [others[i] for i in sorted(pick)], N_PER_FEW
    n_per = sampler.n_per_source or n_per
    sources = []
    for source_name, Xs, accs in others:
        rows = rng.choice(len(accs), size=min(n_per, len(accs)), replace=False)
        sources.append(MetaTask(f"openml-{source_name}", Xs[rows], 1.0 - accs[rows]))
    return Task(
        f"{sampler.family}-seed{seed}",
        space,
        NormalizedPool(PoolObjective(X, 1.0 - err), best, median),
        0.0,
        f"{sampler.family}: OpenML task {name}",
        meta_tasks=tuple(sources),
    )


def hpob_transfer_family(
    space_id: str, n_sources: int | None = None, n_per_source: int | None = None
) -> TaskFamily:
    """The family of ``space_id`` with every other task (or ``n_sources`` of them) as sources,
    :data:`N_PER_SOURCE` (:data:`N_PER_FEW`) random configurations each, or ``n_per_source``
    (the name then ends in ``-n<n_per_source>``, as the FC-Net leave-one-out families' do)."""
    tasks = load_hpob().get(space_id)
    if tasks is None:
        raise InvalidSettingError(f"Unknown HPO-B space {space_id!r}; see load_hpob().")
    name = f"hpob-{space_id}" + ("" if n_sources is None else f"-s{n_sources}")
    if n_sources is not None and not 1 <= n_sources < len(tasks):
        raise InvalidSettingError(f"n_sources must be in [1, {len(tasks) - 1}]; got {n_sources}.")
    if n_per_source is not None:
        if n_per_source < 1:
            raise InvalidSettingError(f"n_per_source must be >= 1; got {n_per_source}.")
        name += f"-n{n_per_source}"
    k = len(tasks) - 1 if n_sources is None else n_sources
    n = n_per_source or (N_PER_SOURCE if n_sources is None else N_PER_FEW)
    return TaskFamily(
        name,
        space_of(tasks),
        HpobTransferSampler(name, space_id, n_sources, n_per_source),
        f"HPO-B space {space_id}: a held-out OpenML task (normalized regret), {k} sources x {n}",
    )


def register_hpob_transfer_families(few: int = 2) -> list[str]:
    """Register ``hpob-<space>`` and ``hpob-<space>-s<few>`` for every HPO-B space (once)."""
    names = []
    for space_id in (*SELECTION_SPACES, *CONFIRMATION_SPACES):
        for n_sources in (None, few):
            family = hpob_transfer_family(space_id, n_sources)
            try:
                get_task(family.name)
            except InvalidSettingError:
                register_task(family)
            names.append(family.name)
    return names


__all__ = [
    "CONFIRMATION_SPACES",
    "SELECTION_SPACES",
    "HpobTransferSampler",
    "NormalizedPool",
    "hpob_transfer_family",
    "register_hpob_transfer_families",
]
