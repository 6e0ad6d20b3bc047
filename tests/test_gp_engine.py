"""Tests of the fast GP-BO engine (headstart._gp): numerics against closed forms and BoTorch."""

from __future__ import annotations

import math

import numpy as np
import pytest
import scipy.optimize
import torch
from scipy.stats import norm

from headstart._engine.acquisition import (
    Criterion,
    PriorWeight,
    ei_and_grad,
    log_ei,
    log_ei_and_grad,
    log_h,
    log_softplus,
    pi_and_grad,
)
from headstart._engine.engine import BOEngine, DimSpec
from headstart._engine.lbfgsb import batched_lbfgsb
from headstart._engine.optimize import MixedSpace, is_duplicate, optimize_criterion
from headstart._gp import MaternGP
from headstart._gp.kernels import (
    matern52,
    matern52_np,
    matern52_value_np,
    pairwise_sq_diffs,
    sq_dist_np,
)
from headstart._gp.model import ExactGP
from headstart._gp.params import GPParams

DT = torch.float64


def gp_engine(dims, *, acquisition="logei", deterministic=False):
    """The engine of ``method="gp"``: :class:`BOEngine` on the Matérn surrogate."""
    is_cat = np.array([d.kind == "categorical" for d in dims])
    surrogate = MaternGP(is_cat, deterministic=deterministic)
    return BOEngine(dims, surrogate, acquisition=acquisition)


def _brute_kernel(A, B, is_cat, ell, s):
    K = np.empty((len(A), len(B)))
    for i, a in enumerate(A):
        for k, b in enumerate(B):
            r2 = 0.0
            for j in range(len(a)):
                dist = float(a[j] != b[j]) if is_cat[j] else (a[j] - b[j]) ** 2
                r2 += dist / ell[j] ** 2
            r = math.sqrt(r2)
            K[i, k] = s * (1 + math.sqrt(5) * r + 5 / 3 * r2) * math.exp(-math.sqrt(5) * r)
    return K


def _gp(X, y, is_cat, ell, s=1.3, noise=1e-3):
    params = GPParams(1.0 / np.asarray(ell) ** 2, s, noise)
    return ExactGP(X, y, np.asarray(is_cat), params)


# --- kernel ---------------------------------------------------------------------------------------
def test_kernel_matches_brute_force_matern_and_hamming():
    rng = np.random.default_rng(0)
    A, B = rng.random((4, 3)), rng.random((5, 3))
    A[:, 2] = rng.choice([1 / 6, 0.5, 5 / 6], 4)
    B[:, 2] = rng.choice([1 / 6, 0.5, 5 / 6], 5)
    B[0] = A[0]  # a zero distance
    is_cat = np.array([False, False, True])
    ell, s = np.array([0.3, 0.7, 0.5]), 1.7
    expected = _brute_kernel(A, B, is_cat, ell, s)
    w = 1.0 / ell**2
    # numpy prediction path
    got_np = s * matern52_np(sq_dist_np(A, B, is_cat, w))[0]
    np.testing.assert_allclose(got_np, expected, rtol=1e-12, atol=1e-12)
    # torch fitting path
    sq = pairwise_sq_diffs(torch.from_numpy(A), torch.from_numpy(B), torch.from_numpy(is_cat))
    got_t = s * matern52(sq @ torch.from_numpy(w))
    np.testing.assert_allclose(got_t.numpy(), expected, rtol=1e-12, atol=1e-14)


def test_matern_gradient_is_finite_at_zero_and_matches_closed_form():
    r2 = torch.tensor([0.0, 0.1, 2.0], dtype=DT, requires_grad=True)
    (g,) = torch.autograd.grad(matern52(r2).sum(), r2)
    root = np.sqrt(5 * r2.detach().numpy())
    np.testing.assert_allclose(g.numpy(), -5 / 6 * (1 + root) * np.exp(-root), rtol=1e-12)
    np.testing.assert_allclose(matern52_np(r2.detach().numpy())[1], g.numpy(), rtol=1e-12)
    assert torch.autograd.gradcheck(
        matern52, (torch.tensor([0.05, 0.3, 1.5], dtype=DT).requires_grad_(),)
    )


