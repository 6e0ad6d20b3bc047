r"""Sources of a study with several objectives or constraints: one list of meta-tasks per output.

A multi-output study models each objective and each constraint with its own surrogate, so a
transfer method needs, per output, the earlier studies' values of *that* output. Each source
study (a headstart study, or an Optuna study) gives one :class:`~headstart._meta.MetaTask` per
output it shares with the target:

* objective ``j``: every completed trial's ``j``-th value, in the source's direction for it (so
  a source that minimized what the target maximizes is read the right way round);
* constraint ``i``: every completed trial's ``i``-th constraint value, read as is (the engine
  models constraint values unflipped, feasible when ``<= 0``): where an earlier study learned
  that a memory limit bites, the new study's constraint model knows it from the first trial.

A source must have as many objectives as the target. Constraints transfer from sources with as
many constraint values as the target's trials carry (the count is read from the sources); a
source without them serves the objectives only. ``"all"`` takes every stored study on the same
search space with that number of objectives, skipping the others.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

import numpy as np

from headstart._meta import MetaTask
from headstart.exceptions import (
    EmptySourceError,
    InvalidParamsError,
    InvalidSettingError,
    SearchSpaceError,
    SourceSpaceMismatchError,
)
from headstart.sources._optuna import OptunaSource, is_optuna_study, trial_constraints
from headstart.sources._studies import _study_record, is_study
from headstart.sources._task import _check_space, space_difference
from headstart.space import Fixed, SearchSpace
from headstart.storage import TrialState, get_storage


class _Rows:
    """A source's completed trials: configurations, objective values, constraint values."""

    def __init__(self, name: str, directions: Sequence[str]) -> None:
        self.name, self.directions = name, list(directions)
        self.configs: list[dict] = []
        self.values: list[list[float]] = []
        self.constraints: list[list[float] | None] = []

    def add(self, space: SearchSpace, params: dict, values, constraints, number: int) -> None:
        if values is None or not all(np.isfinite(values)):
            return
        try:
            self.configs.append(space.validate(params))
        except InvalidParamsError as e:
            raise SourceSpaceMismatchError(
                f"Source {self.name!r}, trial {number}: {e} Its trials do not fit the target "
                "search space."
            ) from e
        self.values.append([float(v) for v in values])
        self.constraints.append(None if constraints is None else [float(c) for c in constraints])

    def tasks(self, space: SearchSpace, k: int, r: int | None) -> list[MetaTask | None]:
        """One task per output (``None`` where this source has no data for it)."""
        if not self.configs:
            raise EmptySourceError(
                f"Source {self.name!r} has no completed trial to transfer from; leave it out."
            )
        X, Y = space.encode(self.configs), np.asarray(self.values)
        out: list[MetaTask | None] = [
            MetaTask(self.name, X, Y[:, j], self.directions[j]) for j in range(k)
        ]
        if not r:
            return out
        rows = [i for i, c in enumerate(self.constraints) if c is not None and len(c) == r]
        for i in range(r):
            task = None
            if rows:
                C = np.asarray([self.constraints[n] for n in rows])
                task = MetaTask(self.name, X[rows], C[:, i], "maximize")  # read unflipped
            out.append(task)
        return out


def _headstart_rows(record, store, space: SearchSpace) -> _Rows:
    directions = record.settings.get("directions") or [record.direction]
    rows = _Rows(record.name, directions)
    for t in store.get_trials(record.study_id, states=[TrialState.COMPLETE]):
        values = t.values if t.values is not None else (t.value,)
        rows.add(space, t.params, values, t.constraints, t.number)
    return rows


def _optuna_rows(study: Any, space: SearchSpace) -> _Rows:
    import optuna

    directions = ["maximize" if d.name == "MAXIMIZE" else "minimize" for d in study.directions]
    rows = _Rows(study.study_name, directions)
    needed = [n for n, p in space.items() if not isinstance(p, Fixed)]
    for t in study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.COMPLETE,)):
        if any(n not in t.params for n in needed):
            continue
        params = {n: t.params[n] for n in space if n in t.params}
        rows.add(space, params, t.values, trial_constraints(t), t.number)
    return rows


