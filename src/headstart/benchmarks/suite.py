r"""Benchmark suites: tasks with their own budgets, run into one CSV and reported together.

A suite maps each task (or task family) to its budget, e.g. the ScaML-GP paper's 40 evaluations on
Branin and Hartmann-3 and 80 on Hartmann-6. :func:`run_suite` runs
:func:`~headstart.benchmarks.runner.run_benchmark` once per budget group into the same resumable
CSV; :func:`write_suite_report` writes the regret and overhead PNGs and the markdown summary.
The scripts ``benchmarks/scaml_paper.py`` and ``benchmarks/scaml_hpo.py`` are thin wrappers.

Example:
    >>> from headstart.benchmarks.suite import run_suite
    >>> run = run_suite(["headstart-random"], {"branin-m8": 4, "hartmann6-m8": 8}, [0],
    ...                 tmp / "suite.csv", progress=False)  # doctest: +SKIP
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

from headstart.benchmarks.runner import BenchmarkRun, run_benchmark
from headstart.exceptions import InvalidSettingError


def budget_groups(budgets: Mapping[str, int]) -> dict[int, list[str]]:
    """``{budget: [tasks]}`` in first-seen order of the budgets."""
    groups: dict[int, list[str]] = {}
    for task, budget in budgets.items():
        groups.setdefault(int(budget), []).append(task)
    return groups


def run_suite(
    methods: Sequence[str],
    budgets: Mapping[str, int],
    seeds: Iterable[int],
    out_csv: str | Path,
    *,
    workers: int = 1,
    progress: bool = True,
) -> BenchmarkRun:
    r"""Run every method on every task of ``budgets`` with that task's budget, into one CSV.

    Args:
        methods: Registered method names.
        budgets: ``{task name: evaluations per run}``.
        seeds: Seeds to run.
        out_csv: The (resumable) results file shared by all budget groups.
        workers: Worker processes per budget group.
        progress: Show a progress bar.

    Returns:
        One :class:`~headstart.benchmarks.runner.BenchmarkRun` merging the groups' runs.

    Raises:
        InvalidSettingError: no task given (the runner validates everything else).
    """
    if not budgets:
        raise InvalidSettingError("The suite has no task; give at least one task and budget.")
    seeds = list(seeds)
    merged = BenchmarkRun(csv_path=Path(out_csv))
    for budget, tasks in budget_groups(budgets).items():
        run = run_benchmark(
            methods, tasks, seeds, budget, out_csv, workers=workers, progress=progress
        )
        merged.completed += run.completed
        merged.skipped += run.skipped
        merged.failed += run.failed
        merged.dropped_rows += run.dropped_rows
    return merged


def write_suite_report(
    frame,
    out_dir: str | Path,
    name: str,
    *,
    title: str,
    intro: str,
    reference: str,
    target: str,
    ncols: int = 3,
    early: tuple[str, tuple[str, ...]] | None = None,
) -> tuple[Path, Path, Path, str]:
    r"""Write ``<name>.png`` (regret), ``<name>_overhead.png`` and ``<name>.md`` into ``out_dir``.

    The markdown starts with ``title`` and ``intro``, then the cross-task table
    (:func:`~headstart.benchmarks.report.overall_summary`) and per-task tables with final and
    cumulative regret; the verdict judges ``target`` against ``reference`` on final and
    cumulative regret. ``early = (method, baselines)`` adds the regret at trials 1, 3, 5, 10
    and the final one (:func:`~headstart.benchmarks.report.early_regret_summary`) first.

    Returns:
        ``(regret png, overhead png, markdown file, summary text)``.
    """
    from headstart.benchmarks.report import markdown_summary, overhead_plot, regret_plot

    out_dir = Path(out_dir)
    regret_png = regret_plot(frame, out_dir / f"{name}.png", ncols=ncols)
    overhead_png = overhead_plot(frame, out_dir / f"{name}_overhead.png", ncols=ncols)
    text = markdown_summary(
        frame,
        reference=reference,
        target=target,
        criteria=("regret", "cumulative"),
        overall=True,
    )
    if early is not None:
        from headstart.benchmarks.report import early_regret_summary

        text = early_regret_summary(frame, early[0], early[1]) + "\n" + text
    md = out_dir / f"{name}.md"
    md.write_text(
        f"# {title}\n\n{intro.strip()}\n\n![simple regret]({regret_png.name})\n\n"
        f"![suggestion overhead]({overhead_png.name})\n\n{text}"
    )
    return regret_png, overhead_png, md, text


__all__ = ["budget_groups", "run_suite", "write_suite_report"]
