"""Study: ask/tell, optimize, enqueue, imports, bad inputs, crashes and concurrent workers."""

from __future__ import annotations

import math
import multiprocessing as mp
import os
import signal
import subprocess
import sys
import textwrap
import time
import warnings

import numpy as np
import pandas as pd
import pytest

import headstart as hs
from headstart.exceptions import (
    DuplicatedStudyError,
    HeadstartWarning,
    InvalidParamsError,
    InvalidSettingError,
    InvalidValueError,
    NoCompletedTrialsError,
    StorageError,
    TrialAlreadyFinishedError,
    UnknownStudyError,
    UnknownTrialError,
)


def space2() -> hs.SearchSpace:
    return hs.SearchSpace(
        {"x": hs.Float(-2.0, 2.0), "n": hs.Int(1, 4), "c": hs.Categorical(["a", "b"])}
    )


def objective(params: dict) -> float:
    return (params["x"] - 0.5) ** 2 + 0.1 * params["n"] + (0.3 if params["c"] == "b" else 0.0)


def test_ask_tell_loop_with_gp_finds_a_good_point():
    study = hs.create_study("s", space2(), storage=None, seed=0, budget=20)
    for _ in range(20):
        trial = study.ask()
        study.tell(trial, objective(trial.params))
    best = study.best_trial
    assert best.value < 0.2 and best.state == "complete"
    assert best.params["c"] == "a" and best.params["n"] == 1
    assert [t.number for t in study.trials] == list(range(20))
    assert all(t.user_attrs["seconds_suggest"] >= 0 for t in study.trials)


def test_an_asked_trial_is_the_stored_one():
    """ask() builds its Trial without reading the row back: it must equal what a read gives,
    JSON-parsed params and user attributes included (the kernel expression too)."""
    study = hs.create_study("s", space2(), storage=None, seed=0, n_initial=2)
    for _ in range(4):
        trial = study.ask()
        stored = study._trial(study.storage.get_trial(trial.trial_id))
        assert trial == stored and type(trial.params["n"]) is int
        assert dict(trial.user_attrs) == dict(stored.user_attrs) and trial.user_attrs
        study.tell(trial, objective(trial.params))


def test_same_seed_same_suggestions():
    runs = []
    for _ in range(2):
        study = hs.create_study("s", space2(), storage=None, seed=3, budget=15)
        study.optimize(objective, 12, show_progress=False)
        runs.append([t.params for t in study.trials])
    assert runs[0] == runs[1]


def test_initial_design_is_sobol_then_model():
    study = hs.create_study("s", space2(), storage=None, seed=1, n_initial=4)
    assert study.n_initial == 4
    study.optimize(objective, 6, show_progress=False)
    from headstart._strategy import sobol_point

    first = study.space.decode(sobol_point(study.space.dim, 0, 1))[0]
    assert study.trials[0].params == first


def test_pending_trials_are_not_suggested_twice():
    space = hs.SearchSpace({"x": hs.Float(0.0, 1.0), "y": hs.Float(0.0, 1.0)})
    study = hs.create_study("p", space, storage=None, seed=0, n_initial=5)
    for _ in range(8):
        trial = study.ask()
        study.tell(trial, (trial.params["x"] - 0.3) ** 2 + (trial.params["y"] - 0.6) ** 2)
    first, second = study.ask(), study.ask()  # two workers, neither has told yet
    gap = math.dist(list(first.params.values()), list(second.params.values()))
    assert gap > 1e-3


def test_default_initial_design_size():
    from headstart._strategy import default_n_initial

    assert default_n_initial(6, 50) == 10 and default_n_initial(2, 50) == 5
    assert default_n_initial(3, None) == 7 and default_n_initial(6, 3) == 1
    # several objectives or constraints: 10 points whatever d, still capped by budget / 5
    assert default_n_initial(2, None, multi_output=True) == 10
    assert default_n_initial(2, 30, multi_output=True) == 6


def test_studies_with_several_outputs_start_their_models_after_ten_points():
    constrained = hs.create_study("c", space2(), storage=None, constraints=True, seed=0)
    two = hs.create_study("mo", space2(), storage=None, directions=["minimize"] * 2, seed=0)
    single = hs.create_study("s", space2(), storage=None, seed=0)
    assert constrained._strategy.n_initial == two._strategy.n_initial == 10
    assert single._strategy.n_initial == 7  # 2 d + 1 for this 3-parameter space


def test_maximize_direction_and_best_trial():
    study = hs.create_study(
        "m", space2(), storage=None, direction="maximize", method="random", seed=0
    )
    for v in [1.0, 5.0, 3.0]:
        study.tell(study.ask(), v)
    assert study.best_value == 5.0


