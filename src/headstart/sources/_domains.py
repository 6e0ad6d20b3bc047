r"""MPHD's super-dataset from stored studies on *any* search space, and its pre-trained prior.

Studies are grouped by search space (same structure: :func:`space_difference` is ``None``); each
group is one :class:`~headstart.mphd.Domain` whose sub-datasets are the studies' completed trials,
encoded in that space. :func:`resolve_prior_model` pre-trains on them once and keeps the prior in
the storage's model cache under the hash of the data and settings, so a second study on the same
sources (or a parallel worker) loads it instead of training again.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from headstart._cached import cached
from headstart.exceptions import (
    EmptySourceError,
    InvalidParamsError,
    InvalidSettingError,
    PriorModelError,
    SearchSpaceError,
)
from headstart.mphd import Domain, PriorModel, pretrain
from headstart.sources._task import _finite, space_difference
from headstart.space import SearchSpace
from headstart.storage import DEFAULT_STORAGE_URL, TrialState, get_storage

if TYPE_CHECKING:
    from headstart.storage.base import BaseStorage

PRIOR_KEY = "mphd-prior/v1"
NAMED_PRIOR_KEY = "mphd-prior/name"


def _study_data(space: SearchSpace, trials) -> tuple[np.ndarray, np.ndarray] | None:
    configs, values = [], []
    for t in trials:
        value = _finite(t.value)
        if value is None:
            continue
        try:
            configs.append(space.validate(t.params))
        except InvalidParamsError:  # a trial the stored space no longer accepts: not usable
            continue
        values.append(value)
    if not values:
        return None
    return space.encode(configs), np.asarray(values, dtype=np.float64)


def domains_from_storage(
    storage: str | BaseStorage | None = DEFAULT_STORAGE_URL,
    names: Iterable[str] | None = None,
    exclude: Iterable[str] = (),
) -> list[Domain]:
    r"""The studies of ``storage`` (all, or those ``names``) as MPHD domains, one per space.

    Studies on the same search space are one domain with one sub-dataset each; studies without
    completed trials are skipped, and so are the ``exclude`` d names.

    Raises:
        EmptySourceError: no (other) study with completed trials, or an unknown name.
    """
    store = get_storage(storage)
    excluded = set(exclude)
    records = [r for r in store.get_studies() if r.name not in excluded]
    if names is not None:
        wanted = list(names)
        by_name = {r.name: r for r in records}
        missing = [n for n in wanted if n not in by_name]
        if missing:
            raise EmptySourceError(
                f"No study named {missing[0]!r} in {store.url}; transfer_from lists study names "
                "or 'all'."
            )
        records = [by_name[n] for n in wanted]
    trials = store.get_trials_of_studies([r.study_id for r in records], [TrialState.COMPLETE])
    groups: list[tuple[SearchSpace, list[str], list]] = []
    for r in records:
        try:
            space = SearchSpace.from_json(r.space)
        except SearchSpaceError:
            continue
        data = _study_data(space, trials[r.study_id])
        if data is None:
            continue
        for group_space, group_names, group_data in groups:
            if space_difference(space, group_space) is None:
                group_names.append(r.name)
                group_data.append(data)
                break
        else:
            groups.append((space, [r.name], [data]))
    if not groups:
        where = store.describe() + (", which has no earlier studies" if store.in_memory else "")
        raise EmptySourceError(
            f"transfer_from found no (other) study with completed trials in {where}. Run "
            "earlier studies into this storage first (or create the study in the storage that "
            "holds them), or pass prior_model=... ."
        )
    return [
        Domain(
            "+".join(group_names[:3])
            + (f"+{len(group_names) - 3} more" if len(group_names) > 3 else ""),
            tuple(c.kind for c in space.columns),
            tuple(group_data),
        )
        for space, group_names, group_data in groups
    ]


def _domains(transfer_from: Any, store: BaseStorage, exclude: Sequence[str]) -> list[Domain]:
    if isinstance(transfer_from, str) and transfer_from == "all":
        return domains_from_storage(store, None, exclude)
    items = [transfer_from] if isinstance(transfer_from, str | Domain) else list(transfer_from)
    domains = [item for item in items if isinstance(item, Domain)]
    names = [item for item in items if isinstance(item, str)]
    other = [item for item in items if not isinstance(item, str | Domain)]
    if other:
        raise InvalidSettingError(
            "method='mphd' takes transfer_from='all', study names or hs.mphd.Domain objects; "
            f"got {type(other[0]).__name__}."
        )
    if names:
        domains += domains_from_storage(store, names, exclude)
    return domains


# Bumped when pre-training gives a different prior for the same data and settings (2: step 1's
# subsample and blocks, step 2's best-iterate tracking), so a storage's cached prior is not reused
PRETRAINING = 2


def _data_key(domains: Sequence[Domain], settings: dict) -> str:
    h = hashlib.sha256(json.dumps(settings, sort_keys=True).encode())
    for d in domains:
        h.update(json.dumps([d.name, list(d.kinds)]).encode())
        for X, y in d.datasets:
            h.update(np.ascontiguousarray(X, dtype=np.float64).tobytes())
            h.update(np.ascontiguousarray(y, dtype=np.float64).tobytes())
    return f"{PRIOR_KEY}/{h.hexdigest()[:32]}"


def load_prior_model(
    reference: str | Path | PriorModel, store: BaseStorage | None = None
) -> PriorModel:
    r"""A prior from a :class:`PriorModel`, a JSON file, or a name saved in ``store``."""
    if isinstance(reference, PriorModel):
        return reference
    path = Path(reference)
    if path.suffix == ".json" or path.exists():
        return PriorModel.load(path)
    stored = None if store is None else store.get_cache(f"{NAMED_PRIOR_KEY}/{reference}")
    if stored is None:
        raise PriorModelError(
            f"prior_model={str(reference)!r} is neither a prior file nor a prior saved by name in "
            "this storage. Pass a path to a file written by PriorModel.save(), or save one with "
            "headstart.sources.save_prior_model(prior, name, storage)."
        )
    return PriorModel.from_json(stored)


def save_prior_model(prior: PriorModel, name: str, store: BaseStorage) -> str:
    """Keep ``prior`` in ``store``'s model cache under ``name`` (for ``prior_model=name``)."""
    if not isinstance(name, str) or not name.strip() or "/" in name:
        raise InvalidSettingError(
            f"A prior's name must be a non-empty string without '/'; got {name!r}."
        )
    key = f"{NAMED_PRIOR_KEY}/{name}"
    store.put_cache(key, "mphd-prior", prior.to_json())
    return key


