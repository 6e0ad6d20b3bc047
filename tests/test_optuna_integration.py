"""headstart inside Optuna: HeadstartSampler, Optuna studies and exports as transfer sources."""

from __future__ import annotations

import logging
import math

import numpy as np
import pytest

import headstart as hs
from headstart.exceptions import InvalidSettingError, SourceSpaceMismatchError

optuna = pytest.importorskip("optuna")
from headstart.integrations.optuna import PARAMS_KEY, HeadstartSampler  # noqa: E402
from headstart.integrations.optuna_space import (  # noqa: E402
    distributions_from_space,
    space_from_distributions,
    to_optuna_value,
)

optuna.logging.set_verbosity(optuna.logging.WARNING)


def quadratic(trial) -> float:
    x = trial.suggest_float("x", -2.0, 2.0)
    lr = trial.suggest_float("lr", 1e-4, 1.0, log=True)
    kind = trial.suggest_categorical("kind", ["a", "b"])
    return (x - 0.3) ** 2 + (np.log10(lr) + 2) ** 2 / 4 + 0.5 * (kind == "b")


def test_an_optuna_script_switches_by_its_sampler_line_with_pruning_and_two_threads():
    def objective(trial):
        x = trial.suggest_float("x", -2.0, 2.0)
        y = trial.suggest_int("y", 0, 8)
        for step in range(4):
            trial.report((x - 0.3) ** 2 + abs(y - 5) / 4 + 1.0 / (step + 1), step)
            if trial.should_prune():
                raise optuna.TrialPruned()
        return (x - 0.3) ** 2 + abs(y - 5) / 4

    study = optuna.create_study(
        sampler=HeadstartSampler(seed=0),  # the only line that changes
        pruner=optuna.pruners.MedianPruner(n_startup_trials=4),
    )
    study.optimize(objective, n_trials=24, n_jobs=2)
    states = [t.state for t in study.trials]
    assert len(states) == 24 and optuna.trial.TrialState.FAIL not in states
    assert optuna.trial.TrialState.PRUNED in states  # Optuna's pruner works with it
    assert study.best_value < 0.1  # random search's expected best of 24 is about 0.25
    configs = {tuple(sorted(t.params.items())) for t in study.trials}
    assert len(configs) == 24  # a pruned configuration is not suggested again
    modelled = [t for t in study.trials if PARAMS_KEY in t.system_attrs]
    assert len(modelled) >= 20  # all but the first trials come from the GP


def test_a_pruned_trial_counts_as_no_better_than_the_median():
    from headstart.integrations.optuna import pruned_values

    def pruned(intermediate):
        return optuna.trial.create_trial(
            state=optuna.trial.TrialState.PRUNED,
            params={"x": 0.5},
            distributions={"x": optuna.distributions.FloatDistribution(0, 1)},
            intermediate_values=intermediate,
        )

    completed = np.array([-1.0, -2.0, -5.0])  # maximize convention: minimized values 1, 2, 5
    trials = [pruned({0: 9.0, 3: 4.0}), pruned({0: 0.5}), pruned({}), pruned({})]
    got = pruned_values(trials, completed, -1.0)
    # last reported; capped at the median; else the worst ...
    np.testing.assert_allclose(got, [-4.0, -2.0, -5.0, -5.0], rtol=0, atol=1e-7)
    # ... each a hair below its level, so no copy ties (prior_mean="auto" reads a tie as a plateau)
    assert len(set(got) | set(completed)) == len(got) + len(completed)
    assert all(g < level for g, level in zip(got, [-4.0, -2.0, -5.0, -5.0], strict=True))


def test_running_trials_are_pending_points_for_the_next_suggestion():
    sampler = HeadstartSampler(seed=1, n_startup_trials=2)
    study = optuna.create_study(sampler=sampler)
    study.optimize(quadratic, n_trials=4)
    first, second = study.ask(), study.ask()  # two workers, neither has told yet
    a = {n: quadratic_params(first)[n] for n in ("x", "lr", "kind")}
    b = {n: quadratic_params(second)[n] for n in ("x", "lr", "kind")}
    assert a != b
    assert PARAMS_KEY in study.trials[4].system_attrs


