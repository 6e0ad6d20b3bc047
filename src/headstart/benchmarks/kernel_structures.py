r"""Known-structure data sets for the kernel search: GP draws from composite kernels (issue 17).

On real data nobody knows the best kernel, so a search can only be compared with another search.
These data sets are drawn from GPs whose kernel is a known composite of SE, LIN, PER and RQ
leaves on 1-5 inputs, at several noise levels and sizes (N = 50-400), so a search's best score
can be read as a fraction of the truth's:

    fraction = (best - null) / (truth - null),

with ``truth`` the oracle's score (log evidence / N, MAP fit) of the true expression on the same
training data and ``null = -(log(2 pi) + 1) / 2`` the score of i.i.d. standard-normal noise (the
targets are standardised), so 0 means "no structure found" and 1 "as good as the truth".

Every set draws ``N`` training and 200 test points jointly from ``GP(0, k) + N(0, noise^2)`` with
inputs uniform on ``[0, 1]^D`` (fixed seed per set), then min-max scales the inputs and
standardises the targets with the training statistics, as :func:`headstart.kernels.search` does.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

NULL_SCORE = -0.5 * (math.log(2 * math.pi) + 1.0)
"""Log evidence / N of standardised targets under i.i.d. N(0, 1) noise (the fraction's zero)."""
TEST_POINTS = 200
SEED = 20221


@dataclass(frozen=True)
class KnownStructure:
    """One generating kernel: expression, per-leaf hyperparameters, noise sd, size and space.

    ``values`` lists each leaf's hyperparameters left to right in
    :data:`~headstart.kernels.grammar.PARAM_NAMES` order (SE: variance, lengthscale; LIN:
    variance, offset; PER: variance, lengthscale, period; RQ: variance, lengthscale, alpha).
    """

    name: str
    expression: str
    values: tuple[float, ...]
    noise: float
    n: int
    space: str = "full"

    @property
    def n_dims(self) -> int:
        from headstart.kernels.grammar import leaves, parse

        return max(leaf.dim for leaf in leaves(parse(self.expression))) + 1


SUITE = (
    KnownStructure("ks-per+lin", "LIN[0] + PER[0]", (1, 0.1, 1, 0.7, 0.15), 0.1, 80),
    KnownStructure("ks-per+se-small", "PER[0] + SE[0]", (1, 0.8, 0.25, 1, 0.4), 0.1, 50),
    KnownStructure("ks-se*per", "PER[0] * SE[0]", (1, 0.8, 0.12, 1, 0.4), 0.1, 150),
    KnownStructure("ks-se+se-2d", "SE[0] + SE[1]", (1, 0.15, 1, 0.3), 0.1, 100),
    KnownStructure(
        "ks-per*se+lin-2d", "PER[0] * SE[1] + LIN[1]", (1, 0.8, 0.2, 1, 0.3, 0.5, 0.1), 0.1, 120
    ),
    KnownStructure("ks-rq*se-2d", "RQ[0] * SE[1]", (1, 0.2, 0.5, 1, 0.25), 0.3, 200),
    KnownStructure("ks-se*se+se-3d", "SE[0] * SE[1] + SE[2]", (1, 0.3, 1, 0.3, 1, 0.2), 0.1, 200),
    KnownStructure(
        "ks-lin*se+per-3d", "LIN[0] * SE[1] + PER[2]", (1, 0.1, 1, 0.3, 1, 0.8, 0.25), 0.05, 250
    ),
    KnownStructure(
        "ks-4d", "SE[1] * SE[2] + LIN[3] + SE[0]", (1, 0.3, 1, 0.3, 0.5, 0.1, 1, 0.2), 0.2, 300
    ),
    KnownStructure(
        "ks-5d",
        "SE[0] * SE[1] + SE[3] * SE[4] + RQ[2]",
        (1, 0.3, 1, 0.3, 1, 0.3, 1, 0.3, 1, 0.2, 1),
        0.1,
        400,
        "se-rq",
    ),
)
STRUCTURES = {s.name: s for s in SUITE}


def _seed(spec: KnownStructure, seed: int | None) -> int:
    return SEED + sum(map(ord, spec.name)) if seed is None else int(seed)


def _raw(spec: KnownStructure, n: int, seed: int):
    import torch

    from headstart.kernels.covariance import covariance
    from headstart.kernels.grammar import parse

    rng = np.random.default_rng(seed)
    total = n + TEST_POINTS
    X = rng.uniform(0.0, 1.0, (total, spec.n_dims))
    values = torch.tensor([*spec.values, 0.0], dtype=torch.float64)
    K = covariance(parse(spec.expression), values, torch.from_numpy(X)).numpy()
    f = np.linalg.cholesky(K + 1e-8 * np.eye(total)) @ rng.standard_normal(total)
    return X, f + spec.noise * rng.standard_normal(total)


def _scaled(X: np.ndarray, y: np.ndarray, n: int):
    """Inputs min-max scaled and targets standardised with the first ``n`` (training) rows."""
    lo, hi = X[:n].min(0), X[:n].max(0)
    X = (X - lo) / np.where(hi > lo, hi - lo, 1.0)
    y = (y - y[:n].mean()) / y[:n].std()
    return X[:n], y[:n], X[n:], y[n:]


def draw(spec: KnownStructure, n: int | None = None, seed: int | None = None):
    """``(X_train, y_train, X_test, y_test)`` of one known-structure set, scaled.

    Args:
        spec: The generating kernel.
        n: Training points (default ``spec.n``).
        seed: Draw seed (default: fixed per set, so the suite is reproducible).
    """
    n = spec.n if n is None else int(n)
    return _scaled(*_raw(spec, n, _seed(spec, seed)), n)


def truth_score(spec: KnownStructure, restarts: int = 3, n: int | None = None, seed=None):
    """The oracle's score of the generating expression on the training data of
    ``draw(spec, n, seed)``.

    Besides the oracle's own ``restarts`` starts, the MAP fit starts from the generating
    hyperparameters in the scaled units, so a multimodal likelihood (a period) cannot make the
    truth look worse than it is.
    """
    from headstart.kernels.grammar import PARAM_NAMES, leaves, parse
    from headstart.kernels.oracle import evaluate

    n = spec.n if n is None else int(n)
    X_raw, y_raw = _raw(spec, n, _seed(spec, seed))
    X, y, _, _ = _scaled(X_raw, y_raw, n)
    span, var = np.ptp(X_raw[:n], axis=0), float(y_raw[:n].var())
    start, values = [], iter(spec.values)
    for leaf in leaves(parse(spec.expression)):
        for name in PARAM_NAMES[leaf.kind]:
            v = next(values)
            if name in ("variance", "offset"):  # scale with the target's variance
                v /= var
            if leaf.kind == "LIN" and name == "variance":  # v x x' in scaled inputs
                v *= span[leaf.dim] ** 2
            if name in ("lengthscale", "period"):  # lengths in scaled inputs
                v /= span[leaf.dim]
            start.append(v)
    start.append(max(spec.noise**2 / var - 1e-6, 1e-8))
    return evaluate(spec.expression, X, y, restarts=restarts, initial=np.array(start)).score


def fraction(best: float, truth: float) -> float:
    """``(best - null) / (truth - null)``: the share of the truth's evidence gain over noise."""
    return (best - NULL_SCORE) / (truth - NULL_SCORE)


__all__ = [
    "NULL_SCORE",
    "STRUCTURES",
    "SUITE",
    "KnownStructure",
    "draw",
    "fraction",
    "truth_score",
]
