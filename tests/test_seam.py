"""The seam: a light `import headstart`, the method registry and the frozen study configuration."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

import headstart as hs
from headstart import _methods
from headstart._config import StudyConfig
from headstart._methods import BuildContext, MethodSpec, get_method, register_method
from headstart._methods.gp import GPOptions

_PROBE = "import sys\n{code}\nprint(sorted(m for m in ('torch', 'botorch', 'scipy.stats', 'sqlalchemy') if m in sys.modules))"


def _loaded_after(code: str) -> list[str]:
    out = subprocess.run(
        [sys.executable, "-c", _PROBE.format(code=code)],
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(out.stdout.strip().splitlines()[-1].replace("'", '"'))


def test_import_headstart_loads_no_heavy_library():
    assert _loaded_after("import headstart") == []


def test_study_api_without_a_model_loads_no_torch():
    code = (
        "import headstart as hs\n"
        "s = hs.create_study('t', hs.SearchSpace({'x': hs.Float(0, 1)}), storage=None, seed=0)\n"
        "t = s.ask(); s.tell(t, 1.0)"
    )
    assert "torch" not in _loaded_after(code)


def test_cli_help_loads_no_torch():
    code = (
        "sys.argv = ['headstart', '--help']\nfrom headstart.cli import main\n"
        "try:\n    main()\nexcept SystemExit:\n    pass"
    )
    loaded = _loaded_after(code)
    assert "torch" not in loaded and "scipy.stats" not in loaded


class _MeanOfData:
    """A toy surrogate: constant mean, unit variance (enough to drive the engine)."""

    informative_prior = False

    def condition(self, train_X, train_y, rng):
        y = (train_y - train_y.mean()) / (train_y.std() or 1.0)
        return _FlatPosterior(train_X.shape[1]), y

    def state(self):
        return {}

    def load_state(self, state):
        return None

    def diagnostics(self):
        return {}


class _FlatPosterior:
    outputscale = 1.0
    lengthscales = None
    includes_noise = False

    def __init__(self, d):
        self.d = d

    def posterior(self, X):
        return np.zeros(len(X)), np.ones(len(X))

    def posterior_and_grad(self, X):
        m = len(X)
        return np.zeros(m), np.ones(m), np.zeros((m, self.d)), np.zeros((m, self.d))

    def joint_posterior(self, X):
        return np.zeros(len(X)), np.eye(len(X))


@pytest.fixture
def toy_method():
    spec = register_method(
        MethodSpec("toy", "none", "a flat test surrogate", lambda ctx: _MeanOfData())
    )
    yield spec
    _methods.unregister_method("toy")


def test_a_new_method_is_one_registration(toy_method):
    space = hs.SearchSpace({"x": hs.Float(0, 1), "c": hs.Categorical(["a", "b"])})
    study = hs.create_study("toy", space, storage=None, method="toy", n_initial=2, seed=1)
    for _ in range(5):
        trial = study.ask()
        study.tell(trial, trial.params["x"])
    assert len(study.trials) == 5 and study.settings["method"] == "toy"
    with pytest.raises(ValueError, match="already registered"):
        register_method(toy_method)


def test_unknown_method_lists_the_registry():
    with pytest.raises(hs.InvalidSettingError, match=r"'gp'.*'scaml'.*got 'bogus-method'"):
        get_method("bogus-method")


def test_builders_make_protocol_surrogates():
    from headstart._engine.protocols import Surrogate

    context = BuildContext(is_cat=np.array([False, True]), options=GPOptions())
    surrogate = get_method("gp").build(context)
    assert isinstance(surrogate, Surrogate) and not surrogate.informative_prior


def test_study_config_is_frozen_validated_and_round_trips_json():
    config = StudyConfig(method="scaml", seed=3, ucb_beta=4, options={"fit_factr": 1e7})
    assert StudyConfig.from_json(json.loads(json.dumps(config.to_json()))) == config
    with pytest.raises(AttributeError):
        config.seed = 4  # frozen
    assert config.resolved(priors=False).acquisition == "logei"  # measured transfer default
    assert StudyConfig().resolved(priors=True).acquisition == "ei"
    for bad in ({"deterministic": 1}, {"n_initial": 0}, {"ucb_beta": -1}, {"acquisition": "pes"}):
        with pytest.raises(hs.InvalidSettingError):
            StudyConfig(**bad)
    with pytest.raises(hs.InvalidSettingError, match="'kernel' is an option of method 'gp'"):
        StudyConfig(method="scaml", options={"kernel": "auto"})
    assert StudyConfig.from_json({"method": "gp", "seed": 1, "from_a_newer_version": 1}).seed == 1


def test_pi_margin_raises_pis_target_and_is_refused_without_pi(tmp_path):
    """Issue 33 (MPHD's acquisition): ``pi_margin`` moves PI's target above the incumbent by that
    many standard deviations; the same data and model give a criterion whose ``best_f`` is higher
    by exactly the margin and whose PI is nowhere higher. It needs ``acquisition="pi"``."""
    space = hs.SearchSpace({"x": hs.Float(-2.0, 2.0)})
    url = f"sqlite:///{tmp_path / 'pi.db'}"
    study = hs.create_study("pi", space, storage=url, seed=0, acquisition="pi", pi_margin=0.5)
    study.optimize(lambda p: (p["x"] - 0.3) ** 2, n_trials=7, show_progress=False)
    assert hs.load_study("pi", url).config.pi_margin == 0.5  # stored with the study
    done = [t for t in study.trials if t.state == "complete"]
    params, values = [t.params for t in done], [-t.value for t in done]
    plain = StudyConfig(seed=0, acquisition="pi")
    other = hs.create_study("pi0", space, storage=None, seed=0, acquisition="pi")
    assert other._strategy.config.pi_margin is None and plain.pi_margin is None
    with_margin = study._strategy.criteria(params, values)[0]
    without = other._strategy.criteria(params, values)[0]
    assert with_margin.best_f == pytest.approx(without.best_f + 0.5, abs=1e-9)
    X = np.linspace(0.0, 1.0, 50)[:, None]
    a, b = with_margin.value(X), without.value(X)
    assert (a <= b).all() and (a < b).any()  # (both underflow to 0 far from the incumbent)
    for bad, match in (
        ({"pi_margin": -0.1, "acquisition": "pi"}, "pi_margin must be a finite number"),
        ({"pi_margin": 0.1}, "Pass acquisition='pi'"),
        ({"pi_margin": 0.1, "acquisition": "logei"}, "Pass acquisition='pi'"),
    ):
        with pytest.raises(hs.InvalidSettingError, match=match):
            hs.create_study("bad", space, storage=url, **bad)
    assert len(hs.storage.get_storage(url).list_studies()) == 1  # "pi" only: nothing stored


def test_hyperprior_objects_match_scipy_and_round_trip_json():
    import torch
    from scipy import stats

    from headstart._gp.hyperprior import (
        DEFAULT_HYPERPRIOR,
        DIM_SCALED_HYPERPRIOR,
        META_HYPERPRIOR,
        Gamma,
        HyperPrior,
        LogNormal,
    )

    x = np.array([0.05, 0.3, 2.0])
    log_x = torch.from_numpy(np.log(x))
    np.testing.assert_allclose(
        Gamma(3.0, 6.0).log_prob(log_x).numpy(), stats.gamma(3.0, scale=1 / 6.0).logpdf(x)
    )
    np.testing.assert_allclose(
        LogNormal(-8.0, 2.0).log_prob(log_x).numpy(),
        stats.lognorm(2.0, scale=np.exp(-8.0)).logpdf(x),
    )
    for prior in (Gamma(2.0, 0.15), LogNormal(0.5, 1.5, normalized=False)):
        h = 1e-6
        fd = (prior.log_prob(log_x + h) - prior.log_prob(log_x - h)) / (2 * h)
        np.testing.assert_allclose(prior.grad(log_x).numpy(), fd.numpy(), rtol=1e-6)
    assert json.loads(json.dumps(META_HYPERPRIOR.to_json()))["lengthscale"]["shape"] == 3.0
    draws = META_HYPERPRIOR.sample_log(np.random.default_rng(0), (4, 5), 3)
    assert draws.shape == (4, 5, 5) and np.isfinite(draws).all()
    for prior in (DEFAULT_HYPERPRIOR, DIM_SCALED_HYPERPRIOR):
        assert HyperPrior.from_json(json.loads(json.dumps(prior.to_json()))) == prior
    with pytest.raises(ValueError, match="Not a hyperprior"):
        HyperPrior.from_json({"kind": "wishart"})


def test_every_module_sits_in_a_layer_of_the_import_contract():
    """A new module or package of ``headstart`` is named in the layers contract of
    ``pyproject.toml`` (import-linter checks only what the contract names)."""
    import pkgutil
    import tomllib
    from pathlib import Path

    root = Path(hs.__file__).parent
    config = tomllib.loads((root.parents[1] / "pyproject.toml").read_text())
    contracts = config["tool"]["importlinter"]["contracts"]
    layers = next(c["layers"] for c in contracts if c["type"] == "layers")
    named = {m.strip() for layer in layers for m in layer.split("|")}
    modules = {f"headstart.{m.name}" for m in pkgutil.iter_modules([str(root)])}
    assert modules - named == set(), "add these to a layer in pyproject.toml"
    assert named - modules == set(), "the contract names modules that do not exist"
