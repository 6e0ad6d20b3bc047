r"""Which parameters matter: Sobol total-effect indices of a GP fitted to the study's trials.

The measure: fit headstart's GP (Matérn-5/2 ARD, the ``method="gp"`` model) to the completed
trials on the encoded unit cube (log-scaled parameters are uniform in their logarithm, integers
and categoricals snapped to their grid), and compute for each parameter ``i`` the total-effect
Sobol index of the GP's posterior mean ``m``:

.. math::

    S_{T,i} = \frac{E[\operatorname{Var}(m \mid x_{-i})]}{\operatorname{Var}(m)}
            = \frac{E[(m(A) - m(A_B^{(i)}))^2]}{2 \operatorname{Var}(m)}

(Jansen's estimator, Saltelli et al. 2010, Eq. (f) of Table 2), with ``A`` and ``B`` two
independent uniform samples and ``A_B^{(i)}`` = ``A`` with column ``i`` from ``B``.

Why this and not fANOVA (Hutter et al. 2014, Optuna's default): both decompose the variance of a
surrogate over the uniform search space, but a GP is smooth where a random forest is piecewise
constant, so a few dozen trials already give stable indices, and it is the model the study
searched with. Total effects (not first-order ones) count a parameter's interactions too, so a
parameter that matters only jointly with another is not reported as unimportant. The indices are
shown normalised to sum to 1, as Optuna does; ``raw=True`` gives the unnormalised ``S_T``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from headstart._config import StudyConfig
from headstart._engine.threads import limit_threads
from headstart._strategy import build_strategy
from headstart.exceptions import NoCompletedTrialsError
from headstart.space import SearchSpace

MIN_TRIALS = 3


def fit_mean(space: SearchSpace, configs: Sequence[Mapping[str, Any]], values: Sequence[float]):
    """The posterior mean ``m(U)`` (on the encoded cube) of the GP fitted to the trials, in the
    units of ``values`` (the GP works on standardized values; this undoes the affine map)."""
    values = np.asarray(values, dtype=np.float64)
    strategy = build_strategy(space, StudyConfig(method="gp", seed=0))
    surrogate = strategy.engine.surrogate
    with limit_threads():  # small matrices: more threads only wait on each other
        posterior, y_model = surrogate.condition(
            space.encode(list(configs)), values, np.random.default_rng(0)
        )
    spread = float(np.ptp(y_model)) if len(y_model) else 0.0
    if spread == 0.0:  # one value (or all equal): the mean is that value everywhere
        level = float(values.mean()) if len(values) else 0.0
        return lambda U: np.full(len(U), level)
    scale = float(np.ptp(values)) / spread  # y_model = (values - shift) / scale, exactly affine
    shift = float(values[0] - scale * y_model[0])

    def mean(U: np.ndarray) -> np.ndarray:
        with limit_threads():
            return shift + scale * posterior.posterior(U)[0]

    return mean


def sobol_total_effects(
    mean, space: SearchSpace, *, n: int = 4096, seed: int = 0
) -> dict[str, float]:
    """Jansen's estimator of each free parameter's total-effect index of ``mean``."""
    rng = np.random.default_rng(seed)
    A = space.snap(rng.random((n, space.dim)))
    B = space.snap(rng.random((n, space.dim)))
    fA = mean(A)
    variance = float(np.var(np.concatenate([fA, mean(B)])))
    out = {}
    for i, column in enumerate(space.columns):
        AB = A.copy()
        AB[:, i] = B[:, i]
        effect = float(np.mean((fA - mean(AB)) ** 2) / 2.0)
        out[column.name] = effect / variance if variance > 0 else 0.0
    return out


def parameter_importance(study: Any, *, raw: bool = False, n: int = 4096) -> dict[str, float]:
    """Each free parameter's importance in ``study``, largest first (see the module docstring).

    Args:
        study: A :class:`~headstart.study.Study` with at least 3 completed trials.
        raw: Return the total-effect indices ``S_T`` themselves instead of shares summing to 1.
        n: Monte-Carlo sample size of the estimator.

    Raises:
        NoCompletedTrialsError: fewer than 3 completed trials.
    """
    done = [t for t in study.trials if t.state == "complete"]
    if len(done) < MIN_TRIALS:
        raise NoCompletedTrialsError(
            f"Study {study.name!r} has {len(done)} completed trials; parameter importance needs "
            f"at least {MIN_TRIALS}."
        )
    sign = -1.0 if study.direction == "minimize" else 1.0
    mean = fit_mean(study.space, [t.params for t in done], [sign * t.value for t in done])
    effects = sobol_total_effects(mean, study.space, n=n)
    if not raw:
        total = sum(effects.values())
        effects = {k: (v / total if total > 0 else 0.0) for k, v in effects.items()}
    return dict(sorted(effects.items(), key=lambda kv: -kv[1]))


__all__ = ["fit_mean", "parameter_importance", "sobol_total_effects"]
