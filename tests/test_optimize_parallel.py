"""``optimize`` options: local worker processes, timeout, callbacks; ``enqueue(skip_if_exists)``."""

from __future__ import annotations

import json
import time

import numpy as np
import pytest

import headstart as hs
from headstart.testing.faults import ExplodeOnce


def _space() -> hs.SearchSpace:
    return hs.SearchSpace({"x": hs.Float(0.0, 1.0), "c": hs.Categorical(["a", "b"])})


def objective(params: dict) -> float:  # module level: picklable for worker processes
    return (params["x"] - 0.3) ** 2 + (params["c"] == "b")


def exploding(params: dict) -> float:
    raise KeyboardInterrupt("stop everything")


def test_two_worker_processes_share_the_study(tmp_path):
    url = f"sqlite:///{tmp_path / 'par.db'}"
    study = hs.create_study("par", _space(), storage=url, method="gp", seed=0, n_initial=3)
    study.optimize(objective, 10, n_workers=2, show_progress=False)
    trials = study.trials
    assert len(trials) == 10 and all(t.state == "complete" for t in trials)
    assert len({json.dumps(t.params, sort_keys=True) for t in trials}) == 10


def test_parallel_refuses_what_cannot_run_in_processes(tmp_path):
    with pytest.raises(hs.InvalidSettingError, match="in memory"):
        hs.create_study("m", _space(), storage=None).optimize(objective, 2, n_workers=2)
    study = hs.create_study("p", _space(), storage=f"sqlite:///{tmp_path / 'p.db'}")
    with pytest.raises(hs.InvalidSettingError, match="module-level function"):
        study.optimize(lambda p: p["x"], 2, n_workers=2)
    for bad in (0, -1, 1.5, True):
        with pytest.raises(hs.InvalidSettingError, match="n_workers"):
            study.optimize(objective, 2, n_workers=bad)
    assert study.trials == []  # nothing started


def test_a_worker_error_that_is_not_caught_stops_the_run(tmp_path):
    study = hs.create_study("boom", _space(), storage=f"sqlite:///{tmp_path / 'b.db'}")
    with pytest.raises(KeyboardInterrupt):
        study.optimize(exploding, 4, n_workers=2, show_progress=False)
    assert all(t.state == "failed" for t in study.trials)  # told failed, never left running


def test_timeout_and_callbacks():
    study = hs.create_study("t", _space(), storage=None, method="random", seed=0)
    seen = []

    def slow(params):
        time.sleep(0.05)
        return objective(params)

    study.optimize(
        slow, 1000, timeout=0.3, callbacks=[lambda s, t: seen.append(t.number)], show_progress=False
    )
    assert 1 <= len(study.trials) < 50 and seen == [t.number for t in study.trials]
    with pytest.raises(hs.InvalidSettingError, match="timeout"):
        study.optimize(slow, 1, timeout=0)


def test_enqueue_skip_if_exists():
    study = hs.create_study("e", _space(), storage=None, method="random", seed=0)
    first = study.enqueue({"x": 0.5, "c": "a"})
    again = study.enqueue({"x": 0.5, "c": "a"}, skip_if_exists=True)
    assert again.number == first.number and len(study.trials) == 1
    study.enqueue({"x": 0.5, "c": "a"})  # without the flag it is enqueued again
    assert len(study.trials) == 2


def test_worker_command_runs_a_loop_on_a_shared_study(tmp_path, monkeypatch):
    import subprocess
    import sys

    (tmp_path / "myobjective.py").write_text(
        "def objective(p):\n    return (p['x'] - 0.3) ** 2 + (p['c'] == 'b')\n"
    )
    url = f"sqlite:///{tmp_path / 'w.db'}"
    hs.create_study("shared", _space(), storage=url, method="random", seed=0)
    cmd = [sys.executable, "-m", "headstart.cli", "worker", "--study", "shared"]
    cmd += ["--objective", "myobjective:objective", "--storage", url, "--n-trials", "3"]
    procs = [subprocess.Popen(cmd, cwd=tmp_path, stderr=subprocess.PIPE, text=True) for _ in "ab"]
    for p in procs:
        _, err = p.communicate(timeout=120)
        assert p.returncode == 0, err
    trials = hs.load_study("shared", url).trials
    assert len(trials) == 6 and all(t.state == "complete" for t in trials)
    bad = subprocess.run(
        [x if x != "myobjective:objective" else "nosuchmodule:f" for x in cmd],
        cwd=tmp_path,
        capture_output=True,
        text=True,
    )
    assert bad.returncode == 1 and "Cannot import 'nosuchmodule'" in bad.stderr


def failing(params: dict) -> float:
    raise ValueError(f"bad x {params['x']:.3f}")


@pytest.mark.parametrize("n_workers", [1, 2])
def test_a_failing_evaluation_stores_its_traceback(tmp_path, n_workers):
    study = hs.create_study("f", _space(), storage=f"sqlite:///{tmp_path / 'f.db'}", seed=0)
    with pytest.warns(hs.HeadstartWarning, match="bad x") if n_workers == 1 else _nothing():
        study.optimize(failing, 2, n_workers=n_workers, catch=(ValueError,), show_progress=False)
    for trial in study.trials:
        assert trial.state == "failed" and trial.user_attrs["fail_reason"] == "exception"
        assert "ValueError: bad x" in trial.user_attrs["traceback"]


def _nothing():
    import contextlib

    return contextlib.nullcontext()


