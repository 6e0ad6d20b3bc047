r"""The unit of meta-data, :class:`MetaTask`, and how search spaces are compared for transfer.

Two spaces agree when their structure does: parameter names, types, bounds, log scaling, choices
and fixed values. Priors and categorical weights are beliefs, not encoding, and may differ.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from headstart.exceptions import InvalidSettingError, MetaDataValueError, SourceSpaceMismatchError
from headstart.space import SearchSpace

DIRECTIONS = ("minimize", "maximize")
MPHD_HINT = "For transfer across different search spaces use method='mphd'."


@dataclass(frozen=True, eq=False)
class MetaTask:
    r"""Evaluations of one earlier task on the study's search space.

    Args:
        name: Name of the task (a study name, a ``task`` column value, ...).
        X: ``n x d`` configurations encoded to ``[0, 1]^d`` with the study's
            :meth:`~headstart.space.SearchSpace.encode`.
        y: ``n`` finite objective values.
        direction: ``"minimize"`` or ``"maximize"``: how ``y`` is to be read.

    Raises:
        InvalidSettingError: an unknown direction.
        MetaDataValueError: ``X`` is not ``n x d``, or ``X`` / ``y`` hold NaN, inf or non-numbers.
    """

    name: str
    X: np.ndarray
    y: np.ndarray
    direction: str = "minimize"

    def __post_init__(self) -> None:
        _check_direction(self.direction)
        try:
            X = np.asarray(self.X, dtype=np.float64)
            y = np.asarray(self.y, dtype=np.float64).reshape(-1)
        except (TypeError, ValueError) as e:
            raise MetaDataValueError(f"Task {self.name!r}: X and y must be numeric ({e}).") from e
        if X.size == 0 and X.ndim < 2:
            X = X.reshape(0, 0)
        if X.ndim != 2 or X.shape[0] != len(y):
            raise MetaDataValueError(
                f"Task {self.name!r}: X must be n x d with one row per value in y; got X of shape "
                f"{X.shape} and {len(y)} values."
            )
        for label, bad in (("y", ~np.isfinite(y)), ("X", ~np.isfinite(X).all(axis=1))):
            if bad.any():
                row = int(np.argmax(bad))
                raise MetaDataValueError(
                    f"Task {self.name!r}, row {row}: {label} is not finite. Meta-data must be "
                    "finite numbers; drop the row."
                )
        object.__setattr__(self, "X", X)
        object.__setattr__(self, "y", y)

    @property
    def n(self) -> int:
        """Number of evaluations."""
        return len(self.y)

    def y_max(self) -> np.ndarray:
        """``y`` in the *maximize* convention (negated for minimization tasks)."""
        return -self.y if self.direction == "minimize" else self.y.copy()


# --- checks ---------------------------------------------------------------------------------------
def _check_direction(direction: Any) -> None:
    if direction not in DIRECTIONS:
        raise InvalidSettingError(f"direction must be 'minimize' or 'maximize'; got {direction!r}.")


def _finite(value: Any) -> float | None:
    """``value`` as a finite float, or ``None`` when it is NaN, inf, a bool or not a number."""
    if hasattr(value, "item") and not isinstance(value, int | float):  # numpy scalars
        value = value.item()
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    value = float(value)
    return value if math.isfinite(value) else None


def _structure(space: SearchSpace) -> dict[str, dict]:
    """The parts of a space that fix its encoding (priors and categorical weights dropped)."""
    out = {}
    for name, p in space.to_json()["params"].items():
        out[name] = {k: v for k, v in p.items() if k not in ("prior", "weights")}
    return out


def _fmt(p: dict) -> str:
    kind = p["type"]
    if kind in ("float", "int"):
        return f"{kind} in [{p['low']!r}, {p['high']!r}]" + (" (log)" if p["log"] else "")
    if kind == "categorical":
        return f"categorical {p['choices']!r}"
    return f"fixed at {p['value']!r}"


def space_difference(source: SearchSpace, target: SearchSpace) -> str | None:
    """How ``source`` differs from ``target`` parameter by parameter, or ``None`` if it does not.

    Example:
        >>> import headstart as hs
        >>> a = hs.SearchSpace({"x": hs.Float(0.0, 1.0)})
        >>> space_difference(a, hs.SearchSpace({"x": hs.Float(0.0, 2.0), "n": hs.Int(1, 3)}))
        "parameter 'n' is missing from the source; parameter 'x' is float in [0.0, 1.0] in the source but float in [0.0, 2.0] in the study"
    """
    a, b = _structure(source), _structure(target)
    if a == b:
        return None
    diffs = [f"parameter {n!r} is missing from the source" for n in b if n not in a]
    diffs += [f"the source has an extra parameter {n!r}" for n in a if n not in b]
    diffs += [
        f"parameter {n!r} is {_fmt(a[n])} in the source but {_fmt(b[n])} in the study"
        for n in b
        if n in a and a[n] != b[n]
    ]
    return "; ".join(diffs)


def _check_space(source: SearchSpace, target: SearchSpace, label: str) -> None:
    diff = space_difference(source, target)
    if diff is not None:
        raise SourceSpaceMismatchError(
            f"{label} does not share the study's search space: {diff}. Transfer to this study "
            f"needs the same parameters, types and bounds. {MPHD_HINT}"
        )
