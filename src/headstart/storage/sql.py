r"""Relational storage on SQLAlchemy: SQLite by default, any SQLAlchemy URL (e.g. PostgreSQL).

:class:`Storage` implements :class:`~headstart.storage.base.BaseStorage` from one module per job:
the connection and its retries (:mod:`~headstart.storage._connection`), the schema and its
migrations (:mod:`~headstart.storage._schema`), studies (:mod:`~headstart.storage._studies`),
trials (:mod:`~headstart.storage._trials`), the queue and heartbeats
(:mod:`~headstart.storage._queue`) and the model cache (:mod:`~headstart.storage._cache`).

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

from headstart.storage._cache import CacheMixin
from headstart.storage._connection import _OPEN_FILES, MEMORY_URL, SQLConnection, mask_password
from headstart.storage._queue import QueueMixin
from headstart.storage._studies import StudiesMixin
from headstart.storage._trials import TrialsMixin


class Storage(StudiesMixin, TrialsMixin, QueueMixin, CacheMixin, SQLConnection):
    """Studies and trials in a SQL database. Use :func:`~headstart.storage.get_storage` to open
    one.

    A SQLite file runs in WAL mode: commits go to ``<file>-wal`` and reach the ``.db`` file at
    checkpoints. :meth:`close` (also run at interpreter exit) checkpoints, so once the last
    process has closed the storage, the ``.db`` file alone holds everything and can be copied.

    Args:
        url: A SQLAlchemy URL, e.g. ``sqlite:///headstart.db`` or
            ``postgresql+psycopg://user:pw@host/db``; ``sqlite:///:memory:`` for a throw-away store.
        engine_kwargs: Extra ``sqlalchemy.create_engine`` options (pool size, timeouts...).
        create: Create the tables of a new database (``False``: refuse one without them).
    """


__all__ = ["MEMORY_URL", "_OPEN_FILES", "Storage", "mask_password"]
