"""Several objectives and constraints through the native API (issue 34): telling vectors, the
Pareto front with ties and infeasible trials, hypervolume, every bad input refused with nothing
stored, storage round trips, and overlapping asks / tells from several processes (SQLite and
PostgreSQL)."""

from __future__ import annotations

import math
import uuid

import numpy as np
import pytest

import headstart as hs
from helpers import backend_url, release_together

# the PostgreSQL cases share the worker of the server-restarting tests (tests/conftest.py)
BACKENDS = ["sqlite", pytest.param("postgresql", marks=pytest.mark.xdist_group("postgres"))]


def _space() -> hs.SearchSpace:
    return hs.SearchSpace({"x": hs.Float(0.0, 1.0), "y": hs.Float(0.0, 1.0)})


def _two(p) -> list[float]:
    return [p["x"] ** 2 + p["y"] ** 2, (p["x"] - 1) ** 2 + (p["y"] - 1) ** 2]


def _mo(name="mo", storage=None, **kw):
    return hs.create_study(
        name, _space(), directions=["minimize", "maximize"], storage=storage, seed=0, **kw
    )


def _tell_fixed(study, values, constraints=None):
    trial = study.ask()
    return study.tell(trial, values, constraints=constraints)


def test_pareto_front_keeps_ties_and_drops_dominated_and_infeasible_trials():
    study = _mo(constraints=True)
    told = [
        ([1.0, 1.0], [-1.0]),  # front
        ([1.0, 1.0], [0.0]),  # a tie, feasible at exactly 0: front
        ([2.0, 3.0], [-0.5]),  # front (worse first, better second)
        ([2.0, 0.5], [-1.0]),  # dominated by the first
        ([0.1, 9.0], [0.1]),  # would dominate everything, but infeasible
    ]
    for values, cons in told:
        _tell_fixed(study, values, cons)
    failed = study.ask()
    study.tell(failed, failed=True)
    front = study.best_trials
    assert [t.number for t in front] == [0, 1, 2]
    assert all(t.feasible for t in front) and not study.trials[4].feasible
    assert study.trials[5].state == "failed" and study.trials[5].values is None
    # minimize x, maximize y, reference (3, 0): boxes [1,3]x[0,1] and [2,3]x[1,3]
    assert study.hypervolume([3.0, 0.0]) == pytest.approx(2.0 * 1.0 + 1.0 * 2.0)
    assert study.hypervolume([0.5, 0.0]) == 0.0  # nothing better than the reference


def test_single_objective_constrained_best_trial_is_the_best_feasible():
    study = hs.create_study("c", _space(), constraints=True, storage=None, seed=0)
    with pytest.raises(hs.NoCompletedTrialsError):
        _ = study.best_trial
    _tell_fixed(study, -5.0, [1.0])  # the best value, infeasible
    with pytest.raises(hs.NoCompletedTrialsError, match="none feasible"):
        _ = study.best_trial
    assert study.best_trials == []
    _tell_fixed(study, 2.0, [-0.1, 0.0][:1])
    _tell_fixed(study, 3.0, [-2.0])
    assert study.best_value == 2.0 and study.best_trial.constraints == (-0.1,)
    assert study.best_trial.values == (2.0,)


@pytest.mark.parametrize(
    ("values", "constraints", "error", "match"),
    [
        ([1.0], None, hs.ObjectiveCountError, "2 objectives"),
        ([1.0, 2.0, 3.0], None, hs.ObjectiveCountError, "got 3 values"),
        (1.0, None, hs.ObjectiveCountError, "got one number"),
        ([1.0, math.nan], None, hs.InvalidValueError, "Objective 1"),
        ([1.0, "a"], None, hs.InvalidValueError, "Objective 1"),
        ([1.0, 2.0], [0.5], hs.ConstraintValueError, "declared no constraints"),
    ],
)
def test_bad_values_are_refused_and_nothing_is_stored(values, constraints, error, match):
    study = _mo()
    trial = study.ask()
    with pytest.raises(error, match=match):
        study.tell(trial, values, constraints=constraints)
    (stored,) = study.trials
    assert stored.state == "running" and stored.values is None and stored.constraints is None
    study.tell(trial, [1.0, 2.0])  # the trial can still be told
    assert study.trials[0].values == (1.0, 2.0)


