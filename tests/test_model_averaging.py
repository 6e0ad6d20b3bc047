"""The evidence-weighted average of posteriors (``headstart._transfer.averaging``, issue 31): its
moments against the mixture's closed forms and Monte Carlo, its gradients, fantasies and the
surrogate contract, and ScaML-GP's ``handover_mode="average"``."""

from __future__ import annotations

import numpy as np
import pytest

import headstart as hs
from headstart._engine.numerics import check_training_data, standardize
from headstart._gp.model import ExactGP
from headstart._gp.params import GPParams
from headstart._transfer.averaging import (
    MIN_PART_WEIGHT,
    AveragedPosterior,
    Part,
    evidence_weights,
)
from headstart._transfer.scaml import ScaML, ScaMLPosterior
from headstart.sources import MetaTask
from headstart.testing import surrogates as testing

D = 2


def _gps(seed: int = 0) -> tuple[ExactGP, ExactGP, np.ndarray]:
    rng = np.random.default_rng(seed)
    X = rng.random((8, D))
    y = np.sin(5 * X[:, 0]) + X[:, 1]
    cat = np.zeros(D, bool)
    short = ExactGP(X, standardize(y)[0], cat, GPParams(np.full(D, 25.0), 1.0, 1e-4))
    long = ExactGP(X, y, cat, GPParams(np.full(D, 1.0), 2.0, 1e-2))
    return short, long, rng.random((5, D))


def test_evidence_weights_are_the_posterior_model_probabilities():
    w = evidence_weights(np.array([-10.0, -12.0]))
    assert w[0] == pytest.approx(1 / (1 + np.exp(-2.0)))
    assert w.sum() == pytest.approx(1.0)
    # a margin is prior log odds: 2 nats against the first model make the two even
    assert evidence_weights(np.array([-10.0, -12.0]), np.array([2.0, 0.0])).tolist() == [0.5, 0.5]
    assert np.isfinite(evidence_weights(np.array([-1e6, 0.0]))).all()


def test_moments_are_the_mixtures_in_common_units():
    a, b, X = _gps()
    parts = [Part(a, 0.3, shift=1.5, factor=2.0), Part(b, 0.7)]
    avg = AveragedPosterior(parts)
    (ma, va), (mb, vb) = a.posterior(X), b.posterior(X)
    ma, va = 1.5 + 2.0 * ma, 4.0 * va
    mean = 0.3 * ma + 0.7 * mb
    second = 0.3 * (va + ma**2) + 0.7 * (vb + mb**2)
    got_mean, got_var = avg.posterior(X)
    np.testing.assert_allclose(got_mean, mean, rtol=1e-12)
    np.testing.assert_allclose(got_var, second - mean**2, rtol=1e-10)
    # Monte Carlo of the mixture itself
    rng = np.random.default_rng(1)
    n = 400_000
    pick = rng.random(n) < 0.3
    draws = np.where(pick, ma[0] + np.sqrt(va[0]) * rng.standard_normal(n),
                     mb[0] + np.sqrt(vb[0]) * rng.standard_normal(n))  # fmt: skip
    assert draws.mean() == pytest.approx(got_mean[0], abs=4 * draws.std() / np.sqrt(n))
    assert draws.var() == pytest.approx(got_var[0], rel=0.02)
    # the joint covariance's diagonal is the marginal variance, its mean the same mean
    jm, jc = avg.joint_posterior(X)
    np.testing.assert_allclose(jm, got_mean, rtol=1e-12)
    np.testing.assert_allclose(np.diagonal(jc), got_var, rtol=1e-8, atol=1e-12)
    assert np.linalg.eigvalsh(jc).min() > -1e-9


