"""ScaML-GP's test model: Theorem 1 against the full joint kernel of Lemma 1, the fit, the loop."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from headstart._transfer.metafit import fit_meta_gps
from headstart._transfer.scaml import (
    ScaML,
    ScaMLParams,
    ScaMLPosterior,
    TaskMoments,
    _TestObjective,
    fit_test_params,
    pooled_stats,
)
from headstart.sources import MetaTask

D = 2


def _se(A, B, ell, scale):
    r2 = (((A[:, None, :] - B[None, :, :]) / ell) ** 2).sum(-1)
    return scale * np.exp(-0.5 * r2)


def _tasks(rng, M=3, n=7, shift=0.0):
    tasks = []
    for m in range(M):
        X = rng.random((n + m, D))
        y = (
            np.sin(4 * X[:, 0] + m)
            + X[:, 1] ** 2 * (m + 1)
            + shift
            + 0.05 * rng.standard_normal(n + m)
        )
        tasks.append(MetaTask(f"task-{m}", X, y, "maximize"))
    return tasks


def _joint_posterior(meta, tasks, params, X_t, y_t, Xs, ybar, s, offset_sd=0.0):
    """Condition the Lemma 1 joint kernel on ALL data (meta and test), in raw units; the
    target's own part gains a constant offset ``c ~ N(0, (offset_sd s)^2)`` when asked."""
    P = meta.params
    blocks_X = [t.X for t in tasks]
    sizes = [len(x) for x in blocks_X]
    N = sum(sizes) + len(X_t)
    C = np.zeros((N, N))
    mean = np.zeros(N)
    cross = np.zeros((len(Xs), N))  # Cov(f_t(Xs), observations)
    w = params.weights
    offset = 0
    ell_t = params.lengthscales
    for m, X in enumerate(blocks_X):
        ell_m = P.inv_sq_lengthscales[m] ** -0.5
        ys2 = meta.y_std[m] ** 2
        sl = slice(offset, offset + len(X))
        C[sl, sl] = ys2 * (_se(X, X, ell_m, P.outputscale[m]) + P.noise[m] * np.eye(len(X)))
        mean[sl] = meta.y_mean[m]
        tl = slice(sum(sizes), N)
        C[tl, sl] = w[m] * ys2 * _se(X_t, X, ell_m, P.outputscale[m])
        C[sl, tl] = C[tl, sl].T
        cross[:, sl] = w[m] * ys2 * _se(Xs, X, ell_m, P.outputscale[m])
        offset += len(X)
    tl = slice(sum(sizes), N)

    def k_test(A, B):
        out = s**2 * (_se(A, B, ell_t, params.outputscale) + offset_sd**2)
        for m in range(len(blocks_X)):
            ell_m = P.inv_sq_lengthscales[m] ** -0.5
            out += w[m] ** 2 * meta.y_std[m] ** 2 * _se(A, B, ell_m, P.outputscale[m])
        return out

    C[tl, tl] = k_test(X_t, X_t) + s**2 * params.noise * np.eye(len(X_t))
    mean[tl] = w @ meta.y_mean
    cross[:, tl] = k_test(Xs, X_t)
    y_all = np.concatenate([t.y_max() for t in tasks] + [y_t])
    sol = np.linalg.solve(C, np.column_stack([y_all - mean, cross.T]))
    mu = w @ meta.y_mean + cross @ sol[:, 0]
    cov = k_test(Xs, Xs) - cross @ sol[:, 1:]
    return (mu - ybar) / s, cov / s**2, (C, mean, y_all, tl)


@pytest.fixture(scope="module")
def setup():
    rng = np.random.default_rng(0)
    tasks = _tasks(rng)
    meta = fit_meta_gps(tasks, np.zeros(D, dtype=bool), seed=0)
    X_t = rng.random((5, D))
    y_t = np.sin(4 * X_t[:, 0]) + 2 * X_t[:, 1] ** 2
    params = ScaMLParams(np.array([0.7, 0.2, 1.3]), np.array([0.4, 0.9]), 0.3, 1e-3)
    moments = TaskMoments.of([t.y_max() for t in tasks])
    return tasks, meta, X_t, y_t, params, moments


def test_theorem1_equals_conditioning_the_joint_kernel(setup):
    tasks, meta, X_t, y_t, params, moments = setup
    ybar, s = pooled_stats(moments, y_t)
    post = ScaMLPosterior(meta, X_t, (y_t - ybar) / s, params, ybar, s, prune_threshold=0.0)
    Xs = np.random.default_rng(1).random((6, D))
    mu_ref, cov_ref, _ = _joint_posterior(meta, tasks, params, X_t, y_t, Xs, ybar, s)
    mu, var = post.posterior(Xs)
    np.testing.assert_allclose(mu, mu_ref, rtol=0, atol=1e-9)
    np.testing.assert_allclose(var, np.diag(cov_ref), rtol=0, atol=1e-9)
    mu_j, cov_j = post.joint_posterior(Xs)
    np.testing.assert_allclose(mu_j, mu_ref, atol=1e-9)
    np.testing.assert_allclose(cov_j, cov_ref, atol=1e-9)