def test_bad_constraints_are_refused_and_nothing_is_stored():
    study = hs.create_study("c", _space(), constraints=True, storage=None, seed=0)
    _tell_fixed(study, 1.0, [0.5, -1.0])
    trial = study.ask()
    for bad, match in (
        (None, "tell its constraint values"),
        ([], "tell its constraint values"),
        ([0.1], "carry 2 constraint"),
        ([0.1, math.nan], "Constraint 1: The value must be finite"),
        ([0.1, "x"], "Constraint 1: The value must be a real number"),
        ([0.1, 10**400], "Constraint 1: The value must be finite"),
    ):
        with pytest.raises(hs.ConstraintValueError, match=match):
            study.tell(trial, 1.0, constraints=bad)
        assert study.trials[1].state == "running"
    with pytest.raises(hs.ConstraintValueError, match="failed trial"):
        study.tell(trial, failed=True, constraints=[0.0, 0.0])
    assert study.trials[1].state == "running"


def test_multi_objective_guards_and_reference_point_errors():
    study = _mo()
    _tell_fixed(study, [1.0, 2.0])
    with pytest.raises(hs.MultiObjectiveError, match="best_trials"):
        _ = study.best_trial
    with pytest.raises(hs.MultiObjectiveError):
        _ = study.best_value
    for ref in ([1.0], [1.0, 2.0, 3.0], [1.0, math.inf], "ab", 3.0):
        with pytest.raises(hs.ReferencePointError):
            study.hypervolume(ref)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"directions": ["minimize", "up"]}, "directions must be a list"),
        ({"directions": "minimize"}, "directions must be a list"),
        ({"directions": ["minimize", "maximize"], "direction": "minimize"}, "not both"),
        ({"directions": ["minimize", "maximize"], "method": "abrac"}, "does not model"),
        ({"constraints": True, "acquisition": "ucb"}, "no multi-objective or constrained"),
        ({"constraints": "yes"}, "constraints must be"),
    ],
)
def test_bad_study_settings_are_refused_before_anything_is_stored(tmp_path, kwargs, match):
    url = f"sqlite:///{tmp_path / 'x.db'}"
    with pytest.raises(hs.InvalidSettingError, match=match):
        hs.create_study("bad", _space(), storage=url, **kwargs)
    with pytest.raises((hs.UnknownStudyError, hs.StorageNotFoundError)):
        hs.load_study("bad", url)  # nothing stored


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"reference_point": [1.0]}, hs.ReferencePointError, "list of 2 finite"),
        ({"reference_point": [1.0, math.nan]}, hs.ReferencePointError, "list of 2 finite"),
        ({"reference_point": [1.0, True]}, hs.ReferencePointError, "list of 2 finite"),
        ({"reference_point": "ab"}, hs.ReferencePointError, "list of 2 finite"),
        ({"reference_point": 3.0}, hs.ReferencePointError, "list of 2 finite"),
        ({"reference_point": {1.0, 2.0}}, hs.ReferencePointError, "list of 2 finite"),  # unordered
        ({"reference_point": [10**400, 1]}, hs.ReferencePointError, "list of 2 finite"),
        ({"reference_point": np.ones((1, 2))}, hs.ReferencePointError, "list of 2 finite"),
    ],
)
def test_a_bad_reference_point_is_refused_before_anything_is_stored(tmp_path, kwargs, error, match):
    url = f"sqlite:///{tmp_path / 'x.db'}"
    with pytest.raises(error, match=match):
        _mo("bad", storage=url, **kwargs)
    with pytest.raises(hs.InvalidSettingError, match="one objective"):
        hs.create_study("bad", _space(), storage=url, reference_point=[1.0, 2.0])
    with pytest.raises((hs.UnknownStudyError, hs.StorageNotFoundError)):
        hs.load_study("bad", url)  # nothing stored


