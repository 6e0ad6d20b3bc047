"""piBO benchmark pieces: the App. D prior constructions, the ConfigSpace export, the script."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest

import headstart as hs
from headstart.benchmarks import get_task
from headstart.benchmarks.prior_tasks import OPTIMA, WRONG_MEANS
from headstart.benchmarks.runner import read_results
from headstart.configspace import from_configspace, to_configspace

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("function", ["branin", "hartmann6"])
def test_prior_constructions_follow_appendix_d(function):
    base = get_task(function)
    ranges = np.array([p.high - p.low for _, p in base.space.items()])
    offsets = {"strong": [], "weak": []}
    for seed in range(40):
        for quality, share in (("strong", 0.01), ("weak", 0.10)):
            task = get_task(f"{function}-prior-{quality}").instance(seed)
            priors = [p.prior for _, p in task.space.items()]
            np.testing.assert_allclose([q.std for q in priors], share * ranges)
            offsets[quality].append(
                ([q.mean for q in priors] - np.array(OPTIMA[function])) / ranges
            )
    for quality, share in (("strong", 0.01), ("weak", 0.10)):  # offsets ~ N(0, sigma)
        z = np.array(offsets[quality]) / share
        assert abs(z.mean()) < 0.35 and 0.7 < z.std() < 1.3
    wrong = get_task(f"{function}-prior-wrong")
    for seed in (0, 7):
        means = [p.prior.mean for _, p in wrong.instance(seed).space.items()]
        assert means == pytest.approx(WRONG_MEANS[function])
    # the task's value at the wrong mean is among the worst on the box
    task = wrong.instance(0)
    names = [name for name, _ in task.space.items()]
    worst = task.objective(dict(zip(names, WRONG_MEANS[function], strict=True)))
    rng = np.random.default_rng(0)
    sample = [task.objective(c) for c in task.space.sample(500, rng=rng)]
    assert worst >= np.quantile(sample, 0.97)


def test_configspace_export_round_trips_priors():
    pytest.importorskip("ConfigSpace")
    space = hs.SearchSpace(
        {
            "x": hs.Float(-1.0, 3.0, prior=hs.Normal(0.5, 0.2)),
            "b": hs.Float(1.0, 5.0, prior=hs.Beta(2, 3)),
            "n": hs.Int(1, 10, log=True),
            "c": hs.Categorical(["a", "b"], weights=[3, 1]),
            "k": hs.Fixed("const"),
        }
    )
    assert from_configspace(to_configspace(space, seed=0)) == space
    with pytest.raises(hs.SearchSpaceError, match="sigma would be negative"):
        to_configspace(hs.SearchSpace({"n": hs.Int(4, 100, log=True, prior=hs.Normal(10, 1.0))}))


def test_pibo_script_smoke(tmp_path):
    spec = importlib.util.spec_from_file_location("pibo_script", ROOT / "benchmarks" / "pibo.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    methods = "headstart-gp,headstart-pibo,prior-sampling"
    args = ["--smoke", "--methods", methods, "--workers", "1", "--quiet", "--out", str(tmp_path)]
    assert module.main([*args, "--tasks", "branin-prior-strong,branin-prior-wrong"]) == 0
    frame = read_results(tmp_path / "pibo.csv")
    assert set(frame["method"]) == set(methods.split(",")) and set(frame["budget"]) == {6}
    text = (tmp_path / "pibo.md").read_text()
    assert "## Targets of the issue" in text and "final regret ≤ 2x vanilla" in text
    assert (tmp_path / "pibo.png").stat().st_size > 5000
