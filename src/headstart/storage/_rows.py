r"""Plain records (:mod:`headstart.storage.records`) from database rows: JSON columns parsed."""

from __future__ import annotations

import json
from typing import Any

from sqlalchemy import Connection, select

from headstart.storage import _clock
from headstart.storage.records import StudyRecord, TrialRecord, TrialState
from headstart.storage.schema import studies_table


def study_record(row: Any) -> StudyRecord:
    return StudyRecord(
        study_id=row.study_id,
        name=row.name,
        direction=row.direction,
        space=json.loads(row.space_json),
        settings=json.loads(row.settings_json),
        created_at=_clock.parse(row.created_at),
        user_attrs=json.loads(getattr(row, "user_attrs_json", None) or "{}"),
        space_history=json.loads(getattr(row, "space_history_json", None) or "[]"),
    )


def trial_record(row: Any) -> TrialRecord:
    return TrialRecord(
        trial_id=row.trial_id,
        study_id=row.study_id,
        number=row.number,
        state=TrialState(row.state),
        params=json.loads(row.params_json),
        value=row.value,
        source=row.source,
        created_at=_clock.parse(row.created_at),
        finished_at=_clock.parse(row.finished_at),
        user_attrs=json.loads(row.user_attrs_json),
        heartbeat_at=_clock.parse(getattr(row, "heartbeat_at", None)),
        values=_floats(getattr(row, "values_json", None)),
        constraints=_floats(getattr(row, "constraints_json", None)),
    )


def _floats(text: str | None) -> tuple[float, ...] | None:
    return None if text is None else tuple(float(v) for v in json.loads(text))


def study_names(conn: Connection) -> list[str]:
    return list(conn.execute(select(studies_table.c.name)).scalars())


__all__ = ["study_names", "study_record", "trial_record"]
