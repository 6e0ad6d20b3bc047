r"""The storage's model cache: key -> JSON, for fitted meta-models and warm-start states."""

from __future__ import annotations

import json
import time
from typing import Any

from sqlalchemy import Connection, select
from sqlalchemy.exc import IntegrityError

from headstart._cached import drop
from headstart.exceptions import StorageError
from headstart.storage import _clock
from headstart.storage._connection import dumps_json
from headstart.storage.schema import model_cache_table


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


class CacheMixin:
    """The model cache of a :class:`~headstart.storage._connection.SQLConnection`."""

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
            text = dumps_json(value)
        except (TypeError, ValueError) as e:
            raise StorageError(
                f"Cache entry {key!r} is not JSON ({e}); store lists of finite floats (convert "
                "arrays with .tolist()), strings, ints, bools and None."
            ) from e
        row = {"key": key, "kind": str(kind), "value_json": text, "created_at": _clock.now()}
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


__all__ = ["CacheMixin"]