def test_in_place_matern_and_distances_keep_the_bits_of_the_plain_expressions():
    """The in-place helpers do the same IEEE operations as the one-line formulas they replaced
    (fewer m x n temporaries, issue 32), so predictions, and every run, keep their bits."""
    rng = np.random.default_rng(3)
    A, B = rng.random((37, 4)), rng.random((23, 4))
    A[:, 3] = rng.choice([0.25, 0.75], 37)
    B[:, 3] = rng.choice([0.25, 0.75], 23)
    is_cat, w = np.array([False, False, False, True]), rng.random(4) * 9
    num = ~is_cat
    As, Bs = A[:, num] * np.sqrt(w[num]), B[:, num] * np.sqrt(w[num])
    r2 = (As * As).sum(1)[:, None] + (Bs * Bs).sum(1)[None, :] - 2.0 * (As @ Bs.T)
    r2 = np.maximum(r2, 0.0) + w[3] * (A[:, 3, None] != B[None, :, 3])
    np.testing.assert_array_equal(sq_dist_np(A, B, is_cat, w), r2)
    root = np.sqrt(5.0 * r2)
    exp_part = np.exp(-root)
    value, deriv = matern52_np(r2)
    np.testing.assert_array_equal(value, exp_part * (1.0 + root + (5.0 / 3.0) * r2))
    np.testing.assert_array_equal(deriv, (-5.0 / 6.0) * (1.0 + root) * exp_part)
    np.testing.assert_array_equal(matern52_value_np(r2), value)
    assert matern52_value_np(np.float64(0.0)) == 1.0  # 0-d input


# --- posterior ------------------------------------------------------------------------------------
def test_posterior_matches_botorch_single_task_gp():
    from botorch.models import SingleTaskGP
    from gpytorch.kernels import MaternKernel, ScaleKernel

    rng = np.random.default_rng(1)
    X, Xq = rng.random((7, 2)), rng.random((5, 2))
    y = np.sin(6 * X[:, 0]) + X[:, 1]
    y = (y - y.mean()) / y.std()
    ell, s, noise = np.array([0.4, 0.9]), 1.3, 1e-3
    model = SingleTaskGP(
        torch.from_numpy(X),
        torch.from_numpy(y).unsqueeze(-1),
        covar_module=ScaleKernel(MaternKernel(nu=2.5, ard_num_dims=2)),
        outcome_transform=None,
    )
    model.covar_module.base_kernel.lengthscale = torch.from_numpy(ell)
    model.covar_module.outputscale = s
    model.likelihood.noise = noise
    model.mean_module.constant = 0.0
    model.eval()
    with torch.no_grad():
        post = model.posterior(torch.from_numpy(Xq))
    mean, var = _gp(X, y, [False, False], ell, s, noise).posterior(Xq)
    np.testing.assert_allclose(mean, post.mean.squeeze(-1).numpy(), atol=1e-8)
    np.testing.assert_allclose(var, post.variance.squeeze(-1).numpy(), atol=1e-8)


def test_joint_posterior_diagonal_is_marginal_variance():
    rng = np.random.default_rng(2)
    X, Xq = rng.random((6, 3)), rng.random((4, 3))
    gp = _gp(X, rng.standard_normal(6), [False, False, True], [0.5, 0.5, 1.0])
    mean, var = gp.posterior(Xq)
    jmean, cov = gp.joint_posterior(Xq)
    np.testing.assert_allclose(jmean, mean, atol=1e-12)
    np.testing.assert_allclose(np.diagonal(cov), var, atol=1e-10)
    np.testing.assert_allclose(cov, cov.T, atol=1e-12)


def test_posterior_gradient_matches_finite_differences():
    rng = np.random.default_rng(3)
    X, Xq = rng.random((8, 3)), rng.random((4, 3))
    gp = _gp(X, rng.standard_normal(8), [False, False, False], [0.3, 0.6, 0.9])
    _, _, dmean, dvar = gp.posterior_and_grad(Xq)
    h = 1e-6
    for j in range(3):
        e = np.zeros(3)
        e[j] = h
        (mp, vp), (mm, vm) = gp.posterior(Xq + e), gp.posterior(Xq - e)
        np.testing.assert_allclose(dmean[:, j], (mp - mm) / (2 * h), rtol=1e-5, atol=1e-7)
        np.testing.assert_allclose(dvar[:, j], (vp - vm) / (2 * h), rtol=1e-5, atol=1e-7)


# --- acquisition ----------------------------------------------------------------------------------
def test_log_ei_matches_closed_form():
    mean = np.linspace(-3, 3, 25)
    var = np.full(25, 0.7)
    sigma = np.sqrt(var)
    z = (mean - 0.4) / sigma
    expected = np.log(sigma * (z * norm.cdf(z) + norm.pdf(z)))
    np.testing.assert_allclose(log_ei(mean, var, 0.4), expected, rtol=1e-10)
    assert math.isclose(
        math.exp(log_ei(np.array([-0.5]), np.array([1.0]), 0.0)[0]), 0.19780, abs_tol=1e-5
    )


def test_log_h_is_finite_and_monotone_where_ei_underflows():
    z = -np.logspace(-3, 100, 400)[::-1]  # from -1e100 up to -1e-3
    values = log_h(z)
    assert np.isfinite(values).all()
    assert (np.diff(values) > 0).all()
    # asymptotics: log h(z) ~ -z^2/2 - log(2 pi)/2 - 2 log|z| for z -> -inf
    assert math.isclose(
        log_h(np.array([-1e4]))[0], -5e7 - 0.5 * math.log(2 * math.pi) - 2 * math.log(1e4)
    )
    # continuity across the branch points z = -1 and z = -1/sqrt(eps)
    for b in (-1.0, -1.0 / math.sqrt(np.finfo(float).eps)):
        lo, hi = log_h(np.array([b * (1 + 1e-12), b * (1 - 1e-12)]))
        assert math.isclose(lo, hi, rel_tol=1e-8)


