"""Output warping (``headstart._gp.warping``): closed forms, monotonicity, degenerate inputs."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from headstart._gp.warping import OUTPUT_WARPS, warp_targets, yeo_johnson


@pytest.mark.parametrize("lam", [-1.0, 0.0, 0.5, 1.0, 2.0, 3.0])
def test_yeo_johnson_matches_the_closed_form_and_scipy(lam):
    y = np.array([-3.0, -0.5, 0.0, 0.4, 2.0])
    expected = [
        ((v + 1) ** lam - 1) / lam if v >= 0 and lam != 0 else
        np.log1p(v) if v >= 0 else
        -((1 - v) ** (2 - lam) - 1) / (2 - lam) if lam != 2 else -np.log1p(-v)
        for v in y
    ]  # fmt: skip
    np.testing.assert_allclose(yeo_johnson(y, lam), expected, rtol=1e-12)
    np.testing.assert_allclose(yeo_johnson(y, lam), stats.yeojohnson(y, lmbda=lam), rtol=1e-12)
    assert yeo_johnson(y, 1.0) == pytest.approx(y)  # lambda = 1 is the identity


def test_a_diverged_run_no_longer_dominates_the_scale():
    """Maximized targets: nine good runs near 0 and one diverged at -50."""
    y = np.array([-0.30, -0.25, -0.22, -0.20, -0.28, -0.21, -0.26, -0.24, -0.23, -50.0])
    plain, warped = warp_targets(y, "none"), warp_targets(y, "yeo-johnson")
    spread = lambda z: np.ptp(z[:9])  # noqa: E731 -- the good runs' spread, in standard units
    assert spread(warped) > 5 * spread(plain)
    copula = warp_targets(y, "copula")
    assert spread(copula) > 5 * spread(plain)


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.floats(-1e6, 1e6, allow_nan=False), min_size=1, max_size=30),
    st.sampled_from(OUTPUT_WARPS),
)
def test_every_warp_is_finite_standardized_and_keeps_the_order(values, kind):
    y = np.array(values)
    z = warp_targets(y, kind)
    assert z.shape == y.shape and np.all(np.isfinite(z))
    order = np.argsort(y, kind="stable")
    assert np.all(np.diff(z[order]) >= -1e-9)  # non-decreasing in y: the incumbent stays
    if np.ptp(y) > 1e-6 * max(1.0, np.abs(y).max()):
        assert abs(z.mean()) < 1e-6 and z.std() == pytest.approx(1.0, abs=1e-6)


def test_an_unknown_warp_is_refused():
    with pytest.raises(ValueError, match="output_warp must be one of"):
        warp_targets(np.zeros(3), "log")


def test_the_gp_option_validates_and_reaches_the_surrogate():
    import headstart as hs
    from headstart.exceptions import InvalidSettingError

    space = hs.SearchSpace({"x": hs.Float(0.0, 1.0), "n": hs.Int(1, 9)})
    study = hs.create_study("w", space, storage=None, method="gp", seed=0, output_warp="copula")
    for _ in range(6):
        trial = study.ask()
        study.tell(trial, -((trial.params["x"] - 0.3) ** 2) * 1e4)  # one huge tail
    assert study._strategy._engine._surrogate.output_warp == "copula"
    with pytest.raises(InvalidSettingError, match="output_warp must be one of"):
        hs.create_study("w2", space, storage=None, method="gp", output_warp="log")
    with pytest.raises(InvalidSettingError, match="is the Matérn GP's"):
        hs.create_study("w3", space, storage=None, output_warp="copula", kernel="SE[0]")


@pytest.mark.parametrize("tail", [0.0, 3.0, -3.0])
def test_yeo_johnsons_log_jacobian_is_the_sum_of_the_maps_slopes(tail):
    """``yeo_johnson_targets`` returns ``warp_targets(y, "yeo-johnson")`` and ``sum log du/dz``
    at the fitted lambda (``z`` the standardized ``y``), here by central differences."""
    from scipy import stats

    from headstart._engine.numerics import standardize
    from headstart._gp.warping import yeo_johnson, yeo_johnson_targets

    rng = np.random.default_rng(7)
    y = rng.normal(size=40) + (np.exp(tail * rng.random(40)) if tail else 0.0)
    u, log_det, fitted = yeo_johnson_targets(y)
    np.testing.assert_array_equal(u, warp_targets(y, "yeo-johnson"))
    z = standardize(y)[0]
    lam = float(np.clip(stats.yeojohnson_normmax(z), -3.0, 5.0))
    assert fitted == lam
    again = yeo_johnson_targets(y, lam)  # a given lambda: no refit, the same map
    np.testing.assert_array_equal(again[0], u)
    assert again[1:] == (log_det, lam)
    scale = yeo_johnson(z, lam).std()
    h = 1e-6
    slopes = (yeo_johnson(z + h, lam) - yeo_johnson(z - h, lam)) / (2 * h) / scale
    assert log_det == pytest.approx(float(np.log(slopes).sum()), rel=1e-6, abs=1e-6)


def test_yeo_johnsons_log_jacobian_is_zero_where_the_map_falls_back():
    from headstart._gp.warping import yeo_johnson_targets

    for y in (np.array([1.0, 2.0]), np.full(5, 3.0)):
        u, log_det, lam = yeo_johnson_targets(y)
        assert (log_det, lam) == (0.0, 1.0)
        np.testing.assert_array_equal(u, warp_targets(y, "none"))
