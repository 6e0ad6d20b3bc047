r"""Faults to inject when testing a distributed setup: an objective that fails once across every
worker process, and the restart script of a throw-away PostgreSQL server.

Used by headstart's own tests and ``benchmarks/storage_probe.py``; usable for checking that a
deployment rides out the same faults.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any


class ExplodeOnce:
    """An objective ``x -> (x - 0.3)^2 (+ 1 if c == "b")`` that raises ``ValueError`` on its
    first call across every process sharing ``marker`` (a file created atomically); every other
    call takes ``seconds``. Picklable, so worker processes can run it."""

    def __init__(self, marker: str, seconds: float = 0.2) -> None:
        self.marker, self.seconds = marker, seconds

    def __call__(self, params: dict[str, Any]) -> float:
        try:
            os.close(os.open(self.marker, os.O_CREAT | os.O_EXCL))
        except FileExistsError:
            time.sleep(self.seconds)
            return (float(params["x"]) - 0.3) ** 2 + (params.get("c") == "b")
        raise ValueError("bad configuration")


def postgres_restart_script() -> Path | None:
    """The ``restart`` script next to the ``stop`` script named by ``$HEADSTART_PG_STOP_FILE``
    (what ``.ci/start_postgres.sh`` writes), or ``None``."""
    stop_file = os.environ.get("HEADSTART_PG_STOP_FILE")
    if not stop_file or not Path(stop_file).exists():
        return None
    script = Path(Path(stop_file).read_text().strip()).with_name("restart")
    return script if script.exists() else None


__all__ = ["ExplodeOnce", "postgres_restart_script"]
