"""Input warping (headstart._gp.input_warping): the Kumaraswamy CDF against Beta closed forms,
the warped fit's closed-form gradient against finite differences, and what the warp learns."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

import headstart as hs
from headstart._gp import MaternGP
from headstart._gp.exact import prior_and_grad
from headstart._gp.fit_settings import MATERN_COORDS
from headstart._gp.hyperprior import DEFAULT_HYPERPRIOR
from headstart._gp.input_warping import (
    EPS,
    WarpedPosterior,
    fit_warped_gp,
    kumaraswamy_cdf,
    kumaraswamy_cdf_and_grad,
    warped_objective_and_grad,
)
from headstart._gp.model import ExactGP
from headstart._gp.params import GPParams
from headstart.exceptions import InvalidSettingError

X_GRID = np.linspace(0.0, 1.0, 41)


@pytest.mark.parametrize("b", [0.3, 1.0, 4.0])
def test_kumaraswamy_with_a_one_is_the_beta_1_b_cdf(b):
    """``a = 1``: ``1 - (1 - x)^b``, the Beta(1, b) CDF (at the pulled input)."""
    u = EPS + (1 - 2 * EPS) * X_GRID
    np.testing.assert_allclose(kumaraswamy_cdf(X_GRID, 1.0, b), stats.beta(1, b).cdf(u), atol=1e-12)


@pytest.mark.parametrize("a", [0.3, 1.0, 4.0])
def test_kumaraswamy_with_b_one_is_the_beta_a_1_cdf(a):
    """``b = 1``: ``x^a``, the Beta(a, 1) CDF."""
    u = EPS + (1 - 2 * EPS) * X_GRID
    np.testing.assert_allclose(kumaraswamy_cdf(X_GRID, a, 1.0), stats.beta(a, 1).cdf(u), atol=1e-12)


def test_kumaraswamy_is_increasing_in_the_unit_interval_and_its_derivative_matches():
    rng = np.random.default_rng(0)
    for a, b in rng.uniform(0.05, 20.0, size=(20, 2)):
        w, dw = kumaraswamy_cdf_and_grad(X_GRID, a, b)
        assert np.all(np.diff(w) >= 0) and w[0] >= 0 and w[-1] <= 1
        h = 1e-7
        inner = X_GRID[1:-1]
        fd = (kumaraswamy_cdf(inner + h, a, b) - kumaraswamy_cdf(inner - h, a, b)) / (2 * h)
        np.testing.assert_allclose(dw[1:-1], fd, rtol=1e-4, atol=1e-6 * max(1.0, fd.max()))


def _problem(seed=0, n=12, d=3, cat=False):
    rng = np.random.default_rng(seed)
    X = rng.random((n, d))
    is_cat = np.zeros(d, dtype=bool)
    if cat:
        X[:, -1] = (rng.integers(3, size=n) + 0.5) / 3
        is_cat[-1] = True
    y = np.sin(5 * X[:, 0] ** 3) + X[:, 1] ** 0.3
    return X, (y - y.mean()) / y.std(), is_cat


@pytest.mark.parametrize("cat", [False, True])
def test_the_warped_objective_gradient_matches_finite_differences(cat):
    X, y, is_cat = _problem(cat=cat)
    d, k = X.shape[1], int((~is_cat).sum())
    rng = np.random.default_rng(1)
    raw = np.concatenate([rng.normal(0, 0.5, d), [0.2, -4.0], rng.normal(0, 0.6, 2 * k)])
    _, grad = warped_objective_and_grad(raw, X, y, is_cat, DEFAULT_HYPERPRIOR)
    h = 1e-6
    fd = np.array(
        [
            (
                warped_objective_and_grad(raw + h * e, X, y, is_cat, DEFAULT_HYPERPRIOR)[0]
                - warped_objective_and_grad(raw - h * e, X, y, is_cat, DEFAULT_HYPERPRIOR)[0]
            )
            / (2 * h)
            for e in np.eye(len(raw))
        ]
    )
    np.testing.assert_allclose(grad, fd, rtol=1e-5, atol=1e-6)


def test_at_the_identity_warp_the_objective_is_the_plain_gps():
    """``a = b = 1`` (prior term 0): ``-log p(y | theta) - log p(theta)`` of the unwarped GP,
    up to the ``EPS`` pull of the inputs."""
    X, y, is_cat = _problem()
    d = X.shape[1]
    theta = GPParams.from_values(np.full(d, 0.4), 1.2, 1e-3).to_raw(MATERN_COORDS)[0]
    value, _ = warped_objective_and_grad(
        np.concatenate([theta, np.zeros(2 * d)]), X, y, is_cat, DEFAULT_HYPERPRIOR
    )
    plain = ExactGP(X, y, is_cat, GPParams.from_raw(theta, MATERN_COORDS))
    log_prior = float(prior_and_grad(theta[None], DEFAULT_HYPERPRIOR, MATERN_COORDS)[0][0])
    assert value == pytest.approx(-plain.mll - log_prior, abs=1e-4)


def test_the_fit_learns_a_cubic_warp_and_fits_better_than_the_plain_gp():
    """``f(x) = sin(8 x^3)`` varies fast only near ``x = 1``: the warp stretches that end
    (``a > 1``) and the warped GP's marginal likelihood beats the stationary one's."""
    rng = np.random.default_rng(3)
    X = rng.random((30, 1))
    y = np.sin(8 * X[:, 0] ** 3)
    is_cat = np.zeros(1, dtype=bool)
    plain, warped = MaternGP(is_cat), MaternGP(is_cat, input_warp="kumaraswamy")
    p_plain, _ = plain.condition(X, y, rng)
    p_warped, _ = warped.condition(X, y, rng)
    assert isinstance(p_warped, WarpedPosterior)
    assert p_warped.a[0] > 1.5
    assert p_warped.mll > p_plain.mll + 5.0
    assert warped.diagnostics()["warp"]["columns"] == [0]


def test_a_warm_start_state_round_trips_and_bad_states_are_refused():
    X, y, is_cat = _problem()
    gp = MaternGP(is_cat, input_warp="kumaraswamy")
    gp.condition(X, y, np.random.default_rng(0))
    state = gp.state()
    assert len(state["warp_raw"]) == 2 * X.shape[1]
    fresh = MaternGP(is_cat, input_warp="kumaraswamy")
    fresh.load_state(state)
    np.testing.assert_array_equal(fresh._warp_raw, gp._warp_raw)
    with pytest.raises(ValueError, match="warp parameters"):
        fresh.load_state({**state, "warp_raw": [float("nan")] * len(state["warp_raw"])})


def test_fit_from_two_starts_returns_one_row_each():
    X, y, is_cat = _problem()
    d = X.shape[1]
    start = np.concatenate([np.zeros(d), [0.0, -4.0], np.zeros(2 * d)])
    raw, obj = fit_warped_gp(X, y, is_cat, np.stack([start, start + 0.3]), DEFAULT_HYPERPRIOR)
    assert raw.shape == (2, 3 * d + 2) and np.isfinite(obj).all()


def test_gp_option_input_warp_reaches_the_surrogate_and_bad_values_are_refused():
    space = hs.SearchSpace(
        {"x": hs.Float(0.0, 1.0), "n": hs.Int(1, 9), "c": hs.Categorical(["a", "b"])}
    )
    study = hs.create_study("iw", space, storage=None, seed=0, input_warp="kumaraswamy")
    study.optimize(lambda p: (p["x"] - 0.3) ** 2 + p["n"] / 10 + (p["c"] == "a"), n_trials=8)
    surrogate = study._strategy._engine._surrogate
    assert surrogate.input_warp == "kumaraswamy"
    assert surrogate.warped_cols.tolist() == [0, 1]  # the categorical column is not warped
    with pytest.raises(InvalidSettingError, match="input_warp must be one of"):
        hs.create_study("iw2", space, storage=None, input_warp="beta")
    with pytest.raises(InvalidSettingError, match="is the Matérn GP's"):
        hs.create_study("iw3", space, storage=None, input_warp="kumaraswamy", kernel="SE[0]")
