"""Storage: schema, transactions, error paths and JSON round trips."""

from __future__ import annotations

import math
import sqlite3
import threading

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from headstart.exceptions import (
    DuplicatedStudyError,
    StorageError,
    StorageVersionError,
    TrialAlreadyFinishedError,
    UnknownStudyError,
    UnknownTrialError,
)
from headstart.storage import SCHEMA_VERSION, BaseStorage, Storage, TrialState, get_storage
from headstart.testing.storages import STORAGE_MODES
from helpers import fresh_url

SPACE = {"params": {"x": {"type": "float", "low": 0.0, "high": 1.0}}}


# every backend whose storage other connections (processes) share: the in-memory one is not
SHARED = [m for m in STORAGE_MODES if m != "sqlite-memory"]


def _modes(modes: list[str]) -> list:
    """``modes`` as fixture params; PostgreSQL ones on the worker of every PostgreSQL test."""
    group = [pytest.mark.xdist_group("postgres")]
    return [pytest.param(mode, marks=group if "postgres" in mode else []) for mode in modes]


@pytest.fixture(params=_modes(SHARED))
def url(request, tmp_path):
    """An empty storage of every backend (:mod:`headstart.testing.storages`): the tests that
    take ``url`` are one suite, run on SQLite and on PostgreSQL."""
    with fresh_url(request.param, tmp_path) as fresh:
        yield fresh


@pytest.fixture(params=_modes(STORAGE_MODES))
def one_url(request, tmp_path):
    """An empty storage of every backend, in-memory included, for tests that open it once."""
    with fresh_url(request.param, tmp_path) as fresh:
        yield fresh


def new_study(store: Storage, name: str = "s"):
    return store.create_study(name, direction="minimize", space=SPACE, settings={"seed": 1})


def test_memory_storages_are_independent():
    a, b = get_storage(None), get_storage("sqlite:///:memory:")
    new_study(a)
    assert [s.name for s in a.list_studies()] == ["s"]
    assert b.list_studies() == []


def test_file_storage_is_shared_and_reopened(url):
    assert get_storage(url) is get_storage(url)
    record = new_study(get_storage(url))
    fresh = Storage(url)  # a second engine, as another process would have
    assert fresh.get_study("s") == record
    assert fresh.get_study("s").space == SPACE and fresh.get_study("s").settings == {"seed": 1}


def test_duplicate_and_unknown_study_messages(one_url):
    store = get_storage(one_url)
    new_study(store, "a")
    with pytest.raises(DuplicatedStudyError, match="'a' already exists"):
        new_study(store, "a")
    with pytest.raises(UnknownStudyError, match=r"No study named 'b'.*'a'"):
        store.get_study("b")
    with pytest.raises(UnknownStudyError):
        store.delete_study("b")


def test_trial_life_cycle_and_numbers(one_url):
    store = get_storage(one_url)
    sid = new_study(store).study_id
    t0 = store.create_trial(sid, state=TrialState.RUNNING, params={"x": 0.25})
    t1 = store.create_trial(sid, state=TrialState.WAITING, params={"x": 0.5}, source="enqueue")
    assert (t0.number, t1.number) == (0, 1)
    assert t0.finished_at is None and t0.user_attrs == {}
    done = store.finish_trial(t0.trial_id, state=TrialState.COMPLETE, value=1.5)
    assert done.state is TrialState.COMPLETE and done.value == 1.5 and done.finished_at
    with pytest.raises(TrialAlreadyFinishedError, match="already complete"):
        store.finish_trial(t0.trial_id, state=TrialState.FAILED, value=None)
    assert store.get_trial(t0.trial_id).value == 1.5  # the refused write changed nothing
    with pytest.raises(UnknownTrialError):
        store.finish_trial(10_000, state=TrialState.COMPLETE, value=1.0)
    claimed = store.claim_waiting_trial(sid)
    assert claimed.trial_id == t1.trial_id and claimed.state is TrialState.RUNNING
    assert store.claim_waiting_trial(sid) is None
    assert [t.number for t in store.get_trials(sid, states=[TrialState.COMPLETE])] == [0]


