r"""HeadstartSampler inside Optuna: transfer from earlier Optuna studies vs Optuna's TPE and GPSampler.

An Optuna user's setting: the HPOBench-MLP tables (8 OpenML datasets, 5 hyperparameters as
``trial.suggest_int`` grid indices, 30,000 configurations; objective 1 - validation accuracy,
:mod:`headstart.benchmarks.hpo_tables`). For each seed, every dataset is first tuned by an Optuna
study of 50 TPE trials, stored in one Optuna SQLite storage per seed (the "earlier studies"; seeded, kept in
``~/.cache/headstart/optuna_sampler/``).
Then each dataset is held out in turn and tuned again, for 50 trials, by

* ``headstart-scaml``: ``HeadstartSampler(method="scaml", transfer_from=from_optuna(URL, the
  other 7 studies))``;
* ``headstart-gp``: ``HeadstartSampler()`` (no transfer);
* ``optuna-tpe``: ``TPESampler(seed=...)``; ``optuna-gp``: ``GPSampler(seed=...)``;

each an ordinary ``optuna.create_study(sampler=...)`` on Optuna's in-memory storage, one after
the other in this process, torch pinned to one thread. Regret is the study's best value minus the
table's minimum; overhead per trial is the trial's duration (the table lookup takes microseconds,
so it is the sampler's time plus Optuna's bookkeeping).

Targets (issue 16): the sampler reaches TPE's 50-trial mean regret in at most 10 trials, and its
overhead per trial is at most GPSampler's.

Resumable (one CSV row per trial; finished runs are skipped). Writes ``<out>/optuna_sampler.csv``,
``.png`` and ``.md``.

Usage::

    python benchmarks/optuna_sampler.py                      # 10 seeds -> docs/benchmarks/
    python benchmarks/optuna_sampler.py --smoke              # 1 seed, 2 datasets, budget 6
    python benchmarks/optuna_sampler.py --report-only
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np

DOCS_DIR = Path(__file__).resolve().parent.parent / "docs" / "benchmarks"
SOURCES_DIR = Path.home() / ".cache" / "headstart" / "optuna_sampler"  # regenerated when missing
NAME = "optuna_sampler"
METHODS = ("headstart-scaml", "headstart-gp", "optuna-tpe", "optuna-gp")
# run with --methods; headstart-scaml-before31: ScaML's defaults before issue 31 (plateau rule
# off); headstart-scaml-copula: output_warp="copula" (issue 31's ninth candidate)
VARIANTS = (
    "headstart-warmstart",
    "headstart-scaml-cand",
    "headstart-scaml-before31",
    "headstart-scaml-copula",
)
FIELDS = ("dataset", "seed", "method", "trial", "value", "regret", "seconds")


def _objective(dataset: str):
    from headstart.benchmarks.hpo_tables import GRIDS, load_table

    table = load_table("mlp", dataset)
    names = list(GRIDS["mlp"])

    def objective(trial) -> float:
        index = tuple(trial.suggest_int(n, 0, len(GRIDS["mlp"][n]) - 1) for n in names)
        return float(table[index])

    return objective, float(table.min())


def _source_studies(url: str, seed: int, budget: int, datasets: list[str]) -> None:
    """One 50-trial TPE study per dataset: the earlier runs the new ones transfer from."""
    import optuna

    done = set(optuna.get_all_study_names(url))
    for dataset in datasets:
        if dataset in done:
            continue
        objective, _ = _objective(dataset)
        study = optuna.create_study(
            study_name=dataset, storage=url, sampler=optuna.samplers.TPESampler(seed=seed)
        )
        study.optimize(objective, n_trials=budget)


def _sampler(method: str, seed: int, url: str, sources: list[str]):
    import optuna

    from headstart.integrations.optuna import HeadstartSampler
    from headstart.sources import from_optuna

    if method == "headstart-scaml":
        return HeadstartSampler("scaml", transfer_from=from_optuna(url, sources), seed=seed)
    if method == "headstart-scaml-before31":
        return HeadstartSampler(
            "scaml", transfer_from=from_optuna(url, sources), seed=seed, plateau_rule=False
        )
    if method == "headstart-scaml-copula":  # each study's values by their normal scores
        return HeadstartSampler(
            "scaml", transfer_from=from_optuna(url, sources), seed=seed, output_warp="copula"
        )
    if method == "headstart-warmstart":  # the sources' best configurations first, then GP-BO
        return HeadstartSampler("warmstart", transfer_from=from_optuna(url, sources), seed=seed)
    if method == "headstart-scaml-cand":  # ScaML-GP starting at the best of the sources' winners
        return HeadstartSampler(
            "scaml", transfer_from=from_optuna(url, sources), seed=seed, first_trial="candidates"
        )
    if method == "headstart-gp":
        return HeadstartSampler(seed=seed)
    if method == "optuna-tpe":
        return optuna.samplers.TPESampler(seed=seed)
    if method == "optuna-gp":
        return optuna.samplers.GPSampler(seed=seed)
    raise ValueError(method)


def run(out: Path, seeds: list[int], datasets: list[str], methods: list[str], budget: int) -> None:
    import optuna
    import torch
    from rich.progress import Progress

    from headstart.benchmarks.csvlog import append_row, read_rows
    from headstart.benchmarks.hpo_tables import DATASETS

    torch.set_num_threads(1)
    SOURCES_DIR.mkdir(parents=True, exist_ok=True)
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    path = out / f"{NAME}.csv"
    finished = {(r["dataset"], r["seed"], r["method"]) for r in read_rows(path)}
    every = list(DATASETS["mlp"].values())
    jobs = [
        (s, d, m)
        for s in seeds
        for d in datasets
        for m in methods
        if (d, str(s), m) not in finished
    ]
    with Progress() as progress:
        bar = progress.add_task("optuna_sampler", total=len(jobs))
        for seed, dataset, method in jobs:
            url = f"sqlite:///{SOURCES_DIR / f'sources_seed{seed}.db'}"
            _source_studies(url, seed, 50, every)
            objective, best = _objective(dataset)
            sources = [d for d in every if d != dataset]
            study = optuna.create_study(sampler=_sampler(method, seed, url, sources))
            t0 = time.perf_counter()
            study.optimize(objective, n_trials=budget)
            elapsed = time.perf_counter() - t0
            incumbent = np.inf
            rows = []
            for t in study.trials:
                incumbent = min(incumbent, t.value)
                rows.append(
                    {
                        "dataset": dataset,
                        "seed": seed,
                        "method": method,
                        "trial": t.number + 1,
                        "value": t.value,
                        "regret": incumbent - best,
                        "seconds": t.duration.total_seconds(),
                    }
                )
            for row in rows:  # the run's rows land together: a resumed run redoes it whole
                append_row(path, FIELDS, row)
            progress.update(
                bar, advance=1, description=f"{method} {dataset} s{seed} {elapsed:.0f}s"
            )


def report(out: Path) -> str:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import pandas as pd

    from headstart.benchmarks.report import draw_mean_curves

    frame = pd.read_csv(out / f"{NAME}.csv")
    budget = int(frame.trial.max())
    curve = frame.groupby(["method", "dataset", "trial"]).regret.mean()
    n_seeds = frame.groupby(["method", "dataset"]).seed.nunique()
    methods = [m for m in (*METHODS, *VARIANTS) if m in set(frame.method)]
    datasets = sorted(set(frame.dataset))
    lines = [
        "# HeadstartSampler in Optuna: transfer from earlier Optuna studies (HPOBench-MLP)",
        "",
        "Generated by `python benchmarks/optuna_sampler.py`. Each dataset held out in turn; "
        "the sources are 50-trial TPE studies of the other 7 datasets in an Optuna SQLite "
        f"storage. Budget {budget}. Seeds per (method, dataset): "
        f"{int(n_seeds.min())}-{int(n_seeds.max())}. Regret: best 1 - val. accuracy minus the "
        "table's minimum, mean over seeds.",
        "",
        "## Trials headstart-scaml needs to reach TPE's regret at trial 50",
        "",
        "| dataset | TPE regret @50 | scaml regret @10 | first trial scaml <= TPE@50 |",
        "|---|---:|---:|---:|",
    ]
    hits = []
    for d in datasets:
        if ("optuna-tpe", d) not in n_seeds.index or ("headstart-scaml", d) not in n_seeds.index:
            continue
        tpe_final = curve["optuna-tpe", d].iloc[-1]
        scaml = curve["headstart-scaml", d]
        reached = scaml.index[scaml.values <= tpe_final]
        first = int(reached[0]) if len(reached) else None
        hits.append(first)
        at10 = scaml.get(min(10, budget), np.nan)
        lines.append(
            f"| {d} | {tpe_final:.4f} | {at10:.4f} | {first if first is not None else 'never'} |"
        )
    ok = sum(h is not None and h <= 10 for h in hits)
    lines += ["", f"Reached within 10 trials on {ok} of {len(hits)} datasets.", ""]
    lines += [
        "## Mean regret at trials 1, 5, 10, 25, 50 (over datasets and seeds)",
        "",
        "| method | " + " | ".join(f"t={t}" for t in (1, 5, 10, 25, 50) if t <= budget) + " |",
        "|---|" + "---:|" * len([t for t in (1, 5, 10, 25, 50) if t <= budget]),
    ]
    overall = frame.groupby(["method", "trial"]).regret.mean()
    for m in methods:
        cells = [f"{overall[m, t]:.4f}" for t in (1, 5, 10, 25, 50) if t <= budget]
        lines.append(f"| {m} | " + " | ".join(cells) + " |")
    model_based = frame[frame.trial > 10]  # after GPSampler's 10 random start-up trials
    seconds = (model_based if len(model_based) else frame).groupby("method").seconds.median()
    lines += [
        "",
        "## Overhead per trial (median seconds over trials 11-50, where every GP sampler "
        "models; ratio to GPSampler)",
        "",
        "| method | median s / trial | ratio to optuna-gp |",
        "|---|---:|---:|",
    ]
    for m in methods:
        ratio = seconds[m] / seconds["optuna-gp"] if "optuna-gp" in seconds else np.nan
        lines.append(f"| {m} | {seconds[m]:.4f} | {ratio:.2f} |")
    text = "\n".join(lines) + "\n"
    (out / f"{NAME}.md").write_text(text)

    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    draw_mean_curves(axes[0], frame, "regret", "mean regret (8 held-out datasets)", x="trial")
    draw_mean_curves(
        axes[1], frame, "seconds", "median seconds per trial", x="trial", stat="median"
    )
    fig.tight_layout()
    fig.savefig(out / f"{NAME}.png", dpi=110)
    plt.close(fig)
    return text


def main() -> None:
    from headstart.benchmarks.hpo_tables import DATASETS

    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--seeds", type=int, default=10)
    p.add_argument("--budget", type=int, default=50)
    p.add_argument("--datasets", default=None, help="Comma-separated MLP datasets (all 8).")
    p.add_argument("--methods", default=",".join(METHODS))
    p.add_argument("--out", type=Path, default=DOCS_DIR)
    p.add_argument("--smoke", action="store_true", help="1 seed, 2 datasets, budget 6, temp dir.")
    p.add_argument("--report-only", action="store_true")
    args = p.parse_args()
    datasets = args.datasets.split(",") if args.datasets else list(DATASETS["mlp"].values())
    seeds, budget, out = list(range(args.seeds)), args.budget, args.out
    if args.smoke:
        seeds, budget, datasets = [0], 6, datasets[:2]
        out = Path(tempfile.mkdtemp(prefix="optuna_sampler_"))
    out.mkdir(parents=True, exist_ok=True)
    if not args.report_only:
        run(out, seeds, datasets, args.methods.split(","), budget)
    print(report(out))


if __name__ == "__main__":
    main()
