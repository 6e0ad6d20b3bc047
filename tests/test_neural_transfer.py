"""ABLR and ABRAC: nested dropout, the basis-count rule, the network's Jacobian and cache, the study."""

from __future__ import annotations

import json
import warnings

import numpy as np
import pandas as pd
import pytest
import torch

import headstart as hs
from headstart._meta import MetaTask
from headstart._transfer.features import (
    FeatureNet,
    sample_truncations,
    train_features,
    truncation_probabilities,
)
from headstart._transfer.neural import NeuralTransfer, cache_key, load_or_train


@pytest.fixture(autouse=True)
def _short_training(monkeypatch):
    """200 optimizer steps instead of 3,000 (ABLR: 10 outer L-BFGS rounds instead of 50): these
    tests check behaviour, not accuracy; the two that need a trained basis set their own."""
    import headstart._transfer.features as features

    monkeypatch.setattr(features, "MIN_STEPS", 200)


def _forrester_tasks(n_tasks=6, n=20, seed=0):
    rng = np.random.default_rng(seed)
    tasks = []
    for t in range(n_tasks):
        a, b, c = rng.normal(6, 1), rng.normal(12, 2), rng.uniform(0, 10)
        x = rng.random(n)
        tasks.append(MetaTask(f"t{t}", x[:, None], (a * x - 2) ** 2 * np.sin(b * x - 4) + c))
    return tasks


@pytest.mark.parametrize("kind", ["uniform", "geometric"])
def test_nested_dropout_truncations_follow_q(kind):
    gen = torch.Generator().manual_seed(0)
    b = sample_truncations(20, 200_000, kind, gen).numpy()
    assert b.min() >= 1 and b.max() <= 20
    freq = np.bincount(b, minlength=21)[1:] / len(b)
    np.testing.assert_allclose(freq, truncation_probabilities(20, kind), atol=0.004)


def test_nested_dropout_orders_the_basis(monkeypatch):
    """With nested dropout the leading basis functions carry the structure (Rippel et al.)."""
    import headstart._transfer.features as features

    monkeypatch.setattr(features, "MIN_STEPS", 3000)
    tasks = [(t.X, (t.y - t.y.mean()) / t.y.std()) for t in _forrester_tasks()]

    def error_with(net: FeatureNet, cols: slice) -> float:
        errs = []
        for X, y in tasks:
            F = np.column_stack([net.features(X)[:, cols], np.ones(len(y))])
            w = np.linalg.lstsq(F, y, rcond=None)[0]
            errs.append(np.mean((F @ w - y) ** 2))
        return float(np.mean(errs))

    nested = train_features(tasks, mode="nested", seed=0)
    assert error_with(nested, slice(0, 2)) < 0.5 * error_with(nested, slice(-2, None))


def test_basis_count_rule():
    net = load_or_train(_forrester_tasks(), "nested", seed=0)
    abrac = NeuralTransfer([], np.array([False]), net=net)
    assert [abrac.n_active(n) for n in (0, 1, 5, 20, 100)] == [1, 1, 5, 20, 20]
    fixed = NeuralTransfer([], np.array([False]), net=net, active="all")
    assert fixed.n_active(3) == 20
    assert NeuralTransfer([], np.array([False]), net=net, active=7).n_active(50) == 7
    assert NeuralTransfer([], np.array([False]), net=net, basis="ablr", ard=False).n_active(2) == 20


def test_feature_jacobian_matches_finite_differences():
    rng = np.random.default_rng(0)
    layers = tuple(
        (rng.standard_normal((o, i)), rng.standard_normal(o)) for i, o in ((3, 5), (5, 4))
    )
    net = FeatureNet(layers, "plain")
    X = rng.random((4, 3))
    F, J = net.features_and_jacobian(X)
    np.testing.assert_allclose(F, net.features(X))
    eps = 1e-6
    for j in range(3):
        step = np.zeros(3)
        step[j] = eps
        numeric = (net.features(X + step) - net.features(X - step)) / (2 * eps)
        np.testing.assert_allclose(J[:, :, j], numeric, rtol=1e-6, atol=1e-8)


def test_feature_jacobian_of_a_network_without_hidden_layers_has_a_row_per_point():
    W, b = np.arange(6.0).reshape(2, 3), np.ones(2)
    F, J = FeatureNet(((W, b),), "plain").features_and_jacobian(np.zeros((4, 3)))
    assert F.shape == (4, 2) and J.shape == (4, 2, 3)
    np.testing.assert_array_equal(J[2], W)


