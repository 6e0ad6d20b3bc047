r"""The storage interface: what the study layer needs from a storage, as a protocol.

:class:`BaseStorage` is the seam between studies and where they live, as Optuna's ``BaseStorage``
is: the study, the strategy, the sources, the CLI and the workers call only these methods and
exchange only the plain records of :mod:`headstart.storage.records`. The SQL storage
(:class:`headstart.storage.sql.Storage`: SQLite, PostgreSQL, any SQLAlchemy URL) implements it,
and :mod:`headstart.testing.storages` runs one test suite over every backend.

Guarantees every implementation gives (and the suite checks): each write is one transaction; no
two trials of a study share a number, whatever the number of processes; a finished trial is
never changed again; everything stored is JSON (nothing is unpickled).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, Protocol, runtime_checkable

from headstart.storage.records import StudyRecord, StudySummary, TrialRecord, TrialState


@runtime_checkable
class BaseStorage(Protocol):
    """Studies, trials, their queue and heartbeats, and a model cache (key -> JSON)."""

    url: str  # where the studies are, its password masked (for messages)

    @property
    def in_memory(self) -> bool:
        """Whether this is a throw-away in-memory storage."""
        ...

    def describe(self) -> str:
        """Where the studies are, for messages."""
        ...

    def close(self) -> None:
        """Release connections (the storage stays usable)."""
        ...

    # --- studies -----------------------------------------------------------------------------
    def create_study(
        self, name: str, *, direction: str, space: dict, settings: dict
    ) -> StudyRecord:
        """Create a study; :class:`~headstart.exceptions.DuplicatedStudyError` if it exists."""
        ...

    def get_study(self, name: str) -> StudyRecord:
        """The study called ``name`` (:class:`~headstart.exceptions.UnknownStudyError`)."""
        ...

    def get_study_by_id(self, study_id: int) -> StudyRecord: ...

    def get_studies(self) -> list[StudyRecord]:
        """Every study, oldest first."""
        ...

    def list_studies(self) -> list[StudySummary]:
        """A summary (counts, best value) of every study, oldest first."""
        ...

    def widen_study_space(self, study_id: int, space: dict[str, Any]) -> StudyRecord:
        """Replace a study's space by a wider one, keeping the old one in its history."""
        ...

    def set_user_attr(
        self, key: str, value: Any, *, study_id: int | None = None, trial_id: int | None = None
    ) -> None:
        """Set a JSON user attribute of a study or a trial."""
        ...

    def delete_study(self, name: str) -> None:
        """Delete a study and its trials."""
        ...

    # --- trials ------------------------------------------------------------------------------
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
        """Create a trial with the study's next number."""
        ...

    def create_trials(self, study_id: int, rows: Iterable[dict[str, Any]]) -> list[TrialRecord]:
        """Create several trials with consecutive numbers, all or none."""
        ...

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
        """Fill in a reserved trial's configuration; ``False`` (nothing written) when ``unique``
        and another trial has it.

        ``params`` is stored as its JSON text (``json.dumps``, keys in order, no
        normalization) and ``user_attrs`` replaces the trial's attributes: ``Study.ask`` builds
        the trial it returns from the reserved record and these two, without reading it back."""
        ...

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
        """Mark a running or waiting trial complete or failed
        (:class:`~headstart.exceptions.TrialAlreadyFinishedError` if it is finished); a
        multi-objective trial's ``values`` and a constrained one's ``constraints`` are written in
        the same transaction."""
        ...

    def get_trial(self, trial_id: int) -> TrialRecord: ...

    def get_trials(
        self, study_id: int, states: Sequence[TrialState] | None = None
    ) -> list[TrialRecord]:
        """The study's trials by number, optionally only those in ``states``."""
        ...

    def get_trials_changed(
        self, study_id: int, after_number: int, trial_ids: Sequence[int] = ()
    ) -> list[TrialRecord]:
        """Trials numbered above ``after_number`` and those in ``trial_ids``, by number."""
        ...

    def get_trials_of_studies(
        self, study_ids: Sequence[int], states: Sequence[TrialState] | None = None
    ) -> dict[int, list[TrialRecord]]:
        """``{study_id: trials by number}`` for many studies."""
        ...

    # --- the queue and heartbeats --------------------------------------------------------------
    def claim_waiting_trial(self, study_id: int, *, heartbeat: bool = False) -> TrialRecord | None:
        """Move the oldest waiting (enqueued) trial to running and return it."""
        ...

    def record_heartbeat(self, trial_id: int) -> bool:
        """Stamp a running trial's heartbeat; ``False`` when it is no longer running."""
        ...

    def fail_stale_trials(
        self,
        study_id: int,
        grace_seconds: float,
        *,
        reenqueue: bool = False,
        silent: bool = False,
        reason: str = "heartbeat",
    ) -> list[TrialRecord]:
        """Fail the running trials whose heartbeat is older than ``grace_seconds``."""
        ...

    # --- the model cache -------------------------------------------------------------------------
    def get_cache(self, key: str) -> dict[str, Any] | None:
        """The JSON dict stored under ``key``, or ``None``."""
        ...

    def put_cache(self, key: str, kind: str, value: dict[str, Any]) -> None:
        """Store a JSON dict under ``key``, replacing an older one."""
        ...

    def clear_cache(self, kind: str | None = None, *, key: str | None = None) -> int:
        """Delete cache entries; returns how many."""
        ...


__all__ = ["BaseStorage"]
