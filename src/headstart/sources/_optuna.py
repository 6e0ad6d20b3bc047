r"""Meta-tasks from Optuna studies: a ``optuna.Study`` object, or every study of an Optuna storage.

Optuna is optional (``pip install optuna``); it is imported only when an Optuna source is read.
Each completed trial that has every (non-fixed) parameter of the target space becomes one
observation; trials of a conditional space that lack one of them are skipped, and a source left
with none raises :class:`~headstart.exceptions.EmptySourceError`. Extra parameters of the Optuna
study are ignored (the target space decides what the model sees). Multi-objective studies are
refused: headstart's transfer models take one value per configuration.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from headstart._display import mask_url, redact, remember_url
from headstart._meta import MetaTask
from headstart.exceptions import (
    EmptySourceError,
    HeadstartError,
    InvalidParamsError,
    InvalidSettingError,
    SourceSpaceMismatchError,
    StorageError,
    UnknownStudyError,
)
from headstart.sources._task import _finite
from headstart.space import Fixed, SearchSpace

CONSTRAINTS_KEY = "constraints"  # Optuna's system attribute of a trial's constraint values


def trial_constraints(trial: Any) -> list[float] | None:
    """An Optuna trial's constraint values, ``None`` if it has none: Optuna 5's
    ``trial.set_constraint`` (``FrozenTrial.constraints``, a dict; ordered by name, so trials
    that set them in different orders agree) or a ``constraints_func``'s list (the
    ``"constraints"`` system attribute)."""
    named = getattr(trial, "constraints", None)
    if isinstance(named, Mapping):  # a constraints_func's list ("0", "1", ...), then by name
        keys = sorted(named, key=lambda k: (not k.isdigit(), int(k) if k.isdigit() else 0, k))
        return [float(named[k]) for k in keys] if named else None
    stored = trial.system_attrs.get(CONSTRAINTS_KEY)
    return None if stored is None else [float(v) for v in stored]


def is_optuna_study(obj: Any) -> bool:
    """Whether ``obj`` is an ``optuna.Study`` (checked without importing Optuna)."""
    return type(obj).__module__.startswith("optuna.") and hasattr(obj, "get_trials")


def optuna_direction(study: Any) -> str:
    """``"minimize"`` or ``"maximize"`` of a single-objective Optuna study."""
    directions = study.directions
    if len(directions) != 1:
        raise InvalidSettingError(
            f"Optuna study {study.study_name!r} has {len(directions)} objectives; headstart "
            "transfers from single-objective studies only."
        )
    return "maximize" if directions[0].name == "MAXIMIZE" else "minimize"


def from_optuna_study(study: Any, space: SearchSpace) -> MetaTask:
    """One meta-task from the completed trials of an ``optuna.Study``.

    Raises:
        InvalidSettingError: a multi-objective study.
        SourceSpaceMismatchError: a trial's value is outside the target space (bounds, choices).
        EmptySourceError: no completed trial has every parameter of the target space.
    """
    import optuna

    direction = optuna_direction(study)
    needed = [n for n, p in space.items() if not isinstance(p, Fixed)]
    configs, values = [], []
    trials = study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.COMPLETE,))
    for t in trials:
        value = _finite(t.value)
        if value is None or any(n not in t.params for n in needed):
            continue
        try:
            configs.append(space.validate({n: t.params[n] for n in space if n in t.params}))
        except InvalidParamsError as e:
            raise SourceSpaceMismatchError(
                f"Optuna study {study.study_name!r}, trial {t.number}: {e} Its trials do not fit "
                "the target search space: widen the space or leave the study out."
            ) from e
        values.append(value)
    if not configs:
        raise EmptySourceError(
            f"Optuna study {study.study_name!r} has no completed trial with all of the "
            f"parameters {needed}; leave it out of transfer_from."
        )
    return MetaTask(study.study_name, space.encode(configs), np.asarray(values), direction)


@dataclass(frozen=True)
class OptunaSource:
    """Studies of an Optuna storage, read when the target space is known (``transfer_from``).

    Create one with :func:`from_optuna`.
    """

    storage: str
    study_names: tuple[str, ...] | None = None

    def __post_init__(self) -> None:
        remember_url(self.storage)  # every message and repr shows it masked

    def __repr__(self) -> str:
        return f"OptunaSource(storage={mask_url(self.storage)!r}, study_names={self.study_names!r})"

    def studies(self) -> list[Any]:
        """The ``optuna.Study`` objects (every study of the storage when no names were given)."""
        import optuna

        url = mask_url(self.storage)
        try:
            every = optuna.get_all_study_names(self.storage)
            studies = []
            for name in every if self.study_names is None else self.study_names:
                if name not in every:
                    raise UnknownStudyError(
                        f"No Optuna study {name!r} in {url!r}; its studies are {every}."
                    )
                studies.append(optuna.load_study(study_name=name, storage=self.storage))
        except HeadstartError:
            raise
        except Exception as e:  # unreachable server, not an Optuna database, a bad URL
            raise StorageError(
                f"Cannot read the Optuna storage {url!r}: {type(e).__name__}: {redact(str(e))}. "
                "Check the URL (optuna.load_study must open it) and that the server is up."
            ) from None
        return studies

    def tasks(self, space: SearchSpace, exclude: set[str] = frozenset()) -> list[MetaTask]:
        """One meta-task per study (single-objective, with usable trials), in storage order.

        With every study of the storage, the ones that cannot serve (multi-objective, no trial
        with the target's parameters) are skipped; named studies that cannot serve raise.
        """
        tasks = []
        for study in self.studies():
            if study.study_name in exclude:
                continue
            try:
                tasks.append(from_optuna_study(study, space))
            except (EmptySourceError, InvalidSettingError, SourceSpaceMismatchError):
                if self.study_names is not None:
                    raise
        if not tasks:
            raise EmptySourceError(
                f"No study of the Optuna storage {mask_url(self.storage)!r} has completed single-objective "
                "trials with the target's parameters."
            )
        return tasks


def from_optuna(storage: str, study_name: str | Sequence[str] | None = None) -> OptunaSource:
    """Optuna studies as transfer sources: ``transfer_from=hs.sources.from_optuna(URL)``.

    Args:
        storage: An Optuna storage URL (e.g. ``sqlite:///optuna.db``); read only.
        study_name: One study, several, or ``None`` for every study in the storage.

    Example:
        >>> source = from_optuna("sqlite:///optuna.db", "svm-on-iris")
        >>> source.study_names
        ('svm-on-iris',)
    """
    if not isinstance(storage, str) or "://" not in storage:
        raise InvalidSettingError(
            f"from_optuna needs an Optuna storage URL such as 'sqlite:///optuna.db'; got "
            f"{storage!r}."
        )
    names = None
    if study_name is not None:
        names = (study_name,) if isinstance(study_name, str) else tuple(study_name)
    return OptunaSource(storage, names)


__all__ = ["OptunaSource", "from_optuna", "from_optuna_study", "is_optuna_study"]
