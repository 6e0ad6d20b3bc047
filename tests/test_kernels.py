"""Kernel grammar, SOT distances, the Laplace oracle, the meta-GP and the searches (BOSOT)."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from headstart.exceptions import InvalidSettingError, KernelExpressionError
from headstart.kernels import (
    BOSOT,
    Base,
    GreedySearch,
    KernelGrammar,
    Op,
    Oracle,
    RandomSearch,
    canonical,
    evaluate,
    parse,
    search,
    to_gpytorch,
)
from headstart.kernels.covariance import covariance, log_prior, n_params, param_names
from headstart.kernels.metagp import SOTMetaGP
from headstart.kernels.model import TreeGP
from headstart.kernels.oracle import (
    _guarded_log_det,
    inv_softplus,
    log_posterior,
    period_floor,
)
from headstart.kernels.simplify import simplify
from headstart.kernels.sot import (
    TreeFeatures,
    distance_matrices,
    feature_distances,
    path_distribution,
    sot_kernel,
    subtree_key,
)


# --- trees for hypothesis -----------------------------------------------------------------------
def trees(n_dims: int = 3, kinds=("SE", "LIN", "PER", "RQ")):
    leaf = st.builds(Base, st.sampled_from(kinds), st.integers(0, n_dims - 1))
    return st.recursive(
        leaf, lambda sub: st.builds(Op, st.sampled_from(["+", "*"]), sub, sub), max_leaves=8
    )


# --- grammar ------------------------------------------------------------------------------------
@given(trees())
@settings(max_examples=200, deadline=None)
def test_parse_inverts_print(tree):
    assert parse(str(tree)) == tree


def test_print_keeps_association_and_precedence():
    a, b, c = Base("SE", 0), Base("LIN", 1), Base("PER", 0)
    assert str(Op("+", Op("+", a, b), c)) == "SE[0] + LIN[1] + PER[0]"
    assert str(Op("+", a, Op("+", b, c))) == "SE[0] + (LIN[1] + PER[0])"
    assert str(Op("*", Op("+", a, b), c)) == "(SE[0] + LIN[1]) * PER[0]"
    assert parse("SE[0] * PER[1] + LIN[0]") == Op("+", Op("*", a, Base("PER", 1)), Base("LIN", 0))
    assert parse(" se [ 0 ]*rq[2] ") == Op("*", a, Base("RQ", 2))


@pytest.mark.parametrize(
    "text, position, fragment",
    [
        ("SE[0] + + LIN[0]", 8, "expected a base kernel"),
        ("FOO[0] + SE[0]", 0, "unknown base kernel 'FOO'"),
        ("SE[0] * (LIN[1]", 15, "expected ')'"),
        ("SE[0] LIN[1]", 6, "expected '+', '*'"),
        ("SE[3]", 0, "dimension 3 is out of range"),
        ("", 0, "unexpected end"),
    ],
)
def test_parse_errors_point_at_the_position(text, position, fragment):
    with pytest.raises(KernelExpressionError) as info:
        parse(text, n_dims=2)
    message = str(info.value)
    assert f"position {position}" in message and fragment in message
    caret_line = message.splitlines()[2]
    assert caret_line.index("^") == position + 2


def test_neighbour_count_and_random_moves():
    g = KernelGrammar(2, "full")  # r = 8 base kernels
    tree = parse("SE[0] * PER[1] + LIN[0]")  # m = 3 leaves, 5 nodes
    neighbours = g.neighbours(tree)
    assert len(neighbours) == 3 * (8 - 1) + 5 * 2 * 8
    rng = np.random.default_rng(0)
    allowed = set(map(str, neighbours))
    assert all(str(g.random_move(tree, rng)) in allowed for _ in range(200))
    assert all(g.contains(t) for t in neighbours)
    assert len(KernelGrammar(1, "se-rq").base_kernels) == 2
    with pytest.raises(InvalidSettingError, match="Unknown kernel space"):
        KernelGrammar(1, "nope")


def test_canonical_merges_order_and_association():
    assert canonical(parse("(SE[0] + LIN[0]) + PER[0]")) == canonical(
        parse("PER[0] + (LIN[0] + SE[0])")
    )
    assert canonical(parse("SE[0] * LIN[0]")) != canonical(parse("SE[0] + LIN[0]"))


# --- SOT features and distances (App. B) --------------------------------------------------------
def test_appendix_b_worked_example():
    t1 = parse("LIN[0] * (PER[0] * SE[0] + SE[0])")
    t2 = parse("(LIN[0] + SE[0]) * (PER[0] * LIN[0] + SE[0])")
    base, paths, subtrees = feature_distances(TreeFeatures.of(t1, 1), TreeFeatures.of(t2, 1))
    assert Fraction(base).limit_denominator(1000) == Fraction(3, 20)
    assert Fraction(paths).limit_denominator(1000) == Fraction(11, 20)
    assert Fraction(subtrees).limit_denominator(1000) == Fraction(11, 21)
    D = distance_matrices([TreeFeatures.of(t1, 1)], [TreeFeatures.of(t2, 1)])[:, 0, 0]
    np.testing.assert_allclose(D, [3 / 20, 11 / 20, 11 / 21])


def test_features_ignore_child_order_and_collapse_operator_runs():
    a = parse("SE[0] * (LIN[1] + PER[0])")
    b = parse("(PER[0] + LIN[1]) * SE[0]")
    assert subtree_key(a) == subtree_key(b)
    assert np.allclose(feature_distances(TreeFeatures.of(a, 2), TreeFeatures.of(b, 2)), 0)
    assert set(path_distribution(parse("SE[0] + (LIN[0] + PER[0] * RQ[0])"))) == {
        "+>SE[0]", "+>LIN[0]", "+>*>PER[0]", "+>*>RQ[0]"
    }  # fmt: skip
    # the base feature has the empty symbol for unused dimensions, per dimension
    assert TreeFeatures.of(parse("SE[0]"), 2).base == {"0:SE": 1.0, "1:NULL": 1.0}


def test_subtree_keys_are_stable_strings():
    key = subtree_key(parse("RQ[1] * SE[0] + LIN[0]"))
    assert key == "+(*(RQ[1],SE[0]),LIN[0])" or key == "+(LIN[0],*(RQ[1],SE[0]))"


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_sot_kernel_is_positive_semidefinite(seed):
    rng = np.random.default_rng(seed)
    g = KernelGrammar(3, "full")
    pool = [g.random_walk(rng, int(rng.integers(0, 6))) for _ in range(80)]
    feats = [TreeFeatures.of(t, 3) for t in pool]
    D = distance_matrices(feats, feats)
    alpha = rng.dirichlet(np.ones(3))
    for ell in (0.2, 1.0, 3.0):
        K = sot_kernel(D, alpha, 1.3, ell)
        assert np.linalg.eigvalsh(K).min() >= -1e-10
    np.testing.assert_allclose(np.diagonal(D, axis1=1, axis2=2), 0)
    assert D[0].max() <= 3 + 1e-12 and D[1:].max() <= 1 + 1e-12  # base sums over 3 dimensions


# --- covariance and GPyTorch ----------------------------------------------------------------------
def test_covariance_matches_gpytorch_kernel():
    tree = parse("SE[0] * PER[1] + LIN[0] * RQ[1] + PER[0]")
    values = torch.tensor(
        [1.3, 0.4, 0.7, 0.3, 0.25, 0.9, 0.2, 1.1, 0.6, 1.7, 0.8, 0.5, 0.4], dtype=torch.float64
    )
    assert n_params(tree) - 1 == len(values) == len(param_names(tree))
    X = torch.rand(7, 2, dtype=torch.float64)
    Z = torch.rand(5, 2, dtype=torch.float64)
    ours = covariance(tree, values, X, Z)
    theirs = to_gpytorch(tree, values)(X, Z).to_dense()
    torch.testing.assert_close(ours, theirs, rtol=1e-6, atol=1e-8)
    torch.testing.assert_close(
        covariance(tree, values, X, diag=True), torch.diagonal(covariance(tree, values, X))
    )


def test_gpytorch_kernel_carries_the_papers_priors():
    kernel = to_gpytorch(parse("SE[0]"))
    priors = {n: (p.concentration.item(), p.rate.item()) for n, _, p, *_ in kernel.named_priors()}
    assert sorted(priors.values()) == [(2.0, 2.0), (2.0, 3.0)]


def test_log_prior_is_the_gamma_and_exponential_densities():
    from scipy import stats

    tree = parse("PER[0]")  # variance G(2,3), lengthscale G(2,2), period G(2,2), noise Exp(100)
    v = torch.tensor([0.7, 0.4, 1.3, 0.02], dtype=torch.float64)
    expected = (
        stats.gamma(2, scale=1 / 3).logpdf(0.7)
        + stats.gamma(2, scale=1 / 2).logpdf(0.4)
        + stats.gamma(2, scale=1 / 2).logpdf(1.3)
        + stats.expon(scale=1 / 100).logpdf(0.02)
    )
    assert float(log_prior(tree, v)) == pytest.approx(expected, rel=1e-12)


# --- the oracle -----------------------------------------------------------------------------------
def _tiny_data(n=8, seed=0):
    rng = np.random.default_rng(seed)
    x = np.sort(rng.random(n))[:, None]
    y = np.sin(6 * x[:, 0]) + 0.1 * rng.standard_normal(n)
    return x, (y - y.mean()) / y.std()


def test_laplace_evidence_matches_a_numerical_hessian_reference():
    X, y = _tiny_data()
    tree = parse("SE[0]")
    result = evaluate(tree, X, y, restarts=4)
    raw = inv_softplus(torch.tensor(result.values, dtype=torch.float64)).numpy()
    Xt, yt = torch.from_numpy(X), torch.from_numpy(y)

    def f(r):
        return float(log_posterior(tree, torch.from_numpy(r), Xt, yt)[0])

    d, h = len(raw), 1e-4
    H = np.zeros((d, d))
    for i in range(d):
        for j in range(d):
            ei, ej = np.eye(d)[i] * h, np.eye(d)[j] * h
            H[i, j] = (
                f(raw + ei + ej) - f(raw + ei - ej) - f(raw - ei + ej) + f(raw - ei - ej)
            ) / (4 * h * h)
    sign, logdet = np.linalg.slogdet(-H)
    assert sign > 0
    reference = f(raw) - 0.5 * logdet + 0.5 * d * math.log(2 * math.pi)
    assert result.log_evidence == pytest.approx(reference, abs=1e-4)
    assert result.score == pytest.approx(result.log_evidence / len(y))
    assert not result.hessian_clipped
    # the MAP is a stationary point of the log posterior
    grad = [(f(raw + np.eye(d)[i] * h) - f(raw - np.eye(d)[i] * h)) / (2 * h) for i in range(d)]
    assert np.abs(grad).max() < 1e-3


def test_map_gradient_trick_equals_autodiff():
    from headstart.kernels import oracle as oracle_module

    X, y = _tiny_data(12)
    tree = parse("SE[0] * PER[0] + LIN[0]")
    raw = np.random.default_rng(3).normal(size=(2, n_params(tree))) * 0.5
    captured = {}

    def spy(fun, x0, bounds, **kwargs):
        captured["values"], captured["grads"] = fun(np.arange(len(raw)), raw)
        return x0, np.zeros(len(x0))

    original = oracle_module.minimize
    oracle_module.minimize = spy
    try:
        oracle_module.fit_map(
            tree, torch.from_numpy(X), torch.from_numpy(y), restarts=1, rng=np.random.default_rng(0)
        )
    finally:
        oracle_module.minimize = original
    r = torch.from_numpy(raw).requires_grad_(True)
    value = log_posterior(tree, r, torch.from_numpy(X), torch.from_numpy(y))[0]
    (grad,) = torch.autograd.grad(value.sum(), r)
    np.testing.assert_allclose(captured["values"], -value.detach().numpy(), rtol=1e-10)
    np.testing.assert_allclose(captured["grads"], -grad.numpy(), rtol=1e-7, atol=1e-9)


def test_hessian_guard_clips_indefinite_matrices():
    logdet, clipped = _guarded_log_det(torch.tensor([[2.0, 0.0], [0.0, 3.0]], dtype=torch.float64))
    assert logdet == pytest.approx(math.log(6.0)) and not clipped
    logdet, clipped = _guarded_log_det(torch.tensor([[2.0, 0.0], [0.0, -3.0]], dtype=torch.float64))
    assert clipped and logdet == pytest.approx(math.log(2.0) + math.log(1e-8))


def test_bic_criterion():
    X, y = _tiny_data(10)
    r = evaluate("SE[0] + LIN[0]", X, y, criterion="bic", restarts=2)
    d = n_params(parse("SE[0] + LIN[0]"))
    assert r.score == pytest.approx((r.log_likelihood - 0.5 * d * math.log(10)) / 10)


@pytest.mark.slow
def test_oracle_is_deterministic_and_parallel_equals_serial():
    X, y = _tiny_data(15)
    trees = [parse(t) for t in ("SE[0]", "RQ[0] + LIN[0]", "PER[0] * SE[0]")]
    serial = Oracle(X, y, restarts=2).evaluate_many(trees)
    with Oracle(X, y, restarts=2, workers=2) as parallel:
        fanned = parallel.evaluate_many(trees)
    for a, b in zip(serial, fanned, strict=True):
        assert a.expression == b.expression and a.score == pytest.approx(b.score, abs=1e-9)


def test_period_floor_blocks_aliasing_on_a_grid():
    x = np.linspace(0, 1, 41)[:, None]
    assert period_floor(x)[0] == pytest.approx(2 / 40)
    y = np.sin(2 * np.pi * 4 * x[:, 0])
    r = evaluate("PER[0]", x, (y - y.mean()) / y.std(), restarts=3)
    assert r.hyperparameters()["PER[0].period"] >= 2 / 40 - 1e-9


def test_oracle_result_json_round_trip():
    X, y = _tiny_data()
    r = evaluate("SE[0]", X, y, restarts=1)
    from headstart.kernels import OracleResult

    assert OracleResult.from_json(r.to_json()) == r
    assert set(r.hyperparameters()) == {"SE[0].variance", "SE[0].lengthscale", "noise"}


# --- meta-GP and strategies -----------------------------------------------------------------------
def test_meta_gp_fits_and_ei_prefers_promising_kernels():
    rng = np.random.default_rng(0)
    g = KernelGrammar(2, "full")
    pool = list(dict.fromkeys(g.random_walk(rng, int(rng.integers(0, 4))) for _ in range(40)))
    # a score that rewards PER on dimension 0: smooth in the SOT geometry
    score = np.array(
        [sum(leaf.kind == "PER" and leaf.dim == 0 for leaf in _leaves(t)) for t in pool], float
    )
    model = SOTMetaGP.fit(pool, score, 2)
    assert model.alpha.sum() == pytest.approx(1.0) and (model.alpha >= 0).all()
    mean, var = model.predict(pool)
    assert np.corrcoef(mean, score)[0, 1] > 0.9
    assert (var > 0).all()
    ei = model.expected_improvement([parse("PER[0] + PER[0] + PER[0]"), parse("LIN[1]")])
    assert (ei >= 0).all() and ei[0] > ei[1]


def _leaves(tree):
    from headstart.kernels.grammar import leaves

    return leaves(tree)


@pytest.mark.parametrize(
    "strategy",
    [BOSOT(population=20, steps=3), BOSOT.paper(population=20, steps=3),
     BOSOT(population=20, steps=3, cost_aware=True), BOSOT(population=20, steps=3, stages=False),
     GreedySearch(), RandomSearch()],
)  # fmt: skip
def test_strategies_respect_the_budget_and_never_repeat_a_kernel(strategy):
    X, y = _tiny_data(12)
    g = KernelGrammar(1, "full")
    calls = []
    history = strategy.run(g, Oracle(X, y, restarts=1), 9, np.random.default_rng(1), calls.append)
    assert 1 <= len(history) <= 9 and calls == history
    keys = [canonical(e.result.tree) for e in history]
    assert len(keys) == len(set(keys))
    if not isinstance(strategy, BOSOT) or strategy.simplify:  # scored and shown simplified
        assert all(simplify(e.result.tree) == e.result.tree for e in history)
    if not isinstance(strategy, GreedySearch):
        assert len(history) == 9
    else:  # greedy starts with every base kernel
        assert {str(e.result.tree) for e in history[:4]} == {"SE[0]", "LIN[0]", "PER[0]", "RQ[0]"}


def test_bosot_stages_score_greedys_neighbourhoods_in_acquisition_order():
    X, y = _tiny_data(12)
    g = KernelGrammar(1, "full")
    strategy = BOSOT(population=20, steps=2)
    history = strategy.run(g, Oracle(X, y, restarts=1), 9, np.random.default_rng(0))
    first = [e.result for e in history[:4]]
    assert {r.expression for r in first} == {"SE[0]", "LIN[0]", "PER[0]", "RQ[0]"}
    best = max(first, key=lambda r: r.score).tree
    neighbours = {canonical(simplify(t)) for t in g.neighbours(best)}
    assert all(canonical(e.result.tree) in neighbours for e in history[4:9])
    assert all(e.phase == "stage" for e in history) and history[5].acquisition_seconds > 0


def test_bosot_initial_design_follows_the_paper():
    g = KernelGrammar(2, "se-rq")  # r = 4
    design, n = BOSOT().initial_design(g, np.random.default_rng(0), budget=50)
    assert n == 12 and design[:4] == list(g.base_kernels) and len(design) == 12
    _, n_small = BOSOT().initial_design(g, np.random.default_rng(0), budget=10)
    assert n_small == 5


def test_bosot_finds_the_generating_structure_of_a_periodic_series():
    x = np.linspace(0, 1, 60)[:, None]
    y = np.sin(2 * np.pi * 6 * x[:, 0]) + 2 * x[:, 0]
    result = search(x, y, budget=14, restarts=2, ea_steps=3, progress=False, seed=0)
    kinds = {leaf.kind for leaf in _leaves(result.tree)}
    assert "PER" in kinds
    assert result.score > evaluate("SE[0]", *_scaled(x, y), restarts=2).score


def _scaled(x, y):
    return (x - x.min()) / np.ptp(x), (y - y.mean()) / y.std()


def test_tree_gp_gradients_match_finite_differences():
    X, y = _tiny_data(10)
    X2 = np.hstack([X, np.random.default_rng(1).random((10, 1))])
    tree = parse("SE[0] * RQ[1] + PER[0] * LIN[1]")
    values = np.array([1.0, 0.3, 0.8, 0.5, 1.2, 0.6, 0.4, 0.7, 0.5, 0.3])
    gp = TreeGP(tree, values, 1e-3, X2, y)
    Q = np.random.default_rng(2).random((4, 2))
    mean, var, dmean, dvar = gp.posterior_and_grad(Q)
    h = 1e-6
    for j in range(2):
        e = np.zeros(2)
        e[j] = h
        mp, vp = gp.posterior(Q + e)
        mm, vm = gp.posterior(Q - e)
        np.testing.assert_allclose(dmean[:, j], (mp - mm) / (2 * h), rtol=1e-5, atol=1e-7)
        np.testing.assert_allclose(dvar[:, j], (vp - vm) / (2 * h), rtol=1e-5, atol=1e-7)
    joint_mean, cov = gp.joint_posterior(Q)
    np.testing.assert_allclose(joint_mean, mean)
    np.testing.assert_allclose(np.diag(cov), var, rtol=1e-8, atol=1e-10)
    # the posterior equals the textbook formula
    Xt = torch.from_numpy(X2)
    vt = torch.from_numpy(values)
    K = covariance(tree, vt, Xt).numpy() + 1e-3 * np.eye(10)
    k = covariance(tree, vt, torch.from_numpy(Q), Xt).numpy()
    np.testing.assert_allclose(mean, k @ np.linalg.solve(K, y), rtol=1e-8)


def test_gpytorch_periodic_prior_is_the_papers_prior_on_l():
    from scipy import stats

    tree = parse("PER[0]")
    kernel = to_gpytorch(tree, torch.tensor([1.0, 0.3, 0.5], dtype=torch.float64))
    inner = kernel.base_kernel
    assert float(inner.lengthscale.detach()) == pytest.approx(4 * 0.3**2)
    prior = inner.lengthscale_prior
    assert float(prior.log_prob(inner.lengthscale).detach()) == pytest.approx(
        stats.gamma(2, scale=1 / 2).logpdf(0.3)
    )


def test_dominant_period_recovers_a_seasonal_period_under_a_trend():
    from headstart.kernels.oracle import dominant_period

    rng = np.random.default_rng(0)
    x = np.sort(rng.random(120))
    y = 3 * x + 2 * x**2 + 0.3 * np.sin(2 * np.pi * x / 0.037) + 0.02 * rng.standard_normal(120)
    assert dominant_period(x, y, floor=0.01) == pytest.approx(0.037, rel=0.03)


def test_bosot_batches_match_the_workers_and_stay_distinct():
    X, y = _tiny_data(12)
    g = KernelGrammar(1, "full")
    strategy = BOSOT(population=20, steps=2, batch_size=3, stages=False)
    history = strategy.run(g, Oracle(X, y, restarts=1), 10, np.random.default_rng(0))
    assert len(history) == 10
    assert len({canonical(e.result.tree) for e in history}) == 10
    model = strategy.last_model
    fantasy = model.with_fantasy(parse("PER[0] * PER[0]"))
    assert len(fantasy.trees) == len(model.trees) + 1
    assert (
        fantasy.predict([parse("PER[0] * PER[0]")])[1][0]
        < model.predict([parse("PER[0] * PER[0]")])[1][0]
    )