def check_prior_arguments(transfer_from: Any, prior_model: Any) -> None:
    """Raise :class:`InvalidSettingError` unless exactly one of the two is given (MPHD)."""
    if (transfer_from is None) == (prior_model is None):
        raise InvalidSettingError(
            "method='mphd' needs exactly one of transfer_from=... (earlier studies on any search "
            "space, or 'all': a prior is pre-trained on them) and prior_model=... (a saved prior "
            "file or name)."
        )


def resolve_prior_model(
    transfer_from: Any,
    prior_model: Any,
    store: BaseStorage,
    *,
    exclude: Sequence[str] = (),
    lengthscale: str = "network",
    seed: int = 0,
) -> str:
    r"""The model-cache key of the MPHD prior a study uses (pre-trained here if new).

    Raises:
        InvalidSettingError: both or neither of ``transfer_from`` / ``prior_model``.
        PriorModelError: an unreadable prior file or unknown prior name.
        PretrainingDataError: too few usable spaces to pre-train on.
    """
    check_prior_arguments(transfer_from, prior_model)
    if prior_model is not None:
        prior = load_prior_model(prior_model, store)
        key = f"{PRIOR_KEY}/{prior.to_json()['sha256'][:32]}"
    else:
        domains = _domains(transfer_from, store, exclude)
        settings = {"lengthscale": lengthscale, "seed": seed, "pretraining": PRETRAINING}
        key = _data_key(domains, settings)
        if cached(store, key, PriorModel.from_json, "MPHD prior") is not None:
            return key  # a damaged one is dropped (with a warning) and pre-trained again
        from headstart._progress import StagesProgress

        with StagesProgress() as bar:
            prior = pretrain(domains, lengthscale=lengthscale, seed=seed, progress=bar.update)
    if cached(store, key, PriorModel.from_json, "MPHD prior") is None:
        store.put_cache(key, "mphd-prior", prior.to_json())
    return key


def stored_prior_model(cache, key: str) -> PriorModel:
    """The prior a study's settings point to (``key`` from :func:`resolve_prior_model`)."""
    stored = None if cache is None else cache.get_cache(key)
    if stored is None:
        raise PriorModelError(
            f"The MPHD prior of this study ({key}) is missing from the storage's model cache; "
            "recreate the study with transfer_from=... or prior_model=... ."
        )
    return PriorModel.from_json(stored)


__all__ = [
    "domains_from_storage",
    "load_prior_model",
    "resolve_prior_model",
    "save_prior_model",
    "stored_prior_model",
]