def test_the_reference_point_is_stored_and_is_hypervolumes_default(tmp_path):
    url = f"sqlite:///{tmp_path / 'r.db'}"
    study = _mo("r", storage=url, reference_point=[3, -1.0])
    for values in ([1.0, 2.0], [2.0, 3.0], [0.5, 0.5]):
        _tell_fixed(study, values)
    again = hs.load_study("r", url)
    assert again.config.reference_point == (3.0, -1.0)
    assert (
        again.hypervolume()
        == study.hypervolume([3.0, -1.0])
        == pytest.approx(
            0.5 * 1.5 + 1.0 * 3.0 + 1.0 * 4.0  # slabs f1 in [0.5, 1), [1, 2), [2, 3] above (3, -1)
        )
    )
    with pytest.raises(hs.ReferencePointError, match="no reference_point"):
        _mo("plain").hypervolume()


def test_a_reference_point_may_be_an_array_and_serves_a_constrained_study():
    study = _mo("arr", reference_point=np.array([3.0, -1.0]), constraints=True, n_initial=2)
    assert study.config.reference_point == (3.0, -1.0)
    for values, c in (([1.0, 2.0], [-1.0]), ([2.0, 3.0], [1.0]), ([0.5, 0.5], [-0.5])):
        _tell_fixed(study, values, constraints=c)
    trial = study.ask()  # EHVI above the reference, times the feasibility
    assert 0.0 <= trial.params["x"] <= 1.0
    assert study.hypervolume() == pytest.approx(0.5 * 1.5 + 2.0 * 3.0)  # (2, 3) is infeasible


def test_to_model_units_continues_a_warped_map_with_the_whole_ranges_slope():
    """Two nearly tied worst values make a warped map's end segment nearly vertical; a far
    reference point continued along it would land millions of units away."""
    from headstart._engine.multi_output import to_model_units

    y, model = np.array([0.0, 1.0, 1.000001]), np.array([0.0, 1.0, 2.0])
    assert to_model_units(y, model, 11.0) > 1e6  # the end segment's slope (constraints)
    assert to_model_units(y, model, 11.0, beyond="range") == pytest.approx(2.0 + 10.0 * 2.0, 1e-5)
    assert to_model_units(y, model, 0.5, beyond="range") == 0.5  # inside: interpolation
    affine = 3.0 * y - 1.0  # standardization: both continuations are exact
    for beyond in ("end", "range"):
        assert to_model_units(y, affine, -4.0, beyond=beyond) == pytest.approx(-13.0)


def test_ehvi_maximizes_the_hypervolume_above_the_given_reference_point():
    """On f1 = x, f2 = 1 - x (both maximized) every x is on the front; a reference point of
    (0.7, 0) leaves only x in (0.7, 1) anything to add, so the suggestion lies there. Without
    it, the inferred reference (around the observed front) values the widest gap, 0.2-0.8."""
    space = hs.SearchSpace({"x": hs.Float(0.0, 1.0)})
    suggestions = {}
    for ref in ([0.7, 0.0], None):
        study = hs.create_study(
            f"ref-{ref}", space, directions=["maximize", "maximize"], storage=None, seed=0,
            reference_point=ref, deterministic=True, n_initial=1,
        )  # fmt: skip
        study.add_trials([({"x": x}, [x, 1.0 - x]) for x in (0.0, 0.1, 0.2, 0.8, 0.9, 1.0)])
        suggestions[ref is None] = study.ask().params["x"]
    assert 0.7 < suggestions[False] < 1.0
    assert 0.2 < suggestions[True] < 0.7
    # the same problem minimized (-x and x - 1): the reference flips with the directions
    study = hs.create_study(
        "ref-min", space, directions=["minimize", "minimize"], storage=None, seed=0,
        reference_point=[-0.7, 0.0], deterministic=True, n_initial=1,
    )  # fmt: skip
    study.add_trials([({"x": x}, [-x, x - 1.0]) for x in (0.0, 0.1, 0.2, 0.8, 0.9, 1.0)])
    assert 0.7 < study.ask().params["x"] < 1.0


