r"""Run methods x tasks x seeds, in parallel processes, into a resumable tidy CSV.

Each job ``(method, task, seed, budget)`` produces ``budget`` rows (one per evaluation) with the
columns :data:`CSV_COLUMNS`. Rows are appended only once a job has finished, in one ``write``
followed by ``flush`` and ``fsync``, so a crash loses at most the jobs in flight. When the runner
starts on an existing CSV it keeps the jobs that have all their ``budget`` rows, drops any partial
or malformed rows (rewriting the file atomically), and runs only the missing jobs.

Example:
    >>> from headstart.benchmarks import run_benchmark
    >>> run = run_benchmark(["headstart-random"], ["forrester"], [0], 3, tmp / "r.csv",
    ...                     progress=False)  # doctest: +SKIP
    >>> len(run.frame())  # doctest: +SKIP
    3
"""

from __future__ import annotations

import csv
import io
import multiprocessing
import os
import pickle
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from contextlib import contextmanager
from dataclasses import dataclass, field
from itertools import product
from pathlib import Path
from typing import Any

from headstart.benchmarks import csvlog
from headstart.benchmarks.functions import Task, TaskFamily, get_task, resolve
from headstart.benchmarks.methods import get_method
from headstart.exceptions import InvalidSettingError

CSV_COLUMNS = (
    "method",
    "task",
    "seed",
    "budget",
    "iteration",
    "value",
    "best_value",
    "regret",
    "seconds_suggest",
)
_THREAD_ENV = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")


@dataclass(frozen=True, order=True)
class Job:
    """One benchmark run: a method on a task with one seed and budget."""

    method: str
    task: str
    seed: int
    budget: int

    def __str__(self) -> str:
        return f"{self.method} on {self.task} (seed {self.seed}, budget {self.budget})"


@dataclass
class BenchmarkRun:
    """What :func:`run_benchmark` did.

    Attributes:
        csv_path: The results file.
        completed: Jobs run (successfully) by this call.
        skipped: Jobs already complete in the CSV, not run again.
        failed: ``(job, error message)`` of jobs that raised or returned malformed records.
        dropped_rows: Partial or malformed rows removed from the CSV before running.
    """

    csv_path: Path
    completed: list[Job] = field(default_factory=list)
    skipped: list[Job] = field(default_factory=list)
    failed: list[tuple[Job, str]] = field(default_factory=list)
    dropped_rows: int = 0

    def frame(self):
        """The complete jobs in the CSV as a pandas DataFrame (see :func:`read_results`)."""
        return read_results(self.csv_path)


# --- CSV ------------------------------------------------------------------------------------------
def _parse_row(fields: list[str]) -> tuple[Job, int] | None:
    """``(job, iteration)`` of a CSV row, or None when it is malformed (e.g. a torn last line)."""
    if len(fields) != len(CSV_COLUMNS):
        return None
    row = dict(zip(CSV_COLUMNS, fields, strict=True))
    try:
        job = Job(row["method"], row["task"], int(row["seed"]), int(row["budget"]))
        iteration = int(row["iteration"])
        for name in ("value", "best_value", "regret", "seconds_suggest"):
            float(row[name])
    except ValueError:
        return None
    if not 1 <= iteration <= job.budget:
        return None
    return job, iteration


def _scan(path: Path) -> tuple[dict[Job, list[list[str]]], int]:
    """Complete jobs in the CSV (rows ordered by iteration) and the number of rows to drop."""
    by_job: dict[Job, dict[int, list[str]]] = {}
    n_rows = 0
    with path.open(newline="") as f:
        reader = csv.reader(f)
        header = next(reader, None)
        if header is None:
            return {}, 0
        if tuple(header) != CSV_COLUMNS:
            raise InvalidSettingError(
                f"{path} is not a headstart benchmark CSV (header {header}; expected "
                f"{list(CSV_COLUMNS)}). Choose another output file or move this one away."
            )
        for fields in reader:
            n_rows += 1
            parsed = _parse_row(fields)
            if parsed is not None:
                job, iteration = parsed
                by_job.setdefault(job, {}).setdefault(iteration, fields)
    complete = {
        job: [rows[i] for i in range(1, job.budget + 1)]
        for job, rows in by_job.items()
        if len(rows) == job.budget
    }
    kept = sum(len(rows) for rows in complete.values())
    return complete, n_rows - kept


def _fsync_write(path: Path, text: str, mode: str) -> None:
    with path.open(mode, newline="") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())


def _render(rows: Iterable[Sequence[Any]]) -> str:
    buffer = io.StringIO()
    csv.writer(buffer, lineterminator="\n").writerows(rows)
    return buffer.getvalue()


def _rewrite(path: Path, complete: dict[Job, list[list[str]]]) -> None:
    """Atomically replace the CSV with only the complete jobs."""
    tmp = path.with_name(path.name + ".tmp")
    rows = [list(CSV_COLUMNS)] + [r for job in sorted(complete) for r in complete[job]]
    _fsync_write(tmp, _render(rows), "w")
    os.replace(tmp, path)