def test_log_ei_gradient_matches_finite_differences():
    mean, var = np.array([-40.0, -3.0, -0.2, 0.5, 4.0]), np.array([0.3, 1.0, 0.01, 2.0, 0.5])
    _, d_mean, d_var = log_ei_and_grad(mean, var, 0.1)
    h = 1e-6
    fd_mean = (log_ei(mean + h, var, 0.1) - log_ei(mean - h, var, 0.1)) / (2 * h)
    fd_var = (log_ei(mean, var + h * var, 0.1) - log_ei(mean, var - h * var, 0.1)) / (2 * h * var)
    np.testing.assert_allclose(d_mean, fd_mean, rtol=1e-5)
    np.testing.assert_allclose(d_var, fd_var, rtol=1e-5, atol=1e-8)


def test_ei_and_pi_match_closed_forms_and_finite_differences():
    mean, var, best = np.array([-1.0, 0.0, 0.3, 2.0]), np.array([0.5, 1.0, 0.04, 2.0]), 0.2
    sigma = np.sqrt(var)
    z = (mean - best) / sigma
    ei, d_mean, d_var = ei_and_grad(mean, var, best)
    np.testing.assert_allclose(ei, sigma * (z * norm.cdf(z) + norm.pdf(z)), rtol=1e-12)
    np.testing.assert_allclose(np.log(ei), log_ei(mean, var, best), rtol=1e-10)
    p, p_mean, p_var = pi_and_grad(mean, var, best)
    np.testing.assert_allclose(p, norm.cdf(z), rtol=1e-12)
    h = 1e-6
    for f, dm, dv in ((ei_and_grad, d_mean, d_var), (pi_and_grad, p_mean, p_var)):
        fd_m = (f(mean + h, var, best)[0] - f(mean - h, var, best)[0]) / (2 * h)
        fd_v = (f(mean, var + h, best)[0] - f(mean, var - h, best)[0]) / (2 * h)
        np.testing.assert_allclose(dm, fd_m, rtol=1e-6, atol=1e-9)
        np.testing.assert_allclose(dv, fd_v, rtol=1e-6, atol=1e-9)


def _toy_gp():
    rng = np.random.default_rng(4)
    X = rng.random((10, 2))
    y = -((X - 0.3) ** 2).sum(1)
    return _gp(X, (y - y.mean()) / y.std(), [False, False], [0.3, 0.5])


@pytest.mark.parametrize("kind", ["logei", "ei", "pi", "ucb"])
def test_pibo_hand_computed_values(kind):
    """Eq. 6: a(x) * pi(x)^gamma; log form for LogEI / UCB; 1e-12 floor; gamma = 0 is plain."""
    gp = _toy_gp()
    Xq = np.array([[0.2, 0.4], [0.8, 0.1], [0.5, 0.5]])
    log_pi = np.array([1.5, -40.0, 0.0])  # the second is below the floor log(1e-12) = -27.6

    def log_prior(Z):
        return np.array([log_pi[int(np.argmin(np.abs(Xq - z).sum(1)))] for z in Z])

    gamma, best = 0.7, 0.5
    mean, var = gp.posterior(Xq)
    pi_floored = np.exp(np.maximum(log_pi, math.log(1e-12)))
    sigma, z = np.sqrt(var), (mean - best) / np.sqrt(var)
    plain = {
        "ei": sigma * (z * norm.cdf(z) + norm.pdf(z)),
        "pi": norm.cdf(z),
        "logei": log_ei(mean, var, best),
        "ucb": mean + math.sqrt(2.0) * sigma,
    }[kind]
    expected = {
        "ei": plain * pi_floored**gamma,
        "pi": plain * pi_floored**gamma,
        "logei": plain + gamma * np.log(pi_floored),
        "ucb": np.log(np.log1p(np.exp(plain - best))) + gamma * np.log(pi_floored),
    }[kind]
    got = Criterion(gp, kind, best, PriorWeight(log_prior, gamma)).value(Xq)
    np.testing.assert_allclose(got, expected, rtol=1e-10)
    flat = Criterion(gp, kind, best, PriorWeight(lambda Z: np.zeros(len(Z)), gamma)).value(Xq)
    if kind != "ucb":  # a flat prior leaves the criterion exactly unchanged
        np.testing.assert_allclose(flat, plain, rtol=1e-12)
    else:  # UCB is shifted (softplus), which keeps its argmax
        assert np.argmax(flat) == np.argmax(plain)
    off = Criterion(gp, kind, best, PriorWeight(log_prior, 0.0)).value(Xq)
    np.testing.assert_allclose(off, plain, rtol=1e-12)