def test_a_single_direction_list_is_a_single_objective_study():
    study = hs.create_study("one", _space(), directions=["maximize"], storage=None, seed=0)
    assert study.direction == "maximize" and study.directions == ("maximize",)
    _tell_fixed(study, 2.0)
    _tell_fixed(study, [3.0])  # Optuna's one-element list
    assert study.best_value == 3.0


def test_optimize_several_objectives_with_a_constraints_function_and_dict_results():
    study = _mo(constraints=lambda p: [p["x"] - 0.8])
    study.optimize(_two, 12, show_progress=False)
    assert all(t.state == "complete" and len(t.values) == 2 for t in study.trials)
    assert all(t.constraints == (pytest.approx(t.params["x"] - 0.8),) for t in study.trials)
    other = hs.create_study("d", _space(), constraints=True, storage=None, seed=1)
    other.optimize(
        lambda p: {"value": p["x"], "constraints": [0.3 - p["y"]]}, 12, show_progress=False
    )
    assert other.best_trial.params["y"] >= 0.3
    with pytest.raises(hs.ConstraintValueError, match="constrained"):  # none returned: stop
        other.optimize(lambda p: p["x"], 1, show_progress=False)
    assert other.trials[-1].state == "failed"


def test_suggestions_improve_the_front_over_random_search():
    """Log EHVI with one GP per objective beats random search on BoTorch's BraninCurrin (two
    objectives, minimized; its reference point), 2 seeds x 16 trials: measured hypervolume 44
    and 48 against random search's 0 and 6.3."""
    torch = pytest.importorskip("torch")
    from botorch.test_functions.multi_objective import BraninCurrin

    problem = BraninCurrin()

    def objective(p):
        x = torch.tensor([[p["x"], p["y"]]], dtype=torch.float64)
        return problem(x)[0].tolist()

    ref = problem.ref_point.tolist()
    volume = {"gp": [], "random": []}
    for seed in range(2):
        for method, out in volume.items():
            study = hs.create_study(
                f"bc-{method}{seed}",
                _space(),
                directions=["minimize", "minimize"],
                storage=None,
                seed=seed,
                method=method,
                n_initial=5,
            )
            study.optimize(objective, 16, show_progress=False)
            out.append(study.hypervolume(ref))
    assert min(volume["gp"]) > 2 * max(volume["random"])


def test_constrained_suggestions_find_the_feasible_optimum():
    study = hs.create_study(
        "c", _space(), direction="maximize", constraints=True, storage=None, seed=0
    )
    for _ in range(20):
        trial = study.ask()
        p = trial.params
        study.tell(trial, p["x"] + p["y"], constraints=[p["x"] - 0.5])
    assert study.best_value > 1.4 and study.best_trial.feasible


@pytest.mark.parametrize("backend", BACKENDS)
def test_values_and_constraints_survive_reopening(tmp_path, backend):
    url = backend_url(backend, tmp_path)
    name = f"mo-{uuid.uuid4().hex[:8]}"
    study = _mo(name, url, constraints=True)
    _tell_fixed(study, [1.5, -2.0], [0.25, -1.0])
    again = hs.load_study(name, url)
    assert again.directions == ("minimize", "maximize") and again.config.constrained
    (trial,) = again.trials
    assert trial.values == (1.5, -2.0) and trial.value == 1.5
    assert trial.constraints == (0.25, -1.0) and not trial.feasible
    hs.delete_study(name, url)


def _mo_worker(url: str, name: str, barrier, rounds: int) -> None:
    study = hs.load_study(name, url)
    for _ in range(rounds):
        barrier.wait(timeout=120)
        trial = study.ask()
        barrier.wait(timeout=120)  # every tell overlaps too
        p = trial.params
        study.tell(trial, _two(p), constraints=[p["x"] - 0.7])


