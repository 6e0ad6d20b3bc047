r"""MPHD on held-out HPO-B search spaces: a prior pre-trained on the other 14 spaces, on a new one.

The MPHD paper's NToT setting (Fan, Han & Wang 2024, Sec. 4.2) -- what a user with a new search
space has: for each of HPO-B's 15 spaces (:mod:`headstart.benchmarks.hpob`), pre-train on the
other 14 (every task a sub-dataset, ``n_points`` per sub-dataset), then run BO on the held-out
space's tasks (pool-based: a suggestion is evaluated at the nearest pool configuration).
5 random initial points, then BO, as in the paper.

Methods: ``headstart-mphd`` (headstart's default: the paper's context network),
``headstart-mphd-auto`` (``lengthscale="auto"``: the network pulled toward the shared Gamma as far
as leave-one-space-out likelihood says, or the shared Gamma), ``headstart-mphd-shared`` (the
"Non-NN" ablation), ``headstart-gp-hand`` (the paper's hand-specified Gamma priors),
``headstart-gp-init5`` (headstart's default GP priors), ``headstart-scaml-loto`` (ScaML-GP on the
other tasks of the same space) and ``headstart-random``. Metric: normalized simple regret
``(max acc - best acc) / (max acc - min acc)`` of the task's pool, averaged over tasks and seeds
per space; seconds per suggestion. The report also scores each held-out space's step-1
lengthscales under the priors pre-trained without it (the held-out log likelihood, issue 33), for
the priors of ``--n-points`` and of ``--before-points`` points per sub-dataset.

Resumable (the CSV keeps finished jobs; the priors are cached as small JSON files next to it).
Writes ``<out>/mphd.{csv.gz,md,png}``, ``<out>/mphd_heldout.csv`` and
``<out>/mphd_priors/*.json``.

Usage::

    python benchmarks/mphd.py                          # 15 spaces, all 92 tasks, 5 seeds
    python benchmarks/mphd.py --spaces 4796,5527 --tasks-per-space 1 --seeds 1 --budget 20 \
        --out /tmp/mphd                                # a smoke run
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

from headstart.benchmarks.hpob import encode_rows

DOCS = Path(__file__).resolve().parent.parent / "docs" / "benchmarks"
METHODS = (
    "headstart-mphd,headstart-mphd-auto,headstart-mphd-shared,headstart-gp-hand,"
    "headstart-gp-init5,headstart-random"
)
TARGET, BASELINE, HAND = "headstart-mphd", "headstart-gp-init5", "headstart-gp-hand"
N_SOURCE_ROWS = 128  # rows of each other task given to ScaML-GP
# points per sub-dataset in step 1: what fits the 5-minute pre-training budget on this
# machine (245,816 of HPO-B's 1.9 million points, 111 s), and the 64 of the earlier runs
N_POINTS, BEFORE_POINTS = 4096, 64
MODES = ("auto", "network", "shared")


def _domain(space_id, tasks, rng):
    from headstart.benchmarks.hpob import space_of
    from headstart.mphd import Domain

    space = space_of(tasks)
    kinds = tuple(c.kind for c in space.columns)
    return Domain(space_id, kinds, tuple((encode_rows(space, X), acc) for _, X, acc in tasks))


def step1_fits(data, out_dir, n_points, seed=0):
    """Step 1 on all spaces at once, cached as JSON (timed: the issue's pre-training budget).

    A space's step-1 estimate does not depend on the other spaces (the batched objective is a sum
    of per-space terms), so each held-out space's prior reuses these fits minus its own.
    """
    from headstart.mphd.pretrain import cached_fit_domains

    def make_domains():
        rng = np.random.default_rng(seed)
        return [_domain(s, t, rng) for s, t in data.items()]

    path = out_dir / f"step1-all-spaces-n{n_points}.json"
    return cached_fit_domains(path, make_domains, n_points=n_points, seed=seed)


def pretrain_priors(
    fits, kinds, held_out, out_dir, n_points, seed=0, oracle=False
) -> dict[str, str]:
    """The held-out space's priors (one per :data:`MODES`) from the other spaces' fits, and with
    ``oracle`` the in-sample reference :func:`oracle_prior` from its own fit."""
    from headstart.mphd.pretrain import fit_priors

    paths = {m: out_dir / f"hpob-n{n_points}-without-{held_out}-{m}.json" for m in MODES}
    others = [f for f in fits if f.name != held_out]
    for mode, path in paths.items():
        if not path.exists():
            prior = fit_priors(others, kinds, lengthscale=mode, n_points=n_points, seed=seed)
            prior.save(path)
    if oracle:
        paths["oracle"] = out_dir / f"hpob-n{n_points}-oracle-{held_out}.json"
        if not paths["oracle"].exists():
            oracle_prior(fits, held_out, paths["shared"]).save(paths["oracle"])
    return {mode: str(path) for mode, path in paths.items()}


def oracle_prior(fits, held_out, shared_path):
    """An in-sample reference for issue 33 on HPO-B, where no generating prior exists: the one
    Gamma for every lengthscale that best fits the held-out space's own step-1 lengthscales
    (estimated on that space's data, its tasks included), with the signal and noise Gammas of
    the prior pre-trained without it (as the synthetic benchmark's generating-prior arm keeps
    MPHD's). Not a bound: a network's Gamma per kind of dimension can fit better."""
    from headstart.mphd import PriorModel
    from headstart.mphd.network import gamma_mle

    own = next(f for f in fits if f.name == held_out)
    shared = PriorModel.load(shared_path)
    trained_on = {"oracle": f"lengthscale Gamma fitted on space {held_out}'s own step-1 fit"}
    return PriorModel.shared(
        gamma_mle(own.lengthscales), shared.outputscale, shared.noise, trained_on
    )


def heldout_loglik(fits, kinds, priors_by_points: dict[int, dict[str, dict[str, str]]]) -> list:
    """Rows ``(space, points, mode, mean log Gamma density of the space's lengthscales)``: each
    held-out space's step-1 lengthscales (from ``fits``, the most points') under the priors
    trained without it, for each number of points per sub-dataset."""
    from headstart.mphd import PriorModel
    from headstart.mphd.network import gamma_log_pdf

    rows = []
    for fit in fits:
        for points, by_space in priors_by_points.items():
            for mode, path in by_space.get(fit.name, {}).items():
                prior = PriorModel.load(path)
                a, b = prior.lengthscale_gammas(kinds[fit.name])
                chosen = prior.trained_on.get("selection", {}).get("strength")
                rows.append(
                    {
                        "space": fit.name,
                        "points": points,
                        "mode": mode,
                        "loglik": float(np.mean(gamma_log_pdf(fit.lengthscales, a, b))),
                        "lambda": chosen if mode == "auto" else None,
                        "chose": prior.lengthscale_mode if mode == "auto" else mode,
                    }
                )
    return rows


def make_tasks(data, space_id, priors, tasks_per_space):
    from headstart.benchmarks.functions import Task, register_task
    from headstart.benchmarks.hpob import PoolObjective, space_of
    from headstart.sources import MetaTask

    tasks = data[space_id]
    space = space_of(tasks)
    names = []
    for k, (task_id, X, acc) in enumerate(tasks[: tasks_per_space or None]):
        rng = np.random.default_rng(k)
        metas = []
        for other_id, Xo, acco in tasks:
            if other_id == task_id:
                continue
            idx = rng.choice(len(acco), min(N_SOURCE_ROWS, len(acco)), replace=False)
            metas.append(MetaTask(other_id, encode_rows(space, Xo[idx]), 1.0 - acco[idx]))
        name = f"hpob-{space_id}-{task_id}"
        objective = PoolObjective(X, acc, tuple(priors.items()))
        register_task(
            Task(name, space, objective, float(1.0 - acc.max()), "HPO-B", tuple(metas)),
            overwrite=True,
        )
        names.append(name)
    return names


def report(
    csv_path: Path,
    data,
    out: Path,
    budget: int,
    pretrain_note: str,
    heldout: list[str],
    pairs: tuple[tuple[str, str], ...] = ((TARGET, BASELINE),),
) -> str:
    from headstart.benchmarks.runner import read_results

    frame = read_results(csv_path)
    spread = {
        f"hpob-{s}-{t}": float(acc.max() - acc.min()) for s, ts in data.items() for t, _, acc in ts
    }
    frame = frame[frame["task"].isin(spread)].copy()
    frame["space"] = frame["task"].str.split("-").str[1]
    frame["nregret"] = frame["regret"] / frame["task"].map(spread)
    checkpoints = [t for t in (25, 50, 100, budget) if t <= budget]
    checkpoints = sorted(set(checkpoints))
    rows = frame[frame["iteration"].isin(checkpoints)]
    per_space = space_means(rows)
    jobs = frame.drop_duplicates(["method", "task", "seed"])
    runs = jobs.groupby("method").agg(tasks=("task", "nunique"), runs=("seed", "size"))
    seeds_per = jobs.groupby(["method", "task"])["seed"].nunique().groupby("method")
    seeds = ", ".join(
        f"{m} {r.runs} runs ({r.tasks} tasks, {seeds_per.min()[m]}-{seeds_per.max()[m]} seeds each)"
        for m, r in runs.iterrows()
    )
    lines = [
        "# MPHD on held-out HPO-B search spaces (NToT)",
        "",
        f"Generated by `python benchmarks/mphd.py`. {len(frame['space'].unique())} held-out "
        f"spaces, {frame['task'].nunique()} tasks, budget {budget} (5 random "
        "initial points, then BO). Pool-based: a suggestion is evaluated at the nearest pool "
        "configuration (arms suffixed -pool: the acquisition's argmax over the task's pool "
        "configurations not yet evaluated, the paper's protocol; -pool-pi: PI with a target "
        "margin of 0.5 sd). Normalized regret = (max acc - best acc) / (max acc - min acc) of the "
        f"task's pool: a space's figure is the mean over its tasks of each task's mean over "
        f"seeds. {pretrain_note} Runs per method: {seeds}. Each ratio uses only the (task, seed) "
        "runs both methods ran.",
        "",
        "![regret](mphd.png)",
        "",
        *heldout,
        "### Mean normalized regret per held-out space",
        "",
    ]
    methods = sorted(frame["method"].unique())
    header = "| space | " + " | ".join(f"{m} t={t}" for m in methods for t in checkpoints) + " |"
    lines += [header, "|---|" + "---:|" * (len(methods) * len(checkpoints))]
    for space in sorted(per_space.index.get_level_values(0).unique()):
        cells = []
        for m in methods:
            for t in checkpoints:
                try:
                    cells.append(f"{per_space.loc[(space, m), t]:.3g}")
                except KeyError:
                    cells.append("")
        lines.append(f"| {space} | " + " | ".join(cells) + " |")
    for target, baseline in pairs:
        if target in methods and baseline in methods:
            lines += ratio_section(rows, target, baseline, checkpoints)
    if TARGET in methods and BASELINE in methods and HAND in methods:
        paired = space_means(paired_runs(rows, (TARGET, BASELINE, HAND)))
        mp, gp, hand = (paired.xs(m, level="method") for m in (TARGET, BASELINE, HAND))
        lines += ["", "### MPHD, the hand-specified Gammas and the default GP", ""]
        for t in checkpoints:
            lines.append(
                f"t = {t}: mean over spaces, MPHD {mp[t].mean():.4f}, hand-specified "
                f"{hand[t].mean():.4f}, default GP {gp[t].mean():.4f}.\n"
            )
    secs = frame.groupby("method")["seconds_suggest"].mean()
    lines.append(
        "\nSeconds per suggestion (mean): " + ", ".join(f"{m} {secs[m]:.3f}" for m in methods) + "."
    )
    text = "\n".join(lines) + "\n"
    _plot(frame, out / "mphd.png", budget)
    (out / "mphd.md").write_text(text)
    return text


def ratio_section(rows, target, baseline, checkpoints) -> list[str]:
    """The report's table of ``target``'s mean normalized regret over ``baseline``'s per space,
    on the (task, seed) runs both ran, with the count of spaces at <= 0.8x (issue 33's target)
    and the paired difference over spaces."""
    paired = space_means(paired_runs(rows, (target, baseline)))
    mine = paired.xs(target, level="method")
    base = paired.xs(baseline, level="method")
    ratio = mine / base  # 0 / 0 (both found a task's best everywhere): nan, not counted
    lines = [
        "",
        f"### {target} / {baseline} (ratio of mean normalized regret, paired runs)",
        "",
        "| space | " + " | ".join(f"t={t}" for t in checkpoints) + " |",
        "|---|" + "---:|" * len(checkpoints),
    ]
    for space, r in ratio.iterrows():
        lines.append(f"| {space} | " + " | ".join(f"{v:.2f}" for v in r) + " |")
    lines.append("")
    for t in checkpoints:
        diff = (mine[t] - base[t]).dropna()
        chance = chance_counts(rows[rows["iteration"] == t], target, baseline)
        lines.append(
            f"t = {t}: <= 0.8x on {int((ratio[t] <= 0.8).sum())} of {len(ratio)} spaces (by "
            f"chance, with the two arms' labels swapped at random per run: {chance.mean():.1f} "
            f"on average, {np.percentile(chance, 95):.0f} at the 95th percentile); mean over "
            f"spaces {mine[t].mean():.4f} vs {base[t].mean():.4f} (difference "
            f"{diff.mean():+.4f} +- {diff.std(ddof=1) / np.sqrt(len(diff)):.4f} s.e.).\n"
        )
    return lines


def chance_counts(rows, target, baseline, draws=1000, seed=0) -> np.ndarray:
    """How many spaces reach <= 0.8x when nothing differs: the paired (task, seed) runs of one
    checkpoint with ``target`` and ``baseline`` swapped at random per run, ``draws`` times (a
    permutation null for issue 33's count; means as :func:`space_means`)."""
    wide = paired_runs(rows, (target, baseline)).pivot_table(
        index=["space", "task", "seed"], columns="method", values="nregret"
    )
    spaces = wide.index.get_level_values("space")
    tasks = wide.index.droplevel("seed")
    task_id = tasks.factorize()[0]
    task_space = spaces.factorize()[0][np.unique(task_id, return_index=True)[1]]
    runs_per_task = np.bincount(task_id)
    tasks_per_space = np.bincount(task_space)

    def space_mean(values):
        per_task = np.bincount(task_id, values) / runs_per_task
        return np.bincount(task_space, per_task) / tasks_per_space

    a, b = wide[target].to_numpy(), wide[baseline].to_numpy()
    rng = np.random.default_rng(seed)
    counts = np.empty(draws)
    for k in range(draws):
        swap = rng.random(len(a)) < 0.5
        mine, base = space_mean(np.where(swap, b, a)), space_mean(np.where(swap, a, b))
        counts[k] = ((mine <= 0.8 * base) & (base > 0)).sum()
    return counts


def space_means(rows):
    """Mean normalized regret per (space, method) x iteration: each task's mean over its seeds,
    then the mean over the space's tasks (so a task run with more seeds does not weigh more)."""
    per_task = rows.groupby(["space", "task", "method", "iteration"])["nregret"].mean()
    return per_task.groupby(["space", "method", "iteration"]).mean().unstack()


def paired_runs(rows, methods):
    """The rows of ``methods`` restricted to the (task, seed) runs that all of them ran (the
    ones present in ``rows``)."""
    present = [m for m in methods if m in set(rows["method"])]
    rows = rows[rows["method"].isin(present)]
    counts = rows.groupby(["task", "seed"])["method"].nunique()
    keep = counts[counts == len(present)].index
    return rows.set_index(["task", "seed"]).loc[keep].reset_index()


def _plot(frame, path: Path, budget: int) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from headstart.benchmarks.report import draw_mean_curves

    fig, ax = plt.subplots(figsize=(6, 4))
    draw_mean_curves(ax, frame, "nregret", "mean normalized regret")
    ax.set_title("HPO-B, held-out spaces (NToT)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def heldout_table(rows) -> list[str]:
    """The held-out log-likelihood section of the report (issue 33, item 3)."""
    import pandas as pd

    frame = pd.DataFrame(rows)
    table = frame.pivot_table(index="space", columns=["points", "mode"], values="loglik")
    cols = sorted(table.columns, key=lambda c: (c[0], (*MODES, "oracle").index(c[1])))
    chosen = frame[frame["mode"] == "auto"].set_index(["space", "points"])
    lines = [
        "### Held-out log likelihood of each space's lengthscales",
        "",
        "Mean log Gamma density of a held-out space's step-1 lengthscales (fitted on that "
        "space's points) under the prior pre-trained on the other 14 spaces: the paper's network "
        "(`network`, headstart's default), one shared Gamma (`shared`) and `auto` (the network "
        "pulled toward the shared Gamma by the lambda that leave-one-space-out likelihood on the "
        "14 training spaces chose, or the shared Gamma), pre-trained on the given points per "
        "sub-dataset; `oracle` is an in-sample reference: the one Gamma that best fits the "
        "space's own lengthscales (headstart-mphd-oracle's prior). Every column scores the same "
        "lengthscales: step 1's on the most points. Higher is better.",
        "",
        "| space | " + " | ".join(f"{m} ({p} pts)" for p, m in cols) + " | auto chose |",
        "|---|" + "---:|" * len(cols) + "---|",
    ]
    for space, row in table.iterrows():
        picks = []
        for p in sorted({c[0] for c in cols}):
            pick = chosen.loc[(space, p)]
            lam = pick["lambda"]
            what = "shared" if pick["chose"] == "shared" else f"lambda={lam:g}"
            picks.append(f"{p}: {what}")
        cells = " | ".join(f"{row[c]:.2f}" for c in cols)
        lines.append(f"| {space} | {cells} | {', '.join(picks)} |")
    means = " | ".join(f"**{table[c].mean():.2f}**" for c in cols)
    lines += [f"| mean | {means} | |", ""]
    return lines


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--spaces", default="", help="comma-separated HPO-B space ids (default all)")
    p.add_argument(
        "--tasks-per-space", type=int, default=0, help="tasks per held-out space (0: all, 6-7)"
    )
    p.add_argument("--methods", default=METHODS)
    p.add_argument("--seeds", type=int, default=5)
    p.add_argument("--budget", type=int, default=100)
    p.add_argument("--n-points", type=int, default=N_POINTS, help="points per sub-dataset (step 1)")
    p.add_argument(
        "--before-points",
        type=int,
        default=BEFORE_POINTS,
        help="points per sub-dataset of the held-out likelihood's comparison priors (0: none)",
    )
    p.add_argument(
        "--compare",
        default=f"{TARGET}:{BASELINE}",
        help="comma-separated method:baseline pairs whose per-space ratios the report shows",
    )
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--out", type=Path, default=DOCS)
    p.add_argument(
        "--priors", type=Path, default=None, help="prior files' folder (default <out>/mphd_priors)"
    )
    p.add_argument("--report-only", action="store_true")
    args = p.parse_args(argv)
    from headstart.benchmarks.hpob import load_hpob
    from headstart.benchmarks.runner import pack_csv, run_benchmark, unpack_csv

    data = load_hpob()
    spaces = [s for s in args.spaces.split(",") if s] or sorted(data)
    args.out.mkdir(parents=True, exist_ok=True)
    prior_dir = args.priors or args.out / "mphd_priors"
    prior_dir.mkdir(parents=True, exist_ok=True)
    csv_path = unpack_csv(args.out / "mphd.csv")  # committed gzipped
    reference, kinds, step1 = step1_fits(data, prior_dir, args.n_points)
    note = (
        f"Pre-training step 1 on all {len(reference)} spaces ({args.n_points} points per "
        f"sub-dataset, {step1['seconds']} s on this machine; every task of a space one "
        "sub-dataset); each held-out space's prior is step 2 on the other 14 spaces' step-1 fits."
    )
    priors = {}
    for points in sorted({args.n_points, args.before_points} - {0}, reverse=True):
        fits = step1_fits(data, prior_dir, points)[0]
        priors[points] = {
            s: pretrain_priors(fits, kinds, s, prior_dir, points, oracle=points == args.n_points)
            for s in spaces
        }
    rows = heldout_loglik(reference, kinds, priors)
    import pandas as pd

    pd.DataFrame(rows).to_csv(args.out / "mphd_heldout.csv", index=False, float_format="%.5g")
    names = []
    for s in spaces:
        names += make_tasks(data, s, priors[args.n_points][s], args.tasks_per_space)
    if not args.report_only:
        methods = [m for m in args.methods.split(",") if m]
        run_benchmark(
            methods, names, range(args.seeds), args.budget, csv_path, workers=args.workers
        )
    pairs = tuple(tuple(pair.split(":", 1)) for pair in args.compare.split(",") if pair)
    if any(len(pair) != 2 for pair in pairs):
        p.error("--compare takes method:baseline pairs, e.g. headstart-mphd:headstart-gp-init5")
    text = report(csv_path, data, args.out, args.budget, note, heldout_table(rows), pairs)
    pack_csv(csv_path)
    sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
