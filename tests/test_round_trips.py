"""What a study holds survives the way out and back in: exports, imports, data frames, the file.

Trial and study ``user_attrs`` and failed trials go through ``studies export --json`` / ``import
json``, ``import optuna``, ``trials_dataframe()`` / ``add_trials``; rows that carry no result are
counted, not dropped silently; and once the processes that wrote a SQLite storage have exited,
its ``.db`` file alone holds every trial (the write-ahead log was folded in).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

import headstart as hs
from helpers import release_together

HEADSTART = str(Path(sys.executable).with_name("headstart"))
PG_URL = os.environ.get("HEADSTART_TEST_POSTGRES_URL")
SPACE = hs.SearchSpace({"x": hs.Float(0.0, 1.0), "c": hs.Categorical(["a", "b"])})


def _study_with_attrs(url: str | None, name: str = "m") -> hs.Study:
    """Three complete trials, one failed, one still running; study and trial attributes."""
    study = hs.create_study(name, SPACE, storage=url, method="random", seed=0)
    study.set_user_attr("dataset", "iris")
    for i in range(4):
        trial = study.ask()
        trial.set_user_attr("fold", i)
        trial.set_user_attr("notes", {"lr": [0.1, 0.01]})
        if i == 2:
            study.tell(trial, failed=True)
        else:
            study.tell(trial, trial.params["x"])
    study.ask()  # left running
    return study


def _finished(study: hs.Study) -> list[tuple[str, dict, float | None, dict]]:
    return [
        (t.state, t.params, t.value, {k: v for k, v in t.user_attrs.items()})
        for t in study.trials
        if t.state in ("complete", "failed")
    ]


def _cli(*args: str) -> str:
    """The command's output (stdout and stderr, lines joined: rich wraps them)."""
    result = subprocess.run([HEADSTART, *args], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
    return " ".join((result.stdout + result.stderr).split())


def test_trials_dataframe_has_a_column_per_user_attribute():
    frame = _study_with_attrs(None).trials_dataframe()
    assert {"user_attrs_fold", "user_attrs_notes", "user_attrs_seconds_suggest"} <= set(frame)
    assert frame["user_attrs_fold"].tolist() == [0, 1, 2, 3, None]  # ints stay ints
    assert frame["user_attrs_notes"][0] == {"lr": [0.1, 0.01]}


def test_add_trials_from_a_frame_keeps_attributes_and_failed_trials_and_counts_the_rest():
    study = _study_with_attrs(None)
    copy = hs.create_study("copy", SPACE, storage=None)
    with pytest.warns(hs.HeadstartWarning, match="skipped 1 running row of 5"):
        added = copy.add_trials(study.trials_dataframe())
    assert [t.state for t in added] == ["complete", "complete", "failed", "complete"]
    assert _finished(copy) == _finished(study)


def test_add_trials_of_an_optuna_frame_imports_failed_trials_and_counts_pruned_ones():
    optuna = pytest.importorskip("optuna")
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    source = optuna.create_study()
    for i, x in enumerate([0.1, 0.5, 0.7, 0.9]):
        trial = source.ask({"x": optuna.distributions.FloatDistribution(0.0, 1.0)})
        trial.set_user_attr("i", i)
        state = [None, optuna.trial.TrialState.FAIL, optuna.trial.TrialState.PRUNED, None][i]
        source.tell(trial, x if state is None else None, state=state)
    study = hs.create_study("o", hs.SearchSpace({"x": hs.Float(0.0, 1.0)}), storage=None)
    with pytest.warns(hs.HeadstartWarning, match="skipped 1 pruned row of 4"):
        study.add_trials(source.trials_dataframe())
    assert [(t.state, t.user_attrs["i"]) for t in study.trials] == [
        ("complete", 0),
        ("failed", 1),
        ("complete", 3),
    ]


def test_add_trials_refuses_attributes_that_are_not_json():
    study = hs.create_study("j", SPACE, storage=None)
    row = {"params": {"x": 0.5, "c": "a"}, "value": 1.0, "user_attrs": {"bad": float("nan")}}
    with pytest.raises(hs.InvalidValueError, match="Row 0 of add_trials: User attributes"):
        study.add_trials([row])
    assert study.trials == []


def test_export_then_import_json_keeps_every_attribute_and_failed_trial(tmp_path):
    src, dst = f"sqlite:///{tmp_path / 'a.db'}", f"sqlite:///{tmp_path / 'b.db'}"
    study = _study_with_attrs(src)
    out = tmp_path / "m.json"
    _cli("studies", "export", "m", "--json", str(out), "--storage", src)
    printed = _cli("import", "json", str(out), "--name", "m2", "--storage", dst)
    assert "3 complete and 1 failed" in printed and "skipped 1 running row" in printed
    back = hs.load_study("m2", dst)
    assert back.user_attrs == {"dataset": "iris"}
    assert _finished(back) == _finished(study)


def test_import_optuna_keeps_attributes_and_failed_trials(tmp_path):
    optuna = pytest.importorskip("optuna")
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    url = f"sqlite:///{tmp_path / 'optuna.db'}"
    source = optuna.create_study(storage=url, study_name="opt")
    source.set_user_attr("owner", "me")

    def objective(trial):
        x = trial.suggest_float("x", 0.0, 1.0)
        trial.set_user_attr("n", trial.number)
        if trial.number == 1:
            raise ValueError("diverged")
        if trial.number == 2:
            raise optuna.TrialPruned()
        return x

    source.optimize(objective, n_trials=5, catch=(ValueError,))
    dst = f"sqlite:///{tmp_path / 'h.db'}"
    printed = _cli("import", "optuna", "--from", url, "--storage", dst)
    assert "3 complete and 1 failed" in printed and "skipped 1 pruned row" in printed
    back = hs.load_study("opt", dst)
    assert back.user_attrs == {"owner": "me"}
    assert [(t.state, t.user_attrs["n"]) for t in back.trials] == [
        ("complete", 0),
        ("failed", 1),
        ("complete", 3),
        ("complete", 4),
    ]


def _write_and_exit(url: str, name: str, barrier, worker: int) -> None:
    study = hs.load_study(name, url)
    barrier.wait(timeout=120)
    for _ in range(3):
        trial = study.ask()
        trial.set_user_attr("worker", worker)
        study.tell(trial, float(worker))
    # no close(): the exit handler must fold the write-ahead log into the file


@pytest.mark.parametrize(
    "backend", ["sqlite", pytest.param("postgresql", marks=pytest.mark.xdist_group("postgres"))]
)
def test_once_the_writers_exit_the_database_file_alone_holds_every_trial(tmp_path, backend):
    """Four processes released together write and exit; a copy of the ``.db`` file alone (the
    ``-wal`` and ``-shm`` files left behind, as a user copying the file does) has all trials."""
    if backend == "postgresql" and not PG_URL:
        pytest.skip("HEADSTART_TEST_POSTGRES_URL is not set")
    url = PG_URL if backend == "postgresql" else f"sqlite:///{tmp_path / 'live.db'}"
    name = f"wal-{uuid.uuid4().hex[:8]}"
    hs.create_study(name, SPACE, storage=url, method="random").storage.close()
    release_together(_write_and_exit, lambda barrier, i: (url, name, barrier, i), 4)
    if backend == "sqlite":
        shutil.copy(tmp_path / "live.db", tmp_path / "copy.db")  # the file only
        url = f"sqlite:///{tmp_path / 'copy.db'}"
    trials = hs.load_study(name, url).trials
    assert len(trials) == 12 and all(t.state == "complete" for t in trials)
    assert sorted(t.user_attrs["worker"] for t in trials) == [0, 0, 0, 1, 1, 1, 2, 2, 2, 3, 3, 3]
    if backend == "postgresql":
        hs.delete_study(name, url)


def test_a_script_that_exits_leaves_no_write_ahead_log(tmp_path):
    """The README's quick start, then exit: ``headstart.db`` alone is the storage."""
    script = (
        "import headstart as hs\n"
        "s = hs.create_study('m', hs.SearchSpace({'x': hs.Float(0, 1)}))\n"
        "s.optimize(lambda p: p['x'] ** 2, 5, show_progress=False)\n"
    )
    subprocess.run([sys.executable, "-c", script], cwd=tmp_path, check=True)
    assert not (tmp_path / "headstart.db-wal").exists()
    shutil.copy(tmp_path / "headstart.db", tmp_path / "copy.db")
    assert len(hs.load_study("m", f"sqlite:///{tmp_path / 'copy.db'}").trials) == 5


def test_a_closed_storage_can_be_used_again(tmp_path):
    study = _study_with_attrs(f"sqlite:///{tmp_path / 'c.db'}")
    study.storage.close()
    wal = tmp_path / "c.db-wal"
    assert not wal.exists() or wal.stat().st_size == 0  # folded into the file
    trial = study.ask()
    study.tell(trial, 0.5)
    assert len(study.trials) == 6