@pytest.mark.parametrize("backend", BACKENDS)
def test_overlapping_asks_and_tells_lose_no_vector(tmp_path, backend):
    url = backend_url(backend, tmp_path, "mo.db")
    name = f"mo-par-{uuid.uuid4().hex[:8]}"
    hs.create_study(
        name,
        _space(),
        directions=["minimize", "minimize"],
        constraints=True,
        storage=url,
        seed=0,
        n_initial=2,
    )
    workers, rounds = 3, 3
    release_together(
        _mo_worker, lambda barrier, _: (url, name, barrier, rounds), workers, preloaded=True
    )
    trials = hs.load_study(name, url).trials
    assert sorted(t.number for t in trials) == list(range(workers * rounds))
    for t in trials:
        assert t.state == "complete"
        assert t.values == pytest.approx(tuple(_two(t.params)))
        assert t.constraints == pytest.approx((t.params["x"] - 0.7,))
    assert len({(t.params["x"], t.params["y"]) for t in trials}) == len(trials)
    hs.delete_study(name, url)


def test_exports_carry_every_value_and_import_back(tmp_path):
    study = _mo(constraints=True)
    _tell_fixed(study, [1.0, 2.0], [0.5])
    _tell_fixed(study, [0.5, 1.0], [-0.5])
    failed = study.ask()
    study.tell(failed, failed=True)
    frame = study.trials_dataframe()
    assert list(frame.columns[:5]) == ["number", "state", "values_0", "values_1", "constraints_0"]
    assert frame.loc[0, "values_1"] == 2.0 and frame.loc[0, "constraints_0"] == 0.5
    doc = study.export(tmp_path / "mo.json")
    assert doc["directions"] == ["minimize", "maximize"]
    assert doc["trials"][0]["values"] == [1.0, 2.0] and doc["trials"][0]["constraints"] == [0.5]
    assert doc["trials"][2]["values"] is None
    for source in (doc["trials"], frame, tmp_path / "mo.json"):
        copy = _mo("copy", constraints=True)
        copy.add_trials(source)
        got = [(t.state, t.values, t.constraints) for t in copy.trials]
        assert got == [(t.state, t.values, t.constraints) for t in study.trials]
        assert [t.number for t in copy.best_trials] == [t.number for t in study.best_trials]
    copy = _mo("bad", constraints=True)
    with pytest.raises(hs.ObjectiveCountError, match="Row 1 of add_trials"):
        copy.add_trials([doc["trials"][0], {"params": {"x": 0.1, "y": 0.2}, "value": 1.0}])
    with pytest.raises(hs.ConstraintValueError, match="Row 0 of add_trials"):
        copy.add_trials([{"params": {"x": 0.1, "y": 0.2}, "values": [1.0, 2.0]}])
    assert copy.trials == []  # validated before anything is written
    one = hs.create_study("one", _space(), storage=None)
    with pytest.raises(hs.InvalidSettingError, match="directions"):
        one.add_trials(tmp_path / "mo.json")


def test_pibo_weight_multiplies_the_multi_objective_criterion():
    study = hs.create_study(
        "pibo",
        hs.SearchSpace({"x": hs.Float(0.0, 1.0, prior=hs.Normal(0.9, 0.05)), "y": hs.Float(0, 1)}),
        directions=["minimize", "minimize"],
        storage=None,
        seed=0,
        n_initial=4,
        prior_strength=50.0,
    )
    study.optimize(_two, 8, show_progress=False)
    late = [t.params["x"] for t in study.trials[4:]]
    assert np.mean(late) > 0.85  # the belief pulls the search to x = 0.9 (without: 0.67)


@pytest.fixture(scope="module")
def mo_study():
    study = hs.create_study(
        "front",
        _space(),
        directions=["minimize", "minimize"],
        constraints=lambda p: [p["y"] - 0.8],
        storage=None,
        seed=0,
        method="random",
    )
    study.optimize(_two, 25, show_progress=False)
    return study


