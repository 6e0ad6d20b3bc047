"""What only a database server can do to a storage: restart under running studies (skipped unless
HEADSTART_TEST_POSTGRES_URL is set). The storage guarantees themselves run as one suite on every
backend, PostgreSQL included, in tests/test_storage.py.

`.ci/run` starts a throw-away server with `.ci/start_postgres.sh` and sets the variable.
"""

from __future__ import annotations

import os
import subprocess
import threading
import time
import uuid

import pytest

import headstart as hs
from headstart.testing.faults import postgres_restart_script

URL = os.environ.get("HEADSTART_TEST_POSTGRES_URL")
pytestmark = [
    pytest.mark.skipif(not URL, reason="HEADSTART_TEST_POSTGRES_URL is not set"),
    # every test that uses the server runs on one pytest worker: one of them restarts it
    pytest.mark.xdist_group("postgres"),
]


def test_a_study_carries_on_across_a_server_restart():
    script = postgres_restart_script()
    if script is None:
        pytest.skip("no restart script from .ci/start_postgres.sh (HEADSTART_PG_STOP_FILE)")
    name = f"pg-restart-{uuid.uuid4().hex[:8]}"
    space = hs.SearchSpace({"x": hs.Float(-1.0, 1.0)})
    study = hs.create_study(name, space, storage=URL, method="gp", seed=0, n_initial=3)
    study.optimize(lambda p: p["x"] ** 2, 4, show_progress=False)
    subprocess.run([str(script)], check=True, timeout=150)  # pooled connections are now dead
    study.optimize(lambda p: p["x"] ** 2, 4, show_progress=False)
    trials = hs.load_study(name, URL).trials
    assert len(trials) == 8 and all(t.state == "complete" for t in trials)
    hs.delete_study(name, URL)


def slow_square(params: dict) -> float:  # module level: picklable for worker processes
    import time

    time.sleep(0.1)
    return params["x"] ** 2


def test_optimize_with_workers_rides_out_a_server_restarting_in_a_loop():
    """``pg_ctl restart -m fast`` every second while 4 workers run 120 trials or more (until 3
    restarts fell inside the run, however slow the machine's restarts are): workers open the
    storage, ask and tell while the server is "starting up", "shutting down" or refusing
    connections; every transient error is retried, so the run ends with every trial complete."""
    script = postgres_restart_script()
    if script is None:
        pytest.skip("no restart script from .ci/start_postgres.sh (HEADSTART_PG_STOP_FILE)")
    name = f"pg-loop-{uuid.uuid4().hex[:8]}"
    space = hs.SearchSpace({"x": hs.Float(-1.0, 1.0)})
    study = hs.create_study(name, space, storage=URL, method="random", seed=0)
    done = threading.Event()
    restarts, blocked = [], []

    def restart_in_a_loop() -> None:
        while not done.wait(1.0):
            try:
                # the script bounds each pg_ctl attempt itself (3 x 30 s at most)
                subprocess.run([str(script)], check=False, timeout=150)
            except subprocess.TimeoutExpired:
                blocked.append(1)
                continue
            restarts.append(1)

    looping = threading.Thread(target=restart_in_a_loop)
    looping.start()
    total = 0
    deadline = time.monotonic() + 240  # a blocked restart costs up to 95 s; leave room for restarts
    try:  # batches of 40 until 120 trials ran and 3 restarts fell inside the run, on any machine
        while (total < 120 or len(restarts) < 3) and time.monotonic() < deadline:
            study.optimize(slow_square, 40, n_workers=4, show_progress=False)
            total += 40
    finally:
        done.set()
        looping.join()
    trials = hs.load_study(name, URL).trials
    assert len(restarts) >= 3, f"{len(restarts)} restarts; {len(blocked)} pg_ctl calls blocked"
    assert len(trials) == total and all(t.state == "complete" for t in trials)
    hs.delete_study(name, URL)
