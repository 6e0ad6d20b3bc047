"""The plateau rule of the acquisition search (headstart._engine.optimize, step 4; issue 31):
two evaluated points with exactly the same value exclude candidates closer than their distance."""

from __future__ import annotations

import numpy as np
import pytest

import headstart as hs
from headstart._engine.engine import BOEngine, DimSpec
from headstart._engine.optimize import tie_radii, within_radii
from headstart._gp import MaternGP


def test_tie_radii_is_the_distance_to_the_nearest_tied_point_capped():
    X = np.array([[0.0, 0.0], [0.1, 0.0], [0.0, 0.3], [0.9, 0.9], [0.5, 0.5]])
    y = np.array([1.0, 1.0, 1.0, 2.0, 3.0])
    np.testing.assert_allclose(tie_radii(X, y), [0.1, 0.1, 0.25, 0.0, 0.0])  # 0.3 capped
    np.testing.assert_allclose(tie_radii(X, y, cap=1.0), [0.1, 0.1, 0.3, 0.0, 0.0])
    assert not tie_radii(X, np.arange(5.0)).any()  # no tie, no ball
    assert not tie_radii(X, y, cap=0.0).any()  # the rule off
    assert tie_radii(X[:1], y[:1]).tolist() == [0.0]


def test_within_radii_is_strict_and_ignores_zero_balls():
    centres = np.array([[0.0, 0.0], [1.0, 1.0]])
    radii = np.array([0.5, 0.0])
    X = np.array([[0.3, 0.3], [0.5, 0.0], [1.0, 1.0], [0.9, 0.0]])
    assert within_radii(X, centres, radii).tolist() == [True, False, False, False]


def _plateau(X: np.ndarray) -> np.ndarray:
    """A staircase: constant on each of 6 x 6 cells, lowest near (0.7, 0.3) -- as a table or
    a pool scored at its nearest entry looks to an optimizer (values to be maximized)."""
    idx = np.floor(np.clip(X, 0.0, 1.0 - 1e-12) * 6)
    centres = idx / 6 + 1 / 12
    unique = 1e-4 * (6 * idx[:, 0] + idx[:, 1])  # no two steps share a value
    return -(((centres - np.array([0.7, 0.3])) ** 2).sum(-1)) + unique


def _repeats(rule_on: bool, seed: int, n: int = 30) -> int:
    """Trials (of ``n`` after 5 random ones) whose cell was evaluated before."""
    dims = [DimSpec("continuous")] * 2
    surrogate = MaternGP(np.zeros(2, dtype=bool), deterministic=True)
    engine = BOEngine(dims, surrogate, plateau_rule=rule_on)
    rng = np.random.default_rng(seed)
    X = rng.random((5, 2))
    for t in range(n - 5):
        x = engine.suggest(X, _plateau(X), rng=np.random.default_rng([seed, t]))
        X = np.vstack([X, x])
    cells = [tuple(c) for c in np.floor(np.clip(X, 0, 1 - 1e-12) * 6).astype(int)]
    return sum(1 for i, c in enumerate(cells) if c in cells[:i])


def test_on_a_staircase_the_rule_stops_re_evaluating_the_same_step():
    """Without the rule the search keeps proposing new points on the incumbent's step (exact
    duplicates are the only ones refused); with it, it moves on to other steps."""
    without = [_repeats(False, seed) for seed in range(3)]
    with_rule = [_repeats(True, seed) for seed in range(3)]
    assert sum(with_rule) <= 0.7 * sum(without), (without, with_rule)


def test_plateau_rule_is_a_study_setting_stored_with_the_study(tmp_path):
    space = hs.SearchSpace({"x": hs.Float(0.0, 1.0), "y": hs.Float(0.0, 1.0)})
    url = f"sqlite:///{tmp_path / 'p.db'}"
    study = hs.create_study("p", space, storage=url, seed=0, plateau_rule=True)
    study.optimize(lambda p: float(np.floor(p["x"] * 4) + np.floor(p["y"] * 4)), n_trials=12)
    assert study._strategy.engine.plateau_rule
    assert hs.load_study("p", storage=url)._strategy.config.plateau_rule
    with pytest.raises(hs.InvalidSettingError, match="plateau_rule"):
        hs.create_study("q", space, storage=None, plateau_rule="yes")


def test_plateau_rule_defaults_to_the_methods_on_for_scaml_only():
    space = hs.SearchSpace({"x": hs.Float(0.0, 1.0)})
    rng = np.random.default_rng(0)
    X = rng.random((6, 1))
    source = hs.MetaTask("src", X, (X[:, 0] - 0.3) ** 2)
    scaml = hs.create_study("s", space, storage=None, method="scaml", transfer_from=[source])
    assert scaml._strategy.plateau_rule is True
    assert hs.create_study("g", space, storage=None)._strategy.plateau_rule is False
    off = hs.create_study(
        "s2", space, storage=None, method="scaml", transfer_from=[source], plateau_rule=False
    )
    assert off._strategy.plateau_rule is False


def test_thompson_sampling_also_keeps_out_of_the_tie_balls():
    """``acquisition="ts"``: the sampled maximizer is drawn from candidates outside the balls of
    exactly tied trials (here the two best, 0.1 apart), where without the rule it often lands."""
    rng = np.random.default_rng(0)
    X = np.vstack([rng.random((8, 2)), [[0.5, 0.5], [0.6, 0.5]]])
    y = -((X - 0.55) ** 2).sum(-1)
    y[-2:] = 0.0  # the two best trials tie exactly: a plateau of radius 0.1 around each
    dims = [DimSpec("continuous")] * 2

    def nearest_tied(rule_on: bool, seed: int) -> float:
        surrogate = MaternGP(np.zeros(2, dtype=bool), deterministic=True)
        engine = BOEngine(dims, surrogate, acquisition="ts", plateau_rule=rule_on)
        x = engine.suggest(X, y, rng=np.random.default_rng(seed))
        return float(np.sqrt(((X[-2:] - x) ** 2).sum(-1)).min())

    assert all(nearest_tied(True, seed) >= 0.1 for seed in range(6))
    assert any(nearest_tied(False, seed) < 0.1 for seed in range(6))
