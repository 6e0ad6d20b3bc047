"""Pending points as fantasies: Cholesky extension, fantasy posteriors, batches and the fallback."""

from __future__ import annotations

import numpy as np
import pytest

from headstart._engine.engine import PENDING_RULES, BOEngine, DimSpec
from headstart._engine.numerics import extend_cholesky
from headstart._gp import MaternGP
from headstart._gp.model import ExactGP, GPParams
from headstart._transfer.rgpe import RGPE
from headstart.sources import MetaTask

CONT3 = [DimSpec("continuous")] * 3


def _data(n, d=3, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.random((n, d))
    return X, -((X - 0.4) ** 2).sum(1) + 0.1 * np.sin(7 * X[:, 0])


class CountingMatern(MaternGP):
    """MaternGP that counts its fits."""

    calls = 0

    def condition(self, train_X, train_y, rng):
        CountingMatern.calls += 1
        return super().condition(train_X, train_y, rng)


@pytest.fixture
def counting():
    CountingMatern.calls = 0
    return CountingMatern(np.zeros(3, dtype=bool), deterministic=True)


@pytest.mark.parametrize("n", [0, 1, 6])
def test_extend_cholesky_equals_the_full_factor(n):
    rng = np.random.default_rng(n)
    A = rng.standard_normal((n + 3, n + 5))
    K = A @ A.T + 0.1 * np.eye(n + 3)
    L = np.linalg.cholesky(K[:n, :n]) if n else np.zeros((0, 0))
    np.testing.assert_allclose(
        extend_cholesky(L, K[:n, n:], K[n:, n:]), np.linalg.cholesky(K), atol=1e-12
    )


def test_exact_gp_fantasize_equals_a_gp_on_the_extended_data():
    X, y = _data(9)
    params = GPParams(np.array([4.0, 9.0, 2.0]), 1.3, 1e-4)
    is_cat = np.zeros(3, dtype=bool)
    fantasy = ExactGP(X[:6], y[:6], is_cat, params).fantasize(X[6:], y[6:])
    direct = ExactGP(X, y, is_cat, params)
    Xs = np.random.default_rng(1).random((5, 3))
    for got, want in zip(
        fantasy.posterior_and_grad(Xs), direct.posterior_and_grad(Xs), strict=True
    ):
        np.testing.assert_allclose(got, want, atol=1e-9)
    assert fantasy.mll == pytest.approx(direct.mll, abs=1e-9)
    assert fantasy.params is params  # hyperparameters reused, not refitted


def test_believer_collapses_the_variance_at_a_pending_point_and_keeps_the_mean():
    X, y = _data(8)
    gp = ExactGP(X, y, np.zeros(3, dtype=bool), GPParams(np.full(3, 4.0), 1.0, 1e-6))
    p = np.array([[0.9, 0.1, 0.5]])
    mean, var = gp.posterior(p)
    f_mean, f_var = gp.fantasize(p, mean).posterior(p)
    np.testing.assert_allclose(f_mean, mean, atol=1e-9)
    assert var[0] > 1e-3 and f_var[0] < 1e-5


def test_pending_rule_is_validated():
    with pytest.raises(ValueError, match="pending_rule"):
        BOEngine(CONT3, MaternGP(np.zeros(3, dtype=bool)), pending_rule="kriging")
    with pytest.raises(ValueError, match="q must be"):
        BOEngine(CONT3, MaternGP(np.zeros(3, dtype=bool))).suggest(
            *_data(5), rng=np.random.default_rng(0), q=0
        )


@pytest.mark.parametrize("rule", PENDING_RULES)
def test_batch_is_distinct_on_grid_and_fits_once_with_fantasies(rule, counting):
    dims = [DimSpec("continuous"), DimSpec("integer", np.linspace(0, 1, 5)), DimSpec("continuous")]
    X, y = _data(10)
    X[:, 1] = np.round(X[:, 1] * 4) / 4
    engine = BOEngine(dims, counting, pending_rule=rule)
    batch = engine.suggest(X, y, rng=np.random.default_rng(3), q=4)
    assert batch.shape == (4, 3)
    assert len({tuple(row) for row in batch}) == 4
    assert set(batch[:, 1]) <= set(np.linspace(0, 1, 5))
    # one hyperparameter fit per batch with fantasies; the refit rule fits once per point
    assert CountingMatern.calls == (4 if rule == "refit" else 1)


def test_pending_points_repel_the_next_suggestion(counting):
    X, y = _data(12)
    engine = BOEngine(CONT3, counting)
    first = engine.suggest(X, y, rng=np.random.default_rng(0))
    second = engine.suggest(X, y, rng=np.random.default_rng(0), pending=first[None])
    assert np.abs(second - first).max() > 1e-3
    # a batch's first point is the single suggestion; the second sees the first as pending
    batch = engine.suggest(X, y, rng=np.random.default_rng(0), q=2)
    np.testing.assert_allclose(batch[0], first, atol=1e-12)
    assert np.abs(batch[1] - first).max() > 1e-3


def test_reuse_fit_shares_one_fit_between_suggestions_on_the_same_data(counting):
    X, y = _data(10)
    engine = BOEngine(CONT3, counting)
    with engine.reuse_fit():
        a = engine.suggest(X, y, rng=np.random.default_rng(0))
        b = engine.suggest(X, y, rng=np.random.default_rng(1), pending=a[None])
        engine.suggest(X[:-1], y[:-1], rng=np.random.default_rng(2))  # other data: refits
    assert CountingMatern.calls == 2
    assert not np.allclose(a, b)
    engine.suggest(X, y, rng=np.random.default_rng(0))  # outside: fits again
    assert CountingMatern.calls == 3


def test_surrogates_without_fantasies_fall_back_to_the_refitted_liar():
    rng = np.random.default_rng(0)
    tasks = []
    for m in range(2):
        Xm = rng.random((8, 3))
        tasks.append(MetaTask(f"t{m}", Xm, -((Xm - 0.4) ** 2).sum(1), "maximize"))
    engine = BOEngine(CONT3, RGPE(tasks, np.zeros(3, dtype=bool), seed=0))
    X, y = _data(6)
    posterior, _ = engine.surrogate.condition(X, y, np.random.default_rng(0))
    assert not hasattr(posterior, "fantasize")
    batch = engine.suggest(X, y, rng=np.random.default_rng(0), q=3)
    assert len({tuple(row) for row in batch}) == 3


def test_study_batch_fits_the_model_once(monkeypatch):
    import headstart as hs

    calls = []
    original = MaternGP.condition

    def counted(self, X, y, rng):
        calls.append(len(y))
        return original(self, X, y, rng)

    monkeypatch.setattr(MaternGP, "condition", counted)
    space = hs.SearchSpace({"a": hs.Float(0, 1), "b": hs.Float(0, 1)})
    study = hs.create_study("batch", space, storage=None, seed=0, n_initial=5)
    for _ in range(5):
        trial = study.ask()
        study.tell(trial, (trial.params["a"] - 0.3) ** 2 + trial.params["b"])
    batch = study.ask(n=4)
    assert calls == [5]
    assert len({tuple(t.params.values()) for t in batch}) == 4