def test_tell_by_number_and_failed_trials_are_ignored_by_best():
    study = hs.create_study("f", space2(), storage=None, method="random", seed=0)
    t0, t1 = study.ask(), study.ask()
    study.tell(t0.number, failed=True)
    study.tell(t1, 2.0)
    assert [t.state for t in study.trials] == ["failed", "complete"]
    assert study.best_trial.number == 1


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf, "0.3", None, True, [1.0, 2.0]])
def test_bad_values_raise_and_leave_trial_running(bad):
    study = hs.create_study("v", space2(), storage=None, method="random", seed=0)
    trial = study.ask()
    with pytest.raises(InvalidValueError):
        study.tell(trial, bad)
    assert study.trials[0].state == "running" and study.trials[0].value is None
    study.tell(trial, 1.5)  # still tellable afterwards
    assert study.best_value == 1.5


def test_numpy_and_torch_scalars_are_accepted():
    import torch

    study = hs.create_study("np", space2(), storage=None, method="random", seed=0)
    study.tell(study.ask(), np.float32(0.25))
    study.tell(study.ask(), torch.tensor(0.5, dtype=torch.float64))
    assert [t.value for t in study.trials] == [0.25, 0.5]


def test_tell_twice_and_unknown_trial():
    study = hs.create_study("t", space2(), storage=None, method="random", seed=0)
    other = hs.create_study("o", space2(), storage=study.storage, method="random", seed=0)
    trial = study.ask()
    study.tell(trial, 1.0)
    with pytest.raises(TrialAlreadyFinishedError):
        study.tell(trial, 2.0)
    assert study.trials[0].value == 1.0
    with pytest.raises(UnknownTrialError):
        study.tell(99, 1.0)
    with pytest.raises(UnknownTrialError, match="does not belong"):
        other.tell(trial, 1.0)
    with pytest.raises(InvalidValueError, match="either a value or failed"):
        study.tell(study.ask(), 1.0, failed=True)


def test_no_completed_trials():
    study = hs.create_study("e", space2(), storage=None)
    with pytest.raises(NoCompletedTrialsError, match="no completed trial"):
        _ = study.best_trial


def test_unknown_study_and_mismatched_recreation(tmp_path):
    url = f"sqlite:///{tmp_path / 'h.db'}"
    hs.create_study("a", space2(), storage=url, seed=0)
    with pytest.raises(UnknownStudyError, match="nope"):
        hs.load_study("nope", url)
    other = hs.SearchSpace(
        {"x": hs.Float(-2.0, 3.0), "n": hs.Int(1, 4), "c": hs.Categorical(["a", "b"])}
    )
    with pytest.raises(
        DuplicatedStudyError,
        match=r"'x' is float in \[-2.0, 2.0\] in the stored study "
        r"but float in \[-2.0, 3.0\] in this call",
    ):
        hs.create_study("a", other, storage=url)
    with pytest.raises(DuplicatedStudyError, match="direction"):
        hs.create_study("a", space2(), storage=url, direction="maximize")
    again = hs.create_study("a", space2(), storage=url)  # same space: resumes
    assert again.settings["seed"] == 0


@pytest.mark.parametrize(
    "kwargs",
    [
        {"direction": "down"},
        {"method": "tpe"},
        {"acquisition": "ei2"},
        {"n_initial": 0},
        {"budget": -3},
        {"n_initial": 2.5},
        {"deterministic": "yes"},
    ],
)
def test_bad_settings(kwargs):
    with pytest.raises(InvalidSettingError):
        hs.create_study("b", space2(), storage=None, **kwargs)


def test_bad_name_space_and_storage():
    with pytest.raises(InvalidSettingError):
        hs.create_study("", space2(), storage=None)
    with pytest.raises(InvalidSettingError, match="SearchSpace"):
        hs.create_study("x", {"x": hs.Float(0, 1)}, storage=None)
    with pytest.raises(StorageError):
        hs.create_study("x", space2(), storage="sqlite:////nonexistent/dir/x.db")


def test_enqueue_comes_first_and_is_validated():
    study = hs.create_study("q", space2(), storage=None, seed=0)
    study.enqueue({"x": 0.5, "n": 1, "c": "a"})
    with pytest.raises(InvalidParamsError):
        study.enqueue({"x": 9.0, "n": 1, "c": "a"})
    trial = study.ask()
    assert trial.params == {"x": 0.5, "n": 1, "c": "a"} and trial.source == "enqueue"
    study.tell(trial, 0.1)
    assert study.ask().source == "ask"


