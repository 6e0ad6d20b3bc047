r"""Benchmarks: test functions with known optima, peer methods, a resumable runner and reports.

Example:
    >>> from headstart.benchmarks import get_task, run_benchmark
    >>> get_task("branin").optimum  # doctest: +ELLIPSIS
    0.3978873...

Besides single tasks, the registry holds task families (:class:`TaskFamily`), one task per seed
with transfer meta-data: the ScaML-GP synthetic families (``branin-m8`` ...,
:mod:`~headstart.benchmarks.families`) and leave-one-dataset-out HPO tables (``fcnet-protein``,
``hpobench-mlp-car`` ..., :mod:`~headstart.benchmarks.hpo_tables`) the piBO prior tasks
(``branin-prior-strong`` ..., :mod:`~headstart.benchmarks.prior_tasks`) and a scikit-learn model
tuned on two halves of a data set (``sklearn-hgb-wine`` ..., :mod:`~headstart.benchmarks.
sklearn_tasks`).

``run_benchmark(["headstart-gp", "optuna-gp"], ["branin"], range(5), 30, "out.csv")`` runs every
method x task x seed job (in parallel with ``workers > 1``), appends one tidy row per evaluation to
the CSV as jobs finish and skips finished jobs when run again. :mod:`headstart.benchmarks.report`
turns the CSV into plots and a markdown table; ``headstart bench`` does all of it from the shell.
"""

from __future__ import annotations

from headstart.benchmarks import (  # noqa: F401  (register the families)
    abrac_tasks,
    families,
    hpo_tables,
    peers,
    prior_tasks,
    real_tasks,
    sklearn_tasks,
)
from headstart.benchmarks.functions import TASKS, Task, TaskFamily, get_task, register_task
from headstart.benchmarks.methods import METHODS, get_method, register_method
from headstart.benchmarks.runner import CSV_COLUMNS, BenchmarkRun, run_benchmark

__all__ = [
    "CSV_COLUMNS",
    "METHODS",
    "TASKS",
    "BenchmarkRun",
    "Task",
    "TaskFamily",
    "get_method",
    "get_task",
    "register_method",
    "register_task",
    "run_benchmark",
]
