r"""The connection to a SQL database: the engine, and every read and write as one transaction.

SQLite runs in WAL mode with ``synchronous=FULL`` (a committed trial survives a power cut) and
takes its write lock at ``BEGIN IMMEDIATE`` (before the next trial number is read); server
databases check pooled connections before use. A write is retried through lock time-outs and
trial-number races, and every call through a server restarting or failing over, for up to
``HEADSTART_STORAGE_RETRY_SECONDS`` (30 s).
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
from collections.abc import Callable
from typing import Any, TypeVar

from sqlalchemy import Connection, Engine, create_engine, event
from sqlalchemy.exc import DBAPIError, IntegrityError, OperationalError, SQLAlchemyError
from sqlalchemy.pool import StaticPool

from headstart._display import mask_url, redact, remember_url
from headstart.exceptions import StorageError, StorageNotFoundError

T = TypeVar("T")
MEMORY_URL = "sqlite:///:memory:"
_WRITE_RETRIES = 20


def dumps_json(obj: Any) -> str:
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
    "socket closed",  # psycopg 3: "connection socket closed"
    # libpq's words for a connection lost mid-exchange
    "could not receive data from server",
    "could not send data to server",
    "no connection to the server",
    "ssl connection has been closed unexpectedly",
    "connection is lost",
)


def _is_disconnect(error: BaseException) -> bool:
    """Whether ``error`` is a lost, refused or not-yet-accepted connection (worth a retry after a
    short wait): a server restarting says "starting up" / "shutting down", then refuses.

    The causes and contexts count too: when the socket closes mid-query, SQLAlchemy's rollback
    on that connection fails with an error of its own ("another command is already in
    progress"), raised while handling the lost connection, and that is the one that surfaces.
    """
    seen: set[int] = set()
    todo: list[BaseException] = [error]
    while todo:
        link = todo.pop()
        if id(link) in seen:
            continue
        seen.add(id(link))
        if getattr(link, "connection_invalidated", False):
            return True
        if any(key in str(link).lower() for key in _TRANSIENT):
            return True
        todo.extend(e for e in (link.__cause__, link.__context__) if e is not None)
    return False


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


def _sqlite_file(url: str) -> str | None:
    """The file of a ``sqlite:///path`` URL (``None`` for in-memory and non-SQLite URLs)."""
    if not url.startswith("sqlite") or url in ("sqlite://", MEMORY_URL):
        return None
    from sqlalchemy.engine import make_url

    database = make_url(url).database
    return None if not database or database == ":memory:" else database


_OPEN_FILES: weakref.WeakSet[SQLConnection] = (
    weakref.WeakSet()
)  # SQLite-file storages to close at exit


@atexit.register
def _close_at_exit() -> None:
    """Fold every open SQLite storage's write-ahead log into its ``.db`` file (:meth:`close`)."""
    for storage in list(_OPEN_FILES):
        storage.close()


class SQLConnection:
    """A SQL database behind one engine: opening, closing, and every read and write as one
    transaction, retried through lock time-outs and server restarts. The storage's jobs
    (:mod:`~headstart.storage._studies`, ``_trials``, ``_queue``, ``_cache``) build on it.

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
        return f"{type(self).__name__}({self.url!r})"

    # --- plumbing --------------------------------------------------------------------------------
    def _init_schema(self, create: bool = True) -> None:
        from headstart.storage._schema import init_schema

        init_schema(self, create)

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

    def _one_row(self, statement: Any, params: dict[str, Any], missing: Exception) -> Any:
        """The first row of ``statement`` (built once, with bound ``params``; one read); raises
        ``missing`` if there is none."""
        row = self._read(lambda conn: conn.execute(statement, params).first())
        if row is None:
            raise missing
        return row


__all__ = ["MEMORY_URL", "SQLConnection", "dumps_json", "mask_password"]
