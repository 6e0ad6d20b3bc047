"""The residual GP beside the neural basis (issue 32) against brute-force Gaussian algebra."""

from __future__ import annotations

import math

import numpy as np
import pytest
import scipy.stats

from headstart._gp.hyperprior import NAMED, SCAML_TEST_HYPERPRIOR
from headstart._gp.kernels import matern52_np, sq_dist_np
from headstart._methods.gp import GPOptions
from headstart._transfer.blr import blr_at
from headstart._transfer.features import FeatureNet
from headstart._transfer.neural_residual import (
    FOCUS_NEIGHBOURS,
    RESIDUAL_HYPERPRIOR,
    ResidualPosterior,
    fit_residual,
    nearest_to_incumbent,
    neg_log_posterior,
)
from headstart.testing.surrogates import finite_difference_errors

IS_CAT = np.array([False, False, True])


def _net(seed=0, d_in=3, hidden=7, r=4):
    rng = np.random.default_rng(seed)
    layers = (
        (rng.standard_normal((hidden, d_in)), rng.standard_normal(hidden)),
        (rng.standard_normal((r, hidden)) / 2, rng.standard_normal(r)),
    )
    return FeatureNet(layers, "nested")


def _data(n=9, seed=1):
    rng = np.random.default_rng(seed)
    X = rng.random((n, 3))
    X[:, 2] = rng.integers(0, 3, n) / 2  # a categorical column (codes)
    y = np.sin(4 * X[:, 0]) + X[:, 1] ** 2 + 0.3 * X[:, 2]
    return X, (y - y.mean()) / y.std()


def _theta(k=4):
    return np.concatenate([np.linspace(-0.5, 0.7, k), [-1.0, 0.2, 0.4], [math.log(0.3), -4.0]])


def _brute_kernel(post, A, B):
    FA, FB = post.net.features(A)[:, : post.r], post.net.features(B)[:, : post.r]
    diff = A[:, None, :] - B[None, :, :]
    sq = np.where(IS_CAT, diff != 0, diff * diff)
    return (FA * post.inv_alpha) @ FB.T + post.s * matern52_np(sq @ post.w)[0]


@pytest.mark.parametrize("k", [4, 1])  # ARD head (ABRAC) and one precision (ABLR)
def test_objective_is_the_gp_evidence_plus_the_residual_prior_with_its_gradient(k):
    net, (X, y) = _net(), _data()
    theta = _theta(k)
    Phi = net.features(X)
    value, grad = neg_log_posterior(theta, Phi, X, y, IS_CAT, k)
    post = ResidualPosterior(net, 4, X, y, IS_CAT, theta)
    K = _brute_kernel(post, X, X) + post.noise * np.eye(len(y))
    nll = -scipy.stats.multivariate_normal(np.zeros(len(y)), K).logpdf(y)
    prior = RESIDUAL_HYPERPRIOR.log_prob(
        theta[None, k : k + 3], theta[None, k + 3], theta[None, k + 4]
    )
    assert value == pytest.approx(nll - float(np.asarray(prior)[0]), rel=1e-9)
    assert post.mll == pytest.approx(-nll, rel=1e-9)
    eps = 1e-6
    numeric = [
        (
            neg_log_posterior(theta + eps * e, Phi, X, y, IS_CAT, k)[0]
            - neg_log_posterior(theta - eps * e, Phi, X, y, IS_CAT, k)[0]
        )
        / (2 * eps)
        for e in np.eye(len(theta))
    ]
    np.testing.assert_allclose(grad, numeric, rtol=1e-5, atol=1e-6)


