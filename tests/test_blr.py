"""The Bayesian linear regression head of ABLR / ABRAC against brute-force Gaussian algebra."""

from __future__ import annotations

import math

import numpy as np
import pytest
import scipy.stats

from headstart._transfer.blr import fit_blr, neg_log_marginal_likelihood


def _data(n=12, r=4, seed=0):
    rng = np.random.default_rng(seed)
    Phi = rng.standard_normal((n, r))
    y = Phi @ rng.standard_normal(r) + 0.3 * rng.standard_normal(n)
    return Phi, y


def _brute_nll(theta, Phi, y):
    """-log N(y | 0, Phi A^-1 Phi^T + I / beta): the n x n form."""
    r = Phi.shape[1]
    alpha, beta = np.exp(theta[:r]), math.exp(theta[r])
    cov = Phi @ np.diag(1 / alpha) @ Phi.T + np.eye(len(y)) / beta
    return -scipy.stats.multivariate_normal(np.zeros(len(y)), cov).logpdf(y)


@pytest.mark.parametrize("n", [2, 4, 12])  # fewer observations than basis functions, and more
def test_cholesky_form_equals_the_n_by_n_marginal_likelihood(n):
    Phi, y = _data(n=n)
    theta = np.array([0.3, -0.2, 1.1, 0.0, 1.5])
    value, grad = neg_log_marginal_likelihood(theta, Phi, y)
    assert value == pytest.approx(_brute_nll(theta, Phi, y), rel=1e-8)
    eps = 1e-6
    numeric = [
        (_brute_nll(theta + eps * e, Phi, y) - _brute_nll(theta - eps * e, Phi, y)) / (2 * eps)
        for e in np.eye(len(theta))
    ]
    np.testing.assert_allclose(grad, numeric, rtol=1e-5, atol=1e-7)


def test_predictive_equals_gaussian_conditioning():
    Phi, y = _data()
    fit = fit_blr(Phi, y)
    F = np.random.default_rng(1).standard_normal((3, Phi.shape[1]))
    A_inv = np.diag(1 / fit.alpha)
    K = Phi @ A_inv @ Phi.T + np.eye(len(y)) / fit.beta  # joint Gaussian of (y, f(F))
    k = F @ A_inv @ Phi.T
    mean = k @ np.linalg.solve(K, y)
    var = np.einsum("ij,jk,ik->i", F, A_inv, F) - np.einsum("ij,ji->i", k, np.linalg.solve(K, k.T))
    got_mean, got_var = fit.predict(F, noise=False)
    np.testing.assert_allclose(got_mean, mean, rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose(got_var, var, rtol=1e-7, atol=1e-10)
    assert fit.predict(F)[1] == pytest.approx(var + 1 / fit.beta)


def test_fit_maximizes_the_evidence_and_ard_prunes_an_unused_basis():
    rng = np.random.default_rng(2)
    Phi = rng.standard_normal((40, 3))
    y = 2.0 * Phi[:, 0] + 0.1 * rng.standard_normal(40)  # only the first basis matters
    fit = fit_blr(Phi, y)
    assert fit.alpha[1] > 20 * fit.alpha[0] and fit.alpha[2] > 20 * fit.alpha[0]
    assert 1 / fit.beta == pytest.approx(0.01, rel=0.6)
    theta = np.concatenate([np.log(fit.alpha), [math.log(fit.beta)]])
    for e in np.eye(4):
        assert neg_log_marginal_likelihood(theta + 0.05 * e, Phi, y)[0] >= fit.nll - 1e-3
    iso = fit_blr(Phi, y, ard=False)
    assert np.ptp(iso.alpha) == 0 and iso.nll >= fit.nll - 1e-9


@pytest.mark.parametrize("ard", [True, False])
def test_a_warm_start_in_the_all_noise_corner_does_not_trap_the_fit(ard):
    """Issue 32: ABLR's head, warm-started from a fit on 3 points, stayed at the 'all noise'
    corner (every precision at its upper bound, noise variance 1) for 30 trials: there the
    gradient vanishes. The default start runs beside the warm one and the better fit is kept."""
    rng = np.random.default_rng(3)
    # Small features (the precisions absorb any scale) keep the corner's gradient, about
    # (|Phi^T y|^2 - tr Phi^T Phi) / (2 alpha), below L-BFGS-B's tolerance, as in the run.
    Phi = 0.05 * rng.standard_normal((40, 20))
    y = Phi @ rng.standard_normal(20)  # exactly linear in the basis
    y = (y - y.mean()) / y.std()
    r = Phi.shape[1]
    corner = np.concatenate([np.full(r if ard else 1, 12.0), [0.0]])  # alpha = e^12, beta = 1
    stuck = neg_log_marginal_likelihood(np.concatenate([np.full(r, 12.0), [0.0]]), Phi, y)[0]
    fit = fit_blr(Phi, y, ard=ard, init=corner)
    fresh = fit_blr(Phi, y, ard=ard)
    assert fit.nll < stuck - 10  # the data are linear in Phi: far from all noise
    assert fit.nll <= fresh.nll + 1e-9
    assert 1 / fit.beta < 0.2


def test_warm_only_fits_from_the_warm_start_and_still_leaves_the_all_noise_corner():
    """On the refit schedule's warm steps only the warm start runs (at n = 500 the default start
    took 80-90 of a fit's 110-150 evaluations); a warm start at the all-noise corner still gets
    the default start, as the corner cannot be left from itself."""
    rng = np.random.default_rng(3)
    Phi = 0.05 * rng.standard_normal((40, 20))
    y = Phi @ rng.standard_normal(20)
    y = (y - y.mean()) / y.std()
    fresh = fit_blr(Phi, y)
    warm = np.concatenate([np.log(fresh.alpha) + 0.3, [math.log(fresh.beta) - 0.2]])
    calls = []
    import headstart._transfer.blr as blr

    original = blr.minimize

    def counting(fun, x0, bounds, **kw):
        calls.append(len(x0))
        return original(fun, x0, bounds, **kw)

    blr.minimize = counting
    try:
        fit = fit_blr(Phi, y, init=warm, warm_only=True)
        assert calls == [1] and fit.nll <= fresh.nll + 1e-3
        calls.clear()
        corner = np.concatenate([np.full(20, 12.0), [0.0]])
        fit = fit_blr(Phi, y, init=corner, warm_only=True)
        assert calls == [1, 1] and fit.nll <= fresh.nll + 1e-9
    finally:
        blr.minimize = original
