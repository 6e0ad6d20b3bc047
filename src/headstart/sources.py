r"""Meta-data for transfer learning: results of earlier, related tasks on the same search space.

A :class:`MetaTask` is one earlier task: its evaluated configurations, encoded to the unit cube of
the study's search space, and their objective values.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

DIRECTIONS = ("minimize", "maximize")


@dataclass(frozen=True, eq=False)
class MetaTask:
    r"""Evaluations of one earlier task on the study's search space.

    Args:
        name: Name of the task (a study name, a ``task`` column value, ...).
        X: ``n x d`` configurations encoded to ``[0, 1]^d`` with the study's
            :meth:`~headstart.space.SearchSpace.encode`.
        y: ``n`` finite objective values.
        direction: ``"minimize"`` or ``"maximize"``: how ``y`` is to be read.
    """

    name: str
    X: np.ndarray
    y: np.ndarray
    direction: str = "minimize"

    def __post_init__(self) -> None:
        object.__setattr__(self, "X", np.asarray(self.X, dtype=np.float64))
        object.__setattr__(self, "y", np.asarray(self.y, dtype=np.float64).reshape(-1))

    @property
    def n(self) -> int:
        """Number of evaluations."""
        return len(self.y)

    def y_max(self) -> np.ndarray:
        """``y`` in the *maximize* convention (negated for minimization tasks)."""
        return -self.y if self.direction == "minimize" else self.y.copy()
