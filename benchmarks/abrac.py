r"""ABRAC and ABLR against ScaML-GP, RGPE, GP-BO and random search (issue 15).

1. **Regret** on the ABRAC paper's synthetic families, leave one task out
   (:mod:`headstart.benchmarks.abrac_tasks`): ``forrester-loo`` (10 tasks x 20 points, budget 15;
   the paper's claim is about trial 5) and ``quadratic-loo`` (30 tasks x 100 points, D = 5,
   budget 50; the claim is about trial 10). Mean regret and mean rank per trial.
2. **The first trials with 30 seeds** (budget 10, both families; ``abrac_early.csv``): GP,
   random, ABLR, ABRAC and ABLR-SGD-fixed, mean regret with standard errors and the paired
   differences the issue 32 targets name (the 10-20-seed runs of part 1 cannot resolve them).
3. **Many target evaluations**: ABRAC vs GP-BO on ``quadratic-loo`` (or ``--long-tasks``) with
   a long budget, seconds per suggestion.
4. **FC-Net tables**, leave one dataset out with 1,024 configurations per source (the ABRAC
   paper's tabular study; ``fcnet-<dataset>-n1024``), budget 30, 10 seeds, the methods of
   ``--table-methods`` (ABRAC, ABLR, the papers' heads, ABLR-SGD-fixed, ScaML-GP, RGPE, GP,
   random): mean regret and mean rank at trials 10 and 25 per data set and over all four
   (``abrac_tables.csv``).
5. **OpenML SVM** (HPO-B space 5891 from ``bocode``'s data, 6 data sets), leave one data set out
   with 512 configurations per source, budget 30, 30 seeds (``abrac_svm.csv``).
6. **Seconds per suggestion** at n = 200, 500, 1,000 target points: GP, ABRAC (paper), ABRAC
   (residual, the default) and the default with the engine's full search past its exact block,
   as ratios to GP in the same run, the median of 3 rounds (``abrac_speed.csv``).
7. **Scaling**: M = 10 ... 200 source tasks x 1,000 points: ABRAC's basis training and ScaML-GP's
   meta-fit, and the suggestion time at 20 target points, as ratios in the same run.

Resumable (the regret CSVs keep finished jobs). Writes ``<out>/abrac{.csv,.md,.png}``,
``abrac_early.csv``, ``abrac_svm.csv``, ``abrac_long.csv.gz``, ``abrac_speed.csv`` and
``abrac_scaling.csv``.

Usage::

    python benchmarks/abrac.py                                # the full run
    python benchmarks/abrac.py --seeds 2 --long-budget 40 --scaling 10,20 --out /tmp/ab   # smoke
"""

from __future__ import annotations

import argparse
import itertools
import math
import sys
import time
from pathlib import Path

import numpy as np