def test_tanh_in_place_matches_numpy_and_saturates_without_overflow():
    from headstart._transfer.features import _tanh

    x = np.concatenate([np.linspace(-800.0, 800.0, 20001), [0.0, 1e-300, 709.9, -745.0]])
    h = x.copy()
    with warnings.catch_warnings(), np.errstate(all="raise"):
        warnings.simplefilter("error")  # no overflow or underflow in exp
        _tanh(h)
    np.testing.assert_allclose(h, np.tanh(x), rtol=0, atol=1e-15)
    assert h.max() == 1.0 and h.min() == -1.0


class _Cache(dict):
    def get_cache(self, key):
        return self.get(key)

    def put_cache(self, key, kind, value):
        self[key] = value


def test_trained_network_is_cached_seeded_and_tamper_checked(monkeypatch):
    import headstart._transfer.neural as neural

    tasks, cache, calls = _forrester_tasks(), _Cache(), []
    real = neural.train_features
    monkeypatch.setattr(neural, "train_features", lambda *a, **k: calls.append(1) or real(*a, **k))
    first = load_or_train(tasks, "nested", seed=3, cache=cache)
    again = load_or_train(tasks, "nested", seed=3, cache=cache)
    assert len(calls) == 1
    np.testing.assert_array_equal(again.layers[0][0], first.layers[0][0])
    key = cache_key(tasks, "nested", 3, "uniform")
    cache[key]["body"]["layers"][0][1][0] += 1.0  # tampered
    retrained = load_or_train(tasks, "nested", seed=3, cache=cache)
    assert len(calls) == 2  # the altered entry was not used
    np.testing.assert_array_equal(retrained.layers[0][0], first.layers[0][0])  # same seed
    assert FeatureNet.from_json(cache[key]).mode == "nested"


def test_too_little_or_constant_meta_data_is_refused():
    with pytest.raises(hs.MetaDataValueError, match="at least 20 source evaluations"):
        load_or_train(_forrester_tasks(n_tasks=1, n=10), "nested")
    flat = [
        *_forrester_tasks(n_tasks=2),
        MetaTask("flat", np.random.default_rng(0).random((5, 1)), np.ones(5)),
    ]
    with pytest.raises(hs.MetaDataValueError, match="'flat' has the same value"):
        load_or_train(flat, "nested")
    with pytest.raises(hs.MetaDataValueError):
        MetaTask("nan", np.zeros((2, 1)), np.array([1.0, np.nan]))


@pytest.mark.parametrize(
    "method, options, active",
    [
        ("abrac", {"residual": False, "ard": True}, 6),  # the paper's: ARD over min(n, 20)
        ("ablr", {"residual": False}, 20),
        ("ablr-sgd-fixed", {"residual": False}, 20),
        ("abrac", {}, 20),  # the default: one precision for every function, and the residual
    ],
)
def test_neural_methods_run_in_a_study_and_report_their_head(method, options, active):
    frames = [
        pd.DataFrame({"x": t.X[:, 0], "value": t.y, "task": t.name}) for t in _forrester_tasks()
    ]
    space = hs.SearchSpace({"x": hs.Float(0.0, 1.0)})
    study = hs.create_study(
        method, space, storage=None, method=method, transfer_from=frames, seed=0, **options
    )
    study.optimize(lambda p: (6 * p["x"] - 2) ** 2 * np.sin(12 * p["x"] - 4), n_trials=6)
    assert study._strategy.n_initial == 3  # the ABRAC paper's 3 random points
    report = study.transfer_report()
    assert set(report.source_fit) == {f"t{i}" for i in range(6)}
    assert report.head["active_basis"] == active
    ard = options.get("ard", False)  # only the paper's ABRAC has one precision per function
    assert report.head["ard"] == ard
    assert ("pruned by ARD" if ard else "one prior precision") in report.summary()
    residual = options.get("residual", True)
    assert "basis functions" in report.summary()
    assert ("residual" in report.head) == residual
    assert ("residual GP" in report.summary()) == residual


def _two_dim_sources(n=25):
    space = hs.SearchSpace({"x": hs.Float(0.0, 1.0), "y": hs.Float(0.0, 1.0)})
    rng = np.random.default_rng(1)
    frames = []
    for k, shift in enumerate((0.2, 0.4)):
        x, y = rng.random(n), rng.random(n)
        frames.append(pd.DataFrame({"x": x, "y": y, "value": (x - shift) ** 2 + y, "task": k}))
    return space, pd.concat(frames)


def test_too_few_source_evaluations_are_refused_at_create_study_with_nothing_stored(tmp_path):
    space, frame = _two_dim_sources(n=5)
    url = f"sqlite:///{tmp_path / 'n.db'}"
    with pytest.raises(hs.MetaDataValueError, match="at least 20 source evaluations"):
        hs.create_study("t", space, storage=url, method="abrac", transfer_from=frame)
    assert hs.storage.get_storage(url).list_studies() == []


