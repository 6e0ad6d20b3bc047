r"""``study.optimize(..., n_workers=k)``: k local worker processes sharing the study's storage.

Each worker is a fresh process (``spawn``) that loads the study by name from the same storage URL
and runs the ordinary ask / evaluate / tell loop for its share of the trials; the storage keeps
them from duplicating work (reserve-then-suggest) and heartbeats, when the study has them, fail
the trials of a worker that dies. The parent shows the progress by polling the storage and
re-raises the first exception a worker did not catch.
"""

from __future__ import annotations

import multiprocessing as mp
import pickle
import time
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_EXCEPTION, ProcessPoolExecutor, wait
from typing import Any

from headstart.exceptions import InvalidSettingError

_POLL_SECONDS = 0.25


def check_parallel(study: Any, func: Callable, callbacks: Sequence[Callable]) -> str:
    """The storage URL the workers will open; refuses what cannot run in other processes."""
    from headstart.storage.sql import MEMORY_URL

    url = study.storage._raw_url
    if url in (MEMORY_URL, "sqlite://"):
        raise InvalidSettingError(
            "n_workers > 1 needs a storage the worker processes can share, such as "
            "'sqlite:///study.db' or a PostgreSQL URL; this study is in memory (storage=None)."
        )
    for label, obj in (("objective", func), ("callbacks", list(callbacks))):
        try:
            pickle.dumps(obj)
        except Exception as e:
            raise InvalidSettingError(
                f"The {label} cannot be sent to worker processes ({type(e).__name__}: {e}). "
                "Define it as a module-level function (not a lambda or a closure), or use "
                "n_workers=1."
            ) from None
    return url


def optimize_in_processes(
    study: Any,
    func: Callable,
    n_trials: int,
    *,
    n_workers: int,
    timeout: float | None,
    catch: tuple,
    callbacks: Sequence[Callable],
    show_progress: bool,
    worker: Callable[..., Any],
) -> None:
    """Split ``n_trials`` over ``n_workers`` spawned processes and wait for them.

    ``worker(url, name, func, n_trials, timeout, catch, callbacks)`` is a module-level function
    that runs one process's loop (the study layer passes it, so this module needs no study).
    """
    from headstart._progress import TrialProgress

    url = check_parallel(study, func, callbacks)
    shares = [n_trials // n_workers + (i < n_trials % n_workers) for i in range(n_workers)]
    shares = [s for s in shares if s]
    before = {t.number for t in study.trials if t.state in ("complete", "failed")}
    with (
        ProcessPoolExecutor(len(shares), mp_context=mp.get_context("spawn")) as pool,
        TrialProgress(n_trials, study, enabled=show_progress) as progress,
    ):
        futures = [
            pool.submit(worker, url, study.name, func, s, timeout, catch, tuple(callbacks))
            for s in shares
        ]
        seen = set(before)
        while True:
            done, pending = wait(futures, timeout=_POLL_SECONDS, return_when=FIRST_EXCEPTION)
            for t in study.trials:
                if t.state in ("complete", "failed") and t.number not in seen:
                    seen.add(t.number)
                    progress.advance(t.value, t.user_attrs.get("seconds_suggest"))
            failed = [f for f in done if f.exception() is not None]
            if failed:
                for f in pending:
                    f.cancel()
                raise failed[0].exception()
            if not pending:
                break
            time.sleep(0)


__all__ = ["check_parallel", "optimize_in_processes"]