DOCS = Path(__file__).resolve().parent.parent / "docs" / "benchmarks"
# -paper: the papers' methods (residual=False; ABRAC's with its ARD head); -residual: the library's
# default since issue 32 (ABRAC's head: one precision; the target's warp chosen by the evidence);
# -residual-nowarp: that default before the warp; -residual-ard: with the paper's ARD head;
# -residual-all: an ARD head on every basis function from the start; -residual-mean: also
# source_mean=True
METHODS = (
    "headstart-abrac-paper,headstart-ablr-paper,headstart-ablr-sgd-fixed,headstart-abrac-residual,"
    "headstart-abrac-residual-nowarp,headstart-ablr-residual,headstart-abrac-residual-ard,headstart-abrac-residual-all,"
    "headstart-abrac-residual-mean,"
    "headstart-ablr-residual-mean,"
    "headstart-scaml-default,headstart-rgpe,headstart-gp,headstart-random"
)
LONG_METHODS = (
    "headstart-abrac-paper,headstart-abrac-residual,headstart-abrac-residual-nowarp,headstart-gp"
)
ABRAC, ABLR = "headstart-abrac-residual", "headstart-ablr-residual"  # the defaults
BUDGETS = {"forrester-loo": 15, "quadratic-loo": 50}
TABLES = tuple(f"fcnet-{d}-n1024" for d in ("slice", "protein", "naval", "parkinsons"))
TABLE_BUDGET, TABLE_SEEDS, TABLE_POINTS = 30, 10, (10, 25)
# issue 32's list for the tables (the ablation arms are run on request with --table-methods)
TABLE_METHODS = (
    "headstart-abrac-residual,headstart-abrac-residual-nowarp,headstart-ablr-residual,"
    "headstart-abrac-paper,headstart-ablr-paper,headstart-ablr-sgd-fixed,headstart-scaml-default,"
    "headstart-rgpe,headstart-gp,headstart-random"
)
# OpenML SVM (HPO-B space 5891, 6 data sets), leave one data set out with 512 configurations per
# source: the ABRAC paper's SVM study; 30 seeds hold out every data set 5 times (seeds 12-29 were
# added at stop 59, on that code; 0-11 are from earlier code)
SVM_SPACE, SVM_PER_SOURCE, SVM_SEEDS = "5891", 512, 30
SVM = f"hpob-{SVM_SPACE}-n{SVM_PER_SOURCE}"
SVM_METHODS = (
    f"{ABRAC},{ABRAC}-nowarp,{ABLR},headstart-abrac-paper,headstart-scaml-default,headstart-rgpe,"
    "headstart-gp,headstart-random"
)
SEEDS = {"forrester-loo": 20, "quadratic-loo": 10}  # every task held out once or twice / 10 of 30
CHECKPOINTS = {
    "forrester-loo": (3, 5, 10, 15),
    "quadratic-loo": (5, 10, 25, 50),
    **{t: TABLE_POINTS for t in (*TABLES, SVM)},
}


def regret_tables(frame) -> str:
    lines = []
    for task, rows in frame.groupby("task"):
        points = [t for t in CHECKPOINTS.get(task, (5, 10)) if t <= rows["iteration"].max()]
        rows = rows.assign(
            rank=rows.groupby(["seed", "iteration"])["best_value"].rank(method="average")
        )
        sel = rows[rows["iteration"].isin(points)]
        regret = sel.groupby(["method", "iteration"])["regret"].mean().unstack()
        rank = sel.groupby(["method", "iteration"])["rank"].mean().unstack()
        secs = rows.groupby("method")["seconds_suggest"].mean()
        seeds = rows.groupby("method")["seed"].nunique()
        lines += [
            f"### {task} ({seeds.max()} seeds)",
            "",
            "| method | "
            + " | ".join(f"regret t={t}" for t in points)
            + " | "
            + " | ".join(f"rank t={t}" for t in points)
            + " | s / suggestion |",
            "|---|" + "---:|" * (2 * len(points) + 1),
        ]
        for method in regret.sort_values(points[-1]).index:
            cells = [f"{regret.loc[method, t]:.4g}" for t in points]
            cells += [f"{rank.loc[method, t]:.2f}" for t in points]
            lines.append(f"| {method} | " + " | ".join(cells) + f" | {secs[method]:.3f} |")
        if {ABRAC, ABLR} <= set(regret.index):
            t = points[1]
            ratio = regret.loc[ABRAC, t] / regret.loc[ABLR, t]
            lines.append(f"\nABRAC / ABLR mean regret at t = {t} (defaults): {ratio:.2f}.")
        if {ABRAC, "headstart-scaml-default"} <= set(regret.index):
            r = regret.loc[ABRAC] / regret.loc["headstart-scaml-default"]
            lines.append(
                "ABRAC / ScaML-GP mean regret (defaults): "
                + ", ".join(f"t={t} {r[t]:.3g}" for t in points)
                + "."
            )
        lines.append("")
    return "\n".join(lines)


