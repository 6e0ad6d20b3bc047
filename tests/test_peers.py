"""The SMAC3 random-forest and HEBO peers: space mapping, records, seeding."""

from __future__ import annotations

import math

import numpy as np
import pytest

import headstart as hs
from headstart.benchmarks.functions import Task
from headstart.benchmarks.methods import get_method
from headstart.benchmarks.peers import hebo_params, hebo_space

MIXED = hs.SearchSpace(
    {
        "lr": hs.Float(1e-4, 1e-1, log=True),
        "x": hs.Float(-2.0, 3.0),
        "width": hs.Int(16, 1024, log=True),
        "depth": hs.Int(1, 4),
        "act": hs.Categorical(["relu", "tanh", None]),
        "seed": hs.Fixed(7),
    }
)


def _mixed_objective(params):
    act = {"relu": 0.0, "tanh": 0.5, None: 1.0}[params["act"]]
    return (
        (math.log10(params["lr"]) + 2.5) ** 2
        + (params["x"] - 1.0) ** 2
        + (math.log2(params["width"]) - 7) ** 2 / 10
        + abs(params["depth"] - 2)
        + act
    )


MIXED_TASK = Task("test-peers-mixed", MIXED, _mixed_objective, 0.0, "mixed space")


def test_hebo_space_maps_every_kind_and_keeps_fixed_values():
    params, fixed = hebo_space(MIXED)
    kinds = {p["name"]: p["type"] for p in params}
    assert kinds == {"lr": "pow", "x": "num", "width": "pow_int", "depth": "int", "act": "cat"}
    assert fixed == {"seed": 7}
    by_name = {p["name"]: p for p in params}
    assert (by_name["lr"]["lb"], by_name["lr"]["ub"]) == (1e-4, 1e-1)
    assert by_name["act"]["categories"] == ["0", "1", "2"]


def test_hebo_params_maps_back_rounds_and_clips():
    _, fixed = hebo_space(MIXED)
    row = {"lr": 0.01, "x": 3.0000001, "width": 63.6, "depth": np.int64(5), "act": "2"}
    config = hebo_params(MIXED, row, fixed)
    assert config == {"lr": 0.01, "x": 3.0, "width": 64, "depth": 4, "act": None, "seed": 7}
    assert isinstance(config["width"], int) and isinstance(config["depth"], int)


def _check(records, budget):
    assert [r["iteration"] for r in records] == list(range(1, budget + 1))
    values = [r["value"] for r in records]
    assert [r["best_value"] for r in records] == list(np.minimum.accumulate(values))
    assert all(r["seconds_suggest"] >= 0 and np.isfinite(r["value"]) for r in records)


@pytest.mark.slow
def test_smac_hpo_runs_on_a_mixed_space_and_is_seeded():
    pytest.importorskip("smac")
    run = get_method("smac-hpo")
    records = run(MIXED_TASK, 0, 8)  # 8 // 4 = 2 Sobol points, then the random forest
    _check(records, 8)
    assert [r["value"] for r in run(MIXED_TASK, 0, 8)] == [r["value"] for r in records]


@pytest.mark.slow
def test_hebo_runs_on_a_mixed_space():
    pytest.importorskip("hebo")  # installed by `make bench-peers`, not by the test setup
    records = get_method("hebo")(MIXED_TASK, 0, 7)  # 1 + 5 Sobol points, then one MACE step
    _check(records, 7)