def read_results(path: str | Path):
    """Read a benchmark CSV, keeping only jobs with all their rows.

    Returns:
        A pandas DataFrame with the columns :data:`CSV_COLUMNS` (numeric columns typed).
    """
    import pandas as pd

    path = Path(path)
    if not path.exists():
        raise InvalidSettingError(f"No benchmark results at {path}; run the benchmark first.")
    complete, _ = _scan(path)
    rows = [r for job in sorted(complete) for r in complete[job]]
    frame = pd.DataFrame(rows, columns=list(CSV_COLUMNS))
    for name in ("seed", "budget", "iteration"):
        frame[name] = frame[name].astype("int64")
    for name in ("value", "best_value", "regret", "seconds_suggest"):
        frame[name] = frame[name].astype("float64")
    return frame


# --- one job (runs in a worker process, or inline) ---------------------------------------------
def _init_worker() -> None:
    """Process-pool initializer: one thread per worker for OpenMP, BLAS and torch."""
    for name in _THREAD_ENV:
        os.environ[name] = "1"
    try:
        import torch

        torch.set_num_threads(1)
    except ImportError:  # pragma: no cover - torch is a dependency
        pass


@contextmanager
def _torch_threads(n: int) -> Iterator[None]:
    import torch

    previous = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(previous)


def _execute(job: Job, method: Callable, task: Task | TaskFamily) -> list[list[Any]]:
    """Run one job and return its CSV rows; raises on errors or malformed records.

    A :class:`TaskFamily` is resolved here (in the worker) to the instance of the job's seed; the
    rows keep the family's name and the regret is relative to the instance's optimum.
    """
    task = resolve(task, job.seed)
    with _torch_threads(1):
        records = method(task, job.seed, job.budget)
    if not isinstance(records, list) or len(records) != job.budget:
        n = len(records) if isinstance(records, list) else type(records).__name__
        raise InvalidSettingError(
            f"Method {job.method!r} returned {n} records for a budget of {job.budget}; it must "
            "return one dict per evaluation."
        )
    rows = []
    for i, record in enumerate(records, start=1):
        try:
            best = float(record["best_value"])
            row = [
                job.method,
                job.task,
                job.seed,
                job.budget,
                int(record["iteration"]),
                float(record["value"]),
                best,
                best - task.optimum,
                float(record["seconds_suggest"]),
            ]
        except (KeyError, TypeError, ValueError) as e:
            raise InvalidSettingError(
                f"Record {i} of method {job.method!r} is malformed ({e!r}); each record needs "
                "iteration, value, best_value and seconds_suggest."
            ) from e
        if row[4] != i:
            raise InvalidSettingError(
                f"Method {job.method!r} returned iteration {row[4]} at position {i}; iterations "
                "must be 1, 2, ..., budget."
            )
        rows.append(row)
    return rows


# --- the runner ----------------------------------------------------------------------------------
@contextmanager
def _single_thread_env() -> Iterator[None]:
    """Spawned workers inherit these variables before they import numpy or torch."""
    saved = {name: os.environ.get(name) for name in _THREAD_ENV}
    os.environ.update(dict.fromkeys(_THREAD_ENV, "1"))
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def _check_args(seeds: Iterable[int], budget: int, workers: int) -> list[int]:
    if isinstance(budget, bool) or not isinstance(budget, int) or budget < 1:
        raise InvalidSettingError(f"budget must be a positive integer; got {budget!r}.")
    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
        raise InvalidSettingError(f"workers must be a positive integer; got {workers!r}.")
    try:
        seed_list = [int(s) for s in seeds]
    except (TypeError, ValueError):
        raise InvalidSettingError(
            f"seeds must be integers, e.g. range(10); got {seeds!r}."
        ) from None
    if not seed_list:
        raise InvalidSettingError("seeds is empty; give at least one seed, e.g. range(10).")
    return list(dict.fromkeys(seed_list))


def _check_picklable(name: str, obj: Any, kind: str) -> None:
    try:
        pickle.dumps(obj)
    except Exception as e:
        raise InvalidSettingError(
            f"The {kind} {name!r} cannot be sent to worker processes ({e}); define it as a "
            "module-level function, or run with workers=1."
        ) from e


def _console():
    from rich.console import Console

    return Console(stderr=True)