def test_the_basis_is_trained_at_create_study_not_inside_an_ask(monkeypatch):
    import headstart._transfer.neural as neural

    space, frame = _two_dim_sources()
    study = hs.create_study("t", space, storage=None, method="abrac", transfer_from=frame)
    monkeypatch.setattr(neural, "train_features", lambda *a, **k: pytest.fail("trained in ask"))
    study.optimize(lambda p: (p["x"] - 0.3) ** 2 + p["y"], n_trials=5)  # 3 random, 2 modelled


@pytest.mark.filterwarnings("ignore:The sources seem to mislead")  # ABRAC's head: issue 32
def test_abrac_does_not_propose_near_duplicates():
    """Issue 27: four trials within 0.02 of each other; the paper's head (no residual GP) keeps
    MIN_SEPARATION from every evaluated point in at least one column. (With the residual GP the
    posterior's variance shrinks near evaluated points, as a GP's, and refinement is allowed.)"""
    from headstart._transfer.neural import MIN_SEPARATION

    space, frame = _two_dim_sources()
    study = hs.create_study(
        "t", space, storage=None, method="abrac", transfer_from=frame, seed=0, residual=False
    )
    study.optimize(lambda p: (p["x"] - 0.3) ** 2 + p["y"], n_trials=12)
    X = space.encode([t.params for t in study.trials])
    for i in range(3, len(X)):  # the model's suggestions (the first 3 are random)
        gaps = np.abs(X[:i] - X[i]).max(1)
        assert gaps.min() >= MIN_SEPARATION, (i, gaps.min())


def test_residual_must_be_a_bool_and_is_refused_before_anything_is_stored(tmp_path):
    url = f"sqlite:///{tmp_path / 'r.db'}"
    frames = [
        pd.DataFrame({"x": t.X[:, 0], "value": t.y, "task": t.name}) for t in _forrester_tasks()
    ]
    space = hs.SearchSpace({"x": hs.Float(0.0, 1.0)})
    with pytest.raises(hs.InvalidSettingError, match="residual"):
        hs.create_study("t", space, storage=url, method="ablr", transfer_from=frames, residual=1)
    assert hs.storage.get_storage(url).list_studies() == []


@pytest.mark.parametrize(
    "options, match",
    [
        ({"ard": "yes"}, "ard"),
        ({"active": 5}, "ard=True"),
        ({"ard": False, "active": "all"}, "ARD"),
    ],
)
def test_abracs_head_options_are_refused_before_anything_is_stored(tmp_path, options, match):
    """``active`` picks the basis functions of an ARD head: with the default head (one
    precision, ``ard=False``) it would be ignored, so it is refused with what to pass."""
    url = f"sqlite:///{tmp_path / 'a.db'}"
    frames = [
        pd.DataFrame({"x": t.X[:, 0], "value": t.y, "task": t.name}) for t in _forrester_tasks()
    ]
    space = hs.SearchSpace({"x": hs.Float(0.0, 1.0)})
    with pytest.raises(hs.InvalidSettingError, match=match):
        hs.create_study("t", space, storage=url, method="abrac", transfer_from=frames, **options)
    assert hs.storage.get_storage(url).list_studies() == []
    hs.create_study(  # with the ARD head, active is taken
        "t", space, storage=url, method="abrac", transfer_from=frames, ard=True, active=5
    )


def test_source_mean_is_the_sources_average_head_and_shifts_the_posterior_by_it(monkeypatch):
    """source_mean=True: the head's prior mean is phi^T w0, w0 the mean of the sources' own head
    means; with identical sources, the posterior after 3 target points predicts the shared
    function better than the zero-mean head (RMSE after an affine map: 0.57 vs 0.72 here)."""
    import headstart._transfer.features as features
    from headstart._transfer.blr import fit_blr
    from headstart._transfer.neural import source_mean_weights
    from headstart.testing.surrogates import finite_difference_errors

    monkeypatch.setattr(features, "MIN_STEPS", 800)  # the basis the figures were measured on
    rng = np.random.default_rng(4)

    def f(x):
        return (6 * x - 2) ** 2 * np.sin(12 * x - 4)

    tasks = [MetaTask(f"s{t}", x[:, None], f(x)) for t, x in enumerate(rng.random((4, 30)))]
    net = load_or_train(tasks, "nested")
    w0 = source_mean_weights(net, tasks, ard=True)
    standardized = [(t.X, (t.y.mean() - t.y) / t.y.std()) for t in tasks]  # maximize convention
    expected = np.mean([fit_blr(net.features(X), y).mean_w for X, y in standardized], axis=0)
    np.testing.assert_allclose(w0, expected)
    X = np.array([[0.1], [0.5], [0.9]])
    grid = np.linspace(0, 1, 201)[:, None]
    truth = f(grid[:, 0])
    errors = {}
    for source_mean in (False, True):
        model = NeuralTransfer(
            tasks, np.zeros(1, bool), net=net, source_mean=source_mean, residual=False
        )
        post, _ = model.condition(X, -f(X[:, 0]), np.random.default_rng(0))  # maximized
        mean = -post.posterior(grid)[0]
        scale = np.polyfit(mean, truth, 1)  # compare shapes: the units are the 3 points'
        errors[source_mean] = np.sqrt(np.mean((np.polyval(scale, mean) - truth) ** 2))
        dm, numeric = finite_difference_errors(post, grid[50:53], np.array([0]), h=1e-6)["mean"]
        np.testing.assert_allclose(dm[:, 0], numeric[:, 0], rtol=1e-4, atol=1e-6)
    assert errors[True] < 0.9 * errors[False]


