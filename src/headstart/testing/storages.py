r"""Storages to run one test suite on: every backend headstart supports, each empty.

As Optuna's ``optuna.testing.storages`` does for its backends, :data:`STORAGE_MODES` names them
and :func:`fresh_storage_url` gives an empty storage of a mode: a new SQLite file, a new in-memory
database, or a new database on a PostgreSQL server (``$HEADSTART_TEST_POSTGRES_URL``, which
``.ci/run`` starts; a mode whose server is missing raises :class:`Unavailable`, which a test
suite turns into a skip). headstart's storage tests (``tests/test_storage.py``) run over every
mode; a new :class:`~headstart.storage.base.BaseStorage` backend runs the same suite.

Example:
    >>> import tempfile
    >>> from pathlib import Path
    >>> from headstart.storage import get_storage
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     with fresh_storage_url("sqlite", Path(tmp)) as url:
    ...         get_storage(url).list_studies()
    []
"""

from __future__ import annotations

import contextlib
import os
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

STORAGE_MODES = ("sqlite", "sqlite-memory", "postgresql")
POSTGRES_URL_VARIABLE = "HEADSTART_TEST_POSTGRES_URL"


class Unavailable(RuntimeError):
    """The backend of a mode cannot be reached here (no PostgreSQL server configured)."""


def server_url(mode: str) -> str:
    """The server URL of a server mode (``postgresql``): ``$HEADSTART_TEST_POSTGRES_URL``."""
    url = os.environ.get(POSTGRES_URL_VARIABLE)
    if mode != "postgresql":
        raise ValueError(f"{mode!r} is not a server mode.")
    if not url:
        raise Unavailable(f"no PostgreSQL: {POSTGRES_URL_VARIABLE} is not set")
    return url


@contextlib.contextmanager
def fresh_storage_url(mode: str, tmp_path: Path) -> Iterator[str]:
    """An empty storage of ``mode`` (:data:`STORAGE_MODES`), removed afterwards.

    ``sqlite``: a new file in ``tmp_path``; ``sqlite-memory``: a new in-memory database (one per
    :func:`~headstart.storage.get_storage` call); ``postgresql``: a new database on the server of
    ``$HEADSTART_TEST_POSTGRES_URL``, dropped afterwards (a server another test just restarted is
    waited for).

    Raises:
        Unavailable: the mode's server is not configured.
        ValueError: an unknown mode.
    """
    if mode == "sqlite":
        yield f"sqlite:///{tmp_path / f'fresh-{uuid.uuid4().hex[:8]}.db'}"
        return
    if mode == "sqlite-memory":
        yield "sqlite:///:memory:"
        return
    if mode not in STORAGE_MODES:
        raise ValueError(f"mode must be one of {STORAGE_MODES}; got {mode!r}.")
    url = server_url(mode)
    from sqlalchemy import create_engine, text

    name = f"fresh_{uuid.uuid4().hex[:12]}"
    admin = create_engine(url, isolation_level="AUTOCOMMIT", pool_pre_ping=True)

    def run(sql: str) -> None:  # a server another test just restarted may still be starting
        for attempt in range(40):
            try:
                with admin.connect() as conn:
                    conn.execute(text(sql))
                return
            except Exception:
                if attempt == 39:
                    raise
                time.sleep(0.25)

    run(f"CREATE DATABASE {name}")
    try:
        yield f"{url.rsplit('/', 1)[0]}/{name}"
    finally:
        from headstart.storage import sql

        for storage in list(sql._OPEN_FILES):  # nothing to fold for a server; just in case
            storage.close()
        run(f"DROP DATABASE {name} WITH (FORCE)")
        admin.dispose()


__all__ = ["POSTGRES_URL_VARIABLE", "STORAGE_MODES", "Unavailable", "fresh_storage_url"]
