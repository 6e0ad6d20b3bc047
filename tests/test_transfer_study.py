"""Transfer learning through the Study API: create_study(method="scaml", transfer_from=...)."""

from __future__ import annotations

import numpy as np
import pytest
from typer.testing import CliRunner

import headstart as hs
from headstart._transfer import cache as registry
from headstart.cli import app

SPACE = hs.SearchSpace({"x": hs.Float(0.0, 1.0), "y": hs.Float(0.0, 1.0)})


def bowl(params, centre=(0.3, 0.7), scale=1.0, offset=0.0):
    return scale * ((params["x"] - centre[0]) ** 2 + (params["y"] - centre[1]) ** 2) + offset


def _source(storage, name, n=25, seed=0, **kw):
    study = hs.create_study(name, SPACE, storage=storage, method="random", seed=seed)
    for _ in range(n):
        trial = study.ask()
        study.tell(trial, bowl(trial.params, **kw))
    return study


@pytest.fixture()
def storage(tmp_path):
    url = f"sqlite:///{tmp_path / 'transfer.db'}"
    _source(url, "related", seed=1, scale=2.0, offset=1.0)
    unrelated = hs.create_study("unrelated", SPACE, storage=url, method="random", seed=2)
    for _ in range(25):
        trial = unrelated.ask()
        unrelated.tell(trial, float(np.sin(40 * trial.params["y"])))
    return url


def test_first_suggestion_already_uses_the_meta_data(storage):
    study = hs.create_study(
        "target", SPACE, storage=storage, method="scaml", transfer_from=["related"], seed=0
    )
    assert study.n_initial == 0
    trial = study.ask()
    assert abs(trial.params["x"] - 0.3) < 0.15 and abs(trial.params["y"] - 0.7) < 0.15


def test_scaml_loop_finds_the_optimum_and_reports_weights(storage):
    study = hs.create_study(
        "target", SPACE, storage=storage, method="scaml", transfer_from="all", seed=0
    )
    for _ in range(8):
        trial = study.ask()
        study.tell(trial, bowl(trial.params))
    assert study.best_value < 5e-3
    report = study.transfer_report()
    assert isinstance(report, hs.TransferReport)
    assert set(report.weights) == {"related", "unrelated"}
    assert report.weights["related"] > 5 * report.weights["unrelated"]
    assert report.shares["related"] > 2 * report.shares["unrelated"]
    assert report.n_trials == 8 and report.residual_variance > 0
    assert report.to_frame()["source"].iloc[0] == "related"


def test_ask_does_not_compute_the_weights_diagnostics(storage, monkeypatch):
    """Every ``ask`` records the model's kernel expression; for ScaML-GP that must not run its
    diagnostics (the weights' standard errors take a Hessian: 29% of an ask at 20 trials)."""
    from headstart._transfer.scaml import ScaML

    study = hs.create_study(
        "target", SPACE, storage=storage, method="scaml", transfer_from="all", seed=0
    )

    def refuse(self):
        raise AssertionError("ask computed ScaML-GP's weight summary")

    monkeypatch.setattr(ScaML, "weight_summary", refuse)
    for _ in range(4):
        trial = study.ask()
        study.tell(trial, bowl(trial.params))
    assert all("kernel" not in t.user_attrs for t in study.trials)
    monkeypatch.undo()
    assert study.transfer_report().shares is not None  # the report still has them


def test_meta_data_are_frozen_when_the_study_is_created(storage):
    hs.create_study("target", SPACE, storage=storage, method="scaml", transfer_from="all", seed=0)
    hs.delete_study("related", storage)
    study = hs.load_study("target", storage)
    trial = study.ask()  # still learns from the (deleted) source's snapshot
    study.tell(trial, bowl(trial.params))
    assert set(study.transfer_report().weights) == {"related", "unrelated"}


def test_meta_gps_are_fitted_once_per_source_set(storage, monkeypatch):
    from headstart._transfer import metafit

    calls = []
    original = metafit.fit_meta_gps

    def counting(*args, **kwargs):
        calls.append(1)
        return original(*args, **kwargs)

    monkeypatch.setattr(metafit, "fit_meta_gps", counting)
    for name in ("a", "b"):
        study = hs.create_study(
            name, SPACE, storage=storage, method="scaml", transfer_from=["related"], seed=3
        )
        study.ask()
    assert len(calls) == 1
    key = registry.meta_gps_key(
        hs.sources.resolve_sources(["related"], SPACE, storage, direction="minimize"),
        np.zeros(2, dtype=bool),
    )
    assert hs.load_study("a", storage).storage.get_cache(key) is not None


