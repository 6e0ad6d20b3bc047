"""The stall rule of the acquisition search (headstart._engine.optimize.stalled_incumbent; issue
30): when the latest trials all sit at the incumbent, the next point leaves its neighbourhood."""

from __future__ import annotations

import numpy as np
import pytest

import headstart as hs
from headstart._engine.engine import BOEngine, DimSpec
from headstart._engine.optimize import STALL_RADIUS, STALL_WINDOW, stalled_incumbent
from headstart._gp import MaternGP


def test_stalled_incumbent_needs_every_recent_trial_inside_the_scaled_ball():
    ell = np.array([0.5, 0.1])
    far = np.array([[0.9, 0.9], [0.1, 0.9]])
    near = np.array([[0.50, 0.50], [0.52, 0.505], [0.49, 0.497]])  # <= 0.06 lengthscales away
    X = np.vstack([far, near])
    y = np.array([0.0, 0.1, 1.0, 0.9, 0.95])  # the incumbent is the first of the near ones
    np.testing.assert_array_equal(stalled_incumbent(X, y, ell), [0.50, 0.50])
    # the same steps along the short lengthscale are 0.2-0.3 lengthscales: not a stall
    assert stalled_incumbent(X, y, np.array([0.5, 0.01])) is None
    # one recent trial elsewhere: not a stall
    assert stalled_incumbent(np.vstack([X, [[0.1, 0.1]]]), np.append(y, 0.0), ell) is None
    # too few trials to tell
    assert stalled_incumbent(near, y[2:], ell) is None
    assert STALL_WINDOW == 3 and STALL_RADIUS == 0.1


def _suggest_after_polishing(rule_on: bool, seed: int) -> tuple[np.ndarray, np.ndarray, float]:
    """A smooth bowl (maximized at 0.5, 0.5), known on a 6 x 6 grid, whose latest three trials
    polish its top: the suggestion, the incumbent and their distance in fitted lengthscales."""
    rng = np.random.default_rng(seed)
    grid = (np.stack(np.meshgrid(np.arange(6), np.arange(6)), -1).reshape(-1, 2) + 0.5) / 6
    polish = 0.5 + 0.002 * rng.standard_normal((3, 2))
    X = np.vstack([grid, polish])
    y = -((X - 0.5) ** 2).sum(-1)
    dims = [DimSpec("continuous")] * 2
    engine = BOEngine(dims, MaternGP(np.zeros(2, dtype=bool)), stall_rule=rule_on)
    x = engine.suggest(X, y, rng=np.random.default_rng(seed))
    ell = engine.surrogate.last_fit.lengthscales
    best = X[int(np.argmax(y))]
    return x, best, float(np.sqrt((((x - best) / ell) ** 2).sum()))


def test_after_three_polishing_trials_the_next_leaves_the_incumbents_ball():
    """LogEI keeps polishing the top of a bowl (its maximizer stays within the ball); with the
    rule the next point lies at least :data:`STALL_RADIUS` lengthscales away."""
    for seed in range(3):
        assert _suggest_after_polishing(False, seed)[2] < STALL_RADIUS
        assert _suggest_after_polishing(True, seed)[2] >= STALL_RADIUS


def test_stall_rule_is_a_study_setting_stored_with_the_study(tmp_path):
    space = hs.SearchSpace({"x": hs.Float(0.0, 1.0)})
    url = f"sqlite:///{tmp_path / 's.db'}"
    study = hs.create_study("s", space, storage=url, seed=0, stall_rule=False)
    study.optimize(lambda p: (p["x"] - 0.3) ** 2, n_trials=6)
    assert study._strategy.engine.stall_rule is False
    assert hs.load_study("s", storage=url)._strategy.config.stall_rule is False
    with pytest.raises(hs.InvalidSettingError, match="stall_rule"):
        hs.create_study("q", space, storage=None, stall_rule="yes")


def test_stall_rule_defaults_to_on_for_gp_bo_only():
    space = hs.SearchSpace({"x": hs.Float(0.0, 1.0)})
    assert hs.create_study("g", space, storage=None)._strategy.stall_rule is True
    assert hs.create_study("r", space, storage=None, method="random")._strategy.stall_rule is False
    rng = np.random.default_rng(0)
    X = rng.random((6, 1))
    source = hs.MetaTask("src", X, (X[:, 0] - 0.3) ** 2)
    scaml = hs.create_study("s", space, storage=None, method="scaml", transfer_from=[source])
    assert scaml._strategy.stall_rule is False
