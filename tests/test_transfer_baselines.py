"""Transfer baselines RGPE, StackGP and the multi-task GP: interface, numerics, behaviour, BO loop."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from headstart._engine.acquisition import Criterion
from headstart._engine.numerics import standardize
from headstart._engine.optimize import MixedSpace, optimize_criterion
from headstart._engine.threads import limit_threads
from headstart._gp.batched import BatchedGP
from headstart._transfer._common import fit_se_gp
from headstart._transfer.mtgp import MultiTaskGPSurrogate, subsample
from headstart._transfer.rgpe import RGPE, loo_posteriors, rank_weights, ranking_loss
from headstart._transfer.stackgp import StackGP, stack_coefficients
from headstart.exceptions import HeadstartWarning
from headstart.sources import MetaTask

D = 2
METHODS = ("rgpe", "stackgp", "mtgp")
IS_CAT = np.zeros(D, dtype=bool)


@pytest.fixture(autouse=True)
def _one_thread():
    with limit_threads():
        yield


def target_fn(X, shift=0.0, scale=1.0):
    """A smooth 2-d function with its maximum near (0.3 + shift, 0.6)."""
    return scale * (
        -4.0 * ((X[:, 0] - 0.3 - shift) ** 2 + (X[:, 1] - 0.6) ** 2) + 0.3 * np.sin(5 * X[:, 0])
    )


def make(method, tasks, **kwargs):
    cls = {"rgpe": RGPE, "stackgp": StackGP, "mtgp": MultiTaskGPSurrogate}[method]
    return cls(tasks, IS_CAT, **kwargs)


def related_tasks(rng, n=20):
    """Three sources: shifted, rescaled (and one minimized) versions of the target."""
    tasks = []
    for m, (shift, scale) in enumerate([(0.05, 2.0), (-0.05, 0.5), (0.1, 1.0)]):
        X = rng.random((n, D))
        y = target_fn(X, shift, scale) + 3.0 * m
        direction = "minimize" if m == 1 else "maximize"
        tasks.append(MetaTask(f"src{m}", X, -y if direction == "minimize" else y, direction))
    return tasks


@pytest.fixture(scope="module")
def fitted():
    """One surrogate per method on the related sources (the meta part is fitted once)."""
    rng = np.random.default_rng(0)
    tasks = related_tasks(rng)
    with limit_threads():
        return {method: make(method, tasks) for method in METHODS}


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("n", [0, 1, 5])
def test_shapes_and_units(fitted, method, n):
    rng = np.random.default_rng(n)
    X_t = rng.random((n, D))
    y_t = target_fn(X_t) * 10.0 + 7.0
    posterior, y_model = fitted[method].condition(X_t, y_t, rng)
    assert y_model.shape == (n,) and np.isfinite(y_model).all()
    if n >= 2:  # an increasing affine map of y_t
        slope = np.polyfit(y_t, y_model, 1)[0]
        assert slope > 0
        np.testing.assert_allclose(y_model, np.polyval(np.polyfit(y_t, y_model, 1), y_t), atol=1e-9)
    X = rng.random((7, D))
    mean, var = posterior.posterior(X)
    assert mean.shape == (7,) and var.shape == (7,) and (var > 0).all()
    m2, v2, dm, dv = posterior.posterior_and_grad(X)
    assert dm.shape == (7, D) and dv.shape == (7, D)
    np.testing.assert_allclose(m2, mean, rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(v2, var, rtol=1e-8, atol=1e-12)
    jm, cov = posterior.joint_posterior(X)
    assert jm.shape == (7,) and cov.shape == (7, 7)
    assert isinstance(posterior.outputscale, float) and posterior.outputscale > 0
    assert np.asarray(posterior.lengthscales).shape == (D,)
    report = fitted[method].report()
    assert {"src0", "src1", "src2"} <= set(report)
    assert all(np.isfinite(v) for v in report.values())


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("n", [0, 5])
def test_joint_posterior_matches_marginals(fitted, method, n):
    rng = np.random.default_rng(10 + n)
    X_t = rng.random((n, D))
    posterior, _ = fitted[method].condition(X_t, target_fn(X_t), rng)
    X = np.vstack([rng.random((6, D)), X_t[:2]])
    mean, var = posterior.posterior(X)
    jm, cov = posterior.joint_posterior(X)
    np.testing.assert_allclose(jm, mean, rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(np.diagonal(cov), var, rtol=1e-6, atol=1e-9)
    np.testing.assert_allclose(cov, cov.T, atol=1e-10)
    assert np.linalg.eigvalsh(cov).min() > -1e-8 * max(1.0, np.abs(cov).max())


@pytest.mark.parametrize("method", METHODS)
def test_gradients_match_finite_differences(fitted, method):
    rng = np.random.default_rng(3)
    X_t = rng.random((5, D))
    posterior, _ = fitted[method].condition(X_t, target_fn(X_t), rng)
    X = 0.1 + 0.8 * rng.random((6, D))
    _, _, dmean, dvar = posterior.posterior_and_grad(X)
    h = 1e-5
    fd_mean, fd_var = np.empty_like(dmean), np.empty_like(dvar)
    for j in range(D):
        step = np.zeros(D)
        step[j] = h
        (mp, vp), (mm, vm) = posterior.posterior(X + step), posterior.posterior(X - step)
        fd_mean[:, j], fd_var[:, j] = (mp - mm) / (2 * h), (vp - vm) / (2 * h)
    np.testing.assert_allclose(dmean, fd_mean, rtol=1e-4, atol=1e-4 * np.abs(fd_mean).max())
    np.testing.assert_allclose(dvar, fd_var, rtol=1e-3, atol=1e-3 * np.abs(fd_var).max())


@pytest.mark.parametrize("method", METHODS)
def test_identical_source_gives_accurate_predictions(method):
    rng = np.random.default_rng(4)
    X0, X1, X2 = rng.random((3, 30, D))
    tasks = [
        (X0, target_fn(X0, shift=0.15)),  # related
        (X1, np.cos(4.0 * X1[:, 0]) * X1[:, 1]),  # unrelated, smooth
        (X2, target_fn(X2)),  # identical (last: StackGP's top meta level)
    ]
    model = make(method, tasks)
    X_t = rng.random((6, D))
    posterior, y_model = model.condition(X_t, target_fn(X_t), rng)
    X = rng.random((200, D))
    z = np.polyval(np.polyfit(target_fn(X_t), y_model, 1), target_fn(X))  # truth in model units
    mean, _ = posterior.posterior(X)
    report = model.report()
    if method == "rgpe":
        # Each member predicts in its own task's standardized units, so the ensemble is exact
        # only up to an affine map; what RGPE gets right is the ranking.
        assert report["task2"] > 0.5, report
        assert np.corrcoef(np.argsort(np.argsort(mean)), np.argsort(np.argsort(z)))[0, 1] > 0.98
        return
    rmse = np.sqrt(np.mean((mean - z) ** 2))
    assert rmse < 0.1 * z.std(), rmse
    np.testing.assert_allclose(posterior.posterior(X_t)[0], y_model, atol=0.05 * y_model.std())
    if method == "mtgp":
        assert report["task2"] > max(report["task0"], report["task1"]) and report["task2"] > 0.9


def test_rgpe_weights_go_to_the_target_with_irrelevant_sources():
    rng = np.random.default_rng(5)
    tasks = [(rng.random((25, D)), rng.standard_normal(25)) for _ in range(3)]
    model = RGPE(tasks, IS_CAT)
    X_t = rng.random((10, D))
    posterior, y_model = model.condition(X_t, target_fn(X_t), rng)
    report = model.report()
    assert report["target"] > 0.8, report
    np.testing.assert_allclose(posterior.posterior(X_t)[0], y_model, atol=0.1)
    assert sum(report.values()) == pytest.approx(1.0)


def test_rgpe_few_points_use_uniform_weights(fitted):
    model = fitted["rgpe"]
    rng = np.random.default_rng(6)
    model.condition(np.zeros((0, D)), np.zeros(0), rng)
    assert model.report() == pytest.approx(
        {"src0": 1 / 3, "src1": 1 / 3, "src2": 1 / 3, "target": 0.0}
    )
    model.condition(rng.random((1, D)), np.ones(1), rng)
    assert model.report() == pytest.approx(
        {"src0": 0.25, "src1": 0.25, "src2": 0.25, "target": 0.25}
    )


def test_ranking_loss_and_rank_weights():
    y = np.array([0.0, 1.0, 2.0, 3.0])
    F = np.array([[y, y[::-1], np.array([0.0, 2.0, 1.0, 3.0])]])
    assert ranking_loss(F, y).tolist() == [[0, 12, 2]]
    # dilution: a base model whose median loss exceeds the target's 95th percentile is dropped
    w = rank_weights(np.array([[9, 9, 9, 0], [0, 0, 1, 5]]), np.array([1, 1, 1, 1]))
    np.testing.assert_allclose(w, [0.0, 0.625, 0.375])  # sample 3 is a tie, split evenly


def test_rgpe_loo_posteriors_match_refits():
    rng = np.random.default_rng(7)
    X = rng.random((6, D))
    z, _, _ = standardize(target_fn(X))
    params = fit_se_gp(X, z, IS_CAT, rng=rng)
    mean, cov = loo_posteriors(X, z, IS_CAT, params)
    for j in (0, 3):
        keep = np.delete(np.arange(6), j)
        gp = BatchedGP.build([X[keep]], [z[keep]], IS_CAT, params)
        np.testing.assert_allclose(mean[j], gp.moments(X)[0][0], atol=1e-10)
        np.testing.assert_allclose(cov[j], gp.cov(X, X)[0], atol=1e-10)


def test_stack_coefficients():
    c = stack_coefficients([10, 10, 20])
    np.testing.assert_allclose(c, [1 / 6, 1 / 6, 2 / 3])
    np.testing.assert_allclose(stack_coefficients([10, 30, 0]), [0.25, 0.75, 0.0])
    assert stack_coefficients([5, 7, 11, 3]).sum() == pytest.approx(1.0)


def test_stackgp_without_target_data_is_the_meta_stack(fitted):
    model = fitted["stackgp"]
    rng = np.random.default_rng(8)
    posterior, _ = model.condition(np.zeros((0, D)), np.zeros(0), rng)
    X = rng.random((5, D))
    mu, var = model.levels.moments(X)
    c = stack_coefficients(model.n_meta)
    np.testing.assert_allclose(posterior.posterior(X)[0], mu.sum(0))
    np.testing.assert_allclose(posterior.posterior(X)[1], np.exp(c @ np.log(var)))
    assert model.report()["target"] == 0.0


@pytest.mark.parametrize("method", METHODS)
def test_deterministic_pins_the_target_noise(method):
    rng = np.random.default_rng(9)
    model = make(method, related_tasks(rng, n=12), deterministic=True)
    X_t = rng.random((5, D))
    model.condition(X_t, target_fn(X_t), rng)
    noise = model.noise_variances[0] if method == "mtgp" else model._target_params.noise[0]
    assert noise == pytest.approx(1e-6, rel=1e-9)
    if method == "mtgp":  # the meta noise stays free
        assert not np.allclose(model.noise_variances[1:], 1e-6)


def test_mtgp_posterior_matches_botorch(fitted):
    model = fitted["mtgp"]
    rng = np.random.default_rng(11)
    X_t = rng.random((4, D))
    posterior, y_model = model.condition(X_t, target_fn(X_t), rng)
    X_full = np.vstack([np.column_stack([X_t, np.zeros(4)]), model._meta_X])
    z = np.concatenate([y_model, model._meta_z])
    gp = model._model(torch.from_numpy(X_full), torch.from_numpy(z)[:, None])  # fitted state
    gp.eval()
    X = rng.random((5, D))
    with torch.no_grad():
        post = gp.posterior(torch.from_numpy(X))
    mean, var = posterior.posterior(X)
    np.testing.assert_allclose(mean, post.mean.numpy().ravel(), atol=1e-8)
    np.testing.assert_allclose(var, post.variance.numpy().ravel(), atol=1e-8)


def test_mtgp_subsamples_large_meta_data():
    rng = np.random.default_rng(12)
    tasks = [(rng.random((30, D)), rng.random(30)) for _ in range(3)]
    with pytest.warns(HeadstartWarning, match="keeps 39 of the 90"):
        model = MultiTaskGPSurrogate(tasks, IS_CAT, max_meta_points=40)
    assert model.meta_points_used == {"task0": (13, 30), "task1": (13, 30), "task2": (13, 30)}
    Xs, _, kept = subsample([t[0] for t in tasks], [t[1] for t in tasks], 40, seed=0)
    Xs2, _, _ = subsample([t[0] for t in tasks], [t[1] for t in tasks], 40, seed=0)
    assert kept == [13, 13, 13]
    assert all(np.array_equal(a, b) for a, b in zip(Xs, Xs2, strict=True))
    model.condition(np.zeros((0, D)), np.zeros(0), rng)  # prior of the test task works


@pytest.mark.parametrize("method", METHODS)
def test_bo_smoke(fitted, method):
    """Ten UCB steps from scratch with the engine's acquisition search."""
    model = fitted[method]
    rng = np.random.default_rng(13)
    space = MixedSpace((None, None), IS_CAT)
    X_t, y_t = np.zeros((0, D)), np.zeros(0)
    for _ in range(10):
        posterior, y_model = model.condition(X_t, y_t, rng)
        best_f = float(y_model.max()) if len(y_model) else 0.0
        criterion = Criterion(posterior, "ucb", best_f)
        x = optimize_criterion(criterion, space, X_t, y_model, rng, 0.2 * np.ones(D))
        assert x.shape == (D,) and (x >= 0.0).all() and (x <= 1.0).all()
        X_t = np.vstack([X_t, x])
        y_t = np.append(y_t, target_fn(x[None, :]))
    optimum = target_fn(np.array([[0.3, 0.6]]))[0]
    assert optimum - y_t.max() < 0.1  # the sources point at the optimum