def test_plots_show_the_front_the_hypervolume_and_infeasible_trials(mo_study, tmp_path):
    from headstart import plots

    assert any(not t.feasible for t in mo_study.trials)  # the plots have both kinds to show
    ref = plots.default_reference(mo_study)
    feasible = np.array([t.values for t in mo_study.trials if t.feasible])
    assert (np.array(ref) > feasible.max(axis=0)).all()  # worse than every feasible trial
    fig = plots.plot_pareto_front(mo_study, tmp_path / "front.png")
    assert (tmp_path / "front.png").stat().st_size > 5000
    fig = plots.plot_hypervolume(mo_study, reference=ref)
    (line,) = fig.axes[0].lines[:1]
    volumes = line.get_ydata()
    assert np.all(np.diff(volumes) >= -1e-12)  # a front's hypervolume never shrinks
    assert volumes[-1] == pytest.approx(mo_study.hypervolume(ref))
    slices = plots.plot_slice(mo_study)
    legends = [ax.get_legend() for ax in slices.axes if ax.get_legend() is not None]
    assert any("infeasible" in t.get_text() for lg in legends for t in lg.get_texts())
    three = hs.create_study(
        "3d", _space(), directions=["minimize"] * 3, storage=None, seed=0, method="random"
    )
    three.optimize(lambda p: [p["x"], p["y"], 2 - p["x"] - p["y"]], 8, show_progress=False)
    plots.plot_pareto_front(three, tmp_path / "front3.png")
    assert (tmp_path / "front3.png").exists()


def test_the_report_shows_the_pareto_front(mo_study, tmp_path):
    from headstart.report import write_report

    text = write_report(mo_study, tmp_path / "r.html").read_text()
    assert "Pareto front (" in text and "Hypervolume" in text
    assert text.count("<img ") >= 5  # front, hypervolume, importance/slices/contour/parallel


def test_the_cli_shows_the_front_and_the_feasible_count(mo_study, tmp_path, capsys, monkeypatch):
    import sys

    from headstart.cli import main

    def run(*args):
        monkeypatch.setattr(sys, "argv", ["headstart", *args])
        with pytest.raises(SystemExit) as done:
            main()
        assert done.value.code in (0, None)
        return capsys.readouterr().out

    url = f"sqlite:///{tmp_path / 'cli.db'}"
    copy = hs.create_study(
        "front", _space(), directions=["minimize", "minimize"], constraints=True, storage=url
    )
    for t in mo_study.trials:
        trial = copy.enqueue(t.params)
        copy.tell(copy.ask(), list(t.values), constraints=list(t.constraints))
        assert trial.number == copy.trials[-1].number
    shown = run("studies", "show", "front", "--storage", url, "--plot", str(tmp_path / "hv.png"))
    n_feasible = sum(t.feasible for t in mo_study.trials)
    assert f"feasible (every constraint <= 0): {n_feasible} of 25" in shown
    assert f"Pareto front ({len(mo_study.best_trials)} trials)" in shown and "hypervolume" in shown
    assert (tmp_path / "hv.png").exists()
    assert "minimize," in run("studies", "list", "--storage", url)  # both directions


def _shifted(p, shift=0.0):
    x, y = p["x"], p["y"]
    return [(x - 0.2 - shift) ** 2 + (y - 0.3) ** 2, (x - 0.8 - shift) ** 2 + (y - 0.7) ** 2]


@pytest.fixture(scope="module")
def source_store():
    """An earlier constrained two-objective study on a slightly shifted problem."""
    from headstart.storage import get_storage

    store = get_storage(None)
    source = hs.create_study(
        "earlier",
        _space(),
        directions=["minimize", "minimize"],
        constraints=True,
        storage=store,
        seed=1,
        method="random",
    )
    for _ in range(40):
        trial = source.ask()
        source.tell(trial, _shifted(trial.params, 0.05), constraints=[trial.params["y"] - 0.6])
    return store