def test_log_softplus_is_stable_and_increasing():
    u = np.array([-1e6, -50.0, -29.9, 0.0, 5.0, 800.0])
    v, g = log_softplus(u)
    assert np.isfinite(v).all() and np.isfinite(g).all() and (np.diff(v) > 0).all()
    np.testing.assert_allclose(v[3], math.log(math.log(2.0)))


@pytest.mark.parametrize("kind", ["logei", "ei", "pi", "ucb"])
@pytest.mark.parametrize("with_prior", [False, True])
def test_criterion_gradient_matches_finite_differences(kind, with_prior):
    rng = np.random.default_rng(4)
    X, Xq = rng.random((10, 2)), rng.random((3, 2)) * 0.8 + 0.1
    y = -((X - 0.3) ** 2).sum(1)
    gp = _gp(X, (y - y.mean()) / y.std(), [False, False], [0.3, 0.5])

    def log_prior(Z):
        return -0.5 * (((Z - 0.7) / 0.2) ** 2).sum(1)

    prior = PriorWeight(log_prior, 2.0) if with_prior else None
    crit = Criterion(gp, kind, 0.5, prior)
    cols = np.array([0, 1])
    values, grad = crit.value_and_grad(Xq, cols)
    np.testing.assert_allclose(values, crit.value(Xq), rtol=1e-12)
    h = 1e-6
    for j in cols:
        e = np.zeros(2)
        e[j] = h
        fd = (crit.value(Xq + e) - crit.value(Xq - e)) / (2 * h)
        np.testing.assert_allclose(grad[:, j], fd, rtol=1e-4, atol=1e-6)


# --- MAP fit --------------------------------------------------------------------------------------
def test_map_fit_recovers_a_long_lengthscale_for_an_irrelevant_column():
    rng = np.random.default_rng(6)
    X = rng.random((30, 2))
    y = np.sin(6 * X[:, 0])
    gp = MaternGP(np.array([False, False]))
    gp.condition(X, y, rng)
    fit = gp.last_fit
    assert np.isfinite(fit.map_objective)
    assert fit.lengthscales[1] > 3 * fit.lengthscales[0]
    assert fit.noise < 1e-2


# --- batched L-BFGS-B -----------------------------------------------------------------------------
def test_batched_lbfgsb_matches_sequential_scipy():
    centers = np.array([[0.2, 0.9], [0.6, 0.1], [0.5, 0.5]])

    def fun(idx, X):
        diff = X - centers[idx]
        return (diff**4).sum(1) + (diff**2).sum(1), 4 * diff**3 + 2 * diff

    x0 = np.array([[0.9, 0.1], [0.0, 0.0], [0.3, 0.8]])
    bounds = np.array([[0.0, 1.0], [0.0, 1.0]])
    xs, fs = batched_lbfgsb(fun, x0, bounds, pgtol=1e-8)
    for i in range(3):
        res = scipy.optimize.minimize(
            lambda x, i=i: tuple(a[0] for a in fun(np.array([i]), x[None])),
            x0[i],
            jac=True,
            method="L-BFGS-B",
            bounds=bounds,
            options={"gtol": 1e-8, "ftol": 1e7 * np.finfo(float).eps},
        )
        np.testing.assert_array_equal(xs[i], res.x)
        assert fs[i] == res.fun


def _rosenbrock_rows(idx, X):
    """Rosenbrock per row, each row computed alone (so batching cannot change its bits)."""
    values, grads = np.empty(len(X)), np.empty_like(X)
    for r, x in enumerate(X):
        a, b = x[:-1], x[1:]
        values[r] = float((100.0 * (b - a * a) ** 2 + (1 - a) ** 2).sum())
        g = np.zeros_like(x)
        g[:-1] = -400.0 * a * (b - a * a) - 2.0 * (1 - a)
        g[1:] += 200.0 * (b - a * a)
        grads[r] = g
    return values, grads


@pytest.mark.parametrize("direct", [True, False])
@pytest.mark.parametrize("maxiter", [3, 200])
def test_batched_lbfgsb_takes_scipys_steps_with_one_sided_bounds_and_caps(
    monkeypatch, direct, maxiter
):
    """Both drivers (SciPy's step routine called directly, and the public API start by start)
    return SciPy's own result from every start, with its iteration cap, open bounds (nbd codes
    0, 1 and 3) and starts outside the box (clipped), after as many evaluations as SciPy's."""
    import headstart._engine.lbfgsb as lbfgsb

    monkeypatch.setattr(lbfgsb, "DIRECT", direct and lbfgsb.DIRECT)
    x0 = np.array([[-1.2, 1.0, 0.5], [2.5, -0.3, 0.0], [0.0, 0.0, 3.0], [0.9, 0.9, 0.9]])
    bounds = np.array([[-2.0, 2.0], [-np.inf, 1.5], [0.2, np.inf]])
    rows = []

    def counted(idx, X):
        rows.append(len(idx))
        return _rosenbrock_rows(idx, X)

    xs, fs = lbfgsb.batched_lbfgsb(counted, x0, bounds, maxiter=maxiter, pgtol=1e-9)
    nfev = 0
    for i in range(len(x0)):
        res = scipy.optimize.minimize(
            lambda x: tuple(a[0] for a in _rosenbrock_rows(None, x[None])),
            x0[i],
            jac=True,
            method="L-BFGS-B",
            bounds=bounds,
            options={"maxiter": maxiter, "gtol": 1e-9, "ftol": 1e7 * np.finfo(float).eps},
        )
        np.testing.assert_array_equal(xs[i], res.x)
        assert fs[i] == res.fun
        nfev += res.nfev
    assert sum(rows) == nfev
    if lbfgsb.DIRECT:  # batched: as many calls as the slowest start needs
        assert len(rows) < nfev and rows[0] == len(x0)


