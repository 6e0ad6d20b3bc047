r"""GP-BO on real tuning objectives against its peers: Bayesmark-style normalized scores and ranks.

The tasks (:mod:`headstart.benchmarks.real_tasks`) are scikit-learn models cross-validated on
bundled data sets (plateaus, heavy tails, integer steps; deterministic) and the FC-Net /
HPOBench-MLP tables searched over natural log / integer / continuous ranges (plateaus, and one
training seed's result per evaluation: real noise). They are split by data set into a
*selection* half, where headstart's defaults are chosen, and a *confirmation* half, where they
are reported (``--suite``).

Every method runs every task for ``--seeds`` seeds at each budget of ``--budgets``: headstart in
separate runs (its initial design depends on the budget), the peers and random search once at the
largest budget, whose first trials are their runs at the smaller ones (:func:`budget_free`). Per task, trial and budget, Bayesmark's normalized
score is ``1 - (best - opt) / (random - opt)``: ``opt`` the best value any run reached on the task,
``random`` the mean over seeds of random search's best after as many trials; 0 is random search,
1 the best seen. The ranks order the methods by their mean score over seeds on each task (1 =
best), averaged over tasks. Resumable: run it again and finished jobs are skipped. The results
under ``docs/benchmarks`` are committed gzipped (``<name>.csv.gz``): the script unpacks them to
resume or report and packs them again.

Usage::

    python benchmarks/real_objectives.py --suite selection   # docs/benchmarks/real_objectives_selection.*
    python benchmarks/real_objectives.py --suite confirmation --seeds 10
    python benchmarks/real_objectives.py --smoke             # 2 tasks, 2 seeds, budget 8, temp dir
    python benchmarks/real_objectives.py --suite confirmation --report-only  # tables, no new runs

The peers are Optuna's GPSampler and TPE (independent and multivariate) and SMAC3's random-forest
facade (``smac-hpo``), all at their defaults. HEBO (``hebo``; ``make bench-peers`` installs it)
takes about 3 s per suggestion, so it has its own report on fewer seeds::

    python benchmarks/real_objectives.py --suite confirmation --seeds 2 --budgets 20 \
        --methods headstart-gp,optuna-gp,optuna-tpe,optuna-tpe-mv,smac-hpo,hebo,headstart-random \
        --name real_objectives_confirmation_hebo
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

DEFAULT_METHODS = "headstart-gp,optuna-gp,optuna-tpe,optuna-tpe-mv,smac-hpo,headstart-random"
RANDOM = "headstart-random"
BUDGET_FREE_PREFIXES = ("optuna-", "hebo", "headstart-random")  # trials independent of the budget
DOCS_DIR = Path(__file__).resolve().parent.parent / "docs" / "benchmarks"


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--suite", choices=["selection", "confirmation"], default="confirmation",
                   help="Which half of the tasks (split by data set; see real_tasks).")  # fmt: skip
    p.add_argument("--tasks", default=None, help="Comma-separated tasks instead of a suite.")
    p.add_argument("--methods", default=DEFAULT_METHODS,
                   help=f"Comma-separated methods; must include {RANDOM} (the score's baseline).")  # fmt: skip
    p.add_argument("--seeds", default="10", help="A count N (0..N-1), a range A-B or a list.")
    p.add_argument("--budgets", default="20,50", help="Comma-separated budgets (separate runs).")
    p.add_argument("--workers", type=int, default=2, help="Worker processes (1 = inline).")
    p.add_argument("--out", type=Path, default=None, help=f"Output directory (default {DOCS_DIR}).")
    p.add_argument("--name", default=None, help="Base name (default real_objectives_<suite>).")
    p.add_argument("--target", default="headstart-gp", help="The method the verdict is about.")
    p.add_argument("--smoke", action="store_true",
                   help="Quick check: 2 tasks, 2 seeds, budget 8, into --out or a temp dir.")  # fmt: skip
    p.add_argument("--quiet", action="store_true", help="No progress bar.")
    p.add_argument("--report-only", action="store_true",
                   help="Write the CSV's finished runs to PNG/MD without running any job (safe "
                        "while another process is still adding seeds).")  # fmt: skip
    return p


def is_ablation(method: str, target: str) -> bool:
    """A headstart variant other than the target and random search: shown, but not ranked
    against the peers (its rank would split the target's)."""
    return method.startswith("headstart-") and method not in (target, RANDOM)


def summarize(frame, target: str) -> tuple[str, dict]:
    """The markdown tables (scores and ranks per budget, per-task scores, the verdict) and the
    numbers behind the verdict. Ranks order the target, the peers and random search; ablation
    arms (:func:`is_ablation`) get none."""
    import numpy as np

    budgets = sorted(frame["budget"].unique())
    final = frame[frame["iteration"] == frame["budget"]]
    per_task = final.groupby(["budget", "task", "method"])["score"].mean()
    lines, verdict = [], {}
    for budget in budgets:
        scores = per_task.loc[budget].unstack("method")
        ranked = [m for m in scores.columns if not is_ablation(m, target)]
        ranks = scores[ranked].rank(axis=1, ascending=False)
        n_seeds = final[final["budget"] == budget].groupby("method")["seed"].nunique()
        lines += [f"### Budget {budget}", "",
                  "| method | seeds / task | mean normalized score | mean rank | tasks best |",
                  "|---|---:|---:|---:|---:|"]  # fmt: skip
        order = scores.mean().sort_values(ascending=False).index
        for m in order:
            name = f"**{m}**" if m == target else m
            if m not in ranks:  # an ablation arm
                lines.append(f"| {name} | {n_seeds[m]} | {scores[m].mean():.3f} | – | – |")
                continue
            best = int((ranks[m] == 1).sum())
            lines.append(f"| {name} | {n_seeds[m]} | {scores[m].mean():.3f} | "
                         f"{ranks[m].mean():.2f} | {best}/{len(scores)} |")  # fmt: skip
        lines.append("")
        verdict[budget] = {"score": scores.mean().to_dict(), "rank": ranks.mean().to_dict()}
    # per-task table at the largest budget
    budget = budgets[-1]
    scores = per_task.loc[budget].unstack("method")
    methods = list(scores.mean().sort_values(ascending=False).index)
    lines += [f"### Per task, budget {budget} (mean normalized score over seeds)", "",
              "| task | " + " | ".join(methods) + " |",
              "|---|" + "---:|" * len(methods)]  # fmt: skip
    for task, row in scores.iterrows():
        best = row.max()
        cells = [f"**{row[m]:.2f}**" if np.isclose(row[m], best) else f"{row[m]:.2f}"
                 for m in methods]  # fmt: skip
        lines.append(f"| {task} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n\n", verdict


def gap_text(frame, target: str, others: list[str]) -> str:
    """``target``'s mean score minus every other method's at each budget: the mean over tasks of
    the per-task difference of seed means (the figure the tables compare), with a 95% bootstrap
    interval over seeds within tasks (:func:`headstart.benchmarks.report.method_gap_interval`;
    paired for headstart's own arms, which share each seed's initial design). Tasks and the
    normalization are held fixed; an interval that holds 0 is a gap these seeds cannot tell
    from chance."""
    from headstart.benchmarks.report import method_gap_interval

    final = frame[frame["iteration"] == frame["budget"]]
    budgets = sorted(final["budget"].unique())
    out = [
        f"### {target} minus each method (mean normalized score; 95% bootstrap interval over "
        "seeds within tasks; tasks and normalization held fixed)",
        "",
        "| method | " + " | ".join(f"budget {b}" for b in budgets) + " |",
        "|---|" + "---:|" * len(budgets),
    ]
    for other in others:
        cells = []
        for b in budgets:
            gap, low, high = method_gap_interval(
                final[final["budget"] == b], "score", target, other, by="task",
                paired=is_ablation(other, target),
            )  # fmt: skip
            cells.append(f"{gap:+.3f} [{low:+.3f}, {high:+.3f}]")
        out.append(f"| {other} | " + " | ".join(cells) + " |")
    return "\n".join(out) + "\n\n"


def verdict_text(verdict: dict, target: str, peers: list[str]) -> str:
    """Whether ``target``'s mean score is at least every peer's at each budget, and its mean
    rank first at the largest budget."""
    out = ["### Targets", ""]
    for budget, v in verdict.items():
        mine = v["score"].get(target)
        if mine is None:
            continue
        behind = [p for p in peers if p in v["score"] and v["score"][p] > mine]
        out.append(
            f"- Budget {budget}: {target} mean score {mine:.3f}; "
            + (
                "at least every peer's."
                if not behind
                else "behind " + ", ".join(f"{p} ({v['score'][p]:.3f})" for p in behind) + "."
            )
        )
    last = max(verdict)
    ranks = verdict[last]["rank"]
    if target in ranks:
        first = min(ranks, key=ranks.get)
        out.append(f"- Mean rank at budget {last}: {target} {ranks[target]:.2f}; first: {first} "
                   f"({ranks[first]:.2f}).")  # fmt: skip
    return "\n".join(out) + "\n"


def plot(frame, path: Path, target: str) -> Path:
    """Mean normalized score and mean rank against the trial, one column per budget."""
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    budgets = sorted(frame["budget"].unique())
    fig, axes = plt.subplots(2, len(budgets), figsize=(5.5 * len(budgets), 7), squeeze=False)
    methods = sorted(frame["method"].unique())
    colors = {m: plt.get_cmap("tab10")(i % 10) for i, m in enumerate(methods)}
    for j, budget in enumerate(budgets):
        sub = frame[frame["budget"] == budget]
        task_means = sub.groupby(["iteration", "task", "method"])["score"].mean().unstack("method")
        ranks = task_means.rank(axis=1, ascending=False).groupby(level="iteration").mean()
        means = task_means.groupby(level="iteration").mean()
        for m in methods:
            kw = {"color": colors[m], "lw": 2.4 if m == target else 1.3, "label": m}
            axes[0, j].plot(means.index, means[m], **kw)
            axes[1, j].plot(ranks.index, ranks[m], **kw)
        axes[0, j].set_title(f"budget {budget}: mean normalized score")
        axes[0, j].set_ylim(-0.5, 1.0)
        axes[0, j].axhline(0.0, color="grey", lw=0.6)
        axes[1, j].set_title(f"budget {budget}: mean rank over tasks (1 = best)")
        axes[1, j].invert_yaxis()
        axes[1, j].set_xlabel("trial")
    axes[0, 0].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def budget_free(method: str) -> bool:
    """Whether ``method``'s trials do not depend on the budget it is given (the peers and random
    search): its run at a smaller budget is the first trials of its run at the largest one.
    headstart's initial design grows with the budget, so its runs are separate."""
    return method.startswith(BUDGET_FREE_PREFIXES)


def with_prefix_budgets(frame, budgets: list[int]):
    """``frame`` with every budget-free method's smaller-budget runs taken as the first trials of
    its largest-budget runs (its own smaller-budget rows, if any, are dropped)."""
    import pandas as pd

    largest = max(budgets)
    free = frame["method"].map(budget_free)
    parts = [frame[~free], frame[free & (frame["budget"] == largest)]]
    for budget in budgets:
        if budget != largest:
            prefix = parts[1][parts[1]["iteration"] <= budget].copy()
            prefix["budget"] = budget
            parts.append(prefix)
    return pd.concat(parts, ignore_index=True)


def every_method_finished(frame):
    """The rows of the (task, seed, budget) runs that every method of ``frame`` finished, so a
    partial run (the runner is resumable; seeds accumulate) compares methods on the same seeds."""
    done = frame[frame["iteration"] == frame["budget"]]
    counts = done.groupby(["task", "seed", "budget"])["method"].nunique()
    keep = counts[counts == frame["method"].nunique()].index
    return frame[frame.set_index(["task", "seed", "budget"]).index.isin(keep)]


def seed_counts(frame, asked: int) -> str:
    """How many seeds every method finished per task, for the report's header."""
    final = frame[frame["iteration"] == frame["budget"]]
    per_task = final.groupby(["task", "budget"])["seed"].nunique()
    if per_task.empty:
        return f"no finished seeds of {asked}"
    low, high = int(per_task.min()), int(per_task.max())
    done = f"{low}" if low == high else f"{low}-{high}"
    return f"{done} of {asked} seeds per task and budget finished by every method"


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark and write the CSV, PNG and markdown; returns the exit code."""
    args = _parser().parse_args(argv)
    from rich.console import Console

    from headstart.bench_cli import command_line, parse_seeds
    from headstart.benchmarks.csvlog import pack, unpack
    from headstart.benchmarks.real_tasks import CONFIRMATION, SELECTION, normalized_scores
    from headstart.benchmarks.runner import read_results, run_benchmark

    methods = [m.strip() for m in args.methods.split(",") if m.strip()]
    if RANDOM not in methods:
        methods.append(RANDOM)
    suite = SELECTION if args.suite == "selection" else CONFIRMATION
    tasks = [t.strip() for t in args.tasks.split(",")] if args.tasks else list(suite)
    seeds, budgets, out = (
        parse_seeds(args.seeds),
        [int(b) for b in args.budgets.split(",")],
        args.out,
    )
    if args.smoke:
        tasks = [t for t in tasks if t.startswith("sk-knn")][:1] + [
            t for t in tasks if t.startswith("table-")
        ][:1]
        seeds, budgets = [0, 1], [8]
        out = out or Path(tempfile.mkdtemp(prefix="real_objectives_smoke_"))
    out = out or DOCS_DIR
    name = args.name or f"real_objectives_{args.suite}"
    csv_path = out / f"{name}.csv"
    packed = unpack(csv_path)  # the committed results: resume from them
    failed = 0
    for budget in [] if args.report_only else sorted(budgets, reverse=True):  # largest first:
        ran = methods if budget == max(budgets) else [m for m in methods if not budget_free(m)]
        run = run_benchmark(  # ... the smaller budgets reuse its runs
            ran, tasks, seeds, budget, csv_path, workers=args.workers, progress=not args.quiet
        )
        failed += len(run.failed)
    frame = with_prefix_budgets(read_results(csv_path), budgets)
    if packed or out.resolve() == DOCS_DIR:
        pack(csv_path)
    frame = frame[frame["method"].isin(methods) & frame["task"].isin(tasks)]
    frame = every_method_finished(frame)
    frame = normalized_scores(frame, RANDOM)
    png = plot(frame, out / f"{name}.png", args.target)
    text, verdict = summarize(frame, args.target)
    peers = [
        m for m in methods if m not in (args.target, RANDOM) and not is_ablation(m, args.target)
    ]
    present = set(frame["method"])
    others = [m for m in methods if m != args.target and m in present]
    if args.target in present and others:
        text += gap_text(frame, args.target, others)
    text += verdict_text(verdict, args.target, peers)
    header = (
        f"# Real objectives: {args.suite if not args.tasks else 'chosen'} tasks\n\n"
        f"Generated by `{command_line('real_objectives', argv)}` "
        f"({len(tasks)} tasks, {seed_counts(frame, len(seeds))}, budgets "
        f"{', '.join(map(str, budgets))}). Normalized score: 1 - (best - opt) / (random - opt) "
        "per task and trial, floored at -1 (opt: the best value any run reached; random: random search's mean "
        "best after as many trials; 0 = random search, 1 = the best seen); rank: the methods "
        "ordered by their mean score on each task (1 = best), averaged over tasks. Only the seeds "
        "every method finished count; a task on which random search's mean already reaches the "
        "best value seen has no score (nan) and enters no mean. Tasks: "
        + ", ".join(tasks)
        + f".\n\n![scores and ranks]({png.name})\n\n"
    )
    (out / f"{name}.md").write_text(header + text)
    sys.stdout.write(text)
    Console(stderr=True).print(
        f"{failed} failed jobs. Wrote {csv_path}, {png} and {out / f'{name}.md'}."
    )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