def test_with_the_head_off_the_fit_objective_is_a_matern_gps_under_the_residual_prior():
    """In the limit alpha -> inf the residual model's MAP objective is a Matérn GP's, computed by
    GP-BO's own code (``headstart._gp.exact``): same kernel, GP-BO's lengthscale and noise priors,
    and ScaML-GP's prior of the residual's scale (issue 32). Noise above both noise floors."""
    import torch

    from headstart._gp.exact import MATERN_FORM, neg_log_lik, pad, prior_and_grad
    from headstart._gp.fit_settings import MATERN_COORDS

    gp_prior = NAMED[GPOptions().hyperprior]
    assert RESIDUAL_HYPERPRIOR.lengthscale == gp_prior.lengthscale
    assert RESIDUAL_HYPERPRIOR.noise == gp_prior.noise
    assert RESIDUAL_HYPERPRIOR.outputscale == SCAML_TEST_HYPERPRIOR.outputscale
    net, (X, y) = _net(), _data()
    theta = _theta()
    theta[:4] = 60.0  # every precision e^60: no weight on the basis
    value, _ = neg_log_posterior(theta, net.features(X), X, y, IS_CAT, 4)
    log_ell, log_s, noise = theta[4:7], theta[7], math.exp(theta[8])
    raw = np.concatenate([-2.0 * log_ell, [log_s, math.log(noise - MATERN_COORDS.noise_floor)]])
    nll = neg_log_lik(
        torch.from_numpy(raw)[None, :], pad([X], [y]), torch.from_numpy(IS_CAT), MATERN_FORM
    )
    prior, _ = prior_and_grad(raw[None, :], RESIDUAL_HYPERPRIOR, MATERN_COORDS)
    assert value == pytest.approx(float(nll[0]) - float(prior[0]), rel=1e-9)


