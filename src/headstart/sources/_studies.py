r"""Meta-tasks from stored studies: one study (:func:`from_study`) or all of a space (``"all"``)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from headstart._meta import MetaTask
from headstart.exceptions import (
    EmptySourceError,
    InvalidParamsError,
    InvalidSettingError,
    MetaDataValueError,
    SearchSpaceError,
    SourceSpaceMismatchError,
)
from headstart.sources._task import _check_space, _finite, space_difference
from headstart.space import SearchSpace
from headstart.storage import (
    DEFAULT_STORAGE_URL,
    StudyRecord,
    TrialRecord,
    TrialState,
    get_storage,
)

if TYPE_CHECKING:
    from headstart.storage.base import BaseStorage


def _task_from_records(
    record: StudyRecord, trials: Sequence[TrialRecord], space: SearchSpace
) -> MetaTask:
    done = [t for t in trials if t.state == TrialState.COMPLETE]
    if not done:
        raise EmptySourceError(
            f"Study {record.name!r} has no completed trials to transfer from. Run it first, or "
            "leave it out of transfer_from."
        )
    configs, values = [], []
    for t in done:
        value = _finite(t.value)
        if value is None:
            raise MetaDataValueError(
                f"Task {record.name!r}, trial {t.number}: value {t.value!r} is not a finite number."
            )
        try:
            configs.append(space.validate(t.params))
        except InvalidParamsError as e:
            raise SourceSpaceMismatchError(
                f"Task {record.name!r}, trial {t.number}: {e} The study's trials do not fit the "
                f"target search space."
            ) from e
        values.append(value)
    return MetaTask(record.name, space.encode(configs), np.asarray(values), record.direction)


def is_study(obj: Any) -> bool:
    """Whether ``obj`` is a study object: a ``name`` and the ``storage`` it lives in.

    Duck-typed, so this package does not import :mod:`headstart.study` (it sits below it).
    """
    from headstart.storage.base import BaseStorage

    return isinstance(getattr(obj, "name", None), str) and isinstance(
        getattr(obj, "storage", None), BaseStorage
    )


def _study_record(study: Any, storage: str | BaseStorage | None) -> tuple[StudyRecord, BaseStorage]:
    if is_study(study):
        return study.storage.get_study(study.name), study.storage
    if not isinstance(study, str):
        raise InvalidSettingError(f"Expected a study name or a Study; got {study!r}.")
    store = get_storage(storage)
    return store.get_study(study), store


def from_study(
    study: Any,
    storage: str | BaseStorage | None = DEFAULT_STORAGE_URL,
    space: SearchSpace | None = None,
) -> MetaTask:
    r"""The completed trials of a stored study as one meta-task (failed and running ones skipped).

    ``X = space.encode(params)``, ``y = values``, in the direction of that study.

    Args:
        study: A study name in ``storage``, or a :class:`~headstart.study.Study`.
        storage: Where to look the name up (ignored for a Study).
        space: The target study's search space (default: the source study's own).

    Raises:
        UnknownStudyError: no such study (the message lists the stored ones).
        SourceSpaceMismatchError: the study's search space differs from ``space``.
        EmptySourceError: the study has no completed trial.

    Example:
        >>> import headstart as hs
        >>> store = hs.storage.get_storage(None)
        >>> space = hs.SearchSpace({"x": hs.Float(0.0, 4.0)})
        >>> old = hs.create_study("old", space, storage=store, method="random", seed=0)
        >>> _ = old.tell(old.enqueue({"x": 1.0}).number, 3.0)
        >>> task = from_study("old", store, space)
        >>> task.X.tolist(), task.y.tolist(), task.y_max().tolist()
        ([[0.25]], [3.0], [-3.0])
    """
    record, store = _study_record(study, storage)
    if record.settings.get("directions"):
        raise InvalidSettingError(
            f"Study {record.name!r} has several objectives; transfer models take one value per "
            "configuration, so it cannot be a source yet. Leave it out of transfer_from."
        )
    try:
        source_space = SearchSpace.from_json(record.space)
    except SearchSpaceError as e:
        raise SourceSpaceMismatchError(
            f"Study {record.name!r} has a search space this headstart cannot read ({e})."
        ) from e
    space = source_space if space is None else space
    _check_space(source_space, space, f"Study {record.name!r}")
    trials = store.get_trials(record.study_id, states=[TrialState.COMPLETE])
    return _task_from_records(record, trials, space)


def from_storage(
    storage: str | BaseStorage | None, space: SearchSpace, exclude: Iterable[str] = ()
) -> list[MetaTask]:
    r"""Every study in ``storage`` on ``space`` (``transfer_from="all"``), oldest first.

    Studies on other search spaces and studies without completed trials are skipped; the
    studies named in ``exclude`` (the target study itself) are left out.

    Raises:
        EmptySourceError: the storage holds no other study, or none with a completed trial.
        SourceSpaceMismatchError: other studies exist but none shares the search space (the
            message says how the first few differ).
    """
    store = get_storage(storage)
    excluded = set(exclude)
    records = [  # multi-objective studies have no one value per configuration to transfer
        r
        for r in store.get_studies()
        if r.name not in excluded and not r.settings.get("directions")
    ]
    if not records:
        if store.in_memory:
            raise EmptySourceError(
                "transfer_from='all' found no other study: an in-memory storage (storage=None) "
                "has no earlier studies. Create the study in the storage that holds them (e.g. "
                "storage='sqlite:///headstart.db'), or pass meta-data as DataFrames, CSV files or "
                "MetaTask objects."
            )
        raise EmptySourceError(
            f"transfer_from='all' found no other study in {store.url}. Run related studies into "
            "this storage first, or pass meta-data as DataFrames, CSV files or MetaTask objects."
        )
    same, skipped = [], []
    for r in records:
        try:
            diff = space_difference(SearchSpace.from_json(r.space), space)
        except SearchSpaceError:
            diff = "its stored search space cannot be read"
        if diff is None:
            same.append(r)
        else:
            skipped.append(f"study {r.name!r}: {diff}")
    if not same:
        more = f" (and {len(skipped) - 3} more)" if len(skipped) > 3 else ""
        raise SourceSpaceMismatchError(
            f"transfer_from='all' found no study with this search space in {store.url}: "
            f"{'; '.join(skipped[:3])}{more}. Same-space transfer needs the same parameters, "
            f"types and bounds; method='mphd' learns from studies on any search space."
        )
    trials = store.get_trials_of_studies([r.study_id for r in same], [TrialState.COMPLETE])
    tasks = [_task_from_records(r, trials[r.study_id], space) for r in same if trials[r.study_id]]
    if not tasks:
        names = ", ".join(repr(r.name) for r in same[:10])
        raise EmptySourceError(
            f"transfer_from='all': the studies with this search space ({names}) have no "
            "completed trials yet. Run them first, or start without transfer_from."
        )
    return tasks
