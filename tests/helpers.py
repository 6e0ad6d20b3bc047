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
import time
import uuid
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
    """An empty storage: a new SQLite file, or a new database on the PostgreSQL server of
    ``.ci/run`` (dropped afterwards; skipped when there is no server), so tests that count the
    studies of a storage run unchanged on both."""
    if backend != "postgresql":
        yield f"sqlite:///{tmp_path / 'fresh.db'}"
        return
    url = backend_url(backend, tmp_path)
    from sqlalchemy import create_engine, text

    name = f"fresh_{uuid.uuid4().hex[:12]}"
    admin = create_engine(url, isolation_level="AUTOCOMMIT", pool_pre_ping=True)

    def run(sql: str) -> None:  # a server another test just restarted may still be starting
        for attempt in range(40):
            try:
                with admin.connect() as conn:
                    conn.execute(text(sql))
                return
            except Exception:
                if attempt == 39:
                    raise
                time.sleep(0.25)

    run(f"CREATE DATABASE {name}")
    try:
        yield f"{url.rsplit('/', 1)[0]}/{name}"
    finally:
        from headstart.storage import sql

        for storage in list(sql._OPEN_FILES):  # nothing to fold for a server; just in case
            storage.close()
        run(f"DROP DATABASE {name} WITH (FORCE)")
        admin.dispose()


def benchmark_script(name: str) -> Any:
    """The module of ``benchmarks/<name>.py`` (the scripts are not a package)."""
    path = Path(__file__).resolve().parents[1] / "benchmarks" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
