r"""Is transfer helping? The sources' model against no sources, on the study's own later trials.

A transfer model can be confidently wrong: sources that disagree with the task pull its
suggestions away while its predictive variance stays small. The study's own trials tell: both
models are conditioned on the first half of the completed trials (in order) and score the second
half by the predictive log-likelihood per trial,

    LL = mean_i log N(z_i; m(x_i), v(x_i) + s^2) + log b,    z_i = b (y_i - a),

in the objective's units (each model standardizes ``z = b (y - a)`` its own way; ``+ log b`` is
the Jacobian back to ``y``), with ``s^2 = NOISE_FLOOR`` (standardized units) added to the latent variance, so an
interpolating model is not rewarded for a zero variance. "No sources" is the default GP-BO model
(``method="gp"``). Transfer is called *hurting* when its LL is below the no-source model's by more
than :data:`HURTING_MARGIN` nats per trial.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from headstart._config import StudyConfig
from headstart._engine.threads import limit_threads
from headstart._strategy import Strategy, build_strategy

MIN_TRIALS = 8  # at least 4 to condition on and 4 to score
NOISE_FLOOR = 1e-3  # standardized units: a noise sd of ~3% of the objective's spread
HURTING_MARGIN = 0.5  # nats per held-out trial


def _held_out_ll(strategy: Strategy, X: np.ndarray, y: np.ndarray, split: int) -> float | None:
    """Mean predictive log-likelihood of ``y[split:]`` given ``X[:split], y[:split]``."""
    surrogate = strategy.engine.surrogate
    y_fit = y[:split]
    with limit_threads():
        posterior, y_model = surrogate.condition(X[:split], y_fit, np.random.default_rng(0))
        mean, var = posterior.posterior(X[split:])
    spread = float(np.ptp(y_fit))
    if spread == 0.0 or float(np.ptp(y_model)) == 0.0:
        return None  # equal values: no scale to compare in
    b = float(np.ptp(y_model)) / spread  # y_model = b (y - a): the model's affine map
    a = float(y_fit[0] - y_model[0] / b)
    z = (y[split:] - a) * b
    total = np.asarray(var, dtype=np.float64) + NOISE_FLOOR
    ll = -0.5 * np.log(2 * math.pi * total) - 0.5 * (z - mean) ** 2 / total + math.log(b)
    return float(ll.mean())


def transfer_check(
    space: Any,
    config: StudyConfig,
    meta_tasks: Sequence[Any],
    cache: Any,
    X: np.ndarray,
    y: np.ndarray,
) -> dict[str, Any] | None:
    """The held-out comparison (module docstring) for a transfer study's completed trials
    (``X`` encoded, ``y`` in the maximize convention, in trial order); ``None`` with fewer
    than :data:`MIN_TRIALS` trials or constant values.

    Returns:
        ``{"with_sources", "without_sources"}`` (mean log-likelihood per held-out trial),
        ``"n_fit"``, ``"n_held_out"`` and ``"hurting"``.
    """
    n = len(y)
    if n < MIN_TRIALS:
        return None
    split = n // 2
    if (config.options or {}).get("output_warp", "none") != "none":
        # the likelihoods are compared in the values' own (affine) units, which a nonlinear warp
        # of the targets would bend: the check asks about the sources, so it scores the model
        # without the warp
        config = dataclasses.replace(config, options={**config.options, "output_warp": "none"})
    transfer = build_strategy(space, config, storage=cache, meta_tasks=tuple(meta_tasks))
    plain_config = StudyConfig(method="gp", seed=config.seed, deterministic=config.deterministic)
    plain = build_strategy(space, plain_config)
    with_sources = _held_out_ll(transfer, X, y, split)
    without = _held_out_ll(plain, X, y, split)
    if with_sources is None or without is None:
        return None
    return {
        "with_sources": with_sources,
        "without_sources": without,
        "n_fit": split,
        "n_held_out": n - split,
        "hurting": with_sources < without - HURTING_MARGIN,
    }


__all__ = ["HURTING_MARGIN", "MIN_TRIALS", "transfer_check"]
