r"""Relational storage on SQLAlchemy: SQLite by default, any SQLAlchemy URL (e.g. PostgreSQL).

Guarantees:

* **Every write is one transaction.** A trial is either fully recorded or not at all; a crash,
  ``kill -9`` included, loses at most the trial in flight. SQLite runs in WAL mode with
  ``synchronous=FULL`` so a committed trial survives a power cut as well.
* **No duplicate trial numbers across processes.** On SQLite every write transaction starts with
  ``BEGIN IMMEDIATE``, which takes the database's write lock before the next number is read; on
  other backends the ``(study_id, number)`` unique constraint rejects a race and the write is
  retried.
* **Nothing is unpickled.** Spaces, settings, parameters and attributes are JSON text.
"""

from __future__ import annotations

import atexit
import contextlib
import itertools
import json
import math
import os
import random
import threading
import time
import weakref
from collections.abc import Callable, Iterable, Sequence
from datetime import UTC, datetime
from types import SimpleNamespace
from typing import Any, TypeVar

from sqlalchemy import Connection, Engine, create_engine, event, func, inspect, select
from sqlalchemy.exc import DBAPIError, IntegrityError, OperationalError, SQLAlchemyError
from sqlalchemy.pool import StaticPool

from headstart._cached import drop
from headstart._display import mask_url, redact, remember_url
from headstart.exceptions import (
    DuplicatedStudyError,
    ForeignStorageError,
    StorageError,
    StorageNotFoundError,
    StorageVersionError,
    TrialAlreadyFinishedError,
    UnknownStudyError,
    UnknownTrialError,
)
from headstart.storage.records import StudyRecord, StudySummary, TrialRecord, TrialState
from headstart.storage.schema import (
    MIGRATIONS,
    SCHEMA_VERSION,
    metadata,
    model_cache_table,
    studies_table,
    trials_table,
    version_table,
)

T = TypeVar("T")
MEMORY_URL = "sqlite:///:memory:"
_WRITE_RETRIES = 20
_SCHEMA_LOCK_KEY = 0x48535452  # pg_advisory_xact_lock key of schema creation ('HSTR')


def _now() -> str:
    return datetime.now(UTC).isoformat()


def _db_now(conn: Connection) -> str:
    """The database server's clock (UTC, ISO text), for heartbeats: workers' clocks may differ
    by seconds, the database's is one clock for all of them. SQLite runs in this process, on
    this machine's clock (read by SQLite, not by Python)."""
    if conn.dialect.name == "postgresql":
        stamp = conn.exec_driver_sql("SELECT clock_timestamp()").scalar()
        return stamp.astimezone(UTC).isoformat()
    text = conn.exec_driver_sql("SELECT strftime('%Y-%m-%dT%H:%M:%f', 'now')").scalar()
    return datetime.fromisoformat(text).replace(tzinfo=UTC).isoformat()


def _time(text: str | None) -> datetime | None:
    return None if text is None else datetime.fromisoformat(text)


def _dumps(obj: Any) -> str:
    return json.dumps(obj, allow_nan=False, sort_keys=False)


mask_password = mask_url  # the name callers know: the URL with its password as ***


def _scrub(text: str, url: str) -> str:
    """``text`` without the password of ``url`` (driver messages may quote the DSN)."""
    remember_url(url)
    return redact(text)


_TRANSIENT = (  # a server restarting, failing over or briefly unreachable: retry after a wait
    "server closed the connection",
    "adminshutdown",
    "terminating connection",
    "connection refused",
    "could not connect",
    "connection is closed",
    "the database system is starting up",
    "the database system is shutting down",
    "the database system is in recovery mode",
    "the database system is not yet accepting connections",
    "cannot connect now",
    "connection timed out",
    "connection reset by peer",
    "ssl syscall error",
    "consuming input failed",
    "server conn crashed",
)


def _is_disconnect(error: Exception) -> bool:
    """Whether ``error`` is a lost, refused or not-yet-accepted connection (worth a retry after a
    short wait): a server restarting says "starting up" / "shutting down", then refuses."""
    if getattr(error, "connection_invalidated", False):
        return True
    text = str(error).lower()
    return any(key in text for key in _TRANSIENT)


def _retry_seconds() -> float:
    """How long a call keeps retrying a lost connection before it gives up (default 30 s;
    ``HEADSTART_STORAGE_RETRY_SECONDS`` overrides): longer than a server restart or fail-over
    takes, short enough that a wrong URL is reported the same minute."""
    try:
        seconds = float(os.environ.get("HEADSTART_STORAGE_RETRY_SECONDS", 30.0))
    except ValueError:
        return 30.0
    return min(max(0.0, seconds), 86400.0) if math.isfinite(seconds) else 30.0


def _backoff(attempt: int, cap: float) -> float:
    """Exponential back-off with jitter: 0.05 s, 0.1 s ... up to ``cap`` (workers that lost the
    server together do not all knock again at the same instant)."""
    return min(0.05 * 2 ** min(attempt, 16), cap) * (0.5 + random.random() / 2)