def resolve_output_sources(
    transfer_from: Any,
    space: SearchSpace,
    storage: Any,
    *,
    n_objectives: int,
    constrained: bool,
    exclude: Iterable[str] = (),
) -> tuple[list[list[MetaTask]], int]:
    r"""Per output (the objectives, then the constraints), the sources' meta-tasks.

    Args:
        transfer_from: ``"all"``, or one of / a list of study names, studies, ``optuna.Study``
            objects and :func:`~headstart.sources.from_optuna` storages.
        space: The target's search space.
        storage: Where study names are looked up.
        n_objectives: The target's number of objectives.
        constrained: Whether the target has constraints.
        exclude: The target's own name.

    Returns:
        ``(tasks per output, r)``: ``k + r`` lists (an output no source covers has an empty
        list), ``r`` the number of constraint values the sources carry (0 unconstrained).

    Raises:
        InvalidSettingError: a source with another number of objectives, or of a kind that
            carries one value per configuration only (DataFrames, CSV files, MetaTasks).
        SourceSpaceMismatchError, EmptySourceError, UnknownStudyError: as for one objective.
    """
    excluded = set(exclude)
    opened: list = []

    def store():
        if not opened:
            opened.append(get_storage(storage))
        return opened[0]

    every = isinstance(transfer_from, str) and transfer_from == "all"
    found = _all_rows(store(), space, n_objectives, excluded) if every else []
    if not every:
        items = transfer_from if isinstance(transfer_from, list | tuple) else [transfer_from]
        for item in items:
            found.extend(_rows_of(item, space, store, excluded))
    seen: dict[str, int] = {}
    for rows in found:  # unique names: each output's tasks of one source are told apart by them
        seen[rows.name] = seen.get(rows.name, 0) + 1
        if seen[rows.name] > 1:
            rows.name = f"{rows.name}#{seen[rows.name]}"
    for rows in found:
        if len(rows.directions) != n_objectives:
            raise InvalidSettingError(
                f"Source {rows.name!r} has {len(rows.directions)} objective(s); this study has "
                f"{n_objectives}. Multi-output transfer needs sources with the same objectives."
            )
    r = 0
    if constrained:
        counts = {len(c) for rows in found for c in rows.constraints if c is not None}
        if len(counts) > 1:
            raise InvalidSettingError(
                f"The sources carry different numbers of constraint values ({sorted(counts)}); "
                "keep the sources whose constraints match this study's."
            )
        r = counts.pop() if counts else 0
    per_output: list[list[MetaTask]] = [[] for _ in range(n_objectives + r)]
    for rows in found:
        for j, task in enumerate(rows.tasks(space, n_objectives, r)):
            if task is not None:
                per_output[j].append(task)
    return per_output, r


def _all_rows(store, space: SearchSpace, k: int, excluded: set[str]) -> list[_Rows]:
    out = []
    for record in store.get_studies():
        if record.name in excluded:
            continue
        if len(record.settings.get("directions") or [record.direction]) != k:
            continue
        try:
            if space_difference(SearchSpace.from_json(record.space), space) is not None:
                continue
        except SearchSpaceError:
            continue
        rows = _headstart_rows(record, store, space)
        if rows.configs:
            out.append(rows)
    if not out:
        raise EmptySourceError(
            f"transfer_from='all' found no other study with {k} objective(s), this search space "
            "and completed trials."
        )
    return out


def _rows_of(item: Any, space: SearchSpace, store: Callable, excluded: set[str]) -> list[_Rows]:
    if isinstance(item, OptunaSource):
        return [_optuna_rows(s, space) for s in item.studies() if s.study_name not in excluded]
    if is_optuna_study(item):
        return [_optuna_rows(item, space)]
    if is_study(item) or isinstance(item, str):
        name = item if isinstance(item, str) else item.name
        if name in excluded:
            raise InvalidSettingError(
                f"Study {name!r} cannot transfer from itself; leave it out of transfer_from."
            )
        record, found_in = _study_record(item, store() if isinstance(item, str) else None)
        _check_space(SearchSpace.from_json(record.space), space, f"Study {record.name!r}")
        return [_headstart_rows(record, found_in, space)]
    raise InvalidSettingError(
        f"A study with several objectives or constraints transfers from studies (headstart or "
        f"Optuna), which keep every output's values; got {type(item).__name__} {item!r:.60}."
    )


__all__ = ["resolve_output_sources"]
