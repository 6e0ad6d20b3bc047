r"""``study.optimize(..., n_workers=k)``: worker processes sharing the study's storage, local or on a
Dask cluster.

Each local worker is a fresh process forked from a *fork server* that imported headstart and
torch once (``forkserver`` with preloaded modules; ``spawn`` where there is no fork server), so
k workers start in milliseconds instead of each paying the ~1.7 s import. It loads the study by
name from the same storage URL
and runs the ordinary ask / evaluate / tell loop for its share of the trials; the storage keeps
them from duplicating work (reserve-then-suggest) and heartbeats, when the study has them, fail
the trials of a worker that dies. The parent shows the progress by polling the storage and
re-raises the first exception a worker did not catch. It does so at once: the other workers are
told to stop (a flag in the storage, read after every trial, and on local processes a signal
that fails the trial in flight with ``fail_reason="stopped"``), so a run does not go on for the
rest of its trials after one worker failed.
"""

from __future__ import annotations

import contextlib
import multiprocessing as mp
import os
import pickle
import re
import signal
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor
from typing import Any

from headstart.exceptions import InvalidSettingError

_POLL_SECONDS = 0.25
# Imported once by the fork server, so forked workers start with them loaded. "__main__" keeps
# multiprocessing's default (the caller's script, imported as __mp_main__, guarded code not run).
_PRELOAD = ("__main__", "headstart.study", "headstart._gp.surrogate", "headstart._strategy")


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


_MAIN_GUARD = re.compile(r"""__name__\s*==\s*['"]__main__['"]""")


def check_main_guard() -> None:
    """Refuse local worker processes when the running script has no ``if __name__ ==
    "__main__":`` guard.

    A worker (fork server or spawn) imports the caller's script again; without the guard that
    import runs the study again, and multiprocessing stops the worker with a ``RuntimeError``
    the parent only sees as a broken process pool.
    """
    main = sys.modules.get("__main__")
    path = getattr(main, "__file__", None)
    if not path or not str(path).endswith(".py"):
        return  # python -c, a notebook, an interactive session: nothing is imported again
    try:
        with open(path, encoding="utf-8") as f:
            source = f.read()
    except OSError:
        return
    if not _MAIN_GUARD.search(source):
        raise InvalidSettingError(
            f"optimize(n_workers=...) starts worker processes that import {path} again, and "
            "without a guard that import would run the study again in every worker. Put the "
            'code that creates and optimizes the study under `if __name__ == "__main__":` '
            "(define the objective above it), or use n_workers=1."
        )


