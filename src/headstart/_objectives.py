r"""Several objectives and constraints at the study layer: what a trial may be told, which trials
are feasible, the Pareto front and its hypervolume.

Conventions (Optuna's, so studies move between the two unchanged):

* a study has one direction per objective (``"minimize"`` / ``"maximize"``);
* a constraint value ``c`` is satisfied when ``c <= 0``; a trial is *feasible* when all of its
  constraints are; a trial of an unconstrained study is always feasible;
* the Pareto front (``study.best_trials``) is the set of complete, feasible trials that no other
  complete, feasible trial dominates (at least as good in every objective, better in one);
  trials with equal values are all on it;
* the hypervolume of a front is measured against a reference point that every counted trial
  must be strictly better than, in each objective's own direction.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from collections.abc import Set as AbstractSet
from typing import Any

import numpy as np

from headstart._config import to_max
from headstart._trial import check_value
from headstart.exceptions import (
    ConstraintValueError,
    InvalidValueError,
    ObjectiveCountError,
    ReferencePointError,
)


def _as_list(value: Any) -> list | None:
    """``value`` as a list if it is a sequence of numbers (a list, tuple or 1-d array)."""
    if isinstance(value, str | bytes | Mapping) or not hasattr(value, "__len__"):
        return None
    if getattr(value, "ndim", 1) != 1:
        return None
    return list(value)


def check_values(value: Any, directions: Sequence[str]) -> tuple[float, ...]:
    """The told objective value(s) as a checked tuple, one per objective.

    Raises:
        ObjectiveCountError: a number of values other than ``len(directions)``.
        InvalidValueError: a NaN, inf or non-number value (naming which objective).
    """
    k = len(directions)
    if k == 1:
        if _as_list(value) is not None and len(value) == 1:
            value = value[0]
        return (check_value(value),)
    values = _as_list(value)
    if values is None or len(values) != k:
        got = "one number" if values is None else f"{len(values)} values"
        raise ObjectiveCountError(
            f"The study has {k} objectives (directions {list(directions)}); got {got} "
            f"({value!r}). Tell a list of {k} numbers, in the order of the directions."
        )
    out = []
    for i, v in enumerate(values):
        try:
            out.append(check_value(v))
        except InvalidValueError as e:
            raise type(e)(f"Objective {i} ({directions[i]}): {e}") from None
    return tuple(out)


def check_constraints(
    constraints: Any, constrained: bool, expected: int | None
) -> tuple[float, ...] | None:
    """The told constraint values as a checked tuple (``None`` for an unconstrained study).

    Args:
        constraints: What the caller told.
        constrained: Whether the study declared constraints.
        expected: How many the study's earlier trials carry (``None``: none told yet).

    Raises:
        ConstraintValueError: constraints told to a study that declared none; none told to one
            that did; an empty list, a NaN / inf / non-number; or another count than before.
    """
    if not constrained:
        if constraints is not None:
            raise ConstraintValueError(
                "This study declared no constraints; nothing was stored. Create it with "
                "create_study(..., constraints=True) (or a function of the parameters) to "
                "record constraint values."
            )
        return None
    values = _as_list(constraints)
    if constraints is None or values is None or not values:
        raise ConstraintValueError(
            f"This study is constrained: tell its constraint values (a non-empty list, feasible "
            f"when each is <= 0) with constraints=[...]; got {constraints!r}. Nothing was stored."
        )
    if expected is not None and len(values) != expected:
        raise ConstraintValueError(
            f"The study's trials carry {expected} constraint value(s); got {len(values)}. "
            "Nothing was stored; tell the same constraints for every trial."
        )
    out = []
    for i, c in enumerate(values):
        try:  # the objective's checks: numpy / torch scalars, overflowing ints, NaN, inf
            out.append(check_value(c))
        except InvalidValueError as e:
            text = str(e).replace("The objective value", "The value")
            raise ConstraintValueError(
                f"Constraint {i}: {text} If the limit was badly broken, tell a large finite number."
            ) from None
    return tuple(out)


def pareto_indices(values: np.ndarray) -> np.ndarray:
    """Indices of the rows of ``values`` (``n x k``, maximized) that no other row dominates."""
    from headstart._engine.multi_output import pareto_mask

    return np.flatnonzero(pareto_mask(values))


def check_reference(
    reference: Any, n_objectives: int | None = None, name: str = "reference_point"
) -> tuple[float, ...]:
    """A hypervolume reference point as a tuple of finite floats, ``n_objectives`` of them if
    given: an ordered sequence (a list, tuple or 1-d array, not a set) of what
    :func:`~headstart._trial.check_value` accepts (numpy / torch scalars; no bools, NaN, inf or
    ints beyond float's range).

    Raises:
        ReferencePointError: anything else (``name`` is how the caller calls it).
    """
    values = None if isinstance(reference, AbstractSet) else _as_list(reference)
    try:
        out = None if values is None else tuple(check_value(v) for v in values)
    except InvalidValueError:
        out = None
    if out is None or (n_objectives is not None and len(out) != n_objectives):
        count = "" if n_objectives is None else f"{n_objectives} "
        raise ReferencePointError(
            f"{name} must be a list of {count}finite numbers, one per objective in the order "
            f"of directions; got {reference!r}."
        )
    return out


def hypervolume(values: np.ndarray, reference: Sequence[float], directions: Sequence[str]) -> float:
    """Hypervolume of ``values`` (``n x k``, in the study's directions) above ``reference``.

    Raises:
        ReferencePointError: a reference of another length than the objectives, or not finite
            numbers (:func:`check_reference`).
    """
    k = len(directions)
    ref_arr = np.array(check_reference(reference, k, name="The reference point"))
    points = to_max(np.asarray(values, dtype=np.float64).reshape(-1, k), directions)
    ref_max = to_max(ref_arr, directions)
    points = points[(points > ref_max).all(axis=1)]
    if not len(points):
        return 0.0
    import torch
    from botorch.utils.multi_objective.hypervolume import Hypervolume

    front = points[pareto_indices(points)]
    return float(Hypervolume(torch.as_tensor(ref_max)).compute(torch.as_tensor(front)))


__all__ = [
    "check_constraints",
    "check_reference",
    "check_values",
    "hypervolume",
    "pareto_indices",
]
