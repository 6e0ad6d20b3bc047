r"""Heartbeats of running trials: a daemon thread per trial stamps it every ``interval`` seconds.

When the worker dies (``kill -9``, a lost machine) the stamps stop, and the next ``ask`` of any
worker fails the trial once it is older than the study's grace period
(:meth:`headstart.storage.sql.Storage.fail_stale_trials`), as Optuna's RDB storage does. The
thread stops when the trial is told, or by itself when the trial is no longer running.
"""

from __future__ import annotations

import threading


class Heartbeat:
    """Beat ``storage.record_heartbeat(trial_id)`` every ``interval`` seconds until stopped."""

    def __init__(self, storage, trial_id: int, interval: float) -> None:
        self._storage, self._trial_id, self._interval = storage, trial_id, float(interval)
        self._stop = threading.Event()
        self._thread = threading.Thread(
            target=self._run, name=f"headstart-heartbeat-{trial_id}", daemon=True
        )
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(self._interval):
            try:
                if not self._storage.record_heartbeat(self._trial_id):
                    return  # told, or failed by another worker: nothing left to keep alive
            except Exception:  # a transient storage error: beat again at the next interval
                continue

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=self._interval + 1.0)