def quadratic_params(trial) -> dict:
    return {
        "x": trial.suggest_float("x", -2.0, 2.0),
        "lr": trial.suggest_float("lr", 1e-4, 1.0, log=True),
        "kind": trial.suggest_categorical("kind", ["a", "b"]),
    }


def test_conditional_parameters_go_to_the_independent_sampler_with_one_warning(caplog):
    def objective(trial):
        x = trial.suggest_float("x", 0.0, 1.0)
        if trial.number % 2:
            return x + trial.suggest_float("extra", 0.0, 1.0)
        return x

    study = optuna.create_study(sampler=HeadstartSampler(seed=0, n_startup_trials=2))
    with caplog.at_level(logging.WARNING, logger="headstart.integrations.optuna"):
        study.optimize(objective, n_trials=8)
    warned = [r for r in caplog.records if "'extra'" in r.getMessage()]
    assert len(warned) == 1 and "RandomSampler" in warned[0].getMessage()
    assert all(PARAMS_KEY in t.system_attrs for t in study.trials[2:])


def test_transfer_from_an_optuna_storage_uses_the_sources_from_the_first_trial(tmp_path):
    url = f"sqlite:///{tmp_path / 'optuna.db'}"
    for name, seed in [("old-1", 0), ("old-2", 1)]:
        old = optuna.create_study(
            study_name=name, storage=url, sampler=optuna.samplers.RandomSampler(seed)
        )
        old.optimize(quadratic, n_trials=30)
    sampler = HeadstartSampler("scaml", transfer_from=hs.sources.from_optuna(url), seed=0)
    study = optuna.create_study(sampler=sampler)
    study.optimize(quadratic, n_trials=1)
    assert PARAMS_KEY in study.trials[0].system_attrs  # modelled, not random
    random_best = optuna.load_study(study_name="old-1", storage=url).best_value
    assert study.trials[0].value < random_best + 0.2


def test_optuna_trials_dataframe_is_a_source_and_an_import_as_it_is():
    old = optuna.create_study(sampler=optuna.samplers.RandomSampler(0))
    old.optimize(quadratic, n_trials=12)
    old.enqueue_trial({"x": 0.0, "lr": 0.1, "kind": "a"})
    old.ask()  # a RUNNING row in the export
    frame = old.trials_dataframe()
    assert set(frame.state) == {"COMPLETE", "RUNNING"} and "duration" in frame.columns
    space = hs.SearchSpace(
        {
            "x": hs.Float(-2, 2),
            "lr": hs.Float(1e-4, 1, log=True),
            "kind": hs.Categorical(["a", "b"]),
        }
    )
    study = hs.create_study("t", space, storage=None, method="scaml", transfer_from=[frame])
    assert study.settings["transfer"]["n_points"] == [12]  # the RUNNING row is skipped
    plain = hs.create_study("p", space, storage=None)
    with pytest.warns(hs.HeadstartWarning, match="skipped 1 running row of 13"):
        assert len(plain.add_trials(frame)) == 12


def test_an_optuna_study_object_and_its_mismatch_errors():
    old = optuna.create_study(sampler=optuna.samplers.RandomSampler(0))
    old.optimize(quadratic, n_trials=6)
    narrow = hs.SearchSpace(
        {"x": hs.Float(0, 1), "lr": hs.Float(1e-4, 1, log=True), "kind": hs.Categorical(["a", "b"])}
    )
    with pytest.raises(SourceSpaceMismatchError, match=r"Optuna study .* trial"):
        hs.create_study("t", narrow, storage=None, method="scaml", transfer_from=old)
    two = optuna.create_study(directions=["minimize", "minimize"])
    with pytest.raises(InvalidSettingError, match="2 objectives"):
        hs.create_study("u", narrow, storage=None, method="scaml", transfer_from=two)
    scaml = HeadstartSampler("scaml", transfer_from=old, n_startup_trials=0)
    with pytest.raises(InvalidSettingError, match="has 1 objective"):  # a one-objective source
        optuna.create_study(directions=["minimize"] * 2, sampler=scaml).optimize(
            lambda t: (t.suggest_float("x", 0, 1), 1.0), n_trials=1
        )


