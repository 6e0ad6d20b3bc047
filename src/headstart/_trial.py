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

from headstart.exceptions import (
    InvalidParamsError,
    InvalidSettingError,
    InvalidValueError,
    ReadOnlyAttributesError,
)
from headstart.sources._tables import is_export_column
from headstart.storage import TrialRecord, TrialState

if TYPE_CHECKING:
    from headstart.storage.base import BaseStorage


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
    _storage: BaseStorage | None = field(default=None, repr=False, compare=False)
    values: tuple[float, ...] | None = None
    """The objective values, one per objective (``(value,)`` for one objective; ``None`` until
    the trial completes)."""
    constraints: tuple[float, ...] | None = None
    """A constrained study's constraint values (feasible when all are ``<= 0``), else ``None``."""

    @property
    def feasible(self) -> bool:
        """Every constraint is ``<= 0`` (always ``True`` in an unconstrained study)."""
        return self.constraints is None or all(c <= 0.0 for c in self.constraints)

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
    def _from_record(cls, r: TrialRecord, storage: BaseStorage | None = None) -> Trial:
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
            values=r.values if r.values is not None else (None if r.value is None else (r.value,)),
            constraints=r.constraints,
        )


def check_value(value: Any) -> float:
    """Validate an objective value: a finite real number (bools and strings are refused)."""
    if hasattr(value, "item") and not isinstance(value, int | float):  # numpy / torch scalars
        numel = getattr(value, "numel", None)  # torch: a method; numpy: the size attribute
        size = numel() if callable(numel) else getattr(value, "size", 1)
        if size != 1:
            raise InvalidValueError(
                f"The objective value must be one real number; got an array of shape "
                f"{tuple(getattr(value, 'shape', ()))}. Return a scalar (e.g. the mean, or the "
                "loss you optimize)."
            )
        value = value.item()
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise InvalidValueError(
            f"The objective value must be a real number; got {value!r} ({type(value).__name__}). "
            "Return a float, or tell the trial with failed=True."
        )
    try:
        value = float(value)
    except OverflowError:  # an int beyond float's range (2**1024)
        value = math.inf if value > 0 else -math.inf
    if not math.isfinite(value):
        raise InvalidValueError(
            f"The objective value must be finite; got {value!r}. If the evaluation failed, use "
            "study.tell(trial, failed=True); if it diverged, return a large finite penalty."
        )
    return value


def check_attrs(attrs: Mapping[str, Any]) -> dict[str, Any]:
    """User attributes to store: string keys, JSON values (NaN and objects are refused)."""
    import json

    if not all(isinstance(k, str) and k for k in attrs):
        raise InvalidValueError(
            f"User attribute keys must be non-empty strings; got {list(attrs)}."
        )
    try:
        json.dumps(dict(attrs), allow_nan=False)
    except (TypeError, ValueError) as e:
        raise InvalidValueError(
            f"User attributes must be JSON (numbers, strings, lists, dicts); {dict(attrs)!r} is "
            f"not ({e})."
        ) from None
    return dict(attrs)


def failure_attrs(error: BaseException) -> dict[str, str]:
    """What a failed evaluation stores: the error and its traceback (as text)."""
    trace = "".join(traceback.format_exception(type(error), error, error.__traceback__))
    reason = getattr(error, "fail_reason", "exception")  # "stopped": see _parallel.WorkerStopped
    return {"fail_reason": reason, "error": repr(error), "traceback": trace[-8000:]}


@dataclass(frozen=True)
class ImportRow:
    """One finished evaluation to import: complete (with a value) or failed (value ``None``)."""

    params: Mapping[str, Any]
    value: Any
    failed: bool = False
    user_attrs: dict[str, Any] = field(default_factory=dict)
    constraints: Any = None  # a constrained study's constraint values


@dataclass
class ImportedRows:
    """What :func:`rows_from` read: the rows to import, and the unfinished ones it skipped."""

    rows: list[ImportRow]
    skipped: dict[str, int] = field(default_factory=dict)  # state -> rows skipped

    def skipped_text(self) -> str | None:
        """``"2 running and 1 pruned rows"``-style count of what was skipped, or None."""
        if not self.skipped:
            return None
        parts = [f"{n} {state}" for state, n in sorted(self.skipped.items())]
        text = parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " and " + parts[-1]
        return f"{text} row{'s' if sum(self.skipped.values()) > 1 else ''}"


def _state_of(cell: Any) -> str:
    """An export's state cell (headstart ``complete``, Optuna ``COMPLETE``, ``TrialState.FAIL``)
    as a lower-case word; Optuna's ``fail`` is headstart's ``failed``."""
    word = str(cell).rsplit(".", 1)[-1].lower()
    return "failed" if word == "fail" else word


def _plain(value: Any) -> Any:
    """A cell as a JSON value (numpy scalars unwrapped; NaN, a missing cell, as None)."""
    if hasattr(value, "item") and not isinstance(value, str | bytes):
        value = value.item()
    if isinstance(value, float) and math.isnan(value):
        return None
    return value


