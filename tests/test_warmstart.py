"""method="warmstart": the sources' best configurations first (ranked per source, interleaved)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import headstart as hs
from headstart._meta import MetaTask, ranked_configurations


def test_ranked_configurations_interleave_each_sources_best_first():
    a = MetaTask("a", np.array([[0.1], [0.2], [0.3]]), np.array([3.0, 1.0, 2.0]), "minimize")
    b = MetaTask("b", np.array([[0.7], [0.8]]), np.array([5.0, 9.0]), "maximize")
    got = ranked_configurations([a, b], 5)
    np.testing.assert_array_equal(got[:, 0], [0.2, 0.8, 0.3, 0.7, 0.1])
    np.testing.assert_array_equal(ranked_configurations([a, b], 2)[:, 0], [0.2, 0.8])


def test_ranked_configurations_skip_repeats_and_stop_when_exhausted():
    a = MetaTask("a", np.array([[0.5], [0.1]]), np.array([0.0, 1.0]), "minimize")
    b = MetaTask("b", np.array([[0.5], [0.9]]), np.array([0.0, 1.0]), "minimize")
    got = ranked_configurations([a, b], 10)
    np.testing.assert_array_equal(got[:, 0], [0.5, 0.1, 0.9])  # b's best repeats a's best


def _space():
    return hs.SearchSpace({"x": hs.Float(0.0, 1.0), "k": hs.Int(1, 5)})


def _source(shift: float, n: int = 12, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    x, k = rng.random(n), rng.integers(1, 6, n)
    return pd.DataFrame({"x": x, "k": k, "value": (x - shift) ** 2 + 0.01 * k})


def test_warmstart_study_evaluates_the_sources_winners_then_runs_gp():
    sources = [_source(0.2, seed=1), _source(0.8, seed=2)]
    study = hs.create_study(
        "ws",
        _space(),
        storage=None,
        method="warmstart",
        transfer_from=sources,
        seed=0,
        n_initial=3,
    )
    first = []
    for _ in range(5):
        trial = study.ask()
        first.append(trial.params)
        study.tell(trial, (trial.params["x"] - 0.25) ** 2)
    best = [s.sort_values("value").iloc[0] for s in sources]
    assert first[0] == {"x": pytest.approx(best[0]["x"]), "k": int(best[0]["k"])}
    assert first[1] == {"x": pytest.approx(best[1]["x"]), "k": int(best[1]["k"])}
    second = sources[0].sort_values("value").iloc[1]
    assert first[2] == {"x": pytest.approx(second["x"]), "k": int(second["k"])}
    assert [t.source for t in study.trials] == ["ask"] * 5
    assert study.settings["method"] == "warmstart"


def test_warmstart_needs_sources():
    with pytest.raises(hs.InvalidSettingError, match="transfer_from"):
        hs.create_study("ws", _space(), storage=None, method="warmstart")


def test_sklearn_family_builds_a_cached_deterministic_instance(tmp_path, monkeypatch):
    from headstart.benchmarks import get_task, sklearn_tasks

    monkeypatch.setenv(sklearn_tasks.CACHE_ENV, str(tmp_path / "cache.jsonl"))
    monkeypatch.setattr(sklearn_tasks, "_CACHE", sklearn_tasks._Cache())
    monkeypatch.setattr(sklearn_tasks, "N_SOURCE", 3)
    monkeypatch.setattr(sklearn_tasks, "N_REFERENCE_GP", 1)
    sklearn_tasks._hgb_instance.cache_clear()
    task = get_task("sklearn-hgb-wine").instance(5)
    [source] = task.meta_tasks
    assert source.n == 3 and task.space.dim == 7
    params = task.space.decode(source.X[:1])[0]
    value = task.objective(params)
    assert value == task.objective(params)  # deterministic folds and model
    assert task.optimum <= value + 1e-12  # the reference search saw this configuration
    lines = (tmp_path / "cache.jsonl").read_text().splitlines()
    assert len(lines) == 3 + 3 + 1 + 1  # source, its configs on B, one GP step, the optimum
    sklearn_tasks._hgb_instance.cache_clear()


def _bowl_sources(n_sources: int = 3, n: int = 25):
    rng = np.random.default_rng(0)
    frames = []
    for m in range(n_sources):
        x, y = rng.random(n), rng.random(n)
        value = (x - 0.3) ** 2 + (y - 0.7) ** 2 + 0.1 * m
        frames.append(pd.DataFrame({"x": x, "y": y, "value": value}))
    return frames


@pytest.mark.parametrize("method", ["scaml", "rgpe"])
def test_first_suggestion_exploits_the_sources_optimum(method):
    space = hs.SearchSpace({"x": hs.Float(0.0, 1.0), "y": hs.Float(0.0, 1.0)})
    study = hs.create_study(
        "first", space, storage=None, method=method, transfer_from=_bowl_sources(), seed=0
    )
    first = study.ask().params
    assert np.hypot(first["x"] - 0.3, first["y"] - 0.7) < 0.1


def test_the_papers_first_suggestion_stays_available():
    space = hs.SearchSpace({"x": hs.Float(0.0, 1.0), "y": hs.Float(0.0, 1.0)})

    def study(first_trial: str) -> hs.Study:
        return hs.create_study(
            first_trial,
            space,
            storage=None,
            method="scaml",
            transfer_from=_bowl_sources(),
            seed=0,
            acquisition="ucb",
            ucb_beta=9.0,
            first_trial=first_trial,
        )

    paper, mean = study("acquisition"), study("mean")
    assert paper.ask().params != mean.ask().params
    with pytest.raises(hs.InvalidSettingError, match="first_trial"):
        hs.create_study("bad", space, storage=None, first_trial="best")


def test_candidates_rule_starts_at_one_of_the_sources_own_winners():
    space = hs.SearchSpace({"x": hs.Float(0.0, 1.0), "y": hs.Float(0.0, 1.0)})
    sources = _bowl_sources()
    study = hs.create_study(
        "cand",
        space,
        storage=None,
        method="scaml",
        transfer_from=sources,
        seed=0,
        first_trial="candidates",
    )
    first = study.ask().params
    winners = [f.loc[f["value"].idxmin(), ["x", "y"]].to_numpy() for f in sources]
    distance = min(np.hypot(first["x"] - w[0], first["y"] - w[1]) for w in winners)
    assert distance < 1e-9  # evaluated by a source, not interpolated between them


def test_lcb_winner_rule_tries_the_best_rated_source_winner_second():
    """``first_trial="lcb-winner"``: the prior's ``mu - sigma`` first (as ``"lcb"``), then the
    source winner with the highest posterior mean after that observation; LogEI after."""
    space = hs.SearchSpace({"x": hs.Float(0.0, 1.0), "y": hs.Float(0.0, 1.0)})
    sources = _bowl_sources()
    winners = [f.loc[f["value"].idxmin(), ["x", "y"]].to_numpy() for f in sources]

    def study(rule):
        return hs.create_study(
            rule, space, storage=None, method="scaml", transfer_from=sources, seed=0,
            first_trial=rule,
        )  # fmt: skip

    hedge, lcb = study("lcb-winner"), study("lcb")
    for s in (hedge, lcb):
        s.optimize(lambda p: (p["x"] - 0.5) ** 2 + p["y"], n_trials=3)
    first, second = (np.array([t.params["x"], t.params["y"]]) for t in hedge.trials[:2])
    assert np.allclose(first, [lcb.trials[0].params["x"], lcb.trials[0].params["y"]])
    assert min(np.hypot(*(second - w)) for w in winners) < 1e-9  # a source's own winner


def test_lcb_winner_second_point_is_the_fresh_candidate_with_the_highest_posterior_mean():
    from headstart._engine.engine import BOEngine, DimSpec
    from headstart._gp import MaternGP

    cands = np.array([[0.1], [0.5], [0.9], [0.62]])
    engine = BOEngine(
        [DimSpec("continuous")],
        MaternGP(np.array([False])),
        first_rule="lcb-winner",
        candidates=cands,
        n_first=3,  # 0.62 is screened but is no source's winner
    )
    rng = np.random.default_rng(0)
    X, y = np.array([[0.6]]), np.array([1.0])
    posterior, _ = engine.surrogate.condition(X, y, rng)
    expected = cands[:3][np.argmax(posterior.posterior(cands[:3])[0])]
    np.testing.assert_array_equal(engine.suggest(X, y, rng=rng), expected)
    X = np.array([[0.5]])  # a duplicate of a winner is never the second point
    assert engine.suggest(X, y, rng=rng)[0] in (0.1, 0.9)


def test_engine_rejects_an_empty_first_pool():
    from headstart._engine.engine import BOEngine, DimSpec
    from headstart._gp import MaternGP

    with pytest.raises(ValueError, match="n_first"):
        BOEngine(
            [DimSpec("continuous")],
            MaternGP(np.array([False])),
            first_rule="candidates",
            candidates=np.array([[0.5]]),
            n_first=0,
        )
