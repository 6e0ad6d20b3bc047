r"""The unit of meta-data, :class:`MetaTask`, and how search spaces are compared for transfer.

Two spaces agree when their structure does: parameter names, types, bounds, log scaling, choices
and fixed values. Priors and categorical weights are beliefs, not encoding, and may differ.
"""

from __future__ import annotations

import math
from typing import Any

from headstart.exceptions import SourceSpaceMismatchError
from headstart.space import SearchSpace, describe_difference


def _finite(value: Any) -> float | None:
    """``value`` as a finite float, or ``None`` when it is NaN, inf, a bool or not a number."""
    if hasattr(value, "item") and not isinstance(value, int | float):  # numpy scalars
        value = value.item()
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    value = float(value)
    return value if math.isfinite(value) else None


def space_difference(source: SearchSpace, target: SearchSpace) -> str | None:
    """How ``source`` differs from ``target`` in what fixes the encoding, parameter by parameter,
    or ``None`` if it does not (priors and categorical weights may differ).

    Example:
        >>> import headstart as hs
        >>> a = hs.SearchSpace({"x": hs.Float(0.0, 1.0)})
        >>> space_difference(a, hs.SearchSpace({"x": hs.Float(0.0, 2.0), "n": hs.Int(1, 3)}))
        "parameter 'n' is missing from the source; parameter 'x' is float in [0.0, 1.0] in the source but float in [0.0, 2.0] in the study"
    """
    return describe_difference(source, target, "the source", "the study", beliefs=False)


def _check_space(source: SearchSpace, target: SearchSpace, label: str) -> None:
    diff = space_difference(source, target)
    if diff is not None:
        raise SourceSpaceMismatchError(
            f"{label} does not share the study's search space: {diff}. Transfer to this study "
            f"needs the same parameters, types and bounds; to learn from studies on other "
            f"search spaces, use method='mphd'."
        )
