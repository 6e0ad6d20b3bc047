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


def _outputs(outputs: int, **settings) -> list:
    """Every output's model (objectives first, then constraints)."""
    space = hs.SearchSpace({"x": hs.Float(0.0, 1.0)})
    study = hs.create_study("c", space, storage=None, seed=0, **settings)
    return study._strategy.engine._output_surrogates(outputs)


def _floors(outputs: int, **settings) -> list[float]:
    return [model.coords.noise_floor for model in _outputs(outputs, **settings)]


def test_only_constraints_get_the_lower_floor():
    low, high = CONSTRAINT_MIN_NOISE, MIN_NOISE
    assert low < high
    assert _floors(3, constraints=True) == [high, low, low]
    assert _floors(3, directions=["minimize", "maximize"], constraints=True) == [high, high, low]
    assert _floors(2, directions=["minimize", "maximize"]) == [high, high]


def test_a_transfer_studys_unrecorded_constraint_gets_the_lower_floor():
    """With ``method="scaml"``, a constraint no source recorded is modelled by the plain GP,
    told that it is a constraint."""
    from headstart.storage import get_storage

    store = get_storage(None)
    space = hs.SearchSpace({"x": hs.Float(0.0, 1.0)})
    source = hs.create_study("earlier", space, storage=store, seed=1, method="random")
    for _ in range(12):
        trial = source.ask()
        source.tell(trial, (trial.params["x"] - 0.3) ** 2)
    study = hs.create_study(
        "new", space, storage=store, method="scaml", transfer_from=["earlier"], constraints=True
    )
    constraint = study._strategy.engine._output_surrogates(2)[1]
    assert constraint.coords.noise_floor == CONSTRAINT_MIN_NOISE


def test_deterministic_is_about_the_objective():
    """``deterministic=True`` pins the objective's noise; a constraint still learns its own
    (pinned at 1e-10, a slightly noisy constraint's fit collapses)."""
    models = _outputs(3, constraints=True, deterministic=True)
    assert [m.deterministic for m in models] == [True, False, False]


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
    """Deterministic values violating the boundary by 8e-6 to 8e-5: the constraint's GP gives
    the smallest an 8% chance of feasibility (``z`` 1.4) and the rest almost none (``z`` above
    5); a GP with the objective's floor gives each about even odds (``z`` below 0.3), so the
    acquisition keeps proposing such points."""
    z = _violation_z(CONSTRAINT_COORDS)
    assert z[-1] > 1.0 and (z[:-1] > 3.0).all()
    assert (np.abs(_violation_z(MATERN_COORDS)) < 0.5).all()


def test_a_noisy_constraint_still_learns_its_noise():
    """A guard, not a measure of the change: the lower floor only allows less noise, so a noisy
    constraint's fitted noise stays near its true level (standardized variance about
    0.1^2 / var(c)) instead of collapsing to the floor."""
    rng = np.random.default_rng(1)
    X = rng.random((40, 2))
    c = _wiggle(X) + 0.1 * rng.standard_normal(40)
    gp = MaternGP(np.zeros(2, dtype=bool), coords=CONSTRAINT_COORDS)
    gp.condition(X, c, rng)
    assert gp.last_fit.noise == pytest.approx(0.01 / np.var(c), rel=0.9)
