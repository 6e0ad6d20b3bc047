r"""A study's meta-data, frozen in the storage when the study is created.

``create_study(..., transfer_from=...)`` resolves its sources once and stores the resulting
meta-tasks as JSON in the storage's model cache, keyed by their hash. The study's settings keep
only that key, so a study reopened later (in any process) sees exactly the meta-data it was created
with, even if the source studies have grown or been deleted since.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from headstart._meta import MetaTask, data_hash
from headstart.exceptions import StorageError

META_DATA_VERSION = "meta-data/v1"


def save_meta_data(storage, tasks: Sequence[MetaTask]) -> dict:
    """Store ``tasks`` in ``storage``; returns the study-settings entry that points to them."""
    key = f"{META_DATA_VERSION}/{data_hash(tasks)}"
    if storage.get_cache(key) is None:
        storage.put_cache(
            key,
            "meta-data",
            {
                "tasks": [
                    {
                        "name": t.name,
                        "direction": t.direction,
                        "X": t.X.tolist(),
                        "y": t.y.tolist(),
                    }
                    for t in tasks
                ]
            },
        )
    return {
        "data_key": key,
        "sources": [t.name for t in tasks],
        "n_points": [int(t.n) for t in tasks],
    }


def load_meta_data(storage, key: str) -> list[MetaTask]:
    """The meta-tasks stored under ``key`` by :func:`save_meta_data`."""
    stored = storage.get_cache(key)
    if stored is None:
        raise StorageError(
            f"The meta-data of this study ({key}) are missing from {storage.url}; the model "
            "cache table was cleared. Recreate the study with transfer_from=... ."
        )
    try:
        return [
            MetaTask(
                t["name"],
                np.asarray(t["X"], dtype=np.float64).reshape(len(t["y"]), -1),
                np.asarray(t["y"], dtype=np.float64),
                t["direction"],
            )
            for t in stored["tasks"]
        ]
    except (KeyError, TypeError, ValueError) as e:  # MetaTask's own checks raise ValueErrors
        raise StorageError(
            f"The meta-data of this study ({key}) in {storage.url} are damaged ({e!r}); they "
            "are the study's sources, not a cache. Recreate the study with transfer_from=... ."
        ) from e