def test_set_trial_params_refuses_duplicates_and_bad_trials(one_url):
    """The check-and-fill of a reserved trial: which other trials count as duplicates
    (``after_number``, unfinished ones, ``recheck_ids``; never another study's), and the errors
    for an unknown or finished trial, with nothing written."""
    store = get_storage(one_url)
    sid, other = new_study(store, "a").study_id, new_study(store, "b").study_id
    same = {"x": 0.5}
    old = store.create_trial(sid, state=TrialState.RUNNING, params=same)
    store.finish_trial(old.trial_id, state=TrialState.COMPLETE, value=1.0)  # number 0
    store.create_trial(other, state=TrialState.RUNNING, params={"x": 0.25})  # other study
    slot = store.create_trial(sid, state=TrialState.RUNNING, params={})  # number 1
    fill = store.set_trial_params
    assert not fill(slot.trial_id, same)  # after_number=-1: every trial is checked
    assert not fill(slot.trial_id, same, after_number=0, recheck_ids=[old.trial_id])
    assert store.get_trial(slot.trial_id).params == {}  # refused: nothing written
    # the caller compared the finished trials up to number 0 itself: not checked again
    assert fill(slot.trial_id, same, after_number=0, user_attrs={"k": 1})
    filled = store.get_trial(slot.trial_id)
    assert (filled.params, filled.user_attrs, filled.state) == (same, {"k": 1}, TrialState.RUNNING)
    other_slot = store.create_trial(other, state=TrialState.RUNNING, params={})
    assert fill(other_slot.trial_id, same)  # another study's trials never count
    queued = store.create_trial(sid, state=TrialState.WAITING, params={"x": 0.75})
    late = store.create_trial(sid, state=TrialState.RUNNING, params={})
    top = queued.number
    assert not fill(late.trial_id, {"x": 0.75}, after_number=top)  # unfinished: always checked
    assert fill(late.trial_id, {"x": 0.75}, after_number=top, unique=False)
    with pytest.raises(UnknownTrialError, match="does not exist"):
        fill(10_000, {"x": 0.1})
    store.finish_trial(late.trial_id, state=TrialState.FAILED, value=None)
    with pytest.raises(TrialAlreadyFinishedError, match="no longer running"):
        fill(late.trial_id, {"x": 0.9})
    assert store.get_trial(late.trial_id).params == {"x": 0.75}


def test_create_trials_is_one_transaction(one_url):
    store = get_storage(one_url)
    sid = new_study(store).study_id
    rows = [{"state": "complete", "params": {"x": 0.1}, "value": 2.0, "source": "import"}]
    rows.append({"state": "complete", "params": {"x": math.nan}, "value": 1.0})  # not JSON
    with pytest.raises(ValueError):
        store.create_trials(sid, rows)
    assert store.get_trials(sid) == []
    made = store.create_trials(sid, rows[:1] * 3)
    assert [t.number for t in made] == [0, 1, 2]


def test_list_and_delete(one_url):
    store = get_storage(one_url)
    sid = new_study(store, "lo").study_id
    hi = store.create_study("hi", direction="maximize", space=SPACE, settings={}).study_id
    for v in (3.0, 1.0, 2.0):
        for study_id in (sid, hi):
            t = store.create_trial(study_id, state=TrialState.RUNNING, params={"x": 0.1})
            store.finish_trial(t.trial_id, state=TrialState.COMPLETE, value=v)
    store.create_trial(sid, state=TrialState.RUNNING, params={"x": 0.2})
    summary = {s.name: s for s in store.list_studies()}
    assert (summary["lo"].n_trials, summary["lo"].n_complete, summary["lo"].best_value) == (
        4,
        3,
        1.0,
    )
    assert summary["hi"].best_value == 3.0
    store.delete_study("lo")
    assert [s.name for s in store.list_studies()] == ["hi"]
    assert store.get_trials(sid) == []


