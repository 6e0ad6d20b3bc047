r"""Creating a storage's tables, migrating an older one, and refusing another application's.

A new database gets every table and ``headstart_version`` in one transaction; an older schema is
migrated step by step (:data:`headstart.storage.schema.MIGRATIONS`) in one transaction, serialized
between processes (an advisory lock on PostgreSQL, ``BEGIN IMMEDIATE`` on SQLite).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from sqlalchemy import Connection, inspect, select

from headstart.exceptions import ForeignStorageError, StorageNotFoundError, StorageVersionError
from headstart.storage.schema import MIGRATIONS, SCHEMA_VERSION, metadata, version_table

if TYPE_CHECKING:
    from headstart.storage._connection import SQLConnection

_SCHEMA_LOCK_KEY = 0x48535452  # pg_advisory_xact_lock key of schema creation ('HSTR')


_OWN_TABLES = frozenset(table.name for table in metadata.sorted_tables)
_OPTUNA_TABLES = frozenset({"version_info", "study_directions", "trial_values", "trial_params"})


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


def init_schema(storage: SQLConnection, create: bool = True) -> None:
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

    with storage._turn, storage._engine.connect() as conn:
        if current(conn):
            return
        _check_not_foreign(conn, storage.url)
        if not create and not inspect(conn).has_table(version_table.name):
            raise StorageNotFoundError(
                f"{storage.url!r} holds no headstart storage; nothing was created. Check the "
                "URL, or create a study there first."
            )

    def init(conn: Connection) -> None:
        if conn.dialect.name == "postgresql":
            conn.exec_driver_sql(f"SELECT pg_advisory_xact_lock({_SCHEMA_LOCK_KEY})")
        _check_not_foreign(conn, storage.url)  # again, under the lock
        version_table.create(conn, checkfirst=True)
        # FOR UPDATE: a second process opening an old PostgreSQL storage waits for the first
        # one's migration instead of running it twice (SQLite's BEGIN IMMEDIATE does the same).
        found = (
            conn.execute(select(version_table.c.schema_version).with_for_update()).scalars().all()
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
                f"Storage {storage.url!r} has schema version {found}, but this headstart reads "
                f"versions up to {SCHEMA_VERSION}. Use the headstart version that wrote it, or "
                "export its studies (headstart studies export) and re-import them."
            )

    storage._write(init)


__all__ = ["init_schema"]