def test_add_trials_counts_toward_initial_design():
    study = hs.create_study("i", space2(), storage=None, seed=0, n_initial=3)
    rng = np.random.default_rng(0)
    configs = study.space.sample(3, rng=rng)
    study.add_trials([(c, objective(c)) for c in configs])
    trial = study.ask()  # 3 imported = the whole design: this one comes from the model
    from headstart._strategy import sobol_point

    assert trial.params != study.space.decode(sobol_point(3, 0, 0))[0]
    frame = pd.DataFrame([{**c, "value": objective(c)} for c in study.space.sample(2, rng=rng)])
    assert len(study.add_trials(frame)) == 2
    assert sum(t.source == "import" for t in study.trials) == 5


def test_add_trials_is_all_or_nothing():
    study = hs.create_study("i2", space2(), storage=None, seed=0)
    good = {"x": 0.0, "n": 1, "c": "a"}
    with pytest.raises(InvalidValueError, match="Row 1"):
        study.add_trials([(good, 1.0), (good, math.nan), (good, 2.0)])
    with pytest.raises(InvalidParamsError, match="Row 0"):
        study.add_trials([({"x": 5.0, "n": 1, "c": "a"}, 1.0)])
    with pytest.raises(InvalidValueError, match="value"):
        study.add_trials(pd.DataFrame([good]))
    assert study.trials == []


def test_optimize_records_caught_failures_and_carries_on():
    study = hs.create_study("o", space2(), storage=None, method="random", seed=0)
    calls = iter(range(100))

    def flaky(params):
        i = next(calls)
        if i == 1:
            raise RuntimeError("boom")
        if i == 2:
            return math.nan
        return objective(params)

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        study.optimize(flaky, 5, catch=(RuntimeError,), show_progress=False)
    states = [t.state for t in study.trials]
    assert states == ["complete", "failed", "failed", "complete", "complete"]
    assert sum(issubclass(w.category, HeadstartWarning) for w in caught) == 2


def test_optimize_interrupt_marks_trial_failed_and_reraises():
    study = hs.create_study("k", space2(), storage=None, method="random", seed=0)

    def interrupt(params):
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        study.optimize(interrupt, 3, show_progress=False)
    assert [t.state for t in study.trials] == ["failed"]


def test_trials_dataframe_columns():
    study = hs.create_study("d", space2(), storage=None, method="random", seed=0)
    study.optimize(objective, 3, show_progress=False)
    frame = study.trials_dataframe()
    assert list(frame.columns)[:7] == [
        "number",
        "state",
        "value",
        "source",
        "params_x",
        "params_n",
        "params_c",
    ]
    assert len(frame) == 3 and frame["value"].notna().all()


def test_resume_from_another_process_sees_all_trials(tmp_path):
    url = f"sqlite:///{tmp_path / 'r.db'}"
    study = hs.create_study("r", space2(), storage=url, seed=0)
    study.optimize(objective, 4, show_progress=False)
    again = hs.load_study("r", url)
    again.optimize(objective, 2, show_progress=False)
    assert len(hs.load_study("r", url).trials) == 6


# --- crashes and concurrency ------------------------------------------------------------------------
_CHILD = textwrap.dedent(
    """
    import sys, time
    import headstart as hs
    space = hs.SearchSpace({"x": hs.Float(-2.0, 2.0), "n": hs.Int(1, 4)})
    study = hs.create_study("crash", space, storage=sys.argv[1], seed=0, n_initial=3)
    def f(p):
        time.sleep(0.05)
        return (p["x"] - 0.5) ** 2 + p["n"]
    study.optimize(f, 1000, show_progress=False)
    """
)


def test_kill_9_during_optimize_loses_no_completed_trial(tmp_path):
    url = f"sqlite:///{tmp_path / 'crash.db'}"
    proc = subprocess.Popen([sys.executable, "-c", _CHILD, url])
    deadline = time.time() + 60
    n_done = 0
    while time.time() < deadline and n_done < 8:
        time.sleep(0.3)
        try:
            n_done = sum(t.state == "complete" for t in hs.load_study("crash", url).trials)
        except (UnknownStudyError, StorageError):
            continue
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    assert n_done >= 8, "the child did not make progress"
    study = hs.load_study("crash", url)
    complete = [t for t in study.trials if t.state == "complete"]
    assert len(complete) >= n_done
    for t in complete:
        assert t.value == pytest.approx((t.params["x"] - 0.5) ** 2 + t.params["n"])
    # At most the trial in flight is left running; the study resumes.
    assert sum(t.state == "running" for t in study.trials) <= 1
    study.optimize(lambda p: (p["x"] - 0.5) ** 2 + p["n"], 2, show_progress=False)
    assert sum(t.state == "complete" for t in study.trials) == len(complete) + 2


