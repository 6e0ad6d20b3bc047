r"""The storage's queue and heartbeats: enqueued trials claimed once, stale trials failed once.

A running trial's heartbeat is stamped on the database's clock; a trial whose heartbeat is older
than the grace period belongs to a worker that stopped (``kill -9``, a lost machine) and is failed
by the next ``ask`` of any worker -- and enqueued again once, if the study says so.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, select

from headstart.storage import _clock
from headstart.storage._connection import dumps_json
from headstart.storage.records import TrialRecord, TrialState
from headstart.storage.schema import trials_table


class QueueMixin:
    """The queue and heartbeats of a :class:`~headstart.storage._connection.SQLConnection` with
    :class:`~headstart.storage._trials.TrialsMixin`."""

    def record_heartbeat(self, trial_id: int) -> bool:
        """Stamp a running trial's heartbeat now; ``False`` when it is no longer running."""
        t = trials_table.c

        def beat(conn: Connection) -> bool:
            updated = conn.execute(
                trials_table.update()
                .where(t.trial_id == trial_id, t.state == TrialState.RUNNING.value)
                .values(heartbeat_at=_clock.db_now(conn))
            )
            return updated.rowcount == 1

        return self._write(beat)

    def fail_stale_trials(
        self,
        study_id: int,
        grace_seconds: float,
        *,
        reenqueue: bool = False,
        silent: bool = False,
        reason: str = "heartbeat",
    ) -> list[TrialRecord]:
        """Fail the running trials whose heartbeat is older than ``grace_seconds`` (atomically).

        Their workers stopped (``kill -9``, a lost machine). Each is marked failed with
        ``user_attrs["fail_reason"] = reason``; with ``reenqueue`` its configuration is
        enqueued again once (``user_attrs["retry_of"]`` = its number), unless it was itself a
        retry. Ages are measured on the database's clock (:func:`_db_now`), so a worker whose
        clock is off neither fails live trials nor keeps dead ones. Trials without a heartbeat
        (studies without heartbeats) are only failed with ``silent=True``, by the age of their
        creation (``headstart studies fail-stale``).

        Returns:
            The trials that were failed.
        """
        t = trials_table.c

        def stale_rows(conn: Connection) -> list[Any]:
            cutoff = datetime.fromisoformat(_clock.db_now(conn)).timestamp() - float(grace_seconds)
            rows = conn.execute(
                select(
                    t.trial_id,
                    t.heartbeat_at,
                    t.created_at,
                    t.params_json,
                    t.user_attrs_json,
                    t.number,
                ).where(
                    t.study_id == study_id,
                    t.state == TrialState.RUNNING.value,
                    *(() if silent else (t.heartbeat_at.is_not(None),)),
                )
            ).all()
            return [
                r for r in rows if _clock.parse(r.heartbeat_at or r.created_at).timestamp() < cutoff
            ]

        if not self._read(stale_rows):  # the common case: a read, no write lock taken
            return []

        def sweep(conn: Connection) -> list[int]:
            stale = stale_rows(conn)  # again, under the write lock: another worker may be first
            failed, retries = [], []
            for r in stale:
                attrs = {**json.loads(r.user_attrs_json), "fail_reason": reason}
                updated = conn.execute(
                    trials_table.update()
                    .where(t.trial_id == r.trial_id, t.state == TrialState.RUNNING.value)
                    .values(
                        state=TrialState.FAILED.value,
                        finished_at=_clock.now(),
                        user_attrs_json=dumps_json(attrs),
                    )
                )
                if updated.rowcount != 1:
                    continue
                failed.append(r.trial_id)
                params = json.loads(r.params_json)
                if reenqueue and params and "retry_of" not in attrs:
                    retries.append(
                        {
                            "state": TrialState.WAITING,
                            "params": params,
                            "source": "enqueue",
                            "user_attrs": {"retry_of": r.number},
                        }
                    )
            if retries:
                self._insert_trials(conn, study_id, retries)
            return failed

        return [self.get_trial(trial_id) for trial_id in self._write(sweep)]

    def claim_waiting_trial(self, study_id: int, *, heartbeat: bool = False) -> TrialRecord | None:
        """Atomically move the oldest waiting (enqueued) trial to running and return it."""
        t = trials_table.c

        def claim(conn: Connection) -> int | None:
            trial_id = conn.execute(
                select(t.trial_id)
                .where(t.study_id == study_id, t.state == TrialState.WAITING.value)
                .order_by(t.number)
                .limit(1)
            ).scalar()
            if trial_id is None:
                return None
            updated = conn.execute(
                trials_table.update()
                .where(t.trial_id == trial_id, t.state == TrialState.WAITING.value)
                .values(
                    state=TrialState.RUNNING.value,
                    heartbeat_at=_clock.db_now(conn) if heartbeat else None,
                )
            )
            return trial_id if updated.rowcount == 1 else None

        trial_id = self._write(claim)
        return None if trial_id is None else self.get_trial(trial_id)


__all__ = ["QueueMixin"]