def test_beyond_the_local_size_hyperparameters_refit_per_growth_and_the_residual_is_local(
    monkeypatch,
):
    """Issue 32 (speed at n >= 500): past ``local_points`` observations, the head's and the
    residual's hyperparameters are refitted once the data have grown by NEURAL_REFIT_GROWTH,
    and the residual keeps its correlations among that many points nearest the incumbent."""
    import headstart._transfer.neural as neural

    monkeypatch.setattr(neural, "NEURAL_REFIT_GROWTH", 0.25)
    model = NeuralTransfer(
        _forrester_tasks(), np.zeros(1, bool), deterministic=True, active="all", local_points=12
    )
    rng = np.random.default_rng(0)
    X = rng.random((24, 1))
    y = -((6 * X[:, 0] - 2) ** 2) * np.sin(12 * X[:, 0] - 4)
    thetas = []
    for n in range(12, 24):
        post, _ = model.condition(X[:n], y[:n], rng)
        thetas.append(post.theta.copy())
        assert len(post.y) == min(n, 12)  # the exact block
        assert (post.w_prior is None) == (n <= 12)
    # fits at 12 (the first), 15 (grown by ceil(0.25 * 12) = 3), 17 (the full refit's schedule:
    # 5 after 12) and 22 (grown by 5); conditioned at the last fit's values in between
    changed = [
        n
        for n, a, b in zip(range(13, 24), thetas, thetas[1:], strict=False)
        if not np.array_equal(a, b)
    ]
    assert set(changed) <= {15, 17, 22} and 15 in changed


