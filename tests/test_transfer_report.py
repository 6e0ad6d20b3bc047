"""transfer_report(): weights a user can read (shares, standard errors, a summary in words)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import headstart as hs
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


def test_warmstart_has_no_weights_to_report():
    study = hs.create_study(
        "ws",
        _space(),
        storage=None,
        method="warmstart",
        transfer_from=_named({"a": _frame(target)}),
    )
    with pytest.raises(hs.InvalidSettingError, match="learns no weights"):
        study.transfer_report()
