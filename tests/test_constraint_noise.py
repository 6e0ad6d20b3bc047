"""A constraint's GP has a lower noise floor than an objective's (issue 34, ConstrainedGramacy).

The best feasible point lies on a constraint's boundary. With the objective's floor (a noise
variance of 1e-6 of the standardized variance, a standard deviation of 1e-3) a constraint's GP
cannot tell a violation of 1e-5 from zero, so proposals creep up to the boundary from outside;
``docs/benchmarks/constraint_noise_floor/`` measures the effect."""

from __future__ import annotations

import numpy as np
import pytest

import headstart as hs
from headstart._gp import MaternGP
from headstart._gp.fit_settings import (
    CONSTRAINT_COORDS,
    CONSTRAINT_MIN_NOISE,
    MATERN_COORDS,
    MIN_NOISE,
)


def _floors(outputs: int, **settings) -> list[float]:
    """The noise floor of every output's GP (objectives first, then constraints)."""
    space = hs.SearchSpace({"x": hs.Float(0.0, 1.0)})
    study = hs.create_study("c", space, storage=None, seed=0, **settings)
    engine = study._strategy.engine
    return [model.coords.noise_floor for model in engine._output_surrogates(outputs)]


def test_only_constraints_get_the_lower_floor():
    low, high = CONSTRAINT_MIN_NOISE, MIN_NOISE
    assert low < high
    assert _floors(3, constraints=True) == [high, low, low]
    assert _floors(3, directions=["minimize", "maximize"], constraints=True) == [high, high, low]
    assert _floors(2, directions=["minimize", "maximize"]) == [high, high]


def _wiggle(x: np.ndarray) -> np.ndarray:
    """A smooth constraint with Gramacy's kind of ripple (values of order 1)."""
    return (
        1.5 - x[:, 0] - 2.0 * x[:, 1] - 0.5 * np.sin(2.0 * np.pi * (x[:, 0] ** 2 - 2.0 * x[:, 1]))
    )


def _boundary_data(rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """25 points spread over the square and 6 just outside the boundary ``c = 0`` near one
    point of it, violating it by about 1e-5 to 1e-4 (a creeping run's last proposals)."""
    spread = rng.random((25, 2))
    base = np.array([[0.2, 0.4]])
    # move along x1 to the boundary (c decreases in x1), then slightly back outside it
    lo, hi = 0.0, 1.0
    for _ in range(80):
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if _wiggle(np.array([[0.2, mid]]))[0] > 0 else (lo, mid)
    edge = np.array([[0.2, hi]])
    near = edge + np.outer(np.linspace(-1e-5, -1e-6, 6), [0.0, 1.0])
    X = np.vstack([spread, base, near])
    return X, _wiggle(X)


def _violation_z(coords) -> np.ndarray:
    """``mean / sd`` of the GP's posterior at the tiny violations, in ``c``'s units (a
    violation's probability of feasibility is ``Phi(-z)``)."""
    X, c = _boundary_data(np.random.default_rng(0))
    assert (c[26:] > 0).all() and (c[26:] < 1e-4).all()
    gp = MaternGP(np.zeros(2, dtype=bool), coords=coords)
    posterior, y = gp.condition(X, c, np.random.default_rng(0))
    scale = (y[-1] - y[0]) / (c[-1] - c[0])  # standardization: model units per unit of c
    mean, var = posterior.posterior(X[26:])
    return (mean / scale + c[0] - y[0] / scale) / (np.sqrt(var) / scale)


def test_the_constraint_gp_resolves_violations_below_the_objective_floor():
    """Deterministic values violating the boundary by 8e-6 to 8e-5: the constraint's GP is
    sure they are infeasible (``z`` 1.4 for the smallest, above 5 for the rest); a GP with the
    objective's floor gives each about even odds (``z`` below 0.3), so the acquisition keeps
    proposing such points."""
    z = _violation_z(CONSTRAINT_COORDS)
    assert z[-1] > 1.0 and (z[:-1] > 3.0).all()
    assert (np.abs(_violation_z(MATERN_COORDS)) < 0.5).all()


def test_a_noisy_constraint_still_learns_its_noise():
    """The lower floor only allows less noise: a noisy constraint's fitted noise stays near its
    true level (standardized variance about 0.1^2 / var(c))."""
    rng = np.random.default_rng(1)
    X = rng.random((40, 2))
    c = _wiggle(X) + 0.1 * rng.standard_normal(40)
    gp = MaternGP(np.zeros(2, dtype=bool), coords=CONSTRAINT_COORDS)
    gp.condition(X, c, rng)
    assert gp.last_fit.noise == pytest.approx(0.01 / np.var(c), rel=0.9)