def _two_objectives(trial):
    x, y = trial.suggest_float("x", 0, 1), trial.suggest_float("y", 0, 1)
    trial.set_user_attr("memory", x + y)
    return x**2 + y**2, (x - 1) ** 2 + (y - 1) ** 2


def test_multi_objective_studies_with_constraints_func():
    sampler = HeadstartSampler(
        seed=0, n_startup_trials=4, constraints_func=lambda t: [t.user_attrs["memory"] - 1.2]
    )
    study = optuna.create_study(directions=["minimize", "minimize"], sampler=sampler)
    study.optimize(_two_objectives, n_trials=12)
    trials = study.trials
    assert all(t.state == optuna.trial.TrialState.COMPLETE for t in trials)
    assert all(t.system_attrs["constraints"] == [t.user_attrs["memory"] - 1.2] for t in trials)
    front = study.best_trials  # Optuna reads the stored constraints: feasible trials only
    assert front and all(t.user_attrs["memory"] <= 1.2 for t in front)
    assert sum(t.user_attrs["memory"] <= 1.2 for t in trials[4:]) >= 5  # the model learned it
    with pytest.raises(InvalidSettingError, match="constraints_func must be a function"):
        HeadstartSampler(constraints_func=3)
    with pytest.raises(InvalidSettingError, match="does not model constraints"):
        HeadstartSampler("abrac", transfer_from=[], constraints_func=lambda t: [0.0])


def test_a_reference_point_steers_ehvi_through_the_sampler():
    """As ``create_study(reference_point=...)``: on f1 = x, f2 = 1 - x (both maximized) only
    x in (0.7, 1) adds hypervolume above (0.7, 0); a one-objective study refuses the point."""
    sampler = HeadstartSampler(
        seed=0, n_startup_trials=1, deterministic_objective=True, reference_point=[0.7, 0.0]
    )
    study = optuna.create_study(directions=["maximize", "maximize"], sampler=sampler)
    for x in (0.0, 0.1, 0.2, 0.8, 0.9, 1.0):
        study.enqueue_trial({"x": x})

    def line(trial):
        x = trial.suggest_float("x", 0.0, 1.0)
        return x, 1.0 - x

    study.optimize(line, n_trials=7)
    assert 0.7 < study.trials[-1].params["x"] < 1.0
    one = optuna.create_study(sampler=HeadstartSampler(seed=0, reference_point=[0.7, 0.0]))
    with pytest.raises(InvalidSettingError, match="one objective"):  # before trial 0 runs
        one.optimize(lambda t: t.suggest_float("x", 0.0, 1.0), n_trials=1)
    three = optuna.create_study(
        directions=["minimize"] * 3, sampler=HeadstartSampler(reference_point=[1.0, 2.0])
    )
    with pytest.raises(hs.ReferencePointError, match="list of 3 finite"):
        three.optimize(lambda t: (t.suggest_float("x", 0.0, 1.0),) * 3, n_trials=1)
    with pytest.raises(hs.ReferencePointError, match="finite numbers"):  # when built
        HeadstartSampler(reference_point=[math.nan, 0.0])


def test_settings_are_checked_when_the_sampler_is_built():
    with pytest.raises(
        InvalidSettingError, match=r"Unknown setting or option 'aquisition'.*'acquisition'"
    ):
        HeadstartSampler(aquisition="ei")
    with pytest.raises(InvalidSettingError, match="transfer_from"):
        HeadstartSampler("scaml")
    with pytest.raises(InvalidSettingError, match="acquisition"):
        HeadstartSampler(acquisition="nope")