def test_a_bad_value_keeps_the_trial_running_and_beating():
    study = hs.create_study("v", _space(), storage=None, seed=0, heartbeat_interval=0.1)
    trial = study.ask()
    with pytest.raises(hs.InvalidValueError):
        study.tell(trial, float("nan"))
    assert trial.trial_id in study._heartbeats  # still beating: nothing changed
    study.tell(trial, 1.0)
    assert study._heartbeats == {}


def test_a_dask_cluster_runs_the_workers(tmp_path):
    distributed = pytest.importorskip("distributed")
    from headstart.benchmarks.functions import get_task

    task = get_task("branin")
    url = f"sqlite:///{tmp_path / 'dask.db'}"
    study = hs.create_study("dask", task.space, storage=url, method="random", seed=0)
    with (
        distributed.LocalCluster(
            n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0"
        ) as cluster,
        distributed.Client(cluster) as client,
    ):
        study.optimize(task.objective, 6, n_workers=client, show_progress=False)
        trials = study.trials
        assert len(trials) == 6 and all(t.state == "complete" for t in trials)
        with pytest.raises(KeyError):  # an uncaught error (no 'x' in Branin) reaches the caller
            study.optimize(failing, 2, n_workers=client, catch=(), show_progress=False)
    with pytest.raises(hs.InvalidSettingError, match="scheduler address"):
        study.optimize(task.objective, 2, n_workers="not an address")


def _meta_source(n_tasks: int = 3):
    import pandas as pd

    rng = np.random.default_rng(0)
    frames = []
    for m in range(n_tasks):
        x, c = rng.random(12), rng.choice(["a", "b"], 12)
        frames.append(pd.DataFrame({"x": x, "c": c, "value": (x - 0.3 - 0.1 * m) ** 2}))
    return frames


def test_workers_load_the_meta_fit_the_parent_made_once(tmp_path, monkeypatch):
    from headstart._transfer import metafit

    url = f"sqlite:///{tmp_path / 'prefit.db'}"
    study = hs.create_study(
        "prefit", _space(), storage=url, method="scaml", transfer_from=_meta_source(), seed=0
    )
    fits = []
    original = metafit.fit_meta_gps
    monkeypatch.setattr(
        metafit, "fit_meta_gps", lambda *a, **k: fits.append(1) or original(*a, **k)
    )
    study.optimize(objective, 4, n_workers=2, show_progress=False)
    assert fits == [1]  # the parent fitted; the two workers found it in the storage
    assert sum(1 for t in study.trials if t.state == "complete") == 4


@pytest.mark.slow
def test_a_dask_cluster_spreads_a_large_meta_fit(tmp_path, monkeypatch):
    distributed = pytest.importorskip("distributed")
    from headstart import _parallel
    from headstart._transfer import metafit

    url = f"sqlite:///{tmp_path / 'dask-meta.db'}"
    study = hs.create_study(
        "m", _space(), storage=url, method="scaml", transfer_from=_meta_source(4), seed=0
    )
    original = metafit.fit_meta_gps
    monkeypatch.setattr(
        metafit, "fit_meta_gps", lambda *a, **k: original(*a, **{**k, "chunk_size": 2})
    )
    spread = []
    dask_map = _parallel._dask_map

    def recording_map(client):
        run = dask_map(client)
        return lambda function, payloads: spread.append(len(payloads)) or run(function, payloads)

    monkeypatch.setattr(_parallel, "_dask_map", recording_map)
    with (
        distributed.LocalCluster(
            n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0"
        ) as cluster,
        distributed.Client(cluster) as client,
    ):
        study.optimize(objective, 2, n_workers=client, show_progress=False)
    assert spread == [2]  # 4 meta-tasks in 2 chunks, fitted on the Dask workers
    assert sum(1 for t in study.trials if t.state == "complete") == 2


def test_a_script_without_a_main_guard_is_told_what_to_do(tmp_path):
    """Issue 27: the workers imported the script again and died with multiprocessing's raw
    RuntimeError (a broken process pool in the parent)."""
    import subprocess
    import sys

    script = tmp_path / "noguard.py"
    script.write_text(
        "import headstart as hs\n"
        "def f(p):\n    return p['x']\n"
        "s = hs.create_study('ng', hs.SearchSpace({'x': hs.Float(0, 1)}),\n"
        f"                   storage='sqlite:///{tmp_path / 'ng.db'}', method='random')\n"
        "s.optimize(f, n_trials=4, n_workers=2, show_progress=False)\n"
    )
    result = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 1
    assert "InvalidSettingError" in result.stderr and 'if __name__ == "__main__":' in result.stderr
    assert "BrokenProcessPool" not in result.stderr


def test_a_worker_error_stops_the_other_workers_promptly(tmp_path):
    """One worker raised at +0.2 s but the call returned 33 s and 75 trials later: now the
    others are stopped (their running trials failed) and the error re-raised at once."""
    url = f"sqlite:///{tmp_path / 'stop.db'}"
    study = hs.create_study("stop", _space(), storage=url, method="random", seed=0)
    with pytest.raises(ValueError, match="bad configuration"):
        study.optimize(ExplodeOnce(str(tmp_path / "marker")), 200, n_workers=2, show_progress=False)
    trials = study.trials
    assert len(trials) < 20, f"{len(trials)} trials ran after the error"
    assert all(t.state in ("complete", "failed") for t in trials)  # none left running
    stopped = [t for t in trials if t.user_attrs.get("fail_reason") == "stopped"]
    assert all("another worker" in t.user_attrs["error"] for t in stopped)