def _row(
    params: Mapping,
    value: Any,
    state: Any,
    attrs: Mapping | None,
    out: ImportedRows,
    constraints: Any = None,
) -> None:
    state = "complete" if state is None else _state_of(state)
    if state not in ("complete", "failed"):
        out.skipped[state] = out.skipped.get(state, 0) + 1
        return
    failed = state == "failed"
    out.rows.append(
        ImportRow(
            params,
            None if failed else value,
            failed,
            dict(attrs or {}),
            None if failed else constraints,
        )
    )


def rows_from(trials: Any, names: list[str]) -> ImportedRows:
    """The rows of ``add_trials`` input: ``(params, value)`` pairs, dicts (``params``, ``value``,
    optionally ``state`` and ``user_attrs``, as in a JSON export) or a DataFrame. Complete and
    failed rows are kept; running, waiting and pruned ones are counted as skipped."""
    if hasattr(trials, "to_dict") and hasattr(trials, "columns"):  # a DataFrame
        return _rows_from_frame(trials, names)
    if isinstance(trials, str | bytes | Mapping) or not hasattr(trials, "__iter__"):
        raise InvalidValueError(
            "add_trials expects (params, value) pairs, {'params': ..., 'value': ...} dicts, a "
            f"DataFrame or the path of a .csv / .json file; got {type(trials).__name__} "
            f"{trials!r:.80}."
        )
    out = ImportedRows([])
    for item in trials:
        if isinstance(item, Mapping) and "params" in item:
            value = item["values"] if item.get("values") is not None else item.get("value")
            attrs, constraints = item.get("user_attrs"), item.get("constraints")
            _row(item["params"], value, item.get("state"), attrs, out, constraints)
        elif isinstance(item, tuple | list) and len(item) == 2:
            out.rows.append(ImportRow(item[0], item[1]))
        else:
            raise InvalidValueError(
                "add_trials expects (params, value) pairs, {'params': ..., 'value': ...} dicts or "
                f"a DataFrame; got {item!r}."
            )
    return out


def _rows_from_frame(frame: Any, names: list[str]) -> ImportedRows:
    """Rows of a DataFrame with a ``value`` column and one column per parameter.

    Parameters may be named ``x`` or ``params_x`` (a ``trials_dataframe()`` export, headstart's
    or Optuna's); ``user_attrs_<key>`` columns are the rows' user attributes; with a ``state``
    column, failed rows import as failed and unfinished ones are skipped. Any other column is
    refused: a misspelt parameter must not vanish silently.
    """
    columns = [str(c) for c in frame.columns]
    value_columns = ["value"] if "value" in columns else _numbered(columns, "values_")
    if not value_columns:
        raise InvalidValueError(
            f"add_trials DataFrame needs a 'value' column (or values_0, values_1, ... for several "
            f"objectives); it has {columns}."
        )
    constraint_columns = _numbered(columns, "constraints_")
    source = {}
    for name in names:
        found = [c for c in (name, f"params_{name}") if c in columns]
        if len(found) == 2:
            raise InvalidParamsError(
                f"add_trials DataFrame has both {name!r} and 'params_{name}'; keep one of them."
            )
        if found:
            source[name] = found[0]
    known = set(source.values()) | {"state", *value_columns, *constraint_columns}
    unknown = [c for c in columns if c not in known and not is_export_column(c)]
    if unknown:
        raise InvalidParamsError(
            f"add_trials DataFrame has column(s) {unknown} that are not parameters of this study "
            f"({names}); rename them to a parameter (or 'params_<name>') or drop them."
        )
    attr_columns = {
        c: c[len(USER_ATTRS_PREFIX) :] for c in columns if c.startswith(USER_ATTRS_PREFIX)
    }
    out = ImportedRows([])
    for r in frame.to_dict("records"):
        attrs = {key: _plain(r[c]) for c, key in attr_columns.items() if _plain(r[c]) is not None}
        params = {name: _plain(r[col]) for name, col in source.items()}
        value = r["value"] if value_columns == ["value"] else [r[c] for c in value_columns]
        constraints = [r[c] for c in constraint_columns] if constraint_columns else None
        _row(params, value, r.get("state"), attrs, out, constraints)
    return out


def _numbered(columns: list[str], prefix: str) -> list[str]:
    """``prefix0, prefix1, ...`` as far as they run unbroken (Optuna's ``values_<i>``)."""
    found = []
    while f"{prefix}{len(found)}" in columns:
        found.append(f"{prefix}{len(found)}")
    return found


USER_ATTRS_PREFIX = "user_attrs_"  # a trials_dataframe() column of one user attribute


__all__ = [
    "ImportRow",
    "ImportedRows",
    "Trial",
    "UserAttrs",
    "check_attrs",
    "check_value",
    "failure_attrs",
    "rows_from",
]
