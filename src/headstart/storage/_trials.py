r"""The storage's trials: numbered in one transaction, filled in, finished once, read back."""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from types import SimpleNamespace
from typing import Any

from sqlalchemy import Connection, bindparam, func, select, union_all

from headstart.exceptions import TrialAlreadyFinishedError, UnknownTrialError
from headstart.storage import _clock
from headstart.storage._connection import dumps_json
from headstart.storage._rows import trial_record
from headstart.storage.records import TrialRecord, TrialState
from headstart.storage.schema import studies_table, trials_table

# The statements of ask and tell, built once with bound parameters: building a statement cost
# about 0.1 ms each time (SQLAlchemy's coercions and cache key), several times the statement's own
# run on SQLite, and ask + tell run about ten.
_t = trials_table.c
_UNFINISHED = (TrialState.RUNNING.value, TrialState.WAITING.value)
_NEXT_NUMBER = select(func.max(_t.number)).where(_t.study_id == bindparam("sid"))
_INSERT = trials_table.insert()
_BY_ID = select(trials_table).where(_t.trial_id == bindparam("tid"))
_CHANGED = select(trials_table).where(
    _t.study_id == bindparam("sid"), _t.number > bindparam("after")
)
_KNOWN = select(trials_table).where(_t.trial_id.in_(bindparam("ids", expanding=True)))
_owner = trials_table.alias("owner")
_OWNER = select(_owner.c.study_id).where(_owner.c.trial_id == bindparam("tid"))
_LOCK_STUDY = (  # PostgreSQL: serialize a study's check-and-write (a row lock)
    select(studies_table.c.study_id)
    .where(studies_table.c.study_id == _OWNER.scalar_subquery())
    .with_for_update()
)
_same = (  # another trial of the same study with the same configuration
    _t.study_id == _OWNER.scalar_subquery(),
    _t.trial_id != bindparam("tid"),
    _t.params_json == bindparam("params"),
)
_DUPLICATE = union_all(  # three indexed lookups: newer, unfinished, and re-checked trials
    select(_t.trial_id).where(*_same, _t.number > bindparam("after")),
    select(_t.trial_id).where(*_same, _t.state.in_(_UNFINISHED)),
    select(_t.trial_id).where(*_same, _t.trial_id.in_(bindparam("ids", expanding=True))),
).limit(1)
_running = (_t.trial_id == bindparam("tid"), _t.state == TrialState.RUNNING.value)
_FILL = trials_table.update().where(*_running).values(params_json=bindparam("params"))
_FILL_ATTRS = _FILL.values(user_attrs_json=bindparam("attrs"))
_FINISH = (
    trials_table.update()
    .where(_t.trial_id == bindparam("tid"), _t.state.in_(_UNFINISHED))
    .values(
        state=bindparam("new_state"),
        value=bindparam("new_value"),
        finished_at=bindparam("finished"),
        values_json=bindparam("new_values"),
        constraints_json=bindparam("new_constraints"),
    )
)
_FINISH_ATTRS = _FINISH.values(user_attrs_json=bindparam("attrs"))


