r"""Issue 31's protocol: transfer defaults chosen on selection families, reported on held-out ones.

``docs/benchmarks/transfer_protocol.md`` states the protocol. Two suites of task families:

* ``selection`` -- where defaults may be tuned: the families that chose the earlier defaults
  (``benchmarks/transfer_defaults.py``: synthetic, FC-Net / HPOBench tables, scikit-learn) and
  the HPO-B transfer families of eight search spaces
  (:data:`~headstart.benchmarks.hpob_transfer.SELECTION_SPACES`);
* ``confirmation`` -- where they are reported: the HPO-B families of the seven other spaces
  (:data:`~headstart.benchmarks.hpob_transfer.CONFIRMATION_SPACES`), other OpenML tasks on other
  search spaces, never used to choose anything.

Each HPO-B family tunes a held-out OpenML task (its pool of 2,000 evaluated configurations,
scored at the nearest one) with the space's other tasks as sources: all of them x 64
configurations (``hpob-<space>``) or 2 of them x 40 (``hpob-<space>-s2``); the value is the
normalized regret ``(err - err_best) / (err_median - err_best)`` (0 = the pool's best, 1 = its
median).

Per family and method it reports the mean regret over trials 1-5, at trial 10, at the final
budget and over all trials, and checks the issue's targets for ``--target``: mean over 1-5 <=
min(warm start, plain GP); at trial 10 and at the final budget <= plain GP; with >= 8 sources,
mean over 1-20 <= 0.6 x plain GP.

``--seeds`` takes a count, a range or a list of both (``0-9,42-51``); the report keeps only those
seeds. Resumable; results are committed gzipped. Writes ``<out>/transfer_protocol_<suite>.{csv.gz,md,png}``.

Usage::

    python benchmarks/transfer_protocol.py --suite selection            # 10 seeds, budget 20
    python benchmarks/transfer_protocol.py --suite confirmation --methods headstart-scaml-default,headstart-warmstart,headstart-gp
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

DOCS = Path(__file__).resolve().parent.parent / "docs" / "benchmarks"
LEGACY = [
    "branin-m8",
    "hartmann3-m8",
    "hartmann6-m8",
    "branin-m1",
    "branin-m2",
    "branin-m4",
    "hartmann6-m1",
    "hartmann6-m2",
    "hartmann6-m4",
    "fcnet-protein",
    "fcnet-slice",
    "hpobench-mlp-car",
    "hpobench-mlp-kc1",
    "fcnet-protein-s1",
    "hpobench-mlp-car-s1",
    "hpobench-mlp-car-s2",
    "sklearn-hgb-breast-cancer",
    "sklearn-hgb-wine",
]
METHODS = (
    "headstart-scaml-default,headstart-scaml-before31,headstart-scaml,headstart-warmstart,"
    "headstart-gp"
)
TARGET = "headstart-scaml-default"
WARM, GP = "headstart-warmstart", "headstart-gp"
MANY_SOURCES = 8


def suite_tasks(suite: str, with_legacy: bool = True) -> list[str]:
    """The families of ``suite`` (registering the HPO-B ones)."""
    from headstart.benchmarks.hpob_transfer import (
        CONFIRMATION_SPACES,
        SELECTION_SPACES,
        register_hpob_transfer_families,
    )

    register_hpob_transfer_families()
    spaces = SELECTION_SPACES if suite == "selection" else CONFIRMATION_SPACES
    hpob = [name for s in spaces for name in (f"hpob-{s}", f"hpob-{s}-s2")]
    return ([*LEGACY] if suite == "selection" and with_legacy else []) + hpob


def summarize(frame, target: str, methods: list[str]):
    """Per family and method: seeds, mean regret over trials 1-5, at 10, final, over all.

    Only the seeds every method in ``methods`` finished on the family count."""
    import pandas as pd

    rows = []
    for task, g in frame.groupby("task"):
        budget = int(g["budget"].max())
        g = g[g["budget"] == budget]
        done = [set(g[(g.method == m) & (g.iteration == budget)].seed) for m in methods]
        seeds = set.intersection(*done) if all(done) else set()
        if not seeds:
            continue
        g = g[g.seed.isin(seeds)]
        for m in methods:
            r = g[g.method == m].pivot_table(index="seed", columns="iteration", values="regret")
            rows.append(
                {
                    "task": task,
                    "method": m,
                    "seeds": len(seeds),
                    "mean 1-5": r.loc[:, 1:5].mean(axis=1).mean(),
                    "t=10": r[10].mean() if 10 in r else float("nan"),
                    "final": r[budget].mean(),
                    "mean 1-final": r.mean(axis=1).mean(),
                }
            )
    return pd.DataFrame(rows)


def target_checks(
    summary, target: str, n_sources: dict[str, int], warm: str = WARM
) -> dict[str, list]:
    """Per target of issue 31, ``(family, target's value, bound)`` for every family it applies
    to (NaN comparisons dropped)."""
    checks = {"1-5 <= min(warm start, GP)": [], "t=10 <= GP": [], "final <= GP": [],
              f"mean 1-20 <= 0.6 GP ({MANY_SOURCES}+ sources)": []}  # fmt: skip
    for task, g in summary.groupby("task"):
        v = g.set_index("method")
        if target not in v.index:
            continue
        t = v.loc[target]
        if warm in v.index and GP in v.index:
            base = min(v.loc[warm, "mean 1-5"], v.loc[GP, "mean 1-5"])
            checks["1-5 <= min(warm start, GP)"].append((task, t["mean 1-5"], base))
        if GP in v.index:
            checks["t=10 <= GP"].append((task, t["t=10"], v.loc[GP, "t=10"]))
            checks["final <= GP"].append((task, t["final"], v.loc[GP, "final"]))
            if n_sources.get(task, 0) >= MANY_SOURCES:
                key = f"mean 1-20 <= 0.6 GP ({MANY_SOURCES}+ sources)"
                checks[key].append((task, t["mean 1-final"], 0.6 * v.loc[GP, "mean 1-final"]))
    return {name: [(task, a, b) for task, a, b in items if a == a and b == b]
            for name, items in checks.items()}  # fmt: skip


def verdicts(summary, target: str, n_sources: dict[str, int], warm: str = WARM) -> list[str]:
    """Markdown lines: per target of issue 31, the families that pass and those that miss."""
    lines = []
    for name, items in target_checks(summary, target, n_sources, warm).items():
        if not items:
            continue
        misses = [(task, a, b) for task, a, b in items if not a <= b]
        lines.append(f"- **{name}**: {len(items) - len(misses)} of {len(items)} families pass.")
        if misses:
            detail = ", ".join(f"{task} {a:.3g} vs {b:.3g}" for task, a, b in misses)
            lines.append(f"  Misses (target vs bound): {detail}.")
    return lines


def relative_table(summary, methods: list[str], warm: str = WARM) -> list[str]:
    """Markdown table: per method, the geometric mean over families of its regret relative to
    plain GP-BO's (trials 1-5, t=10, final, 1-final), and how many families would pass issue
    31's first three targets with it as the target (the decision rule of the protocol)."""
    import numpy as np

    lines = ["| method | mean 1-5 | t=10 | final | mean 1-final | passing (1-5 / t=10 / final) |",
             "|---|---:|---:|---:|---:|---|"]  # fmt: skip
    cols = ["mean 1-5", "t=10", "final", "mean 1-final"]
    if GP not in set(summary.method):
        return [f"(No ratios: `{GP}` is not among the methods.)"]
    gp = summary[summary.method == GP].set_index("task")[cols]
    for m in methods:
        if m == GP:
            continue
        own = summary[summary.method == m].set_index("task")[cols]
        ratio = (own / gp.loc[own.index]).clip(lower=1e-12)
        means = [float(np.exp(np.log(ratio[c]).mean())) for c in cols]
        counts = _pass_counts(summary, m, warm)
        lines.append(f"| {m} | " + " | ".join(f"{v:.3f}" for v in means) + f" | {counts} |")
    return lines


def _pass_counts(summary, target: str, warm: str = WARM) -> str:
    """``passing / passing / passing`` of the first three targets with ``target`` as the method."""
    checks = target_checks(summary, target, {}, warm)
    keys = ("1-5 <= min(warm start, GP)", "t=10 <= GP", "final <= GP")
    counts = [sum(a <= b for _, a, b in checks[k]) if checks[k] else "-" for k in keys]
    return " / ".join(map(str, counts))


def span(seeds: list[int]) -> str:
    """``[0, 1, 2, 42, 43]`` as ``"0-2, 42-43"``."""
    runs: list[list[int]] = []
    for seed in sorted(seeds):
        if runs and seed == runs[-1][-1] + 1:
            runs[-1].append(seed)
        else:
            runs.append([seed])
    return ", ".join(f"{r[0]}-{r[-1]}" if len(r) > 1 else f"{r[0]}" for r in runs)


def half_table(frame, methods: list[str], target: str, warm: str = WARM) -> list[str]:
    """Markdown table: issue 31's pass counts on each half of the seeds, and what an arm that
    *is* a baseline passes by chance: the baseline's second half of the seeds judged against both
    baselines' first half (the noise of a per-family count at that many seeds)."""
    import pandas as pd

    seeds = sorted(set(frame.seed))
    if len(seeds) < 2 or len(seeds) % 2:
        raise ValueError(f"--halves needs an even number of seeds, at least 2; got {len(seeds)}.")
    first, second = seeds[: len(seeds) // 2], seeds[len(seeds) // 2 :]
    lines = ["| arm judged | its seeds | baselines' seeds | passing (1-5 / t=10 / final) |",
             "|---|---|---|---|"]  # fmt: skip
    for half in (first, second, seeds):
        part = frame[frame.seed.isin(half)]
        counts = _pass_counts(summarize(part, target, methods), target, warm)
        lines.append(f"| {target} | {span(half)} | {span(half)} | {counts} |")
    base = frame[frame.seed.isin(first)]
    for arm in (GP, warm):
        if arm not in methods:
            continue
        twin = frame[(frame.method == arm) & frame.seed.isin(second)].copy()
        if twin.empty:
            continue
        name = f"{arm} (twin)"
        twin["seed"] = twin.seed.map(dict(zip(second, first, strict=True)))
        twin["method"] = name
        both = pd.concat([base, twin], ignore_index=True)
        counts = _pass_counts(summarize(both, name, [*methods, name]), name, warm)
        lines.append(f"| {arm} | {span(second)} | {span(first)} | {counts} |")
    return lines


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--suite", choices=("selection", "confirmation"), default="selection")
    p.add_argument("--tasks", default=None, help="Comma-separated families instead of the suite.")
    p.add_argument("--no-legacy", action="store_true", help="Selection: HPO-B families only.")
    p.add_argument("--methods", default=METHODS, help="Comma-separated methods.")
    p.add_argument("--target", default=TARGET, help="The method the verdicts are about.")
    p.add_argument("--warm", default=WARM, help="The warm-start baseline of the targets.")
    p.add_argument(
        "--seeds", default="10",
        help="A count (10: seeds 0-9), a range (10-19) or a list (0-9,42-51); the report uses these.",
    )  # fmt: skip
    p.add_argument("--budget", type=int, default=20)
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--out", type=Path, default=DOCS)
    p.add_argument("--name", default=None, help="Base name (default transfer_protocol_<suite>).")
    p.add_argument("--report-only", action="store_true")
    p.add_argument(
        "--halves", action="store_true",
        help="Also report the pass counts on each half of the seeds, and a baseline's own.",
    )  # fmt: skip
    args = p.parse_args(argv)
    from headstart.bench_cli import command_line, parse_seeds
    from headstart.exceptions import InvalidSettingError

    try:
        seeds = parse_seeds(args.seeds)
    except InvalidSettingError as e:
        p.error(str(e))
    os.environ.setdefault("HEADSTART_SKLEARN_CACHE", str(DOCS / "sklearn_cache.jsonl"))
    from headstart.benchmarks import get_task
    from headstart.benchmarks.csvlog import pack, unpack
    from headstart.benchmarks.functions import resolve
    from headstart.benchmarks.report import regret_plot
    from headstart.benchmarks.runner import read_results
    from headstart.benchmarks.suite import run_suite

    tasks = suite_tasks(args.suite, not args.no_legacy)  # registers the HPO-B families
    tasks = args.tasks.split(",") if args.tasks else tasks
    methods = [m for m in args.methods.split(",") if m]
    name = args.name or f"transfer_protocol_{args.suite}"
    args.out.mkdir(parents=True, exist_ok=True)
    csv_path = args.out / f"{name}.csv"
    unpack(csv_path)
    if not args.report_only:
        run_suite(methods, dict.fromkeys(tasks, args.budget), seeds, csv_path,
                  workers=args.workers)  # fmt: skip
        pack(csv_path)
    frame = read_results(csv_path)
    frame = frame[
        frame["task"].isin(tasks) & frame["method"].isin(methods) & frame.seed.isin(seeds)
    ]
    summary = summarize(frame, args.target, methods)
    n_sources = {t: len(resolve(get_task(t), 0).meta_tasks) for t in summary.task.unique()}
    verdict = verdicts(summary, args.target, n_sources, args.warm)
    png = regret_plot(frame, args.out / f"{name}.png", ncols=4)
    table = ["| family | sources | method | seeds | mean 1-5 | t=10 | final | mean 1-final |",
             "|---|---:|---|---:|---:|---:|---:|---:|"]  # fmt: skip
    for _, r in summary.iterrows():
        m = f"**{r.method}**" if r.method == args.target else r.method
        table.append(
            f"| {r.task} | {n_sources[r.task]} | {m} | {r.seeds} | {r['mean 1-5']:.3g} | "
            f"{r['t=10']:.3g} | {r['final']:.3g} | {r['mean 1-final']:.3g} |"
        )
    intro = (
        f"Generated by `{command_line('transfer_protocol', argv)}` (budget "
        f"{args.budget}; {summary.seeds.min() if len(summary) else 0}-"
        f"{summary.seeds.max() if len(summary) else 0} seeds per family, only seeds every "
        f"method finished). The protocol is [transfer_protocol.md](transfer_protocol.md). "
        "Regret is simple regret (HPO-B families: normalized, 0 = the pool's best, 1 = its "
        f"median). Methods: {', '.join(f'`{m}`' for m in methods)}; target `{args.target}`; "
        f"the trials-1-5 bound is min(`{args.warm}`, `{GP}`)"
        + ("." if args.warm in methods else " (not among the methods: that check is skipped).")
    )
    halves = [
        "### The counts' noise: each half of the seeds, and a baseline judged against itself",
        "",
        *half_table(frame, methods, args.target, args.warm),
        "",
    ] if args.halves else []  # fmt: skip
    text = "\n".join(
        [
            f"# Transfer protocol: {args.suite} families",
            "",
            intro,
            "",
            f"![regret]({png.name})",
            "",
            "### Targets",
            "",
            *verdict,
            "",
            "### Relative to plain GP-BO (geometric mean over families)",
            "",
            *relative_table(summary, methods, args.warm),
            "",
            *halves,
            "### Per family",
            "",
            *table,
            "",
        ]
    )
    (args.out / f"{name}.md").write_text(text)
    sys.stdout.write("\n".join(verdict) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