def run_benchmark(
    methods: Sequence[str],
    tasks: Sequence[str],
    seeds: Iterable[int],
    budget: int,
    out_csv: str | Path,
    *,
    workers: int = 1,
    progress: bool = True,
) -> BenchmarkRun:
    r"""Run every method x task x seed job for ``budget`` evaluations, resumably.

    Rows (``CSV_COLUMNS``; ``regret = best_value - task.optimum``) are appended to ``out_csv`` as
    each job finishes. A task family runs, for each seed, its instance of that seed (the ``task``
    column holds the family name; the regret is relative to that instance's optimum). Jobs already complete in ``out_csv`` are skipped; partial rows (a job
    interrupted mid-write) are dropped first. A job that raises is reported as a warning and the
    others carry on.

    Args:
        methods: Names registered in :data:`headstart.benchmarks.METHODS`.
        tasks: Names registered in :data:`headstart.benchmarks.TASKS` (tasks or task families).
        seeds: Seeds to run (each job passes its seed to the method).
        budget: Evaluations per job.
        out_csv: The results file (created with a header if missing).
        workers: Processes (spawn context, one torch thread each); 1 runs inline.
        progress: Show a rich progress bar over jobs on stderr (warnings are always shown).

    Returns:
        A :class:`BenchmarkRun` listing completed, skipped and failed jobs.

    Raises:
        InvalidSettingError: unknown method or task, bad budget, seeds or workers, or an output
            file that is not a benchmark CSV.
    """
    seed_list = _check_args(seeds, budget, workers)
    method_fns = {name: get_method(name) for name in dict.fromkeys(methods)}
    task_objs = {name: get_task(name) for name in dict.fromkeys(tasks)}
    if not method_fns or not task_objs:
        raise InvalidSettingError("Give at least one method and one task.")
    if workers > 1:
        for name, fn in method_fns.items():
            _check_picklable(name, fn, "method")
        for name, task in task_objs.items():
            _check_picklable(name, task, "task")

    path = Path(out_csv)
    path.parent.mkdir(parents=True, exist_ok=True)
    run = BenchmarkRun(csv_path=path)
    console = _console()
    done: set[Job] = set()
    if path.exists() and path.stat().st_size > 0:
        complete, run.dropped_rows = _scan(path)
        done = set(complete)
        if run.dropped_rows:
            _rewrite(path, complete)
            console.print(
                f"[yellow]warning:[/] dropped {run.dropped_rows} rows of unfinished or malformed "
                f"jobs from {path}; those jobs run again."
            )
    else:
        _fsync_write(path, _render([CSV_COLUMNS]), "w")

    # seed-major: an interrupted run has every method on its first seeds
    jobs = [Job(m, t, s, budget) for s, t, m in product(seed_list, task_objs, method_fns)]
    run.skipped = [j for j in jobs if j in done]
    todo = [j for j in jobs if j not in done]
    if run.skipped:
        console.print(f"Skipping {len(run.skipped)} jobs already complete in {path}.")

    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeElapsedColumn

    bar = Progress(
        "[progress.description]{task.description}",
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console,
        disable=not progress,
    )

    def finish(job: Job, rows: list[list[Any]] | None, error: BaseException | None) -> None:
        if error is None and rows is not None:
            _fsync_write(path, _render(rows), "a")
            run.completed.append(job)
        else:
            message = f"{type(error).__name__}: {error}"
            run.failed.append((job, message))
            bar.console.print(f"[yellow]warning:[/] {job} failed: {message}", soft_wrap=True)
        bar.update(bar_id, advance=1, description=f"{job.method} / {job.task} / {job.seed}")

    with bar:
        bar_id = bar.add_task("jobs", total=len(todo))
        if workers == 1:
            for job in todo:
                try:
                    rows = _execute(job, method_fns[job.method], task_objs[job.task])
                except Exception as e:
                    finish(job, None, e)
                else:
                    finish(job, rows, None)
        else:
            _run_pool(todo, method_fns, task_objs, workers, finish)
    return run


def _run_pool(
    todo: list[Job],
    method_fns: dict[str, Callable],
    task_objs: dict[str, Task | TaskFamily],
    workers: int,
    finish: Callable[[Job, list[list[Any]] | None, BaseException | None], None],
) -> None:
    context = multiprocessing.get_context("spawn")
    executor = ProcessPoolExecutor(
        max_workers=min(workers, max(len(todo), 1)),
        mp_context=context,
        initializer=_init_worker,
    )
    try:
        with _single_thread_env():
            futures: dict[Future, Job] = {
                executor.submit(_execute, job, method_fns[job.method], task_objs[job.task]): job
                for job in todo
            }
        pending = set(futures)
        while pending:
            finished, pending = wait(pending, return_when=FIRST_COMPLETED)
            for future in finished:
                error = future.exception()
                finish(futures[future], None if error else future.result(), error)
    except BaseException:
        executor.shutdown(wait=False, cancel_futures=True)
        raise
    executor.shutdown(wait=True)


def unpack_csv(csv_path: str | Path) -> Path:
    """``csv_path``, restored from its gzipped copy ``<csv_path>.gz`` if only that exists.

    Large results are committed gzipped (100,000 rows are ~8 MB as text); the runner appends to
    the plain file, so a script unpacks before :func:`run_benchmark` and packs after.
    """
    csv_path = Path(csv_path)
    csvlog.unpack(csv_path)
    return csv_path


def pack_csv(csv_path: str | Path) -> Path:
    """Gzip ``csv_path`` to ``<csv_path>.gz`` (:func:`headstart.benchmarks.csvlog.pack`,
    byte-reproducible) and remove the plain file."""
    packed = csvlog.pack(Path(csv_path))
    Path(csv_path).unlink()
    return packed


__all__ = [
    "CSV_COLUMNS",
    "BenchmarkRun",
    "Job",
    "pack_csv",
    "read_results",
    "run_benchmark",
    "unpack_csv",
]
