r"""A scikit-learn model tuned on two halves of a data set: transfer from a user's earlier study.

The situation of a user who tuned a model on one part of their data and now tunes it again on
another: a seed splits a bundled scikit-learn data set into two stratified halves A and B; the
*source* is a 40-trial random-search study of a ``HistGradientBoostingClassifier`` (7
hyperparameters) on half A, and the *target* is the same model on half B. The objective is the
3-fold cross-validated log-loss (folds and model seeded, so it is deterministic).

Families: ``sklearn-hgb-breast-cancer`` and ``sklearn-hgb-wine`` (the data sets ship with
scikit-learn, so this runs offline).

The optimum of an instance is unknown; its stand-in is the best value of a reference search (the
sources' 40 configurations evaluated on half B, then 100 GP-BO steps, 140 evaluations), so a
method's regret is its distance to what a long search finds and can fall slightly below 0 when a
method beats that search. Every evaluation is cached on disk (JSON lines, keyed by data set,
half, seed and configuration; the environment variable :data:`CACHE_ENV` names the file, default
``~/.cache/headstart/sklearn_tasks.jsonl``), so a re-run of a benchmark with
the same seeds repeats no model fit.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np

from headstart.benchmarks.families import family_rng
from headstart.benchmarks.functions import Task, TaskFamily, register_task
from headstart.sources import MetaTask
from headstart.space import Float, Int, SearchSpace

CACHE_ENV = "HEADSTART_SKLEARN_CACHE"
DEFAULT_CACHE = Path.home() / ".cache" / "headstart" / "sklearn_tasks.jsonl"
N_SOURCE = 40  # configurations of the source study on half A
N_REFERENCE_GP = 100  # GP-BO steps of the reference search (after the sources' configurations)
DATASETS = ("breast-cancer", "wine")


def hgb_space() -> SearchSpace:
    """The 7 hyperparameters of ``HistGradientBoostingClassifier`` that are tuned."""
    return SearchSpace(
        {
            "learning_rate": Float(0.01, 1.0, log=True),
            "max_iter": Int(10, 300, log=True),
            "max_leaf_nodes": Int(2, 64, log=True),
            "min_samples_leaf": Int(1, 64, log=True),
            "l2_regularization": Float(1e-6, 10.0, log=True),
            "max_features": Float(0.2, 1.0),
            "max_bins": Int(16, 255, log=True),
        }
    )


@cache
def _data(dataset: str) -> tuple[np.ndarray, np.ndarray]:
    from sklearn import datasets

    loader = {"breast-cancer": datasets.load_breast_cancer, "wine": datasets.load_wine}[dataset]
    return loader(return_X_y=True)


def _half(dataset: str, seed: int, half: int) -> tuple[np.ndarray, np.ndarray]:
    """Half ``half`` (0 = A, 1 = B) of a stratified split drawn by ``seed``."""
    from sklearn.model_selection import train_test_split

    X, y = _data(dataset)
    parts = train_test_split(X, y, test_size=0.5, stratify=y, random_state=seed)
    return (parts[0], parts[2]) if half == 0 else (parts[1], parts[3])


class _Cache:
    """Evaluations on disk, one JSON object per line; appends are whole lines (safe to share)."""

    def __init__(self) -> None:
        self.path = Path(os.environ.get(CACHE_ENV, DEFAULT_CACHE))
        self.values: dict[str, float] | None = None

    def _load(self) -> dict[str, float]:
        if self.values is None:
            self.values = {}
            if self.path.exists():
                for line in self.path.read_text().splitlines():
                    if line.strip():
                        entry = json.loads(line)
                        self.values[entry["key"]] = float(entry["value"])
        return self.values

    def get(self, key: str) -> float | None:
        return self._load().get(key)

    def put(self, key: str, value: float) -> None:
        self._load()[key] = value
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.path, "a") as f:
            f.write(json.dumps({"key": key, "value": value}) + "\n")


_CACHE = _Cache()


def _key(*parts: Any) -> str:
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()[:32]


@dataclass(frozen=True)
class HGBObjective:
    """3-fold CV log-loss of ``HistGradientBoostingClassifier`` on one half (cached)."""

    dataset: str
    seed: int
    half: int

    def __call__(self, params: Mapping[str, Any]) -> float:
        clean = {
            k: (int(v) if isinstance(v, int | np.integer) else float(v)) for k, v in params.items()
        }
        key = _key("hgb", self.dataset, self.seed, self.half, clean)
        cached = _CACHE.get(key)
        if cached is not None:
            return cached
        from sklearn.ensemble import HistGradientBoostingClassifier
        from sklearn.model_selection import StratifiedKFold, cross_val_score

        X, y = _half(self.dataset, self.seed, self.half)
        model = HistGradientBoostingClassifier(early_stopping=False, random_state=0, **clean)
        folds = StratifiedKFold(3, shuffle=True, random_state=self.seed)
        scores = cross_val_score(model, X, y, cv=folds, scoring="neg_log_loss")
        value = float(-np.mean(scores))
        value = value if math.isfinite(value) else 10.0  # a diverged fit scores as very bad
        _CACHE.put(key, value)
        return value


def _reference_optimum(dataset: str, seed: int, source: MetaTask, space: SearchSpace) -> float:
    """Best value of the reference search on half B (cached like every evaluation)."""
    key = _key("reference", dataset, seed, N_REFERENCE_GP)
    cached = _CACHE.get(key)
    if cached is not None:
        return cached
    import headstart as hs

    objective = HGBObjective(dataset, seed, 1)
    study = hs.create_study("reference", space, storage=None, seed=seed, n_initial=1)
    study.add_trials([(p, objective(p)) for p in space.decode(source.X)])
    study.optimize(objective, N_REFERENCE_GP, show_progress=False)
    best = float(study.best_value)
    _CACHE.put(key, best)
    return best


@dataclass(frozen=True)
class HGBSampler:
    """``sampler(seed) -> Task``: source on half A, target on half B of ``dataset``."""

    family: str
    dataset: str

    def __call__(self, seed: int) -> Task:
        return _hgb_instance(self, int(seed))


@cache
def _hgb_instance(sampler: HGBSampler, seed: int) -> Task:
    space = hgb_space()
    rng = family_rng(sampler.family, seed)
    configs = space.decode(rng.random((N_SOURCE, space.dim)))
    source_objective = HGBObjective(sampler.dataset, seed, 0)
    values = np.array([source_objective(c) for c in configs])
    source = MetaTask("half-A", space.encode(configs), values)
    return Task(
        f"{sampler.family}-seed{seed}",
        space,
        HGBObjective(sampler.dataset, seed, 1),
        _reference_optimum(sampler.dataset, seed, source, space),
        f"{sampler.family} instance of seed {seed}",
        meta_tasks=(source,),
    )


def hgb_family(dataset: str) -> TaskFamily:
    """``sklearn-hgb-<dataset>``: transfer from a random-search study on the other half."""
    name = f"sklearn-hgb-{dataset}"
    return TaskFamily(
        name,
        hgb_space(),
        HGBSampler(name, dataset),
        f"HistGradientBoosting 3-fold CV log-loss on half B of {dataset}, 1 source: "
        f"{N_SOURCE} random configurations on half A",
    )


for _dataset in DATASETS:
    register_task(hgb_family(_dataset))

__all__ = ["CACHE_ENV", "DATASETS", "HGBObjective", "HGBSampler", "hgb_family", "hgb_space"]
