"""The GP core (headstart._gp): hyperpriors, the batched exact GP's likelihood and gradient, the one
MAP fit, and the batched posterior, against autograd, closed forms and brute force."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import scipy.stats
import torch

from headstart._gp.batched import BatchedGP
from headstart._gp.exact import (
    GPForm,
    Padded,
    fit_exact_gp,
    neg_log_lik,
    neg_log_lik_and_grad,
    pad,
    prior_and_grad,
)
from headstart._gp.fit import minimize
from headstart._gp.fit_settings import MATERN_COORDS, SE_COORDS
from headstart._gp.hyperprior import (
    DEFAULT_HYPERPRIOR,
    DIM_SCALED_HYPERPRIOR,
    FLAT_HYPERPRIOR,
    META_HYPERPRIOR,
    SCAML_TEST_HYPERPRIOR,
    HyperPrior,
    gamma_hyperprior,
)
from headstart._gp.kernels import MATERN52, SE
from headstart._gp.model import ExactGP
from headstart._gp.params import GPParams, unpack_raw
from headstart.exceptions import ModelFittingError

DT = torch.float64
IS_CAT = np.array([False, False, True])
PRIORS = {
    "optuna": DEFAULT_HYPERPRIOR,
    "lognormal": DIM_SCALED_HYPERPRIOR,
    "flat": FLAT_HYPERPRIOR,
    "meta": META_HYPERPRIOR,
    "scaml-test": SCAML_TEST_HYPERPRIOR,
    "gamma": gamma_hyperprior(((1.5, 2.0, 0.7), (3.0, 1.0, 2.0)), (2.0, 1.0), (1.1, 30.0)),
}


def _data(rng, sizes, d=3):
    Xs, ys = [], []
    for n in sizes:
        X = rng.random((n, d))
        X[:, 2] = rng.choice([0.25, 0.75], n)  # a categorical column
        Xs.append(X)
        ys.append(rng.standard_normal(n))
    return Xs, ys


def _map_objective(raw, data, prior, kernel, coords):
    """The autograd reference: -log p(y | theta) - log p(theta)."""
    nll = neg_log_lik(raw, data, torch.from_numpy(IS_CAT), GPForm(kernel, coords))
    _, log_ell, log_s, noise, _ = unpack_raw(raw, coords)
    return nll - prior.log_prob(log_ell, log_s, torch.log(noise))


# --- hyperpriors --------------------------------------------------------------------------------
def test_hyperprior_densities_match_scipy():
    ell = np.array([[0.05, 0.3, 2.0], [0.7, 1e-3, 50.0]])
    s, noise = np.array([0.2, 30.0]), np.array([1e-7, 3e-3])
    got = META_HYPERPRIOR.log_prob(*(torch.from_numpy(np.log(v)) for v in (ell, s, noise)))
    expected = (
        scipy.stats.gamma.logpdf(ell, 3.0, scale=1 / 6.0).sum(-1)
        + scipy.stats.gamma.logpdf(s, 2.0, scale=1 / 0.15)
        + scipy.stats.lognorm.logpdf(noise, s=2.0, scale=math.exp(-8.0))
    )
    np.testing.assert_allclose(got.numpy(), expected, rtol=1e-12)
    # Optuna's heuristic, written on w = 1 / ell^2, s and sigma^2 (constants dropped)
    w = 1.0 / ell**2
    optuna = DEFAULT_HYPERPRIOR.log_prob(*(torch.from_numpy(np.log(v)) for v in (ell, s, noise)))
    expected = -(0.1 / w + 0.1 * w).sum(-1) + np.log(s) - s + 0.1 * np.log(noise) - 30 * noise
    np.testing.assert_allclose(optuna.numpy(), expected, rtol=1e-12)
    # MPHD's Gammas carry the Jacobian: a log x - b x
    prior = PRIORS["gamma"]
    got = prior.log_prob(*(torch.from_numpy(np.log(v)) for v in (ell, s, noise)))
    a, b = np.array([1.5, 2.0, 0.7]), np.array([3.0, 1.0, 2.0])
    expected = (a * np.log(ell) - b * ell).sum(-1) + 2 * np.log(s) - s + 1.1 * np.log(noise)
    np.testing.assert_allclose(got.numpy(), expected - 30 * noise, rtol=1e-12)


@pytest.mark.parametrize("name", sorted(PRIORS))
def test_hyperprior_gradients_equal_autograd_and_json_round_trips(name):
    prior = PRIORS[name]
    rng = np.random.default_rng(0)
    for coords in (SE_COORDS, MATERN_COORDS):
        raw = torch.from_numpy(rng.normal(-0.5, 1.0, (4, 5))).requires_grad_(True)
        value, grad = prior_and_grad(raw.detach(), prior, coords)
        _, log_ell, log_s, noise, _ = unpack_raw(raw, coords)
        reference = prior.log_prob(log_ell, log_s, torch.log(noise))
        (auto,) = torch.autograd.grad(reference.sum(), raw)
        np.testing.assert_allclose(value.numpy(), reference.detach().numpy(), rtol=1e-12)
        np.testing.assert_allclose(grad.numpy(), auto.numpy(), rtol=1e-10, atol=1e-12)
    again = HyperPrior.from_json(json.loads(json.dumps(prior.to_json())))
    assert again == prior
    with pytest.raises(ValueError):
        HyperPrior.from_json({"lengthscale": {"kind": "wishart"}, "outputscale": {}, "noise": {}})


def test_hyperprior_draws_follow_the_prior():
    rng = np.random.default_rng(1)
    draws = META_HYPERPRIOR.sample_log(rng, (20000,), 2)
    assert draws.shape == (20000, 4)
    assert np.mean(np.exp(draws[:, 0])) == pytest.approx(3.0 / 6.0, rel=0.02)  # Gamma(3, 6) mean
    assert np.mean(draws[:, 3]) == pytest.approx(-8.0, abs=0.05)  # LogNormal(-8, 2)
    with pytest.raises(ValueError, match="flat"):
        FLAT_HYPERPRIOR.sample_log(rng, (2,), 2)
    # the initial start at the means for MPHD's Gammas, clipped to the usual ranges
    ell, s, noise = PRIORS["gamma"].initial_values(3)
    np.testing.assert_allclose(ell, [0.5, 2.0, 0.35])
    assert (s, noise) == (2.0, pytest.approx(1.1 / 30.0))


# --- the batched exact GP: likelihood and gradient -----------------------------------------------
@pytest.mark.parametrize("kernel", [SE, MATERN52], ids=["se", "matern"])
@pytest.mark.parametrize("coords", [SE_COORDS, MATERN_COORDS], ids=["log-ell", "log-w"])
def test_closed_form_gradient_equals_autograd_padded_and_extreme(kernel, coords):
    rng = np.random.default_rng(2)
    Xs, ys = _data(rng, [1, 7, 60])
    data = pad(Xs, ys)
    is_cat = torch.from_numpy(IS_CAT)
    for raw_np in (rng.normal(-0.5, 0.7, (3, 5)), np.tile([4.0, -4.0, 0.0, 3.0, -12.0], (3, 1))):
        raw = torch.from_numpy(raw_np).requires_grad_(True)
        reference = neg_log_lik(raw, data, is_cat, GPForm(kernel, coords))
        (auto,) = torch.autograd.grad(reference.sum(), raw)
        value, grad = neg_log_lik_and_grad(raw.detach(), data, is_cat, GPForm(kernel, coords))
        # the two build r^2 in different orders; at n = 60 with a tiny noise K's condition number
        # is ~1e7, hence 1e-8 on the values (1e-10 at moderate settings, the other rows)
        np.testing.assert_allclose(value.numpy(), reference.detach().numpy(), rtol=1e-8)
        np.testing.assert_allclose(value.numpy()[:2], reference.detach().numpy()[:2], rtol=1e-10)
        np.testing.assert_allclose(grad.numpy(), auto.numpy(), rtol=1e-7, atol=1e-8)


@pytest.mark.parametrize("kernel", [SE, MATERN52], ids=["se", "matern"])
def test_likelihood_equals_scipy_and_padding_is_inert(kernel):
    rng = np.random.default_rng(3)
    Xs, ys = _data(rng, [4, 9])
    data = pad(Xs, ys)
    raw = torch.from_numpy(rng.normal(-0.3, 0.5, (2, 5)))
    raw[:, -1] = -4.0
    value, _ = neg_log_lik_and_grad(raw, data, torch.from_numpy(IS_CAT), GPForm(kernel, SE_COORDS))
    params = GPParams.from_raw(raw.numpy(), SE_COORDS)
    for m, (Xm, ym) in enumerate(zip(Xs, ys, strict=True)):
        diff = Xm[:, None, :] - Xm[None, :, :]
        sq = np.where(IS_CAT, diff != 0, diff**2) @ params.inv_sq_lengthscales[m]
        f = np.exp(-0.5 * sq) if kernel is SE else MATERN_F(sq)
        K = params.outputscale[m] * f + params.noise[m] * np.eye(len(ym))
        expected = -scipy.stats.multivariate_normal(np.zeros(len(ym)), K).logpdf(ym)
        assert float(value[m]) == pytest.approx(expected, rel=1e-10)
    # more padding changes nothing
    more = pad([*Xs, np.zeros((15, 3))], [*ys, np.zeros(15)])
    more = Padded(more.X[:2], more.y[:2], more.mask[:2], data.n)
    form = GPForm(kernel, SE_COORDS)
    value2, grad2 = neg_log_lik_and_grad(raw, more, torch.from_numpy(IS_CAT), form)
    _, grad = neg_log_lik_and_grad(raw, data, torch.from_numpy(IS_CAT), form)
    np.testing.assert_allclose(value2.numpy(), value.numpy(), rtol=1e-13)
    np.testing.assert_allclose(grad2.numpy(), grad.numpy(), rtol=1e-10, atol=1e-12)


def MATERN_F(sq):
    r = np.sqrt(5 * sq)
    return (1 + r + 5 / 3 * sq) * np.exp(-r)


# --- the one fit ---------------------------------------------------------------------------------
@pytest.mark.parametrize("kernel", [SE, MATERN52], ids=["se", "matern"])
def test_fit_reaches_the_optimum_of_scipy_on_the_autograd_objective(kernel):
    rng = np.random.default_rng(4)
    Xs, ys = _data(rng, [25])
    data = pad(Xs, ys)
    prior = PRIORS["meta"]
    start = prior.initial_raw(3)
    form = GPForm(kernel, SE_COORDS)
    raw, objective = fit_exact_gp(Xs, ys, IS_CAT, start[None, None], form=form, prior=prior)

    def reference(r):
        t = torch.from_numpy(r)[None].requires_grad_(True)
        value = _map_objective(t, data, prior, kernel, SE_COORDS)
        (g,) = torch.autograd.grad(value.sum(), t)
        return float(value.detach()[0]), g[0].numpy()

    res = scipy.optimize.minimize(
        reference, start, jac=True, method="L-BFGS-B", bounds=SE_COORDS.bounds(3)
    )
    assert objective[0] == pytest.approx(res.fun, abs=1e-4)
    assert reference(raw[0])[0] == pytest.approx(objective[0], rel=1e-10)


@pytest.mark.parametrize("sizes", [[12, 20, 9], [12, 9, 10]], ids=["two-buckets", "one-bucket"])
def test_sets_sharing_a_gp_sum_their_likelihoods_and_runs_stay_independent(sizes):
    """MPHD's case: a GP owns several data sets; each (GP, start) is its own run."""
    rng = np.random.default_rng(5)
    Xs, ys = _data(rng, sizes)
    starts = np.stack([np.tile(FLAT_HYPERPRIOR.initial_raw(3), (2, 1))] * 2)
    starts[:, 1, :3] = 0.5
    shared, objective = fit_exact_gp(
        Xs, ys, IS_CAT, starts, prior=FLAT_HYPERPRIOR, owner=np.array([0, 0, 1])
    )
    alone, _ = fit_exact_gp(Xs[2:], ys[2:], IS_CAT, starts[1:], prior=FLAT_HYPERPRIOR)
    # The same run, summed in another order: equal up to where L-BFGS-B stops in a flat direction
    # (the noise near its floor moves 4e-8 between AVX-512 and AVX2 kernels).
    np.testing.assert_allclose(shared[1], alone[0], rtol=1e-6, atol=1e-6)
    total = neg_log_lik(
        torch.from_numpy(shared[:1]).expand(2, 5), pad(Xs[:2], ys[:2]), torch.from_numpy(IS_CAT)
    )
    assert float(total.sum()) == pytest.approx(objective[0], rel=1e-9)


