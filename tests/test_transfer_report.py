"""transfer_report(): weights a user can read (shares, standard errors, a summary in words)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import headstart as hs
from headstart._methods import method_names
from headstart.sources import MetaTask


def _space():
    return hs.SearchSpace({"x": hs.Float(0.0, 1.0), "y": hs.Float(0.0, 1.0)})


def _frame(fn, n=30, seed=0):
    rng = np.random.default_rng(seed)
    x, y = rng.random(n), rng.random(n)
    return pd.DataFrame({"x": x, "y": y, "value": fn(x, y)})


def _named(sources: dict) -> list[MetaTask]:
    return [
        MetaTask(name, _space().encode(f[["x", "y"]].to_dict("records")), f["value"].to_numpy())
        for name, f in sources.items()
    ]


def target(x, y):
    return (x - 0.3) ** 2 + 0.5 * (y - 0.6) ** 2


def _study(sources, n_trials=10):
    study = hs.create_study(
        "report", _space(), storage=None, method="scaml", transfer_from=_named(sources), seed=0
    )
    for _ in range(n_trials):
        trial = study.ask()
        study.tell(trial, target(trial.params["x"], trial.params["y"]))
    return study


def test_shares_are_scale_free_and_sum_to_one_with_the_residual():
    related = _frame(lambda x, y: 1000.0 * target(x, y))  # same shape, 1000x the scale
    noise = _frame(lambda x, y: np.sin(40 * x) * np.cos(33 * y), seed=1)
    report = _study({"related": related, "noise": noise}).transfer_report()
    assert sum(report.shares.values()) + report.residual_share == pytest.approx(1.0)
    assert report.weights["related"] < 0.01  # the raw weight absorbs the scale ...
    assert report.shares["related"] > 0.5 > report.shares["noise"]  # ... the share does not
    assert all(np.isfinite(v) and v >= 0 for v in report.weight_se.values())
    assert "related" in report.summary() and "%" in report.summary()
    frame = report.to_frame()
    assert list(frame.columns) == ["source", "weight", "weight_se", "share"]


def test_summary_says_when_the_sources_look_irrelevant():
    noise = _frame(lambda x, y: np.sin(50 * x + 3) * np.cos(41 * y), seed=2)
    report = _study({"unrelated": noise}, n_trials=12).transfer_report()
    assert report.residual_share >= 0.7
    assert "look irrelevant" in report.summary()


def test_summary_before_any_trial_names_the_prior():
    report = _study({"a": _frame(target)}, n_trials=0).transfer_report()
    assert "No completed trial yet" in report.summary()
    assert report.to_dict()["summary"] == report.summary()


def test_rgpe_weights_are_shares():
    study = hs.create_study(
        "rgpe",
        _space(),
        storage=None,
        method="rgpe",
        transfer_from=_named({"a": _frame(target)}),
        seed=0,
    )
    for _ in range(4):
        trial = study.ask()
        study.tell(trial, target(trial.params["x"], trial.params["y"]))
    report = study.transfer_report()
    assert sum(report.shares.values()) + report.residual_share == pytest.approx(1.0)


def test_warmstart_reports_the_configurations_it_begins_with():
    source = _frame(target)
    study = hs.create_study(
        "ws", _space(), storage=None, method="warmstart", transfer_from=_named({"a": source})
    )
    report = study.transfer_report()
    assert report.weights == {} and report.summary().startswith("Warm start")
    best = source.sort_values("value").iloc[0]
    first = report.warm_start[0]
    assert first["x"] == pytest.approx(best["x"]) and first["y"] == pytest.approx(best["y"])


# --- a report for every registered method -------------------------------------------------------
def _quadratic(p: dict) -> float:
    return sum((float(v) - 0.4) ** 2 for v in p.values() if not isinstance(v, str))


@pytest.fixture(scope="module")
def sources_storage(tmp_path_factory):
    """Two earlier studies on the target's space and three on other spaces (for MPHD)."""
    url = f"sqlite:///{tmp_path_factory.mktemp('report') / 'sources.db'}"
    for i in range(2):
        hs.create_study(f"same{i}", _space(), storage=url, method="random", seed=i).optimize(
            lambda p, i=i: _quadratic(p) + 0.1 * i, 40, show_progress=False
        )
    others = [
        {"C": hs.Float(1e-3, 1e3, log=True), "g": hs.Float(0.0, 1.0)},
        {"depth": hs.Int(1, 10), "frac": hs.Float(0.1, 1.0)},
        {"lr": hs.Float(0.0, 1.0), "w": hs.Int(8, 64), "m": hs.Float(0.0, 1.0)},
    ]
    for i, params in enumerate(others):
        study = hs.create_study(f"other{i}", hs.SearchSpace(params), storage=url, method="random")
        study.optimize(lambda p: _quadratic({k: v for k, v in p.items() if k != "C"}), 15,
                       show_progress=False)  # fmt: skip
    return url


