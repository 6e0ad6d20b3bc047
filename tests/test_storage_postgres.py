"""The same storage guarantees on PostgreSQL (skipped unless HEADSTART_TEST_POSTGRES_URL is set).

`.ci/run` starts a throw-away server with `.ci/start_postgres.sh` and sets the variable.
"""

from __future__ import annotations

import os
import threading
import uuid

import pytest

import headstart as hs
from headstart.exceptions import DuplicatedStudyError, TrialAlreadyFinishedError
from headstart.storage import Storage, TrialState

URL = os.environ.get("HEADSTART_TEST_POSTGRES_URL")
pytestmark = pytest.mark.skipif(not URL, reason="HEADSTART_TEST_POSTGRES_URL is not set")


def test_study_round_trip_on_postgres():
    name = f"pg-{uuid.uuid4().hex[:8]}"
    space = hs.SearchSpace({"x": hs.Float(-1.0, 1.0), "c": hs.Categorical(["a", "b"])})
    study = hs.create_study(name, space, storage=URL, method="random", seed=0)
    study.optimize(lambda p: p["x"] ** 2 + (p["c"] == "b"), 5, show_progress=False)
    again = hs.load_study(name, Storage(URL))
    assert [t.value for t in again.trials] == [t.value for t in study.trials]
    with pytest.raises(TrialAlreadyFinishedError):
        again.tell(again.trials[0].number, 1.0)
    with pytest.raises(DuplicatedStudyError):
        hs.create_study(name, hs.SearchSpace({"y": hs.Float(0, 1)}), storage=URL)
    hs.delete_study(name, URL)


def test_concurrent_writers_never_share_a_number_on_postgres():
    name = f"pg-race-{uuid.uuid4().hex[:8]}"
    sid = (
        Storage(URL)
        .create_study(name, direction="minimize", space={"params": {}}, settings={})
        .study_id
    )
    stores = [Storage(URL) for _ in range(4)]
    numbers: list[int] = []

    def work(store: Storage) -> None:
        for _ in range(10):
            numbers.append(store.create_trial(sid, state=TrialState.RUNNING, params={}).number)

    threads = [threading.Thread(target=work, args=(s,)) for s in stores]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(numbers) == list(range(40))
    stores[0].delete_study(name)
