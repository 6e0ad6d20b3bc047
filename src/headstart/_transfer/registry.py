r"""Which surrogate each transfer method uses, and the storage cache of fitted meta-task GPs.

Meta-task GPs are fitted once per set of sources: the fit is keyed by a hash of the meta-data
(:func:`headstart.sources.data_hash`) and the model version, stored as JSON in the storage's model
cache, and rebuilt from it (factorizations only, no refit) by any later study -- in any process --
that transfers from the same sources. The meta fit uses a fixed seed so the cached result does not
depend on which study fitted it first.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

TRANSFER_METHODS = ("scaml", "rgpe", "stackgp", "mtgp")
META_GPS_VERSION = "scaml-meta-gps/v1"
META_FIT_SEED = 0


def meta_gps_key(meta_tasks: Sequence, is_cat: np.ndarray) -> str:
    """Cache key of the meta-task GPs fitted to ``meta_tasks``."""
    from headstart.sources import data_hash

    mask = "".join("c" if c else "n" for c in np.asarray(is_cat, dtype=bool))
    return f"{META_GPS_VERSION}/{mask}/{data_hash(meta_tasks)}"


def cached_meta_gps(meta_tasks: Sequence, is_cat: np.ndarray, cache=None):
    """The meta GPs for ``meta_tasks``: from ``cache`` (a Storage) if there, else fitted and stored."""
    from headstart._transfer.metafit import MetaGPs, fit_meta_gps

    key = meta_gps_key(meta_tasks, is_cat) if cache is not None else None
    if cache is not None:
        stored = cache.get_cache(key)
        if stored is not None:
            return MetaGPs.from_json(stored, meta_tasks, is_cat)
    meta = fit_meta_gps(meta_tasks, is_cat, seed=META_FIT_SEED)
    if cache is not None:
        cache.put_cache(key, "meta-gps", meta.to_json())
    return meta


def make_surrogate(
    method: str,
    meta_tasks: Sequence,
    is_cat: np.ndarray,
    *,
    seed: int = 0,
    deterministic: bool = False,
    cache=None,
):
    """Build the surrogate of ``method`` (one of :data:`TRANSFER_METHODS`)."""
    if method == "scaml":
        from headstart._transfer.scaml import ScaML

        meta = cached_meta_gps(meta_tasks, is_cat, cache)
        return ScaML(meta_tasks, is_cat, seed=seed, deterministic=deterministic, meta=meta)
    if method == "rgpe":
        from headstart._transfer.rgpe import RGPE

        meta = cached_meta_gps(meta_tasks, is_cat, cache)  # RGPE's base models are the same GPs
        return RGPE(meta_tasks, is_cat, seed=seed, deterministic=deterministic, meta=meta)
    if method == "stackgp":
        from headstart._transfer.stackgp import StackGP

        return StackGP(meta_tasks, is_cat, seed=seed, deterministic=deterministic)
    if method == "mtgp":
        from headstart._transfer.mtgp import MultiTaskGPSurrogate

        return MultiTaskGPSurrogate(meta_tasks, is_cat, seed=seed, deterministic=deterministic)
    raise ValueError(f"Unknown transfer method {method!r}; expected one of {TRANSFER_METHODS}.")
