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
