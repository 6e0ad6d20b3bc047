r"""Test functions with known minima, wrapped as benchmark :class:`Task` objects.

Every task is a minimisation problem over a :class:`~headstart.space.SearchSpace` with a known
global minimum, so the simple regret ``best value so far - optimum`` can be reported. The
implementations are vectorised numpy: :meth:`Task.objective` takes one configuration dict, and
the module-level functions (``branin``, ``hartmann3`` ...) take an ``n x d`` array.

References:
    .. [Dixon1978] L. C. W. Dixon and G. P. Szego. The global optimization problem: an
       introduction. Towards Global Optimisation 2, 1978 (Branin, Hartmann 3 and 6).
    .. [Forrester2008] A. Forrester, A. Sobester and A. Keane. Engineering Design via Surrogate
       Modelling, Wiley 2008, p. 83 (the one-dimensional Forrester function).
    .. [SurjanovicBingham] S. Surjanovic and D. Bingham. Virtual Library of Simulation
       Experiments, https://www.sfu.ca/~ssurjano (argmins used in the tests).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from headstart.benchmarks import _registry
from headstart.exceptions import InvalidSettingError
from headstart.sources import MetaTask
from headstart.space import Float, SearchSpace


@dataclass(frozen=True)
class Task:
    r"""A minimisation problem with a known optimum.

    Args:
        name: Registry key (lowercase, no spaces), e.g. ``"branin"``.
        space: The search space the optimisers see.
        objective: ``objective(params) -> float`` to minimise; must be a module-level function
            (or another picklable callable) so the task can be sent to worker processes.
        optimum: The known global minimum value.
        description: One line shown by ``headstart bench list``.
        meta_tasks: Evaluations of related tasks on the same space (transfer-learning meta-data,
            ``X`` encoded with ``space.encode``); empty for a plain task.
        noise_std: Standard deviation of the Gaussian noise added to what the optimisers observe.
            The recorded ``value``, ``best_value`` and ``regret`` stay noise-free.
        observe: ``observe(params, rng) -> float``, what the optimisers observe instead of
            ``objective(params)`` (e.g. one training seed's result where ``objective`` is the
            mean over seeds); ``None``: the objective plus ``noise_std`` noise. Picklable.

    Example:
        >>> from headstart.benchmarks.functions import get_task
        >>> task = get_task("branin")
        >>> abs(task.objective({"x1": math.pi, "x2": 2.275}) - task.optimum) < 1e-9
        True
    """

    name: str
    space: SearchSpace
    objective: Callable[[Mapping[str, Any]], float]
    optimum: float
    description: str = ""
    meta_tasks: tuple[MetaTask, ...] = ()
    noise_std: float = 0.0
    observe: Callable[[Mapping[str, Any], np.random.Generator], float] | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "meta_tasks", tuple(self.meta_tasks))
        if not all(isinstance(m, MetaTask) for m in self.meta_tasks):
            raise InvalidSettingError(
                "Task.meta_tasks must hold headstart.sources.MetaTask objects."
            )
        noise = float(self.noise_std)
        if not math.isfinite(noise) or noise < 0:
            raise InvalidSettingError(f"Task.noise_std must be finite and >= 0; got {noise!r}.")
        object.__setattr__(self, "noise_std", noise)

    @property
    def dim(self) -> int:
        """Number of free parameters."""
        return self.space.dim

    def evaluate(self, params: Mapping[str, Any]) -> float:
        """Alias of :attr:`objective` (one configuration → one float)."""
        return float(self.objective(params))

    def regret(self, value: float) -> float:
        """Simple regret ``value - optimum`` (>= 0 up to rounding for a correct optimum)."""
        return float(value) - self.optimum


@dataclass(frozen=True)
class TaskFamily:
    r"""A distribution over tasks: one :class:`Task` per seed (e.g. a randomly shifted Branin).

    The runner asks a family for the task of each job's seed, so every method sees the same task,
    optimum and meta-data for a given seed. Regrets are comparable across the seeds of one family
    (each relative to its own instance's optimum), not across families.

    Args:
        name: Registry key, e.g. ``"branin-m8"``.
        space: The search space every instance shares.
        sampler: ``sampler(seed) -> Task``; deterministic in ``seed`` and picklable (a module-level
            function or a frozen dataclass with ``__call__``) so workers can receive it.
        description: One line shown by ``headstart bench list``.

    Example:
        >>> from headstart.benchmarks import get_task
        >>> family = get_task("branin-m8")
        >>> task = family.instance(0)
        >>> len(task.meta_tasks), task.meta_tasks[0].n, task.noise_std
        (8, 32, 1.0)
    """

    name: str
    space: SearchSpace
    sampler: Callable[[int], Task]
    description: str = ""

    @property
    def dim(self) -> int:
        """Number of free parameters."""
        return self.space.dim

    def instance(self, seed: int) -> Task:
        """The task of ``seed`` (same seed, same task)."""
        task = self.sampler(int(seed))
        if not isinstance(task, Task):
            raise InvalidSettingError(
                f"The sampler of task family {self.name!r} returned {type(task).__name__}; it "
                "must return a headstart.benchmarks.Task."
            )
        return task


def resolve(task: Task | TaskFamily, seed: int) -> Task:
    """``task`` itself, or the instance of ``seed`` when it is a :class:`TaskFamily`."""
    return task.instance(seed) if isinstance(task, TaskFamily) else task


# --- vectorised test functions (n x d arrays → n values) ------------------------------------------
BRANIN_DEFAULTS = {
    "a": 1.0,
    "b": 5.1 / (4 * math.pi**2),
    "c": 5 / math.pi,
    "r": 6.0,
    "s": 10.0,
    "t": 1 / (8 * math.pi),
}


def branin(
    X: np.ndarray,
    *,
    a: float = BRANIN_DEFAULTS["a"],
    b: float = BRANIN_DEFAULTS["b"],
    c: float = BRANIN_DEFAULTS["c"],
    r: float = BRANIN_DEFAULTS["r"],
    s: float = BRANIN_DEFAULTS["s"],
    t: float = BRANIN_DEFAULTS["t"],
) -> np.ndarray:
    r"""Branin-Hoo ([Dixon1978]_) on ``x1 in [-5, 10]``, ``x2 in [0, 15]``.

    f(x) = a (x2 - b x1^2 + c x1 - r)^2 + s (1 - t) cos(x1) + s, by default with a = 1,
    b = 5.1 / (4 pi^2), c = 5 / pi, r = 6, s = 10, t = 1 / (8 pi); minimum 0.397887 at
    (-pi, 12.275), (pi, 2.275) and (9.42478, 2.475). Other coefficients give the Branin family of
    :mod:`headstart.benchmarks.families`.

    Args:
        X: `n x 2` array.
        a, b, c, r, s, t: Coefficients.

    Returns:
        `n` array of values.
    """
    X = np.atleast_2d(np.asarray(X, dtype=np.float64))
    x1, x2 = X[:, 0], X[:, 1]
    return a * (x2 - b * x1**2 + c * x1 - r) ** 2 + s * (1 - t) * np.cos(x1) + s


_HARTMANN_ALPHA = np.array([1.0, 1.2, 3.0, 3.2])
_HARTMANN3_A = np.array(
    [[3.0, 10.0, 30.0], [0.1, 10.0, 35.0], [3.0, 10.0, 30.0], [0.1, 10.0, 35.0]]
)
_HARTMANN3_P = 1e-4 * np.array(
    [[3689, 1170, 2673], [4699, 4387, 7470], [1091, 8732, 5547], [381, 5743, 8828]]
)
_HARTMANN6_A = np.array(
    [
        [10.0, 3.0, 17.0, 3.5, 1.7, 8.0],
        [0.05, 10.0, 17.0, 0.1, 8.0, 14.0],
        [3.0, 3.5, 1.7, 10.0, 17.0, 8.0],
        [17.0, 8.0, 0.05, 10.0, 0.1, 14.0],
    ]
)
_HARTMANN6_P = 1e-4 * np.array(
    [
        [1312, 1696, 5569, 124, 8283, 5886],
        [2329, 4135, 8307, 3736, 1004, 9991],
        [2348, 1451, 3522, 2883, 3047, 6650],
        [4047, 8828, 8732, 5743, 1091, 381],
    ]
)


def _hartmann(X: np.ndarray, A: np.ndarray, P: np.ndarray, alpha: Any = None) -> np.ndarray:
    X = np.atleast_2d(np.asarray(X, dtype=np.float64))
    alpha = _HARTMANN_ALPHA if alpha is None else np.asarray(alpha, dtype=np.float64)
    sq = (X[:, None, :] - P[None, :, :]) ** 2  # n x 4 x d
    return -np.exp(-(sq * A[None]).sum(-1)) @ alpha  # n


def hartmann3(X: np.ndarray, alpha: Any = None) -> np.ndarray:
    r"""Hartmann 3-D ([Dixon1978]_) on ``[0, 1]^3``.

    f(x) = -sum_i alpha_i exp(-sum_j A_ij (x_j - P_ij)^2); with the default alpha = (1, 1.2, 3,
    3.2) the minimum is -3.86278 at (0.114589, 0.555649, 0.852547).

    Args:
        X: `n x 3` array.
        alpha: The four weights (default the standard ones).

    Returns:
        `n` array of values.
    """
    return _hartmann(X, _HARTMANN3_A, _HARTMANN3_P, alpha)


def hartmann6(X: np.ndarray, alpha: Any = None) -> np.ndarray:
    r"""Hartmann 6-D ([Dixon1978]_) on ``[0, 1]^6``: :func:`hartmann3`'s form with 6-D ``A``, ``P``
    (``X`` is ``n x 6``); with the default alpha the minimum is -3.32237 at (0.20169, 0.150011,
    0.476874, 0.275332, 0.311652, 0.6573)."""
    return _hartmann(X, _HARTMANN6_A, _HARTMANN6_P, alpha)


def levy(X: np.ndarray) -> np.ndarray:
    r"""Levy ([SurjanovicBingham]_, as in BoTorch) on ``[-10, 10]^d``.

    With ``w_i = 1 + (x_i - 1) / 4``: f(x) = sin^2(pi w_1) + sum_{i<d} (w_i - 1)^2 (1 + 10
    sin^2(pi w_i + 1)) + (w_d - 1)^2 (1 + sin^2(2 pi w_d)); the minimum is 0 at x = (1, ..., 1).
    """
    X = np.atleast_2d(np.asarray(X, dtype=np.float64))
    w = 1.0 + (X - 1.0) / 4.0
    head = np.sin(np.pi * w[:, 0]) ** 2
    body = ((w[:, :-1] - 1) ** 2 * (1 + 10 * np.sin(np.pi * w[:, :-1] + 1) ** 2)).sum(1)
    tail = (w[:, -1] - 1) ** 2 * (1 + np.sin(2 * np.pi * w[:, -1]) ** 2)
    return head + body + tail


def ackley(X: np.ndarray) -> np.ndarray:
    r"""Ackley ([SurjanovicBingham]_) on ``[-32.768, 32.768]^d``: f(x) = -20 exp(-0.2 sqrt(mean x_i^2)) -
    exp(mean cos(2 pi x_i)) + 20 + e; the minimum is 0 at the origin."""
    X = np.atleast_2d(np.asarray(X, dtype=np.float64))
    rms = np.sqrt((X**2).mean(1))
    return -20 * np.exp(-0.2 * rms) - np.exp(np.cos(2 * np.pi * X).mean(1)) + 20 + np.e


def forrester(X: np.ndarray) -> np.ndarray:
    r"""Forrester ([Forrester2008]_) on ``[0, 1]``.

    f(x) = (6 x - 2)^2 sin(12 x - 4); minimum -6.02074 at x = 0.757249.

    Args:
        X: `n x 1` array (or `n` array).

    Returns:
        `n` array of values.
    """
    x = np.asarray(X, dtype=np.float64).reshape(-1)
    return (6 * x - 2) ** 2 * np.sin(12 * x - 4)


# --- dict objectives (module-level, hence picklable for worker processes) ------------------------
def _row(params: Mapping[str, Any], names: tuple[str, ...]) -> np.ndarray:
    return np.array([[float(params[n]) for n in names]])


def _branin_objective(params: Mapping[str, Any]) -> float:
    return float(branin(_row(params, ("x1", "x2")))[0])


def _hartmann3_objective(params: Mapping[str, Any]) -> float:
    return float(hartmann3(_row(params, ("x1", "x2", "x3")))[0])


def _hartmann6_objective(params: Mapping[str, Any]) -> float:
    return float(hartmann6(_row(params, tuple(f"x{i}" for i in range(1, 7))))[0])


def _levy20_objective(params: Mapping[str, Any]) -> float:
    return float(levy(_row(params, tuple(f"x{i}" for i in range(1, 21))))[0])


def _ackley20_objective(params: Mapping[str, Any]) -> float:
    return float(ackley(_row(params, tuple(f"x{i}" for i in range(1, 21))))[0])


def _forrester_objective(params: Mapping[str, Any]) -> float:
    return float(forrester(_row(params, ("x",)))[0])


def _unit_cube(names: list[str]) -> SearchSpace:
    return SearchSpace({n: Float(0.0, 1.0) for n in names})


# --- registry --------------------------------------------------------------------------------------
TASKS: dict[str, Task | TaskFamily] = {}


def register_task(task: Task | TaskFamily, *, overwrite: bool = False) -> Task | TaskFamily:
    """Add a task or task family to :data:`TASKS` (for ``headstart bench`` and :func:`get_task`).

    Args:
        task: The :class:`Task` or :class:`TaskFamily`; its ``name`` is the registry key.
        overwrite: Replace an existing task of the same name instead of raising.

    Returns:
        The task, so this can be used inline.

    Raises:
        InvalidSettingError: not a Task or TaskFamily, or the name is taken and ``overwrite`` is
            False.
    """
    if not isinstance(task, Task | TaskFamily):
        raise InvalidSettingError(
            "register_task expects a headstart.benchmarks.Task or TaskFamily; got "
            f"{type(task).__name__}."
        )
    _registry.add(TASKS, "task", task.name, task, overwrite=overwrite)
    return task


def get_task(name: str) -> Task | TaskFamily:
    """The registered task (or task family) called ``name``.

    Raises:
        InvalidSettingError: no such task (the message lists the valid names).
    """
    return _registry.look_up(TASKS, "task", name)


register_task(
    Task(
        "branin",
        SearchSpace({"x1": Float(-5.0, 10.0), "x2": Float(0.0, 15.0)}),
        _branin_objective,
        0.397887357729739,
        "Branin-Hoo, 2-D, three global minima (0.397887)",
    )
)
register_task(
    Task(
        "hartmann3",
        _unit_cube(["x1", "x2", "x3"]),
        _hartmann3_objective,
        -3.862779787332663,
        "Hartmann, 3-D on [0, 1]^3, four local minima (-3.86278)",
    )
)
register_task(
    Task(
        "hartmann6",
        _unit_cube([f"x{i}" for i in range(1, 7)]),
        _hartmann6_objective,
        -3.32236801141551,
        "Hartmann, 6-D on [0, 1]^6, six local minima (-3.32237)",
    )
)
register_task(
    Task(
        "forrester",
        SearchSpace({"x": Float(0.0, 1.0)}),
        _forrester_objective,
        -6.020740055767083,
        "Forrester, 1-D on [0, 1], one local and one global minimum (-6.02074)",
    )
)

register_task(
    Task(
        "levy20",
        SearchSpace({f"x{i}": Float(-10.0, 10.0) for i in range(1, 21)}),
        _levy20_objective,
        0.0,
        "Levy, 20-D on [-10, 10]^20, many local minima (0 at x = 1)",
    )
)
register_task(
    Task(
        "ackley20",
        SearchSpace({f"x{i}": Float(-32.768, 32.768) for i in range(1, 21)}),
        _ackley20_objective,
        0.0,
        "Ackley, 20-D on [-32.768, 32.768]^20, many local minima (0 at the origin)",
    )
)

__all__ = [
    "BRANIN_DEFAULTS",
    "TASKS",
    "Task",
    "TaskFamily",
    "ackley",
    "branin",
    "forrester",
    "get_task",
    "hartmann3",
    "hartmann6",
    "levy",
    "register_task",
    "resolve",
]
