"""Canonical simplification of kernel expressions (issue 17): redundant forms collapse, and the
simplified kernel's every covariance is reachable by the original expression."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from headstart.kernels.covariance import covariance
from headstart.kernels.grammar import KernelGrammar, canonical, parse
from headstart.kernels.simplify import lift_values, simplify, size


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("RQ[1] + RQ[1]", "RQ[1]"),
        ("PER[0] * PER[0]", "PER[0]"),
        ("SE[0] * SE[0] * SE[0]", "SE[0]"),
        ("LIN[0] * LIN[0]", "LIN[0] * LIN[0]"),
        ("LIN[0] + LIN[0]", "LIN[0]"),
        ("SE[1] * SE[0]", "SE[0] * SE[1]"),
        ("(SE[0] + LIN[0]) * (LIN[0] + SE[0])", "(LIN[0] + SE[0]) * (LIN[0] + SE[0])"),
        ("(RQ[1] + RQ[1]) * PER[0] * PER[0] + SE[0] * SE[0]", "PER[0] * RQ[1] + SE[0]"),
        ("(SE[0] + SE[0]) * LIN[1] + LIN[1] * SE[0]", "LIN[1] * SE[0]"),
        ("SE[0] * (SE[0] * PER[1])", "PER[1] * SE[0]"),
        ("SE[0] + (SE[1] + SE[0])", "SE[0] + SE[1]"),
    ],
)
def test_simplify_examples(text, expected):
    assert str(simplify(parse(text))) == expected


def _tree(seed: int, moves: int, n_dims: int = 2):
    return KernelGrammar(n_dims, "full").random_walk(np.random.default_rng(seed), moves)


@settings(max_examples=150, deadline=None)
@given(seed=st.integers(0, 2**31), moves=st.integers(0, 9))
def test_simplification_preserves_the_covariance(seed, moves):
    """For random hyperparameters of the simplified kernel, the lifted hyperparameters of the
    original give the same covariance matrix on random inputs."""
    tree = _tree(seed, moves)
    simple = simplify(tree)
    rng = np.random.default_rng(seed)
    values = np.exp(rng.normal(0.0, 0.5, size(simple)))
    lifted = lift_values(tree, values)
    assert lifted.shape == (size(tree),) and (lifted > 0).all()
    X = torch.from_numpy(rng.uniform(0, 1, (12, 2)))
    K_simple = covariance(simple, torch.from_numpy(values), X)
    K_tree = covariance(tree, torch.from_numpy(lifted), X)
    torch.testing.assert_close(K_tree, K_simple, rtol=1e-9, atol=1e-10)


@settings(max_examples=150, deadline=None)
@given(seed=st.integers(0, 2**31), moves=st.integers(0, 9))
def test_simplify_is_idempotent_canonical_and_never_grows(seed, moves):
    tree = _tree(seed, moves)
    simple = simplify(tree)
    assert simplify(simple) == simple
    assert parse(str(simple)) == simple
    assert size(simple) <= size(tree)
    # expressions equal up to order and association simplify to the same tree
    shuffled = _reassociate(tree, np.random.default_rng(seed + 1))
    assert canonical(shuffled) == canonical(tree)
    assert simplify(shuffled) == simple


def _reassociate(tree, rng):
    """The same function written differently: operands of each operator swapped at random."""
    from headstart.kernels.grammar import Base, Op

    if isinstance(tree, Base):
        return tree
    left, right = _reassociate(tree.left, rng), _reassociate(tree.right, rng)
    return Op(tree.op, right, left) if rng.random() < 0.5 else Op(tree.op, left, right)


# --- the cost model -------------------------------------------------------------------------------
def test_cost_model_recovers_a_power_law_and_clips_its_slope():
    from headstart.kernels.cost import OracleCostModel

    trees = [parse(t) for t in ("SE[0]", "SE[0] * PER[1]", "RQ[0] + PER[1] * LIN[0] + SE[1]")]
    d = np.array([OracleCostModel.n_params(t) for t in trees])
    assert list(d) == [3, 6, 11]
    model = OracleCostModel.fit(trees, 0.02 * d**1.7)
    assert model.slope == pytest.approx(1.7) and model.intercept == pytest.approx(np.log(0.02))
    assert model.predict([parse("SE[0] + SE[1]")])[0] == pytest.approx(0.02 * 5**1.7)
    # one size only: slope 1 through the mean; a falling or explosive fit is clipped
    flat = OracleCostModel.fit([trees[0], trees[0]], [0.1, 0.4])
    assert flat.slope == 1.0 and flat.predict([trees[0]])[0] == pytest.approx(0.2)
    assert OracleCostModel.fit(trees, 1.0 / d).slope == 0.5
    assert OracleCostModel.fit(trees, d**6.0).slope == 3.0


# --- the known-structure suite --------------------------------------------------------------------
def test_known_structure_suite_is_canonical_and_reproducible():
    from headstart.benchmarks.kernel_structures import SUITE, draw
    from headstart.kernels.simplify import size

    for spec in SUITE:
        tree = parse(spec.expression)
        assert simplify(tree) == tree, spec.name
        assert len(spec.values) == size(tree), spec.name
        assert 50 <= spec.n <= 500 and 1 <= spec.n_dims <= 5
    X, y, _X_test, y_test = draw(SUITE[0])
    assert X.shape == (SUITE[0].n, 1) and len(y_test) == 200
    assert (
        X.min() == 0.0 and X.max() == 1.0 and abs(y.mean()) < 1e-12 and y.std() == pytest.approx(1)
    )
    again = draw(SUITE[0])
    assert np.array_equal(again[1], y)


@pytest.mark.slow
def test_the_truth_has_the_highest_evidence_on_large_n():
    """Averaged over three draws of 300 points, the generating kernel scores above the base
    kernels and the one-move variants a search would meet on its way."""
    from headstart.benchmarks.kernel_structures import STRUCTURES, draw, fraction, truth_score
    from headstart.kernels.oracle import evaluate

    spec = STRUCTURES["ks-per+lin"]
    rivals = ["SE[0]", "LIN[0]", "PER[0]", "RQ[0]", "LIN[0] * PER[0]", "LIN[0] + SE[0]",
              "LIN[0] + RQ[0]"]  # fmt: skip
    scores = {e: [] for e in [spec.expression, *rivals]}
    for seed in range(3):
        X, y, _, _ = draw(spec, n=300, seed=seed)
        scores[spec.expression].append(truth_score(spec, restarts=2, n=300, seed=seed))
        for e in rivals:
            scores[e].append(evaluate(e, X, y, restarts=2).score)
    mean = {e: np.mean(v) for e, v in scores.items()}
    assert max(mean, key=mean.get) == spec.expression
    assert fraction(mean[spec.expression], mean[spec.expression]) == 1.0