def _make_engine(url: str, engine_kwargs: dict[str, Any] | None = None) -> Engine:
    """An engine for ``url``; SQLite gets WAL, FULL sync, a busy timeout and BEGIN IMMEDIATE;
    server databases check each pooled connection before use (``pool_pre_ping``), so a restarted
    server costs a reconnect instead of an error. ``engine_kwargs`` go to ``create_engine`` last.
    """
    is_sqlite = url.startswith("sqlite")
    memory = url in ("sqlite://", MEMORY_URL)
    kwargs: dict[str, Any] = {}
    if memory:
        kwargs = {"poolclass": StaticPool, "connect_args": {"check_same_thread": False}}
    elif is_sqlite:
        kwargs = {"connect_args": {"timeout": 60.0, "check_same_thread": False}}
    else:
        kwargs = {"pool_pre_ping": True}
    engine = create_engine(url, **{**kwargs, **(engine_kwargs or {})})
    if is_sqlite:

        @event.listens_for(engine, "connect")
        def _on_connect(dbapi_conn, _record):  # pragma: no cover - exercised through every test
            dbapi_conn.isolation_level = None  # we issue BEGIN ourselves (below)
            cursor = dbapi_conn.cursor()
            if not memory:
                cursor.execute("PRAGMA journal_mode=WAL")
                cursor.execute("PRAGMA synchronous=FULL")
            cursor.execute("PRAGMA foreign_keys=ON")
            cursor.execute("PRAGMA busy_timeout=60000")
            cursor.close()

        @event.listens_for(engine, "begin")
        def _on_begin(conn):
            mode = conn.get_execution_options().get("headstart_begin", "DEFERRED")
            conn.exec_driver_sql(f"BEGIN {mode}")

    return engine


_OWN_TABLES = frozenset(table.name for table in metadata.sorted_tables)
_OPTUNA_TABLES = frozenset({"version_info", "study_directions", "trial_values", "trial_params"})


def _sqlite_file(url: str) -> str | None:
    """The file of a ``sqlite:///path`` URL (``None`` for in-memory and non-SQLite URLs)."""
    if not url.startswith("sqlite") or url in ("sqlite://", MEMORY_URL):
        return None
    from sqlalchemy.engine import make_url

    database = make_url(url).database
    return None if not database or database == ":memory:" else database


def _check_not_foreign(conn: Connection, url: str) -> None:
    """Refuse a database whose ``studies`` / ``trials`` tables belong to another application.

    A headstart storage always has ``headstart_version`` (tables are created with it in one
    transaction); tables of ours without it are someone else's, and writing would corrupt them.
    """
    names = set(inspect(conn).get_table_names())
    if version_table.name in names:
        return
    clash = sorted(names & _OWN_TABLES)
    if not clash:
        return
    if names >= _OPTUNA_TABLES:
        raise ForeignStorageError(
            f"{url!r} is an Optuna storage, not a headstart one; nothing was written to it. "
            "Use Optuna's studies as sources with transfer_from=hs.sources.from_optuna(URL), "
            "copy them with `headstart import optuna --from URL`, or optimize them in Optuna "
            "with headstart.integrations.optuna.HeadstartSampler."
        )
    raise ForeignStorageError(
        f"{url!r} already has table(s) {clash} that headstart did not create; nothing was "
        "written. Point headstart at its own database (e.g. sqlite:///headstart.db) or schema."
    )


def _upsert_cache(conn: Connection, row: dict[str, Any]) -> None:
    """Insert or replace one ``model_cache`` row; atomic under concurrent writers on PG/SQLite."""
    c = model_cache_table.c
    dialect = conn.dialect.name
    if dialect in ("postgresql", "sqlite"):
        if dialect == "postgresql":
            from sqlalchemy.dialects.postgresql import insert
        else:
            from sqlalchemy.dialects.sqlite import insert
        stmt = insert(model_cache_table).values(**row)
        update = {k: stmt.excluded[k] for k in ("kind", "value_json", "created_at")}
        conn.execute(stmt.on_conflict_do_update(index_elements=[c.key], set_=update))
        return
    conn.execute(model_cache_table.delete().where(c.key == row["key"]))
    conn.execute(model_cache_table.insert().values(**row))


_OPEN_FILES: weakref.WeakSet[Storage] = weakref.WeakSet()  # SQLite-file storages to close at exit


@atexit.register
def _close_at_exit() -> None:
    """Fold every open SQLite storage's write-ahead log into its ``.db`` file (:meth:`close`)."""
    for storage in list(_OPEN_FILES):
        storage.close()


