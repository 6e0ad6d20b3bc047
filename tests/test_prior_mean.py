"""The GP's prior mean at a quantile of the observed values (``prior_mean``; De Ath et al. 2020)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from headstart._gp.warping import center_targets, check_prior_mean, lower_fence, warp_targets


@settings(max_examples=80, deadline=None)
@given(
    st.lists(st.floats(-1e6, 1e6, allow_nan=False), min_size=3, max_size=30),
    st.floats(0.0, 1.0),
)
def test_the_quantile_becomes_zero_and_the_shape_is_kept(values, q):
    z = warp_targets(np.array(values), "none")
    centered = center_targets(z, q)
    shift = centered - z
    assert np.ptp(shift) < 1e-9  # one constant: distances between values, and order, unchanged
    if np.ptp(z) > 0:
        assert np.quantile(centered, q) == pytest.approx(0.0, abs=1e-9)


def test_mean_and_degenerate_inputs_are_left_alone():
    z = np.array([-1.0, 0.5, 0.5])
    assert np.array_equal(center_targets(z, "mean"), z)
    assert np.array_equal(center_targets(np.array([2.0, 3.0]), 0.0), [2.0, 3.0])  # too few
    assert np.array_equal(center_targets(np.zeros(4), 0.0), np.zeros(4))  # a constant
    assert center_targets(z, 0.0).min() == 0.0  # q = 0: the worst observed value at 0
    assert np.median(center_targets(z, 0.5)) == 0.0
    distinct = np.array([-1.0, 0.5, 0.7])
    assert center_targets(distinct, "auto").min() == 0.0  # "auto": the worst ...
    assert np.array_equal(center_targets(z, "auto"), z)  # ... until two values tie


def test_auto_skips_a_diverged_worst_value():
    """``"auto"``: the worst value inside Tukey's lower fence, not an outlier below it."""
    z = np.array([-40.0, 0.0, 0.1, 0.2, 0.4, 0.5, 0.9, 1.0])  # a diverged run, then the rest
    q1, q3 = np.quantile(z, [0.25, 0.75])
    assert z[0] < q1 - 1.5 * (q3 - q1) <= z[1]  # brute force: only -40 lies below the fence
    np.testing.assert_array_equal(center_targets(z, "auto"), z - z[1])
    assert lower_fence(z[1:]) == 0.0  # no outlier: the worst value itself


@settings(max_examples=80, deadline=None)
@given(st.lists(st.floats(-1e6, 1e6, allow_nan=False), min_size=3, max_size=30, unique=True))
def test_auto_centres_on_an_observed_value_at_or_above_the_worst(values):
    z = warp_targets(np.array(values), "none")
    centered = center_targets(z, "auto")
    assert np.ptp(centered - z) < 1e-9  # one constant shift
    if np.ptp(z) > 0 and len(np.unique(z)) == len(z):
        q1, q3 = np.quantile(z, [0.25, 0.75])
        fence = q1 - 1.5 * (q3 - q1)  # brute force: Tukey's lower fence
        assert np.min(np.abs(centered)) == 0.0  # zero is an observed value ...
        assert np.all(z[centered < 0] < fence)  # ... everything below it is an outlier ...
        assert np.all(z[centered >= 0] >= fence)  # ... and nothing at or above it is
        assert np.sum(centered < 0) <= math.ceil((len(z) - 1) / 4)  # outliers lie under Q1


@pytest.mark.parametrize("bad", ["median", -0.1, 1.5, True, None, float("nan")])
def test_a_bad_prior_mean_is_refused(bad):
    with pytest.raises(ValueError, match="prior_mean must be 'mean', 'auto' or a quantile"):
        check_prior_mean(bad)


def test_the_surrogates_targets_sit_at_the_quantile():
    from headstart._gp import MaternGP

    rng = np.random.default_rng(0)
    X = rng.random((12, 2))
    y = -np.sum((X - 0.3) ** 2, axis=1) + np.where(X[:, 0] < 0.2, 3.0, 0.0)  # a skewed sample
    z = warp_targets(y, "none")
    for q in (0.0, 0.25):
        _, y_model = MaternGP(np.zeros(2, dtype=bool), prior_mean=q).condition(X, y, rng)
        assert np.quantile(y_model, q) == pytest.approx(0.0, abs=1e-12)
        np.testing.assert_allclose(y_model - z, (y_model - z)[0], atol=1e-12)
    _, y_model = MaternGP(np.zeros(2, dtype=bool)).condition(X, y, rng)
    np.testing.assert_allclose(y_model, z, atol=1e-12)  # "mean": plain standardization