def test_prior_without_test_data_is_theorem1(setup):
    tasks, meta, _, _, params, moments = setup
    ybar, s = pooled_stats(moments, np.zeros(0))
    post = ScaMLPosterior(meta, np.zeros((0, D)), np.zeros(0), params, ybar, s, prune_threshold=0.0)
    Xs = np.random.default_rng(2).random((4, D))
    mu_ref, cov_ref, _ = _joint_posterior(
        meta, tasks, params, np.zeros((0, D)), np.zeros(0), Xs, ybar, s
    )
    mu, var = post.posterior(Xs)
    np.testing.assert_allclose(mu, mu_ref, atol=1e-9)
    np.testing.assert_allclose(var, np.diag(cov_ref), atol=1e-9)


def test_fit_objective_is_the_conditional_likelihood_of_eq8(setup):
    """-log N(z_t; m(X_t), A) equals -log p(y_t | y_meta) of the joint Gaussian, in z units."""
    tasks, meta, X_t, y_t, params, moments = setup
    ybar, s = pooled_stats(moments, y_t)
    obj = _TestObjective(
        meta.mean(X_t), meta.cov(X_t, X_t), X_t, (y_t - ybar) / s, np.zeros(D, bool), ybar, s
    )
    raw = torch.from_numpy(params.to_raw()[None, :])
    value = float(obj(raw)[0])
    ell, os_, noise, w = params.lengthscales, params.outputscale, params.noise, params.weights
    log_prior = (
        sum(-math.log(e) - 0.5 * ((math.log(e) - 0.5) / 1.5) ** 2 for e in ell)
        + (-math.log(os_) - 0.5 * ((math.log(os_) + 2.0) / 3.0) ** 2)
        + (-math.log(noise) - 0.5 * ((math.log(noise) + 8.0) / 2.0) ** 2)
        - w.sum()
    )
    _, _, (C, mean, y_all, tl) = _joint_posterior(meta, tasks, params, X_t, y_t, X_t, ybar, s)
    meta_idx = np.arange(tl.start)
    Cmm = C[np.ix_(meta_idx, meta_idx)]
    Ctm = C[tl][:, meta_idx]
    cond_mean = mean[tl] + Ctm @ np.linalg.solve(Cmm, y_all[meta_idx] - mean[meta_idx])
    cond_cov = C[tl, tl] - Ctm @ np.linalg.solve(Cmm, Ctm.T)
    resid = y_t - cond_mean
    sign, logdet = np.linalg.slogdet(cond_cov)
    nll_raw = 0.5 * resid @ np.linalg.solve(cond_cov, resid) + 0.5 * logdet
    nll_raw += 0.5 * len(y_t) * math.log(2 * math.pi)
    nll_z = nll_raw - len(y_t) * math.log(s)  # density of z = (y - ybar) / s
    assert sign > 0
    assert value == pytest.approx(nll_z - log_prior, rel=1e-9, abs=1e-8)


@pytest.mark.parametrize("with_categorical", [False, True])
def test_fit_objective_closed_form_gradient_equals_autograd(setup, with_categorical):
    """value_and_grad (R&W Eq. 5.9 in closed form) equals the autograd of the objective."""
    rng = np.random.default_rng(4)
    if with_categorical:  # synthetic meta moments: the formula does not care where they come from
        n, M, d = 7, 4, 3
        is_cat = np.array([False, True, False])
        X_t = rng.random((n, d))
        X_t[:, 1] = rng.integers(0, 3, n) / 2
        U = rng.normal(size=(M, n))
        G = rng.normal(size=(M, n, n))
        S = G @ np.swapaxes(G, 1, 2) / n
        z = rng.normal(size=n)
        ybar, s = 0.3, 1.7
    else:
        tasks, meta, X_t, y_t, _, moments = setup
        is_cat = np.zeros(D, bool)
        ybar, s = pooled_stats(moments, y_t)
        U, S, z = meta.mean(X_t), meta.cov(X_t, X_t), (y_t - ybar) / s
        n, d = X_t.shape
        M = len(tasks)
    obj = _TestObjective(U, S, X_t, z, is_cat, ybar, s)
    raw = np.concatenate(
        [
            rng.normal(-0.5, 0.5, (5, d)),
            rng.normal(-1.0, 0.5, (5, 1)),
            rng.normal(-5.0, 1.0, (5, 1)),
            rng.gamma(1.0, 0.5, (5, M)),
        ],
        axis=1,
    )
    raw_t = torch.from_numpy(raw).requires_grad_(True)
    expected = obj(raw_t)
    (expected_grad,) = torch.autograd.grad(expected.sum(), raw_t)
    value, grad = obj.value_and_grad(torch.from_numpy(raw))
    np.testing.assert_allclose(value.numpy(), expected.detach().numpy(), rtol=1e-10, atol=1e-9)
    np.testing.assert_allclose(grad.numpy(), expected_grad.numpy(), rtol=1e-7, atol=1e-8)


