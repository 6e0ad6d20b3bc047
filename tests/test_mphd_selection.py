"""MPHD step 2's guard against over-fitting the training spaces (issue 33, item 3): the context
network pulled toward the shared Gamma, the choice by leave-one-space-out likelihood, and step 1
on every point of a sub-dataset (in blocks)."""

from __future__ import annotations

import numpy as np
import pytest

import headstart as hs
from headstart.mphd import Domain, PriorModel, dimension_context, pretrain
from headstart.mphd.network import (
    fit_lengthscale_network,
    gamma_kl,
    gamma_log_pdf,
    gamma_mle,
    select_lengthscale_prior,
)
from headstart.mphd.pretrain import BLOCK, DomainFit, fit_priors

# (kinds of a space's columns): a mix of sizes and discrete/continuous splits
SPACES = [
    ["continuous"] * 2,
    ["continuous", "integer"],
    ["continuous"] * 3 + ["categorical"],
    ["integer"] * 2 + ["continuous"],
    ["continuous"] * 4,
    ["categorical", "integer", "continuous", "continuous", "continuous"],
    ["integer"] * 3,
    ["continuous"] * 2 + ["integer"] * 2,
]


def _lengthscales(rng, kinds, by_kind: bool):
    """Step-1-like estimates: continuous dims ~ Gamma(8, 40) (mean 0.2) and discrete dims ~
    Gamma(4, 2) (mean 2) when ``by_kind``; otherwise every dim from one Gamma(2, 2)."""
    out = []
    for kind in kinds:
        if not by_kind:
            out.append(rng.gamma(2.0, 1 / 2.0))
        elif kind == "continuous":
            out.append(rng.gamma(8.0, 1 / 40.0))
        else:
            out.append(rng.gamma(4.0, 1 / 2.0))
    return np.array(out)


def _fits(by_kind: bool, seed=0, copies=3):
    rng = np.random.default_rng(seed)
    fits, kinds = [], {}
    for c in range(copies):
        for i, k in enumerate(SPACES):
            name = f"s{c}-{i}"
            kinds[name] = tuple(k)
            fits.append(DomainFit(name, _lengthscales(rng, k, by_kind), 1.0, 1e-3, 0.0, 2))
    return fits, kinds


def _select(fits, kinds, **kw):
    return select_lengthscale_prior(
        [f.name for f in fits],
        [dimension_context(kinds[f.name]) for f in fits],
        [f.lengthscales for f in fits],
        iterations=kw.pop("iterations", 600),
        **kw,
    )


def test_gamma_kl_is_zero_at_equality_and_agrees_between_numpy_and_torch():
    import torch

    a1, b1, a2, b2 = 2.5, 4.0, 1.2, 1.5
    t = gamma_kl(*(torch.tensor(v, dtype=torch.float64) for v in (a1, b1, a2, b2)))
    assert float(t) == pytest.approx(gamma_kl(a1, b1, a2, b2), rel=1e-12)
    assert gamma_kl(2.0, 3.0, 2.0, 3.0) == pytest.approx(0.0, abs=1e-12)
    x = np.array([0.3, 1.7])
    np.testing.assert_allclose(
        gamma_log_pdf(x, 2.0, 3.0), [np.log(9 * 0.3) - 0.9, np.log(9 * 1.7) - 5.1], rtol=1e-12
    )


def test_a_strong_pull_gives_the_shared_gamma_and_none_the_papers_network():
    fits, kinds = _fits(by_kind=True)
    contexts = np.vstack([dimension_context(kinds[f.name]) for f in fits])
    ell = np.concatenate([f.lengthscales for f in fits])
    shared = gamma_mle(ell)
    for strength, near_shared in ((1e4, True), (0.0, False)):
        layers, mean, std, _ = fit_lengthscale_network(
            contexts, ell, strength=strength, iterations=600
        )
        model = PriorModel("network", layers, mean, std, (1.0, 1.0), (1.0, 1.0), (1.0, 1.0))
        a, b = model.lengthscale_gammas(["continuous", "integer"])
        kl = [gamma_kl(a[k], b[k], *shared) for k in range(2)]
        assert (max(kl) < 1e-3) == near_shared, (strength, kl)


def test_held_out_spaces_choose_the_network_when_the_context_predicts_the_lengthscale():
    selection, network = _select(*_fits(by_kind=True))
    assert selection.chosen == "network" and network is not None
    assert selection.heldout[f"lambda={selection.strength:g}"] > selection.heldout["shared"] + 0.5