def _worker(url: str, n: int, queue) -> None:
    study = hs.load_study("shared", url)
    told = []
    for _ in range(n):
        trial = study.ask()
        study.tell(trial, objective(trial.params))
        told.append(trial.number)
    queue.put(told)


def test_two_processes_asking_concurrently(tmp_path):
    url = f"sqlite:///{tmp_path / 'shared.db'}"
    hs.create_study("shared", space2(), storage=url, seed=0, n_initial=4)
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    procs = [ctx.Process(target=_worker, args=(url, 10, queue)) for _ in range(2)]
    for p in procs:
        p.start()
    numbers = [n for _ in procs for n in queue.get(timeout=120)]
    for p in procs:
        p.join(timeout=60)
        assert p.exitcode == 0
    assert sorted(numbers) == list(range(20))  # no duplicate ids
    trials = hs.load_study("shared", url).trials
    assert len(trials) == 20 and all(t.state == "complete" for t in trials)  # no lost tells


def test_user_attributes_are_stored_and_in_place_changes_refused(tmp_path):
    url = f"sqlite:///{tmp_path / 'a.db'}"
    space = hs.SearchSpace({"x": hs.Float(0, 1)})
    study = hs.create_study("attrs", space, storage=url, method="random", seed=0)
    study.set_user_attr("dataset", "iris")
    trial = study.ask()
    trial.set_user_attr("epochs", 12)
    assert trial.user_attrs["epochs"] == 12
    with pytest.raises(hs.ReadOnlyAttributesError, match="set_user_attr"):
        trial.user_attrs["k"] = 1  # used to be accepted and silently lost
    with pytest.raises(hs.ReadOnlyAttributesError):
        study.user_attrs.update(k=1)
    study.tell(trial, 0.5)
    again = hs.load_study("attrs", storage=url)
    assert again.user_attrs == {"dataset": "iris"}
    assert again.trials[0].user_attrs["epochs"] == 12


def test_optimize_reraises_a_bug_in_the_objective_unless_caught():
    space = hs.SearchSpace({"x": hs.Float(0, 1)})
    study = hs.create_study("typo", space, storage=None, method="random", seed=0)
    with pytest.raises(KeyError, match="'z'"):
        study.optimize(lambda p: p["z"], n_trials=20, show_progress=False)
    assert [t.state for t in study.trials] == ["failed"]  # recorded, then raised: 1 trial, not 20
    with pytest.warns(hs.HeadstartWarning, match="KeyError"):
        study.optimize(lambda p: p["z"], n_trials=2, catch=(KeyError,), show_progress=False)
    with pytest.warns(hs.HeadstartWarning, match="finite"):
        study.optimize(lambda p: float("nan"), n_trials=1, show_progress=False)
    assert [t.state for t in study.trials] == ["failed"] * 4


def test_a_callback_stops_the_run_and_timeout_limits_it():
    space = hs.SearchSpace({"x": hs.Float(0, 1)})
    study = hs.create_study("stop", space, storage=None, method="random", seed=0)

    def stop_at_three(s, trial):
        if trial.number == 2:
            s.stop()

    study.optimize(lambda p: p["x"], n_trials=10, callbacks=[stop_at_three], show_progress=False)
    assert len(study.trials) == 3
    study.optimize(lambda p: p["x"], n_trials=2, show_progress=False)  # stop() lasts one run
    assert len(study.trials) == 5
    study.optimize(lambda p: time.sleep(0.2) or p["x"], 50, timeout=0.3, show_progress=False)
    assert 6 <= len(study.trials) <= 8


def test_a_stored_studys_settings_are_never_silently_rewritten(tmp_path):
    url = f"sqlite:///{tmp_path / 'r.db'}"
    space = hs.SearchSpace({"x": hs.Float(0, 1)})
    first = hs.create_study("r", space, storage=url, n_initial=4)
    assert hs.create_study("r", space, storage=url, n_initial=4).settings == first.settings
    with pytest.raises(hs.DuplicatedStudyError, match="n_initial=4 stored, 7 given"):
        hs.create_study("r", space, storage=url, n_initial=7)
    with pytest.warns(hs.HeadstartWarning, match="n_initial=4 stored, 7 given"):
        resumed = hs.create_study("r", space, storage=url, n_initial=7, load_if_exists=True)
    assert resumed.n_initial == 4 and hs.load_study("r", storage=url).n_initial == 4
    with pytest.raises(hs.DuplicatedStudyError, match="load_study"):
        hs.create_study("r", space, storage=url, n_initial=4, load_if_exists=False)
    assert len(hs.create_study("new", space, storage=url, load_if_exists=False).trials) == 0