def test_batched_lbfgsb_refuses_inverted_bounds_and_takes_no_starts():
    def fun(idx, X):
        return (X**2).sum(1), 2 * X

    with pytest.raises(ValueError, match="lower bound"):
        batched_lbfgsb(fun, np.zeros((2, 2)), np.array([[0.0, 1.0], [1.0, 0.0]]))
    xs, fs = batched_lbfgsb(fun, np.zeros((0, 2)), np.array([[0.0, 1.0], [0.0, 1.0]]))
    assert xs.shape == (0, 2) and fs.shape == (0,)


def test_the_step_routine_is_driven_directly_on_the_scipy_versions_it_knows():
    """A SciPy whose private ``setulb`` changed would silently fall back to the slower path;
    on the versions whose signature this module was written against it must not."""
    import headstart._engine.lbfgsb as lbfgsb

    major, minor = (int(p) for p in scipy.__version__.split(".")[:2])
    if not (1, 15) <= (major, minor) <= (1, 17):
        pytest.skip(f"SciPy {scipy.__version__}: not a version the direct driver was checked on")
    assert lbfgsb.DIRECT


# --- suggest --------------------------------------------------------------------------------------
MIXED = [
    DimSpec("continuous"),
    DimSpec("integer", (np.arange(5) + 0.5) / 5),
    DimSpec("categorical", (np.arange(3) + 0.5) / 3),
    DimSpec("integer", (np.arange(40) + 0.5) / 40),
]


def _mixed_data(n, seed=0):
    rng = np.random.default_rng(seed)
    X = MixedSpace(tuple(d.grid for d in MIXED), np.array([d.kind == "categorical" for d in MIXED]))
    X = X.snap(rng.random((n, 4)))
    y = -((X - 0.6) ** 2).sum(1) + 0.3 * (X[:, 2] == 0.5)
    return X, y


@pytest.mark.parametrize("acquisition", ["logei", "ucb", "ts"])
def test_suggest_shape_grids_and_determinism(acquisition):
    X, y = _mixed_data(12)
    xs = [
        gp_engine(MIXED, acquisition=acquisition).suggest(X, y, rng=np.random.default_rng(7))
        for _ in range(2)
    ]
    np.testing.assert_array_equal(xs[0], xs[1])
    x = xs[0]
    assert x.shape == (4,)
    assert ((x >= 0) & (x <= 1)).all()
    for j, dim in enumerate(MIXED):
        if dim.grid is not None:
            assert x[j] in dim.grid
    assert not is_duplicate(x[None], X)[0]


def test_suggest_warm_starts_and_reports_last_fit():
    X, y = _mixed_data(12)
    opt = gp_engine(MIXED)
    assert opt.surrogate.last_fit is None
    opt.suggest(X[:11], y[:11], rng=np.random.default_rng(0))
    assert not opt.surrogate.last_fit.warm_started
    opt.suggest(X, y, rng=np.random.default_rng(1))
    fit = opt.surrogate.last_fit
    assert fit.n_train == 12 and fit.lengthscales.shape == (4,)
    assert fit.noise >= 1e-6 and fit.outputscale > 0 and np.isfinite(fit.mll)


def test_deterministic_fixes_the_noise_at_its_minimum():
    X, y = _mixed_data(12)
    noisy = gp_engine(MIXED)
    noisy.suggest(
        X, y + 0.3 * np.random.default_rng(5).standard_normal(12), rng=np.random.default_rng(0)
    )
    exact = gp_engine(MIXED, deterministic=True)
    exact.suggest(X, y, rng=np.random.default_rng(0))
    assert exact.surrogate.last_fit.noise == pytest.approx(1e-6, rel=1e-6)
    assert noisy.surrogate.last_fit.noise > 1e-4  # fitted, not pinned


