r"""Meta-data for transfer learning: results of earlier, related tasks on the same search space.

A :class:`MetaTask` is one earlier task: its evaluated configurations, encoded to the unit cube of
the study's search space, and their objective values. The builders below turn what users have
into a list of them:

* :func:`from_study` - the completed trials of a stored study (failed and running ones skipped);
* :func:`from_storage` - every study in a storage that shares the search space (``"all"``);
* :func:`from_dataframe` / :func:`from_csv` - one column per parameter, a ``value`` column and an
  optional ``task`` column (a :meth:`~headstart.study.Study.trials_dataframe` export works too:
  ``params_<name>`` columns are accepted and only ``state == "complete"`` rows are kept);
* :func:`from_arrays` - parameter dicts, or an already encoded ``n x d`` array;
* :func:`from_export` - a ``headstart studies export NAME --json FILE`` document;
* ``optuna.Study`` objects, and :func:`from_optuna` - every (or the named) study of an Optuna
  storage; Optuna's own ``trials_dataframe()`` is read as is by :func:`from_dataframe`;
* :func:`resolve_sources` - the ``transfer_from=`` argument: any mix of the above.

Conventions:

* Each task keeps its own ``direction``; models read :meth:`MetaTask.y_max`, so a *maximize*
  source serves a *minimize* study (its values are flipped there) and vice versa.
* Search spaces are compared on their structure: parameter names, types, bounds, log scaling,
  choices and fixed values. Priors and categorical weights are beliefs, not encoding, and may
  differ. A source in a different space raises :class:`SourceSpaceMismatchError` naming the
  parameter.
* Task names are unique in what :func:`resolve_sources` returns: a repeated name gets a suffix
  (``"a"``, ``"a#2"``, ``"a#3"`` in order of appearance).
* :func:`data_hash` is a SHA-256 over names, directions, ``X`` and ``y``: the key under which a
  model fitted on the meta-data is cached in the storage.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from headstart._meta import DIRECTIONS, MetaTask, _check_direction, data_hash
from headstart.exceptions import (
    InvalidSettingError,
    SourceFileError,
    SourceSpaceMismatchError,
    UnknownStudyError,
)
from headstart.sources._domains import (
    domains_from_storage,
    load_prior_model,
    resolve_prior_model,
    save_prior_model,
)
from headstart.sources._export import from_export
from headstart.sources._optuna import OptunaSource, from_optuna, from_optuna_study, is_optuna_study
from headstart.sources._studies import from_storage, from_study, is_study
from headstart.sources._tables import from_arrays, from_csv, from_dataframe
from headstart.sources._task import space_difference
from headstart.space import SearchSpace
from headstart.storage import get_storage

if TYPE_CHECKING:
    from headstart.storage.base import BaseStorage


def _is_frame(obj: Any) -> bool:
    return hasattr(obj, "columns") and hasattr(obj, "to_dict")


def _resolve_one(
    item: Any,
    space: SearchSpace,
    store: Callable[[], BaseStorage],
    direction: str,
    exclude: set[str],
) -> list[MetaTask]:
    if isinstance(item, MetaTask):
        if item.X.shape[1] != space.dim:
            raise SourceSpaceMismatchError(
                f"MetaTask {item.name!r} has {item.X.shape[1]} encoded columns but the study's "
                f"search space has {space.dim} ({[c.name for c in space.columns]})."
            )
        return [item]
    if _is_frame(item):
        return from_dataframe(item, space, direction=direction)
    if isinstance(item, OptunaSource):
        return item.tasks(space, exclude)
    if is_optuna_study(item):
        return [from_optuna_study(item, space)]
    if isinstance(item, os.PathLike | str) and str(item).lower().endswith(".json"):
        return [from_export(item, space)]
    if isinstance(item, os.PathLike):
        return from_csv(item, space, direction=direction)
    if is_study(item) or isinstance(item, str):
        name = item if isinstance(item, str) else item.name
        if name in exclude:
            raise InvalidSettingError(
                f"Study {name!r} cannot transfer from itself; leave it out of transfer_from."
            )
        if is_study(item):
            return [from_study(item, space=space)]
        if item.lower().endswith(".csv") and os.path.exists(item):
            return from_csv(item, space, direction=direction)
        try:
            return [from_study(item, store(), space)]
        except UnknownStudyError as e:
            if item.lower().endswith(".csv"):
                raise SourceFileError(
                    f"transfer_from entry {item!r} is neither an existing CSV file nor a study; "
                    "check the path (relative paths start at the working directory)."
                ) from e
            raise
    raise InvalidSettingError(
        "transfer_from entries must be study names, Study objects, MetaTask objects, pandas "
        "DataFrames, paths to .csv files, Optuna studies or hs.sources.from_optuna(URL); got "
        f"{type(item).__name__}."
    )


def _unique_names(tasks: list[MetaTask]) -> list[MetaTask]:
    seen: set[str] = set()
    out = []
    for task in tasks:
        name, k = task.name, 1
        while name in seen:
            k += 1
            name = f"{task.name}#{k}"
        seen.add(name)
        out.append(task if name == task.name else dataclasses.replace(task, name=name))
    return out


def resolve_sources(
    transfer_from: Any,
    space: SearchSpace,
    storage: str | BaseStorage | None,
    *,
    direction: str,
    exclude: Iterable[str] = (),
) -> list[MetaTask]:
    r"""The meta-tasks named by ``transfer_from`` (the argument of ``create_study``).

    Args:
        transfer_from: ``None`` or ``[]`` (no transfer); ``"all"`` (every study in ``storage`` on
            the same search space, see :func:`from_storage`); or one of, or a list mixing, study
            names, :class:`~headstart.study.Study` objects, :class:`MetaTask` objects, pandas
            DataFrames (grouped by their ``task`` column) and CSV paths (``str`` ending in ``.csv``
            or :class:`pathlib.Path`), ``optuna.Study`` objects and :func:`from_optuna` (every or
            the named study of an Optuna storage). Inside a list, ``"all"`` is a study name.
        space: The target study's search space.
        storage: Where study names are looked up.
        direction: The target's direction, given to DataFrame and CSV sources; studies and
            MetaTask objects keep their own (models read :meth:`MetaTask.y_max`).
        exclude: Names of studies left out of ``"all"`` (the target itself); naming one of them
            explicitly is an error.

    Returns:
        The tasks in the order given, names made unique (``"a"``, ``"a#2"``, ...).

    Raises:
        UnknownStudyError, SourceSpaceMismatchError, EmptySourceError, MetaDataValueError,
        SourceFileError: see the builders; InvalidSettingError: an entry of an unknown type, or
        the target study itself.
    """
    _check_direction(direction)
    excluded = set(exclude)
    opened: list[BaseStorage] = []

    def store() -> BaseStorage:
        if not opened:
            opened.append(get_storage(storage))
        return opened[0]

    if transfer_from is None:
        return []
    if isinstance(transfer_from, str) and transfer_from == "all":
        return _unique_names(from_storage(store(), space, excluded))
    single = (str, os.PathLike, MetaTask, OptunaSource)
    if isinstance(transfer_from, single) or _is_frame(transfer_from):
        items = [transfer_from]
    elif isinstance(transfer_from, Iterable):
        items = list(transfer_from)
    else:
        items = [transfer_from]  # a Study, or an error message from _resolve_one
    tasks: list[MetaTask] = []
    for item in items:
        tasks.extend(_resolve_one(item, space, store, direction, excluded))
    return _unique_names(tasks)


__all__ = [
    "DIRECTIONS",
    "MetaTask",
    "data_hash",
    "domains_from_storage",
    "from_arrays",
    "from_csv",
    "from_dataframe",
    "from_export",
    "from_optuna",
    "from_storage",
    "from_study",
    "load_prior_model",
    "resolve_prior_model",
    "resolve_sources",
    "save_prior_model",
    "space_difference",
]
