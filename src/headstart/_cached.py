r"""Reading model-cache entries that may be damaged.

The storage's ``model_cache`` rows (a surrogate's warm-start state, fitted meta GPs, a trained
feature basis, a pre-trained MPHD prior) are caches: each can be rebuilt from the study's data.
One that fails to parse or validate -- a truncated write, a hand edit, another version's
layout -- must not disable the study, so :func:`cached` drops it with a warning and the caller
rebuilds it.
"""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Callable
from typing import Any, TypeVar

from headstart.exceptions import HeadstartWarning

T = TypeVar("T")


def drop(cache: Any, key: str, what: str, error: BaseException) -> None:
    """Warn that the entry ``key`` was unusable and delete it (best effort)."""
    warnings.warn(
        f"The cached {what} {key!r} was unusable ({type(error).__name__}: {str(error)[:200]}); "
        "it was dropped and is rebuilt.",
        HeadstartWarning,
        stacklevel=4,
    )
    clear = getattr(cache, "clear_cache", None)
    if clear is not None:
        with contextlib.suppress(Exception):
            clear(key=key)


def cached(cache: Any, key: str, parse: Callable[[Any], T], what: str) -> T | None:
    """``parse(entry)`` of the entry ``key`` of ``cache``; ``None`` when there is none, or when
    it fails to parse (then it is dropped with a :class:`HeadstartWarning`)."""
    if cache is None:
        return None
    stored = cache.get_cache(key)
    if stored is None:
        return None
    try:
        return parse(stored)
    except Exception as e:  # any damage: the caller rebuilds it
        drop(cache, key, what, e)
        return None