def test_suggest_handles_constant_and_single_observations():
    opt = gp_engine([DimSpec("continuous")] * 2)
    x = opt.suggest(np.array([[0.5, 0.5], [0.2, 0.1]]), np.zeros(2), rng=np.random.default_rng(0))
    assert x.shape == (2,) and np.isfinite(x).all()
    x = opt.suggest(np.array([[0.5, 0.5]]), np.ones(1), rng=np.random.default_rng(0))
    assert x.shape == (2,) and np.isfinite(x).all()


@pytest.mark.parametrize("acquisition", ["logei", "ei", "pi", "ucb", "ts"])
def test_prior_pulls_suggestion_to_its_mode(acquisition):
    rng = np.random.default_rng(8)
    X = rng.random((8, 2))
    y = -((X - 0.5) ** 2).sum(1)
    mode = np.array([0.1, 0.9])

    def log_prior(Z):
        return -0.5 * (((Z - mode) / 0.03) ** 2).sum(1)

    opt = gp_engine([DimSpec("continuous")] * 2, acquisition=acquisition)
    prior = PriorWeight(log_prior, 50.0)
    x = opt.suggest(X, y, rng=np.random.default_rng(0), prior=prior)
    assert np.linalg.norm(x - mode) < 0.1
    x0 = opt.suggest(X, y, rng=np.random.default_rng(0), prior=PriorWeight(log_prior, 0.0))
    assert np.linalg.norm(x0 - mode) > np.linalg.norm(x - mode)


def test_one_dimensional_quadratic_converges():
    opt = gp_engine([DimSpec("continuous")])
    X = np.array([[0.05], [0.5], [0.95]])
    for t in range(8):
        y = -((X[:, 0] - 0.3) ** 2)
        x = opt.suggest(X, y, rng=np.random.default_rng(t))
        X = np.vstack([X, x])
    assert abs(X[np.argmax(-((X[:, 0] - 0.3) ** 2)), 0] - 0.3) < 0.02


def test_discrete_space_does_not_resuggest_training_points():
    dims = [
        DimSpec("categorical", (np.arange(3) + 0.5) / 3),
        DimSpec("integer", np.array([0.25, 0.75])),
    ]
    space = MixedSpace(tuple(d.grid for d in dims), np.array([True, False]))
    all_points = space.snap(np.array([[a, b] for a in (0.1, 0.5, 0.9) for b in (0.25, 0.75)]))
    X = all_points[:1]
    opt = gp_engine(dims)
    for t in range(5):  # a flat objective: every criterion ties
        x = opt.suggest(X, np.zeros(len(X)), rng=np.random.default_rng(t))
        assert not is_duplicate(x[None], X)[0]
        X = np.vstack([X, x])
    assert len(np.unique(X, axis=0)) == 6


def test_single_choice_categorical_and_thread_limit_restored():
    from headstart._engine.threads import limit_threads

    before = torch.get_num_threads()
    torch.set_num_threads(3)  # not what the test run uses (one thread per worker)
    try:
        with limit_threads():
            assert torch.get_num_threads() == 1
        assert torch.get_num_threads() == 3
    finally:
        torch.set_num_threads(before)
    dims = [DimSpec("categorical", np.array([0.5])), DimSpec("continuous")]
    X = np.array([[0.5, 0.1], [0.5, 0.9], [0.5, 0.4]])
    x = gp_engine(dims).suggest(X, -X[:, 1], rng=np.random.default_rng(0))
    assert x[0] == 0.5 and 0.0 <= x[1] <= 1.0


def test_dimspec_validation():
    with pytest.raises(ValueError):
        DimSpec("ordinal")
    with pytest.raises(ValueError):
        DimSpec("integer")
    with pytest.raises(ValueError):
        gp_engine([DimSpec("continuous")], acquisition="pes")


def test_long_study_warm_fits_match_a_from_scratch_fit():
    """A study's surrogate at n = 490, reached by warm-started fits every 10 points from a cold fit
    at n = 400 (no default refit on the way: the schedule's next one is due at 500), has the
    posterior of a fresh fit on the same 490 points."""
    from headstart._gp.surrogate import MaternGP, default_refit_due

    rng = np.random.default_rng(7)
    X = rng.uniform(0, 1, (490, 3))
    y = np.sin(6 * X[:, 0]) + (X[:, 1] - 0.5) ** 2 * 4 + 0.3 * X[:, 2] + 0.05 * rng.normal(size=490)
    study = MaternGP(np.zeros(3, bool))
    study.condition(X[:400], y[:400], rng)
    for n in range(410, 500, 10):
        assert not default_refit_due(n, 400)
        gp, _ = study.condition(X[:n], y[:n], rng)
    assert study.last_fit.warm_started
    fresh, _ = MaternGP(np.zeros(3, bool)).condition(X, y, rng)
    X_test = rng.uniform(0, 1, (200, 3))
    mean, var = gp.posterior(X_test)
    mean_ref, var_ref = fresh.posterior(X_test)
    assert np.max(np.abs(mean - mean_ref)) < 1e-3
    np.testing.assert_allclose(np.sqrt(var), np.sqrt(var_ref), rtol=1e-2)
    assert gp.mll == pytest.approx(fresh.mll, abs=1e-3 * abs(fresh.mll))