@pytest.mark.parametrize(("ard", "source_mean"), [(True, False), (False, False), (False, True)])
def test_between_refits_past_the_block_the_reported_head_is_made_when_asked_for(
    monkeypatch, ard, source_mean
):
    """Past ``local_points``, between refits, the residual model starts from its own previous
    fit, so the head at the frozen hyperparameters is not computed per suggestion. A twin that
    computes it every time (the code before) gives the same posterior and the same report."""
    import headstart._transfer.neural as neural

    monkeypatch.setattr(neural, "NEURAL_REFIT_GROWTH", 0.25)
    rng = np.random.default_rng(0)
    X = rng.random((16, 1))
    y = -((6 * X[:, 0] - 2) ** 2) * np.sin(12 * X[:, 0] - 4)
    grid = np.linspace(0, 1, 9)[:, None]

    def run():
        model = NeuralTransfer(
            _forrester_tasks(), np.zeros(1, bool), deterministic=True, ard=ard, active="all",
            local_points=12, source_mean=source_mean,
        )  # fmt: skip
        out = []
        for n in range(12, 17):
            post, _ = model.condition(X[:n], y[:n], np.random.default_rng(n))
            deferred = model._head is None
            out.append((deferred, post.posterior(grid), model.diagnostics()["head"]))
        return out

    lazy = run()
    monkeypatch.setattr(neural, "valid_init", lambda *args: False)  # never resumable: eager
    eager = run()
    assert [n for n, (d, _, _) in zip(range(12, 17), lazy, strict=True) if d] == [13, 14, 16]
    assert not any(d for d, _, _ in eager)
    for (_, (m1, v1), h1), (_, (m2, v2), h2) in zip(lazy, eager, strict=True):
        np.testing.assert_allclose(m1, m2, rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(v1, v2, rtol=1e-12, atol=1e-14)
        np.testing.assert_allclose(h1["ard_precisions"], h2["ard_precisions"], rtol=1e-12)
        assert h1["noise_variance"] == pytest.approx(h2["noise_variance"], rel=1e-12)
        assert h1["residual"]["head_log_evidence"] == pytest.approx(
            h2["residual"]["head_log_evidence"], rel=1e-12
        )


def test_a_stored_residual_fit_that_is_not_finite_is_refitted_not_resumed(monkeypatch):
    """A resumed model whose stored residual hyperparameters hold a NaN (JSON allows it) fits
    again between refits past the block, as one without a stored fit, instead of failing."""
    import headstart._transfer.neural as neural

    monkeypatch.setattr(neural, "NEURAL_REFIT_GROWTH", 0.25)  # no refit due from 12 to 14
    model = NeuralTransfer(
        _forrester_tasks(), np.zeros(1, bool), deterministic=True, ard=False, local_points=12
    )
    rng = np.random.default_rng(0)
    X = rng.random((14, 1))
    y = -((6 * X[:, 0] - 2) ** 2) * np.sin(12 * X[:, 0] - 4)
    for n in (12, 13):
        model.condition(X[:n], y[:n], rng)
    state = json.loads(json.dumps(model.state()))
    state["residual_theta"][0] = float("nan")
    resumed = NeuralTransfer(
        _forrester_tasks(), np.zeros(1, bool), deterministic=True, ard=False, local_points=12,
        net=model.net,
    )  # fmt: skip
    resumed.load_state(state)
    post, _ = resumed.condition(X, y, rng)  # between refits: the stored fit would be frozen
    assert np.isfinite(post.theta).all()
    assert np.isfinite(post.posterior(np.linspace(0, 1, 5)[:, None])[0]).all()


@pytest.mark.parametrize("ard", [True, False])
def test_the_papers_head_past_the_local_size_is_conditioned_between_refits_and_resumes(
    monkeypatch, ard
):
    """residual=False (the papers' heads, ARD or one precision): past ``local_points`` the
    head's hyperparameters stay fixed between refits; a model restored from ``state()`` refits
    when the original does (the schedule's counters are part of the state)."""
    import headstart._transfer.neural as neural

    monkeypatch.setattr(neural, "NEURAL_REFIT_GROWTH", 0.25)
    tasks = _forrester_tasks()

    def make():
        return NeuralTransfer(
            tasks, np.zeros(1, bool), residual=False, ard=ard, active="all", local_points=12
        )

    model = make()
    rng = np.random.default_rng(0)
    X = rng.random((24, 1))
    y = -((6 * X[:, 0] - 2) ** 2) * np.sin(12 * X[:, 0] - 4)
    thetas = []
    for n in range(12, 24):
        model.condition(X[:n], y[:n], rng)
        thetas.append(model._theta.copy())
        if n == 14:
            restored = make()
            restored.load_state(json.loads(json.dumps(model.state())))
    changed = {
        n
        for n, a, b in zip(range(13, 24), thetas, thetas[1:], strict=False)
        if not np.array_equal(a, b)
    }
    assert changed <= {15, 17, 22} and 15 in changed
    for n in range(15, 24):
        restored.condition(X[:n], y[:n], rng)
        np.testing.assert_allclose(restored._theta, thetas[n - 12], rtol=1e-6, atol=1e-8)


def test_the_exact_block_is_centred_on_the_best_trial_also_with_the_source_mean():
    """With ``source_mean`` the head fits values minus the sources' mean; the residual's exact
    block still gathers around the best observed trial (it gathered around the best shifted
    value before)."""
    model = NeuralTransfer(_forrester_tasks(), np.zeros(1, bool), source_mean=True, local_points=6)
    rng = np.random.default_rng(0)
    X = rng.random((15, 1))
    y = -((6 * X[:, 0] - 2) ** 2) * np.sin(12 * X[:, 0] - 4)
    post, _ = model.condition(X, y, rng)
    np.testing.assert_array_equal(post.inner.X[0], X[np.argmax(y)])


def test_local_points_none_keeps_the_residual_exact_and_refits_at_every_size(monkeypatch):
    """``local_points=None``: no local block and no refit schedule at any size (whatever the
    module default is); the model equals a local one that has not reached its size, and differs
    from one that has."""
    import headstart._transfer.neural as neural

    tasks = _forrester_tasks()
    rng = np.random.default_rng(0)
    X = rng.random((16, 1))
    y = -((6 * X[:, 0] - 2) ** 2) * np.sin(12 * X[:, 0] - 4)
    monkeypatch.setattr(neural, "NEURAL_LOCAL_POINTS", 8)  # a default it must not fall back to
    exact = NeuralTransfer(tasks, np.zeros(1, bool), active="all", local_points=None)
    roomy = NeuralTransfer(tasks, np.zeros(1, bool), active="all", local_points=100)
    local = NeuralTransfer(tasks, np.zeros(1, bool), active="all", local_points=8)
    grid = np.linspace(0, 1, 7)[:, None]
    for n in range(8, 17):
        post, _ = exact.condition(X[:n], y[:n], np.random.default_rng(n))
        ref, _ = roomy.condition(X[:n], y[:n], np.random.default_rng(n))
        block, _ = local.condition(X[:n], y[:n], np.random.default_rng(n))
        assert len(post.y) == n and post.w_prior is None
        assert len(block.y) == 8 and (block.w_prior is None) == (n == 8)
        for a, b in zip(post.posterior(grid), ref.posterior(grid), strict=True):
            np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-12)
    assert not np.allclose(post.posterior(grid)[0], block.posterior(grid)[0])
    with pytest.raises(ValueError, match="local_points"):
        NeuralTransfer(tasks, np.zeros(1, bool), local_points=0)