@pytest.mark.parametrize("method", method_names())
def test_every_method_gives_a_report(method, sources_storage, tmp_path, monkeypatch):
    """transfer_report() (a summary, a table, a plot, a JSON form) for every method that uses
    earlier tasks, and the HTML report for every method."""
    import json

    import headstart._transfer.features as features

    monkeypatch.setattr(features, "MIN_STEPS", 200)  # neural bases: the report, not accuracy

    from headstart._methods import get_method
    from headstart.report import write_report

    spec = get_method(method)
    # named, not "all": the studies this test's earlier cases stored must not change MPHD's data
    every = ["same0", "same1", "other0", "other1", "other2"]
    sources = {"none": None, "same-space": ["same0", "same1"], "any-space": every}[spec.sources]
    study = hs.create_study(
        f"t-{method}", _space(), storage=sources_storage, method=method, transfer_from=sources,
        seed=0,
    )  # fmt: skip
    study.optimize(_quadratic, 4, show_progress=False)
    if spec.uses_sources:
        report = study.transfer_report()
        assert report.summary() and len(report.to_frame()) > 0
        json.dumps(report.to_dict())
        report.plot(tmp_path / "transfer.png")
    else:
        with pytest.raises(hs.InvalidSettingError, match="learns nothing from earlier tasks"):
            study.transfer_report()
    html = write_report(study, tmp_path / "report.html").read_text()
    assert ("Transfer" in html) == spec.uses_sources and "unavailable" not in html
    hs.delete_study(study.name, sources_storage)


# --- sources mean "use them"; and a check that tells when they mislead (issue 27) -----------------
def _frame_of(fn, n=40, seed=0):
    rng = np.random.default_rng(seed)
    x, y = rng.random(n), rng.random(n)
    return pd.DataFrame({"x": x, "y": y, "value": fn(x, y)})


def _bowl(x, y):
    return (x - 0.8) ** 2 + (y - 0.8) ** 2


def test_sources_without_a_method_use_the_transfer_default():
    study = hs.create_study("d", _space(), storage=None, transfer_from=_frame_of(_bowl))
    assert study.config.method == "scaml"
    assert hs.create_study("g", _space(), storage=None).config.method == "gp"
    with pytest.raises(hs.InvalidSettingError, match="ignores earlier tasks"):
        hs.create_study("e", _space(), storage=None, method="gp", transfer_from=_frame_of(_bowl))


def test_misleading_sources_are_named_in_a_warning_and_the_summary():
    """Sources whose optimum is the task's worst region: the transfer model predicts the study's
    later trials worse than no sources, and optimize() says so."""
    inverted = _frame_of(lambda x, y: -3.0 * _bowl(x, y))
    study = hs.create_study("bad", _space(), storage=None, transfer_from=inverted, seed=0)
    with pytest.warns(hs.HeadstartWarning, match="sources seem to mislead"):
        study.optimize(lambda p: _bowl(p["x"], p["y"]), 16, show_progress=False)
    check = study.transfer_check()
    assert check["hurting"] and check["with_sources"] < check["without_sources"]
    assert "the sources mislead this study" in study.transfer_report().summary()


def test_helpful_sources_pass_the_check_quietly():
    import warnings

    close = _frame_of(lambda x, y: _bowl(x, y) + 0.05)
    study = hs.create_study("good", _space(), storage=None, transfer_from=close, seed=0)
    with warnings.catch_warnings():
        warnings.simplefilter("error", hs.HeadstartWarning)
        study.optimize(lambda p: _bowl(p["x"], p["y"]), 16, show_progress=False)
    assert not study.transfer_check()["hurting"]
    assert "Held-out check" in study.transfer_report().summary()
