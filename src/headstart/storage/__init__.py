r"""Where studies and trials live: SQL storage (SQLite by default) behind a small API.

Open a storage with :func:`get_storage`. The study layer talks to the
:class:`~headstart.storage.base.BaseStorage` interface only, and exchanges the plain records of
:mod:`headstart.storage.records`; :class:`~headstart.storage.sql.Storage` (SQLAlchemy: SQLite by
default, PostgreSQL, any URL) implements it.
"""

from __future__ import annotations

import os
from typing import Any

from headstart.exceptions import StorageError
from headstart.storage.base import BaseStorage
from headstart.storage.records import StudyRecord, StudySummary, TrialRecord, TrialState

DEFAULT_STORAGE_URL = os.environ.get("HEADSTART_STORAGE", "sqlite:///headstart.db")

_OPEN: dict[str, BaseStorage] = {}


def __getattr__(name: str) -> Any:
    # SQLAlchemy takes ~0.2 s to import: loaded when a storage is first opened or named.
    if name in ("Storage", "MEMORY_URL"):
        from headstart.storage import sql

        return getattr(sql, name)
    if name == "SCHEMA_VERSION":
        from headstart.storage.schema import SCHEMA_VERSION

        return SCHEMA_VERSION
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def get_storage(
    storage: str | BaseStorage | None = DEFAULT_STORAGE_URL, *, create: bool = True
) -> BaseStorage:
    """Open (or reuse) a storage.

    Args:
        storage: A SQLAlchemy URL, an open storage (a :class:`Storage`, or any implementation of
            :class:`~headstart.storage.base.BaseStorage`), or ``None`` /
            ``"sqlite:///:memory:"`` for a new in-memory storage (each call gives a fresh one).
        create: Create the database and its tables when missing. ``False`` (commands that only
            read) refuses a missing SQLite file or a database without headstart's tables.

    Raises:
        StorageNotFoundError: ``create=False`` and there is no headstart storage at the URL.
        ForeignStorageError: the database's ``studies`` / ``trials`` tables are another
            application's (an Optuna storage); nothing is written to it.
        StorageError: the URL cannot be parsed or the database cannot be opened.
    """
    from headstart.storage.sql import MEMORY_URL, Storage

    if isinstance(storage, Storage) or (
        storage is not None and not isinstance(storage, str) and isinstance(storage, BaseStorage)
    ):
        return storage  # an open storage (another backend implements BaseStorage)
    if storage is None or storage in (MEMORY_URL, "sqlite://", ":memory:"):
        return Storage(MEMORY_URL)
    if not isinstance(storage, str) or not storage.strip():
        raise StorageError(
            f"storage must be a SQLAlchemy URL such as 'sqlite:///headstart.db', a Storage or "
            f"None; got {storage!r}."
        )
    if "://" not in storage:
        raise StorageError(
            f"{storage!r} is not a storage URL. For a SQLite file write 'sqlite:///{storage}'."
        )
    key = f"{os.getpid()}:{os.getcwd()}:{storage}"  # relative sqlite paths depend on cwd
    if key not in _OPEN:
        _OPEN[key] = Storage(storage, create=create)
    return _OPEN[key]


__all__ = [
    "DEFAULT_STORAGE_URL",
    "SCHEMA_VERSION",
    "BaseStorage",
    "Storage",
    "StudyRecord",
    "StudySummary",
    "TrialRecord",
    "TrialState",
    "get_storage",
]
