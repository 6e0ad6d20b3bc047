"""Overlapping asks from several processes: no shared number, no duplicate configuration.

Each worker process waits at a barrier before every ``ask()``, so all of them ask at the same
moment -- where "reserve, then suggest" matters. Runs on a SQLite file and, when `.ci/run` has
started one, on a real PostgreSQL server.
"""

from __future__ import annotations

import json
import os
import uuid

import pytest

import headstart as hs
from headstart.storage import TrialState
from helpers import release_together

PG_URL = os.environ.get("HEADSTART_TEST_POSTGRES_URL")
N_WORKERS = 4
ROUNDS = 6


def _space() -> hs.SearchSpace:
    return hs.SearchSpace(
        {"x": hs.Float(0.0, 1.0), "n": hs.Int(1, 50), "c": hs.Categorical(["a", "b", "c"])}
    )


def _worker(url: str, name: str, barrier, rounds: int) -> None:
    study = hs.load_study(name, url)
    for _ in range(rounds):
        barrier.wait(timeout=120)
        trial = study.ask()
        study.tell(trial, trial.params["x"] ** 2 + 0.01 * trial.params["n"])


def _run(url: str, method: str, **settings) -> list[hs.Trial]:
    name = f"par-{method}-{uuid.uuid4().hex[:8]}"
    hs.create_study(name, _space(), storage=url, method=method, seed=3, **settings)
    release_together(_worker, lambda barrier, _: (url, name, barrier, ROUNDS), N_WORKERS)
    trials = hs.load_study(name, url).trials
    hs.delete_study(name, url)
    return trials


def _check(trials: list[hs.Trial]) -> None:
    assert len(trials) == N_WORKERS * ROUNDS
    assert sorted(t.number for t in trials) == list(range(N_WORKERS * ROUNDS))
    assert all(t.state == "complete" for t in trials)  # no lost tell
    configs = [json.dumps(t.params, sort_keys=True) for t in trials]
    duplicates = len(configs) - len(set(configs))
    assert duplicates == 0, f"{duplicates} duplicate configurations among {len(configs)}"


def _urls(tmp_path) -> list[str]:
    return [f"sqlite:///{tmp_path / 'par.db'}", *([PG_URL] if PG_URL else [])]


@pytest.mark.parametrize("method", ["random", "gp"])
def test_overlapping_asks_never_duplicate_work(tmp_path, method):
    settings = {"n_initial": 2 * N_WORKERS} if method == "gp" else {}
    for url in _urls(tmp_path):
        _check(_run(url, method, **settings))


def test_a_tiny_space_still_answers_every_ask():
    space = hs.SearchSpace({"c": hs.Categorical(["a", "b"])})
    study = hs.create_study("tiny", space, storage=None, method="random", seed=0)
    trials = [study.ask() for _ in range(5)]
    assert {t.params["c"] for t in trials[:2]} == {"a", "b"}  # distinct while any is unseen
    assert len(study.trials) == 5 and all(t.state == "running" for t in study.trials)


def test_a_failing_suggestion_fails_its_reserved_trial(monkeypatch):
    study = hs.create_study("boom", _space(), storage=None, method="random", seed=0)

    def boom(*args, **kwargs):
        raise RuntimeError("model exploded")

    monkeypatch.setattr(study._strategy, "suggest", boom)
    with pytest.raises(RuntimeError, match="exploded"):
        study.ask()
    (trial,) = study.trials
    assert trial.state == "failed"  # not left running, so never anyone's pending point
    monkeypatch.undo()
    assert study.ask().number == 1


def test_reserved_rows_are_not_pending_points():
    study = hs.create_study("resv", _space(), storage=None, method="gp", seed=0, n_initial=3)
    for _ in range(4):
        trial = study.ask()
        study.tell(trial, trial.params["x"])
    study._storage.create_trial(study._id, state=TrialState.RUNNING, params={})
    trial = study.ask()  # a worker's reservation with no configuration yet must not break it
    assert set(trial.params) == {"x", "n", "c"}


def test_passwords_never_shown():
    from headstart.exceptions import StorageError
    from headstart.storage.sql import mask_password

    url = "postgresql+psycopg://user:s3cret@127.0.0.1:1/db"
    assert mask_password(url) == "postgresql+psycopg://user:***@127.0.0.1:1/db"
    with pytest.raises(StorageError) as e:
        hs.create_study("x", _space(), storage=url)  # nothing listens on port 1
    assert "s3cret" not in str(e.value) and "***" in str(e.value)


@pytest.mark.skipif(not PG_URL, reason="HEADSTART_TEST_POSTGRES_URL is not set")
@pytest.mark.xdist_group("postgres")
def test_passwords_masked_in_repr_and_cli_on_postgres():
    from sqlalchemy.engine import make_url
    from typer.testing import CliRunner

    from headstart.cli import app

    url = make_url(PG_URL).set(password="s3cret").render_as_string(hide_password=False)
    study = hs.create_study(f"mask-{uuid.uuid4().hex[:6]}", _space(), storage=url)  # trust auth
    assert "s3cret" not in repr(study) and "s3cret" not in repr(study.storage)
    out = CliRunner().invoke(app, ["studies", "show", study.name, "--storage", url])
    assert out.exit_code == 0 and "s3cret" not in out.stdout
    hs.delete_study(study.name, url)