def test_default_refit_schedule_is_geometric():
    from headstart._gp.surrogate import default_refit_due

    due, last = [], 0
    for n in range(1, 1001):
        if default_refit_due(n, last):
            due.append(n)
            last = n
    assert due[:5] == [5, 10, 15, 20, 25]  # every 5 points while the study is small
    assert len(due) == 21 and due[-1] == 929  # then every 25% more points: O(log n)


def test_a_fit_under_an_extreme_learned_prior_is_not_taken_for_a_failure():
    """MPHD's pre-training yields noise rates near 1e15 (the range allows 1e100), so the MAP
    objective can exceed 1e10: a real value, not the failure of every start (it was taken for
    one with a 1e10 failure sentinel)."""
    from headstart._gp.hyperprior import gamma_hyperprior

    prior = gamma_hyperprior(((2.0, 2.0), (8.0, 8.0)), (2.0, 1.0), (1.1, 1e17))
    rng = np.random.default_rng(0)
    X = rng.random((4, 2))
    gp = MaternGP(np.zeros(2, dtype=bool), hyperprior=prior)
    gp.condition(X, np.sin(6 * X[:, 0]), rng)
    assert np.isfinite(gp.last_fit.map_objective) and gp.last_fit.map_objective > 1e10


@pytest.mark.parametrize("kind", ["logei", "ei", "pi", "ucb"])
@pytest.mark.parametrize("with_prior", [False, True])
def test_criterion_values_do_not_depend_on_the_screening_chunk(kind, with_prior):
    """The screening asks the posterior ``SCREEN_CHUNK`` rows at a time: the values are those of
    one call (up to rounding), for every kind, with and without a piBO prior, also when the rows
    do not divide evenly into chunks (BLAS blocking may differ in the last bits, which tiny linear EI values amplify)."""
    from headstart._engine.acquisition import SCREEN_CHUNK

    gp = _toy_gp()
    X = np.random.default_rng(5).random((2 * SCREEN_CHUNK + 37, 2))
    prior = PriorWeight(lambda Z: -((Z - 0.3) ** 2).sum(1), 0.5) if with_prior else None
    crit = Criterion(gp, kind, 0.5, prior)
    whole = crit.value(X, chunk=len(X))
    for chunk in (SCREEN_CHUNK, 100, 1):
        np.testing.assert_allclose(crit.value(X, chunk=chunk), whole, rtol=1e-6)
    np.testing.assert_array_equal(crit.value(X[:0]), np.empty(0))


class _Bowl:
    """A posterior whose mean is a bowl ``-|x - centre|^2`` at a fixed variance; ``focus``
    returns ``focused`` (the protocol's optional smooth stand-in). Counts its gradient calls."""

    outputscale, includes_noise = 1.0, False

    def __init__(self, centre, focused=None):
        self.centre, self.focused, self.lengthscales = np.asarray(centre), focused, None
        self.grad_calls = 0

    def posterior(self, X):
        X = np.atleast_2d(X)
        return -((X - self.centre) ** 2).sum(1), np.full(len(X), 0.01)

    def posterior_and_grad(self, X):
        self.grad_calls += 1
        mean, var = self.posterior(X)
        return mean, var, -2.0 * (np.atleast_2d(X) - self.centre), np.zeros_like(X)

    def joint_posterior(self, X):
        mean, var = self.posterior(X)
        return mean, np.diag(var)

    def focus(self, X):
        return self if self.focused is None else self.focused


def test_local_search_climbs_the_posteriors_focus_and_scores_end_points_with_the_posterior():
    """``Posterior.focus``: the L-BFGS-B runs climb the stand-in (here a bowl at the other
    corner), but every end point is scored by the posterior itself, so the suggestion is the
    posterior's best point, not the stand-in's."""
    focused = _Bowl([0.9, 0.9])
    posterior = _Bowl([0.2, 0.3], focused)
    criterion = Criterion(posterior, "ucb", 0.0, beta=0.0)
    space = MixedSpace((None, None), np.zeros(2, dtype=bool))
    rng = np.random.default_rng(0)
    X = rng.random((5, 2))
    x = optimize_criterion(criterion, space, X, -((X - 0.2) ** 2).sum(1), rng, np.ones(2))
    assert focused.grad_calls > 0 and posterior.grad_calls == 0
    assert np.linalg.norm(x - [0.2, 0.3]) < 0.1  # a screened point near the posterior's top
    assert criterion.focused(X) is not criterion and criterion.posterior is posterior
    plain = Criterion(_Bowl([0.2, 0.3]), "ucb", 0.0, beta=0.0)
    assert plain.focused(X) is plain  # focus returning the posterior itself: no copy