def overall_ranks(frame, points) -> str:
    """Mean rank per method over every (task, seed) at ``points``: the methods ordered by best
    value on each run (1 = best)."""
    rows = frame.assign(
        rank=frame.groupby(["task", "seed", "iteration"])["best_value"].rank(method="average")
    )
    sel = rows[rows["iteration"].isin(points)]
    rank = sel.groupby(["method", "iteration"])["rank"].mean().unstack()
    runs = sel.groupby("method").apply(lambda g: g[["task", "seed"]].drop_duplicates().shape[0])
    lines = [
        f"### All FC-Net tasks ({runs.max()} runs: tasks x seeds)",
        "",
        "| method | " + " | ".join(f"mean rank t={t}" for t in points) + " |",
        "|---|" + "---:|" * len(points),
    ]
    for method in rank.sort_values(points[-1]).index:
        lines.append(
            f"| {method} | " + " | ".join(f"{rank.loc[method, t]:.2f}" for t in points) + " |"
        )
    return "\n".join(lines) + "\n"


def condition_seconds(surrogate, X, y, rng, repeats: int = 3) -> float:
    """Mean seconds of one refit on ``(X, y)`` plus a prediction with gradients at 256 points."""
    t0 = time.perf_counter()
    for _ in range(repeats):
        surrogate.condition(X, y, rng)[0].posterior_and_grad(rng.random((256, X.shape[1])))
    return (time.perf_counter() - t0) / repeats


