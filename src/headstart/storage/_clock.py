r"""The clocks of the storage: this process's (creation and finish times) and the database's
(heartbeats, whose ages must not depend on a worker's clock). One module, so a test can skew a
worker's clock in one place."""

from __future__ import annotations

from datetime import UTC, datetime

from sqlalchemy import Connection


def now() -> str:
    """This process's clock, UTC, ISO text."""
    return datetime.now(UTC).isoformat()


def db_now(conn: Connection) -> str:
    """The database server's clock (UTC, ISO text), for heartbeats: workers' clocks may differ
    by seconds, the database's is one clock for all of them. SQLite runs in this process, on
    this machine's clock (read by SQLite, not by Python)."""
    if conn.dialect.name == "postgresql":
        stamp = conn.exec_driver_sql("SELECT clock_timestamp()").scalar()
        return stamp.astimezone(UTC).isoformat()
    text = conn.exec_driver_sql("SELECT strftime('%Y-%m-%dT%H:%M:%f', 'now')").scalar()
    return datetime.fromisoformat(text).replace(tzinfo=UTC).isoformat()


def parse(text: str | None) -> datetime | None:
    """A stored time (ISO text) as a datetime."""
    return None if text is None else datetime.fromisoformat(text)