def test_the_multi_output_search_climbs_each_outputs_focus():
    """Several outputs (``MultiOutputCriterion``): the local search climbs each output's
    stand-in where it has one (ABRAC past its exact block as one objective), the end points are
    scored on the outputs themselves, and the outputs' search settings combine as the cheapest
    (issue 32)."""
    from headstart._engine.multi_output import MultiOutputCriterion, StackedPosterior

    focused = _Bowl([0.9, 0.9])
    first, second = _Bowl([0.2, 0.3], focused), _Bowl([0.3, 0.2])
    first.search_starts, second.search_starts, second.screening_points = 4, 7, 512
    stacked = StackedPosterior([first, second])
    assert (stacked.search_starts, stacked.screening_points) == (4, 512)
    criterion = MultiOutputCriterion(stacked, 1, np.array([10.0]), best_f=-1.0)
    rng = np.random.default_rng(0)
    X = rng.random((5, 2))
    y = np.stack([-((X - 0.2) ** 2).sum(1), -((X - 0.3) ** 2).sum(1) - 1.0], axis=1)
    # one objective (the first output) and one constraint (the second; feasible everywhere)
    x = optimize_criterion(criterion, MixedSpace((None, None), np.zeros(2, bool)), X, y[:, 0],
                           rng, np.ones(2))  # fmt: skip
    assert focused.grad_calls > 0 and first.grad_calls == 0 and second.grad_calls > 0
    assert np.linalg.norm(x - [0.2, 0.3]) < 0.1
    search = criterion.focused(X)
    assert search is not criterion and search.posterior.posteriors[0] is focused
    assert criterion.posterior is stacked
    plain = MultiOutputCriterion(StackedPosterior([second]), 1, np.zeros(0), best_f=-1.0)
    assert plain.focused(X) is plain


def test_the_stand_in_is_made_again_where_discrete_moves_took_the_starts():
    """On a mixed space the search alternates L-BFGS-B on the continuous columns with moves on
    the discrete ones; once the moves have taken the starts elsewhere, the next round climbs a
    stand-in made around where they are now, not where they began (issue 32)."""

    class Recording(_Bowl):
        def __init__(self, centre):
            super().__init__(centre)
            self.focused_at = []

        def focus(self, X):
            self.focused_at.append(np.array(X, copy=True))
            return _Bowl(self.centre)

    posterior = Recording([0.3, 1.0])  # the bowl's floor at the categorical column's value 1
    criterion = Criterion(posterior, "ucb", 0.0, beta=0.0)
    space = MixedSpace((None, np.array([0.0, 0.5, 1.0])), np.array([False, True]))
    rng = np.random.default_rng(0)
    X = space.snap(rng.random((6, 2)))
    X[:, 1] = 0.0  # every trial at the categorical value 0: the starts' moves change it
    x = optimize_criterion(criterion, space, X, -((X - 0.3) ** 2).sum(1), rng, np.ones(2))
    assert len(posterior.focused_at) >= 2  # made again after the first round's moves
    first, later = posterior.focused_at[0], posterior.focused_at[-1]
    assert not np.array_equal(first, later)
    assert x[1] == 1.0 and abs(x[0] - 0.3) < 0.05


class _Spike(_Bowl):
    """A narrow peak ``exp(-|x - centre|^2 / (2 w^2))``: flat (no gradient to follow) wherever
    the screening points lie, as EHVI is away from a front that fills a thin set."""

    width = 0.01

    def posterior(self, X):
        X = np.atleast_2d(X)
        r2 = ((X - self.centre) ** 2).sum(1)
        return np.exp(-0.5 * r2 / self.width**2), np.full(len(X), 1e-6)

    def posterior_and_grad(self, X):
        mean, var = self.posterior(X)
        dmean = -(np.atleast_2d(X) - self.centre) / self.width**2 * mean[:, None]
        return mean, var, dmean, np.zeros_like(dmean)


def test_warm_starts_reach_a_peak_that_no_screened_start_sees():
    """``optimize_criterion(warm_starts=...)`` (the Pareto-optimal trials, with several
    objectives): a start beside a narrow peak climbs it; without it the search ends elsewhere
    (every screened start sits where the criterion is flat)."""
    centre = np.array([0.0, 0.37, 0.0, 0.0])  # on an edge of the cube, as ZDT's front
    criterion = Criterion(_Spike(centre), "ucb", 0.0, beta=0.0)
    space = MixedSpace((None,) * 4, np.zeros(4, dtype=bool))
    X = np.array([[0.9, 0.9, 0.9, 0.9], [0.0, 0.35, 0.0, 0.0]])  # the incumbent is the first
    y = np.array([1.0, 0.0])
    found = optimize_criterion(criterion, space, X, y, np.random.default_rng(0), np.ones(4),
                               warm_starts=X[1:])  # fmt: skip
    np.testing.assert_allclose(found, centre, atol=1e-3)
    missed = optimize_criterion(criterion, space, X, y, np.random.default_rng(0), np.ones(4))
    assert np.linalg.norm(missed - centre) > 0.01