def optimize_in_processes(
    study: Any,
    func: Callable,
    n_trials: int,
    *,
    n_workers: int | Any,
    timeout: float | None,
    catch: tuple,
    callbacks: Sequence[Callable],
    show_progress: bool,
    worker: Callable[..., Any],
    prefit: Callable[[Callable | None], None] | None = None,
) -> None:
    """Split ``n_trials`` over worker processes and wait for them.

    ``n_workers`` is a count of local processes (see :func:`_local_context`), or a ``dask.distributed.Client``
    (or a scheduler address such as ``"tcp://10.0.0.5:8786"``): then one task per Dask worker
    runs the loop, wherever the cluster runs (SSH, Kubernetes, SLURM via dask-jobqueue).
    ``worker(url, name, func, n_trials, timeout, catch, callbacks)`` is a module-level function
    that runs one process's loop (the study layer passes it, so this module needs no study).
    ``prefit(map)`` fits what every worker shares (meta-task GPs) once, before they start, spread
    over the Dask cluster by ``map`` (``None`` for local processes: one fit in this process).
    """
    url = check_parallel(study, func, callbacks)
    if isinstance(n_workers, int):
        check_main_guard()
        pool = ProcessPoolExecutor(
            n_workers, mp_context=_local_context(), initializer=_install_stop_handler
        )
        k, submit = n_workers, pool.submit

        def close():
            pool.shutdown(wait=True, cancel_futures=True)

    else:
        client = _dask_client(n_workers)
        k = max(len(client.scheduler_info().get("workers", {})), 1)

        def submit(*args):
            return client.submit(*args, pure=False)

        def close():
            if client is not n_workers:  # we opened it from an address
                client.close()

    shares = [s for s in (n_trials // k + (i < n_trials % k) for i in range(k)) if s]
    stop_key = f"stop-run/{uuid.uuid4().hex}"
    try:
        if prefit is not None:
            prefit(None if isinstance(n_workers, int) else _dask_map(client))
        futures = [
            submit(
                _stoppable, worker, stop_key, (url, study.name, func, s, timeout, catch, callbacks)
            )
            for s in shares
        ]
        try:
            _wait(study, futures, n_trials, show_progress)
        except BaseException:
            # the flag first (a signalled worker checks it), best effort: the error being
            # re-raised may be the storage's own
            with contextlib.suppress(Exception):
                study.storage.put_cache(stop_key, "stop-run", {})  # others stop after a trial
            if isinstance(n_workers, int):
                _terminate(pool)  # ... and local ones at once, failing the trial in flight
            raise
    finally:
        close()
        with contextlib.suppress(Exception):
            study.storage.clear_cache(key=stop_key)


class WorkerStopped(BaseException):
    """Raised in a worker process told to stop: its trial in flight is failed as ``"stopped"``."""

    fail_reason = "stopped"


_RUNNING = {"task": False}  # in a worker process: whether a task of optimize() is running


def _on_stop_signal(signum: int, frame: Any) -> None:
    if _RUNNING["task"]:  # an idle pool process ignores it (it may hold the task queue's lock)
        raise WorkerStopped("stopped: another worker of this optimize() call failed")


def _install_stop_handler() -> None:
    """Pool initializer: from its start, a worker process takes ``SIGUSR1`` as a request to stop
    its task (ignored while idle or starting, so it never dies holding a lock)."""
    if hasattr(signal, "SIGUSR1"):
        signal.signal(signal.SIGUSR1, _on_stop_signal)


@contextlib.contextmanager
def stop_signal_held() -> Iterator[None]:
    """Delay a stop request (``SIGUSR1``) until the block ends: a ``tell`` is not cut between
    its heartbeat's end and its write, which would lose the value."""
    mask = getattr(signal, "pthread_sigmask", None)
    if mask is None or not _RUNNING["task"]:
        yield
        return
    mask(signal.SIG_BLOCK, {signal.SIGUSR1})
    try:
        yield
    finally:
        mask(signal.SIG_UNBLOCK, {signal.SIGUSR1})


def _stoppable(worker: Callable[..., Any], stop_key: str, args: tuple) -> Any:
    """Run ``worker(url, name, func, n_trials, timeout, catch, callbacks)`` (``args``) so that
    the parent can stop it: ``SIGUSR1`` raises :class:`WorkerStopped` in a local worker process
    (:func:`_terminate`), and after every trial the stop flag ``stop_key`` is read from the
    storage (any worker, Dask's included). A ``SIGUSR1`` from anyone else (a batch system's
    warning signal) is re-raised, not taken for a stop: the run must not end quietly short."""
    from headstart.storage import get_storage

    def check_stop(study: Any, trial: Any) -> None:
        if study.storage.get_cache(stop_key) is not None:
            study.stop()

    local = (  # a local worker process's main thread (not a Dask worker's thread)
        mp.parent_process() is not None
        and threading.current_thread() is threading.main_thread()
        and hasattr(signal, "SIGUSR1")
    )
    _RUNNING["task"] = local
    try:
        *head, callbacks = args
        return worker(*head, (*callbacks, check_stop))
    except WorkerStopped:
        if get_storage(args[0]).get_cache(stop_key) is None:
            raise
        return 0
    finally:
        _RUNNING["task"] = False


def _terminate(pool: ProcessPoolExecutor) -> None:
    """Signal every process of ``pool`` to stop its task (``SIGUSR1``): the trial in flight is
    failed as ``"stopped"`` and the process returns to the pool, which then shuts down."""
    if not hasattr(signal, "SIGUSR1"):
        return
    for process in list(getattr(pool, "_processes", {}).values()):
        if process.is_alive() and process.pid != os.getpid():
            with contextlib.suppress(ProcessLookupError):
                os.kill(process.pid, signal.SIGUSR1)


def _local_context() -> Any:
    """``forkserver`` preloaded with headstart's heavy modules, else ``spawn``.

    Workers never ``fork`` the caller itself: its torch / OpenMP threads may hold locks a forked
    child would inherit. The fork server is a clean single-threaded process started once per
    parent; its preload list applies the first time it starts.
    """
    if "forkserver" not in mp.get_all_start_methods():
        return mp.get_context("spawn")
    ctx = mp.get_context("forkserver")
    ctx.set_forkserver_preload(list(_PRELOAD))
    return ctx


def _dask_map(client: Any) -> Callable[[Callable, list], list]:
    """``map(function, payloads)`` over the Dask cluster, results in order."""

    def dask_map(function: Callable, payloads: list) -> list:
        return client.gather(client.map(function, payloads, pure=False))

    return dask_map


def _dask_client(target: Any) -> Any:
    if isinstance(target, str) and "://" in target:
        try:
            from distributed import Client
        except ImportError:
            raise InvalidSettingError(
                "n_workers as a scheduler address needs Dask: pip install 'distributed'."
            ) from None
        return Client(target)
    if type(target).__name__ == "Client" and hasattr(target, "submit"):
        return target
    raise InvalidSettingError(
        "n_workers must be an integer >= 1, a dask.distributed.Client or a scheduler address; "
        f"got {target!r}."
    )


def _wait(study: Any, futures: list, n_trials: int, show_progress: bool) -> None:
    """Show the study's progress until every future is done; re-raise the first error."""
    from headstart._progress import TrialProgress

    seen = {t.number for t in study.trials if t.state in ("complete", "failed")}
    with TrialProgress(n_trials, study, enabled=show_progress) as progress:
        while True:
            time.sleep(_POLL_SECONDS)
            for t in study.trials:
                if t.state in ("complete", "failed") and t.number not in seen:
                    seen.add(t.number)
                    progress.advance(
                        t.value if t.feasible else None, t.user_attrs.get("seconds_suggest")
                    )
            errors = [f.exception() for f in futures if f.done() and not f.cancelled()]
            errors = [e for e in errors if e is not None]
            if errors:
                for f in futures:
                    f.cancel()
                raise errors[0]
            if all(f.done() for f in futures):
                return


__all__ = ["check_parallel", "optimize_in_processes"]