def test_threads_never_share_a_trial_number(url):
    sid = new_study(get_storage(url)).study_id
    stores = [Storage(url) for _ in range(4)]  # separate engines, like separate processes
    numbers: list[int] = []

    def work(store: Storage) -> None:
        for _ in range(15):
            numbers.append(store.create_trial(sid, state=TrialState.RUNNING, params={}).number)

    threads = [threading.Thread(target=work, args=(s,)) for s in stores]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(numbers) == list(range(60))


def test_bad_urls_raise_storage_error(tmp_path):
    for url in ("notadb://x", "headstart.db", "", "sqlite:////nonexistent/dir/x.db"):
        with pytest.raises(StorageError):
            get_storage(url)
    with pytest.raises(StorageError, match=r"not a storage URL.*sqlite:///headstart\.db"):
        get_storage("headstart.db")


def test_schema_version_mismatch_is_refused(tmp_path):
    path = tmp_path / "v.db"
    Storage(f"sqlite:///{path}")
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE headstart_version SET schema_version = ?", (SCHEMA_VERSION + 1,))
    with pytest.raises(StorageVersionError, match="schema version"):
        Storage(f"sqlite:///{path}")


def test_sqlite_file_uses_wal_and_stores_plain_json(tmp_path):
    path = tmp_path / "j.db"
    store = Storage(f"sqlite:///{path}")
    sid = new_study(store).study_id
    store.create_trial(sid, state=TrialState.RUNNING, params={"x": 0.5}, user_attrs={"a": 1})
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        text = conn.execute("SELECT params_json, user_attrs_json FROM trials").fetchone()
    assert text == ('{"x": 0.5}', '{"a": 1}')


json_scalars = (
    st.none()
    | st.booleans()
    | st.integers(-(2**53), 2**53)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=20)
)


@settings(max_examples=60, deadline=None)
@given(
    params=st.dictionaries(st.text(min_size=1, max_size=10), json_scalars, max_size=6),
    value=st.floats(allow_nan=False, allow_infinity=False),
)
def test_trial_round_trip_is_exact(params, value):
    store = get_storage(None)
    sid = new_study(store).study_id
    t = store.create_trial(sid, state=TrialState.RUNNING, params=params, user_attrs=params)
    done = store.finish_trial(t.trial_id, state=TrialState.COMPLETE, value=value)
    assert done.params == params and done.user_attrs == params
    assert done.value == value  # bit-exact, except that SQLite stores -0.0 as 0.0


# --- model cache and schema migration -------------------------------------------------------------
def test_model_cache_round_trip_survives_reopening(url):
    store = Storage(url)
    value = {"lengthscales": [0.5, 1e-300, 2.0], "weights": {"a": 0.25}, "note": "é", "n": None}
    assert store.get_cache("k") is None
    store.put_cache("k", "scaml-meta", value)
    assert store.get_cache("k") == value
    store.put_cache("k", "scaml-meta", {"v": 2})  # upsert
    store.put_cache("other", "rgpe", {"v": 3})
    reopened = Storage(url)  # a second engine, as another process would have
    assert reopened.get_cache("k") == {"v": 2} and reopened.get_cache("other") == {"v": 3}
    assert reopened.clear_cache(kind="rgpe") == 1
    assert reopened.get_cache("other") is None and store.get_cache("k") == {"v": 2}
    assert reopened.clear_cache() == 1 and store.get_cache("k") is None


def test_model_cache_refuses_what_is_not_json(one_url):
    store = get_storage(one_url)
    with pytest.raises(StorageError, match="not JSON"):
        store.put_cache("k", "x", {"bad": math.nan})
    with pytest.raises(StorageError, match="not JSON"):
        store.put_cache("k", "x", {"bad": object()})
    with pytest.raises(StorageError, match="must be a dict"):
        store.put_cache("k", "x", [1, 2])
    with pytest.raises(StorageError, match="key"):
        store.put_cache("", "x", {})
    assert store.get_cache("k") is None  # nothing half-written