def test_minimize_isolates_a_start_whose_kernel_fails():
    calls = []

    def fun(idx, x):
        calls.append(len(x))
        if (x[:, 0] > 2.5).any():
            raise ModelFittingError("not positive definite")
        return ((x - 1.0) ** 2).sum(1), 2 * (x - 1.0)

    bounds = np.array([[-5.0, 5.0], [-5.0, 5.0]])
    x, f = minimize(fun, np.array([[0.0, 0.0], [3.0, 0.0]]), bounds)
    np.testing.assert_allclose(x[0], [1.0, 1.0], atol=1e-5)  # the healthy start converged
    assert f[1] == np.inf and x[1, 0] == 3.0  # the failed start: inf, whatever its penalty
    # a real objective far above any small sentinel (MPHD's priors reach 1e15) is not a failure
    big = lambda idx, x: (1e15 + ((x - 1.0) ** 2).sum(1), 2 * (x - 1.0))  # noqa: E731
    x, f = minimize(big, np.array([[0.0, 0.0]]), bounds)
    assert np.isfinite(f[0]) and f[0] == pytest.approx(1e15)
    with pytest.raises(ModelFittingError):
        minimize(fun, np.array([[3.0, 0.0]]), bounds, penalize_failures=False)


# --- the batched posterior -----------------------------------------------------------------------
@pytest.mark.parametrize("kernel", [SE, MATERN52], ids=["se", "matern"])
def test_batched_posterior_matches_brute_force_and_its_gradient_autograd(kernel):
    rng = np.random.default_rng(6)
    Xs, zs = _data(rng, [6, 11])
    params = GPParams(rng.uniform(0.5, 4.0, (2, 3)), rng.uniform(0.5, 2.0, 2), [1e-3, 1e-2])
    gps = BatchedGP.build(
        Xs, zs, IS_CAT, params, y_mean=[1.0, -2.0], y_std=[2.0, 0.5], kernel=kernel
    )
    Xq = _data(rng, [5])[0][0]
    mean, var, dmean, dvar = gps.moments(Xq, grad=True)
    cov = gps.cov(Xq, Xq)
    for m in range(2):
        X, z = torch.from_numpy(Xs[m]), torch.from_numpy(zs[m])
        w = torch.from_numpy(params.inv_sq_lengthscales[m])
        s, noise = float(params.outputscale[m]), float(params.noise[m])

        def k(A, B, w=w, s=s):
            diff = A[:, None, :] - B[None, :, :]
            num = torch.from_numpy(~IS_CAT).to(DT)
            sq = ((diff**2) * num + (diff != 0).to(DT) * (1 - num)) @ w
            return s * (torch.exp(-0.5 * sq) if kernel is SE else MATERN52.f(sq))

        Xt = torch.from_numpy(Xq).requires_grad_(True)
        K = k(X, X) + noise * torch.eye(len(z), dtype=DT)
        kx = k(Xt, X)
        mu = kx @ torch.linalg.solve(K, z)
        v = s - (kx * torch.linalg.solve(K, kx.T).T).sum(1)
        scale, shift = [2.0, 0.5][m], [1.0, -2.0][m]
        np.testing.assert_allclose(mean[m], shift + scale * mu.detach().numpy(), rtol=1e-10)
        np.testing.assert_allclose(var[m], scale**2 * v.detach().numpy(), rtol=1e-8, atol=1e-14)
        np.testing.assert_allclose(np.diag(cov[m]), var[m], rtol=1e-8, atol=1e-14)
        (g_mu,) = torch.autograd.grad(mu.sum(), Xt, retain_graph=True)
        (g_v,) = torch.autograd.grad(v.sum(), Xt)
        num = ~IS_CAT  # categorical columns are searched discretely: gradient 0
        np.testing.assert_allclose(
            dmean[m][:, num], scale * g_mu.numpy()[:, num], rtol=1e-7, atol=1e-9
        )
        np.testing.assert_allclose(
            dvar[m][:, num], scale**2 * g_v.numpy()[:, num], rtol=1e-6, atol=1e-9
        )
        assert (dmean[m][:, IS_CAT] == 0).all()
        if kernel is MATERN52:  # the Matérn GP's numpy posterior: the same, hand-written again
            exact = ExactGP(Xs[m], zs[m], IS_CAT, params.select(m))
            e_mean, e_var, e_dmean, e_dvar = exact.posterior_and_grad(Xq)
            np.testing.assert_allclose(e_mean, mu.detach().numpy(), rtol=1e-10)
            np.testing.assert_allclose(e_var, v.detach().numpy(), rtol=1e-8, atol=1e-14)
            np.testing.assert_allclose(e_dmean[:, num], g_mu.numpy()[:, num], rtol=1e-7, atol=1e-9)
            np.testing.assert_allclose(e_dvar[:, num], g_v.numpy()[:, num], rtol=1e-6, atol=1e-9)


def test_batched_posterior_json_round_trip_and_selection():
    rng = np.random.default_rng(7)
    Xs, ys = _data(rng, [6, 11, 3])
    params = GPParams(rng.uniform(0.5, 4.0, (3, 3)), rng.uniform(0.5, 2.0, 3), [1e-3] * 3)
    gps = BatchedGP.from_tasks(list(zip(Xs, ys, strict=True)), IS_CAT, params)
    back = BatchedGP.from_json(
        json.loads(json.dumps(gps.to_json())), list(zip(Xs, ys, strict=True)), IS_CAT
    )
    Xq = _data(rng, [4])[0][0]
    np.testing.assert_array_equal(back.mean(Xq), gps.mean(Xq))
    np.testing.assert_allclose(gps.select([2, 0]).mean(Xq), gps.mean(Xq)[[2, 0]], rtol=1e-12)
    np.testing.assert_allclose(gps.cov(Xq, Xq, tasks=[1])[0], gps.cov(Xq, Xq)[1], rtol=1e-12)
