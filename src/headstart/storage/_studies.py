r"""The storage's studies: create, read, list, widen, annotate and delete them."""

from __future__ import annotations

import json
from typing import Any

from sqlalchemy import Connection, bindparam, func, select
from sqlalchemy.exc import IntegrityError

from headstart.exceptions import (
    DuplicatedStudyError,
    StorageError,
    UnknownStudyError,
    UnknownTrialError,
)
from headstart.storage import _clock
from headstart.storage._connection import dumps_json
from headstart.storage._rows import study_names, study_record
from headstart.storage.records import StudyRecord, StudySummary
from headstart.storage.schema import studies_table, trials_table

_STUDY_BY_ID = select(studies_table).where(studies_table.c.study_id == bindparam("sid"))


class StudiesMixin:
    """Studies of a :class:`~headstart.storage._connection.SQLConnection`."""

    def create_study(
        self, name: str, *, direction: str, space: dict, settings: dict
    ) -> StudyRecord:
        """Create a study; :class:`DuplicatedStudyError` if the name is taken."""
        space_json, settings_json = dumps_json(space), dumps_json(settings)

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
                    created_at=_clock.now(),
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
                names = study_names(conn)
                known = ", ".join(repr(n) for n in names[:20]) or "none"
                raise UnknownStudyError(
                    f"No study named {name!r} in {self.url}. Studies there: {known}. "
                    "Check the name and --storage, or create the study first."
                )
            return study_record(row)

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
            history.append({"space": json.loads(row.space_json), "replaced_at": _clock.now()})
            conn.execute(
                studies_table.update()
                .where(s.study_id == study_id)
                .values(space_json=dumps_json(space), space_history_json=dumps_json(history))
            )

        self._write(widen)
        return self.get_study_by_id(study_id)

    def get_study_by_id(self, study_id: int) -> StudyRecord:
        missing = UnknownStudyError(f"Study id {study_id} is not in {self.url}.")
        return study_record(self._one_row(_STUDY_BY_ID, {"sid": study_id}, missing))

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
                settings = json.loads(row.settings_json)
                best = None
                # several objectives have no one best value (a front); a constrained study's
                # best is its best feasible value, which the CLI's `studies show` prints
                several_or_constrained = settings.get("directions") or settings.get("constrained")
                if c is not None and c.n_complete and not several_or_constrained:
                    best = c.lo if row.direction == "minimize" else c.hi
                directions = settings.get("directions") or [row.direction]
                out.append(
                    StudySummary(
                        name=row.name,
                        direction=", ".join(directions),
                        n_trials=0 if c is None else int(c.n),
                        n_complete=0 if c is None else int(c.n_complete),
                        best_value=best,
                        created_at=_clock.parse(row.created_at),
                    )
                )
            return out

        return self._read(summaries)

    def get_studies(self) -> list[StudyRecord]:
        """Every stored study (space and settings included), oldest first, in one query."""
        query = select(studies_table).order_by(studies_table.c.study_id)
        return self._read(lambda conn: [study_record(r) for r in conn.execute(query)])

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
            dumps_json(value)
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
                table.update().where(column == row_id).values(user_attrs_json=dumps_json(attrs))
            )

        self._write(update)

    def delete_study(self, name: str) -> None:
        """Delete a study and its trials in one transaction."""
        study_id = self.get_study(name).study_id

        def delete(conn: Connection) -> None:
            conn.execute(trials_table.delete().where(trials_table.c.study_id == study_id))
            conn.execute(studies_table.delete().where(studies_table.c.study_id == study_id))

        self._write(delete)


__all__ = ["StudiesMixin"]
