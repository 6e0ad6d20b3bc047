r"""The model cache of fitted meta-task GPs (keyed by the meta-data's hash).

Meta-task GPs are fitted once per set of sources: the fit is keyed by a hash of the meta-data
(:func:`headstart._meta.data_hash`) and the model version, stored as JSON in a model
cache (:class:`~headstart._engine.protocols.ModelCache`, which a storage offers), and rebuilt from it (factorizations only, no refit) by any later study -- in any process --
that transfers from the same sources. The meta fit uses a fixed seed so the cached result does not
depend on which study fitted it first.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence

import numpy as np

from headstart._cached import cached
from headstart._engine.protocols import ModelCache
from headstart._meta import data_hash

META_GPS_VERSION = "scaml-meta-gps/v1"
META_FIT_SEED = 0


def meta_gps_key(meta_tasks: Sequence, is_cat: np.ndarray) -> str:
    """Cache key of the meta-task GPs fitted to ``meta_tasks``."""
    mask = "".join("c" if c else "n" for c in np.asarray(is_cat, dtype=bool))
    return f"{META_GPS_VERSION}/{mask}/{data_hash(meta_tasks)}"


def cached_meta_gps(
    meta_tasks: Sequence,
    is_cat: np.ndarray,
    cache: ModelCache | None = None,
    *,
    map: Callable[[Callable, list], Iterable] | None = None,
):
    """The meta GPs for ``meta_tasks``: from ``cache`` if there, else fitted and stored.

    ``map`` spreads a large fit over other processes (see :func:`~headstart._transfer.metafit.
    fit_meta_gps`).
    """
    from headstart._gp.batched import BatchedGP
    from headstart._transfer.metafit import fit_meta_gps

    key = meta_gps_key(meta_tasks, is_cat) if cache is not None else None
    stored = cached(cache, key, lambda s: BatchedGP.from_json(s, meta_tasks, is_cat), "meta GPs")
    if stored is not None:
        return stored
    meta = fit_meta_gps(meta_tasks, is_cat, seed=META_FIT_SEED, map=map)
    if cache is not None:
        cache.put_cache(key, "meta-gps", meta.to_json())
    return meta


__all__ = ["META_FIT_SEED", "cached_meta_gps", "meta_gps_key"]