@pytest.mark.parametrize("bad", [0, -3, 2.5, True, "100"])
def test_local_points_must_be_a_positive_integer_or_none(bad):
    import headstart as hs
    from headstart.exceptions import InvalidSettingError

    space = hs.SearchSpace({"x": hs.Float(0.0, 1.0)})
    with pytest.raises(InvalidSettingError, match="local_points"):
        hs.create_study("s", space, storage=None, method="abrac", local_points=bad)


@pytest.mark.parametrize("bad", ["log", "Yeo-Johnson", None, 1])
def test_output_warp_must_be_a_known_warp_and_nothing_is_stored(tmp_path, bad):
    url = f"sqlite:///{tmp_path / 'w.db'}"
    space = hs.SearchSpace({"x": hs.Float(0.0, 1.0)})
    with pytest.raises(hs.InvalidSettingError, match="output_warp"):
        hs.create_study("s", space, storage=url, method="abrac", output_warp=bad)
    assert hs.storage.get_storage(url).list_studies() == []
    with pytest.raises(ValueError, match="output_warp"):
        NeuralTransfer(_forrester_tasks(), np.zeros(1, bool), output_warp=bad)


@pytest.mark.parametrize("warp", ["yeo-johnson", "copula"])
def test_output_warp_maps_the_targets_the_fits_see_and_keeps_their_order(warp):
    """The head and the residual GP fit ``warp_targets(y)`` (a long tail pulled in), returned
    as the model's targets (the engine's incumbent is their maximum: the same trial)."""
    from headstart._gp.warping import warp_targets

    tasks = _forrester_tasks()
    rng = np.random.default_rng(3)
    X = rng.random((12, 1))
    y = np.exp(6.0 * X[:, 0])  # a long upper tail (maximized)
    y[4] = -50.0  # and a diverged run in the lower one
    plain = NeuralTransfer(tasks, np.zeros(1, bool), seed=0)
    warped = NeuralTransfer(tasks, np.zeros(1, bool), seed=0, net=plain.net, output_warp=warp)
    post, y_model = warped.condition(X, y, rng)
    np.testing.assert_array_equal(y_model, warp_targets(y, warp))
    assert np.argmax(y_model) == np.argmax(y) and np.argmin(y_model) == np.argmin(y)
    _, y_plain = plain.condition(X, y, rng)
    from scipy.stats import skew

    assert abs(skew(y_model)) < abs(skew(y_plain))  # the tail comes in
    mean, var = post.posterior(X)
    assert np.isfinite(mean).all() and (var > 0).all()


@pytest.mark.parametrize("method, warp", [("abrac", "copula"), ("ablr", "auto")])
def test_output_warp_runs_through_a_study(method, warp):
    frames = [
        pd.DataFrame({"x": t.X[:, 0], "value": t.y, "task": t.name}) for t in _forrester_tasks()
    ]
    space = hs.SearchSpace({"x": hs.Float(0.0, 1.0)})
    study = hs.create_study(
        "w", space, storage=None, method=method, transfer_from=frames, output_warp=warp, seed=1
    )
    study.optimize(lambda p: float(np.exp(8 * p["x"])), n_trials=7)
    assert len(study.trials) == 7 and study.best_value == min(t.value for t in study.trials)


