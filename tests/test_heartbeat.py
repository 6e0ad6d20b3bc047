"""Heartbeats: a worker that stops beating has its running trial failed (and optionally redone).

The kill test runs a real worker process, kills it with SIGKILL mid-trial and checks that the
next ``ask`` of another worker fails its trial; on a SQLite file and, when `.ci/run` started one,
on PostgreSQL.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import signal
import time
import uuid

import pytest

import headstart as hs
from headstart.storage import get_storage
from helpers import backend_url, release_together

PG_URL = os.environ.get("HEADSTART_TEST_POSTGRES_URL")
INTERVAL, GRACE = 0.1, 1.0  # generous: a loaded CI machine may delay a beat


def _space() -> hs.SearchSpace:
    return hs.SearchSpace({"x": hs.Float(0.0, 1.0)})


def _study(name: str, storage, **kwargs) -> hs.Study:
    return hs.create_study(
        name,
        _space(),
        storage=storage,
        method="random",
        seed=0,
        heartbeat_interval=INTERVAL,
        grace_period=GRACE,
        **kwargs,
    )


def test_a_silent_worker_trial_is_failed_and_optionally_redone():
    store = get_storage(None)
    study = _study("hb", store, reenqueue_stale=True)
    lost = study.ask()
    study._heartbeats.pop(lost.trial_id).stop()  # the worker "dies": no more beats
    time.sleep(GRACE + 0.2)
    other = hs.load_study("hb", store)
    retry = other.ask()  # sweeps first: the lost trial is failed, its config enqueued once
    failed = study.trials[lost.number]
    assert failed.state == "failed" and failed.user_attrs["fail_reason"] == "heartbeat"
    assert retry.params == lost.params and retry.user_attrs == {"retry_of": lost.number}
    other.tell(retry, 1.0)


def test_a_beating_trial_stays_running_past_the_grace_period():
    store = get_storage(None)
    study = _study("alive", store)
    trial = study.ask()
    time.sleep(GRACE + 0.3)  # the heartbeat thread keeps it fresh
    hs.load_study("alive", store).ask()
    assert study.trials[trial.number].state == "running"
    study.tell(trial, 0.5)
    assert study.trials[trial.number].state == "complete"


def test_heartbeat_settings_are_checked():
    with pytest.raises(hs.InvalidSettingError, match="heartbeat_interval"):
        hs.create_study("bad", _space(), storage=None, heartbeat_interval=0)
    with pytest.raises(hs.InvalidSettingError, match="needs heartbeat_interval"):
        hs.create_study("bad", _space(), storage=None, grace_period=3.0)


def _hang(url: str, name: str, numbers) -> None:
    study = hs.load_study(name, url)
    numbers.put(study.ask().number)
    time.sleep(600)  # evaluating... until killed


@pytest.mark.parametrize(
    "backend", ["sqlite", pytest.param("postgresql", marks=pytest.mark.xdist_group("postgres"))]
)
def test_kill_9_mid_trial_is_detected(tmp_path, backend):
    if backend == "postgresql" and not PG_URL:
        pytest.skip("HEADSTART_TEST_POSTGRES_URL is not set")
    url = PG_URL if backend == "postgresql" else f"sqlite:///{tmp_path / 'hb.db'}"
    name = f"kill-{uuid.uuid4().hex[:8]}"
    study = _study(name, url)
    ctx = mp.get_context("spawn")
    numbers = ctx.Queue()
    worker = ctx.Process(target=_hang, args=(url, name, numbers))
    worker.start()
    number = numbers.get(timeout=120)
    time.sleep(3 * INTERVAL)
    assert study.trials[number].state == "running"  # alive and beating
    os.kill(worker.pid, signal.SIGKILL)
    worker.join(timeout=30)
    time.sleep(GRACE + 0.3)
    trial = study.ask()  # the sweep fails the dead worker's trial
    assert study.trials[number].state == "failed"
    assert study.trials[number].user_attrs["fail_reason"] == "heartbeat"
    study.tell(trial, 0.1)
    hs.delete_study(name, url)


def test_an_in_memory_study_survives_busy_heartbeat_threads():
    study = hs.create_study(  # beats every 2 ms; a long grace: none of them goes stale
        "busy",
        _space(),
        storage=None,
        method="random",
        seed=0,
        heartbeat_interval=0.002,
        grace_period=30.0,
    )
    trials = [study.ask() for _ in range(5)]  # five threads beating every 2 ms
    for _ in range(40):
        trial = study.ask()
        study.tell(trial, trial.params["x"])
    for trial in trials:
        study.tell(trial, 0.0)
    assert [t.state for t in study.trials] == ["complete"] * 45


def _slow_or_skewed_worker(url: str, name: str, barrier, role: str) -> None:
    """``slow``: its suggestion takes 2.5 s (past the 1 s grace period); ``skewed``: its clock
    runs 10 s behind the others'; ``fast``: asks and tells for 4 s, sweeping stale trials at
    every ask. No live trial may be failed: every ask and tell of every worker succeeds."""
    from datetime import UTC, datetime, timedelta

    import headstart.storage._clock as clock

    study = hs.load_study(name, url)
    if role == "slow":
        suggest = study._strategy.suggest

        def slow_suggest(*args, **kwargs):
            time.sleep(2.5)
            return suggest(*args, **kwargs)

        study._strategy.suggest = slow_suggest
    if role == "skewed":
        clock.now = lambda: (datetime.now(UTC) - timedelta(seconds=10)).isoformat()
    barrier.wait()
    if role == "fast":
        end = time.monotonic() + 4.0
        while time.monotonic() < end:
            trial = study.ask()
            study.tell(trial, trial.params["x"])
            time.sleep(0.05)
        return
    trial = study.ask()
    time.sleep(2.5 if role == "skewed" else 0.0)  # evaluating, beating
    study.tell(trial, trial.params["x"])


@pytest.mark.parametrize(
    "backend", ["sqlite", pytest.param("postgresql", marks=pytest.mark.xdist_group("postgres"))]
)
def test_slow_suggestions_and_skewed_clocks_never_fail_a_live_trial(tmp_path, backend):
    """Beats start when the trial is reserved (not once the suggestion is computed) and ages are
    read on the database's clock: before, the slow worker's ask returned an already-failed trial
    and its tell raised TrialAlreadyFinishedError; the skewed worker's trial was failed."""
    url = backend_url(backend, tmp_path, "slow.db")
    name = f"slow-{uuid.uuid4().hex[:8]}"
    study = hs.create_study(
        name, _space(), storage=url, method="random", heartbeat_interval=0.2, grace_period=GRACE
    )
    roles = ["slow", "skewed", "fast", "fast"]
    release_together(
        _slow_or_skewed_worker, lambda barrier, i: (url, name, barrier, roles[i]), len(roles)
    )
    trials = study.trials
    assert trials and all(t.state == "complete" for t in trials), [t.state for t in trials]
    hs.delete_study(name, url)