def test_posterior_is_gaussian_conditioning_and_its_gradient_matches_differences():
    net, (X, y) = _net(), _data()
    post = ResidualPosterior(net, 4, X, y, IS_CAT, _theta())
    Xs = _data(n=5, seed=7)[0]
    K = _brute_kernel(post, X, X) + post.noise * np.eye(len(y))
    ks = _brute_kernel(post, Xs, X)
    mean = ks @ np.linalg.solve(K, y)
    cov = _brute_kernel(post, Xs, Xs) - ks @ np.linalg.solve(K, ks.T)
    got_mean, got_var = post.posterior(Xs)
    np.testing.assert_allclose(got_mean, mean, rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose(got_var, np.diag(cov), rtol=1e-7, atol=1e-10)
    _, jc = post.joint_posterior(Xs)
    np.testing.assert_allclose(jc, cov, rtol=1e-7, atol=1e-10)
    np.testing.assert_allclose(post.posterior_and_grad(Xs)[0], mean, rtol=1e-8, atol=1e-10)
    numeric_cols = np.array([0, 1])  # the categorical one is searched discretely
    for analytic, numeric in finite_difference_errors(post, Xs, numeric_cols, h=1e-6).values():
        np.testing.assert_allclose(analytic, numeric, rtol=1e-5, atol=1e-7)


def test_without_the_residual_the_model_is_the_blr_head():
    net, (X, y) = _net(), _data()
    theta = _theta()
    theta[-2] = -40.0  # s = e^-40: no residual
    post = ResidualPosterior(net, 4, X, y, IS_CAT, theta)
    head = blr_at(np.concatenate([theta[:4], [-theta[-1]]]), net.features(X), y)
    Xs = _data(n=5, seed=7)[0]
    mean, var = head.predict(net.features(Xs), noise=False)
    got_mean, got_var = post.posterior(Xs)
    np.testing.assert_allclose(got_mean, mean, rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(got_var, var, rtol=1e-6, atol=1e-8)


def test_fantasize_equals_conditioning_on_the_union():
    net, (X, y) = _net(), _data()
    post = ResidualPosterior(net, 4, X[:6], y[:6], IS_CAT, _theta())
    both = post.fantasize(X[6:], y[6:])
    ref = ResidualPosterior(net, 4, X, y, IS_CAT, _theta())
    Xs = _data(n=5, seed=7)[0]
    for a, b in zip(both.posterior(Xs), ref.posterior(Xs), strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-8, atol=1e-10)


def test_the_residual_takes_what_the_basis_cannot_represent():
    """A basis that ignores column 1 cannot fit y = x_1: the BLR head leaves it as noise, the
    residual GP learns it (higher evidence, small error away from the data)."""
    rng = np.random.default_rng(3)
    W1 = rng.standard_normal((6, 3))
    W1[:, 1] = 0.0  # the basis never sees x_1
    net = FeatureNet(
        ((W1, rng.standard_normal(6)), (rng.standard_normal((4, 6)), np.zeros(4))), "nested"
    )
    X = rng.random((30, 3))
    X[:, 2] = 0.0
    y = np.sin(3 * X[:, 1])
    y = (y - y.mean()) / y.std()
    from headstart._transfer.blr import fit_blr

    head = fit_blr(net.features(X), y)
    post = fit_residual(net, 4, X, y, np.zeros(3, bool), head, ard=True)
    assert post.mll > -head.nll + 20
    Xs = rng.random((50, 3))
    Xs[:, 2] = 0.0
    ys = (np.sin(3 * Xs[:, 1]) - np.sin(3 * X[:, 1]).mean()) / np.sin(3 * X[:, 1]).std()
    assert np.sqrt(np.mean((post.posterior(Xs)[0] - ys) ** 2)) < 0.1


@pytest.mark.parametrize("k", [4, 1])  # an ARD head (the paper's ABRAC), one precision (default)
def test_local_fit_evidence_is_that_of_the_block_diagonal_residual_kernel(k):
    """Beyond ``max_points``, the fit keeps the residual's correlations among the points nearest
    the incumbent only: its evidence is the whole data's under the kernel whose residual part is
    block-diagonal (the subset one block, every other point its own), built here by brute
    force."""
    net, (X, y) = _net(), _data(n=12)
    theta = _theta(k)
    head = blr_at(np.concatenate([np.resize(theta[:k], 4), [-theta[-1]]]), net.features(X), y)
    post = fit_residual(
        net, 4, X, y, IS_CAT, head, ard=k > 1, init=theta, frozen=True, max_points=5
    )
    exact = ResidualPosterior(net, 4, X, y, IS_CAT, theta)
    near = nearest_to_incumbent(X, int(np.argmax(y)), IS_CAT, exact.lengthscales, 5)
    assert near[0] == np.argmax(y) and len(post.y) == 5
    in_s = np.isin(np.arange(len(y)), near)
    F = net.features(X)[:, :4]
    lin = lambda A, B: (A * exact.inv_alpha) @ B.T  # noqa: E731
    K = lin(F, F) + np.where(np.outer(in_s, in_s), _brute_kernel(exact, X, X) - lin(F, F), 0)
    K[np.diag_indices(len(y))] = lin(F, F).diagonal() + exact.s + exact.noise
    # the whole data's log evidence under that kernel: the block's given the rest, plus the rest's
    evidence = scipy.stats.multivariate_normal(np.zeros(len(y)), K).logpdf(y)
    np.testing.assert_allclose(post.log_evidence, evidence, rtol=1e-9)
    assert post.log_evidence != pytest.approx(post.mll)


def _local_case(k, n=12, block=5, categorical=True, grid=False):
    """A fit past ``max_points`` (``block``): ``n - block`` rest points. Without
    ``categorical`` the third column is numeric too (the neighbour search's matrix fast path);
    with ``grid`` the numeric columns sit on a grid of step 1/4 (equally near rest points)."""
    net, (X, y) = _net(), _data(n=n)
    is_cat = IS_CAT if categorical else np.zeros(3, dtype=bool)
    if grid:
        X[:, :2] = np.round(X[:, :2] * 4) / 4
    theta = _theta(k)
    head = blr_at(np.concatenate([np.resize(theta[:k], 4), [-theta[-1]]]), net.features(X), y)
    post = fit_residual(
        net, 4, X, y, is_cat, head, ard=k > 1, init=theta, frozen=True, max_points=block
    )
    return post


def _with_nearest_rest(post, x, X_b, y_b):
    """Brute force: the posterior at ``x`` given the block ``(X_b, y_b)`` and the rest point
    nearest ``x`` in the residual's lengthscales (found by a loop; the first of equally near
    ones), under the fit's weight prior: a plain residual posterior with that point added."""
    X_r, y_r, _ = post.rest
    cat = post.is_cat
    dist = [float(np.sum(np.where(cat, x != z, (x - z) ** 2) * post.w)) for z in X_r]
    j = int(np.argmin(dist))
    ref = ResidualPosterior(
        post.net, post.r, np.vstack([X_b, X_r[j]]), np.r_[y_b, y_r[j]], cat, post.theta,
        w_prior=post.w_prior,
    )  # fmt: skip
    return ref.posterior(x[None, :])


def _queries(post, seed=7):
    """Random points, two beside rest points (moved in the numeric columns), one at one."""
    X_r = post.rest[0]
    beside = X_r[:2] + 1e-3 * ~post.is_cat
    return np.vstack([_data(n=5, seed=seed)[0], beside, X_r[-1:]])


@pytest.mark.parametrize("categorical", [True, False])
@pytest.mark.parametrize("block", [5, 10])  # 7 rest points; 2
@pytest.mark.parametrize("k", [4, 1])
def test_local_fit_predicts_given_the_block_and_the_nearest_rest_point(k, block, categorical):
    """A prediction is conditioned on the exact block and on its nearest point outside it (the
    one-neighbour Vecchia correction): equal to a plain posterior with that point added; the
    rest points are then no longer at the residual's prior variance (issue 32: ABRAC's
    suggestions past 100 trials on FC-Net-naval landed beside them)."""
    post = _local_case(k, block=block, categorical=categorical)
    Xs = _queries(post)
    got_mean, got_var = post.posterior(Xs)
    for i, x in enumerate(Xs):
        mean, var = _with_nearest_rest(post, x, post.X, post.y)
        np.testing.assert_allclose(got_mean[i], mean[0], rtol=1e-7, atol=1e-9)
        np.testing.assert_allclose(got_var[i], var[0], rtol=1e-6, atol=1e-9)
    # at a rest point itself: nearer its value than the block alone, at about the noise's variance
    block_only = ResidualPosterior(
        post.net, 4, post.X, post.y, post.is_cat, post.theta, w_prior=post.w_prior
    )
    mean_b, var_b = block_only.posterior(Xs[-1:])
    assert abs(got_mean[-1] - post.rest[1][-1]) < abs(mean_b[0] - post.rest[1][-1])
    assert got_var[-1] < min(2 * post.noise, 0.5 * var_b[0])
    for analytic, numeric in finite_difference_errors(post, Xs, np.array([0, 1]), h=1e-6).values():
        np.testing.assert_allclose(analytic, numeric, rtol=1e-5, atol=1e-7)
    mean, cov = post.joint_posterior(Xs)  # D R D: exact marginals, a covariance
    np.testing.assert_allclose(mean, got_mean, rtol=1e-12)
    np.testing.assert_allclose(np.diagonal(cov), got_var, rtol=1e-9)
    assert np.linalg.eigvalsh(cov).min() > -1e-10


@pytest.mark.parametrize("categorical", [True, False])
def test_local_fit_prediction_of_a_row_does_not_depend_on_the_other_rows(categorical):
    """On a grid many rest points are equally near; the neighbour is the first of them by exact
    distance whatever else the call holds (the search compares values from calls of different
    sizes: screening chunks, starts, end points), as the protocol's row independence asks."""
    post = _local_case(4, n=40, block=10, categorical=categorical, grid=True)
    rng = np.random.default_rng(3)
    Xs = np.round(rng.random((300, 3)) * 4) / 4
    Xs[:, 2] = rng.integers(0, 3, len(Xs)) / 2
    batch = post.posterior(Xs)
    for i in range(0, len(Xs), 7):
        alone = post.posterior(Xs[i : i + 1])
        np.testing.assert_allclose(alone[0], batch[0][i], rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(alone[1], batch[1][i], rtol=1e-10, atol=1e-14)
        mean, var = _with_nearest_rest(post, Xs[i], post.X, post.y)
        np.testing.assert_allclose(alone, (mean, var), rtol=1e-6, atol=1e-9)


@pytest.mark.parametrize("k", [4, 1])
def test_local_fit_fantasies_join_the_block_and_keep_the_mean(k):
    post = _local_case(k)
    Xs = _queries(post)[:-1]
    X_p = _data(n=2, seed=9)[0]
    mean_p = post.posterior(X_p)[0]
    both = post.fantasize(X_p, mean_p)  # kriging believer: the mean stays, the variance drops
    mean0, var0 = post.posterior(Xs)
    mean1, var1 = both.posterior(Xs)
    np.testing.assert_allclose(mean1, mean0, rtol=1e-8, atol=1e-10)
    assert np.all(var1 <= var0 + 1e-12)
    # the variance is the exact one given the block, the fantasies and the nearest rest point
    for i, x in enumerate(Xs):
        _, var = _with_nearest_rest(post, x, both.X, both.y)
        np.testing.assert_allclose(var1[i], var[0], rtol=1e-6, atol=1e-9)
    one_by_one = post.fantasize(X_p[:1], mean_p[:1]).fantasize(X_p[1:], mean_p[1:])
    for a, b in zip(one_by_one.posterior(Xs), both.posterior(Xs), strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-8, atol=1e-10)
    for analytic, numeric in finite_difference_errors(both, Xs, np.array([0, 1]), h=1e-6).values():
        np.testing.assert_allclose(analytic, numeric, rtol=1e-5, atol=1e-7)
    assert both.log_evidence == both.mll + post.rest_evidence  # the rest's part carried over
    # the search's stand-in of a fantasized posterior: its base's, with the same fantasies
    starts = _data(n=2, seed=11)[0]
    ref = post.focus(starts).fantasize(X_p, mean_p)
    for a, b in zip(one_by_one.focus(starts).posterior(Xs), ref.posterior(Xs), strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-8, atol=1e-10)


@pytest.mark.parametrize("categorical", [True, False])
@pytest.mark.parametrize("k", [4, 1])
def test_focus_is_the_block_grown_by_the_rest_points_nearest_the_starts(k, categorical):
    """The local search climbs a plain (smooth) posterior: the block plus the rest points
    nearest each start."""
    post = _local_case(k, categorical=categorical)
    starts = _data(n=2, seed=11)[0]
    focused = post.focus(starts)
    assert focused.rest is None and focused.w_prior is post.w_prior
    X_r, y_r, _ = post.rest
    dist = sq_dist_np(starts, X_r, post.is_cat, post.w)
    near = np.unique(np.argsort(dist, axis=1)[:, :FOCUS_NEIGHBOURS])
    ref = ResidualPosterior(
        post.net, 4, np.vstack([post.X, X_r[near]]), np.r_[post.y, y_r[near]], post.is_cat,
        post.theta, w_prior=post.w_prior,
    )  # fmt: skip
    Xs = _data(n=6, seed=12)[0]
    for a, b in zip(focused.posterior(Xs), ref.posterior(Xs), strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-8, atol=1e-10)
    everything = post.focus(X_r)  # every rest point a start: the block is the whole data
    assert len(everything.y) == len(post.y) + len(y_r)
    exact_block = _local_case(k, block=12)
    assert exact_block.rest is None and exact_block.focus(starts) is exact_block


def test_local_fit_equals_the_exact_fit_when_the_data_fit_in_the_subset():
    net, (X, y) = _net(), _data()
    theta = _theta()
    head = blr_at(np.concatenate([theta[:4], [-theta[-1]]]), net.features(X), y)
    local = fit_residual(net, 4, X, y, IS_CAT, head, ard=True, init=theta, max_points=len(y))
    exact = fit_residual(net, 4, X, y, IS_CAT, head, ard=True, init=theta)
    np.testing.assert_array_equal(local.theta, exact.theta)
    assert local.w_prior is None