def test_gradients_match_finite_differences():
    a, b, X = _gps(3)
    avg = AveragedPosterior([Part(a, 0.45, -0.5, 0.7), Part(b, 0.55)])
    mean, var, dmean, dvar = avg.posterior_and_grad(X)
    np.testing.assert_allclose((mean, var), avg.posterior(X), rtol=1e-12)
    h = 1e-6
    for j in range(D):
        step = np.zeros(D)
        step[j] = h
        (mp, vp), (mm, vm) = avg.posterior(X + step), avg.posterior(X - step)
        np.testing.assert_allclose(dmean[:, j], (mp - mm) / (2 * h), rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(dvar[:, j], (vp - vm) / (2 * h), rtol=1e-5, atol=1e-6)


def test_a_negligible_part_is_dropped_and_one_part_is_an_affine_map():
    a, b, X = _gps()
    avg = AveragedPosterior([Part(a, 1.0, 2.0, 3.0), Part(b, MIN_PART_WEIGHT / 10)])
    assert len(avg.parts) == 1
    m, v = a.posterior(X)
    np.testing.assert_allclose(avg.posterior(X), (2.0 + 3.0 * m, 9.0 * v), rtol=1e-12)
    assert avg.lengthscales is a.lengthscales


class _TwoGPs:
    """A surrogate whose posterior averages two fixed-hyperparameter GPs in different units."""

    informative_prior = False

    def __init__(self, is_cat: np.ndarray) -> None:
        self.is_cat = is_cat

    def condition(self, X, y, rng):
        check_training_data(X, y)
        d = X.shape[1]
        z, centre, spread = standardize(y)
        first = ExactGP(X, z, self.is_cat, GPParams(np.full(d, 9.0), 1.0, 1e-4))
        second = ExactGP(X, y, self.is_cat, GPParams(np.full(d, 2.0), spread**2, 1e-4 * spread**2))
        parts = [Part(first, 0.35, centre, spread), Part(second, 0.65)]
        return AveragedPosterior(parts), np.asarray(y, dtype=np.float64)

    def state(self):
        return {}

    def load_state(self, state):
        pass

    def diagnostics(self):
        return {}


def test_an_averaged_posterior_passes_the_surrogate_conformance_suite():
    rng = np.random.default_rng(4)
    X = rng.random((12, D))
    y = np.sin(4 * X[:, 0]) * 3.0 + X[:, 1] + 10.0
    case = testing.SurrogateCase(lambda: _TwoGPs(np.zeros(D, bool)), X, y)
    testing.check_all(case)
    assert testing.check_fantasize(case)


def _bowl(X: np.ndarray) -> np.ndarray:
    return -(((X - np.array([0.3, 0.7])) ** 2).sum(-1))  # maximized


def test_scaml_average_mode_weights_the_models_by_their_evidence():
    rng = np.random.default_rng(2)
    X = rng.random((30, D))
    X_t = rng.random((9, D))
    y_t = -_bowl(X_t)  # the target is the source upside down
    weights = {}
    for name, source in (
        ("opposite", MetaTask("s", X, _bowl(X), "maximize")),
        ("same", MetaTask("s", X, -_bowl(X), "maximize")),
    ):
        model = ScaML([source], np.zeros(D, bool), seed=0, handover=True, handover_mode="average")
        posterior, z = model.condition(X_t, y_t, np.random.default_rng(0))
        weights[name] = model.target_gp_weight
        assert model.diagnostics()["target_gp_weight"] == weights[name]
        # y_model is in ScaML-GP's units whatever the weights
        np.testing.assert_allclose(z, (y_t - model.ybar) / model.scale)
        if isinstance(posterior, AveragedPosterior):
            assert isinstance(posterior.parts[0].posterior, ScaMLPosterior)
    assert weights["opposite"] > 0.5 > weights["same"]


def test_with_all_the_weight_on_the_target_gp_the_average_is_the_switchs_gp(monkeypatch):
    import headstart._transfer.scaml as scaml

    rng = np.random.default_rng(2)
    X = rng.random((30, D))
    X_t = rng.random((9, D))
    y_t = -_bowl(X_t)
    source = MetaTask("s", X, _bowl(X), "maximize")
    switch = ScaML([source], np.zeros(D, bool), seed=0, handover=True)
    gp, z_gp = switch.condition(X_t, y_t, np.random.default_rng(0))
    assert switch.handed_over
    monkeypatch.setattr(scaml, "evidence_weights", lambda e, m: np.array([0.0, 1.0]))
    average = ScaML([source], np.zeros(D, bool), seed=0, handover=True, handover_mode="average")
    avg, z = average.condition(X_t, y_t, np.random.default_rng(0))
    assert average.handed_over and average.target_gp_weight == 1.0
    Q = rng.random((6, D))
    m, v = gp.posterior(Q)
    _, centre, spread = standardize(y_t)
    # the same target-only GP, mapped from its units to ScaML-GP's
    shift, factor = (centre - average.ybar) / average.scale, spread / average.scale
    np.testing.assert_allclose(avg.posterior(Q)[0], shift + factor * m, rtol=1e-9)
    np.testing.assert_allclose(avg.posterior(Q)[1], factor**2 * v, rtol=1e-9)
    np.testing.assert_allclose(shift + factor * z_gp, z, rtol=1e-9, atol=1e-12)


SPACE_1D = hs.SearchSpace({"x": hs.Float(0.0, 1.0)})


def _averaging_study(name: str, source: hs.MetaTask, n_trials: int):
    """A 1-d study with ScaML-GP's evidence average after ``n_trials`` of ``(x - 0.3)^2``."""
    study = hs.create_study(
        name, SPACE_1D, storage=None, method="scaml", transfer_from=[source], handover=True,
        handover_mode="average",
    )  # fmt: skip
    for _ in range(n_trials):
        trial = study.ask()
        study.tell(trial, (trial.params["x"] - 0.3) ** 2)
    return study


def test_handover_mode_is_validated_at_create_study():
    X = np.random.default_rng(0).random((8, 1))
    source = hs.MetaTask("src", X, (X[:, 0] - 0.3) ** 2)
    with pytest.raises(hs.InvalidSettingError, match="handover_mode must be one of"):
        hs.create_study(
            "e", SPACE_1D, storage=None, method="scaml", transfer_from=[source],
            handover_mode="mix",
        )  # fmt: skip
    study = _averaging_study("f", source, 7)
    assert 0.0 <= study._strategy.engine.surrogate.target_gp_weight <= 1.0


def test_the_transfer_report_says_how_much_the_target_gp_carries():
    X = np.random.default_rng(0).random((12, 1))
    source = hs.MetaTask("src", X, -((X[:, 0] - 0.3) ** 2))  # the target's worst is its best
    report = _averaging_study("r", source, 8).transfer_report()
    assert report.target_gp_weight is not None and 0.0 <= report.target_gp_weight <= 1.0
    assert f"carries {report.target_gp_weight:.0%}" in report.summary()
    assert report.to_dict()["target_gp_weight"] == report.target_gp_weight
    plain = hs.create_study("p", SPACE_1D, storage=None, method="scaml", transfer_from=[source])
    assert plain.transfer_report().target_gp_weight is None
