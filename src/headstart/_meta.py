r"""The unit of meta-data, :class:`MetaTask`, and its content hash (a leaf: numpy only).

Engines, storage and sources all speak of meta-tasks; keeping them here lets each import the type
without importing the others.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from headstart.exceptions import InvalidSettingError, MetaDataValueError

DIRECTIONS = ("minimize", "maximize")


MAX_ABS_VALUE = 1e100  # larger meta-data values overflow the models' second moments


def _check_direction(direction: Any) -> None:
    if direction not in DIRECTIONS:
        raise InvalidSettingError(f"direction must be 'minimize' or 'maximize'; got {direction!r}.")


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
        if len(y) and float(np.abs(y).max()) > MAX_ABS_VALUE:
            row = int(np.argmax(np.abs(y)))
            raise MetaDataValueError(
                f"Task {self.name!r}, row {row}: |y| = {abs(y[row]):.3g} exceeds "
                f"{MAX_ABS_VALUE:.0e}; the models square the values, which would overflow. "
                "Rescale the values (divide by a constant or take their log) or drop the row."
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


def _check_direction(direction: Any) -> None:
    if direction not in DIRECTIONS:
        raise InvalidSettingError(f"direction must be 'minimize' or 'maximize'; got {direction!r}.")


def data_hash(tasks: Iterable[MetaTask]) -> str:
    r"""SHA-256 hex digest of the meta-data: names, directions, shapes, ``X`` and ``y``, in order.

    Arrays are hashed as little-endian float64 bytes with ``-0.0`` folded into ``0.0``, so equal
    data give equal keys on every platform. Use it (with the model's settings) as a cache key.
    """
    h = hashlib.sha256(b"headstart-meta-v1\0")

    def part(data: bytes) -> None:
        h.update(len(data).to_bytes(8, "little"))
        h.update(data)

    for t in tasks:
        part(t.name.encode())
        part(t.direction.encode())
        part(np.asarray(t.X.shape, dtype="<i8").tobytes())
        part(np.ascontiguousarray(t.X + 0.0, dtype="<f8").tobytes())
        part(np.ascontiguousarray(t.y + 0.0, dtype="<f8").tobytes())
    return h.hexdigest()


def ranked_configurations(tasks: Sequence[MetaTask], n: int) -> np.ndarray:
    r"""Up to ``n`` configurations of ``tasks`` (rows of their ``X``), best first.

    Each task's rows are ranked by value (best first, in the task's direction); the lists are
    interleaved -- every task's best, then every task's second best, ... -- so no one source fills
    the warm start (the "initializing BO via meta-learning" of Feurer et al., AAAI 2015). A row
    equal to one already taken is skipped; fewer than ``n`` rows come back when the tasks run out.

    Returns:
        ``m x d`` rows (``m <= n``).
    """
    ranked = [t.X[np.argsort(-t.y_max(), kind="stable")] for t in tasks]
    d = ranked[0].shape[1] if ranked else 0
    out: list[np.ndarray] = []
    seen: set[bytes] = set()
    for depth in range(max((len(r) for r in ranked), default=0)):
        for rows in ranked:
            if len(out) >= n:
                return np.array(out).reshape(-1, d)
            if depth < len(rows) and (key := (rows[depth] + 0.0).tobytes()) not in seen:
                seen.add(key)
                out.append(rows[depth])
    return np.array(out).reshape(-1, d)


__all__ = ["DIRECTIONS", "MetaTask", "data_hash", "ranked_configurations"]
