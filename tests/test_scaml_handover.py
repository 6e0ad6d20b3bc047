"""ScaML-GP's hand-over to the target-only GP (``handover=True``, issue 31): the evidence each
model gives the target's observations, and when the search follows which."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

import headstart as hs
from headstart._transfer.metafit import fit_meta_gps
from headstart._transfer.scaml import (
    HANDOVER_MIN_TRIALS,
    ScaML,
    ScaMLParams,
    ScaMLPosterior,
    TaskMoments,
    pooled_stats,
    raw_log_evidence,
)
from headstart.sources import MetaTask

D = 2


def _bowl(X: np.ndarray) -> np.ndarray:
    return -(((X - np.array([0.3, 0.7])) ** 2).sum(-1))  # maximized


def test_posterior_mll_is_the_chain_of_one_step_predictive_densities():
    """log N(z; m, A) = sum_i log N(z_i; mu_{i-1}(x_i), var_{i-1}(x_i) + sigma^2): the posterior's
    evidence against its own sequential predictions, a closed form independent of the Cholesky."""
    rng = np.random.default_rng(3)
    tasks = [MetaTask(f"s{m}", X, _bowl(X) + 0.1 * m, "maximize") for m, X in
             enumerate(rng.random((2, 12, D)))]  # fmt: skip
    meta = fit_meta_gps(tasks, np.zeros(D, bool), seed=0)
    moments = TaskMoments.of([t.y_max() for t in tasks])
    X_t = rng.random((6, D))
    y_t = _bowl(X_t) + 0.05 * np.sin(9 * X_t[:, 0])
    params = ScaMLParams(np.array([0.6, 0.3]), np.array([0.4, 0.8]), 0.2, 1e-3)
    ybar, s = pooled_stats(moments, y_t)
    z = (y_t - ybar) / s
    total = 0.0
    for i in range(len(z)):
        post = ScaMLPosterior(meta, X_t[:i], z[:i], params, ybar, s, prune_threshold=0.0)
        mu, var = post.posterior(X_t[i : i + 1])
        total += stats.norm.logpdf(z[i], mu[0], math.sqrt(var[0] + params.noise))
    full = ScaMLPosterior(meta, X_t, z, params, ybar, s, prune_threshold=0.0)
    assert full.mll == pytest.approx(total, rel=1e-9, abs=1e-9)


def test_raw_log_evidence_is_the_density_of_the_raw_targets():
    rng = np.random.default_rng(0)
    A = rng.random((4, 4))
    K = A @ A.T + np.eye(4)
    y = rng.standard_normal(4) * 7.0 + 3.0
    c, scale = 3.0, 7.0
    log_pz = stats.multivariate_normal(np.zeros(4), K).logpdf((y - c) / scale)
    want = stats.multivariate_normal(np.full(4, c), scale**2 * K).logpdf(y)
    assert raw_log_evidence(log_pz, scale, 4) == pytest.approx(want, rel=1e-12)


def _run(source: MetaTask, n: int = 14) -> list[bool]:
    space = hs.SearchSpace({"x": hs.Float(0.0, 1.0), "y": hs.Float(0.0, 1.0)})
    study = hs.create_study(
        "h", space, storage=None, method="scaml", transfer_from=[source], seed=0, handover=True
    )
    handed = []
    for _ in range(n):
        trial = study.ask()
        handed.append(study._strategy.engine.surrogate.handed_over)
        study.tell(trial, float(-_bowl(np.array([trial.params["x"], trial.params["y"]]))))
    return handed


def test_a_contradicted_source_hands_the_search_to_the_target_gp_and_an_agreeing_one_not():
    X = np.random.default_rng(1).random((30, D))
    agreeing = MetaTask("same", X, -_bowl(X) + 0.01)  # minimized, as the study
    contradicted = MetaTask("opposite", X, _bowl(X))  # its best is the target's worst
    handed = _run(contradicted)
    assert not any(handed[:HANDOVER_MIN_TRIALS])  # ask i sees i observations: too few
    assert any(handed)
    assert not any(_run(agreeing))


def test_handover_is_an_option_of_scaml_off_by_default_and_its_gp_state_round_trips():
    space = hs.SearchSpace({"x": hs.Float(0.0, 1.0)})
    X = np.random.default_rng(0).random((8, 1))
    source = hs.MetaTask("src", X, (X[:, 0] - 0.3) ** 2)
    study = hs.create_study("d", space, storage=None, method="scaml", transfer_from=[source])
    assert study._strategy.engine.surrogate.handover is False
    with pytest.raises(hs.InvalidSettingError, match="handover"):
        hs.create_study(
            "e", space, storage=None, method="scaml", transfer_from=[source], handover="yes"
        )
    with pytest.raises(hs.InvalidSettingError, match="handover_margin"):
        hs.create_study(
            "e", space, storage=None, method="scaml", transfer_from=[source], handover_margin=-1.0
        )
    model = ScaML([source], np.zeros(1, bool), seed=0, handover=True)
    rng = np.random.default_rng(0)
    X_t = rng.random((7, 1))
    model.condition(X_t, -((X_t[:, 0] - 0.3) ** 2), rng)
    state = model.state()
    assert "target_gp" in state
    again = ScaML([source], np.zeros(1, bool), seed=0, handover=True, meta=model.meta)
    again.load_state(state)
    assert again.state() == state


def test_a_larger_margin_hands_over_later_or_never():
    rng = np.random.default_rng(2)
    X = rng.random((30, D))
    source = MetaTask("opposite", X, _bowl(X), "maximize")
    X_t = rng.random((9, D))
    y_t = -_bowl(X_t)  # the target (maximized) is the source upside down
    handed = []
    for margin in (0.0, 1e6):
        model = ScaML([source], np.zeros(D, bool), seed=0, handover=True, handover_margin=margin)
        model.condition(X_t, y_t, np.random.default_rng(0))
        handed.append(model.handed_over)
    assert handed == [True, False]


def test_a_failed_target_gp_fit_keeps_scaml(monkeypatch):
    from headstart._gp.surrogate import MaternGP
    from headstart.exceptions import ModelFittingError

    def fail(self, X, y, rng):
        raise ModelFittingError("no fit")

    monkeypatch.setattr(MaternGP, "condition", fail)
    rng = np.random.default_rng(2)
    X = rng.random((30, D))
    model = ScaML([MetaTask("s", X, _bowl(X), "maximize")], np.zeros(D, bool), handover=True)
    X_t = rng.random((9, D))
    posterior, _ = model.condition(X_t, -_bowl(X_t), np.random.default_rng(0))
    assert isinstance(posterior, ScaMLPosterior) and not model.handed_over
