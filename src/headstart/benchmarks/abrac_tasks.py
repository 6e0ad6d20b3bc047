r"""The ABRAC paper's synthetic families, leave one task out (Horváth et al., AISTATS 2021, Sec. 5).

* ``forrester-loo``: ``f_t(x) = (a_t x - 2)^2 sin(b_t x - 4) + c_t`` on ``[0, 1]`` with
  ``a_t ~ N(6, 1)``, ``b_t ~ N(12, 2)`` (the paper writes ``N(12, 4)``; read as a variance, so
  standard deviation 2), ``c_t ~ U(0, 10)``; 10 tasks of 20 uniform points.
* ``quadratic-loo``: ``f_t(x) = a_t x^T x + b_t 1^T x + c_t`` on ``[-10, 10]^5`` with
  ``a, b, c ~ U(0.1, 1)``; 30 tasks of 100 uniform points. The optimum is
  ``x* = -b / (2a)`` in every coordinate, ``f* = c - 5 b^2 / (4 a)``.

The tasks of a family are drawn once (a fixed stream per family); the instance of ``seed`` takes
task ``seed mod T`` as the target and the others, with their points, as sources -- so seeds
``0..T-1`` hold every task out once and further seeds repeat the targets with new BO seeds.
Noise-free.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from headstart.benchmarks.families import family_rng
from headstart.benchmarks.functions import Task, TaskFamily, register_task
from headstart.sources import MetaTask
from headstart.space import Float, SearchSpace


@dataclass(frozen=True)
class Forrester:
    a: float
    b: float
    c: float

    def values(self, X: np.ndarray) -> np.ndarray:
        x = np.asarray(X, dtype=np.float64)[:, 0]
        return (self.a * x - 2) ** 2 * np.sin(self.b * x - 4) + self.c

    def __call__(self, params) -> float:
        return float(self.values(np.array([[params["x"]]]))[0])


@dataclass(frozen=True)
class Quadratic:
    a: float
    b: float
    c: float
    dim: int = 5

    def values(self, X: np.ndarray) -> np.ndarray:
        X = np.asarray(X, dtype=np.float64)
        return self.a * (X * X).sum(1) + self.b * X.sum(1) + self.c

    def __call__(self, params) -> float:
        return float(self.values(np.array([[params[f"x{i}"] for i in range(self.dim)]]))[0])

    @property
    def optimum(self) -> float:
        return self.c - self.dim * self.b**2 / (4 * self.a)


@dataclass(frozen=True)
class LeaveOneOut:
    r"""``sampler(seed) -> Task``: task ``seed mod n_tasks`` of ``kind`` held out (module doc)."""

    family: str
    kind: str  # "forrester" or "quadratic"
    n_tasks: int
    n_points: int

    def __call__(self, seed: int) -> Task:
        return _instance(self, int(seed) % self.n_tasks)


def _space(kind: str) -> SearchSpace:
    if kind == "forrester":
        return SearchSpace({"x": Float(0.0, 1.0)})
    return SearchSpace({f"x{i}": Float(-10.0, 10.0) for i in range(5)})


@lru_cache(maxsize=8)
def _family(sampler: LeaveOneOut):
    rng = family_rng(sampler.family, 0, 0)
    objectives = []
    for _ in range(sampler.n_tasks):
        if sampler.kind == "forrester":
            objectives.append(Forrester(rng.normal(6, 1), rng.normal(12, 2), rng.uniform(0, 10)))
        else:
            objectives.append(Quadratic(*rng.uniform(0.1, 1.0, size=3)))
    space = _space(sampler.kind)
    low, high = (0.0, 1.0) if sampler.kind == "forrester" else (-10.0, 10.0)
    names = [c.name for c in space.columns]
    data = []
    for f in objectives:
        X = low + rng.random((sampler.n_points, len(names))) * (high - low)
        configs = [dict(zip(names, row.tolist(), strict=True)) for row in X]
        data.append((space.encode(configs), f.values(X)))
    return space, objectives, data


@lru_cache(maxsize=64)
def _instance(sampler: LeaveOneOut, target: int) -> Task:
    space, objectives, data = _family(sampler)
    metas = tuple(
        MetaTask(f"{sampler.family}-task{t}", X, y) for t, (X, y) in enumerate(data) if t != target
    )
    f = objectives[target]
    if isinstance(f, Quadratic):
        optimum = f.optimum
    else:
        grid = np.linspace(0.0, 1.0, 200_001)[:, None]
        optimum = float(f.values(grid).min())
    return Task(
        f"{sampler.family}-target{target}",
        space,
        f,
        optimum,
        f"{sampler.family}, task {target} held out",
        meta_tasks=metas,
    )


FORRESTER = LeaveOneOut("forrester-loo", "forrester", 10, 20)
QUADRATIC = LeaveOneOut("quadratic-loo", "quadratic", 30, 100)
register_task(
    TaskFamily(
        "forrester-loo",
        _space("forrester"),
        FORRESTER,
        "Forrester family, 10 tasks x 20 points, leave one out (ABRAC paper)",
    )
)
register_task(
    TaskFamily(
        "quadratic-loo",
        _space("quadratic"),
        QUADRATIC,
        "parameterised quadratics, D = 5, 30 tasks x 100 points, leave one out (ABRAC)",
    )
)


def quadratic_sources(n_tasks: int, n_points: int, seed: int = 0) -> list[MetaTask]:
    """``n_tasks`` quadratics with ``n_points`` each (the scaling run's meta-data)."""
    rng = np.random.default_rng(seed)
    space = _space("quadratic")
    out = []
    for t in range(n_tasks):
        f = Quadratic(*rng.uniform(0.1, 1.0, size=3))
        X = rng.uniform(-10, 10, size=(n_points, 5))
        out.append(MetaTask(f"quad{t}", (X + 10) / 20, f.values(X)))
    assert math.isclose(space.encode([{f"x{i}": 10.0 for i in range(5)}])[0, 0], 1.0)
    return out


__all__ = ["FORRESTER", "QUADRATIC", "Forrester", "LeaveOneOut", "Quadratic", "quadratic_sources"]
