r"""``headstart bench``: list the benchmark tasks and methods, and run them.

``headstart bench run`` writes ``<out>/<name>.csv`` (tidy rows, resumable), ``<name>.png``
(regret and overhead per task) and ``<name>.md`` (the summary table), and prints the table.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from headstart.exceptions import InvalidSettingError

bench_app = typer.Typer(
    help="Run benchmarks: methods x tasks x seeds, resumable, with plots and a summary table.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

DEFAULT_METHODS = "headstart-gp,headstart-random,optuna-tpe,optuna-gp"
DEFAULT_TASKS = "branin,hartmann3,hartmann6"


def command_line(script: str, argv: list[str] | None) -> str:
    """The command that reproduces a report of ``benchmarks/<script>.py``: ``argv`` (default
    ``sys.argv[1:]``) without the options that only say where and how quietly (``--out``,
    ``--quiet``, ``--report-only``, ``--workers``).

    Example:
        >>> command_line("x", ["--seeds", "5", "--out", "/tmp/o", "--quiet"])
        'python benchmarks/x.py --seeds 5'
    """
    import shlex

    args, skip, kept = list(sys.argv[1:] if argv is None else argv), False, []
    for arg in args:
        if skip:
            skip = False
        elif arg in ("--out", "--workers"):
            skip = True
        elif arg not in ("--quiet", "--report-only") and not arg.startswith(
            ("--out=", "--workers=")
        ):
            kept.append(arg)
    return shlex.join(["python", f"benchmarks/{script}.py", *kept])


def parse_seeds(text: str) -> list[int]:
    """Parse ``--seeds``: ``N`` (seeds 0..N-1), ``A-B`` (A..B inclusive) or a list of seeds and
    ranges (``0,3,7`` or ``0-9,42-51``).

    Raises:
        InvalidSettingError: anything else.
    """
    text = text.strip()

    def span(item: str) -> list[int]:
        low, high = (int(v) for v in item.split("-", 1))
        if high < low:
            raise ValueError(item)
        return list(range(low, high + 1))

    try:
        if "," in text:
            items = [s.strip() for s in text.split(",") if s.strip()]
            seeds = [v for item in items for v in (span(item) if "-" in item else [int(item)])]
        elif "-" in text.lstrip("-"):
            seeds = span(text)
        else:
            seeds = list(range(int(text)))
    except ValueError:
        seeds = []
    seeds = list(dict.fromkeys(seeds))  # each seed once, in order
    if not seeds or min(seeds) < 0:
        raise InvalidSettingError(
            f"--seeds {text!r} is not understood; use a count (10 → seeds 0..9), a range "
            "(5-9) or a list of seeds and ranges (0,3,7 or 0-9,42-51)."
        )
    return seeds


def judged_methods(
    methods: list[str], reference: str | None, target: str | None
) -> tuple[str, str]:
    """The ``(reference, target)`` of the summary's verdict, from ``methods`` when not given.

    Raises:
        InvalidSettingError: a given reference or target that is not among ``methods`` (before
            anything runs, instead of a report that says it has no results for it).
    """
    for given, option in ((reference, "--reference"), (target, "--target")):
        if given is not None and given not in methods:
            raise InvalidSettingError(
                f"{option} {given!r} is not among --methods {methods}; add it or choose one of them."
            )
    if reference is None:
        reference = next((m for m in ("optuna-gp", "optuna-tpe") if m in methods), methods[-1])
    if target is None:
        ours = [m for m in methods if m.startswith("headstart-") and m != reference]
        target = ours[0] if ours else next((m for m in methods if m != reference), reference)
    return reference, target


def _split(text: str) -> list[str]:
    return [s.strip() for s in text.split(",") if s.strip()]


@bench_app.command("list")
def list_() -> None:
    """List the benchmark tasks and task families (with their known minima) and the methods."""
    from rich.console import Console
    from rich.table import Table

    from headstart.benchmarks.functions import TASKS, TaskFamily
    from headstart.benchmarks.methods import DESCRIPTIONS, METHODS

    out = Console()
    tasks = Table("task", "dim", "known minimum", "description", title="Tasks")
    for name, task in TASKS.items():
        minimum = "per seed" if isinstance(task, TaskFamily) else f"{task.optimum:.6g}"
        tasks.add_row(name, str(task.space.dim), minimum, task.description)
    out.print(tasks)
    methods = Table("method", "description", title="Methods")
    for name in METHODS:
        methods.add_row(name, DESCRIPTIONS.get(name, ""))
    out.print(methods)


@bench_app.command("run")
def run(
    methods: Annotated[
        str, typer.Option(help="Comma-separated methods (see `headstart bench list`).")
    ] = DEFAULT_METHODS,
    tasks: Annotated[
        str, typer.Option(help="Comma-separated tasks (see `headstart bench list`).")
    ] = DEFAULT_TASKS,
    seeds: Annotated[
        str,
        typer.Option(
            help="Seeds: a count N (0..N-1), a range A-B or a list 0,3,7 (ranges too: 0-9,42-51)."
        ),
    ] = "10",
    budget: Annotated[int, typer.Option(min=1, help="Evaluations per run.")] = 50,
    workers: Annotated[
        int, typer.Option(min=1, help="Parallel worker processes (1 thread each); 1 = inline.")
    ] = 1,
    out: Annotated[Path, typer.Option(help="Output directory.")] = Path("benchmark-results"),
    name: Annotated[
        str, typer.Option(help="Base name of the outputs: <out>/<name>.csv, .png and .md.")
    ] = "bench",
    reference: Annotated[
        str | None,
        typer.Option(
            help="Method the regret and overhead ratios are relative to (default: optuna-gp, "
            "else optuna-tpe, else the last of --methods)."
        ),
    ] = None,
    target: Annotated[
        str | None,
        typer.Option(
            help="Method the verdict line judges against the reference (default: the first "
            "headstart-* method of --methods)."
        ),
    ] = None,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress bar.")] = False,
) -> None:
    """Run methods x tasks x seeds (resuming a previous run of the same name) and report."""
    from rich.console import Console
    from rich.markdown import Markdown

    from headstart.benchmarks.report import benchmark_plot, markdown_summary
    from headstart.benchmarks.runner import run_benchmark

    chosen = _split(methods)
    reference, target = judged_methods(chosen, reference, target)
    csv_path = out / f"{name}.csv"
    result = run_benchmark(
        chosen,
        _split(tasks),
        parse_seeds(seeds),
        budget,
        csv_path,
        workers=workers,
        progress=not quiet,
    )
    err = Console(stderr=True)
    frame = result.frame()
    if frame.empty:
        err.print("[red]No complete runs in the results; nothing to report.[/]")
        raise typer.Exit(1)
    png = benchmark_plot(frame, out / f"{name}.png")
    text = markdown_summary(frame, reference=reference, target=target)
    md = out / f"{name}.md"
    md.write_text(f"# Benchmark {name}\n\n{text}")
    out = Console()
    if out.is_terminal:
        out.print(Markdown(text))
    else:  # piped: the plain markdown
        sys.stdout.write(text)
    err.print(
        f"{len(result.completed)} jobs run, {len(result.skipped)} skipped (already done), "
        f"{len(result.failed)} failed. Wrote {csv_path}, {png} and {md}."
    )
    if result.failed:
        raise typer.Exit(1)


__all__ = ["bench_app", "judged_methods", "parse_seeds"]