def test_transfer_models_each_objective_and_constraint_from_the_sources(source_store):
    """ScaML-GP per output: the sources' constraint values keep the new study feasible from its
    first trial, and their objectives give a better front after 8 trials than plain GP-BO
    (measured: hypervolume 0.93 vs 0.75-0.85, 0 vs 3 infeasible trials per seed, 3 seeds; plain
    GP-BO's 8 trials are its 10-point initial design)."""
    results = {}
    for method in ("scaml", "gp"):
        volumes, infeasible = [], 0
        for seed in range(2):
            kw = {"transfer_from": ["earlier"]} if method == "scaml" else {}
            study = hs.create_study(
                f"new-{method}-{seed}",
                _space(),
                directions=["minimize", "minimize"],
                constraints=True,
                storage=source_store,
                seed=seed,
                method=method,
                **kw,
            )
            for _ in range(8):
                trial = study.ask()
                study.tell(trial, _shifted(trial.params), constraints=[trial.params["y"] - 0.6])
            volumes.append(study.hypervolume([1.0, 1.0]))
            infeasible += sum(not t.feasible for t in study.trials)
        results[method] = (np.mean(volumes), infeasible)
    assert results["scaml"][1] < results["gp"][1]
    assert results["scaml"][0] > results["gp"][0]
    transfer = hs.load_study("new-scaml-0", source_store).settings["transfer"]
    assert len(transfer["outputs"]) == 3 and transfer["n_constraints"] == 1


def test_multi_output_sources_are_checked(source_store, tmp_path):
    import pandas as pd

    three = dict(directions=["minimize"] * 3, storage=source_store, method="scaml")
    with pytest.raises(hs.InvalidSettingError, match="has 2 objective"):
        hs.create_study("three", _space(), transfer_from=["earlier"], **three)
    frame = pd.DataFrame({"x": [0.1], "y": [0.2], "value": [1.0]})
    with pytest.raises(hs.InvalidSettingError, match="transfers from studies"):
        hs.create_study(
            "df", _space(), directions=["minimize"] * 2, method="scaml", storage=None,
            transfer_from=frame,
        )  # fmt: skip
    # an unconstrained source serves the objectives; the constraint gets a plain GP
    plain = hs.create_study(
        "plain-source", _space(), directions=["minimize"] * 2, storage=source_store, seed=0
    )
    plain.optimize(_shifted, 6, show_progress=False)
    target = hs.create_study(
        "from-plain",
        _space(),
        directions=["minimize"] * 2,
        constraints=True,
        storage=source_store,
        method="scaml",
        transfer_from=["plain-source"],
        seed=0,
    )
    for _ in range(3):
        trial = target.ask()
        target.tell(trial, _shifted(trial.params), constraints=[trial.params["y"] - 0.6])
    assert target.settings["transfer"]["n_constraints"] == 0 and len(target.trials) == 3
    constraint_model = target._strategy.engine._output_surrogates(3)[2]
    assert constraint_model.prior_mean == "mean"  # a constraint's plain GP: the values' mean
    every = hs.create_study(  # "all": the stored studies with two objectives on this space
        "from-all", _space(), directions=["minimize"] * 2, storage=source_store, method="scaml",
        transfer_from="all", constraints=True,
    )  # fmt: skip
    sources = every.settings["transfer"]["sources"]
    assert {"earlier", "plain-source", "from-plain"} <= set(sources) and "from-all" not in sources