def test_grace_period_must_exceed_the_heartbeat_interval():
    for grace in (0.5, 1.0):
        with pytest.raises(hs.InvalidSettingError, match="longer than heartbeat_interval"):
            hs.create_study("g", _space(), storage=None, heartbeat_interval=1.0, grace_period=grace)
    store = get_storage(None)
    hs.create_study("g", _space(), storage=store, heartbeat_interval=1.0, grace_period=3.0)
    with pytest.raises(hs.InvalidSettingError, match="longer than heartbeat_interval"):
        hs.load_study("g", store, heartbeat_interval=5.0)


def objective(params: dict) -> float:  # module level: picklable for worker processes
    return params["x"]


def test_worker_processes_beat_even_when_the_study_sets_no_heartbeat(tmp_path):
    """optimize(n_workers > 1) beats (10 s, grace 60 s) so that a killed worker's trial does not
    stay running, a pending point for every later ask, forever."""
    url = f"sqlite:///{tmp_path / 'w.db'}"
    study = hs.create_study("w", _space(), storage=url, method="random", seed=0)
    study.optimize(objective, 4, n_workers=2, show_progress=False)
    records = study._storage.get_trials(study._id)
    assert len(records) == 4 and all(r.heartbeat_at is not None for r in records)
    solo = hs.create_study("solo", _space(), storage=url, method="random", seed=0)
    solo.optimize(objective, 2, show_progress=False)  # one process: nothing to detect
    assert all(r.heartbeat_at is None for r in solo._storage.get_trials(solo._id))


def test_studies_fail_stale_fails_abandoned_trials_without_heartbeats(tmp_path):
    from typer.testing import CliRunner

    from headstart.cli import app

    url = f"sqlite:///{tmp_path / 'stale.db'}"
    study = hs.create_study("stale", _space(), storage=url, method="random", seed=0)
    abandoned = study.ask()  # its worker was killed: no heartbeat, running forever
    done = study.ask()
    study.tell(done, 0.5)
    runner = CliRunner()
    kept = runner.invoke(
        app, ["studies", "fail-stale", "stale", "--older-than", "3600", "--storage", url]
    )
    assert kept.exit_code == 0 and "Failed 0" in kept.output
    assert study.trials[abandoned.number].state == "running"
    result = runner.invoke(
        app,
        ["studies", "fail-stale", "stale", "--older-than", "0", "--storage", url, "--reenqueue"],
    )
    assert (
        result.exit_code == 0
        and f"Failed 1 stale running trial(s) of 'stale': {abandoned.number}." in result.output
    )
    trials = study.trials
    assert trials[abandoned.number].state == "failed"
    assert trials[abandoned.number].user_attrs["fail_reason"] == "stale"
    assert trials[-1].state == "waiting" and trials[-1].params == abandoned.params
    assert trials[done.number].state == "complete"