def test_priors_switch_pibo_on_and_the_first_trial_is_the_beliefs_mode():
    space = {"x": optuna.distributions.FloatDistribution(0.0, 1.0)}
    sampler = HeadstartSampler(priors={"x": hs.Normal(0.8, 0.05)}, search_space=space, seed=0)
    study = optuna.create_study(sampler=sampler)
    study.optimize(lambda t: (t.suggest_float("x", 0.0, 1.0) - 0.8) ** 2, n_trials=3)
    assert study.trials[0].params["x"] == pytest.approx(0.8)
    assert sampler.search_space["x"].prior == hs.Normal(0.8, 0.05)


def test_steps_are_snapped_to_the_grid_and_distributions_round_trip():
    float_step = optuna.distributions.FloatDistribution(0.0, 1.0, step=0.25)
    int_step = optuna.distributions.IntDistribution(1, 10, step=3)
    assert to_optuna_value(0.6, float_step) == 0.5
    assert to_optuna_value(9.9, int_step) == 10 and to_optuna_value(8.4, int_step) == 7

    def objective(trial):
        a = trial.suggest_float("a", 0.0, 1.0, step=0.25)
        b = trial.suggest_int("b", 1, 10, step=3)
        return (a - 0.5) ** 2 + (b - 7) ** 2

    study = optuna.create_study(sampler=HeadstartSampler(seed=0, n_startup_trials=3))
    study.optimize(objective, n_trials=8)  # Optuna refuses values off the grid
    assert {t.params["b"] for t in study.trials} <= {1, 4, 7, 10}
    space = hs.SearchSpace(
        {"f": hs.Float(1e-3, 1, log=True), "i": hs.Int(2, 9), "c": hs.Categorical([1, "x"])}
    )
    assert space_from_distributions(distributions_from_space(space)) == space


def test_headstart_studies_are_sources_of_the_sampler(tmp_path):
    url = f"sqlite:///{tmp_path / 'hs.db'}"
    space = hs.SearchSpace(
        {
            "x": hs.Float(-2, 2),
            "lr": hs.Float(1e-4, 1, log=True),
            "kind": hs.Categorical(["a", "b"]),
        }
    )
    old = hs.create_study("old", space, storage=url, method="random", seed=0)
    old.optimize(lambda p: quadratic_value(**p), 20, show_progress=False)
    given = {name: d for name, d in distributions_from_space(space).items()}
    sampler = HeadstartSampler(
        "scaml", transfer_from=["old"], storage=url, search_space=given, seed=0
    )
    study = optuna.create_study(sampler=sampler)
    study.optimize(quadratic, n_trials=2)
    assert all(PARAMS_KEY in t.system_attrs for t in study.trials)
    assert study.trials[0].value < old.best_value + 0.3


def quadratic_value(x, lr, kind) -> float:
    return (x - 0.3) ** 2 + (np.log10(lr) + 2) ** 2 / 4 + 0.5 * (kind == "b")


# --- the first trial uses what the sampler was given (issue 27) -----------------------------------
def _two_param_objective(trial) -> float:
    return (trial.suggest_float("x", 0, 1) - 0.7) ** 2 + (trial.suggest_float("y", 0, 1) - 0.2) ** 2


def _source_frame():
    import pandas as pd

    rng = np.random.default_rng(0)
    frame = pd.DataFrame({"x": rng.random(30), "y": rng.random(30)})
    frame["value"] = (frame.x - 0.7) ** 2 + (frame.y - 0.2) ** 2
    return frame


def _first_params(sampler) -> dict:
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    study = optuna.create_study(sampler=sampler)
    study.optimize(_two_param_objective, n_trials=1)
    return study.trials[0].params


