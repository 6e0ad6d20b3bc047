"""Inputs that used to poison a study fail at the call that caused them, with nothing stored."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import headstart as hs
from headstart.storage import get_storage
from helpers import backend_url, release_together


def _space() -> hs.SearchSpace:
    return hs.SearchSpace({"x": hs.Float(0.0, 1.0), "y": hs.Float(0.0, 1.0)})


@pytest.mark.parametrize("seed", [-1, 1.7, True, "3", 2**63])
def test_bad_seed_is_refused_and_nothing_is_stored(seed):
    store = get_storage(None)
    with pytest.raises(hs.InvalidSettingError, match="seed must be an integer"):
        hs.create_study("s", _space(), storage=store, seed=seed)
    assert store.list_studies() == []


def test_numpy_seed_is_accepted():
    study = hs.create_study("s", _space(), storage=None, seed=np.int64(4))
    assert study.settings["seed"] == 4 and study.ask().number == 0


def test_name_longer_than_the_column_is_refused():
    with pytest.raises(hs.InvalidSettingError, match="at most 512 characters"):
        hs.create_study("n" * 513, _space(), storage=None)


def test_a_range_wider_than_a_float_is_refused():
    with pytest.raises(hs.SearchSpaceError, match="wider than a float"):
        hs.Float(-1e308, 1e308)


def test_resuming_with_another_method_is_refused_and_keeps_the_settings():
    store = get_storage(None)
    hs.create_study("m", _space(), storage=store, method="random", seed=1)
    with pytest.raises(hs.DuplicatedStudyError, match="method='random'"):
        hs.create_study("m", _space(), storage=store, method="gp")
    assert hs.load_study("m", store).settings["method"] == "random"


def test_refused_resume_stores_no_meta_data():
    store = get_storage(None)
    hs.create_study("t", hs.SearchSpace({"z": hs.Float(0.0, 1.0)}), storage=store, method="random")
    source = hs.MetaTask("src", np.random.default_rng(0).random((6, 2)), np.arange(6.0))
    with pytest.raises(hs.DuplicatedStudyError, match="different search space"):
        hs.create_study("t", _space(), storage=store, method="scaml", transfer_from=[source])
    assert store.clear_cache("meta-data") == 0


@pytest.mark.parametrize("method", ["gp", "random"])
def test_a_huge_integer_range_is_searched_without_enumerating_it(method):
    space = hs.SearchSpace({"n": hs.Int(0, 10**9), "x": hs.Float(0.0, 1.0)})
    study = hs.create_study("wide", space, storage=None, method=method, seed=0, n_initial=3)
    for _ in range(6):
        trial = study.ask()
        assert isinstance(trial.params["n"], int) and 0 <= trial.params["n"] <= 10**9
        study.tell(trial, abs(trial.params["n"] - 3 * 10**8) / 1e9 + trial.params["x"])
    log_space = hs.SearchSpace({"n": hs.Int(1, 10**12, log=True)})
    study = hs.create_study("wide-log", log_space, storage=None, seed=0, n_initial=2)
    for _ in range(3):
        trial = study.ask()
        study.tell(trial, float(np.log(trial.params["n"])))


def test_meta_data_too_large_to_model_is_refused_and_nothing_is_stored():
    store = get_storage(None)
    import pandas as pd

    X = np.random.default_rng(0).random((6, 2))
    source = pd.DataFrame({"x": X[:, 0], "y": X[:, 1], "value": 1e160 * (1 + X[:, 0])})
    with pytest.raises(hs.MetaDataValueError, match=r"exceeds 1e\+100.*Rescale"):
        hs.create_study("s", _space(), storage=store, method="scaml", transfer_from=source)
    assert store.list_studies() == []
    assert store.get_cache("anything") is None


def test_huge_objective_values_do_not_overflow_the_model():
    study = hs.create_study("s", _space(), storage=None, seed=0, n_initial=3)
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        for i in range(5):
            trial = study.ask()
            study.tell(trial, 1e300 if i == 1 else trial.params["x"])
        assert 0.0 <= study.ask().params["x"] <= 1.0


def _finished_study() -> hs.Study:
    space = hs.SearchSpace({"x": hs.Float(0.0, 1.0), "c": hs.Categorical(["a", "b"])})
    study = hs.create_study("src", space, storage=None, seed=0, n_initial=3)
    for _ in range(4):
        trial = study.ask()
        study.tell(trial, trial.params["x"])
    study.tell(study.ask(), failed=True)
    study.ask()  # left running
    return study


def test_add_trials_imports_a_trials_dataframe_export():
    source = _finished_study()
    target = hs.create_study("dst", source.space, storage=None)
    with pytest.warns(hs.HeadstartWarning, match="skipped 1 running row"):
        imported = target.add_trials(source.trials_dataframe())
    done = [t for t in source.trials if t.state in ("complete", "failed")]
    assert [(t.state, t.params, t.value) for t in imported] == [
        (t.state, t.params, t.value) for t in done
    ]


def test_add_trials_reads_optuna_style_exports():
    import pandas as pd

    frame = pd.DataFrame(
        {
            "number": [0, 1],
            "value": [0.5, None],
            "params_x": [0.25, 0.75],
            "params_c": ["a", "b"],
            "user_attrs_note": ["n", "m"],
            "duration": [1.0, 2.0],
            "state": ["COMPLETE", "FAIL"],
        }
    )
    target = hs.create_study("dst", _finished_study().space, storage=None)
    trial, failed = target.add_trials(frame)
    assert trial.params == {"x": 0.25, "c": "a"} and trial.value == 0.5
    assert trial.user_attrs == {"note": "n"}
    assert failed.state == "failed" and failed.params == {"x": 0.75, "c": "b"}


@pytest.mark.parametrize(
    ("extra", "match"),
    [({"typo": [1.0]}, r"\['typo'\] that are not parameters"), ({"params_x": [0.3]}, "both")],
)
def test_add_trials_refuses_unknown_or_ambiguous_columns_and_stores_nothing(extra, match):
    import pandas as pd

    study = hs.create_study("dst", _space(), storage=None)
    frame = pd.DataFrame({"x": [0.2], "y": [0.4], "value": [1.0], **extra})
    with pytest.raises(hs.InvalidParamsError, match=match):
        study.add_trials(frame)
    assert study.trials == []


# --- widening a resumed study's space (issue 27) --------------------------------------------------
NARROW = hs.SearchSpace({"x": hs.Float(0.0, 1.0), "c": hs.Categorical(["a", "b", "y"])})
WIDE = hs.SearchSpace({"x": hs.Float(-1.0, 2.0), "c": hs.Categorical(["a", "b", "y", "z"])})


def test_load_if_exists_widens_the_space_and_keeps_the_old_one(tmp_path):
    url = f"sqlite:///{tmp_path / 'w.db'}"
    study = hs.create_study("w", NARROW, storage=url, method="random", seed=0)
    study.optimize(lambda p: p["x"], 3, show_progress=False)
    with pytest.raises(hs.DuplicatedStudyError, match="load_if_exists=True"):
        hs.create_study("w", WIDE, storage=url, method="random", seed=0)  # a script run again
    wide = hs.create_study("w", WIDE, storage=url, method="random", seed=0, load_if_exists=True)
    assert wide.space == WIDE and hs.load_study("w", url).space == WIDE
    assert len(wide.trials) == 3 and [h["space"] for h in wide.space_history] == [NARROW]
    wide.optimize(lambda p: p["x"], 20, show_progress=False)
    assert (
        min(t.params["x"] for t in wide.trials) < 0 or max(t.params["x"] for t in wide.trials) > 1
    )


@pytest.mark.parametrize(
    ("space", "why"),
    [
        (hs.SearchSpace({"x": hs.Float(0.2, 1.0), "c": NARROW["c"]}), "narrows"),
        (
            hs.SearchSpace({"x": hs.Float(0.0, 1.0), "c": hs.Categorical(["a", "b"])}),
            "loses choice",
        ),
        (hs.SearchSpace({"x": hs.Int(0, 1), "c": NARROW["c"]}), "changes type"),
        (hs.SearchSpace({"x": hs.Float(0.0, 1.0)}), "the parameters change"),
    ],
)
def test_an_incompatible_space_is_refused_even_with_load_if_exists(tmp_path, space, why):
    url = f"sqlite:///{tmp_path / 'w.db'}"
    hs.create_study("w", NARROW, storage=url, method="random")
    with pytest.raises(hs.DuplicatedStudyError, match=why):
        hs.create_study("w", space, storage=url, method="random", load_if_exists=True)
    assert hs.load_study("w", url).space == NARROW and hs.load_study("w", url).space_history == []


def test_a_transfer_study_cannot_widen_its_space():
    store = hs.storage.get_storage(None)
    source = hs.create_study("src", NARROW, storage=store, method="random")
    source.optimize(lambda p: p["x"], 6, show_progress=False)
    hs.create_study("t", NARROW, storage=store, method="scaml", transfer_from=["src"])
    with pytest.raises(hs.DuplicatedStudyError, match="frozen in the stored space"):
        hs.create_study(
            "t", WIDE, storage=store, method="scaml", transfer_from=["src"], load_if_exists=True
        )


def _widen(url: str, name: str, barrier) -> None:
    barrier.wait(timeout=120)
    study = hs.create_study(name, WIDE, storage=url, method="random", load_if_exists=True)
    study.tell(study.ask(), 1.0)


@pytest.mark.parametrize(
    "backend", ["sqlite", pytest.param("postgresql", marks=pytest.mark.xdist_group("postgres"))]
)
def test_processes_widening_at_once_store_one_change(tmp_path, backend):
    import uuid

    url = backend_url(backend, tmp_path, "w.db")
    name = f"widen-{uuid.uuid4().hex[:8]}"
    hs.create_study(name, NARROW, storage=url, method="random").storage.close()
    release_together(_widen, lambda barrier, _: (url, name, barrier), 4)
    study = hs.load_study(name, url)
    assert study.space == WIDE and len(study.space_history) == 1 and len(study.trials) == 4
    hs.delete_study(name, url)