def test_held_out_spaces_choose_the_shared_gamma_when_the_context_says_nothing():
    """Lengthscales independent of the context: the paper's network fits noise (its held-out
    likelihood is below the shared Gamma's); the selection does not lose to the shared Gamma."""
    selection, network = _select(*_fits(by_kind=False))
    assert selection.heldout["lambda=0"] < selection.heldout["shared"]
    best = max(selection.heldout.values())
    assert best == pytest.approx(selection.heldout["shared"], abs=0.02)
    assert (selection.chosen == "shared") == (network is None)


@pytest.mark.slow
def test_the_choice_and_its_evidence_are_stored_in_the_prior_file(tmp_path):
    fits, kinds = _fits(by_kind=True, copies=1)
    prior = fit_priors(fits, kinds, lengthscale="auto")
    stored = PriorModel.load(prior.save(tmp_path / "p.json")).trained_on["selection"]
    assert stored["chosen"] == prior.lengthscale_mode == "network"
    assert set(stored["heldout_loglik"]) == {"shared"} | {
        f"lambda={s:g}" for s in (0.0, 0.3, 1.0, 3.0, 10.0)
    }
    assert set(stored["heldout_loglik_per_space"]) == {f.name for f in fits}
    assert "held-out log likelihood" in stored["reason"]
    assert "selection" not in fit_priors(fits, kinds).trained_on  # the paper's network


def test_an_unknown_lengthscale_mode_is_refused():
    fits, kinds = _fits(by_kind=True, copies=1)
    with pytest.raises(hs.PretrainingDataError, match="lengthscale must be one of"):
        fit_priors(fits, kinds, lengthscale="nn")


def test_step1_uses_every_point_in_blocks(monkeypatch):
    """``n_points=None`` hands step 1 every finite point, in blocks of at most BLOCK, each
    standardized with its whole sub-dataset's mean and sd."""
    import headstart._gp.exact as exact

    seen = {}
    real = exact.fit_exact_gp

    def spy(Xs, ys, *args, **kwargs):
        seen["sizes"] = [len(y) for y in ys]
        seen["ys"] = ys
        return real(Xs, ys, *args, **kwargs)

    monkeypatch.setattr(exact, "fit_exact_gp", spy)
    rng = np.random.default_rng(0)
    n = 2 * BLOCK + 10
    domains = []
    for i in range(3):
        X = rng.random((n, 2))
        y = np.sin(6 * X[:, 0]) + 0.1 * X[:, 1] + 3.0 * i
        y[5] = np.nan  # dropped
        domains.append(Domain(f"s{i}", ("continuous", "continuous"), ((X, y),)))
    prior = pretrain(domains, n_points=None, lengthscale="shared")
    assert sum(seen["sizes"]) == 3 * (n - 1) and max(seen["sizes"]) <= BLOCK
    assert len(seen["sizes"]) == 3 * 3
    pooled = np.sort(np.concatenate(seen["ys"][:3]))  # the first space's blocks
    y = domains[0].datasets[0][1]
    y = y[np.isfinite(y)]
    np.testing.assert_allclose(pooled, np.sort((y - y.mean()) / y.std()), atol=1e-12)
    assert max(abs(float(np.mean(b))) for b in seen["ys"][:3]) > 1e-3  # not per block
    assert prior.trained_on["points_per_subdataset"] is None
    assert [s["n_subdatasets"] for s in prior.trained_on["spaces"]] == [1, 1, 1]


def test_each_member_trains_on_its_fold_at_its_strength(monkeypatch):
    """Member ``f * S + j`` leaves space ``f`` out at strength ``j``; the last S members train on
    every space, and the returned network is the chosen strength's all-spaces member."""
    import headstart.mphd.network as network

    seen = {}
    real = network._fit_networks

    def spy(contexts, lengthscales, weights, strengths, **kw):
        seen.update(weights=weights, strengths=strengths)
        out = real(contexts, lengthscales, weights, strengths, **kw)
        seen["out"] = out
        return out

    monkeypatch.setattr(network, "_fit_networks", spy)
    fits, kinds = _fits(by_kind=True, copies=1)
    strengths = (0.0, 1.0)
    selection, chosen = _select(fits, kinds, strengths=strengths, iterations=50)
    sizes = [len(f.lengthscales) for f in fits]
    owner = np.repeat(np.arange(len(fits)), sizes)
    S = len(strengths)
    for f in range(len(fits)):
        for j, s in enumerate(strengths):
            np.testing.assert_array_equal(seen["weights"][f * S + j] > 0, owner != f)
            assert seen["strengths"][f * S + j] == s
    assert (seen["weights"][-S:] > 0).all()
    if chosen is not None:
        i = len(fits) * S + strengths.index(selection.strength)
        layers = seen["out"][0][i]
        for (W, b), (W2, b2) in zip(chosen[0], layers, strict=True):
            np.testing.assert_array_equal(W, W2)
            np.testing.assert_array_equal(b, b2)
