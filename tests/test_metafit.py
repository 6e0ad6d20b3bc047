"""Batched meta-task GPs (headstart._transfer.metafit on the GP core): padding, posteriors,
weighted sums, fit."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import scipy.stats
import torch

from headstart._gp.batched import BatchedGP
from headstart._gp.exact import Padded, neg_log_lik, neg_log_lik_and_grad, prior_and_grad
from headstart._gp.fit_settings import SE_COORDS
from headstart._gp.hyperprior import META_HYPERPRIOR
from headstart._gp.kernels import batched_kernel
from headstart._gp.params import GPParams
from headstart._transfer.metafit import fit_meta_gps
from headstart.sources import MetaTask

DT = torch.float64
IS_CAT = np.array([False, True, False])
LEVELS = np.array([0.0, 0.5, 1.0])  # encoded categories of column 1


def _points(rng, n):
    X = rng.random((n, 3))
    X[:, 1] = rng.choice(LEVELS, n)
    return X


def _tasks(rng, sizes):
    tasks = []
    for m, n in enumerate(sizes):
        X = _points(rng, n)
        y = 3.0 * np.sin(5 * X[:, 0] + m) + 2.0 * X[:, 1] + X[:, 2] ** 2 + 10.0 * m
        tasks.append((X, y + 0.05 * rng.standard_normal(n)))
    return tasks


def _params(rng, M, d=3):
    ell = rng.uniform(0.2, 1.2, (M, d))
    return GPParams(1.0 / ell**2, rng.uniform(0.5, 3.0, M), rng.uniform(1e-4, 1e-2, M))


def _brute_kernel(A, B, w, s, is_cat=IS_CAT):
    K = np.empty((len(A), len(B)))
    for i, a in enumerate(A):
        for k, b in enumerate(B):
            r2 = sum(
                w[j] * (float(a[j] != b[j]) if is_cat[j] else (a[j] - b[j]) ** 2)
                for j in range(len(a))
            )
            K[i, k] = s * math.exp(-0.5 * r2)
    return K


def _brute_posterior(X, y, w, s, noise, Xq, Zq, is_cat=IS_CAT):
    """R&W Eqs. 2.25-2.26 on standardized y, mapped back to raw units."""
    mu, sd = y.mean(), (y.std() if y.std() > 0 else 1.0)
    z = (y - mu) / sd
    K = _brute_kernel(X, X, w, s, is_cat) + noise * np.eye(len(X))
    kq, kz = _brute_kernel(Xq, X, w, s, is_cat), _brute_kernel(Zq, X, w, s, is_cat)
    mean = mu + sd * kq @ np.linalg.solve(K, z)
    cov = _brute_kernel(Xq, Zq, w, s, is_cat) - kq @ np.linalg.solve(K, kz.T)
    return mean, sd**2 * cov


def _brute_objective(X, y, ell, s, noise, is_cat=IS_CAT):
    """-(log N(y; 0, K) + log prior) with scipy densities."""
    K = _brute_kernel(X, X, 1.0 / ell**2, s, is_cat) + noise * np.eye(len(X))
    mll = scipy.stats.multivariate_normal(np.zeros(len(y)), K).logpdf(y)
    lp = (
        scipy.stats.gamma.logpdf(ell, 3.0, scale=1 / 6.0).sum()
        + scipy.stats.gamma.logpdf(s, 2.0, scale=1 / 0.15)
        + scipy.stats.lognorm.logpdf(noise, s=2.0, scale=math.exp(-8.0))
    )
    return -(mll + lp), mll


def _padded_batch(tasks):
    N = max(len(y) for _, y in tasks)
    X = torch.full((len(tasks), N, 3), 0.5, dtype=DT)
    y = torch.zeros(len(tasks), N, dtype=DT)
    mask = torch.zeros(len(tasks), N, dtype=DT)
    for m, (Xm, ym) in enumerate(tasks):
        X[m, : len(ym)], y[m, : len(ym)], mask[m, : len(ym)] = (
            torch.from_numpy(Xm),
            torch.from_numpy(ym),
            1.0,
        )
    return X, y, mask, mask.sum(-1)


# --- priors and the MAP objective -------------------------------------------------------------
def test_log_prior_matches_scipy_densities():
    ell = np.array([[0.05, 0.3, 2.0], [0.7, 1e-3, 50.0]])
    s, noise = np.array([0.2, 30.0]), np.array([1e-7, 3e-3])
    got = META_HYPERPRIOR.log_prob(*(torch.from_numpy(np.log(v)) for v in (ell, s, noise))).numpy()
    expected = (
        scipy.stats.gamma.logpdf(ell, 3.0, scale=1 / 6.0).sum(-1)
        + scipy.stats.gamma.logpdf(s, 2.0, scale=1 / 0.15)
        + scipy.stats.lognorm.logpdf(noise, s=2.0, scale=math.exp(-8.0))
    )
    np.testing.assert_allclose(got, expected, rtol=1e-12)


def test_padded_objective_equals_unpadded_computation_and_gradients_agree():
    rng = np.random.default_rng(0)
    tasks = [(X, (y - y.mean()) / max(y.std(), 1e-12)) for X, y in _tasks(rng, [1, 4, 9, 13])]
    X, y, mask, n = _padded_batch(tasks)
    ell = rng.uniform(0.1, 2.0, (4, 3))
    s, noise = rng.uniform(0.3, 5.0, 4), rng.uniform(1e-6, 1e-2, 4)
    raw = torch.from_numpy(np.column_stack([np.log(ell), np.log(s), np.log(noise)]))
    is_cat = torch.from_numpy(IS_CAT)
    raw_ag = raw.clone().requires_grad_(True)
    nll = neg_log_lik(raw_ag, Padded(X, y, mask, n), is_cat)
    mll = -nll
    objective = nll - META_HYPERPRIOR.log_prob(raw_ag[:, :3], raw_ag[:, 3], raw_ag[:, 4])
    (grad_ag,) = torch.autograd.grad(objective.sum(), raw_ag)

    def neg_log_posterior_and_grad(raw, X, y, mask, n, is_cat):
        value, grad = neg_log_lik_and_grad(raw, Padded(X, y, mask, n), is_cat)
        log_prior, prior_grad = prior_and_grad(raw, META_HYPERPRIOR, SE_COORDS)
        return value - log_prior, grad - prior_grad

    fast, grad = neg_log_posterior_and_grad(raw, X, y, mask, n, is_cat)
    for m, (Xm, zm) in enumerate(tasks):
        expected, expected_mll = _brute_objective(Xm, zm, ell[m], s[m], noise[m])
        assert objective[m].item() == pytest.approx(expected, rel=1e-10, abs=1e-10)
        assert mll[m].item() == pytest.approx(expected_mll, rel=1e-10, abs=1e-10)
    np.testing.assert_allclose(fast.numpy(), objective.detach().numpy(), rtol=1e-11)
    np.testing.assert_allclose(grad.numpy(), grad_ag.numpy(), rtol=1e-8, atol=1e-9)
    # a padding row is inert: more padding changes nothing
    X2, y2, mask2 = (torch.cat([t, t[:, :3] * 0 + 0.5], dim=1) for t in (X, y, mask))
    y2[:, -3:], mask2[:, -3:] = 0.0, 0.0
    fast2, grad2 = neg_log_posterior_and_grad(raw, X2, y2, mask2, n, is_cat)
    np.testing.assert_allclose(fast2.numpy(), fast.numpy(), rtol=1e-13)
    np.testing.assert_allclose(grad2.numpy(), grad.numpy(), rtol=1e-10, atol=1e-12)


def test_batched_fit_equals_fitting_each_task_alone():
    rng = np.random.default_rng(1)
    tasks = _tasks(rng, [5, 12, 30, 31, 80])  # two size buckets
    init = GPParams(
        np.full((5, 3), 1.0 / 0.4**2), np.full(5, 2.0), np.full(5, 1e-3)
    )  # same single start for every task
    together = fit_meta_gps(tasks, IS_CAT, n_restarts=0, init=init)
    for m, task in enumerate(tasks):
        alone = fit_meta_gps([task], IS_CAT, n_restarts=0, init=init.select([m]))
        np.testing.assert_allclose(
            together.log_marginal_likelihoods[m], alone.log_marginal_likelihoods[0], rtol=1e-9
        )
        np.testing.assert_allclose(
            together.params.lengthscales[m], alone.params.lengthscales[0], rtol=1e-6
        )


def test_chunked_fit_through_a_map_equals_the_batch_fit():
    tasks = _tasks(np.random.default_rng(2), [6, 9, 14, 20, 33])
    calls = []

    def counting_map(function, payloads):
        calls.append(len(payloads))
        return [function(p) for p in payloads]

    together = fit_meta_gps(tasks, IS_CAT, seed=3, n_restarts=2)
    chunked = fit_meta_gps(tasks, IS_CAT, seed=3, n_restarts=2, map=counting_map, chunk_size=2)
    assert calls == [3]  # 5 tasks in chunks of 2
    np.testing.assert_allclose(
        chunked.log_marginal_likelihoods, together.log_marginal_likelihoods, rtol=1e-6
    )
    np.testing.assert_allclose(chunked.params.lengthscales, together.params.lengthscales, rtol=1e-4)


def test_restarts_never_worsen_the_map_objective():
    rng = np.random.default_rng(2)
    tasks = _tasks(rng, [8, 15, 15])
    best = fit_meta_gps(tasks, IS_CAT, n_restarts=4, seed=3)
    first = fit_meta_gps(tasks, IS_CAT, n_restarts=0)

    def objective(gps):
        raw = torch.from_numpy(gps.params.to_raw(SE_COORDS))
        lp = META_HYPERPRIOR.log_prob(raw[:, :3], raw[:, 3], raw[:, 4]).numpy()
        return -(gps.log_marginal_likelihoods + lp)

    assert (objective(best) <= objective(first) + 1e-6).all()
    again = fit_meta_gps(tasks, IS_CAT, n_restarts=4, seed=3)
    np.testing.assert_array_equal(again.params.noise, best.params.noise)


def test_map_recovers_sensible_lengthscales():
    rng = np.random.default_rng(3)
    X = rng.random((40, 1))
    tasks = [(X, np.sin(3 * X[:, 0])), (X, np.sin(25 * X[:, 0]))]
    ell = fit_meta_gps(tasks, np.array([False])).params.lengthscales[:, 0]
    assert 0.3 < ell[0] < 3.0  # smooth
    assert 0.05 < ell[1] < 0.2  # wiggly: period 0.25
    p = fit_meta_gps([(X, X[:, 0])], np.array([False])).params  # noise-free: noise at its floor
    assert 1e-8 * (1 - 1e-9) <= p.noise[0] <= 1e-2 and 1e-4 <= p.outputscale[0] <= 1e2


def test_constant_and_single_point_tasks_do_not_crash():
    rng = np.random.default_rng(4)
    X = _points(rng, 6)
    tasks = [(X, np.full(6, 7.0)), (X[:1], np.array([-2.0])), *_tasks(rng, [9])]
    gps = fit_meta_gps(tasks, IS_CAT)
    np.testing.assert_array_equal(gps.y_std[:2], [1.0, 1.0])
    Xq = _points(rng, 5)
    mean, var = gps.mean(Xq), gps.moments(Xq)[1]
    assert np.isfinite(mean).all() and np.isfinite(var).all() and (var >= 0).all()
    np.testing.assert_allclose(mean[0], 7.0, atol=1e-12)  # zero-mean GP of standardized zeros
    np.testing.assert_allclose(mean[1], -2.0, atol=1e-12)
    assert gps.n_train.tolist() == [6, 1, 9]


def test_meta_tasks_are_read_in_the_maximize_convention():
    rng = np.random.default_rng(5)
    ((X, y),) = _tasks(rng, [10])
    from_meta = fit_meta_gps([MetaTask("old", X, y, direction="minimize")], IS_CAT)
    from_pair = fit_meta_gps([(X, -y)], IS_CAT)
    assert from_meta.names == ["old"] and from_pair.names == ["task0"]
    np.testing.assert_allclose(from_meta.mean(X), from_pair.mean(X), atol=1e-12)
    with pytest.raises(ValueError, match="no observations"):
        fit_meta_gps([(np.zeros((0, 3)), np.zeros(0))], IS_CAT)


# --- posteriors -------------------------------------------------------------------------------
def _fixed_gps(seed=6, sizes=(3, 8, 1, 12)):
    rng = np.random.default_rng(seed)
    tasks = _tasks(rng, sizes)
    params = _params(rng, len(sizes))
    return tasks, params, BatchedGP.from_tasks(tasks, IS_CAT, params), rng


def test_mean_cov_var_match_brute_force_posterior():
    tasks, params, gps, rng = _fixed_gps()
    Xq, Zq = _points(rng, 6), _points(rng, 4)
    Xq[0] = tasks[1][0][2]  # a training point
    mean, cov, var = gps.mean(Xq), gps.cov(Xq, Zq), gps.moments(Xq)[1]
    for m, (X, y) in enumerate(tasks):
        w, s, noise = params.inv_sq_lengthscales[m], params.outputscale[m], params.noise[m]
        exp_mean, exp_cov = _brute_posterior(X, y, w, s, noise, Xq, Zq)
        _, exp_var = _brute_posterior(X, y, w, s, noise, Xq, Xq)
        np.testing.assert_allclose(mean[m], exp_mean, atol=1e-8)
        np.testing.assert_allclose(cov[m], exp_cov, atol=1e-8)
        np.testing.assert_allclose(var[m], np.maximum(np.diagonal(exp_var), 0.0), atol=1e-8)
    sub = gps.select([3, 1])
    np.testing.assert_allclose(sub.mean(Xq), mean[[3, 1]], atol=1e-12)
    np.testing.assert_allclose(sub.cov(Xq, Zq), cov[[3, 1]], atol=1e-12)


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_posterior_matches_botorch_single_task_gp():
    from botorch.models import SingleTaskGP
    from gpytorch.kernels import RBFKernel, ScaleKernel
    from gpytorch.means import ZeroMean

    rng = np.random.default_rng(7)
    is_cat = np.zeros(2, dtype=bool)
    tasks = [(rng.random((n, 2)), rng.standard_normal(n) * 4 + 3) for n in (5, 11)]
    ell = rng.uniform(0.2, 1.0, (2, 2))
    params = GPParams(1.0 / ell**2, np.array([1.7, 0.6]), np.array([1e-3, 3e-4]))
    gps = BatchedGP.from_tasks(tasks, is_cat, params)
    Xq = rng.random((6, 2))
    mean, cov = gps.mean(Xq), gps.cov(Xq, Xq)
    for m, (X, y) in enumerate(tasks):
        z = (y - y.mean()) / y.std()
        model = SingleTaskGP(
            torch.from_numpy(X),
            torch.from_numpy(z).unsqueeze(-1),
            train_Yvar=torch.full((len(z), 1), params.noise[m], dtype=DT),
            covar_module=ScaleKernel(RBFKernel(ard_num_dims=2)),
            mean_module=ZeroMean(),
            outcome_transform=None,
        )
        model.covar_module.base_kernel.lengthscale = torch.from_numpy(ell[m])
        model.covar_module.outputscale = params.outputscale[m]
        model.eval()
        with torch.no_grad():
            post = model.posterior(torch.from_numpy(Xq))
        bt_mean = y.mean() + y.std() * post.mean.squeeze(-1).numpy()
        bt_cov = y.var() * post.mvn.covariance_matrix.numpy()
        np.testing.assert_allclose(mean[m], bt_mean, atol=1e-8)
        np.testing.assert_allclose(cov[m], bt_cov, atol=1e-8)


def test_batched_se_kernel_matches_brute_force():
    rng = np.random.default_rng(8)
    A, B = _points(rng, 4), _points(rng, 5)
    params = _params(rng, 2)
    K = batched_kernel(
        torch.from_numpy(A),
        torch.from_numpy(B),
        torch.from_numpy(IS_CAT),
        torch.from_numpy(params.inv_sq_lengthscales),
        torch.from_numpy(params.outputscale),
    ).numpy()
    for m in range(2):
        expected = _brute_kernel(A, B, params.inv_sq_lengthscales[m], params.outputscale[m])
        np.testing.assert_allclose(K[m], expected, rtol=1e-12)


def test_json_round_trip_gives_identical_predictions():
    rng = np.random.default_rng(9)
    tasks = _tasks(rng, [4, 9])
    gps = fit_meta_gps(tasks, IS_CAT, names=["a", "b"], n_restarts=1)
    data = json.loads(json.dumps(gps.to_json()))
    back = BatchedGP.from_json(data, tasks, IS_CAT)
    Xq = _points(rng, 5)
    assert back.names == ["a", "b"]
    np.testing.assert_array_equal(back.mean(Xq), gps.mean(Xq))
    np.testing.assert_array_equal(back.cov(Xq, Xq[:2]), gps.cov(Xq, Xq[:2]))
    np.testing.assert_array_equal(back.log_marginal_likelihoods, gps.log_marginal_likelihoods)


# --- weighted sums ----------------------------------------------------------------------------
@pytest.mark.parametrize("p", [4, 0])
def test_weighted_sums_and_gradients(p):
    tasks, _, gps, rng = _fixed_gps(seed=10, sizes=(3, 8, 1, 12, 6))
    a, b = rng.uniform(-1, 2, 5), rng.uniform(0, 2, 5)
    a[2] = b[2] = 0.0  # skipped
    b[4] = 0.0  # mean only
    Z = _points(rng, p)
    wm = gps.weighted(a, b, Z)
    assert wm.n_active == 4
    X = _points(rng, 7)
    X[0] = tasks[3][0][0]  # at a training point (variance near 0)
    mean, var, cross, dmean, dvar, dcross = wm(X, grad=True)
    np.testing.assert_allclose(mean, a @ gps.mean(X), atol=1e-10)
    np.testing.assert_allclose(var, b @ gps.moments(X)[1], atol=1e-10)
    np.testing.assert_allclose(cross, np.einsum("m,mxz->xz", b, gps.cov(X, Z)), atol=1e-10)
    assert cross.shape == (7, p) and dcross.shape == (7, p, 3)
    no_grad = wm(X)
    for got, expected in zip(no_grad, (mean, var, cross), strict=True):
        np.testing.assert_allclose(got, expected, atol=1e-12)
    h = 1e-6
    for j in (0, 2):
        e = np.zeros(3)
        e[j] = h
        (mp, vp, cp), (mm, vm, cm) = wm(X + e), wm(X - e)
        np.testing.assert_allclose(dmean[:, j], (mp - mm) / (2 * h), rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(dvar[:, j], (vp - vm) / (2 * h), rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(dcross[..., j], (cp - cm) / (2 * h), rtol=1e-5, atol=1e-6)
    assert (dmean[:, 1] == 0).all() and (dvar[:, 1] == 0).all() and (dcross[..., 1] == 0).all()
    # contracted cross gradient: sum_z v[x, q, z] dcross[x, z, :] with v built from each chunk
    u = rng.standard_normal(p)

    def weights(Xc, cross_c):
        return np.stack([np.broadcast_to(u, cross_c.shape), cross_c + Xc[:, :1]], axis=1)

    *same, dcross_v = wm(X, grad=True, contract=weights)
    for got, expected in zip(same, (mean, var, cross, dmean, dvar), strict=True):
        np.testing.assert_allclose(got, expected, atol=1e-12)
    v = weights(X, cross)
    np.testing.assert_allclose(dcross_v, np.einsum("xzj,xqz->xqj", dcross, v), atol=1e-10)
    assert dcross_v.shape == (7, 2, 3)


def test_weighted_chunking_and_empty_weights(monkeypatch):
    from headstart._gp import batched

    _, _, gps, rng = _fixed_gps(seed=11)
    Z, X = _points(rng, 3), _points(rng, 9)
    a, b = rng.random(4), rng.random(4)
    full = gps.weighted(a, b, Z)(X, grad=True)
    monkeypatch.setattr(batched, "_CHUNK_ELEMENTS", 1)  # one row per chunk
    for got, expected in zip(gps.weighted(a, b, Z)(X, grad=True), full, strict=True):
        np.testing.assert_allclose(got, expected, atol=1e-12)
    dcross_v = gps.weighted(a, b, Z)(X, grad=True, contract=lambda Xc, cr: cr[:, None, :])[5]
    np.testing.assert_allclose(dcross_v[:, 0], np.einsum("xzj,xz->xj", full[5], full[2]))
    mean, var, cross, dmean, dvar, dcross = gps.weighted(np.zeros(4), np.zeros(4), Z)(X, grad=True)
    for value in (mean, var, cross, dmean, dvar, dcross):
        assert (value == 0).all()
    assert dcross.shape == (9, 3, 3)
    with pytest.raises(ValueError):
        gps.weighted(a, -b, Z)
