"""Plain records that the storage hands to the study layer (no SQL types leak out)."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Any


class TrialState(StrEnum):
    """Life cycle of a trial: ``waiting`` (enqueued) → ``running`` → ``complete`` | ``failed``."""

    WAITING = "waiting"
    RUNNING = "running"
    COMPLETE = "complete"
    FAILED = "failed"

    @property
    def is_finished(self) -> bool:
        return self in (TrialState.COMPLETE, TrialState.FAILED)


@dataclass(frozen=True)
class StudyRecord:
    """A stored study: its name, direction, search space and settings (both JSON dicts)."""

    study_id: int
    name: str
    direction: str
    space: dict[str, Any]
    settings: dict[str, Any]
    created_at: datetime
    user_attrs: dict[str, Any] = field(default_factory=dict)
    space_history: list[dict[str, Any]] = field(default_factory=list)
    """Earlier search spaces, oldest first: ``{"space": ..., "replaced_at": ISO time}``."""


@dataclass(frozen=True)
class StudySummary:
    """One line of ``headstart studies list``."""

    name: str
    direction: str
    n_trials: int
    n_complete: int
    best_value: float | None
    created_at: datetime


@dataclass(frozen=True)
class TrialRecord:
    """A stored trial. ``number`` counts from 0 within its study; ``trial_id`` is global."""

    trial_id: int
    study_id: int
    number: int
    state: TrialState
    params: dict[str, Any]
    value: float | None
    source: str
    created_at: datetime
    finished_at: datetime | None
    user_attrs: dict[str, Any] = field(default_factory=dict)
    heartbeat_at: datetime | None = None
    values: tuple[float, ...] | None = None
    """A multi-objective trial's values (``value`` is the first); ``None`` otherwise."""
    constraints: tuple[float, ...] | None = None
    """A constrained trial's constraint values (feasible when all are ``<= 0``), or ``None``."""