class TrialsMixin:
    """Trials of a :class:`~headstart.storage._connection.SQLConnection`."""

    @staticmethod
    def _next_number(conn: Connection, study_id: int) -> int:
        top = conn.execute(_NEXT_NUMBER, {"sid": study_id}).scalar()
        return 0 if top is None else int(top) + 1

    def _insert_trials(
        self, conn: Connection, study_id: int, rows: Sequence[dict[str, Any]]
    ) -> list[TrialRecord]:
        number = self._next_number(conn, study_id)
        records = []
        for offset, r in enumerate(rows):
            state = TrialState(r["state"])
            now = _clock.now()
            beat = _clock.db_now(conn) if r.get("heartbeat") else None
            values = {
                "study_id": study_id,
                "number": number + offset,
                "state": state.value,
                "params_json": dumps_json(r["params"]),
                "value": r.get("value"),
                "values_json": _json_floats(r.get("values")),
                "constraints_json": _json_floats(r.get("constraints")),
                "source": r.get("source", "ask"),
                "user_attrs_json": dumps_json(r.get("user_attrs") or {}),
                "created_at": now,
                "finished_at": now if state.is_finished else None,
                "heartbeat_at": beat,
            }
            result = conn.execute(_INSERT, values)
            trial_id = int(result.inserted_primary_key[0])
            records.append(trial_record(SimpleNamespace(trial_id=trial_id, **values)))
        return records

    def create_trial(
        self,
        study_id: int,
        *,
        state: TrialState,
        params: dict[str, Any],
        value: float | None = None,
        source: str = "ask",
        user_attrs: dict[str, Any] | None = None,
        heartbeat: bool = False,
    ) -> TrialRecord:
        """Create one trial with the study's next number (one transaction).

        ``heartbeat=True`` stamps its first heartbeat (a running trial of a study with
        heartbeats; see :meth:`record_heartbeat` and :meth:`fail_stale_trials`).
        """
        row = {
            "state": state,
            "params": params,
            "value": value,
            "source": source,
            "user_attrs": user_attrs,
            "heartbeat": heartbeat,
        }
        (record,) = self._write(lambda conn: self._insert_trials(conn, study_id, [row]))
        return record

    def create_trials(self, study_id: int, rows: Iterable[dict[str, Any]]) -> list[TrialRecord]:
        """Create several trials with consecutive numbers, all in one transaction."""
        rows = list(rows)
        return self._write(lambda conn: self._insert_trials(conn, study_id, rows))

    def set_trial_params(
        self,
        trial_id: int,
        params: dict[str, Any],
        *,
        user_attrs: dict[str, Any] | None = None,
        unique: bool = True,
        after_number: int = -1,
        recheck_ids: Sequence[int] = (),
    ) -> bool:
        """Fill in the configuration of a reserved (running, empty) trial, atomically.

        With ``unique``, the write is refused -- ``False`` is returned and nothing changes --
        when another trial of the study already has exactly these parameters: two workers whose
        suggestions coincided then never both evaluate it. The check and the write are one
        transaction, serialized per study (SQLite's write lock; a row lock on PostgreSQL).
        ``after_number`` limits the check to trials numbered above it, the trials in
        ``recheck_ids`` and unfinished ones: the caller has compared the other trials, finished
        when it last read them (they never change), itself.
        """
        bound = {
            "tid": trial_id,
            "params": dumps_json(params),
            "after": after_number,
            "ids": list(recheck_ids),
        }
        if user_attrs is not None:
            bound["attrs"] = dumps_json(user_attrs)

        def update(conn: Connection) -> bool:
            if conn.dialect.name != "sqlite":  # serialize check-and-write per study
                conn.execute(_LOCK_STUDY, bound)
            if unique and conn.execute(_DUPLICATE, bound).first():
                return False
            if conn.execute(_FILL if user_attrs is None else _FILL_ATTRS, bound).rowcount == 1:
                return True
            if conn.execute(_BY_ID, bound).first() is None:
                raise UnknownTrialError(f"Trial id {trial_id} does not exist in {self.url}.")
            raise TrialAlreadyFinishedError(  # failed meanwhile, by a stale-trial sweep
                f"Trial id {trial_id} is no longer running: it cannot get a configuration."
            )

        return self._write(update)

    def finish_trial(
        self,
        trial_id: int,
        *,
        state: TrialState,
        value: float | None,
        user_attrs: dict[str, Any] | None = None,
        values: Sequence[float] | None = None,
        constraints: Sequence[float] | None = None,
    ) -> TrialRecord:
        """Mark a running (or waiting) trial complete or failed, atomically.

        ``user_attrs`` are merged into the trial's (for example a failed evaluation's traceback).
        ``values`` (a multi-objective trial's) and ``constraints`` are stored as JSON lists in the
        same transaction.

        Raises:
            UnknownTrialError: no such trial.
            TrialAlreadyFinishedError: the trial was already complete or failed.
        """
        state = TrialState(state)
        attempts = [0]

        def finish(conn: Connection) -> None:
            attempts[0] += 1
            bound: dict[str, Any] = {
                "tid": trial_id,
                "new_state": state.value,
                "new_value": value,
                "finished": _clock.now(),
                "new_values": _json_floats(values),
                "new_constraints": _json_floats(constraints),
            }
            if user_attrs:
                old = conn.execute(_BY_ID, bound).first()
                old_attrs = json.loads(old.user_attrs_json or "{}") if old is not None else {}
                bound["attrs"] = dumps_json({**old_attrs, **user_attrs})
            if conn.execute(_FINISH_ATTRS if user_attrs else _FINISH, bound).rowcount == 1:
                return
            row = conn.execute(_BY_ID, bound).first()
            if row is None:
                raise UnknownTrialError(f"Trial id {trial_id} does not exist in {self.url}.")
            if attempts[0] > 1 and row.state == state.value and row.value == value:
                return  # a retry after a lost connection: the first attempt had committed
            raise TrialAlreadyFinishedError(
                f"Trial {row.number} is already {row.state} (value {row.value}); each trial is "
                "told once. Ask a new trial to evaluate again."
            )

        self._write(finish)
        return self.get_trial(trial_id)

    def get_trial(self, trial_id: int) -> TrialRecord:
        missing = UnknownTrialError(f"Trial id {trial_id} does not exist in {self.url}.")
        return trial_record(self._one_row(_BY_ID, {"tid": trial_id}, missing))

    def get_trials(
        self, study_id: int, states: Sequence[TrialState] | None = None
    ) -> list[TrialRecord]:
        """The study's trials ordered by number, optionally only those in ``states``."""
        query = select(trials_table).where(trials_table.c.study_id == study_id)
        if states is not None:
            query = query.where(trials_table.c.state.in_([TrialState(s).value for s in states]))
        query = query.order_by(trials_table.c.number)
        return self._read(lambda conn: [trial_record(r) for r in conn.execute(query)])

    def get_trials_changed(
        self, study_id: int, after_number: int, trial_ids: Sequence[int] = ()
    ) -> list[TrialRecord]:
        """Trials numbered above ``after_number``, plus those in ``trial_ids``, by number.

        A reader that keeps the finished trials it has seen asks only for what may have changed:
        new trials and the ones it saw unfinished. Numbers become visible in order (each is the
        committed maximum plus one), so nothing numbered below ``after_number`` appears later.
        """
        bound = {"sid": study_id, "after": after_number, "ids": list(trial_ids)}

        def read(conn: Connection) -> list[TrialRecord]:  # two indexed queries, one snapshot
            rows = {r.trial_id: r for r in conn.execute(_KNOWN, bound)} if trial_ids else {}
            rows.update({r.trial_id: r for r in conn.execute(_CHANGED, bound)})
            return sorted((trial_record(r) for r in rows.values()), key=lambda r: r.number)

        return self._read(read)

    def get_trials_of_studies(
        self, study_ids: Sequence[int], states: Sequence[TrialState] | None = None
    ) -> dict[int, list[TrialRecord]]:
        """``{study_id: trials ordered by number}`` for many studies in one query."""
        t = trials_table.c
        out: dict[int, list[TrialRecord]] = {int(i): [] for i in study_ids}
        if not out:
            return out
        query = select(trials_table).where(t.study_id.in_(list(out)))
        if states is not None:
            query = query.where(t.state.in_([TrialState(s).value for s in states]))
        query = query.order_by(t.study_id, t.number)

        def read(conn: Connection) -> dict[int, list[TrialRecord]]:
            for row in conn.execute(query):
                out[row.study_id].append(trial_record(row))
            return out

        return self._read(read)


__all__ = ["TrialsMixin"]


def _json_floats(numbers: Sequence[float] | None) -> str | None:
    """A trial's values or constraints as a JSON list (``None`` stays NULL)."""
    return None if numbers is None else dumps_json([float(v) for v in numbers])