def _open(url: str, barrier) -> None:
    from headstart.storage.sql import Storage

    barrier.wait(timeout=120)
    Storage(url)


@pytest.mark.skipif(not PG_URL, reason="HEADSTART_TEST_POSTGRES_URL is not set")
@pytest.mark.xdist_group("postgres")
def test_many_processes_create_the_schema_of_a_fresh_database_at_once():
    import psycopg
    from sqlalchemy.engine import make_url

    base = make_url(PG_URL)
    db = f"fresh_{uuid.uuid4().hex[:8]}"
    dsn = base.set(drivername="postgresql").render_as_string(hide_password=False)
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {db}")
    url = base.set(database=db).render_as_string(hide_password=False)
    # no UniqueViolation on CREATE TABLE
    release_together(_open, lambda barrier, _: (url, barrier), n=8, timeout=120)
    hs.create_study("after", _space(), storage=url).ask()


def test_opening_a_sqlite_storage_does_not_wait_for_a_busy_writer(tmp_path):
    import sqlite3
    import time

    from headstart.storage.sql import Storage

    url = f"sqlite:///{tmp_path / 'busy.db'}"
    hs.create_study("busy", _space(), storage=url)
    holder = sqlite3.connect(tmp_path / "busy.db", isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")  # another process is inside a write transaction
    try:
        t0 = time.perf_counter()
        study = hs.load_study("busy", Storage(url))
        assert len(study.trials) == 0 and time.perf_counter() - t0 < 5.0
    finally:
        holder.execute("ROLLBACK")
        holder.close()


@pytest.mark.parametrize("method", ["random", "gp", "scaml"])
def test_a_batch_is_distinct_and_every_method_supports_it(method):
    import numpy as np

    space = _space()
    settings = {"n_initial": 3} if method == "gp" else {}
    if method == "scaml":
        rng = np.random.default_rng(0)
        X = rng.random((8, space.dim))
        settings = {"transfer_from": [hs.MetaTask("src", X, X[:, 0] ** 2)]}
    study = hs.create_study(f"batch-{method}", space, storage=None, method=method, **settings)
    for _ in range(4):
        trial = study.ask()
        study.tell(trial, trial.params["x"] ** 2)
    batch = study.ask(n=4)
    assert len(batch) == 4 and all(t.state == "running" for t in batch)
    assert len({json.dumps(t.params, sort_keys=True) for t in batch}) == 4
    for trial in batch:
        study.tell(trial, trial.params["x"] ** 2)
    with pytest.raises(hs.InvalidSettingError, match="batch size"):
        study.ask(n=0)


def test_trial_cache_reads_only_changes_and_misses_none():
    from headstart._trial_cache import TrialCache
    from headstart.storage import get_storage

    store = get_storage(None)
    study = hs.create_study("cache", _space(), storage=store, method="random", seed=0)
    trials = [study.ask() for _ in range(3)]
    study.tell(trials[0], 1.0)
    cache = TrialCache(store, study._id)
    finished, unfinished = cache.refresh()
    assert [r.number for r in finished] == [0] and [r.number for r in unfinished] == [1, 2]
    other = hs.load_study("cache", store)  # another worker finishes one and adds one
    other.tell(trials[2].number, 2.0)
    other.enqueue({"x": 0.5, "n": 3, "c": "a"})
    finished, unfinished = cache.refresh()
    assert [r.number for r in finished] == [0, 2] and [r.number for r in unfinished] == [1, 3]
    everything = sorted([*finished, *unfinished], key=lambda r: r.number)
    assert [(r.number, r.state) for r in everything] == [
        (r.number, r.state) for r in store.get_trials(study._id)
    ]
    assert len(cache.finished_keys) == 2


def _set_attrs(url: str, name: str, barrier, worker: int) -> None:
    study = hs.load_study(name, url)
    trial = study.trials[0]
    for i in range(ROUNDS):
        barrier.wait(timeout=120)
        study.set_user_attr(f"w{worker}-{i}", i)  # read-modify-write of one JSON column
        trial.set_user_attr(f"w{worker}-{i}", worker)


def test_overlapping_user_attribute_writes_lose_none(tmp_path):
    for url in _urls(tmp_path):
        name = f"attrs-{uuid.uuid4().hex[:8]}"
        study = hs.create_study(name, _space(), storage=url, method="random", seed=0)
        study.tell(study.ask(), 1.0)
        release_together(
            _set_attrs, lambda barrier, w, url=url, name=name: (url, name, barrier, w), N_WORKERS
        )
        loaded = hs.load_study(name, url)
        expected = {f"w{w}-{i}" for w in range(N_WORKERS) for i in range(ROUNDS)}
        assert set(loaded.user_attrs) == expected
        assert set(loaded.trials[0].user_attrs) >= expected
        hs.delete_study(name, url)