def test_maximize_sources_are_flipped_for_a_minimize_study(storage):
    flipped = hs.create_study(
        "max-source", SPACE, storage=storage, direction="maximize", method="random", seed=4
    )
    for _ in range(25):
        trial = flipped.ask()
        flipped.tell(trial, -bowl(trial.params))
    study = hs.create_study(
        "target", SPACE, storage=storage, method="scaml", transfer_from=["max-source"], seed=0
    )
    trial = study.ask()
    assert abs(trial.params["x"] - 0.3) < 0.15 and abs(trial.params["y"] - 0.7) < 0.15


def test_transfer_from_a_dataframe_and_meta_tasks():
    rng = np.random.default_rng(0)
    X = rng.random((30, 2))
    import pandas as pd

    frame = pd.DataFrame({"x": X[:, 0], "y": X[:, 1], "task": "old"})
    frame["value"] = [bowl(row) for row in frame.to_dict("records")]
    task = hs.MetaTask("arrays", X, -frame["value"].to_numpy(), "maximize")
    study = hs.create_study(
        "target", SPACE, storage=None, method="scaml", transfer_from=[frame, task], seed=0
    )
    study.optimize(bowl, n_trials=3, show_progress=False)
    assert set(study.transfer_report().weights) == {"old", "arrays"}


@pytest.mark.parametrize("method", ["rgpe", "stackgp", "mtgp"])
def test_baselines_run_behind_the_same_interface(storage, method):
    study = hs.create_study(
        f"t-{method}", SPACE, storage=storage, method=method, transfer_from=["related"], seed=0
    )
    study.optimize(bowl, n_trials=3, show_progress=False)
    assert len(study.trials) == 3
    assert "related" in study.transfer_report().weights


def test_bad_transfer_settings(storage):
    with pytest.raises(hs.InvalidSettingError, match="transfer_from"):
        hs.create_study("t1", SPACE, storage=storage, method="scaml")
    with pytest.raises(hs.InvalidSettingError, match="method='scaml'"):
        hs.create_study("t2", SPACE, storage=storage, method="gp", transfer_from=["related"])
    with pytest.raises(hs.UnknownStudyError, match="nope"):
        hs.create_study("t3", SPACE, storage=storage, method="scaml", transfer_from=["nope"])
    other = hs.SearchSpace({"x": hs.Float(0.0, 2.0), "y": hs.Float(0.0, 1.0)})
    with pytest.raises(hs.SourceSpaceMismatchError, match="x"):
        hs.create_study("t4", other, storage=storage, method="scaml", transfer_from=["related"])
    with pytest.raises(hs.InvalidSettingError, match="ucb_beta"):
        hs.create_study(
            "t5", SPACE, storage=storage, method="scaml", transfer_from="all", ucb_beta=-1.0
        )
    plain = hs.create_study("plain", SPACE, storage=storage, method="random")
    with pytest.raises(hs.InvalidSettingError, match="transfer"):
        plain.transfer_report()


def test_studies_show_prints_weights_and_saves_the_plot(storage, tmp_path):
    study = hs.create_study(
        "target", SPACE, storage=storage, method="scaml", transfer_from="all", seed=0
    )
    study.optimize(bowl, n_trials=3, show_progress=False)
    png = tmp_path / "weights.png"
    result = CliRunner().invoke(
        app, ["studies", "show", "target", "--storage", storage, "--weights-plot", str(png)]
    )
    assert result.exit_code == 0, result.output
    assert "related" in result.output and "weight" in result.output
    assert png.stat().st_size > 1000


def test_a_single_constant_source_is_handled():
    X = np.random.default_rng(0).random((10, 2))
    flat = hs.MetaTask("flat", X, np.full(10, 3.0), "minimize")
    study = hs.create_study(
        "target", SPACE, storage=None, method="scaml", transfer_from=[flat], seed=0
    )
    study.optimize(bowl, n_trials=4, show_progress=False)
    assert len([t for t in study.trials if t.state == "complete"]) == 4
    assert np.isfinite(study.transfer_report().weights["flat"])


def test_empty_and_bad_sources_raise_specific_errors():
    import pandas as pd

    empty = pd.DataFrame({"x": [], "y": [], "value": [], "task": []})
    with pytest.raises(hs.EmptySourceError):
        hs.create_study("t", SPACE, storage=None, method="scaml", transfer_from=[empty])
    bad = pd.DataFrame(
        {"x": [0.1, 0.2], "y": [0.3, 0.4], "value": [1.0, float("nan")], "task": "t"}
    )
    with pytest.raises(hs.MetaDataValueError, match=r"t.*row 1|row 1.*t"):
        hs.create_study("t", SPACE, storage=None, method="scaml", transfer_from=[bad])