@pytest.mark.filterwarnings("ignore")
def test_the_first_trial_of_a_dataframe_source_is_its_best_row_whatever_the_seed():
    frame = _source_frame()
    best = frame.loc[frame["value"].idxmin(), ["x", "y"]].to_dict()
    for seed in (0, 1):
        first = _first_params(HeadstartSampler("scaml", transfer_from=frame, seed=seed))
        assert first == pytest.approx(best)


@pytest.mark.filterwarnings("ignore")
def test_the_first_trial_of_a_headstart_study_source_is_modelled(tmp_path):
    url = f"sqlite:///{tmp_path / 'src.db'}"
    space = hs.SearchSpace({"x": hs.Float(0.0, 1.0), "y": hs.Float(0.0, 1.0)})
    hs.create_study("src", space, storage=url, method="random").add_trials(_source_frame())
    firsts = [
        _first_params(HeadstartSampler("scaml", transfer_from=["src"], storage=url, seed=seed))
        for seed in (0, 1)
    ]
    for first in firsts:  # the sources' optimum (0.7, 0.2), not a random point
        assert abs(first["x"] - 0.7) < 0.05 and abs(first["y"] - 0.2) < 0.05
    assert firsts[0] == pytest.approx(firsts[1], abs=1e-4)


def test_the_first_trial_starts_at_the_priors_mode():
    first = _first_params(HeadstartSampler(priors={"x": hs.Normal(0.3, 0.1)}, seed=0))
    assert first["x"] == pytest.approx(0.3)


def test_a_misspelt_prior_fails_at_the_first_trial_or_at_construction(tmp_path):
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    study = optuna.create_study(sampler=HeadstartSampler(priors={"xx": hs.Normal(0.3, 0.1)}))
    with pytest.raises(InvalidSettingError, match=r"\['xx'\] that the objective does not suggest"):
        study.optimize(_two_param_objective, n_trials=3)
    assert len(study.trials) == 1
    url = f"sqlite:///{tmp_path / 'src.db'}"
    space = hs.SearchSpace({"x": hs.Float(0.0, 1.0), "y": hs.Float(0.0, 1.0)})
    hs.create_study("src", space, storage=url, method="random").add_trials(_source_frame())
    with pytest.raises(InvalidSettingError, match=r"\['xx'\]"):
        HeadstartSampler(
            "scaml", transfer_from=["src"], storage=url, priors={"xx": hs.Normal(0.3, 0.1)}
        )


def test_constraints_set_by_the_objective_are_modelled():
    """Optuna 5's ``trial.set_constraint`` (no constraints_func): the sampler sees them too."""

    def objective(trial):
        x, y = trial.suggest_float("x", 0, 1), trial.suggest_float("y", 0, 1)
        trial.set_constraint("memory", x - 0.4)
        return -(x + y)  # minimized: wants x and y large, but x <= 0.4 is feasible

    study = optuna.create_study(sampler=HeadstartSampler(seed=0, n_startup_trials=4))
    study.optimize(objective, n_trials=14)
    assert study.best_trial.params["x"] <= 0.4 and study.best_value < -1.2
    assert sum(t.params["x"] <= 0.45 for t in study.trials[4:]) >= 7  # it learned the limit


def test_multi_objective_transfer_from_an_earlier_optuna_study():
    def objective(trial):
        x, y = trial.suggest_float("x", 0, 1), trial.suggest_float("y", 0, 1)
        trial.set_constraint("y", y - 0.6)
        return (x - 0.2) ** 2 + (y - 0.3) ** 2, (x - 0.8) ** 2 + (y - 0.7) ** 2

    earlier = optuna.create_study(
        directions=["minimize"] * 2, sampler=optuna.samplers.RandomSampler(seed=0)
    )
    earlier.optimize(objective, n_trials=16)
    sampler = HeadstartSampler("scaml", transfer_from=earlier, seed=0)
    study = optuna.create_study(directions=["minimize"] * 2, sampler=sampler)
    study.optimize(objective, n_trials=4)
    assert all(t.params["y"] <= 0.65 for t in study.trials)  # the sources' limit, from trial 0
    assert len(study.best_trials) >= 2
