r"""Meta-tasks from tables: DataFrames, CSV files and arrays.

A table has one column per parameter (``<name>`` or ``params_<name>``), a value column and an
optional task column; a :meth:`~headstart.study.Study.trials_dataframe` export is read as is (only
its ``state == "complete"`` rows are kept). Error messages name the task and the 0-based row.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from headstart._meta import MetaTask, _check_direction
from headstart.exceptions import (
    EmptySourceError,
    InvalidParamsError,
    InvalidSettingError,
    MetaDataValueError,
    SourceFileError,
    SourceSpaceMismatchError,
)
from headstart.sources._task import _finite
from headstart.space import RESERVED_NAMES, Categorical, Fixed, Float, Int, SearchSpace
from headstart.storage import TrialState

if TYPE_CHECKING:
    import pandas as pd

#: Columns of a ``trials_dataframe()`` export (headstart's or Optuna's) that are not parameters.
EXPORT_COLUMNS = RESERVED_NAMES - {"value"}
EXPORT_PREFIXES = ("user_attrs_", "system_attrs_", "seconds_", "intermediate_values")


def is_export_column(column: str) -> bool:
    """Whether ``column`` is export metadata (``number``, ``duration``, ``user_attrs_*`` ...)."""
    return column in EXPORT_COLUMNS or column.startswith(EXPORT_PREFIXES)


def is_complete_state(state: Any) -> bool:
    """Whether an export's ``state`` cell means complete (headstart ``complete``, Optuna
    ``COMPLETE`` or ``TrialState.COMPLETE``)."""
    return str(state).rsplit(".", 1)[-1].lower() == TrialState.COMPLETE.value


def _param_columns(columns: list, space: SearchSpace, label: str, skip: set) -> dict[str, Any]:
    """``{parameter: column}``; refuses missing parameters and unknown columns."""
    found, missing = {}, []
    for name, p in space.items():
        if name in columns:
            found[name] = name
        elif f"params_{name}" in columns:
            found[name] = f"params_{name}"
        elif not isinstance(p, Fixed):
            missing.append(name)
    extra = [
        c for c in columns if c not in set(found.values()) | skip and not is_export_column(str(c))
    ]
    if missing or extra:
        diffs = [f"parameter {n!r} of the study has no column" for n in missing]
        diffs += [f"column {c!r} is not a parameter of the study" for c in extra]
        raise SourceSpaceMismatchError(
            f"DataFrame {label!r} does not match the study's search space {list(space)}: "
            f"{'; '.join(diffs)}. Name one column per parameter (drop columns that are not "
            f"parameters)."
        )
    return found


def _cell(p: Any, value: Any) -> Any:
    """Undo what DataFrames and CSV files do to values (NaN for None, "1" read as 1, ...)."""
    if hasattr(value, "item") and not isinstance(value, str):
        value = value.item()
    if isinstance(p, Categorical) and p.index(value) < 0:
        if isinstance(value, float) and math.isnan(value) and None in p.choices:
            return None
        numeric = isinstance(value, int | float) and not isinstance(value, bool)
        hits = [
            c
            for c in p.choices
            if str(c) == str(value)
            or (numeric and isinstance(c, int | float) and not isinstance(c, bool) and c == value)
        ]
        if len(hits) == 1:
            return hits[0]
    return value


_CSV_FILE = "headstart_csv_file"  # DataFrame.attrs key: the file a frame was read from


def _frame_tasks(
    df: Any,
    space: SearchSpace,
    *,
    task_column: str,
    value_column: str,
    direction: str,
    name: str,
) -> list[MetaTask]:
    _check_direction(direction)
    csv_file = df.attrs.get(_CSV_FILE) if hasattr(df, "attrs") else None

    def where(i: int) -> str:  # the 0-based row, and its line when the frame was read by from_csv
        return f"row {i}" + (f" (line {i + 2} of {csv_file})" if csv_file else "")

    columns = list(df.columns)
    if value_column not in columns:
        raise MetaDataValueError(
            f"DataFrame {name!r} has no {value_column!r} column of objective values; its columns "
            f"are {columns}. Rename the column or pass value_column=..."
        )
    grouped = task_column in columns and task_column not in space
    params = _param_columns(columns, space, name, {task_column, value_column})
    filter_state = "state" in columns and "state" not in space
    groups: dict[str, tuple[list, list]] = {}
    for i, row in enumerate(df.to_dict("records")):
        if filter_state and not is_complete_state(row["state"]):
            continue
        task = str(row[task_column]) if grouped else name
        value = _finite(row[value_column])
        if value is None:
            raise MetaDataValueError(
                f"Task {task!r}, {where(i)}: {value_column!r} is {row[value_column]!r}; meta-data "
                "values must be finite numbers. Drop the row (a failed evaluation has no value)."
            )
        config = {}
        for n, col in params.items():
            p = space[n]
            v = _cell(p, row[col])
            if isinstance(p, Float | Int) and _finite(v) is None:
                raise MetaDataValueError(
                    f"Task {task!r}, {where(i)}: parameter {n!r} is {v!r}, not a finite number. "
                    "Fix or drop the row."
                )
            config[n] = v
        try:
            config = space.validate(config)
        except InvalidParamsError as e:
            raise SourceSpaceMismatchError(
                f"Task {task!r}, {where(i)}: {e} The meta-data do not fit the study's search "
                f"space: drop the row or widen the space."
            ) from e
        configs, values = groups.setdefault(task, ([], []))
        configs.append(config)
        values.append(value)
    if not groups:
        raise EmptySourceError(
            f"DataFrame {name!r} has no rows{' with state complete' if filter_state else ''}; "
            "pass at least one evaluated configuration, or leave it out of transfer_from."
        )
    return [
        MetaTask(task, space.encode(configs), np.asarray(values), direction)
        for task, (configs, values) in groups.items()
    ]


def from_dataframe(
    df: pd.DataFrame,
    space: SearchSpace,
    *,
    task_column: str = "task",
    value_column: str = "value",
    direction: str = "minimize",
    name: str = "dataframe",
) -> list[MetaTask]:
    r"""Meta-tasks from a DataFrame: one column per parameter, values, and optionally tasks.

    Each row is validated with :meth:`SearchSpace.validate` and encoded. Rows are grouped by
    ``task_column`` in order of first appearance; without that column the frame is one task
    called ``name``. Columns may be named ``<param>`` or ``params_<param>`` (the export format of
    :meth:`Study.trials_dataframe`, whose rows are kept only when ``state == "complete"``).

    Args:
        df: The evaluations.
        space: The target study's search space.
        task_column: Column naming the task of each row.
        value_column: Column of objective values.
        direction: How the values are to be read (the same for every task).
        name: Task name when there is no ``task_column``.

    Raises:
        SourceSpaceMismatchError: a parameter has no column, a column is not a parameter, or a
            value is out of bounds / not a choice (the task and 0-based row are named).
        MetaDataValueError: a NaN, inf or non-numeric value (the task and row are named).
        EmptySourceError: no rows.

    Example:
        >>> import headstart as hs, pandas as pd
        >>> space = hs.SearchSpace({"x": hs.Float(0.0, 2.0)})
        >>> df = pd.DataFrame({"task": ["a", "b", "a"], "x": [0.0, 1.0, 2.0], "value": [1, 2, 3]})
        >>> [(t.name, t.X.ravel().tolist()) for t in from_dataframe(df, space)]
        [('a', [0.0, 1.0]), ('b', [0.5])]
    """
    if not (hasattr(df, "columns") and hasattr(df, "to_dict")):
        raise InvalidSettingError(f"from_dataframe needs a pandas DataFrame; got {type(df)}.")
    return _frame_tasks(
        df,
        space,
        task_column=task_column,
        value_column=value_column,
        direction=direction,
        name=name,
    )


def read_csv_file(path: str | os.PathLike) -> Any:
    """A CSV file as a DataFrame whose error messages can name the file's lines.

    Raises:
        SourceFileError: the file is missing, binary or not CSV.
        EmptySourceError: the file is empty (no header row).
    """
    import pandas as pd

    path = Path(path)
    try:
        df = pd.read_csv(path)
    except FileNotFoundError as e:
        raise SourceFileError(f"No CSV file at {str(path)!r}; check the path.") from e
    except pd.errors.EmptyDataError as e:
        raise EmptySourceError(f"CSV file {str(path)!r} is empty; it needs a header row.") from e
    except (pd.errors.ParserError, UnicodeDecodeError, OSError, ValueError) as e:
        raise SourceFileError(f"Cannot read {str(path)!r} as CSV: {e}") from e
    df.attrs[_CSV_FILE] = path.name  # error messages give the line of the file
    return df


def from_csv(
    path: str | os.PathLike,
    space: SearchSpace,
    *,
    task_column: str = "task",
    value_column: str = "value",
    direction: str = "minimize",
    name: str | None = None,
) -> list[MetaTask]:
    r"""Meta-tasks from a CSV file, read with pandas; see :func:`from_dataframe`.

    Without a task column the file is one task named after the file (its stem). Error messages
    give the 0-based row and the line of the file.

    Raises:
        SourceFileError: the file is missing or is not CSV.
    """
    path = Path(path)
    df = read_csv_file(path)
    return from_dataframe(
        df,
        space,
        task_column=task_column,
        value_column=value_column,
        direction=direction,
        name=path.stem if name is None else name,
    )


def from_arrays(
    name: str,
    X: Sequence[Mapping[str, Any]] | np.ndarray,
    y: Sequence[float] | np.ndarray,
    space: SearchSpace | None = None,
    direction: str = "minimize",
) -> MetaTask:
    r"""One meta-task from configurations and values.

    Args:
        name: Task name.
        X: A list of parameter dicts (validated and encoded with ``space``), or an ``n x d`` array
            already encoded to ``[0, 1]^d`` (``d = space.dim`` when ``space`` is given).
        y: ``n`` finite objective values.
        space: The target study's search space (required for dicts).
        direction: How ``y`` is to be read.

    Raises:
        EmptySourceError: no rows.
        SourceSpaceMismatchError: a dict does not fit ``space``, or ``X`` has the wrong width.
        MetaDataValueError: NaN, inf, non-numbers, encoded values outside ``[0, 1]``, or a
            different number of rows in ``X`` and ``y``.

    Example:
        >>> import headstart as hs
        >>> space = hs.SearchSpace({"x": hs.Float(0.0, 2.0)})
        >>> from_arrays("t", [{"x": 0.5}], [1.0], space).X.tolist()
        [[0.25]]
    """
    _check_direction(direction)
    rows = list(X) if not isinstance(X, np.ndarray) else X
    values = [v.item() if isinstance(v, np.generic) else v for v in np.asarray(y).reshape(-1)]
    if len(rows) == 0 or len(values) == 0:
        raise EmptySourceError(f"Task {name!r} has no evaluations; pass at least one row.")
    if len(rows) != len(values):
        raise MetaDataValueError(
            f"Task {name!r}: X has {len(rows)} rows but y has {len(values)} values; pass one value "
            "per configuration."
        )
    for i, v in enumerate(values):
        if _finite(v) is None:
            raise MetaDataValueError(
                f"Task {name!r}, row {i}: y is {v!r}; meta-data values must be finite numbers."
            )
    if isinstance(rows[0], Mapping):
        if space is None:
            raise InvalidSettingError(
                f"Task {name!r}: parameter dicts need space= to be encoded; pass the study's "
                "search space, or encode them yourself with space.encode(...)."
            )
        configs = []
        for i, params in enumerate(rows):
            try:
                configs.append(space.validate(params))
            except InvalidParamsError as e:
                raise SourceSpaceMismatchError(
                    f"Task {name!r}, row {i}: {e} The meta-data do not fit the study's search "
                    f"space."
                ) from e
        U = space.encode(configs)
    else:
        U = _encoded(name, rows, space)
    return MetaTask(name, U, np.asarray(values, dtype=np.float64), direction)


def _encoded(name: str, rows: Any, space: SearchSpace | None) -> np.ndarray:
    try:
        U = np.asarray(rows, dtype=np.float64)
    except (TypeError, ValueError) as e:
        raise MetaDataValueError(
            f"Task {name!r}: X must be parameter dicts or a numeric n x d array ({e})."
        ) from e
    if U.ndim != 2:
        raise MetaDataValueError(f"Task {name!r}: X must be n x d; got shape {U.shape}.")
    if space is not None and U.shape[1] != space.dim:
        raise SourceSpaceMismatchError(
            f"Task {name!r}: X has {U.shape[1]} columns but the study's search space encodes to "
            f"{space.dim} ({[c.name for c in space.columns]})."
        )
    bad = ~np.isfinite(U) | (U < 0.0) | (U > 1.0)
    if bad.any():
        i, j = (int(k) for k in np.argwhere(bad)[0])
        raise MetaDataValueError(
            f"Task {name!r}, row {i}, column {j}: {float(U[i, j])!r} is not in [0, 1]. Encoded X must be "
            "finite and in the unit cube: encode with space.encode(...) or pass parameter dicts."
        )
    return U