def test_far_from_the_data_the_prediction_is_the_quantile():
    """With the prior mean at the worst observed value, a point far from every observation is
    predicted near that value, not near the observations' mean (which one good value pulls up)."""
    from headstart._gp import MaternGP

    X = np.array([[0.0], [0.02], [0.04], [0.06], [0.08], [0.1]])
    y = np.array([0.0, 0.0, 0.0, 0.0, 0.0, 5.0])  # maximized: one good value
    z = warp_targets(y, "none")
    far = {}
    for prior_mean in ("mean", 0.0):
        rng = np.random.default_rng(0)
        gp, y_model = MaternGP(np.zeros(1, dtype=bool), prior_mean=prior_mean).condition(X, y, rng)
        far[prior_mean] = gp.posterior(np.array([[1.0]]))[0][0] + (z - y_model)[0]  # in z units
    assert far["mean"] == pytest.approx(z.mean(), abs=0.2)
    assert far[0.0] == pytest.approx(z.min(), abs=0.2)
    assert far[0.0] < far["mean"] - 0.5 * (z.mean() - z.min())


def test_the_gp_option_validates_and_reaches_the_surrogate():
    import headstart as hs
    from headstart.exceptions import InvalidSettingError

    space = hs.SearchSpace({"x": hs.Float(0.0, 1.0), "n": hs.Int(1, 9)})
    study = hs.create_study("p", space, storage=None, method="gp", seed=0, prior_mean=0.25)
    for _ in range(6):
        trial = study.ask()
        study.tell(trial, (trial.params["x"] - 0.3) ** 2 + trial.params["n"])
    assert study._strategy._engine._surrogate.prior_mean == 0.25
    for bad in ("median", 2, -1, True):
        with pytest.raises(InvalidSettingError, match="must be 'mean', 'auto' or a quantile"):
            hs.create_study("p2", space, storage=None, method="gp", prior_mean=bad)
    with pytest.raises(InvalidSettingError, match="is the Matérn GP's"):
        hs.create_study("p3", space, storage=None, prior_mean=0.0, kernel="SE[0]")


def test_several_outputs_keep_the_mean():
    import headstart as hs
    from headstart.exceptions import InvalidSettingError

    space = hs.SearchSpace({"x": hs.Float(0.0, 1.0)})
    study = hs.create_study("c", space, storage=None, constraints=True, prior_mean="auto")
    trial = study.ask()
    study.tell(trial, trial.params["x"], constraints=[0.5 - trial.params["x"]])
    assert study._strategy.engine.surrogate.prior_mean == "mean"
    for outputs in ({"constraints": True}, {"directions": ["minimize", "maximize"]}):
        with pytest.raises(InvalidSettingError, match="applies to studies with one objective"):
            hs.create_study("c2", space, storage=None, prior_mean=0.0, **outputs)


def test_auto_with_a_kernel_expression_and_numpy_quantiles_are_accepted():
    import headstart as hs

    space = hs.SearchSpace({"x": hs.Float(0.0, 1.0)})
    hs.create_study("k", space, storage=None, prior_mean="auto", kernel="SE[0]")
    study = hs.create_study("q", space, storage=None, prior_mean=np.float32(0.25))
    stored = study._strategy.config.options["prior_mean"]
    assert stored == 0.25 and type(stored) is float  # stored as JSON's plain number


def test_the_default_is_auto_and_the_mean_stays_available():
    import headstart as hs

    space = hs.SearchSpace({"x": hs.Float(0.0, 1.0)})
    default = hs.create_study("d", space, storage=None, seed=0)
    assert default._strategy.config.options["prior_mean"] == "auto"  # stored with the study
    plain = hs.create_study("m", space, storage=None, seed=0, prior_mean="mean")
    for study in (default, plain):
        for _ in range(4):
            trial = study.ask()
            study.tell(trial, (trial.params["x"] - 0.3) ** 2)
    assert default._strategy.engine.surrogate.prior_mean == "auto"
    assert plain._strategy.engine.surrogate.prior_mean == "mean"


def test_a_study_stored_before_the_auto_default_resumes_with_the_mean():
    """Stored GP options without ``prior_mean`` (written before it existed), or no options at all
    (before methods had options), resume as they ran: the mean; a stored value is kept."""
    from headstart._config import StudyConfig

    new = StudyConfig(method="gp")
    assert new.options["prior_mean"] == "auto"
    old = new.to_json()
    old["options"] = {k: v for k, v in old["options"].items() if k != "prior_mean"}
    assert StudyConfig.from_json(old).options["prior_mean"] == "mean"
    assert StudyConfig.from_json({**old, "options": None}).options["prior_mean"] == "mean"
    assert StudyConfig.from_json(new.to_json()).options["prior_mean"] == "auto"


def test_the_options_check_without_the_gp_core():
    """The method options and the GP core share one definition of the option values
    (:mod:`headstart._model_options`); checking options imports neither torch nor SciPy's
    statistics."""
    import subprocess
    import sys

    code = (
        "import sys, headstart._methods.gp as g; "
        "g.GPOptions(prior_mean=0.5, output_warp='copula'); "
        "print('torch' in sys.modules, 'scipy.stats' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "False"]