def test_auto_warp_keeps_the_model_of_higher_evidence_for_the_observed_values():
    """``output_warp="auto"`` fits both targets and keeps the one whose evidence, plus the warp's
    log Jacobian and minus ``log(n) / 2``, is higher: the targets and posterior are then exactly
    those of that fixed warp; a heavy tail (a few values 30x the rest) picks Yeo-Johnson, a
    smooth target the standardized values. The choice is kept until the next fit from every
    start, and survives ``state()`` / ``load_state()``."""
    from headstart._gp.warping import yeo_johnson_targets

    tasks = _forrester_tasks()
    rng = np.random.default_rng(2)
    X = rng.random((14, 1))
    smooth = np.sin(6 * X[:, 0])
    heavy = -np.exp(8 * X[:, 0])  # maximized: a long lower tail
    plain = NeuralTransfer(tasks, np.zeros(1, bool), seed=0)
    picks = {}
    for name, y in (("smooth", smooth), ("heavy", heavy)):
        auto = NeuralTransfer(tasks, np.zeros(1, bool), net=plain.net, output_warp="auto")
        post, y_model = auto.condition(X, y, rng)
        picks[name] = auto._warp_choice
        scores = auto._warp_scores
        assert set(scores) == {"none", "yeo-johnson"}
        assert picks[name] == max(scores, key=scores.get)
        fixed = NeuralTransfer(tasks, np.zeros(1, bool), net=plain.net, output_warp=picks[name])
        post_f, y_f = fixed.condition(X, y, rng)
        np.testing.assert_array_equal(y_model, y_f)
        for a, b in zip(post.posterior(X), post_f.posterior(X), strict=True):
            np.testing.assert_allclose(a, b, rtol=1e-9, atol=1e-12)
        gap = auto._log_evidence() - fixed._log_evidence()
        assert gap == pytest.approx(0.0, abs=1e-9)
        if picks[name] == "yeo-johnson":
            assert scores["yeo-johnson"] > scores["none"]
            assert yeo_johnson_targets(y)[1] != 0.0
    assert picks == {"smooth": "none", "heavy": "yeo-johnson"}
    # chosen again exactly at the fits from every start (default_refit_due), kept in between
    from headstart._gp.surrogate import default_refit_due

    auto = NeuralTransfer(tasks, np.zeros(1, bool), net=plain.net, output_warp="auto")
    auto.condition(X, heavy, rng)
    lam = auto._warp_lambda
    assert lam != 1.0  # the heavy target's fitted lambda
    X_all, y_all = np.vstack([X, rng.random((12, 1))]), -np.exp(8 * np.vstack([X, X[:12]])[:, 0])
    for n in range(15, len(y_all) + 1):
        due = default_refit_due(n, auto._n_at_full_fit)
        auto._warp_choice = "marked" if due else "yeo-johnson"  # "marked": a choice must follow
        auto.condition(X_all[:n], y_all[:n], rng)
        assert auto._warp_choice in ("none", "yeo-johnson")
        assert due or auto._warp_lambda == lam  # between refits lambda is held
        lam = auto._warp_lambda
    resumed = NeuralTransfer(tasks, np.zeros(1, bool), net=plain.net, output_warp="auto")
    resumed.load_state(json.loads(json.dumps(auto.state())))
    assert (resumed._warp_choice, resumed._warp_lambda) == (auto._warp_choice, auto._warp_lambda)
    assert resumed._n_at_full_fit == auto._n_at_full_fit


def test_auto_warp_with_too_few_values_fits_once_and_chooses_later():
    tasks = _forrester_tasks()
    auto = NeuralTransfer(tasks, np.zeros(1, bool), seed=0, output_warp="auto")
    rng = np.random.default_rng(0)
    X = rng.random((2, 1))
    _, y_model = auto.condition(X, np.array([1.0, 50.0]), rng)
    assert auto._warp_choice is None and auto._warp_scores == {}
    np.testing.assert_array_equal(y_model, [-1.0, 1.0])
    X = np.vstack([X, rng.random((4, 1))])
    auto.condition(X, np.exp(8 * X[:, 0]), rng)
    assert auto._warp_choice in ("none", "yeo-johnson")


def test_the_report_says_when_the_values_were_warped():
    frames = [
        pd.DataFrame({"x": t.X[:, 0], "value": t.y, "task": t.name}) for t in _forrester_tasks()
    ]
    space = hs.SearchSpace({"x": hs.Float(0.0, 1.0)})
    study = hs.create_study("r", space, storage=None, method="abrac", transfer_from=frames, seed=3)
    study.add_trials([({"x": x}, float(np.exp(9 * x))) for x in np.linspace(0.0, 1.0, 14)])
    study.ask()
    report = study.transfer_report()
    assert report.head["output_warp"] == "yeo-johnson"  # "auto", resolved: a long tail
    assert "Yeo-Johnson" in report.summary() and report.head["warp_lambda"] != 1.0
    plain = hs.create_study(
        "p", space, storage=None, method="abrac", transfer_from=frames, output_warp="none"
    )
    plain.add_trials([({"x": x}, float(np.exp(9 * x))) for x in np.linspace(0.0, 1.0, 14)])
    plain.ask()
    assert plain.transfer_report().head["output_warp"] == "none"
    assert "Yeo-Johnson" not in plain.transfer_report().summary()


def test_a_study_stored_before_abracs_warp_resumes_without_it():
    """Stored options without ``output_warp`` (written before it existed) resume as they ran:
    ``"none"``; a new ABRAC study takes ``"auto"``, and a stored explicit value is kept."""
    from headstart._config import StudyConfig

    new = StudyConfig(method="abrac")
    assert new.options["output_warp"] == "auto"
    old = new.to_json()
    old["options"] = {k: v for k, v in old["options"].items() if k != "output_warp"}
    assert StudyConfig.from_json(old).options["output_warp"] == "none"
    assert StudyConfig.from_json(new.to_json()).options["output_warp"] == "auto"
    ablr = StudyConfig(method="ablr").to_json()
    assert StudyConfig.from_json(ablr).options["output_warp"] == "none"


