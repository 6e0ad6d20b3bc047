"""Using the kernel search: the Python entry point, the CSV checks, the CLI and kernel='auto'."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

import headstart as hs
from headstart.cli import app
from headstart.exceptions import (
    ConstantTargetError,
    DatasetError,
    InvalidSettingError,
    KernelExpressionError,
    MissingValuesError,
    NonNumericColumnError,
    TooFewRowsError,
    UnknownColumnError,
)
from headstart.kernels import load_csv, search
from headstart.kernels.api import prepare_data

ROOT = Path(__file__).resolve().parents[1]


def _series(n=40, seed=0):
    rng = np.random.default_rng(seed)
    t = np.linspace(1950, 1960, n)
    return t[:, None], 100 + 5 * (t - 1950) + 3 * np.sin(2 * np.pi * t) + rng.normal(0, 0.3, n)


def test_search_returns_the_best_kernel_and_a_model_in_user_units():
    X, y = _series()
    calls = []
    result = search(X, y, budget=6, restarts=2, ea_steps=2, progress=False, callback=calls.append)
    assert len(result.history) == 6 == len(calls)
    assert result.score == max(e.result.score for e in result.history)
    assert set(result.hyperparameters) >= {"noise"}
    mean, std = result.model.predict(X)
    assert np.sqrt(np.mean((mean - y) ** 2)) < 0.2 * y.std()  # fits in the user's units
    assert (std > 0).all()
    _, std_y = result.model.predict(X, include_noise=True)
    assert (std_y >= std).all()
    with pytest.raises(DatasetError, match="m x 1 array"):
        result.model.predict(np.ones((3, 2)))
    frame = result.history_frame()
    assert list(frame["call"]) == list(range(1, 7)) and frame["best"].is_monotonic_increasing


@pytest.mark.parametrize("method", ["greedy", "random", "bosot-paper"])
def test_search_baselines_through_the_same_entry_point(method):
    X, y = _series(25)
    result = search(X, y, budget=5, restarts=1, method=method, space="se-rq", progress=False)
    assert 1 <= len(result.history) <= 5
    from headstart.kernels.grammar import leaves

    assert {leaf.kind for leaf in leaves(result.tree)} <= {"SE", "RQ"}


def test_search_rejects_bad_settings():
    X, y = _series(10)
    with pytest.raises(InvalidSettingError, match="Unknown kernel search method"):
        search(X, y, method="annealing", progress=False)
    with pytest.raises(InvalidSettingError, match="Unknown kernel space"):
        search(X, y, space="everything", progress=False)
    with pytest.raises(InvalidSettingError, match="at least 1"):
        search(X, y, budget=0, progress=False)


@pytest.mark.parametrize(
    "X, y, error, fragment",
    [
        (np.ones((4, 1)), np.arange(4.0), TooFewRowsError, "at least 5 rows"),
        (np.arange(6.0)[:, None], np.full(6, 2.0), ConstantTargetError, "constant target"),
        (np.array([[1.0], [np.nan], [2], [3], [4]]), np.arange(5.0), MissingValuesError, "x0"),
        (np.arange(5.0)[:, None], [1, 2, np.inf, 4, 5], MissingValuesError, "target"),
        (
            np.array([["a"], ["b"], ["c"], ["d"], ["e"]]),
            np.arange(5.0),
            NonNumericColumnError,
            "numbers",
        ),
        (np.ones((5, 2)), np.arange(4.0), DatasetError, "5 rows but y has 4"),
    ],
)
def test_prepare_data_errors(X, y, error, fragment):
    with pytest.raises(error, match=fragment):
        prepare_data(X, y)


def _write(tmp_path, frame, name="data.csv"):
    path = tmp_path / name
    frame.to_csv(path, index=False)
    return path


def test_load_csv_errors_name_the_column(tmp_path):
    good = pd.DataFrame(
        {"t": np.arange(8.0), "u": np.arange(8.0) ** 2, "y": np.sin(np.arange(8.0))}
    )
    X, _y, cols = load_csv(_write(tmp_path, good), "y")
    assert X.shape == (8, 2) and cols == ["t", "u"]
    assert load_csv(_write(tmp_path, good), "y", ["u"])[2] == ["u"]
    with pytest.raises(UnknownColumnError, match=r"'target' is not in .* columns are t, u, y"):
        load_csv(_write(tmp_path, good), "target")
    with pytest.raises(UnknownColumnError, match="Input column"):
        load_csv(_write(tmp_path, good), "y", ["v"])
    text = good.assign(city=["a", "b"] * 4)
    with pytest.raises(NonNumericColumnError, match="city"):
        load_csv(_write(tmp_path, text), "y")
    holes = good.copy()
    holes.loc[3, "u"] = np.nan
    with pytest.raises(MissingValuesError, match=r"u \(1 empty\)"):
        load_csv(_write(tmp_path, holes), "y")
    with pytest.raises(TooFewRowsError):
        load_csv(_write(tmp_path, good.head(4)), "y")
    with pytest.raises(ConstantTargetError):
        load_csv(_write(tmp_path, good.assign(y=1.0)), "y")
    with pytest.raises(DatasetError, match="No data file"):
        load_csv(tmp_path / "missing.csv", "y")


def test_cli_kernels_search(tmp_path):
    X, y = _series(30)
    path = _write(tmp_path, pd.DataFrame({"year": X[:, 0], "passengers": y}))
    plot = tmp_path / "fit.png"
    runner = CliRunner()
    args = ["kernels", "search", str(path), "--target", "passengers", "--budget", "4",
            "--restarts", "1", "--ea-steps", "2", "--plot", str(plot)]  # fmt: skip
    result = runner.invoke(app, [*args, "--json"])
    assert result.exit_code == 0, result.output
    payload = json.loads(result.stdout[result.stdout.index("{") :])
    assert payload["calls"] == 4 and payload["columns"] == ["year"]
    assert plot.stat().st_size > 10_000
    result = runner.invoke(app, args)
    assert (
        result.exit_code == 0 and "best kernel:" in result.stdout and "[0] = year" in result.stdout
    )
    assert "log evidence / N" in result.stdout and "noise" in result.stdout
    help_text = runner.invoke(app, ["kernels", "search", "--help"]).stdout
    for option in ("--target", "--budget", "--space", "--method", "--criterion", "--workers"):
        assert option in help_text


def test_cli_kernels_search_reports_bad_data(tmp_path):
    path = _write(tmp_path, pd.DataFrame({"x": np.arange(6.0), "y": np.arange(6.0)}))
    from headstart import cli

    runner = CliRunner()
    result = runner.invoke(app, ["kernels", "search", str(path), "--target", "z"])
    assert isinstance(result.exception, UnknownColumnError)
    assert cli is not None


# --- kernel="auto" and kernel expressions in studies --------------------------------------------
def _objective(params):
    return (params["x"] - 0.3) ** 2 + np.sin(6 * params["y"])


def test_study_with_kernel_auto_searches_and_records_the_kernel(tmp_path):
    space = hs.SearchSpace({"x": hs.Float(0, 1), "y": hs.Float(0, 1)})
    storage = f"sqlite:///{tmp_path / 'k.db'}"
    study = hs.create_study(
        "auto", space, storage=storage, kernel="auto", seed=1, n_initial=4,
        kernel_search={"every": 4, "budget": 5, "restarts": 1, "ea_steps": 2},
    )  # fmt: skip
    for _ in range(10):
        trial = study.ask()
        study.tell(trial, _objective(trial.params))
    kernels = [t.user_attrs.get("kernel") for t in study.trials]
    assert all(k is None for k in kernels[:4]) and all(k for k in kernels[4:])
    surrogate = study._strategy.engine.surrogate
    assert surrogate.searches == 2  # at 4 and 8 observations
    assert study.kernel_expression == kernels[-1]
    reloaded = hs.load_study("auto", storage)
    assert reloaded.kernel_expression == kernels[-1]  # from the stored trials
    out = CliRunner().invoke(app, ["studies", "show", "auto", "--storage", storage]).stdout
    assert "GP kernel (searched by BOSOT)" in out


def test_study_with_a_fixed_kernel_expression():
    space = hs.SearchSpace({"x": hs.Float(0, 1), "y": hs.Float(0, 1)})
    study = hs.create_study(
        "fixed", space, storage=None, kernel="se[0] * RQ[1]", n_initial=3, seed=0
    )
    for _ in range(6):
        trial = study.ask()
        study.tell(trial, _objective(trial.params))
    assert {t.user_attrs.get("kernel") for t in study.trials[3:]} == {"SE[0] * RQ[1]"}
    assert study.best_trial.value < 0.5


def test_kernel_settings_are_validated_at_create_study():
    space = hs.SearchSpace({"x": hs.Float(0, 1)})
    mixed = hs.SearchSpace({"x": hs.Float(0, 1), "c": hs.Categorical(["a", "b"])})
    with pytest.raises(KernelExpressionError, match="dimension 1 is out of range"):
        hs.create_study("a", space, storage=None, kernel="SE[1]")
    with pytest.raises(InvalidSettingError, match="numeric parameters only"):
        hs.create_study("b", mixed, storage=None, kernel="auto")
    with pytest.raises(InvalidSettingError, match="'kernel' is an option of method 'gp'"):
        hs.create_study("c", space, storage=None, kernel="auto", method="random")
    with pytest.raises(InvalidSettingError, match="Unknown kernel_search option"):
        hs.create_study("d", space, storage=None, kernel="auto", kernel_search={"often": 3})
    with pytest.raises(InvalidSettingError, match="every"):
        hs.create_study("e", space, storage=None, kernel="auto", kernel_search={"every": 0})
    with pytest.raises(InvalidSettingError, match="kernel must be"):
        hs.create_study("f", space, storage=None, kernel=3)


# --- benchmark smoke run ------------------------------------------------------------------------
@pytest.mark.slow
def test_kernel_search_benchmark_smoke(tmp_path):
    spec = importlib.util.spec_from_file_location(
        "kernel_search", ROOT / "benchmarks" / "kernel_search.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert module.main(["--smoke", "--workers", "1", "--out", str(tmp_path)]) == 0
    curves = pd.read_csv(tmp_path / "kernel_search.csv")
    final = pd.read_csv(tmp_path / "kernel_search_final.csv")
    assert set(final.method) == {
        "bosot",
        "bosot-paper",
        "bosot-ea",
        "bosot-cost",
        "greedy",
        "random",
    }
    assert curves.groupby("method").call.max().max() == 6
    assert (tmp_path / "kernel_search.png").stat().st_size > 10_000
    assert "BOSOT vs greedy" in (tmp_path / "kernel_search.md").read_text()
    # resumable: a second run re-uses every job
    assert module.main(["--smoke", "--workers", "1", "--out", str(tmp_path)]) == 0
    assert len(pd.read_csv(tmp_path / "kernel_search_final.csv")) == len(final)


@pytest.mark.slow
def test_kernel_search_known_structure_benchmark_smoke(tmp_path):
    spec = importlib.util.spec_from_file_location(
        "kernel_search", ROOT / "benchmarks" / "kernel_search.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    args = ["--suite", "known", "--smoke", "--workers", "1", "--restarts", "1", "--out"]
    assert module.main([*args, str(tmp_path)]) == 0
    final = pd.read_csv(tmp_path / "kernel_search_final.csv")
    assert set(final.method) == {"bosot", "bosot-paper", "bosot-ea", "bosot-cost", "greedy"}
    assert set(final.dataset) == {"ks-per+lin"}
    report = (tmp_path / "kernel_search_known.md").read_text()
    assert "`LIN[0] + PER[0]`" in report and "targets" in report
    assert (tmp_path / "kernel_search_known.png").stat().st_size > 10_000
    truth = json.loads((tmp_path / "truths.json").read_text())["ks-per+lin-r1"]
    assert truth > -0.5  # the truth explains most of the variance of its own draw


def test_a_search_whose_every_fit_failed_says_so():
    import math as _math

    from headstart.exceptions import ModelFittingError
    from headstart.kernels import Evaluation, OracleResult
    from headstart.kernels.api import build_result
    from headstart.kernels.model import Scaler

    failed = OracleResult("SE[0]", -_math.inf, -_math.inf, -_math.inf, (), 0.1)
    X, y = np.arange(6.0)[:, None], np.arange(6.0)
    with pytest.raises(ModelFittingError, match="Every kernel the search tried failed"):
        build_result([Evaluation(failed)], X, y, Scaler.fit(X, y), ["x0"])