def test_an_optuna_multi_objective_study_is_a_source(source_store):
    optuna = pytest.importorskip("optuna")
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    old = optuna.create_study(
        directions=["minimize", "minimize"], sampler=optuna.samplers.RandomSampler(seed=0)
    )

    def objective(trial):
        p = {"x": trial.suggest_float("x", 0, 1), "y": trial.suggest_float("y", 0, 1)}
        trial.set_constraint("y", p["y"] - 0.6)
        return _shifted(p, 0.05)

    old.optimize(objective, n_trials=20)
    study = hs.create_study(
        "from-optuna",
        _space(),
        directions=["minimize", "minimize"],
        constraints=True,
        storage=source_store,
        method="scaml",
        transfer_from=old,
        seed=0,
    )
    first = study.ask()  # the sources' feasible knee point
    assert first.params["y"] <= 0.6
    assert study.settings["transfer"]["n_constraints"] == 1


def test_a_batch_of_asks_spreads_over_the_front():
    study = _mo("batch", n_initial=5)
    study.optimize(_two, 6, show_progress=False)
    batch = study.ask(3)  # each sees the ones before as pending fantasies
    points = {(t.params["x"], t.params["y"]) for t in batch}
    assert len(points) == 3 and all(t.state == "running" for t in batch)


def test_optimize_records_bad_constraints_as_failed_trials_and_stops_without_any():
    study = hs.create_study("c", _space(), constraints=True, storage=None, seed=0)
    with pytest.warns(hs.HeadstartWarning, match="Constraint 0"):
        study.optimize(lambda p: {"value": p["x"], "constraints": [math.nan]}, 1)
    assert study.trials[0].state == "failed"  # not left running
    with pytest.raises(hs.ConstraintValueError, match="neither the objective"):
        study.optimize(lambda p: p["x"], 3, show_progress=False)
    assert [t.state for t in study.trials] == ["failed", "failed"]  # stopped at once

    def broken(params):
        raise RuntimeError("no memory reading")

    fn = hs.create_study("f", _space(), constraints=broken, storage=None, seed=0)
    with pytest.raises(RuntimeError, match="no memory reading"):
        fn.optimize(lambda p: p["x"], 2, show_progress=False)
    assert [t.state for t in fn.trials] == ["failed"]
    with pytest.raises(hs.InvalidSettingError, match="n_workers > 1"):
        fn.optimize(lambda p: p["x"], 2, n_workers=2)


def test_resuming_with_other_objectives_or_constraints_is_refused(tmp_path):
    url = f"sqlite:///{tmp_path / 'r.db'}"
    _mo("r", url)
    for kwargs in (
        {"direction": "minimize"},
        {"directions": ["minimize", "maximize"], "constraints": True},
        {"directions": ["maximize", "maximize"]},
    ):
        with pytest.raises(hs.DuplicatedStudyError, match="already exists with direction"):
            hs.create_study("r", _space(), storage=url, seed=0, load_if_exists=True, **kwargs)
    assert _mo("r", url, load_if_exists=True).directions == ("minimize", "maximize")


def test_single_model_views_and_single_objective_hypervolume_are_refused():
    study = _mo()
    _tell_fixed(study, [1.0, 2.0])
    with pytest.raises(hs.InvalidSettingError, match="several objectives"):
        study.acquisition_slice("x")
    one = hs.create_study("one", _space(), storage=None)
    _tell_fixed(one, 1.0)
    with pytest.raises(hs.MultiObjectiveError, match="one objective"):
        one.hypervolume([2.0])


def test_plots_work_before_any_feasible_trial():
    from headstart import plots

    study = hs.create_study("none-ok", _space(), constraints=True, storage=None, seed=0)
    for _ in range(4):
        _tell_fixed(study, 1.0, [1.0])
    plots.plot_parallel_coordinates(study)
    plots.plot_contour(study, "x", "y")
    plots.plot_slice(study)
    assert study.best_trials == []


def test_a_constrained_single_objective_export_is_a_transfer_source(tmp_path):
    study = hs.create_study("c", _space(), constraints=True, storage=None, seed=0)
    for v in (1.0, 2.0, 3.0):
        _tell_fixed(study, v, [-1.0])
    study.export(tmp_path / "c.json")
    task = hs.sources.from_export(tmp_path / "c.json", _space())
    assert task.y.tolist() == [1.0, 2.0, 3.0]