def scaling(counts, n_points: int, out_csv: Path, scaml_max: int = 10**9) -> str:
    """Training / meta-fit and suggestion time vs the number of sources (same process)."""
    import pandas as pd

    from headstart._transfer.metafit import fit_meta_gps
    from headstart._transfer.neural import NeuralTransfer, load_or_train
    from headstart._transfer.scaml import ScaML
    from headstart.benchmarks.abrac_tasks import quadratic_sources

    done = pd.read_csv(out_csv) if out_csv.exists() else pd.DataFrame()
    rows = done.to_dict("records")
    is_cat = np.zeros(5, dtype=bool)
    rng = np.random.default_rng(0)
    X = rng.random((20, 5))
    y = -((X - 0.3) ** 2).sum(1)
    for m in counts:
        if any(r["n_sources"] == m for r in rows):
            continue
        tasks = quadratic_sources(m, n_points)
        t0 = time.perf_counter()
        net = load_or_train(tasks, "nested", seed=0)
        train = time.perf_counter() - t0
        paper = NeuralTransfer(tasks, is_cat, net=net, residual=False)  # the paper's method
        abrac_suggest = condition_seconds(paper, X, y, rng)
        metafit = scaml_suggest = float("nan")
        if m <= scaml_max:  # ScaML-GP's meta-fit is cubic in the points per source
            t0 = time.perf_counter()
            meta = fit_meta_gps(tasks, is_cat)
            metafit = time.perf_counter() - t0
            scaml_suggest = condition_seconds(ScaML(tasks, is_cat, meta=meta), X, y, rng)
        rows.append(
            {
                "n_sources": m,
                "points": m * n_points,
                "abrac_train_s": round(train, 2),
                "scaml_metafit_s": round(metafit, 2),
                "abrac_condition_s": round(abrac_suggest, 4),
                "scaml_condition_s": round(scaml_suggest, 4),
            }
        )
        pd.DataFrame(rows).to_csv(out_csv, index=False)
        print(rows[-1], flush=True)
    frame = pd.DataFrame(rows).sort_values("n_sources")
    lines = [
        f"### Scaling: M sources x {n_points} points (quadratics, D = 5)",
        "",
        "Condition = refit the target model on 20 points and predict with gradients at 256 points "
        "(what one suggestion's model part costs). ScaML-GP is fitted up to M = 50 (its meta-fit "
        "took 478 s there; `nan`: not run).",
        "",
        "| M | points | ABRAC training s | ScaML meta-fit s | ratio | ABRAC (paper) condition s | "
        "ScaML condition s | ratio |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for _, r in frame.iterrows():
        lines.append(
            f"| {int(r.n_sources)} | {int(r.points)} | {r.abrac_train_s} | {r.scaml_metafit_s} | "
            f"{r.abrac_train_s / r.scaml_metafit_s:.2f} | {r.abrac_condition_s} | "
            f"{r.scaml_condition_s} | {r.abrac_condition_s / r.scaml_condition_s:.2f} |"
        )
    if len(frame) >= 2:
        slope = np.polyfit(np.log(frame["points"]), np.log(frame["abrac_train_s"]), 1)[0]
        lines.append(f"\nABRAC training time grows as points^{slope:.2f}.")
    return "\n".join(lines) + "\n"


EARLY_METHODS = (
    f"headstart-random,headstart-gp,{ABLR},{ABRAC},{ABRAC}-nowarp,headstart-ablr-sgd-fixed"
)
EARLY_SEEDS, EARLY_BUDGET, EARLY_POINTS = 30, 10, (3, 4, 5, 10)


def early_tables(frame) -> str:
    """The first trials with 30 seeds: mean regret +- its standard error, and the paired
    differences the issue's targets name (ABRAC - GP, ABRAC - ABLR-SGD-fixed: the same seed, the
    same first 3 Sobol points) and ABLR - random (unpaired: random search draws its own points)."""
    lines = []
    for task, rows in frame.groupby("task"):
        sel = rows[rows["iteration"].isin(EARLY_POINTS)]
        wide = sel.pivot_table(index=["seed", "iteration"], columns="method", values="regret")
        stats = sel.groupby(["method", "iteration"])["regret"].agg(["mean", "sem"]).unstack()
        seeds = rows["seed"].nunique()
        lines += [
            f"### {task}, first trials ({seeds} seeds)",
            "",
            "The neural methods start from the same 3 Sobol points; GP-BO's default design at "
            "budget 10 is 2 points (`min(2d + 1, 10, budget / 5)`); random search draws its own.",
            "",
            "| method | " + " | ".join(f"regret t={t}" for t in EARLY_POINTS) + " |",
            "|---|" + "---:|" * len(EARLY_POINTS),
        ]
        for method in stats.index:
            cells = [
                f"{stats.loc[method, ('mean', t)]:.3g} ± {stats.loc[method, ('sem', t)]:.2g}"
                for t in EARLY_POINTS
            ]
            lines.append(f"| {method} | " + " | ".join(cells) + " |")
        lines += [
            "",
            "Differences of mean regret (± standard error; negative: the first method is better):",
            "",
            "| difference | " + " | ".join(f"t={t}" for t in EARLY_POINTS) + " |",
            "|---|" + "---:|" * len(EARLY_POINTS),
        ]
        pairs = [(ABRAC, "headstart-gp"), (ABRAC, "headstart-ablr-sgd-fixed")]
        for a, b in pairs:
            if {a, b} <= set(wide.columns):
                d = (wide[a] - wide[b]).groupby(level="iteration")
                m, e = d.mean(), d.sem()
                cells = [f"{m[t]:.3g} ± {e[t]:.2g}" for t in EARLY_POINTS]
                lines.append(f"| {a} - {b} (paired) | " + " | ".join(cells) + " |")
        a, b = ABLR, "headstart-random"
        if {a, b} <= set(stats.index):
            cells = []
            for t in EARLY_POINTS:
                m = stats.loc[a, ("mean", t)] - stats.loc[b, ("mean", t)]
                e = math.hypot(stats.loc[a, ("sem", t)], stats.loc[b, ("sem", t)])
                cells.append(f"{m:.3g} ± {e:.2g}")
            lines.append(f"| {a} - {b} (unpaired) | " + " | ".join(cells) + " |")
        lines.append("")
    return "\n".join(lines)


SPEED_METHODS = {  # name: (method, options); the settings of the regret runs
    "headstart-gp": ("gp", {"deterministic": False}),
    "headstart-abrac-paper": ("abrac", {"residual": False, "ard": True, "output_warp": "none"}),
    ABRAC: ("abrac", {"residual": True}),
    # the default's search before issue 32's last round: the engine's full effort past the block
    f"{ABRAC}-fullsearch": (
        "abrac",
        {"residual": True, "screening_points": 2048, "search_starts": 10},
    ),
}


def many_evaluations_table(task: str, long) -> list[str]:
    """Part 3's report for one task: time per suggestion (mean, and over the last 50) and the
    final regret per method, with GP's time over each ABRAC variant's."""
    secs = long.groupby("method")["seconds_suggest"].mean()
    last = long["iteration"].max()
    late = long[long["iteration"] > last - 50].groupby("method")["seconds_suggest"].mean()
    reg = long[long["iteration"] == last].groupby("method")["regret"].mean()
    text = [
        f"### Many target evaluations: {task}, budget {last} ({long['seed'].nunique()} seeds)",
        "",
        "| method | mean s / suggestion | s / suggestion, last 50 | final regret |",
        "|---|---:|---:|---:|",
        *(f"| {m} | {secs[m]:.4f} | {late[m]:.4f} | {reg[m]:.4g} |" for m in secs.index),
        "",
    ]
    for m in ("headstart-abrac-paper", ABRAC):
        if {m, "headstart-gp"} <= set(late.index):
            text.append(
                f"GP / {m} time per suggestion over the last 50: "
                f"{late['headstart-gp'] / late[m]:.2f}x.\n"
            )
    return text


def suggestion_seconds(sizes, repeats: int, out_csv: Path, rounds: int = 1) -> str:
    """Seconds per suggestion at ``n`` target points (issue 32, item 4), same process.

    For each ``n``: a study on quadratic-loo target 0 imports ``n`` Sobol points, asks once (the
    full fit from every start), then ``max(repeats, ceil(NEURAL_REFIT_GROWTH * n) + 1)`` more ask
    + tell pairs, whose mean is reported: a window that holds at least one refit of the neural
    methods' hyperparameters (beyond ``NEURAL_LOCAL_POINTS`` they refit once the data have grown
    by that share), so the mean is the amortized cost a run pays. The whole measurement runs
    ``rounds`` times, the methods one after another in each (the same suggestions each round:
    the rounds measure the machine's noise, which moved one method's mean by up to 20% between
    runs), and the table shows the median round."""
    import pandas as pd

    from headstart._transfer.defaults import NEURAL_REFIT_GROWTH
    from headstart.benchmarks.functions import get_task, resolve
    from headstart.benchmarks.methods import study_at_sobol_points

    task = resolve(get_task("quadratic-loo"), 0)
    done = pd.read_csv(out_csv) if out_csv.exists() else pd.DataFrame()
    if len(done):  # (rows from before the rounds: round 0)
        done["round"] = done.get("round", pd.Series(0, index=done.index)).fillna(0).astype(int)
    rows = done.to_dict("records")
    for rnd, n in itertools.product(range(rounds), sizes):
        for name, (method, options) in SPEED_METHODS.items():
            if any(r["n"] == n and r["method"] == name and r.get("round", 0) == rnd for r in rows):
                continue
            if method != "gp":
                options = {**options, "deterministic": True, "transfer_from": task.meta_tasks}
            study = study_at_sobol_points(task, n, f"speed-{name}-{n}", method, **options)
            secs = []
            for _ in range(max(repeats, math.ceil(NEURAL_REFIT_GROWTH * n) + 1) + 1):
                t0 = time.perf_counter()
                trial = study.ask()
                secs.append(time.perf_counter() - t0)
                study.tell(trial, float(task.objective(trial.params)))
            rows.append(
                {
                    "round": rnd,
                    "n": n,
                    "method": name,
                    "first_s": round(secs[0], 4),
                    "median_s": round(float(np.median(secs[1:])), 4),
                    "mean_s": round(float(np.mean(secs[1:])), 4),
                    "repeats": len(secs) - 1,
                }
            )
            pd.DataFrame(rows).to_csv(out_csv, index=False)
            print(rows[-1], flush=True)
    frame = pd.DataFrame(rows)
    median = frame.pivot_table(index="n", columns="method", values="mean_s", aggfunc="median")
    first = frame.pivot_table(index="n", columns="method", values="first_s", aggfunc="median")
    by_round = frame.pivot_table(index=["n", "round"], columns="method", values="mean_s")
    spread = (by_round[ABRAC] / by_round["headstart-gp"]).groupby(level="n").agg(["min", "max"])
    lines = [
        "### Seconds per suggestion at n target points (quadratic-loo, D = 5)",
        "",
        "Mean of the ask + tell pairs after the first ask (the first runs the full fit from "
        "every start; its time is the last columns), `max(7, ceil(0.05 n) + 1)` of them: a "
        "window that holds one of the neural methods' refits per 5% growth, so the mean is "
        "their amortized cost (the refit from every start comes once per 25% growth, about "
        "the first ask's time over n / 4 asks). Ratio = method / GP. Each figure is the median "
        f"of {frame['round'].nunique()} rounds of the whole measurement; the default's ratio "
        "in each round is in the last but one column.",
        "",
        "| n | GP s | ABRAC (paper) s | ratio | ABRAC (residual, default) s | ratio | "
        "ABRAC, full search past the block s | ratio | default's ratio, rounds | "
        "first ask: GP / paper / residual s |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|",
    ]
    gp, paper, full = "headstart-gp", "headstart-abrac-paper", f"{ABRAC}-fullsearch"
    for n in median.index:
        m, f = median.loc[n], first.loc[n]
        full_cells = f"{m[full]:.3f} | {m[full] / m[gp]:.3f}" if pd.notna(m.get(full)) else "- | -"
        lines.append(
            f"| {n} | {m[gp]:.3f} | {m[paper]:.3f} | {m[paper] / m[gp]:.3f} | {m[ABRAC]:.4f} | "
            f"{m[ABRAC] / m[gp]:.3f} | {full_cells} | "
            f"{spread.loc[n, 'min']:.3f}-{spread.loc[n, 'max']:.3f} | "
            f"{f[gp]:.2f} / {f[paper]:.2f} / {f[ABRAC]:.2f} |"
        )
    return "\n".join(lines) + "\n"


def _names(text: str) -> list[str]:
    """The method names of a comma-separated list (``--methods`` and the parts' own lists)."""
    return [m for m in text.split(",") if m]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--methods", default=METHODS)
    p.add_argument("--seeds", type=int, default=0, help="override the seeds of both families")
    p.add_argument("--long-budget", type=int, default=200)
    p.add_argument("--long-seeds", type=int, default=10)
    p.add_argument("--long-methods", default=LONG_METHODS)
    p.add_argument(
        "--long-tasks",
        default="quadratic-loo",
        help="comma-separated tasks of the many-evaluations part (e.g. fcnet-protein-n1024)",
    )
    p.add_argument("--scaling", default="10,50,100,200")
    p.add_argument("--scaling-points", type=int, default=1000)
    p.add_argument("--speed", default="200,500,1000", help="target sizes of the speed part")
    p.add_argument("--speed-repeats", type=int, default=7)
    p.add_argument("--speed-rounds", type=int, default=3, help="rounds of the speed part")
    p.add_argument("--scaml-max", type=int, default=50, help="largest M ScaML-GP is fitted on")
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--out", type=Path, default=DOCS)
    p.add_argument("--table-seeds", type=int, default=TABLE_SEEDS)
    p.add_argument("--table-methods", default=TABLE_METHODS)
    p.add_argument("--early-seeds", type=int, default=EARLY_SEEDS)
    p.add_argument("--early-methods", default=EARLY_METHODS)
    p.add_argument("--svm-seeds", type=int, default=SVM_SEEDS)
    p.add_argument("--svm-methods", default=SVM_METHODS)
    p.add_argument(
        "--skip",
        default="",
        help="comma-separated parts to skip: regret,early,tables,svm,long,speed,scaling",
    )
    args = p.parse_args(argv)
    from headstart.benchmarks.report import regret_plot
    from headstart.benchmarks.runner import pack_csv, read_results, run_benchmark, unpack_csv

    args.out.mkdir(parents=True, exist_ok=True)
    skip = set(args.skip.split(","))
    methods = _names(args.methods)
    csv_path = args.out / "abrac.csv"
    text = [
        "# ABRAC and ABLR (neural transfer surrogates)",
        "",
        "Generated by `python benchmarks/abrac.py`. Leave-one-task-out families of the ABRAC "
        "paper; 3 random initial points for the neural methods (the paper's protocol), the "
        "library defaults for the others. Regret = best value - optimum; rank among the methods "
        "per seed and trial (1 = best), averaged.",
        "",
        "![regret](abrac.png)",
        "",
    ]
    if "regret" not in skip:
        for task, budget in BUDGETS.items():
            seeds = range(args.seeds or SEEDS[task])
            run_benchmark(methods, [task], seeds, budget, csv_path, workers=args.workers)
    if csv_path.exists():
        frame = read_results(csv_path)
        regret_plot(frame, args.out / "abrac.png", ncols=2)
        text.append(regret_tables(frame))
    tables_csv = args.out / "abrac_tables.csv"
    if "tables" not in skip:
        run_benchmark(
            _names(args.table_methods), list(TABLES), range(args.table_seeds), TABLE_BUDGET,
            tables_csv,
            workers=args.workers,
        )  # fmt: skip
    if tables_csv.exists():
        tables = read_results(tables_csv)
        text += ["## FC-Net, leave one dataset out (1,024 configurations per source)", ""]
        text += [regret_tables(tables), overall_ranks(tables, TABLE_POINTS)]
    early_csv = args.out / "abrac_early.csv"
    if "early" not in skip:
        for task in BUDGETS:
            run_benchmark(
                _names(args.early_methods), [task], range(args.early_seeds),
                EARLY_BUDGET, early_csv, workers=args.workers,
            )  # fmt: skip
    if early_csv.exists():
        text += [early_tables(read_results(early_csv))]
    svm_csv = args.out / "abrac_svm.csv"
    if "svm" not in skip:
        from headstart.benchmarks.functions import register_task
        from headstart.benchmarks.hpob_transfer import hpob_transfer_family

        register_task(hpob_transfer_family(SVM_SPACE, n_per_source=SVM_PER_SOURCE))
        run_benchmark(
            _names(args.svm_methods), [SVM], range(args.svm_seeds),
            TABLE_BUDGET, svm_csv, workers=args.workers,
        )  # fmt: skip
    if svm_csv.exists():
        svm = read_results(svm_csv)
        text += [
            f"## OpenML SVM (HPO-B space {SVM_SPACE}), leave one data set out "
            f"({SVM_PER_SOURCE} configurations per source; normalized regret: 0 = the pool's "
            "best, 1 = its median)",
            "",
            regret_tables(svm),
        ]
    long_csv = unpack_csv(args.out / "abrac_long.csv")  # committed gzipped (~5 MB as text)
    if "long" not in skip:
        run_benchmark(
            _names(args.long_methods),
            _names(args.long_tasks),
            range(args.long_seeds),
            args.long_budget,
            long_csv,
            workers=args.workers,
        )
    if long_csv.exists():
        for task, long in read_results(long_csv).groupby("task", sort=False):
            text += many_evaluations_table(task, long)
        pack_csv(long_csv)
    speed_csv = args.out / "abrac_speed.csv"
    if "speed" not in skip or speed_csv.exists():
        sizes = [] if "speed" in skip else [int(n) for n in args.speed.split(",") if n]
        text.append(suggestion_seconds(sizes, args.speed_repeats, speed_csv, args.speed_rounds))
    scaling_csv = args.out / "abrac_scaling.csv"
    if "scaling" not in skip or scaling_csv.exists():
        counts = [] if "scaling" in skip else [int(c) for c in args.scaling.split(",") if c]
        text.append(scaling(counts, args.scaling_points, scaling_csv, args.scaml_max))
    (args.out / "abrac.md").write_text("\n".join(text) + "\n")
    sys.stdout.write("\n".join(text) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
