"""Rich progress bars on stderr: :meth:`Study.optimize` (trials done, best value, seconds per
suggestion) and the kernel search (oracle calls done, best score and expression)."""

from __future__ import annotations

from typing import Any


def _stderr_progress(*fields: str, remaining: bool = False):
    """A rich ``Progress``: description, bar, done/total, ``fields`` text columns, elapsed time."""
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    return Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        *(TextColumn(f) for f in fields),
        TimeElapsedColumn(),
        *([TimeRemainingColumn()] if remaining else []),
        console=Console(stderr=True),
    )


class _Bar:
    """Closes the rich progress bar, if one was opened, when the ``with`` block ends."""

    _progress = None

    def __exit__(self, *exc: object) -> None:
        if self._progress is not None:
            self._progress.__exit__(*exc)


class TrialProgress(_Bar):
    """Context manager that shows the progress of ``n_trials`` evaluations on stderr."""

    def __init__(self, n_trials: int, study: Any, *, enabled: bool = True) -> None:
        self._n = n_trials
        self._study = study
        self._enabled = enabled and n_trials > 0
        self._progress = None
        self._task = None
        self._best: float | None = None

    def __enter__(self) -> TrialProgress:
        if not self._enabled:
            return self
        self._progress = _stderr_progress(
            "best [cyan]{task.fields[best]}",
            "[dim]{task.fields[overhead]} s/suggest",
            remaining=True,
        )
        done = [t.value for t in self._study.trials if t.state == "complete"]
        if done:
            self._best = min(done) if self._study.direction == "minimize" else max(done)
        self._progress.__enter__()
        self._task = self._progress.add_task(
            self._study.name, total=self._n, best="-", overhead="-"
        )
        return self

    def advance(self, value: float | None, seconds_suggest: float | None) -> None:
        """Count one finished trial with its value (None if failed) and suggestion time."""
        if self._progress is None:
            return
        if value is not None:
            better = min if self._study.direction == "minimize" else max
            self._best = value if self._best is None else better(self._best, value)
        self._progress.update(
            self._task,
            advance=1,
            best="-" if self._best is None else f"{self._best:.6g}",
            overhead="-" if seconds_suggest is None else f"{seconds_suggest:.3f}",
        )


class KernelSearchProgress(_Bar):
    """Context manager showing a kernel search: oracle calls done, best expression and score."""

    def __init__(self, budget: int, *, enabled: bool = True) -> None:
        self._budget, self._enabled = budget, enabled and budget > 0
        self._progress = None
        self._task = None
        self._best = -float("inf")

    def __enter__(self) -> KernelSearchProgress:
        if not self._enabled:
            return self
        self._progress = _stderr_progress("best [cyan]{task.fields[score]}[/] {task.fields[expr]}")
        self._progress.__enter__()
        self._task = self._progress.add_task(
            "kernel search", total=self._budget, score="-", expr=""
        )
        return self

    def update(self, evaluation: Any) -> None:
        """Advance by one oracle call (a :class:`headstart.kernels.strategies.Evaluation`)."""
        if self._progress is None:
            return
        result = evaluation.result
        fields = {}
        if result.score > self._best:
            self._best = result.score
            expr = result.expression
            fields = {
                "score": f"{result.score:.4f}",
                "expr": expr if len(expr) < 50 else expr[:47] + "...",
            }
        self._progress.update(self._task, advance=1, **fields)


class TrainingProgress(_Bar):
    """A progress bar over the optimizer steps of a network's training (``update(done, total)``)."""

    def __init__(self, description: str, *, enabled: bool = True) -> None:
        self._description = description
        self._enabled = enabled
        self._progress = None
        self._task = None

    def __enter__(self) -> TrainingProgress:
        if self._enabled:
            self._progress = _stderr_progress()
            self._progress.__enter__()
        return self

    def update(self, done: int, total: int) -> None:
        if self._progress is None:
            return
        if self._task is None:
            self._task = self._progress.add_task(self._description, total=total)
        self._progress.update(self._task, completed=done)


class StagesProgress(_Bar):
    """One bar per stage of a long computation: ``update(stage, done, total)`` (e.g. MPHD's
    pre-training, whose two steps take up to a minute on large super-datasets)."""

    def __init__(self, *, enabled: bool = True) -> None:
        self._enabled = enabled
        self._progress = None
        self._tasks: dict[str, Any] = {}

    def __enter__(self) -> StagesProgress:
        if self._enabled:
            self._progress = _stderr_progress()
            self._progress.__enter__()
        return self

    def update(self, stage: str, done: int, total: int) -> None:
        if self._progress is None:
            return
        if stage not in self._tasks:
            self._tasks[stage] = self._progress.add_task(stage, total=total)
        self._progress.update(self._tasks[stage], completed=done, total=total)
