"""HPO-B transfer families (headstart.benchmarks.hpob_transfer) on a small synthetic HPO-B file."""

from __future__ import annotations

import numpy as np
import pytest

from headstart.benchmarks import hpob
from headstart.benchmarks.hpob_transfer import NormalizedPool, hpob_transfer_family
from headstart.exceptions import InvalidSettingError


@pytest.fixture
def tiny_hpob(tmp_path, monkeypatch):
    """Space "9" with 4 tasks of 50 configurations (2 columns, the second binary)."""
    rng = np.random.default_rng(0)
    arrays = {}
    for t in range(4):
        X = np.column_stack([rng.random(50), rng.integers(0, 2, 50)])
        acc = 0.9 - 0.3 * (X[:, 0] - 0.2 * t) ** 2 - 0.05 * X[:, 1]
        arrays[f"9_{t}"] = np.column_stack([X, acc])
    path = tmp_path / "hpob.npz"
    np.savez(path, **arrays)
    monkeypatch.setenv(hpob.NPZ_ENV, str(path))
    hpob.load_hpob.cache_clear()
    yield path
    hpob.load_hpob.cache_clear()


def test_an_instance_holds_out_one_task_and_scores_normalized_regret(tiny_hpob):
    family = hpob_transfer_family("9")
    assert family.name == "hpob-9" and family.space.dim == 2
    task = family.instance(5)  # seed 5 -> task 5 mod 4 = 1
    assert len(task.meta_tasks) == 3 and all(m.n == 50 for m in task.meta_tasks)
    objective = task.objective
    assert isinstance(objective, NormalizedPool)
    X, acc = objective.pool.X, objective.pool.accuracy
    err = 1.0 - acc
    best, median = int(np.argmin(err)), int(np.argsort(err)[len(err) // 2])
    params = lambda i: {"c0": float(X[i, 0]), "c1": int(X[i, 1])}  # noqa: E731
    assert objective(params(best)) == pytest.approx(0.0)
    assert objective(params(median)) == pytest.approx(
        (err[median] - err.min()) / (np.median(err) - err.min())
    )
    assert task.optimum == 0.0
    assert family.instance(5).name == task.name  # the same seed, the same instance


def test_few_sources_draws_that_many_and_bad_arguments_are_refused(tiny_hpob):
    family = hpob_transfer_family("9", n_sources=2)
    assert family.name == "hpob-9-s2"
    assert len(family.instance(0).meta_tasks) == 2
    with pytest.raises(InvalidSettingError, match="n_sources"):
        hpob_transfer_family("9", n_sources=4)
    with pytest.raises(InvalidSettingError, match="Unknown HPO-B space"):
        hpob_transfer_family("12345")


def test_n_per_source_sets_the_source_size_and_the_name(tiny_hpob):
    family = hpob_transfer_family("9", n_per_source=20)
    assert family.name == "hpob-9-n20"
    assert all(m.n == 20 for m in family.instance(1).meta_tasks)
    assert family.instance(1).name != hpob_transfer_family("9").instance(1).name
    with pytest.raises(InvalidSettingError, match="n_per_source"):
        hpob_transfer_family("9", n_per_source=0)
