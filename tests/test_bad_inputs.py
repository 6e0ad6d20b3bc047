"""Bad inputs get a specific HeadstartError at the call that caused it, with nothing stored;
a damaged model-cache row is dropped and rebuilt with a warning instead of disabling the study
(issue 28: 19 raw exceptions, 12 silently accepted inputs and 14 poisoned studies)."""

from __future__ import annotations

import json
import warnings

import numpy as np
import pytest
from sqlalchemy import text

import headstart as hs
from headstart.storage import get_storage

SPACE = hs.SearchSpace({"x": hs.Float(0.0, 1.0)})


def _nothing_stored(store) -> None:
    assert store.list_studies() == []


@pytest.mark.parametrize(
    ("value", "match"),
    [(2**1024, "finite"), (-(2**1024), "finite"), (np.array([1.0, 2.0]), "one real number")],
)
def test_tell_refuses_values_that_are_not_one_finite_number(value, match):
    study = hs.create_study("t", SPACE, storage=None, method="random")
    trial = study.ask()
    with pytest.raises(hs.InvalidValueError, match=match):
        study.tell(trial, value)
    assert study.trials[0].state == "running"  # nothing written: it can still be told
    study.tell(trial, np.array([0.5]))


def test_add_trials_refuses_what_is_not_trials(tmp_path):
    study = hs.create_study("a", SPACE, storage=None, method="random")
    (tmp_path / "empty.csv").write_text("")
    (tmp_path / "binary.csv").write_bytes(bytes(range(256)) * 4)
    export = study.export()
    damaged = [
        {k: v for k, v in export.items() if k != "direction"},
        {**export, "trials": [{"value": 1.0}]},
        {**export, "space": "x"},
    ]
    for i, doc in enumerate(damaged):
        (tmp_path / f"d{i}.json").write_text(json.dumps(doc))
    (tmp_path / "twice.json").write_text(
        '{"format": "headstart-study/1", "name": "a", "name": "b"}'
    )
    cases = [
        (None, hs.InvalidValueError),
        (42, hs.InvalidValueError),
        (tmp_path / "empty.csv", hs.EmptySourceError),
        (tmp_path / "binary.csv", hs.SourceFileError),
        (tmp_path / "twice.json", hs.SourceFileError),
        *[(tmp_path / f"d{i}.json", hs.SourceFileError) for i in range(len(damaged))],
    ]
    for given, error in cases:
        with pytest.raises(error):
            study.add_trials(given)
    assert study.trials == []


@pytest.mark.parametrize(
    ("make", "error"),
    [
        (lambda: hs.Int(0, 2**64), hs.SearchSpaceError),
        (lambda: hs.Int(-(2**63), 0), hs.SearchSpaceError),
        (lambda: hs.Fixed(float("nan")), hs.SearchSpaceError),
        (lambda: hs.Fixed(float("inf")), hs.SearchSpaceError),
        (lambda: hs.SearchSpace({"value": hs.Float(0, 1)}), hs.SearchSpaceError),
        (lambda: hs.SearchSpace({"number": hs.Float(0, 1)}), hs.SearchSpaceError),
        (lambda: hs.SearchSpace({"state": hs.Float(0, 1)}), hs.SearchSpaceError),
        (lambda: hs.SearchSpace({"x\x00": hs.Float(0, 1)}), hs.SearchSpaceError),
        (lambda: hs.SearchSpace({"x\ud800": hs.Float(0, 1)}), hs.SearchSpaceError),
        (lambda: hs.Categorical(["a\udc00", "b"]), hs.SearchSpaceError),
        (
            lambda: hs.SearchSpace.from_json(
                {"params": {"x": {"type": "int", "low": 0, "high": "9"}}}
            ),
            hs.SearchSpaceError,
        ),
    ],
)
def test_spaces_that_no_model_can_use_are_refused_at_definition(make, error):
    with pytest.raises(error):
        make()


def test_the_widest_integer_range_still_asks():
    study = hs.create_study("wide", hs.SearchSpace({"n": hs.Int(-(2**53), 2**53)}), storage=None)
    for _ in range(3):
        trial = study.ask()
        assert -(2**53) <= trial.params["n"] <= 2**53
        study.tell(trial, abs(trial.params["n"]) / 2**53)


