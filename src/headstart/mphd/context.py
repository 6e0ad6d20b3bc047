r"""MPHD's context of a lengthscale: what the prior network knows about a search-space dimension.

Fan, Han & Wang (2024), "Transfer Learning for Bayesian Optimization on Heterogeneous Search
Spaces" (MPHD), Sec. 2.2: the lengthscale of dimension ``k`` of a space gets the context

    s_k = [1{k discrete}, 1{k continuous}, n_discrete(space), n_continuous(space)]

so a network of ``s_k`` gives a Gamma prior for that lengthscale in any space, including one never
seen. headstart's integer and categorical parameters are discrete, floats continuous (the
paper's code calls a column discrete when it holds exactly 2 values; a typed search space says
it directly). The network standardizes the contexts (the paper feeds raw counts, up to ~18).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

FEATURES = ("is_discrete", "is_continuous", "n_discrete", "n_continuous")
KINDS = ("continuous", "integer", "categorical")


def dimension_context(kinds: Sequence[str]) -> np.ndarray:
    r"""The ``d x 4`` context matrix of a space whose columns have these ``kinds``.

    Args:
        kinds: One of :data:`KINDS` per encoded column (``space.columns[j].kind``).

    Returns:
        ``d x 4`` float array, columns :data:`FEATURES`.

    Raises:
        ValueError: an unknown kind, or no column.

    Example:
        >>> dimension_context(["integer", "continuous", "categorical"]).tolist()
        [[1.0, 0.0, 2.0, 1.0], [0.0, 1.0, 2.0, 1.0], [1.0, 0.0, 2.0, 1.0]]
    """
    kinds = list(kinds)
    if not kinds:
        raise ValueError("A search space needs at least one dimension.")
    unknown = sorted(set(kinds) - set(KINDS))
    if unknown:
        raise ValueError(f"Unknown column kinds {unknown}; expected {KINDS}.")
    discrete = np.array([k != "continuous" for k in kinds], dtype=np.float64)
    n_discrete = float(discrete.sum())
    n_continuous = float(len(kinds) - n_discrete)
    return np.column_stack(
        [
            discrete,
            1.0 - discrete,
            np.full(len(kinds), n_discrete),
            np.full(len(kinds), n_continuous),
        ]
    )


__all__ = ["FEATURES", "KINDS", "dimension_context"]