# what each schema version added, dropped again to make an older storage (tests of migrations)
_ADDED = {
    2: ["DROP TABLE model_cache"],
    3: ["ALTER TABLE trials DROP COLUMN heartbeat_at"],
    4: ["ALTER TABLE studies DROP COLUMN user_attrs_json"],
    5: ["ALTER TABLE studies DROP COLUMN space_history_json"],
    6: [
        "ALTER TABLE trials DROP COLUMN values_json",
        "ALTER TABLE trials DROP COLUMN constraints_json",
    ],
}


def _downgrade(path, version: int) -> None:
    """Make the SQLite storage at ``path`` a version-``version`` one."""
    assert sorted(_ADDED) == list(range(2, SCHEMA_VERSION + 1))  # every version is listed
    with sqlite3.connect(path) as conn:
        for later in range(version + 1, SCHEMA_VERSION + 1):
            for statement in _ADDED[later]:
                conn.execute(statement)
        conn.execute("UPDATE headstart_version SET schema_version = ?", (version,))


def test_version_1_storage_is_migrated_on_open(tmp_path):
    path = tmp_path / "old.db"
    record = new_study(Storage(f"sqlite:///{path}"), "kept")
    _downgrade(path, 1)
    store = Storage(f"sqlite:///{path}")
    with sqlite3.connect(path) as conn:
        assert conn.execute("SELECT schema_version FROM headstart_version").fetchall() == [
            (SCHEMA_VERSION,)
        ]
    assert SCHEMA_VERSION == 6 and store.get_study("kept") == record
    store.put_cache("k", "x", {"ok": True})
    assert Storage(f"sqlite:///{path}").get_cache("k") == {"ok": True}


def test_version_2_storage_gains_heartbeats_on_open(tmp_path):
    path = tmp_path / "v2.db"
    record = new_study(Storage(f"sqlite:///{path}"), "kept")
    Storage(f"sqlite:///{path}").create_trial(record.study_id, state="complete", params={}, value=1)
    _downgrade(path, 2)
    store = Storage(f"sqlite:///{path}")
    (trial,) = store.get_trials(record.study_id)
    assert trial.value == 1 and trial.heartbeat_at is None  # completed trials kept as they were
    running = store.create_trial(record.study_id, state="running", params={}, heartbeat=True)
    assert running.heartbeat_at is not None and store.record_heartbeat(running.trial_id)


def test_bulk_reads_of_studies_and_trials(one_url):
    store = get_storage(one_url)
    a, b = new_study(store, "a"), new_study(store, "b")
    store.create_trials(a.study_id, [{"state": "complete", "params": {"x": 0.1}, "value": 1.0}] * 2)
    store.create_trial(a.study_id, state=TrialState.RUNNING, params={"x": 0.2})
    assert [s.name for s in store.get_studies()] == ["a", "b"]
    done = store.get_trials_of_studies([a.study_id, b.study_id], [TrialState.COMPLETE])
    assert [t.number for t in done[a.study_id]] == [0, 1] and done[b.study_id] == []
    assert len(store.get_trials_of_studies([a.study_id])[a.study_id]) == 3
    assert store.get_trials_of_studies([]) == {}


def _optuna_db(path) -> str:
    optuna = pytest.importorskip("optuna")
    url = f"sqlite:///{path}"
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = optuna.create_study(study_name="o", storage=url)
    study.optimize(lambda t: t.suggest_float("x", 0, 1), n_trials=2)
    return url


def _tables(path) -> list[str]:
    with sqlite3.connect(path) as conn:
        return sorted(
            r[0] for r in conn.execute("select name from sqlite_master where type='table'")
        )


def test_an_optuna_storage_is_refused_before_anything_is_written(tmp_path):
    from headstart.exceptions import ForeignStorageError

    path = tmp_path / "optuna.db"
    url = _optuna_db(path)
    before = _tables(path)
    for create in (True, False):
        with pytest.raises(ForeignStorageError, match=r"Optuna storage.*nothing was written"):
            Storage(url, create=create)
    assert _tables(path) == before  # no headstart_version, no model_cache


