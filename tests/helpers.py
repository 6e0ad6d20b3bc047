"""Helpers shared by the test modules.

* :func:`release_together`: overlapping calls are where storage bugs hide, so the tests of
  ``ask`` / ``tell`` / storage run their workers in ``spawn``-ed processes that wait at one
  barrier before the call under test;
* :func:`backend_url`: the storage URL of a test parametrized over SQLite and PostgreSQL;
  :func:`fresh_url`: the same, an empty storage each time (a throw-away PostgreSQL database);
* :func:`benchmark_script`: a ``benchmarks/*.py`` script as a module, for smoke runs.
"""

from __future__ import annotations

import contextlib
import importlib.util
import multiprocessing as mp
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest


def release_together(
    target: Callable[..., Any],
    args: Callable[[Any, int], tuple],
    n: int,
    timeout: float = 300,
    *,
    preloaded: bool = False,
) -> None:
    """Run ``target(*args(barrier, i))`` in ``n`` spawned processes that share one barrier (so
    their calls overlap), wait for them, and check that every one exited cleanly.

    ``preloaded``: fork them from headstart's fork server, which imported torch and the models
    once (``optimize(n_workers=k)``'s), instead of paying the ~2 s import in each of ``n``."""
    if preloaded:
        from headstart._parallel import _local_context

        ctx = _local_context()
    else:
        ctx = mp.get_context("spawn")
    barrier = ctx.Barrier(n)
    procs = [ctx.Process(target=target, args=args(barrier, i)) for i in range(n)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=timeout)
    assert [p.exitcode for p in procs] == [0] * n


def backend_url(backend: str, tmp_path: Path, filename: str = "test.db") -> str:
    """``sqlite:///<tmp_path>/<filename>``, or the PostgreSQL server of ``.ci/run`` (skipped
    when there is none)."""
    if backend == "postgresql":
        return os.environ.get("HEADSTART_TEST_POSTGRES_URL") or pytest.skip("no PostgreSQL")
    return f"sqlite:///{tmp_path / filename}"


@contextlib.contextmanager
def fresh_url(backend: str, tmp_path: Path) -> Iterator[str]:
    """An empty storage of ``backend`` (:func:`headstart.testing.storages.fresh_storage_url`),
    skipped when its server is not configured."""
    from headstart.testing.storages import Unavailable, fresh_storage_url

    try:
        with fresh_storage_url(backend, tmp_path) as url:
            yield url
    except Unavailable as e:  # raised before the test runs: no server for this backend
        pytest.skip(str(e))


def benchmark_script(name: str) -> Any:
    """The module of ``benchmarks/<name>.py`` (the scripts are not a package)."""
    path = Path(__file__).resolve().parents[1] / "benchmarks" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