class Storage:
    """Studies and trials in a SQL database. Use :func:`get_storage` to open one.

    A SQLite file runs in WAL mode: commits go to ``<file>-wal`` and reach the ``.db`` file at
    checkpoints. :meth:`close` (also run at interpreter exit) checkpoints, so once the last
    process has closed the storage, the ``.db`` file alone holds everything and can be copied.

    Args:
        url: A SQLAlchemy URL, e.g. ``sqlite:///headstart.db`` or
            ``postgresql+psycopg://user:pw@host/db``; ``sqlite:///:memory:`` for a throw-away store.
        engine_kwargs: Extra ``sqlalchemy.create_engine`` options (pool size, timeouts...).
    """

    def __init__(
        self, url: str, *, engine_kwargs: dict[str, Any] | None = None, create: bool = True
    ) -> None:
        self._raw_url = url
        self.url = mask_password(url)
        """The URL with its password masked: what messages, ``repr`` and the CLI show."""
        if isinstance(url, str) and url.split("?", 1)[0] in ("sqlite:///", "sqlite+pysqlite:///"):
            raise StorageError(
                f"{url!r} names no file (SQLAlchemy would open a throw-away in-memory database "
                "and lose every study at exit). Give a path, e.g. sqlite:///headstart.db, or "
                "pass storage=None for an in-memory study on purpose."
            )
        path = _sqlite_file(url)
        if not create and path is not None and not os.path.exists(path):
            raise StorageNotFoundError(
                f"There is no database at {self.url!r} (no file {path!r}); nothing was created. "
                "Check the path, or create a study there first."
            )
        try:
            self._engine = _make_engine(url, engine_kwargs)
            self._writer = self._engine.execution_options(headstart_begin="IMMEDIATE")
            # An in-memory database is one shared connection: transactions from several threads
            # (heartbeats) must not interleave on it, so they take turns.
            memory = url in (MEMORY_URL, "sqlite://")
            self._turn = threading.RLock() if memory else contextlib.nullcontext()
            self._retrying(lambda: self._init_schema(create), "Opening")
            self._pid = os.getpid()
            if path is not None:
                _OPEN_FILES.add(self)
        except StorageError:
            raise
        except ModuleNotFoundError as e:
            raise StorageError(
                f"Cannot open storage {self.url!r}: its database driver is not installed ({e}). "
                "Install the driver (e.g. `pip install psycopg` for PostgreSQL) or use a "
                "sqlite:/// URL."
            ) from e
        except (SQLAlchemyError, OSError, ValueError) as e:
            raise StorageError(
                f"Cannot open storage {self.url!r}: {e.__class__.__name__}: "
                f"{_scrub(str(e), url)}. Use a SQLAlchemy URL "
                "such as sqlite:///headstart.db (the directory must exist and be writable)."
            ) from e

    @property
    def in_memory(self) -> bool:
        """Whether this is a throw-away in-memory storage (``storage=None``)."""
        return self._raw_url in (MEMORY_URL, "sqlite://")

    def describe(self) -> str:
        """Where the studies are, for messages: the masked URL, or "an in-memory storage"."""
        return "an in-memory storage (storage=None)" if self.in_memory else self.url

    def close(self) -> None:
        """Close the storage's connections; on a SQLite file, first copy the write-ahead log into
        the ``.db`` file and empty it (``PRAGMA wal_checkpoint(TRUNCATE)``).

        Run at interpreter exit for every open SQLite storage. The storage stays usable: the next
        read or write opens a new connection. Best effort: a checkpoint that another process's
        open read blocks is left to SQLite's next one (nothing is lost either way: committed
        trials are in the log until then).
        """
        if os.getpid() != self._pid:  # a forked child: the connections are the parent's
            self._engine.dispose(close=False)
            return
        if _sqlite_file(self._raw_url) is not None:
            with contextlib.suppress(Exception):
                raw = self._engine.raw_connection()
                try:
                    raw.cursor().execute("PRAGMA wal_checkpoint(TRUNCATE)")
                finally:
                    raw.close()
        self._engine.dispose()

    def _scrub(self, error: Exception) -> str:
        return _scrub(str(error), self._raw_url)

    def __repr__(self) -> str:
        return f"Storage({self.url!r})"

    # --- plumbing --------------------------------------------------------------------------------
    def _init_schema(self, create: bool = True) -> None:
        """Create the tables of a new storage, or migrate an older one, in one transaction.

        A database whose ``studies`` or ``trials`` tables are another application's (an Optuna
        storage) is refused before anything is written (:class:`ForeignStorageError`); with
        ``create=False`` a database without headstart's tables is refused too.

        A storage already at :data:`SCHEMA_VERSION` is only *read* (opening it never takes
        SQLite's write lock, so it does not wait behind a busy writer). On PostgreSQL a
        transaction-level advisory lock serializes the creation, so many processes opening a
        fresh database at once do not race on ``CREATE TABLE``.
        """

        def current(conn: Connection) -> bool:
            if not inspect(conn).has_table(version_table.name):
                return False
            found = conn.execute(select(version_table.c.schema_version)).scalars().all()
            return found == [SCHEMA_VERSION]

        with self._turn, self._engine.connect() as conn:
            if current(conn):
                return
            _check_not_foreign(conn, self.url)
            if not create and not inspect(conn).has_table(version_table.name):
                raise StorageNotFoundError(
                    f"{self.url!r} holds no headstart storage; nothing was created. Check the "
                    "URL, or create a study there first."
                )

        def init(conn: Connection) -> None:
            if conn.dialect.name == "postgresql":
                conn.exec_driver_sql(f"SELECT pg_advisory_xact_lock({_SCHEMA_LOCK_KEY})")
            _check_not_foreign(conn, self.url)  # again, under the lock
            version_table.create(conn, checkfirst=True)
            # FOR UPDATE: a second process opening an old PostgreSQL storage waits for the first
            # one's migration instead of running it twice (SQLite's BEGIN IMMEDIATE does the same).
            found = (
                conn.execute(select(version_table.c.schema_version).with_for_update())
                .scalars()
                .all()
            )
            if not found:
                metadata.create_all(conn)
                conn.execute(version_table.insert().values(schema_version=SCHEMA_VERSION))
                return
            if len(found) == 1 and found[0] in MIGRATIONS:
                for version in range(found[0], SCHEMA_VERSION):
                    MIGRATIONS[version](conn)
                conn.execute(version_table.update().values(schema_version=SCHEMA_VERSION))
            elif found != [SCHEMA_VERSION]:
                raise StorageVersionError(
                    f"Storage {self.url!r} has schema version {found}, but this headstart reads "
                    f"versions up to {SCHEMA_VERSION}. Use the headstart version that wrote it, or "
                    "export its studies (headstart studies export) and re-import them."
                )

        self._write(init)

    def _retrying(self, call: Callable[[], T], what: str) -> T:
        """``call()``, retried with back-off while the server is unreachable (restarting, failing
        over), for up to :func:`_retry_seconds`; then a :class:`StorageError` that says so."""
        deadline = time.monotonic() + _retry_seconds()
        for attempt in itertools.count():
            try:
                return call()
            except DBAPIError as e:
                if not _is_disconnect(e):
                    raise
                if time.monotonic() >= deadline:
                    raise StorageError(
                        f"{what} {self.url!r} failed: the server stayed unreachable for "
                        f"{_retry_seconds():g} s ({self._scrub(e)}). Check that it is up and the "
                        "URL is right (HEADSTART_STORAGE_RETRY_SECONDS sets how long to retry)."
                    ) from e
                time.sleep(_backoff(attempt, 2.0))
        raise AssertionError("unreachable")  # pragma: no cover

    def _write(self, fn: Callable[[Connection], T]) -> T:
        """Run ``fn`` in one write transaction; retry on lock time-outs, number races and lost
        connections (:meth:`_retrying`)."""

        def attempt_write() -> T:
            last: Exception | None = None
            for attempt in range(_WRITE_RETRIES):
                try:
                    with self._turn, self._writer.begin() as conn:
                        return fn(conn)
                except IntegrityError as e:
                    if "uq_trial_number" not in str(e) and "trials.number" not in str(e):
                        raise
                    last = e
                except OperationalError as e:
                    if _is_disconnect(e):
                        raise  # _retrying waits for the server
                    if "locked" not in str(e) and "busy" not in str(e):
                        raise StorageError(
                            f"Writing to {self.url!r} failed: {self._scrub(e)}"
                        ) from e
                    last = e
                time.sleep(min(0.01 * 2**attempt, 1.0))
            raise StorageError(
                f"Storage {self.url!r} stayed busy through {_WRITE_RETRIES} attempts "
                f"({self._scrub(last)}). Too many writers on one SQLite file: use fewer processes "
                "or a PostgreSQL URL."
            )

        try:
            return self._retrying(attempt_write, "Writing to")
        except IntegrityError:  # a constraint: the caller says what it means (duplicate name...)
            raise
        except DBAPIError as e:
            raise StorageError(f"Writing to {self.url!r} failed: {self._scrub(e)}") from e

    def _read(self, fn: Callable[[Connection], T]) -> T:
        def attempt_read() -> T:
            with self._turn, self._engine.begin() as conn:
                return fn(conn)

        try:
            return self._retrying(attempt_read, "Reading from")
        except SQLAlchemyError as e:
            raise StorageError(f"Reading from {self.url!r} failed: {self._scrub(e)}") from e

    @staticmethod
    def _study(row: Any) -> StudyRecord:
        return StudyRecord(
            study_id=row.study_id,
            name=row.name,
            direction=row.direction,
            space=json.loads(row.space_json),
            settings=json.loads(row.settings_json),
            created_at=_time(row.created_at),
            user_attrs=json.loads(getattr(row, "user_attrs_json", None) or "{}"),
            space_history=json.loads(getattr(row, "space_history_json", None) or "[]"),
        )

    @staticmethod
    def _trial(row: Any) -> TrialRecord:
        return TrialRecord(
            trial_id=row.trial_id,
            study_id=row.study_id,
            number=row.number,
            state=TrialState(row.state),
            params=json.loads(row.params_json),
            value=row.value,
            source=row.source,
            created_at=_time(row.created_at),
            finished_at=_time(row.finished_at),
            user_attrs=json.loads(row.user_attrs_json),
            heartbeat_at=_time(getattr(row, "heartbeat_at", None)),
        )

    def _names(self, conn: Connection) -> list[str]:
        return list(conn.execute(select(studies_table.c.name)).scalars())

    # --- studies ---------------------------------------------------------------------------------
    def create_study(
        self, name: str, *, direction: str, space: dict, settings: dict
    ) -> StudyRecord:
        """Create a study; :class:`DuplicatedStudyError` if the name is taken."""
        space_json, settings_json = _dumps(space), _dumps(settings)

        def create(conn: Connection) -> int:
            exists = conn.execute(
                select(studies_table.c.study_id).where(studies_table.c.name == name)
            ).first()
            if exists is not None:
                raise DuplicatedStudyError(f"A study named {name!r} already exists in {self.url}.")
            result = conn.execute(
                studies_table.insert().values(
                    name=name,
                    direction=direction,
                    space_json=space_json,
                    settings_json=settings_json,
                    created_at=_now(),
                )
            )
            return int(result.inserted_primary_key[0])

        try:
            study_id = self._write(create)
        except IntegrityError as e:  # another process created it between our check and insert
            raise DuplicatedStudyError(
                f"A study named {name!r} already exists in {self.url}."
            ) from e
        return self.get_study_by_id(study_id)

    def get_study(self, name: str) -> StudyRecord:
        """The study called ``name``; :class:`UnknownStudyError` (listing the names) otherwise."""

        def get(conn: Connection) -> StudyRecord:
            row = conn.execute(select(studies_table).where(studies_table.c.name == name)).first()
            if row is None:
                names = self._names(conn)
                known = ", ".join(repr(n) for n in names[:20]) or "none"
                raise UnknownStudyError(
                    f"No study named {name!r} in {self.url}. Studies there: {known}. "
                    "Check the name and --storage, or create the study first."
                )
            return self._study(row)

        return self._read(get)

    def widen_study_space(self, study_id: int, space: dict[str, Any]) -> StudyRecord:
        """Replace a study's search space by ``space`` (the caller checked that it only widens
        the stored one), keeping the old one in ``space_history``; one transaction. A study
        already at ``space`` (another process widened it just now) is left as it is."""
        s = studies_table.c

        def widen(conn: Connection) -> None:
            query = select(s.space_json, s.space_history_json).where(s.study_id == study_id)
            if conn.dialect.name != "sqlite":
                query = query.with_for_update()
            row = conn.execute(query).first()
            if row is None:
                raise UnknownStudyError(f"Study id {study_id} is not in {self.url}.")
            if json.loads(row.space_json) == space:
                return
            history = json.loads(row.space_history_json or "[]")
            history.append({"space": json.loads(row.space_json), "replaced_at": _now()})
            conn.execute(
                studies_table.update()
                .where(s.study_id == study_id)
                .values(space_json=_dumps(space), space_history_json=_dumps(history))
            )

        self._write(widen)
        return self.get_study_by_id(study_id)

    def get_study_by_id(self, study_id: int) -> StudyRecord:
        missing = UnknownStudyError(f"Study id {study_id} is not in {self.url}.")
        return self._study(self._row_by_id(studies_table.c.study_id, study_id, missing))

    def _row_by_id(self, column: Any, value: int, missing: Exception) -> Any:
        """The row of ``column``'s table whose ``column`` is ``value`` (one read); raises
        ``missing`` if there is none."""
        row = self._read(
            lambda conn: conn.execute(select(column.table).where(column == value)).first()
        )
        if row is None:
            raise missing
        return row

    def list_studies(self) -> list[StudySummary]:
        """A summary of every study, oldest first."""
        t, s = trials_table.c, studies_table.c

        def summaries(conn: Connection) -> list[StudySummary]:
            counts = {
                row.study_id: row
                for row in conn.execute(
                    select(
                        t.study_id,
                        func.count().label("n"),
                        func.count(t.value).label("n_complete"),
                        func.min(t.value).label("lo"),
                        func.max(t.value).label("hi"),
                    ).group_by(t.study_id)
                )
            }
            out = []
            for row in conn.execute(select(studies_table).order_by(s.study_id)):
                c = counts.get(row.study_id)
                best = None
                if c is not None and c.n_complete:
                    best = c.lo if row.direction == "minimize" else c.hi
                out.append(
                    StudySummary(
                        name=row.name,
                        direction=row.direction,
                        n_trials=0 if c is None else int(c.n),
                        n_complete=0 if c is None else int(c.n_complete),
                        best_value=best,
                        created_at=_time(row.created_at),
                    )
                )
            return out

        return self._read(summaries)

    def get_studies(self) -> list[StudyRecord]:
        """Every stored study (space and settings included), oldest first, in one query."""
        query = select(studies_table).order_by(studies_table.c.study_id)
        return self._read(lambda conn: [self._study(r) for r in conn.execute(query)])

    def set_user_attr(
        self, key: str, value: Any, *, study_id: int | None = None, trial_id: int | None = None
    ) -> None:
        """Set one user attribute of a study or a trial (read, update, write: one transaction).

        Raises:
            StorageError: ``value`` is not JSON (NaN, objects ...) or ``key`` is not a string.
        """
        if not isinstance(key, str) or not key:
            raise StorageError(f"A user attribute's key must be a non-empty string; got {key!r}.")
        try:
            _dumps(value)
        except (TypeError, ValueError) as e:
            raise StorageError(
                f"User attribute {key!r} must be JSON (numbers, strings, lists, dicts); "
                f"{value!r} is not ({e})."
            ) from e
        table, column, row_id = (
            (trials_table, trials_table.c.trial_id, trial_id)
            if trial_id is not None
            else (studies_table, studies_table.c.study_id, study_id)
        )

        def update(conn: Connection) -> None:
            found = conn.execute(
                select(table.c.user_attrs_json).where(column == row_id).with_for_update()
            ).first()
            if found is None:
                what = "trial" if trial_id is not None else "study"
                raise (UnknownTrialError if trial_id is not None else UnknownStudyError)(
                    f"No {what} with id {row_id} in {self.url!r}; it was deleted."
                )
            attrs = {**json.loads(found[0] or "{}"), key: value}
            conn.execute(
                table.update().where(column == row_id).values(user_attrs_json=_dumps(attrs))
            )

        self._write(update)

    def delete_study(self, name: str) -> None:
        """Delete a study and its trials in one transaction."""
        study_id = self.get_study(name).study_id

        def delete(conn: Connection) -> None:
            conn.execute(trials_table.delete().where(trials_table.c.study_id == study_id))
            conn.execute(studies_table.delete().where(studies_table.c.study_id == study_id))

        self._write(delete)

    # --- trials ----------------------------------------------------------------------------------
    @staticmethod
    def _next_number(conn: Connection, study_id: int) -> int:
        top = conn.execute(
            select(func.max(trials_table.c.number)).where(trials_table.c.study_id == study_id)
        ).scalar()
        return 0 if top is None else int(top) + 1

    def _insert_trials(
        self, conn: Connection, study_id: int, rows: Sequence[dict[str, Any]]
    ) -> list[TrialRecord]:
        number = self._next_number(conn, study_id)
        records = []
        for offset, r in enumerate(rows):
            state = TrialState(r["state"])
            now = _now()
            beat = _db_now(conn) if r.get("heartbeat") else None
            values = {
                "study_id": study_id,
                "number": number + offset,
                "state": state.value,
                "params_json": _dumps(r["params"]),
                "value": r.get("value"),
                "source": r.get("source", "ask"),
                "user_attrs_json": _dumps(r.get("user_attrs") or {}),
                "created_at": now,
                "finished_at": now if state.is_finished else None,
                "heartbeat_at": beat,
            }
            result = conn.execute(trials_table.insert().values(**values))
            trial_id = int(result.inserted_primary_key[0])
            records.append(self._trial(SimpleNamespace(trial_id=trial_id, **values)))
        return records

    def create_trial(
        self,
        study_id: int,
        *,
        state: TrialState,
        params: dict[str, Any],
        value: float | None = None,
        source: str = "ask",
        user_attrs: dict[str, Any] | None = None,
        heartbeat: bool = False,
    ) -> TrialRecord:
        """Create one trial with the study's next number (one transaction).

        ``heartbeat=True`` stamps its first heartbeat (a running trial of a study with
        heartbeats; see :meth:`record_heartbeat` and :meth:`fail_stale_trials`).
        """
        row = {
            "state": state,
            "params": params,
            "value": value,
            "source": source,
            "user_attrs": user_attrs,
            "heartbeat": heartbeat,
        }
        (record,) = self._write(lambda conn: self._insert_trials(conn, study_id, [row]))
        return record

    def create_trials(self, study_id: int, rows: Iterable[dict[str, Any]]) -> list[TrialRecord]:
        """Create several trials with consecutive numbers, all in one transaction."""
        rows = list(rows)
        return self._write(lambda conn: self._insert_trials(conn, study_id, rows))

    def set_trial_params(
        self,
        trial_id: int,
        params: dict[str, Any],
        *,
        user_attrs: dict[str, Any] | None = None,
        unique: bool = True,
        after_number: int = -1,
        recheck_ids: Sequence[int] = (),
    ) -> bool:
        """Fill in the configuration of a reserved (running, empty) trial, atomically.

        With ``unique``, the write is refused -- ``False`` is returned and nothing changes --
        when another trial of the study already has exactly these parameters: two workers whose
        suggestions coincided then never both evaluate it. The check and the write are one
        transaction, serialized per study (SQLite's write lock; a row lock on PostgreSQL).
        ``after_number`` limits the check to trials numbered above it, the trials in
        ``recheck_ids`` and unfinished ones: the caller has compared the other trials, finished
        when it last read them (they never change), itself.
        """
        t = trials_table.c
        params_json = _dumps(params)

        def update(conn: Connection) -> bool:
            study_id = conn.execute(select(t.study_id).where(t.trial_id == trial_id)).scalar()
            if study_id is None:
                raise UnknownTrialError(f"Trial id {trial_id} does not exist in {self.url}.")
            if conn.dialect.name != "sqlite":  # serialize check-and-write per study
                conn.execute(
                    select(studies_table.c.study_id)
                    .where(studies_table.c.study_id == study_id)
                    .with_for_update()
                )
            if unique:
                same = (
                    t.study_id == study_id,
                    t.trial_id != trial_id,
                    t.params_json == params_json,
                )
                unfinished = [TrialState.RUNNING.value, TrialState.WAITING.value]
                checks = [t.number > after_number, t.state.in_(unfinished)]  # all indexed
                if recheck_ids:
                    checks.append(t.trial_id.in_(list(recheck_ids)))
                for where in checks:
                    if conn.execute(select(t.trial_id).where(*same, where).limit(1)).first():
                        return False
            values = {"params_json": params_json}
            if user_attrs is not None:
                values["user_attrs_json"] = _dumps(user_attrs)
            updated = conn.execute(
                trials_table.update()
                .where(t.trial_id == trial_id, t.state == TrialState.RUNNING.value)
                .values(**values)
            )
            if updated.rowcount != 1:  # failed meanwhile, by another worker's stale-trial sweep
                raise TrialAlreadyFinishedError(
                    f"Trial id {trial_id} is no longer running: it cannot get a configuration."
                )
            return True

        return self._write(update)

    def record_heartbeat(self, trial_id: int) -> bool:
        """Stamp a running trial's heartbeat now; ``False`` when it is no longer running."""
        t = trials_table.c

        def beat(conn: Connection) -> bool:
            updated = conn.execute(
                trials_table.update()
                .where(t.trial_id == trial_id, t.state == TrialState.RUNNING.value)
                .values(heartbeat_at=_db_now(conn))
            )
            return updated.rowcount == 1

        return self._write(beat)

    def fail_stale_trials(
        self,
        study_id: int,
        grace_seconds: float,
        *,
        reenqueue: bool = False,
        silent: bool = False,
        reason: str = "heartbeat",
    ) -> list[TrialRecord]:
        """Fail the running trials whose heartbeat is older than ``grace_seconds`` (atomically).

        Their workers stopped (``kill -9``, a lost machine). Each is marked failed with
        ``user_attrs["fail_reason"] = reason``; with ``reenqueue`` its configuration is
        enqueued again once (``user_attrs["retry_of"]`` = its number), unless it was itself a
        retry. Ages are measured on the database's clock (:func:`_db_now`), so a worker whose
        clock is off neither fails live trials nor keeps dead ones. Trials without a heartbeat
        (studies without heartbeats) are only failed with ``silent=True``, by the age of their
        creation (``headstart studies fail-stale``).

        Returns:
            The trials that were failed.
        """
        t = trials_table.c

        def stale_rows(conn: Connection) -> list[Any]:
            cutoff = datetime.fromisoformat(_db_now(conn)).timestamp() - float(grace_seconds)
            rows = conn.execute(
                select(
                    t.trial_id,
                    t.heartbeat_at,
                    t.created_at,
                    t.params_json,
                    t.user_attrs_json,
                    t.number,
                ).where(
                    t.study_id == study_id,
                    t.state == TrialState.RUNNING.value,
                    *(() if silent else (t.heartbeat_at.is_not(None),)),
                )
            ).all()
            return [r for r in rows if _time(r.heartbeat_at or r.created_at).timestamp() < cutoff]

        if not self._read(stale_rows):  # the common case: a read, no write lock taken
            return []

        def sweep(conn: Connection) -> list[int]:
            stale = stale_rows(conn)  # again, under the write lock: another worker may be first
            failed, retries = [], []
            for r in stale:
                attrs = {**json.loads(r.user_attrs_json), "fail_reason": reason}
                updated = conn.execute(
                    trials_table.update()
                    .where(t.trial_id == r.trial_id, t.state == TrialState.RUNNING.value)
                    .values(
                        state=TrialState.FAILED.value,
                        finished_at=_now(),
                        user_attrs_json=_dumps(attrs),
                    )
                )
                if updated.rowcount != 1:
                    continue
                failed.append(r.trial_id)
                params = json.loads(r.params_json)
                if reenqueue and params and "retry_of" not in attrs:
                    retries.append(
                        {
                            "state": TrialState.WAITING,
                            "params": params,
                            "source": "enqueue",
                            "user_attrs": {"retry_of": r.number},
                        }
                    )
            if retries:
                self._insert_trials(conn, study_id, retries)
            return failed

        return [self.get_trial(trial_id) for trial_id in self._write(sweep)]

    def claim_waiting_trial(self, study_id: int, *, heartbeat: bool = False) -> TrialRecord | None:
        """Atomically move the oldest waiting (enqueued) trial to running and return it."""
        t = trials_table.c

        def claim(conn: Connection) -> int | None:
            trial_id = conn.execute(
                select(t.trial_id)
                .where(t.study_id == study_id, t.state == TrialState.WAITING.value)
                .order_by(t.number)
                .limit(1)
            ).scalar()
            if trial_id is None:
                return None
            updated = conn.execute(
                trials_table.update()
                .where(t.trial_id == trial_id, t.state == TrialState.WAITING.value)
                .values(
                    state=TrialState.RUNNING.value,
                    heartbeat_at=_db_now(conn) if heartbeat else None,
                )
            )
            return trial_id if updated.rowcount == 1 else None

        trial_id = self._write(claim)
        return None if trial_id is None else self.get_trial(trial_id)

    def finish_trial(
        self,
        trial_id: int,
        *,
        state: TrialState,
        value: float | None,
        user_attrs: dict[str, Any] | None = None,
    ) -> TrialRecord:
        """Mark a running (or waiting) trial complete or failed, atomically.

        ``user_attrs`` are merged into the trial's (for example a failed evaluation's traceback).

        Raises:
            UnknownTrialError: no such trial.
            TrialAlreadyFinishedError: the trial was already complete or failed.
        """
        state = TrialState(state)
        t = trials_table.c
        attempts = [0]

        def finish(conn: Connection) -> None:
            attempts[0] += 1
            values: dict[str, Any] = {"state": state.value, "value": value, "finished_at": _now()}
            if user_attrs:
                old = conn.execute(select(t.user_attrs_json).where(t.trial_id == trial_id)).scalar()
                values["user_attrs_json"] = _dumps({**json.loads(old or "{}"), **user_attrs})
            updated = conn.execute(
                trials_table.update()
                .where(
                    t.trial_id == trial_id,
                    t.state.in_([TrialState.RUNNING.value, TrialState.WAITING.value]),
                )
                .values(**values)
            )
            if updated.rowcount == 1:
                return
            row = conn.execute(
                select(t.number, t.state, t.value).where(t.trial_id == trial_id)
            ).first()
            if row is None:
                raise UnknownTrialError(f"Trial id {trial_id} does not exist in {self.url}.")
            if attempts[0] > 1 and row.state == state.value and row.value == value:
                return  # a retry after a lost connection: the first attempt had committed
            raise TrialAlreadyFinishedError(
                f"Trial {row.number} is already {row.state} (value {row.value}); each trial is "
                "told once. Ask a new trial to evaluate again."
            )

        self._write(finish)
        return self.get_trial(trial_id)

    def get_trial(self, trial_id: int) -> TrialRecord:
        missing = UnknownTrialError(f"Trial id {trial_id} does not exist in {self.url}.")
        return self._trial(self._row_by_id(trials_table.c.trial_id, trial_id, missing))

    def get_trials(
        self, study_id: int, states: Sequence[TrialState] | None = None
    ) -> list[TrialRecord]:
        """The study's trials ordered by number, optionally only those in ``states``."""
        query = select(trials_table).where(trials_table.c.study_id == study_id)
        if states is not None:
            query = query.where(trials_table.c.state.in_([TrialState(s).value for s in states]))
        query = query.order_by(trials_table.c.number)
        return self._read(lambda conn: [self._trial(r) for r in conn.execute(query)])

    def get_trials_changed(
        self, study_id: int, after_number: int, trial_ids: Sequence[int] = ()
    ) -> list[TrialRecord]:
        """Trials numbered above ``after_number``, plus those in ``trial_ids``, by number.

        A reader that keeps the finished trials it has seen asks only for what may have changed:
        new trials and the ones it saw unfinished. Numbers become visible in order (each is the
        committed maximum plus one), so nothing numbered below ``after_number`` appears later.
        """
        t = trials_table.c
        new = select(trials_table).where(t.study_id == study_id, t.number > after_number)
        known = select(trials_table).where(t.trial_id.in_(list(trial_ids)))  # primary key

        def read(conn: Connection) -> list[TrialRecord]:  # two indexed queries, one snapshot
            rows = {r.trial_id: r for r in conn.execute(known)} if trial_ids else {}
            rows.update({r.trial_id: r for r in conn.execute(new)})
            return sorted((self._trial(r) for r in rows.values()), key=lambda r: r.number)

        return self._read(read)

    def get_trials_of_studies(
        self, study_ids: Sequence[int], states: Sequence[TrialState] | None = None
    ) -> dict[int, list[TrialRecord]]:
        """``{study_id: trials ordered by number}`` for many studies in one query."""
        t = trials_table.c
        out: dict[int, list[TrialRecord]] = {int(i): [] for i in study_ids}
        if not out:
            return out
        query = select(trials_table).where(t.study_id.in_(list(out)))
        if states is not None:
            query = query.where(t.state.in_([TrialState(s).value for s in states]))
        query = query.order_by(t.study_id, t.number)

        def read(conn: Connection) -> dict[int, list[TrialRecord]]:
            for row in conn.execute(query):
                out[row.study_id].append(self._trial(row))
            return out

        return self._read(read)

    # --- model cache -----------------------------------------------------------------------------
    def get_cache(self, key: str) -> dict[str, Any] | None:
        """The JSON dict stored under ``key`` by :meth:`put_cache`, or ``None``."""
        c = model_cache_table.c
        text = self._read(
            lambda conn: conn.execute(select(c.value_json).where(c.key == key)).scalar()
        )
        if text is None:
            return None
        try:
            value = json.loads(text)
            if not isinstance(value, dict):
                raise ValueError(f"a {type(value).__name__}, not a JSON object")
        except ValueError as e:  # a damaged row: a cache, so dropped and rebuilt by the caller
            drop(self, key, "entry", e)
            return None
        return value

    def put_cache(self, key: str, kind: str, value: dict[str, Any]) -> None:
        """Store ``value`` (a JSON-ready dict) under ``key``, replacing any older entry.

        One transaction (``INSERT ... ON CONFLICT DO UPDATE`` on SQLite and PostgreSQL, delete then
        insert elsewhere), so a reader sees the old entry or the new one, never a mixture.
        ``kind`` says what the entry is (e.g. ``"scaml-meta"``), for inspection.

        Raises:
            StorageError: ``value`` is not a dict of JSON data (NaN and inf are not JSON).
        """
        if not isinstance(key, str) or not 0 < len(key) <= 255:
            raise StorageError(f"A cache key must be a string of 1 to 255 characters; got {key!r}.")
        if not isinstance(value, dict):
            raise StorageError(f"A cache value must be a dict; got {type(value).__name__}.")
        try:
            text = _dumps(value)
        except (TypeError, ValueError) as e:
            raise StorageError(
                f"Cache entry {key!r} is not JSON ({e}); store lists of finite floats (convert "
                "arrays with .tolist()), strings, ints, bools and None."
            ) from e
        row = {"key": key, "kind": str(kind), "value_json": text, "created_at": _now()}
        for attempt in range(5):  # only the generic delete-then-insert can race (on a new key)
            try:
                self._write(lambda conn: _upsert_cache(conn, row))
                return
            except IntegrityError:
                if attempt == 4:
                    raise
                time.sleep(0.01 * 2**attempt)

    def clear_cache(self, kind: str | None = None, *, key: str | None = None) -> int:
        """Delete every cache entry (or those of one ``kind``, or the one ``key``); returns how
        many were deleted."""
        query = model_cache_table.delete()
        if kind is not None:
            query = query.where(model_cache_table.c.kind == kind)
        if key is not None:
            query = query.where(model_cache_table.c.key == key)
        return int(self._write(lambda conn: conn.execute(query).rowcount))