def test_a_study_stored_before_the_search_settings_resumes_with_the_full_search():
    """ABRAC's defaults past its exact block are 1,024 Sobol points and 5 local searches
    (ABLR's: the engine's 2,048 and 10); stored ABRAC options without them (written before they
    existed) resume with the full search they ran with, and stored values are kept."""
    from headstart._config import StudyConfig

    new = StudyConfig(method="abrac")
    assert (new.options["screening_points"], new.options["search_starts"]) == (1024, 5)
    ablr = StudyConfig(method="ablr")
    assert (ablr.options["screening_points"], ablr.options["search_starts"]) == (2048, 10)
    old = new.to_json()
    old["options"] = {
        k: v for k, v in old["options"].items() if k not in ("screening_points", "search_starts")
    }
    resumed = StudyConfig.from_json(old).options
    assert (resumed["screening_points"], resumed["search_starts"]) == (2048, 10)
    kept = StudyConfig.from_json(new.to_json()).options
    assert (kept["screening_points"], kept["search_starts"]) == (1024, 5)


def test_the_transfer_check_scores_abrac_without_its_warp(monkeypatch):
    """The check compares likelihoods in the values' affine units: a warped target model would
    be scored in the wrong ones, so the transfer model it builds has ``output_warp="none"``."""
    import headstart._transfer_check as check
    from headstart._config import StudyConfig

    seen = []
    real = check.build_strategy

    def spy(space, config, **kw):
        seen.append(config.options.get("output_warp") if config.options else None)
        return real(space, config, **kw)

    monkeypatch.setattr(check, "build_strategy", spy)
    tasks = _forrester_tasks()
    space = hs.SearchSpace({"x": hs.Float(0.0, 1.0)})
    X = np.random.default_rng(1).random((10, 1))
    y = -np.exp(8 * X[:, 0])
    out = check.transfer_check(space, StudyConfig(method="abrac"), tasks, None, X, y)
    assert out is not None and seen[0] == "none"


@pytest.mark.parametrize("option", ["screening_points", "search_starts"])
@pytest.mark.parametrize("bad", [0, -1, 2.5, True, "1024"])
def test_search_settings_must_be_positive_integers_and_nothing_is_stored(tmp_path, option, bad):
    url = f"sqlite:///{tmp_path / 's.db'}"
    space = hs.SearchSpace({"x": hs.Float(0.0, 1.0)})
    with pytest.raises(hs.InvalidSettingError, match=option):
        hs.create_study("s", space, storage=url, method="abrac", **{option: bad})
    assert hs.storage.get_storage(url).list_studies() == []


@pytest.mark.parametrize("residual", [True, False])
@pytest.mark.parametrize("source_mean", [False, True])
def test_the_search_settings_apply_past_the_exact_block_through_fantasies_and_wrappers(
    monkeypatch, residual, source_mean
):
    """``screening_points`` and ``search_starts`` (issue 32, item 4) are set on every posterior
    the residual model gives past its exact block -- under the source-mean wrapper and on the
    fantasies of a batch too -- and the acquisition search screens and climbs that many points;
    up to the block, and without the residual model, the search is the engine's own."""
    import headstart._engine.optimize as optimize

    seen = []
    screen, pick = optimize.screening_points, optimize._pick_starts

    def counting_screen(prior, d, n, rng):
        seen.append(("screen", n))
        return screen(prior, d, n, rng)

    def counting_pick(values, n, rng):
        seen.append(("starts", n + 1))  # the search adds the best trial to the picked points
        return pick(values, n, rng)

    monkeypatch.setattr(optimize, "screening_points", counting_screen)
    monkeypatch.setattr(optimize, "_pick_starts", counting_pick)
    space = hs.SearchSpace({"x": hs.Float(0.0, 1.0)})
    study = hs.create_study(
        "s", space, storage=None, method="abrac", transfer_from=_forrester_tasks(),
        residual=residual, source_mean=source_mean, local_points=6, screening_points=64,
        search_starts=3, seed=0,
    )  # fmt: skip
    rng = np.random.default_rng(0)
    study.add_trials([({"x": float(x)}, float(np.sin(9 * x))) for x in rng.random(6)])
    study.ask()  # 6 trials: the exact block holds them all
    engine = [("screen", optimize.N_SOBOL), ("starts", optimize.N_STARTS)]
    assert seen == engine
    seen.clear()
    study.add_trials([({"x": float(x)}, float(np.sin(9 * x))) for x in rng.random(3)])
    study.ask()
    study.ask(2)  # the second of the batch is searched on a fantasized posterior
    assert seen == ([("screen", 64), ("starts", 3)] if residual else engine) * 3
