r"""What the earlier Optuna studies can give a new study in 10 trials (issue 31's sampler target).

Issue 31 asks ``HeadstartSampler("scaml")`` to reach TPE's 50-trial mean regret within 10 trials
on at least 4 of the 8 HPOBench-MLP datasets of ``benchmarks/optuna_sampler.py``. There the
sources are 50-trial TPE studies of the other 7 datasets. This script measures how far the
sources' own contents go, with four reference rules:

* ``winners-7``: evaluate every source study's best configuration on the held-out dataset (7
  trials) and keep the best. No rule that evaluates only source winners does better, in any
  order, at trial 7.
* ``pooled-top-10``: the 10 distinct configurations with the best within-study rank among the
  source trials (ties by value), evaluated on the held-out dataset (10 trials): the sources'
  consensus, at the issue's budget, without adapting to what the held-out dataset returns.
* ``source-best``: the best of all 350 source trials on the held-out dataset, known only in
  hindsight: what the source trials contain. The one true oracle here.
* ``tables-top-10``: the 10 configurations (of all 30,000) with the best mean rank over the other
  7 datasets' *full tables*: far more than the sources hold, the consensus of perfect sources,
  again without adapting.

A sampler that adapts to the held-out dataset's values can beat the non-adaptive rules (ScaML-GP
does on some datasets); they show how far the sources' consensus alone goes.

Each is averaged over the same seeds' source studies as ``optuna_sampler.py`` (the same cached
SQLite storages) and compared with TPE's mean 50-trial regret from its committed CSV.

Usage::

    python benchmarks/sampler_source_bound.py   # docs/benchmarks/sampler_source_bound.{csv,md}
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

DOCS = Path(__file__).resolve().parent.parent / "docs" / "benchmarks"
RULES = ("winners-7", "pooled-top-10", "source-best", "tables-top-10")
FIELDS = ("dataset", "seed", "rule", "trials", "regret")


def _source_trials(url: str, names: list[str], dataset: str) -> list[tuple[tuple, float]]:
    """``(grid index, value)`` of the finished trials of the source study ``dataset``."""
    import optuna

    study = optuna.load_study(study_name=dataset, storage=url)
    done = [t for t in study.trials if t.value is not None]
    return [(tuple(t.params[n] for n in names), float(t.value)) for t in done]


def _pooled(studies: list[list[tuple[tuple, float]]]) -> list[tuple[int, float, tuple]]:
    """``(rank within its study, value, grid index)`` of every source trial, best rank first (ties
    by value), each configuration once (at its best rank)."""
    pooled = []
    for trials in studies:
        ranked = sorted(trials, key=lambda tv: tv[1])
        pooled += [(rank, value, index) for rank, (index, value) in enumerate(ranked)]
    pooled.sort(key=lambda r: (r[0], r[1]))
    seen: set[tuple] = set()
    return [r for r in pooled if not (r[2] in seen or seen.add(r[2]))]


def _tables_consensus(tables: dict[str, np.ndarray], held_out: str, k: int) -> list[int]:
    """Flat indices of the ``k`` configurations with the best mean rank over the other tables."""
    from scipy.stats import rankdata

    ranks = [rankdata(t.ravel()) for d, t in tables.items() if d != held_out]
    return list(np.argsort(np.mean(ranks, axis=0), kind="stable")[:k])


def _rules(table: np.ndarray, pooled: list[tuple], consensus: list[int]) -> dict[str, tuple]:
    """Per rule, ``(trials it spends, best regret it finds on table)``."""

    def regret(index) -> float:
        return float(table[index] - table.min())

    return {
        "winners-7": (7, min(regret(p[2]) for p in pooled if p[0] == 0)),  # a shared one: once
        "pooled-top-10": (10, min(regret(p[2]) for p in pooled[:10])),
        "source-best": (len(pooled), min(regret(p[2]) for p in pooled)),
        "tables-top-10": (10, min(float(table.flat[i] - table.min()) for i in consensus)),
    }


def bound_rows(
    seeds: list[int], datasets: list[str] | None = None, source_budget: int = 50
) -> list[dict]:
    """One row per (held-out dataset, seed, rule): the best regret the rule reaches, from the
    source studies of ``source_budget`` TPE trials (``optuna_sampler.py``'s are 50)."""
    import optuna

    import optuna_sampler as osb
    from headstart.benchmarks.hpo_tables import DATASETS, GRIDS, load_table

    optuna.logging.set_verbosity(optuna.logging.ERROR)
    every = list(DATASETS["mlp"].values())
    names = list(GRIDS["mlp"])
    tables = {d: load_table("mlp", d) for d in every}
    rows = []
    osb.SOURCES_DIR.mkdir(parents=True, exist_ok=True)
    for seed in seeds:
        url = f"sqlite:///{osb.SOURCES_DIR / f'sources_seed{seed}.db'}"
        osb._source_studies(url, seed, source_budget, every)
        trials = {d: _source_trials(url, names, d) for d in every}
        for held_out in datasets or every:
            pooled = _pooled([trials[d] for d in every if d != held_out])
            consensus = _tables_consensus(tables, held_out, 10)
            for rule, (n, value) in _rules(tables[held_out], pooled, consensus).items():
                rows.append(
                    {"dataset": held_out, "seed": seed, "rule": rule, "trials": n, "regret": value}
                )
    return rows


def report(rows: list[dict], tpe_csv: Path) -> str:
    """Markdown: per dataset, TPE's mean 50-trial regret and each rule's mean regret."""
    import pandas as pd

    frame = pd.DataFrame(rows)
    runs = pd.read_csv(tpe_csv)
    tpe = runs[runs.method == "optuna-tpe"]
    tpe50 = tpe[tpe.trial == tpe.trial.max()].groupby("dataset").regret.mean()
    scaml = runs[(runs.method == "headstart-scaml") & (runs.trial == 10)]
    scaml10 = scaml.groupby("dataset").regret.mean()
    mean = frame.groupby(["dataset", "rule"]).regret.mean().unstack()
    seeds = sorted(set(frame.seed))
    lines = [
        "# What the earlier studies can give in 10 trials (HPOBench-MLP, issue 31)",
        "",
        "Generated by `python benchmarks/sampler_source_bound.py`. Sources: the 50-trial TPE "
        "studies of `optuna_sampler.py` (the other 7 datasets, the same seeds' storages). "
        f"Seeds {seeds[0]}-{seeds[-1]}. Mean regret over seeds; TPE's at trial 50 and "
        "`headstart-scaml`'s at trial 10 from `optuna_sampler.csv`. **Bold**: at or below TPE's.",
        "",
        "| dataset | TPE @50 | scaml @10 | " + " | ".join(RULES) + " |",
        "|---|---:|---:|" + "---:|" * len(RULES),
    ]
    hits = dict.fromkeys(RULES, 0)
    for d in mean.index:
        cells = []
        for rule in RULES:
            value = mean.loc[d, rule]
            below = value <= tpe50.get(d, np.nan)
            hits[rule] += bool(below)
            cells.append(f"**{value:.4f}**" if below else f"{value:.4f}")
        lines.append(
            f"| {d} | {tpe50.get(d, np.nan):.4f} | {scaml10.get(d, np.nan):.4f} | "
            + " | ".join(cells)
            + " |"
        )
    trials = frame.groupby("rule").trials.max()
    lines += [
        "| datasets at or below TPE @50 | | | "
        + " | ".join(f"{hits[r]} of {len(mean)}" for r in RULES)
        + " |",
        "| trials spent | 50 | 10 | " + " | ".join(str(trials[r]) for r in RULES) + " |",
        "",
    ]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--seeds", type=int, default=10, help="the source storages of seeds 0..N-1")
    p.add_argument("--datasets", default=None, help="comma-separated held-out datasets (all 8)")
    p.add_argument("--runs", type=Path, default=DOCS / "optuna_sampler.csv",
                   help="optuna_sampler.py's CSV (TPE's and ScaML's regrets)")  # fmt: skip
    p.add_argument("--out", type=Path, default=DOCS, help="folder of the CSV and the report")
    args = p.parse_args(argv)
    datasets = args.datasets.split(",") if args.datasets else None
    rows = bound_rows(list(range(args.seeds)), datasets)
    args.out.mkdir(parents=True, exist_ok=True)
    from headstart.benchmarks.csvlog import write_rows

    write_rows(args.out / "sampler_source_bound.csv", FIELDS, rows)
    text = report(rows, args.runs)
    (args.out / "sampler_source_bound.md").write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