def _raises(x):
    raise RuntimeError("boom")


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({"name": "a\x00b"}, hs.InvalidSettingError),
        ({"name": "a\ud800"}, hs.InvalidSettingError),
        ({"name": "  "}, hs.InvalidSettingError),
        ({"load_if_exists": "yes"}, hs.InvalidSettingError),
        ({"load_if_exists": 1}, hs.InvalidSettingError),
        ({"prior_density": _raises}, hs.PriorDensityError),
        ({"heartbeat_interval": 2.0, "grace_period": 1.0}, hs.InvalidSettingError),
    ],
)
def test_create_study_refuses_bad_settings_with_nothing_stored(tmp_path, kwargs, error):
    url = f"sqlite:///{tmp_path / 'b.db'}"
    settings = {"name": "s", **kwargs}
    with pytest.raises(error):
        hs.create_study(settings.pop("name"), SPACE, storage=url, **settings)
    _nothing_stored(get_storage(url))


def test_a_sqlite_url_without_a_path_is_refused():
    with pytest.raises(hs.StorageError, match="names no file"):
        hs.create_study("s", SPACE, storage="sqlite:///")


def _corrupt(store, kind: str, value: str) -> int:
    with store._engine.begin() as conn:
        return conn.execute(
            text("UPDATE model_cache SET value_json = :v WHERE kind = :k"), {"v": value, "k": kind}
        ).rowcount


@pytest.mark.parametrize(
    "damage",
    [
        "{garbage",
        "[1, 2]",
        '{"raw": [1e308, 0, 0]}',
        '{"raw": ["a", "b", "c"]}',
        '{"raw": [NaN, 0, 0]}',
    ],
)
def test_a_damaged_surrogate_state_is_dropped_and_rebuilt(tmp_path, damage):
    url = f"sqlite:///{tmp_path / 'c.db'}"
    study = hs.create_study("c", SPACE, storage=url, method="gp", seed=0, n_initial=3)
    study.optimize(lambda p: (p["x"] - 0.3) ** 2, 5, show_progress=False)
    store = get_storage(url)
    assert _corrupt(store, "surrogate-state", damage) == 1
    again = hs.load_study("c", url)
    with pytest.warns(hs.HeadstartWarning, match="dropped and is rebuilt"):
        trial = again.ask()
    again.tell(trial, 0.1)
    with warnings.catch_warnings():
        warnings.simplefilter("error", hs.HeadstartWarning)  # rebuilt: no second warning
        again.optimize(lambda p: (p["x"] - 0.3) ** 2, 2, show_progress=False)
    assert all(t.state == "complete" for t in again.trials)


def test_damaged_meta_gps_are_refitted(tmp_path):
    url = f"sqlite:///{tmp_path / 'm.db'}"
    source = hs.create_study("src", SPACE, storage=url, method="random", seed=0)
    source.optimize(lambda p: (p["x"] - 0.3) ** 2, 12, show_progress=False)
    study = hs.create_study("t", SPACE, storage=url, method="scaml", transfer_from=["src"], seed=0)
    study.optimize(lambda p: (p["x"] - 0.3) ** 2, 3, show_progress=False)
    store = get_storage(url)
    assert _corrupt(store, "meta-gps", '{"gps": "not a list"}') >= 1
    again = hs.load_study("t", url)
    with pytest.warns(hs.HeadstartWarning, match="meta GPs"):
        again.tell(again.ask(), 0.2)


def test_a_retampered_prior_model_file_is_refused_when_read(tmp_path):
    from headstart.mphd.prior_model import PriorModel, _digest

    prior = PriorModel("shared", [], [0.0] * 4, [1.0] * 4, (2.0, 3.0), (2.0, 1.0), (1.1, 30.0))
    doc = prior.to_json()
    doc["model"]["shared_lengthscale"] = [1e308, 1e308]
    doc["sha256"] = _digest(doc["model"])  # re-hashed: the checksum alone passes
    path = tmp_path / "prior.json"
    path.write_text(json.dumps(doc))
    with pytest.raises(hs.PriorModelError, match="must be two numbers"):
        hs.create_study("p", SPACE, storage=f"sqlite:///{tmp_path / 'p.db'}", prior_model=path)
    _nothing_stored(get_storage(f"sqlite:///{tmp_path / 'p.db'}"))


def test_studies_stored_before_the_new_rules_still_load(tmp_path):
    """A parameter named like an export column, or a grace period of one interval, is refused
    for new studies only: a stored study keeps loading."""
    url = f"sqlite:///{tmp_path / 'old.db'}"
    study = hs.create_study("old", SPACE, storage=url, method="random")
    space = {"params": {"source": {"type": "float", "low": 0.0, "high": 1.0, "log": False}}}
    settings = {**study.settings, "heartbeat_interval": 10.0, "grace_period": 10.0}
    get_storage(url).create_study("stored", direction="minimize", space=space, settings=settings)
    stored = hs.load_study("stored", url)
    assert list(stored.space) == ["source"] and stored.config.grace_period == 10.0
    stored.tell(stored.ask(), 0.5)
