r"""The SQL schema (SQLAlchemy Core). Bump :data:`SCHEMA_VERSION` whenever a table changes.

* ``headstart_version(schema_version)`` - one row; a storage written by another schema version
  is refused with :class:`~headstart.exceptions.StorageVersionError` instead of misread.
* ``studies`` - name (unique), direction, search space and settings as JSON text, creation time,
  and the user's attributes as JSON text (``user_attrs_json``, added in version 4).
* ``trials`` - one row per trial; ``(study_id, number)`` is unique, so two writers can never
  create the same trial number, whatever the backend. ``heartbeat_at`` (added in version 3) is
  the last sign of life of a running trial's worker, for studies with heartbeats.
* ``model_cache`` - fitted meta-models as JSON, keyed by a hash of their meta-data and settings
  (added in version 2), so transfer models are fitted once per set of source studies.

Older storages are migrated on open, in one transaction, by the steps in :data:`MIGRATIONS`
(version ``v`` → ``v + 1``); newer ones are refused.

Everything is stored as JSON text or plain numbers; nothing is ever pickled.
"""

from __future__ import annotations

from collections.abc import Callable

from sqlalchemy import (
    Column,
    Connection,
    Float,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    UniqueConstraint,
)

SCHEMA_VERSION = 6

metadata = MetaData()

version_table = Table(
    "headstart_version",
    metadata,
    Column("schema_version", Integer, primary_key=True, autoincrement=False),
)

studies_table = Table(
    "studies",
    metadata,
    Column("study_id", Integer, primary_key=True, autoincrement=True),
    Column("name", String(512), nullable=False, unique=True),
    Column("direction", String(16), nullable=False),
    Column("space_json", Text, nullable=False),
    Column("settings_json", Text, nullable=False),
    Column("created_at", String(40), nullable=False),
    Column("user_attrs_json", Text, nullable=True),  # added in version 4 (NULL: none)
    # added in version 5: the study's earlier search spaces, oldest first, each with the time it
    # was replaced (widened by create_study(..., load_if_exists=True)); NULL: never changed
    Column("space_history_json", Text, nullable=True),
)

trials_table = Table(
    "trials",
    metadata,
    Column("trial_id", Integer, primary_key=True, autoincrement=True),
    Column(
        "study_id",
        Integer,
        ForeignKey("studies.study_id", ondelete="CASCADE"),
        nullable=False,
    ),
    Column("number", Integer, nullable=False),
    Column("state", String(16), nullable=False),
    Column("params_json", Text, nullable=False),
    Column("value", Float(precision=53), nullable=True),
    Column("source", String(32), nullable=False),
    Column("user_attrs_json", Text, nullable=False),
    Column("created_at", String(40), nullable=False),
    Column("finished_at", String(40), nullable=True),
    Column("heartbeat_at", String(40), nullable=True),  # added in version 3
    # added in version 6 (NULL: a single-objective, unconstrained trial): a multi-objective
    # trial's values (``value`` holds the first) and a constrained trial's constraint values
    # (feasible when every one is <= 0), as JSON lists of floats
    Column("values_json", Text, nullable=True),
    Column("constraints_json", Text, nullable=True),
    UniqueConstraint("study_id", "number", name="uq_trial_number"),
    Index("ix_trials_study_state", "study_id", "state"),
)

model_cache_table = Table(
    "model_cache",
    metadata,
    Column("key", String(255), primary_key=True),
    Column("kind", String(64), nullable=False),
    Column("value_json", Text, nullable=False),
    Column("created_at", String(40), nullable=False),
)


def _add_model_cache(conn: Connection) -> None:
    model_cache_table.create(conn, checkfirst=True)


def _add_heartbeat(conn: Connection) -> None:
    conn.exec_driver_sql("ALTER TABLE trials ADD COLUMN heartbeat_at VARCHAR(40)")


def _add_study_user_attrs(conn: Connection) -> None:
    conn.exec_driver_sql("ALTER TABLE studies ADD COLUMN user_attrs_json TEXT")


def _add_space_history(conn: Connection) -> None:
    conn.exec_driver_sql("ALTER TABLE studies ADD COLUMN space_history_json TEXT")


def _add_values_and_constraints(conn: Connection) -> None:
    conn.exec_driver_sql("ALTER TABLE trials ADD COLUMN values_json TEXT")
    conn.exec_driver_sql("ALTER TABLE trials ADD COLUMN constraints_json TEXT")


#: ``MIGRATIONS[v]`` upgrades a version-``v`` storage to version ``v + 1`` inside the open
#: transaction (DDL is transactional on SQLite and PostgreSQL, so a failed step leaves no trace).
MIGRATIONS: dict[int, Callable[[Connection], None]] = {
    1: _add_model_cache,
    2: _add_heartbeat,
    3: _add_study_user_attrs,
    4: _add_space_history,
    5: _add_values_and_constraints,
}