def test_another_applications_studies_table_is_refused(tmp_path):
    from headstart.exceptions import ForeignStorageError

    path = tmp_path / "other.db"
    with sqlite3.connect(path) as conn:
        conn.execute("create table studies (id integer primary key, title text)")
    with pytest.raises(ForeignStorageError, match=r"\['studies'\] that headstart did not create"):
        Storage(f"sqlite:///{path}")
    assert _tables(path) == ["studies"]


def test_unrelated_tables_may_share_the_database(tmp_path):
    path = tmp_path / "shared.db"
    with sqlite3.connect(path) as conn:
        conn.execute("create table invoices (id integer primary key)")
    new_study(Storage(f"sqlite:///{path}"))
    assert "invoices" in _tables(path) and "headstart_version" in _tables(path)


def test_reading_a_missing_database_creates_nothing(tmp_path):
    from headstart.exceptions import StorageNotFoundError

    path = tmp_path / "typo.db"
    with pytest.raises(StorageNotFoundError, match="no file"):
        get_storage(f"sqlite:///{path}", create=False)
    assert not path.exists()
    sqlite3.connect(path).close()  # an empty file: not a headstart storage either
    with pytest.raises(StorageNotFoundError, match="holds no headstart storage"):
        get_storage(f"sqlite:///{path}", create=False)
    assert _tables(path) == []


def test_version_3_storage_gains_study_attributes_on_open(tmp_path):
    path = tmp_path / "v3.db"
    record = new_study(Storage(f"sqlite:///{path}"), "kept")
    _downgrade(path, 3)
    store = Storage(f"sqlite:///{path}")
    assert store.get_study("kept").user_attrs == {}
    store.set_user_attr("dataset", "iris", study_id=record.study_id)
    assert Storage(f"sqlite:///{path}").get_study("kept").user_attrs == {"dataset": "iris"}


def test_user_attributes_are_json_and_refused_otherwise():
    store = get_storage(None)
    record = new_study(store)
    trial = store.create_trial(record.study_id, state="running", params={"x": 0.5})
    store.set_user_attr("k", [1, {"a": 2}], trial_id=trial.trial_id)
    with pytest.raises(StorageError, match="must be JSON"):
        store.set_user_attr("bad", math.nan, trial_id=trial.trial_id)
    with pytest.raises(StorageError, match="key"):
        store.set_user_attr(3, 1, trial_id=trial.trial_id)
    with pytest.raises(UnknownTrialError):
        store.set_user_attr("k", 1, trial_id=10**6)
    assert store.get_trial(trial.trial_id).user_attrs == {"k": [1, {"a": 2}]}


def test_version_4_storage_gains_space_history_on_open(tmp_path):
    path = tmp_path / "v4.db"
    new_study(Storage(f"sqlite:///{path}"), "kept")
    _downgrade(path, 4)
    store = Storage(f"sqlite:///{path}")
    record = store.get_study("kept")
    assert record.space_history == []
    wider = {**record.space, "widened": True}
    store.widen_study_space(record.study_id, wider)
    again = Storage(f"sqlite:///{path}").get_study("kept")
    assert again.space == wider and [h["space"] for h in again.space_history] == [record.space]


def test_the_sql_storage_implements_the_interface():
    """Every method of the BaseStorage protocol, with the protocol's parameters."""
    import inspect

    store = get_storage(None)
    assert isinstance(store, BaseStorage)
    for name, member in inspect.getmembers(BaseStorage):
        if name.startswith("_") or not callable(member):
            continue
        mine = inspect.signature(getattr(Storage, name))
        assert list(mine.parameters) == list(inspect.signature(member).parameters), name