def _assert_gradients_match_differences(post, X, h=1e-6):
    """``posterior_and_grad`` equals ``posterior`` at ``X``, and its gradients its central
    differences."""
    mu, var, dmu, dvar = post.posterior_and_grad(X)
    mu0, var0 = post.posterior(X)
    np.testing.assert_allclose(mu, mu0, atol=1e-12)
    np.testing.assert_allclose(var, var0, atol=1e-12)
    for j in range(X.shape[1]):
        E = np.zeros_like(X)
        E[:, j] = h
        (mp, vp), (mm, vm) = post.posterior(X + E), post.posterior(X - E)
        np.testing.assert_allclose(dmu[:, j], (mp - mm) / (2 * h), rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(dvar[:, j], (vp - vm) / (2 * h), rtol=1e-5, atol=1e-6)


def test_posterior_gradients_match_finite_differences(setup):
    _, meta, X_t, y_t, params, moments = setup
    ybar, s = pooled_stats(moments, y_t)
    post = ScaMLPosterior(meta, X_t, (y_t - ybar) / s, params, ybar, s, prune_threshold=0.0)
    _assert_gradients_match_differences(post, np.random.default_rng(3).random((4, D)) * 0.8 + 0.1)


def test_pooled_stats_equal_concatenation(setup):
    tasks, _, _, y_t, _, moments = setup
    pool = np.concatenate([t.y_max() for t in tasks] + [y_t])
    ybar, s = pooled_stats(moments, y_t)
    assert ybar == pytest.approx(pool.mean())
    assert s == pytest.approx(pool.std())


def test_fit_learns_the_relevant_source_and_ignores_an_unrelated_one():
    rng = np.random.default_rng(5)
    X1 = rng.random((30, D))
    related = MetaTask("related", X1, np.sin(5 * X1[:, 0]) + X1[:, 1], "maximize")
    X2 = rng.random((30, D))
    unrelated = MetaTask("noise", X2, rng.standard_normal(30), "maximize")
    model = ScaML([related, unrelated], np.zeros(D, bool), seed=0)
    X_t = rng.random((8, D))
    y_t = np.sin(5 * X_t[:, 0]) + X_t[:, 1]
    post, z = model.condition(X_t, y_t, np.random.default_rng(0))
    weights = model.report()
    assert weights["related"] > 0.5
    assert weights["noise"] < 0.1 * weights["related"]
    mu, _ = post.posterior(X_t)
    np.testing.assert_allclose(mu, z, atol=0.1)


def test_unrelated_sources_fall_back_to_the_residual_gp():
    """Negative-transfer guard: sources unrelated to the test task get negligible weight."""
    rng = np.random.default_rng(1)
    sources = [  # smooth functions of x2 only; the test function depends on x1 only
        MetaTask(f"other-{m}", X, np.sin(6 * X[:, 1] + m), "maximize")
        for m, X in enumerate(rng.random((4, 30, D)))
    ]
    model = ScaML(sources, np.zeros(D, bool), seed=0)
    X_t = rng.random((12, D))
    y_t = np.cos(3 * X_t[:, 0]) * 3.0
    post, z = model.condition(X_t, y_t, np.random.default_rng(0))
    assert max(model.report().values()) < 0.05
    assert model.residual_variance() > 0.5
    mu, _ = post.posterior(X_t)
    np.testing.assert_allclose(mu, z, atol=0.05)


def test_condition_with_no_test_data_uses_the_meta_prior(setup):
    tasks, meta, *_ = setup
    model = ScaML(tasks, np.zeros(D, bool), meta=meta)
    post, z = model.condition(np.zeros((0, D)), np.zeros(0), np.random.default_rng(0))
    assert len(z) == 0
    np.testing.assert_allclose(model.report()["task-0"], 1 / 3)
    mu, var = post.posterior(np.random.default_rng(0).random((3, D)))
    assert np.all(np.isfinite(mu)) and np.all(var > 0)


def test_incremental_cache_equals_recomputation(setup):
    tasks, meta, X_t, _, *_ = setup
    model = ScaML(tasks, np.zeros(D, bool), meta=meta)
    model._meta_at(X_t[:3])
    U, S = model._meta_at(X_t)
    np.testing.assert_allclose(U, meta.mean(X_t), atol=1e-12)
    np.testing.assert_allclose(S, meta.cov(X_t, X_t), atol=1e-12)


def test_deterministic_pins_the_noise(setup):
    _, meta, X_t, y_t, _, moments = setup
    params, *_ = fit_test_params(
        meta, moments, X_t, y_t, rng=np.random.default_rng(0), deterministic=True
    )
    assert params.noise == pytest.approx(1e-6)


def test_fantasize_equals_conditioning_on_the_extended_data(setup):
    _, meta, X_t, y_t, params, moments = setup
    ybar, s = pooled_stats(moments, y_t)
    z = (y_t - ybar) / s
    post = ScaMLPosterior(meta, X_t[:3], z[:3], params, ybar, s)
    fantasy = post.fantasize(X_t[3:], z[3:])
    direct = ScaMLPosterior(meta, X_t, z, params, ybar, s)
    Xs = np.random.default_rng(2).random((6, D))
    for got, want in zip(
        fantasy.posterior_and_grad(Xs), direct.posterior_and_grad(Xs), strict=True
    ):
        np.testing.assert_allclose(got, want, atol=1e-10)
    # from the prior alone (no test data yet), as a transfer study's first batch does
    prior = ScaMLPosterior(meta, np.zeros((0, D)), np.zeros(0), params, ybar, s)
    np.testing.assert_allclose(
        prior.fantasize(X_t, z).posterior(Xs)[0], direct.posterior(Xs)[0], atol=1e-10
    )


def test_a_target_offset_equals_conditioning_the_joint_kernel_with_a_constant_term(setup):
    """target_offset: f_t = sum w_m f_m + g + c with c ~ N(0, sd^2) (normalized units) is
    Theorem 1 on the joint kernel with the constant added to the target's own part: posterior,
    joint posterior, gradients and the fit objective (against the joint Gaussian)."""
    tasks, meta, X_t, y_t, params, moments = setup
    ybar, s = pooled_stats(moments, y_t)
    sd = 0.8
    post = ScaMLPosterior(
        meta, X_t, (y_t - ybar) / s, params, ybar, s, prune_threshold=0.0,
        offset_variance=sd**2,
    )  # fmt: skip
    Xs = np.random.default_rng(1).random((6, D))
    mu_ref, cov_ref, (C, mean, y_all, tl) = _joint_posterior(
        meta, tasks, params, X_t, y_t, Xs, ybar, s, offset_sd=sd
    )
    mu, var = post.posterior(Xs)
    np.testing.assert_allclose(mu, mu_ref, atol=1e-9)
    np.testing.assert_allclose(var, np.diag(cov_ref), atol=1e-9)
    mu_j, cov_j = post.joint_posterior(Xs)
    np.testing.assert_allclose(mu_j, mu_ref, atol=1e-9)
    np.testing.assert_allclose(cov_j, cov_ref, atol=1e-9)
    plain_mu, _ = ScaMLPosterior(
        meta, X_t, (y_t - ybar) / s, params, ybar, s, prune_threshold=0.0
    ).posterior(Xs)
    assert np.abs(plain_mu - mu).max() > 1e-3  # the offset changes the prediction
    _assert_gradients_match_differences(post, Xs)  # gradients in x: the constant has none
    # the fit objective: -log p(z_t | meta data) of the joint Gaussian, plus the same prior terms
    U, S = meta.mean(X_t), meta.cov(X_t, X_t)
    z = (y_t - ybar) / s
    args = (U, S, X_t, z, np.zeros(D, bool), ybar, s)
    raw = torch.from_numpy(params.to_raw()[None, :])
    with_offset = float(_TestObjective(*args, offset_variance=sd**2)(raw)[0])
    without = float(_TestObjective(*args)(raw)[0])
    meta_idx = np.arange(tl.start)
    Ctm = C[tl][:, meta_idx]
    solve = np.linalg.solve(C[np.ix_(meta_idx, meta_idx)], np.column_stack([
        y_all[meta_idx] - mean[meta_idx], Ctm.T
    ]))  # fmt: skip
    cond_mean, cond_cov = mean[tl] + Ctm @ solve[:, 0], C[tl, tl] - Ctm @ solve[:, 1:]
    _, _, (C0, _, _, _) = _joint_posterior(meta, tasks, params, X_t, y_t, X_t, ybar, s)
    cond_cov0 = C0[tl, tl] - C0[tl][:, meta_idx] @ np.linalg.solve(
        C0[np.ix_(meta_idx, meta_idx)], C0[tl][:, meta_idx].T
    )

    def nll(cov):
        r = y_t - cond_mean
        return 0.5 * r @ np.linalg.solve(cov, r) + 0.5 * np.linalg.slogdet(cov)[1]

    assert with_offset - without == pytest.approx(nll(cond_cov) - nll(cond_cov0), abs=1e-8)
    # and its closed-form gradient equals autograd's
    obj = _TestObjective(*args, offset_variance=sd**2)
    raw_t = raw.clone().requires_grad_(True)
    (auto,) = torch.autograd.grad(obj(raw_t).sum(), raw_t)
    value, grad = obj.value_and_grad(raw)
    assert float(value[0]) == pytest.approx(with_offset, rel=1e-10)
    np.testing.assert_allclose(grad.numpy(), auto.numpy(), rtol=1e-7, atol=1e-8)


def test_target_offset_is_a_scaml_option_off_by_default(setup):
    from headstart._methods.transfer import ScaMLOptions
    from headstart.exceptions import InvalidSettingError

    assert ScaMLOptions().target_offset == 0.0
    for bad in (-1.0, 1e3):
        with pytest.raises(InvalidSettingError, match="target_offset"):
            ScaMLOptions(target_offset=bad)
    tasks, meta, X_t, y_t, *_ = setup
    with pytest.raises(ValueError, match="target_offset"):
        ScaML(tasks, np.zeros(D, bool), meta=meta, target_offset=-0.5)
    model = ScaML(tasks, np.zeros(D, bool), meta=meta, target_offset=0.5)
    posterior, _ = model.condition(X_t, y_t, np.random.default_rng(0))
    assert posterior.offset_variance == 0.25
    assert posterior.fantasize(X_t[:1], np.zeros(1)).offset_variance == 0.25
    # the fit maximized the offset model's evidence: its posterior's mll (at the fitted
    # parameters) is the objective's likelihood part with the offset, not without it
    U, S = meta.mean(X_t), meta.cov(X_t, X_t)
    z = (y_t - model.ybar) / model.scale
    args = (U, S, X_t, z, np.zeros(D, bool), model.ybar, model.scale)
    raw = torch.from_numpy(model.params.to_raw()[None, :])
    prior_part = (
        float(_TestObjective(*args)(raw)[0])
        + ScaMLPosterior(
            meta, X_t, z, model.params, model.ybar, model.scale, prune_threshold=0.0
        ).mll
    )  # -log prior, from the model without the offset
    with_offset = float(_TestObjective(*args, offset_variance=0.25)(raw)[0])
    assert -posterior.mll == pytest.approx(with_offset - prior_part, rel=1e-9)


def test_target_offset_goes_through_create_study(setup):
    import headstart as hs

    tasks, *_ = setup
    space = hs.SearchSpace({"x0": hs.Float(0.0, 1.0), "x1": hs.Float(0.0, 1.0)})
    study = hs.create_study(
        "offset", space, storage=None, method="scaml", transfer_from=tasks, target_offset=0.5
    )
    for _ in range(3):
        trial = study.ask()
        study.tell(trial, float(np.sin(3 * trial.params["x0"]) + trial.params["x1"]))
    assert study._strategy._engine.surrogate.offset_variance == 0.25


def test_a_fitted_offset_is_the_fixed_offset_model_plus_its_prior(setup):
    """target_offset="fit": log c^2 is the raw vector's last entry. The objective equals the
    fixed-offset one at c^2 minus the LogNormal(-2, 3) log density of c^2 (s_t's prior), and
    the closed-form gradient (its new column included) equals autograd's."""
    from headstart._gp.hyperprior import SCAML_TEST_HYPERPRIOR

    _, meta, X_t, y_t, params, moments = setup
    ybar, s = pooled_stats(moments, y_t)
    U, S = meta.mean(X_t), meta.cov(X_t, X_t)
    args = (U, S, X_t, (y_t - ybar) / s, np.zeros(D, bool), ybar, s)
    fitted = ScaMLParams(params.weights, params.lengthscales, 0.3, 1e-3, offset_variance=0.36)
    raw = torch.from_numpy(fitted.to_raw()[None, :])
    assert raw.shape[1] == len(params.to_raw()) + 1
    back = ScaMLParams.from_raw(raw[0].numpy(), D, fit_offset=True)
    np.testing.assert_allclose(back.to_raw(), fitted.to_raw(), rtol=1e-12)
    assert back.offset_variance == pytest.approx(0.36)
    obj = _TestObjective(*args, fit_offset=True)
    fixed = float(_TestObjective(*args, offset_variance=0.36)(raw[:, :-1])[0])
    log_prior = float(SCAML_TEST_HYPERPRIOR.outputscale.value_and_grad(torch.log(
        torch.tensor([0.36], dtype=torch.float64)))[0][0])  # fmt: skip
    assert float(obj(raw)[0]) == pytest.approx(fixed - log_prior, rel=1e-12)
    noise = torch.randn(
        2, raw.shape[1], dtype=torch.float64, generator=torch.Generator().manual_seed(0)
    )
    batch = torch.cat([raw, raw + 0.1 * noise])
    raw_t = batch.clone().requires_grad_(True)
    (auto,) = torch.autograd.grad(obj(raw_t).sum(), raw_t)
    value, grad = obj.value_and_grad(batch)
    np.testing.assert_allclose(value.numpy(), obj(batch).numpy(), rtol=1e-10)
    np.testing.assert_allclose(grad.numpy(), auto.numpy(), rtol=1e-7, atol=1e-8)


def test_a_fitted_offset_grows_only_when_the_target_sits_at_another_level(setup):
    """The sources predict the shape of ``y_t``: fitted at the sources' level, c stays near 0;
    moved by 3 of the unmoved model's pooled standard deviations (about 1.9 of the moved one's),
    c grows to the order of the move, and the prediction far from the observations moves with
    it (the paper's model cannot). Before any data the offset is off and not reported."""
    tasks, meta, *_ = setup
    rng = np.random.default_rng(3)
    X = rng.random((6, D))
    y = np.sin(4 * X[:, 0]) + 2 * X[:, 1] ** 2
    model = ScaML(tasks, np.zeros(D, bool), meta=meta, target_offset="fit")
    prior, _ = model.condition(X[:0], y[:0], np.random.default_rng(0))
    assert prior.offset_variance == 0.0 and model.diagnostics()["target_offset"] is None
    model.condition(X, y, np.random.default_rng(0))
    level = model.diagnostics()["target_offset"]
    assert level < 0.3
    shift = 3 * model.scale
    shifted = ScaML(tasks, np.zeros(D, bool), meta=meta, target_offset="fit")
    post, _ = shifted.condition(X, y + shift, np.random.default_rng(0))
    c = shifted.diagnostics()["target_offset"]
    assert c > 0.5 * shift / shifted.scale and c > 5 * level
    paper = ScaML(tasks, np.zeros(D, bool), meta=meta)
    paper_post, _ = paper.condition(X, y + shift, np.random.default_rng(0))
    far = np.array([[0.02, 0.98], [0.98, 0.02]])
    truth = (np.sin(4 * far[:, 0]) + 2 * far[:, 1] ** 2 + shift - shifted.ybar) / shifted.scale
    err = np.abs(post.posterior(far)[0] - truth)
    paper_err = np.abs(
        paper_post.posterior(far)[0]
        - (truth * shifted.scale + shifted.ybar - paper.ybar) / paper.scale
    )
    assert err.mean() < 0.5 * paper_err.mean()
    # the state round trip keeps the fitted offset; a model of the other form ignores it
    again = ScaML(tasks, np.zeros(D, bool), meta=meta, target_offset="fit")
    again.load_state(shifted.state())
    assert again.params.offset_variance == pytest.approx(c**2)
    fixed = ScaML(tasks, np.zeros(D, bool), meta=meta, target_offset=0.5)
    fixed.load_state(shifted.state())
    assert fixed.params is None
    # a later refit without prior restarts starts from the fitted offset and keeps its form
    shifted.restart_every, shifted.restart_growth = 10**6, 0.0
    shifted.condition(
        np.vstack([X, X[:1] * 0.5]), np.r_[y, y[:1]] + shift, np.random.default_rng(1)
    )
    assert shifted.params.offset_variance is not None and shifted.params.offset_variance > 0.25
    # the weights' Laplace standard errors come from the weights' rows of the Hessian, not the
    # offset's: the inverse Hessian over every free coordinate, its weight entries
    se = shifted.weight_summary()["weight_se"]
    U, S = meta.mean(shifted._last_X), meta.cov(shifted._last_X, shifted._last_X)
    z = (shifted._last_y - shifted.ybar) / shifted.scale
    obj = _TestObjective(
        U, S, shifted._last_X, z, np.zeros(D, bool), shifted.ybar, shifted.scale, fit_offset=True
    )
    H = torch.autograd.functional.hessian(
        lambda r: obj(r[None])[0], torch.from_numpy(shifted.params.to_raw())
    ).numpy()
    var = np.diagonal(np.linalg.inv(0.5 * (H + H.T)))[D + 2 : D + 2 + len(tasks)]
    expect = np.where(var > 0, np.sqrt(np.abs(var)), np.nan)
    np.testing.assert_allclose(list(se.values()), expect, rtol=1e-6)
    # the weights' whole covariance block (benchmarks/scaml_calibration.py): symmetric, and
    # its diagonal the squared standard errors
    cov = shifted.weight_covariance()
    assert cov.shape == (len(tasks), len(tasks))
    np.testing.assert_allclose(cov, cov.T, rtol=1e-8, atol=1e-12)
    np.testing.assert_allclose(np.diagonal(cov), var, rtol=1e-6)


def test_target_offset_fit_is_an_option(setup):
    from headstart._methods.transfer import ScaMLOptions
    from headstart.exceptions import InvalidSettingError

    assert ScaMLOptions(target_offset="fit").target_offset == "fit"
    assert ScaMLOptions(target_offset=np.float32(0.5)).target_offset == 0.5
    tasks, meta, *_ = setup
    for bad in ("fitted", "Fit", None, True, -0.5, 1e3, float("nan"), float("inf")):
        with pytest.raises(InvalidSettingError, match="'fit' or a finite number"):
            ScaMLOptions(target_offset=bad)
        with pytest.raises(InvalidSettingError, match="'fit' or a finite number"):
            ScaML(tasks, np.zeros(D, bool), meta=meta, target_offset=bad)


def test_a_fitted_target_offset_goes_through_create_study_and_the_report(setup):
    import headstart as hs

    tasks, *_ = setup
    space = hs.SearchSpace({"x0": hs.Float(0.0, 1.0), "x1": hs.Float(0.0, 1.0)})
    studies = {}
    for offset in ("fit", 0.0):
        study = hs.create_study(
            f"offset-{offset}", space, storage=None, method="scaml", transfer_from=tasks,
            target_offset=offset,
        )  # fmt: skip
        for _ in range(4):
            trial = study.ask()
            x0, x1 = trial.params["x0"], trial.params["x1"]
            study.tell(trial, float(np.sin(4 * x0) + 2 * x1**2 + 3.0))
        studies[offset] = study
    surrogate = studies["fit"]._strategy._engine.surrogate
    assert surrogate.fit_offset and surrogate.params.offset_variance is not None
    report = studies["fit"].transfer_report()
    assert report.target_offset == pytest.approx(math.sqrt(surrogate.params.offset_variance))
    assert "Fitted offset between the study and its sources" in report.summary()
    assert report.to_dict()["target_offset"] == report.target_offset
    assert studies[0.0].transfer_report().target_offset is None


def _restart_calls(model, monkeypatch, n_max):
    import headstart._transfer.scaml as scaml_module

    seen = {}

    def spy(meta, moments, X_t, y_t, **kwargs):  # records the schedule, skips the fit
        seen[len(y_t)] = (kwargs["n_prior_starts"], kwargs["factr"])
        return ScaMLParams.initial(meta.n_tasks, D), math.nan, *pooled_stats(moments, y_t)

    monkeypatch.setattr(scaml_module, "fit_test_params", spy)
    rng = np.random.default_rng(0)
    X = rng.random((n_max, D))
    y = np.sin(3 * X[:, 0]) + X[:, 1]
    for n in range(1, n_max + 1):
        posterior, _ = model.condition(X[:n], y[:n], rng)
    return seen, posterior


def test_prior_restarts_follow_the_geometric_schedule(setup, monkeypatch):
    """Every call up to 5 points, then after max(5, 25% of the last restart's n) new points."""
    tasks, meta, *_ = setup
    seen, posterior = _restart_calls(ScaML(tasks, np.zeros(D, bool), meta=meta), monkeypatch, 40)
    restarts = [n for n, (starts, _) in seen.items() if starts]
    assert restarts == [1, 2, 3, 4, 5, 10, 15, 20, 25, 32, 40]
    assert {factr for _, factr in seen.values()} == {1e9}
    assert posterior.screening_points == 1024
    assert posterior.fantasize(np.full((1, D), 0.5), np.zeros(1)).screening_points == 1024


def test_paper_schedule_restarts_at_every_call(setup, monkeypatch):
    tasks, meta, *_ = setup
    model = ScaML(
        tasks,
        np.zeros(D, bool),
        meta=meta,
        restart_every=1,
        restart_growth=0.0,
        fit_factr=1e7,
        screening_points=2048,
    )
    seen, posterior = _restart_calls(model, monkeypatch, 12)
    assert all(starts for starts, _ in seen.values()) and len(seen) == 12
    assert {factr for _, factr in seen.values()} == {1e7}
    assert posterior.screening_points == 2048


def _two_shapes(rng: np.random.Generator) -> tuple[dict, list[MetaTask]]:
    """Two sources of different shapes (30 random points each); a target mixing both gives
    each a weight away from its bound."""
    shapes = {"a": lambda X: np.sin(5 * X[:, 0]), "b": lambda X: np.cos(4 * X[:, 1])}
    tasks = [
        MetaTask(name, X, f(X), "maximize")
        for name, f in shapes.items()
        for X in [rng.random((30, D))]
    ]
    return shapes, tasks


def test_weight_covariance_is_a_covariance_or_nan(monkeypatch):
    """The weights' Laplace covariance is symmetric positive semi-definite, with the standard
    errors' squares on its diagonal; a block that is not (weights on their bound) gives ``nan``
    while the standard errors keep their old definition."""
    rng = np.random.default_rng(5)
    shapes, tasks = _two_shapes(rng)
    model = ScaML(tasks, np.zeros(D, bool), seed=0)
    assert np.isnan(model.weight_covariance()).all()  # before any target data
    X_t = rng.random((12, D))
    y_t = shapes["a"](X_t) + 0.7 * shapes["b"](X_t)  # both sources count
    model.condition(X_t, y_t, np.random.default_rng(0))
    cov = model.weight_covariance()
    assert np.isfinite(cov).all() and np.linalg.eigvalsh(cov).min() >= -1e-12
    se = np.array(list(model.weight_summary()["weight_se"].values()))
    np.testing.assert_allclose(np.sqrt(np.diagonal(cov)), se, rtol=1e-8)
    indefinite = np.array([[1.0, 2.0], [2.0, 1.0]])
    monkeypatch.setattr(ScaML, "_inverse_hessian_block", lambda self, params: indefinite)
    assert np.isnan(model.weight_covariance()).all()
    assert np.array(list(model.weight_summary()["weight_se"].values())) == pytest.approx([1, 1])


@pytest.mark.parametrize("deterministic", [False, True])
@pytest.mark.parametrize("target_offset", [0.0, "fit"])
def test_the_weights_block_is_the_weights_rows_of_the_inverse_hessian(deterministic, target_offset):
    """With and without a pinned noise and a fitted offset, the block taken from the end of the
    free coordinates is exactly the weights' rows and columns of the inverse Hessian."""
    rng = np.random.default_rng(7)
    shapes, tasks = _two_shapes(rng)
    model = ScaML(
        tasks, np.zeros(D, bool), seed=0, deterministic=deterministic, target_offset=target_offset
    )
    X_t = rng.random((12, D))
    model.condition(X_t, shapes["a"](X_t) + 0.7 * shapes["b"](X_t), np.random.default_rng(0))
    U, S = model.meta.mean(X_t), model.meta.cov(X_t, X_t)
    z = (model._last_y - model.ybar) / model.scale
    obj = _TestObjective(
        U, S, X_t, z, np.zeros(D, bool), model.ybar, model.scale,
        offset_variance=model.offset_variance, fit_offset=model.fit_offset,
    )  # fmt: skip
    raw = torch.from_numpy(model.params.to_raw())
    names = [f"ell{j}" for j in range(D)] + ["s", "noise", "w_a", "w_b"]
    names += ["offset"] if target_offset == "fit" else []
    free = [i for i, n in enumerate(names) if not (deterministic and n == "noise")]

    def f(sub):
        full = raw.clone()
        full[free] = sub
        return obj(full[None])[0]

    H = torch.autograd.functional.hessian(f, raw[free]).numpy()
    inverse = np.linalg.inv(0.5 * (H + H.T))
    weights = [k for k, i in enumerate(free) if names[i].startswith("w_")]
    expect = inverse[np.ix_(weights, weights)]
    np.testing.assert_allclose(model._inverse_hessian_block(model.params), expect, rtol=1e-8)


def test_warped_tasks_keep_each_tasks_order_and_map_it_by_its_own_values():
    from scipy import stats

    from headstart._transfer.metafit import warped_tasks

    rng = np.random.default_rng(3)
    heavy = MetaTask("heavy", rng.random((9, D)), np.exp(3 * rng.standard_normal(9)), "minimize")
    tame = MetaTask("tame", rng.random((6, D)), rng.standard_normal(6), "maximize")
    assert warped_tasks([heavy, tame], "none") == [heavy, tame]
    out = warped_tasks([heavy, tame], "copula")
    for before, after in zip([heavy, tame], out, strict=True):
        assert after.name == before.name and after.direction == "maximize"
        np.testing.assert_array_equal(after.X, before.X)
        # the order in the maximize convention is kept, and the values are the normal scores
        np.testing.assert_array_equal(np.argsort(after.y), np.argsort(before.y_max()))
        n = before.n
        scores = stats.norm.ppf((np.arange(1, n + 1) - 0.5) / n)
        expected = (scores - scores.mean()) / scores.std()
        np.testing.assert_allclose(np.sort(after.y), expected, atol=1e-12)


def test_output_warp_is_the_papers_model_on_warped_values(setup):
    """``output_warp`` maps each source's and the target's values by their own, then runs the
    paper's model: the same posterior as ScaML-GP given the warped data by hand."""
    from headstart._gp.warping import warp_targets
    from headstart._transfer.metafit import warped_tasks

    tasks, _, X_t, y_t, *_ = setup
    y_heavy = np.exp(2.0 * y_t)  # a target with a long upper tail
    warped = warped_tasks(tasks, "yeo-johnson")
    meta = fit_meta_gps(warped, np.zeros(D, bool), seed=0)
    option = ScaML(tasks, np.zeros(D, bool), meta=meta, output_warp="yeo-johnson")
    by_hand = ScaML(warped, np.zeros(D, bool), meta=meta)
    post_a, z_a = option.condition(X_t, y_heavy, np.random.default_rng(0))
    post_b, z_b = by_hand.condition(
        X_t, warp_targets(y_heavy, "yeo-johnson"), np.random.default_rng(0)
    )
    np.testing.assert_allclose(z_a, z_b, rtol=1e-12)
    Xs = np.random.default_rng(1).random((5, D))
    for a, b in zip(post_a.posterior(Xs), post_b.posterior(Xs), strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-10)
    np.testing.assert_allclose(option.moments.mean, by_hand.moments.mean)
    with pytest.raises(ValueError, match="output_warp"):
        ScaML(tasks, np.zeros(D, bool), meta=meta, output_warp="log")


def test_output_warp_goes_through_create_study_and_warps_the_cached_meta_gps(setup):
    import headstart as hs
    from headstart.exceptions import InvalidSettingError

    tasks, *_ = setup
    space = hs.SearchSpace({"x0": hs.Float(0.0, 1.0), "x1": hs.Float(0.0, 1.0)})
    with pytest.raises(InvalidSettingError, match="output_warp"):
        hs.create_study("w", space, storage=None, method="scaml", transfer_from=tasks,
                        output_warp="log")  # fmt: skip
    study = hs.create_study(
        "w", space, storage=None, method="scaml", transfer_from=tasks, output_warp="copula"
    )
    for _ in range(4):
        trial = study.ask()
        study.tell(trial, float(np.sin(3 * trial.params["x0"]) + trial.params["x1"]))
    model = study._strategy._engine.surrogate
    assert model.output_warp == "copula"
    # the model holds each source's standardized normal scores, not its raw values: in its
    # moments and in the meta GPs (from prefit_meta_gps, the study's model cache)
    np.testing.assert_allclose(model.meta.y_mean, 0.0, atol=1e-12)
    np.testing.assert_allclose(model.meta.y_std, 1.0, rtol=0.1)
    np.testing.assert_allclose(model.moments.mean, 0.0, atol=1e-12)
    np.testing.assert_allclose(model.moments.var, 1.0, rtol=0.2)
    raw = TaskMoments.of([t.y_max() for t in tasks])  # the raw sources' are not
    assert np.abs(raw.mean).min() > 0.3 and not np.allclose(raw.var, 1.0, rtol=0.2)
