"""piBO (Hvarfner et al. 2022) at the study level: decay, defaults, design, composition, errors."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pandas as pd
import pytest

import headstart as hs
from headstart._engine.acquisition import PriorWeight
from headstart._engine.optimize import screening_points
from headstart.pibo import UserBelief, default_prior_strength


def _quadratic(p):
    return (p["x"] - 0.7) ** 2 + (p["y"] - 0.3) ** 2


def _space(prior=True):
    if not prior:
        return hs.SearchSpace({"x": hs.Float(0.0, 1.0), "y": hs.Float(0.0, 1.0)})
    return hs.SearchSpace(
        {
            "x": hs.Float(0.0, 1.0, prior=hs.Normal(0.65, 0.05)),
            "y": hs.Float(0.0, 1.0, prior=hs.Normal(0.35, 0.05)),
        }
    )


def _run(study, n):
    for _ in range(n):
        t = study.ask()
        study.tell(t, _quadratic(t.params))
    return study


def test_default_prior_strength_is_budget_over_ten():
    assert default_prior_strength(50) == 5.0
    assert default_prior_strength(None) == 10.0


def test_default_acquisition_is_ei_with_priors():
    assert hs.create_study("a", _space(), storage=None).settings["acquisition"] == "ei"
    assert hs.create_study("b", _space(False), storage=None).settings["acquisition"] == "logei"
    off = hs.create_study("c", _space(), storage=None, use_priors=False)
    assert off.settings["acquisition"] == "logei"


def test_exponent_decays_as_beta_over_n_after_the_design():
    study = hs.create_study("s", _space(), storage=None, budget=40, n_initial=3, seed=0)
    weights = []
    for _ in range(7):
        weights.append(study.prior_weight())
        _run(study, 1)
    # n = 1 at the first model-based step (after 3 design points): beta, beta/2, beta/3, ...
    assert weights[3:] == pytest.approx([4.0, 4.0 / 2, 4.0 / 3, 4.0 / 4])
    assert study.belief is not None


def test_priors_off_or_flat_give_the_plain_suggestions():
    plain = _run(hs.create_study("a", _space(False), storage=None, seed=3, n_initial=4), 8)
    flat = _run(  # uniform priors everywhere: piBO is inactive
        hs.create_study("b", _space(False), storage=None, seed=3, n_initial=4, use_priors=True), 8
    )
    off = _run(
        hs.create_study(
            "c", _space(), storage=None, seed=3, n_initial=4, use_priors=False, prior_design=False
        ),
        8,
    )
    params = [[t.params for t in s.trials] for s in (plain, flat, off)]
    assert params[0] == params[1] == params[2]
    assert off.prior_weight() == 0.0 and off.belief is None
    zero = hs.create_study("d", _space(), storage=None, prior_strength=0)
    assert zero.prior_weight() == 0.0


def test_prior_design_starts_at_the_mode_then_samples_the_prior():
    study = _run(hs.create_study("s", _space(), storage=None, n_initial=6, seed=1), 6)
    first = study.trials[0].params
    assert first == pytest.approx({"x": 0.65, "y": 0.35})
    rest = np.array([[t.params["x"], t.params["y"]] for t in study.trials[1:]])
    assert np.all(np.abs(rest - [0.65, 0.35]) < 0.25)  # 5 sigma
    sobol = _run(
        hs.create_study("t", _space(), storage=None, n_initial=6, seed=1, prior_design=False), 1
    )
    assert sobol.trials[0].params != pytest.approx({"x": 0.65, "y": 0.35})


def test_strong_prior_pulls_the_first_model_suggestions():
    narrow = hs.SearchSpace(
        {
            "x": hs.Float(0.0, 1.0, prior=hs.Normal(0.1, 0.01)),
            "y": hs.Float(0.0, 1.0, prior=hs.Normal(0.9, 0.01)),
        }
    )
    study = hs.create_study(
        "s", narrow, storage=None, n_initial=4, prior_design=False, prior_strength=50, seed=0
    )
    _run(study, 5)  # 4 Sobol points, then the first piBO step
    last = study.trials[-1].params
    assert abs(last["x"] - 0.1) < 0.05 and abs(last["y"] - 0.9) < 0.05


def test_screening_draws_a_share_of_candidates_from_the_prior():
    space = _space()
    belief = UserBelief(space)

    prior = PriorWeight(belief.log_pdf, 1.0, sample=belief.sample, candidate_share=0.5)
    pts = screening_points(prior, 2, 1000, np.random.default_rng(0))
    near = np.all(np.abs(pts - [0.65, 0.35]) < 0.2, axis=1)
    assert pts.shape == (1000, 2)
    assert 0.5 <= near.mean() < 0.6  # the prior half, plus uniform points that land nearby
    assert np.all(np.abs(pts - [0.65, 0.35]) < 0.2, axis=1)[:500].mean() < 0.3


@pytest.mark.parametrize("acquisition", ["ei", "pi", "ucb", "ts"])
def test_every_acquisition_accepts_priors(acquisition):
    study = hs.create_study(
        "s", _space(), storage=None, acquisition=acquisition, n_initial=3, seed=2
    )
    _run(study, 6)
    assert study.best_value < 0.05


def test_joint_density_is_used_and_must_be_passed_again():
    def density(config):  # correlated belief: x close to 1 - y
        return math.exp(-0.5 * ((config["x"] + config["y"] - 1.0) / 0.02) ** 2)

    study = hs.create_study(
        "s", _space(False), storage=None, prior_density=density, n_initial=3, seed=4
    )
    assert study.belief is not None
    _run(study, 5)
    last = study.trials[-1].params
    assert abs(last["x"] + last["y"] - 1.0) < 0.1
    first = study.trials[0].params  # the design starts at the density's (approximate) mode
    assert abs(first["x"] + first["y"] - 1.0) < 0.05


def test_reloading_a_study_with_a_density_warns_without_it(tmp_path):
    url = f"sqlite:///{tmp_path / 'db.sqlite'}"
    hs.create_study("s", _space(False), storage=url, prior_density=lambda c: 1.0 + c["x"])
    with pytest.warns(hs.HeadstartWarning, match="prior_density"):
        hs.load_study("s", storage=url)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        hs.load_study("s", storage=url, prior_density=lambda c: 1.0 + c["x"])


@pytest.mark.parametrize("bad", [float("nan"), -1.0, float("inf"), "high"])
def test_bad_joint_density_names_the_configuration(bad):
    with pytest.raises(hs.PriorDensityError, match=r"\{'x': "):
        hs.create_study("s", _space(False), storage=None, prior_density=lambda c: bad)


def test_density_failing_mid_run_names_the_configuration():
    broken = {"now": False}

    def density(config):  # fine while the study is created, NaN on half the box afterwards
        return float("nan") if broken["now"] and config["x"] > 0.5 else 1.0

    study = hs.create_study(
        "s", _space(False), storage=None, prior_density=density, n_initial=2, seed=0
    )
    study.tell(study.ask(), 1.0)
    study.tell(study.ask(), 2.0)
    broken["now"] = True
    with pytest.raises(hs.PriorDensityError, match="returned nan at"):
        for _ in range(3):
            t = study.ask()
            study.tell(t, _quadratic(t.params))


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"prior_strength": -1.0}, "prior_strength"),
        ({"prior_strength": float("nan")}, "prior_strength"),
        ({"prior_strength": True}, "prior_strength"),
        ({"use_priors": "yes"}, "use_priors"),
        ({"prior_design": 1}, "prior_design"),
        ({"prior_candidate_share": 1.5}, "prior_candidate_share"),
        ({"prior_density": 3.0}, "callable"),
    ],
)
def test_bad_prior_settings_raise(kwargs, match):
    with pytest.raises(hs.InvalidSettingError, match=match):
        hs.create_study("s", _space(), storage=None, **kwargs)


@pytest.mark.parametrize(
    ("make", "match"),
    [
        (lambda: hs.Float(0.0, 1.0, prior=hs.Normal(1.5, 0.1)), "outside the bounds"),
        (lambda: hs.Float(0.0, 1.0, prior=hs.Normal(0.5, 0.0)), "std must be > 0"),
        (lambda: hs.Float(0.0, 1.0, prior=hs.Beta(0.0, 2.0)), "a must be > 0"),
        (lambda: hs.Categorical(["a", "b"], weights=[1, 2, 3]), "match the choices"),
        (lambda: hs.Categorical(["a", "b"], weights=[-1, 2]), ">= 0"),
        (lambda: hs.Categorical(["a", "b"], weights=[0, 0]), "not all zero"),
    ],
)
def test_bad_priors_raise_search_space_errors(make, match):
    with pytest.raises(hs.SearchSpaceError, match=match):
        hs.SearchSpace({"p": make()})


def test_transfer_composes_with_user_priors():
    rng = np.random.default_rng(0)
    X = rng.random((20, 2))
    meta = pd.DataFrame(
        {
            "x": X[:, 0],
            "y": X[:, 1],
            "value": ((X - [0.5, 0.5]) ** 2).sum(1),
            "task": ["old"] * 20,
        }
    )
    narrow = hs.SearchSpace(
        {
            "x": hs.Float(0.0, 1.0, prior=hs.Normal(0.1, 0.02)),
            "y": hs.Float(0.0, 1.0, prior=hs.Normal(0.9, 0.02)),
        }
    )
    study = hs.create_study(
        "s", narrow, storage=None, method="scaml", transfer_from=meta, prior_strength=50, seed=0
    )
    first = study.ask().params  # no initial design: the first step is piBO on the meta-prior
    assert abs(first["x"] - 0.1) < 0.1 and abs(first["y"] - 0.9) < 0.1
    plain = hs.create_study(
        "p", narrow, storage=None, method="scaml", transfer_from=meta, use_priors=False, seed=0
    )
    p = plain.ask().params
    assert abs(p["x"] - 0.5) < 0.2 and abs(p["y"] - 0.5) < 0.2


def test_acquisition_slice_and_cli_plot(tmp_path):
    from typer.testing import CliRunner

    from headstart.cli import app

    url = f"sqlite:///{tmp_path / 'db.sqlite'}"
    space = hs.SearchSpace(
        {
            "x": hs.Float(0.0, 1.0, prior=hs.Normal(0.6, 0.1)),
            "y": hs.Float(0.0, 1.0),
            "c": hs.Categorical(["a", "b"], weights=[3, 1]),
        }
    )
    study = hs.create_study("s", space, storage=url, n_initial=3, seed=0)
    study.optimize(lambda p: _quadratic(p) + (p["c"] == "b"), n_trials=5)
    data = study.acquisition_slice("x", points=11)
    assert data["grid"][0].shape == (11,) and data["kind"] == "ei"  # the default with priors
    gamma = study.prior_weight()
    assert data["exponent"] == pytest.approx(gamma)
    # Eq. 6: EI * pi^gamma, exactly
    np.testing.assert_allclose(
        data["pibo"], data["acquisition"] * np.exp(gamma * data["prior"]), rtol=1e-10, atol=1e-300
    )
    logei = hs.create_study("l", space, storage=None, n_initial=3, seed=0, acquisition="logei")
    logei.optimize(lambda p: _quadratic(p) + (p["c"] == "b"), n_trials=5)
    data = logei.acquisition_slice("x", points=11)
    # in log space: LogEI + gamma * log pi, exactly
    np.testing.assert_allclose(
        data["pibo"], data["acquisition"] + logei.prior_weight() * data["prior"]
    )
    two = study.acquisition_slice("x", "c", points=7)
    assert two["prior"].shape == (7, 2)
    with pytest.raises(hs.InvalidSettingError, match="free parameters"):
        study.acquisition_slice("nope")
    runner = CliRunner()
    for extra in (["--param", "x"], ["--param", "y", "--param2", "c", "--points", "9"]):
        png = tmp_path / f"slice{len(extra)}.png"
        result = runner.invoke(
            app, ["studies", "prior-plot", "s", str(png), *extra, "--storage", url]
        )
        assert result.exit_code == 0, result.output
        assert png.stat().st_size > 10_000
    shown = runner.invoke(app, ["studies", "show", "s", "--storage", url])
    assert "piBO" in shown.output
