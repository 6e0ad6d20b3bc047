r"""Trials as users see them, objective values, and rows imported with ``add_trials``.

:class:`Trial` is the frozen view of one stored trial; :func:`check_value` is the one rule for an
objective value; :func:`rows_from` reads ``add_trials`` input (pairs, dicts or a DataFrame,
including a ``trials_dataframe()`` export); :func:`failure_attrs` is what a failed evaluation
stores.
"""

from __future__ import annotations

import math
import traceback
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

import numpy as np

from headstart.exceptions import (
    InvalidParamsError,
    InvalidSettingError,
    InvalidValueError,
    ReadOnlyAttributesError,
)
from headstart.sources._tables import is_complete_state, is_export_column
from headstart.storage import TrialRecord, TrialState

if TYPE_CHECKING:
    from headstart.storage.sql import Storage


class UserAttrs(dict):
    """A trial's or study's user attributes as read: a dict that refuses to be changed in place.

    Changing the copy would be silently lost; ``set_user_attr(key, value)`` stores the change.
    """

    def _refuse(self, *_args: Any, **_kwargs: Any) -> None:
        raise ReadOnlyAttributesError(
            "user_attrs is a read-only copy of what is stored; use set_user_attr(key, value), "
            "which stores the attribute at once (trial.set_user_attr or study.set_user_attr)."
        )

    __setitem__ = __delitem__ = update = pop = popitem = clear = setdefault = _refuse  # type: ignore[assignment]
    __ior__ = _refuse  # type: ignore[assignment]


@dataclass(frozen=True)
class Trial:
    """One evaluation of the objective: its configuration and, once told, its result.

    ``user_attrs`` is read-only; :meth:`set_user_attr` stores an attribute (any JSON value) at
    once, also from another process while the trial runs.
    """

    number: int
    params: dict[str, Any]
    state: str = "running"
    value: float | None = None
    source: str = "ask"
    created_at: datetime | None = None
    finished_at: datetime | None = None
    user_attrs: dict[str, Any] = field(default_factory=UserAttrs)
    trial_id: int = -1
    _storage: Storage | None = field(default=None, repr=False, compare=False)

    def set_user_attr(self, key: str, value: Any) -> None:
        """Store ``user_attrs[key] = value`` (JSON values: numbers, strings, lists, dicts)."""
        if self._storage is None:
            raise InvalidSettingError(
                f"Trial {self.number} is not attached to a storage; set attributes on the trials "
                "a study returns (study.ask(), study.trials)."
            )
        self._storage.set_user_attr(key, value, trial_id=self.trial_id)
        dict.__setitem__(self.user_attrs, key, value)

    @classmethod
    def _from_record(cls, r: TrialRecord, storage: Storage | None = None) -> Trial:
        return cls(
            number=r.number,
            params=dict(r.params),
            state=TrialState(r.state).value,
            value=r.value,
            source=r.source,
            created_at=r.created_at,
            finished_at=r.finished_at,
            user_attrs=UserAttrs(r.user_attrs),
            trial_id=r.trial_id,
            _storage=storage,
        )


def check_value(value: Any) -> float:
    """Validate an objective value: a finite real number (bools and strings are refused)."""
    if isinstance(value, np.ndarray) and value.size == 1:
        value = value.item()
    if hasattr(value, "item") and not isinstance(value, int | float):  # torch / numpy scalars
        value = value.item()
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise InvalidValueError(
            f"The objective value must be a real number; got {value!r} ({type(value).__name__}). "
            "Return a float, or tell the trial with failed=True."
        )
    value = float(value)
    if not math.isfinite(value):
        raise InvalidValueError(
            f"The objective value must be finite; got {value!r}. If the evaluation failed, use "
            "study.tell(trial, failed=True); if it diverged, return a large finite penalty."
        )
    return value


def failure_attrs(error: BaseException) -> dict[str, str]:
    """What a failed evaluation stores: the error and its traceback (as text)."""
    trace = "".join(traceback.format_exception(type(error), error, error.__traceback__))
    return {"fail_reason": "exception", "error": repr(error), "traceback": trace[-8000:]}


def rows_from(trials: Any, names: list[str]) -> list[tuple[Mapping, Any]]:
    if hasattr(trials, "to_dict") and hasattr(trials, "columns"):  # a DataFrame
        return _rows_from_frame(trials, names)
    rows = []
    for item in trials:
        if isinstance(item, Mapping) and "params" in item:
            rows.append((item["params"], item.get("value")))
        elif isinstance(item, tuple | list) and len(item) == 2:
            rows.append((item[0], item[1]))
        else:
            raise InvalidValueError(
                "add_trials expects (params, value) pairs, {'params': ..., 'value': ...} dicts or "
                f"a DataFrame; got {item!r}."
            )
    return rows


def _rows_from_frame(frame: Any, names: list[str]) -> list[tuple[Mapping, Any]]:
    """Rows of a DataFrame with a ``value`` column and one column per parameter.

    Parameters may be named ``x`` or ``params_x`` (a ``trials_dataframe()`` export, headstart's
    or Optuna's); with a ``state`` column only complete rows are imported. Any other column is
    refused: a misspelt parameter must not vanish silently.
    """
    columns = [str(c) for c in frame.columns]
    if "value" not in columns:
        raise InvalidValueError(f"add_trials DataFrame needs a 'value' column; it has {columns}.")
    source = {}
    for name in names:
        found = [c for c in (name, f"params_{name}") if c in columns]
        if len(found) == 2:
            raise InvalidParamsError(
                f"add_trials DataFrame has both {name!r} and 'params_{name}'; keep one of them."
            )
        if found:
            source[name] = found[0]
    known = set(source.values()) | {"value", "state"}
    unknown = [c for c in columns if c not in known and not is_export_column(c)]
    if unknown:
        raise InvalidParamsError(
            f"add_trials DataFrame has column(s) {unknown} that are not parameters of this study "
            f"({names}); rename them to a parameter (or 'params_<name>') or drop them."
        )
    rows = []
    for r in frame.to_dict("records"):
        if "state" in r and not is_complete_state(r["state"]):
            continue  # failed / running / pruned rows of an export carry no value to import
        rows.append(({name: r[col] for name, col in source.items()}, r["value"]))
    return rows


__all__ = ["Trial", "UserAttrs", "check_value", "failure_attrs", "rows_from"]
