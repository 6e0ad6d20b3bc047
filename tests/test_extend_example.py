"""The extension API (headstart.extend) and its worked example, examples/rff_method.py: the new
surrogate passes the conformance suite, and its method runs studies with typed, stored options."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import headstart as hs
from headstart import extend

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "rff_method.py"


@pytest.fixture(scope="module")
def rff():
    spec = importlib.util.spec_from_file_location("rff_method", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    sys.modules["rff_method"] = module  # dataclasses resolve annotations through sys.modules
    spec.loader.exec_module(module)
    yield module
    extend.unregister_method("rff")
    del sys.modules["rff_method"]


def _data(seed=0, n=12):
    rng = np.random.default_rng(seed)
    X = rng.random((n, 2))
    return X, np.sin(5 * X[:, 0]) + (X[:, 1] - 0.4) ** 2


def test_the_example_surrogate_passes_the_conformance_suite(rff):
    X, y = _data()
    factory = lambda: rff.RFFSurrogate(2, rff.RFFOptions(n_features=128, lengthscale=0.3), 0)  # noqa: E731
    extend.check_all(extend.SurrogateCase(factory, X, y))
    assert extend.check_fantasize(extend.SurrogateCase(factory, X, y))


def test_the_example_method_runs_a_study_with_stored_options(rff, tmp_path):
    space = hs.SearchSpace({"x": hs.Float(0.0, 1.0), "y": hs.Float(0.0, 1.0)})
    url = f"sqlite:///{tmp_path / 'rff.db'}"
    study = hs.create_study(
        "rff", space, storage=url, method="rff", n_features=64, seed=1, n_initial=3
    )
    for _ in range(8):
        trial = study.ask()
        study.tell(trial, (trial.params["x"] - 0.3) ** 2 + (trial.params["y"] - 0.6) ** 2)
    assert study.settings["options"] == {"n_features": 64, "lengthscale": 0.2, "noise": 1e-3}
    again = hs.load_study("rff", storage=url)
    assert again.settings == study.settings and len(again.trials) == 8
    # batches and pending points go through the posterior's fantasize, as for the built-ins
    assert len(again.ask(2)) == 2


def test_bad_options_are_refused_at_create_study_with_nothing_stored(rff, tmp_path):
    space = hs.SearchSpace({"x": hs.Float(0.0, 1.0)})
    url = f"sqlite:///{tmp_path / 'bad.db'}"
    with pytest.raises(hs.InvalidSettingError, match=r"n_features must be an integer >= 1"):
        hs.create_study("a", space, storage=url, method="rff", n_features=0)
    with pytest.raises(
        hs.InvalidSettingError, match=r"Unknown setting or option 'kernel'.*n_features"
    ):
        hs.create_study("b", space, storage=url, method="rff", kernel="auto")
    from headstart.storage import get_storage

    assert get_storage(url).list_studies() == []


def test_a_study_of_an_unregistered_method_says_how_to_reopen_it(tmp_path):
    """Registering happens per process: a study of an extension method names the fix."""
    url = f"sqlite:///{tmp_path / 'other.db'}"
    code = (
        "import runpy, headstart as hs\n"
        f"runpy.run_path({str(EXAMPLE)!r})\n"
        "space = hs.SearchSpace({'x': hs.Float(0, 1)})\n"
        f"hs.create_study('r', space, storage={url!r}, method='rff')\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
    reopen = f"import headstart as hs\nhs.load_study('r', storage={url!r})\n"  # no registration
    out = subprocess.run([sys.executable, "-c", reopen], capture_output=True, text=True)
    assert out.returncode != 0 and "InvalidSettingError" in out.stderr
    assert "registered in every process that opens its studies" in out.stderr


def test_the_extension_api_is_public_and_documented():
    assert hs.extend is extend
    for name in extend.__all__:
        assert getattr(extend, name).__doc__, name
    docs = (EXAMPLE.parents[1] / "docs" / "extending.md").read_text()
    assert "examples/rff_method.py" in docs and "register_method" in docs