def test_a_study_round_trips_through_every_backend(url):
    import headstart as hs

    space = hs.SearchSpace({"x": hs.Float(-1.0, 1.0), "c": hs.Categorical(["a", "b"])})
    study = hs.create_study("rt", space, storage=url, method="random", seed=0)
    study.optimize(lambda p: p["x"] ** 2 + (p["c"] == "b"), 5, show_progress=False)
    again = hs.load_study("rt", Storage(url))  # another engine, as another process
    assert [t.value for t in again.trials] == [t.value for t in study.trials]
    with pytest.raises(TrialAlreadyFinishedError):
        again.tell(again.trials[0].number, 1.0)
    with pytest.raises(DuplicatedStudyError):
        hs.create_study("rt", hs.SearchSpace({"y": hs.Float(0, 1)}), storage=url)
    hs.delete_study("rt", url)
    assert Storage(url).list_studies() == []


def test_version_5_storage_gains_values_and_constraints_on_open(tmp_path):
    path = tmp_path / "v5.db"
    record = new_study(Storage(f"sqlite:///{path}"), "kept")
    Storage(f"sqlite:///{path}").create_trial(record.study_id, state="complete", params={}, value=1)
    _downgrade(path, 5)
    store = Storage(f"sqlite:///{path}")
    (old,) = store.get_trials(record.study_id)
    assert old.value == 1 and old.values is None and old.constraints is None
    trial = store.create_trial(record.study_id, state="running", params={"x": 0.5})
    done = store.finish_trial(
        trial.trial_id, state="complete", value=2.0, values=(2.0, -1.5), constraints=(0.0, 3.0)
    )
    assert done.values == (2.0, -1.5) and done.constraints == (0.0, 3.0)
    again = Storage(f"sqlite:///{path}").get_trial(trial.trial_id)
    assert again.values == (2.0, -1.5) and again.constraints == (0.0, 3.0)


def _chained_rollback_error():
    """What surfaced in CI when PostgreSQL restarted mid-query: the socket closed, the rollback
    SQLAlchemy then ran on that connection failed with a state error of its own (raised while
    handling the first), and SQLAlchemy wrapped that one."""
    from sqlalchemy.exc import OperationalError

    busy = "sending query failed: another command is already in progress"
    try:
        try:
            raise OperationalError("SELECT 1", {}, Exception("connection socket closed"))
        except OperationalError:
            try:
                raise RuntimeError(busy)  # the driver's error, its context the lost socket
            except RuntimeError as driver:
                raise OperationalError("ROLLBACK", {}, driver) from driver
    except OperationalError as error:
        return error


def test_a_rollback_error_raised_while_losing_the_connection_is_a_disconnect():
    from sqlalchemy.exc import OperationalError

    from headstart.storage._connection import _is_disconnect

    assert _is_disconnect(_chained_rollback_error())
    assert not _is_disconnect(OperationalError("SELECT", {}, Exception("syntax error at or near")))
    assert _is_disconnect(OperationalError("SELECT", {}, Exception("connection socket closed")))


@pytest.mark.parametrize(
    "message",
    [
        "server closed the connection unexpectedly",
        "connection socket closed",
        "could not receive data from server: Connection reset by peer",
        "could not send data to server: Broken pipe",
        "no connection to the server",
        "SSL connection has been closed unexpectedly",
        "the connection is lost",
        "FATAL: the database system is starting up",
    ],
)
def test_libpq_messages_of_a_lost_connection_are_disconnects(message):
    from sqlalchemy.exc import OperationalError

    from headstart.storage._connection import _is_disconnect

    assert _is_disconnect(OperationalError("SELECT 1", {}, Exception(message)))


def test_retrying_rides_out_the_chained_rollback_error(monkeypatch):
    monkeypatch.setenv("HEADSTART_STORAGE_RETRY_SECONDS", "5")
    storage = get_storage(None)
    calls = []

    def flaky():
        calls.append(1)
        if len(calls) == 1:
            raise _chained_rollback_error()
        return "read"

    assert storage._retrying(flaky, "Reading from") == "read"
    assert len(calls) == 2
