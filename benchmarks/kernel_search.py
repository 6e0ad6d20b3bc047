r"""BOSOT paper (Bitzer et al., NeurIPS 2022), Fig. 1 and Tables 2-3: kernel search on real data.

Runs BOSOT, greedy compositional kernel search (Duvenaud et al. 2013) and random search over the
grammar at equal oracle counts on Airline, Mauna Loa CO2, UCI Airfoil, Powerplant (CCPP) and
Concrete (:mod:`headstart.benchmarks.kernel_datasets`; spaces and EA steps as in the paper), and
reports the best log evidence / N against the number of oracle calls, the test RMSE / NLL of each
run's final kernel, and BOSOT's acquisition time as a share of its oracle time.

All methods of a data set share one oracle cache (a JSON-lines file next to the CSV): the oracle
is a deterministic function of the expression, so a kernel that two runs score is fitted once,
and its recorded oracle time is the time of that one fit.

Resumable: finished (data set, method, seed) jobs are skipped when run again.

Usage::

    python benchmarks/kernel_search.py --workers 2    # 5 seeds, budget 50 -> docs/benchmarks/
    python benchmarks/kernel_search.py --datasets airline --seeds 5-9
    python benchmarks/kernel_search.py --report-only
    python benchmarks/kernel_search.py --smoke                      # synthetic, tiny, temp dir
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import tempfile
import time
import warnings
from collections.abc import Iterator, MutableMapping
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path

import numpy as np

DOCS_DIR = Path(__file__).resolve().parent.parent / "docs" / "benchmarks"
DATASETS = "airline,mauna-loa,airfoil,ccpp,concrete"
METHODS = ("bosot", "bosot-paper", "bosot-ea", "bosot-cost", "greedy", "random")
KNOWN_METHODS = "bosot,greedy,bosot-paper,bosot-ea,bosot-cost"
CHECKPOINTS = (20, 50)
COLORS = {
    "bosot": "C0",
    "greedy": "C1",
    "random": "C2",
    "bosot-paper": "C3",
    "bosot-cost": "C4",
    "bosot-ea": "C5",
}
CURVE_COLUMNS = ["dataset", "method", "seed", "call", "expression", "score", "best",
                 "oracle_seconds", "acquisition_seconds", "phase"]  # fmt: skip
FINAL_COLUMNS = ["dataset", "method", "seed", "calls", "best_expression", "best_score",
                 "test_rmse", "test_nll", "oracle_seconds", "acquisition_seconds"]  # fmt: skip


class JsonlCache(MutableMapping):
    """``str(tree) -> OracleResult`` backed by an append-only JSON-lines file (no pickle)."""

    def __init__(self, path: Path) -> None:
        from headstart.kernels.oracle import OracleResult

        self.path, self._data = path, {}
        if path.exists():
            for line in path.read_text().splitlines():
                try:
                    r = OracleResult.from_json(json.loads(line))
                except (ValueError, TypeError, KeyError):
                    continue  # a line cut by a kill; the kernel is simply scored again
                self._data[r.expression] = r

    def __getitem__(self, key):
        return self._data[key]

    def __setitem__(self, key, value) -> None:
        self._data[key] = value
        with self.path.open("a") as fh:
            fh.write(json.dumps(value.to_json()) + "\n")

    def __delitem__(self, key) -> None:
        raise NotImplementedError

    def __iter__(self) -> Iterator:
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)


def test_metrics(result, data) -> tuple[float, float]:
    """Test RMSE and mean predictive NLL (scaled units) of an oracle result's MAP model."""
    from headstart.kernels.model import TreeGP

    gp = TreeGP(result.tree, np.array(result.values[:-1]), result.noise, data.X_train, data.y_train)
    mean, var = gp.posterior(data.X_test)
    var = var + gp.noise
    rmse = float(np.sqrt(np.mean((mean - data.y_test) ** 2)))
    nll = float(np.mean(0.5 * np.log(2 * np.pi * var) + 0.5 * (data.y_test - mean) ** 2 / var))
    return rmse, nll


def run_job(dataset: str, method: str, seed: int, budget: int, restarts: int, n_train, cache_dir):
    """One search; returns (curve rows, final row)."""
    import torch

    from headstart.benchmarks.kernel_datasets import load_dataset
    from headstart.kernels.grammar import KernelGrammar
    from headstart.kernels.oracle import Oracle
    from headstart.kernels.strategies import make_strategy

    torch.set_num_threads(1)
    data = load_dataset(dataset, n_train)
    cache = JsonlCache(Path(cache_dir) / f"{dataset}-n{len(data.y_train)}-r{restarts}.jsonl")
    oracle = Oracle(data.X_train, data.y_train, restarts=restarts, cache=cache)
    grammar = KernelGrammar(data.X_train.shape[1], data.space)
    strategy = make_strategy(method, data.ea_steps)
    rng = np.random.default_rng(10_000 * seed + 17)
    history = strategy.run(grammar, oracle, budget, rng)
    rows, best = [], -math.inf
    for i, e in enumerate(history, 1):
        best = max(best, e.result.score)
        rows.append([dataset, method, seed, i, e.result.expression, e.result.score, best,
                     e.result.seconds, e.acquisition_seconds, e.phase])  # fmt: skip
    top = max((e.result for e in history), key=lambda r: r.score)
    rmse, nll = test_metrics(top, data)
    final = [dataset, method, seed, len(history), top.expression, top.score, rmse, nll,
             sum(e.result.seconds for e in history), sum(e.acquisition_seconds for e in history)]  # fmt: skip
    return rows, final


def _run_jobs(jobs, budget, restarts, n_for, cache_dir, workers):
    """Yield ``(job, result)`` as jobs finish: inline for one worker, else in a process pool."""
    if workers <= 1:
        for d, m, s in jobs:
            yield (d, m, s), run_job(d, m, s, budget, restarts, n_for(d), cache_dir)
        return
    with ProcessPoolExecutor(workers) as pool:
        futures = {
            pool.submit(run_job, d, m, s, budget, restarts, n_for(d), cache_dir): (d, m, s)
            for d, m, s in jobs
        }
        for fut in as_completed(futures):
            yield futures[fut], fut.result()


def _append(path: Path, columns: list[str], rows: list[list]) -> None:
    import pandas as pd

    frame = pd.DataFrame(rows, columns=columns)
    frame.to_csv(path, mode="a", header=not path.exists(), index=False)


def _parse_seeds(text: str) -> list[int]:
    from headstart.bench_cli import parse_seeds

    return parse_seeds(text)


def _curves(frame, budget: int) -> dict:
    """``{(dataset, method): seeds x budget`` best-so-far matrix, forward-filled}``."""
    out = {}
    for (dataset, method), grp in frame.groupby(["dataset", "method"]):
        mats = []
        for _, run in grp.groupby("seed"):
            best = run.sort_values("call")["best"].to_numpy()
            mats.append(np.concatenate([best, np.full(budget - len(best), best[-1])])[:budget])
        out[dataset, method] = np.array(mats)
    return out


def _time_curves(frame) -> dict:
    """Median and quartiles of the best score against cumulative oracle + acquisition seconds.

    The time axis ends where the shortest run of the data set ends (as in the paper's Fig. 1).
    """
    out = {}
    for dataset, by_data in frame.groupby("dataset"):
        runs = {}
        for key, run in by_data.groupby(["method", "seed"]):
            run = run.sort_values("call")
            t = np.cumsum(run.oracle_seconds.to_numpy() + run.acquisition_seconds.to_numpy())
            runs[key] = (t, run.best.to_numpy())
        end = min(t[-1] for t, _ in runs.values())
        start = max(min(t[0] for t, _ in runs.values()), 1e-3)
        grid = np.geomspace(start, max(end, start * 1.01), 60)
        for method in by_data.method.unique():
            rows = []
            for (m, _), (t, best) in runs.items():
                if m == method:
                    idx = np.searchsorted(t, grid, side="right") - 1
                    rows.append(np.where(idx >= 0, best[np.maximum(idx, 0)], np.nan))
            with warnings.catch_warnings():  # before a run's first call its best is undefined
                warnings.simplefilter("ignore", RuntimeWarning)
                q = np.nanpercentile(np.array(rows), [25, 50, 75], axis=0)
            out[dataset, method] = (grid, *q)
    return out


def meta_regression(cache_dir: Path, seeds: int = 5) -> list[str]:
    """Paper Table 1 on the scored kernels of the cache: RMSE of the SOT meta-GP's predicted
    log evidence / N on a random half, trained on the other half, against the mean predictor."""
    from headstart.kernels.metagp import SOTMetaGP
    from headstart.kernels.oracle import OracleResult

    rows = []
    for path in sorted(cache_dir.glob("*.jsonl")):
        results = []
        for line in path.read_text().splitlines():
            try:
                r = OracleResult.from_json(json.loads(line))
            except (ValueError, TypeError, KeyError):
                continue
            if not r.failed:
                results.append(r)
        if len(results) < 20:
            continue
        n_dims = max(leaf.dim for r in results for leaf in _leaves(r.tree)) + 1
        sot, mean = [], []
        for seed in range(seeds):
            order = np.random.default_rng(seed).permutation(len(results))
            half = len(order) // 2
            train, test = [results[i] for i in order[:half]], [results[i] for i in order[half:]]
            g = np.array([r.score for r in train])
            truth = np.array([r.score for r in test])
            model = SOTMetaGP.fit([r.tree for r in train], g, n_dims)
            pred = model.predict([r.tree for r in test])[0]
            sot.append(np.sqrt(np.mean((pred - truth) ** 2)))
            mean.append(np.sqrt(np.mean((g.mean() - truth) ** 2)))
        name = path.stem.split("-n")[0]
        rows.append(
            f"| {name} | {len(results)} | {np.mean(sot):.4f} ± {np.std(sot):.4f} | "
            f"{np.mean(mean):.4f} ± {np.std(mean):.4f} | {np.mean(sot) / np.mean(mean):.2f} |"
        )
    if not rows:
        return []
    return [
        "## SOT meta-regression (paper Table 1)\n",
        "RMSE of the meta-GP's predicted log evidence / N for every kernel the runs scored, "
        f"trained on a random half and tested on the other ({seeds} splits; mean ± std), "
        "against predicting the training mean.\n",
        "| data set | kernels | SOT meta-GP RMSE | mean predictor RMSE | ratio |",
        "|---|---|---|---|---|",
        *rows,
        "",
    ]


def _leaves(tree):
    from headstart.kernels.grammar import leaves

    return leaves(tree)


def write_report(out: Path, budget: int, command: str) -> str:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import pandas as pd

    curves_frame = pd.read_csv(out / "kernel_search.csv")
    final = pd.read_csv(out / "kernel_search_final.csv")
    curves = _curves(curves_frame, budget)
    datasets = list(dict.fromkeys(curves_frame["dataset"]))
    fig, axes = plt.subplots(2, len(datasets), figsize=(4.2 * len(datasets), 6.8), squeeze=False)
    timed = _time_curves(curves_frame)
    for col, dataset in enumerate(datasets):
        ax, ax_t = axes[0, col], axes[1, col]
        for method in METHODS:
            if (dataset, method) not in curves:
                continue
            m = curves[dataset, method]
            calls = np.arange(1, m.shape[1] + 1)
            q25, med, q75 = np.percentile(m, [25, 50, 75], axis=0)
            ax.plot(calls, med, color=COLORS[method], label=f"{method} ({len(m)})")
            ax.fill_between(calls, q25, q75, color=COLORS[method], alpha=0.2)
            grid, tq25, tmed, tq75 = timed[dataset, method]
            ax_t.plot(grid, tmed, color=COLORS[method], label=method)
            ax_t.fill_between(grid, tq25, tq75, color=COLORS[method], alpha=0.2)
        ax.set_title(dataset)
        ax.set_xlabel("oracle calls")
        ax.set_ylabel("best log evidence / N")
        ax.legend(fontsize=8)
        ax_t.set_xlabel("CPU seconds (oracle + acquisition)")
        ax_t.set_ylabel("best log evidence / N")
    fig.tight_layout()
    fig.savefig(out / "kernel_search.png", dpi=110)
    plt.close(fig)

    lines = [
        "# Kernel search: BOSOT vs greedy vs random at equal oracle counts\n",
        f"Generated by `{command}). Best log evidence / N (higher is better) after k oracle calls, "
        "median over seeds [quartiles]; `final` is the mean ± standard error. Greedy stops when a "
        "stage brings no improvement and keeps its best value after that. Test RMSE / NLL are "
        "those of each run's best kernel at its MAP hyperparameters on up to 400 held-out points "
        "(scaled units). `acq/oracle` is BOSOT's total acquisition time (meta-GP fit + EA) over "
        "its total oracle time (paper Table 3: 0.21-0.83). The bottom row of the plot shows the best "
        "score against cumulative CPU time, up to the end of the data set's shortest run.\n",
        "![best evidence vs oracle calls](kernel_search.png)\n",
    ]
    checkpoints = sorted({c for c in (10, 20, budget // 2, budget) if c <= budget})
    head = "| data set | method | seeds | " + " | ".join(f"@{c}" for c in checkpoints)
    lines.append(head + " | final | test RMSE | test NLL | acq/oracle |")
    lines.append("|" + "---|" * (len(checkpoints) + 7))
    verdicts = []
    for dataset in datasets:
        for method in METHODS:
            if (dataset, method) not in curves:
                continue
            m = curves[dataset, method]
            cells = []
            for c in checkpoints:
                q25, med, q75 = np.percentile(m[:, c - 1], [25, 50, 75])
                cells.append(f"{med:.4f} [{q25:.3f}, {q75:.3f}]")
            f = m[:, -1]
            se = f.std(ddof=1) / math.sqrt(len(f)) if len(f) > 1 else float("nan")
            fin = final[(final.dataset == dataset) & (final.method == method)]
            ratio = fin.acquisition_seconds.sum() / max(fin.oracle_seconds.sum(), 1e-12)
            lines.append(
                f"| {dataset} | {method} | {len(m)} | " + " | ".join(cells)
                + f" | {f.mean():.4f} ± {se:.4f} | {fin.test_rmse.mean():.3f} | "
                f"{fin.test_nll.mean():.3f} | {ratio:.3f} |"
            )  # fmt: skip
        if (dataset, "bosot") in curves and (dataset, "greedy") in curves:
            b, g = curves[dataset, "bosot"], curves[dataset, "greedy"]
            k = min(len(b), len(g))
            at_or_above = np.mean(np.median(b[:k], 0) >= np.median(g[:k], 0) - 1e-9)
            verdicts.append(
                f"- {dataset}: BOSOT's median ≥ greedy's at {100 * at_or_above:.0f}% of oracle "
                f"counts; final median {np.median(b[:, -1]):.4f} vs {np.median(g[:, -1]):.4f}"
                f" ({'at or above' if np.median(b[:, -1]) >= np.median(g[:, -1]) else 'below'})."
            )
    lines += ["", "## BOSOT vs greedy", "", *verdicts, ""]
    lines += proposal_sizes(curves_frame)
    lines += meta_regression(out / "kernel_search_cache")
    bos = final[final.method == "bosot"]
    if len(bos):
        lines.append("## Best kernels of BOSOT (up to two per data set, with their seed counts)\n")
        for dataset, grp in bos.groupby("dataset", sort=False):
            top = grp.best_expression.value_counts().head(2)
            kinds = "; ".join(f"`{e}` ({n}x)" for e, n in top.items())
            lines.append(f"- {dataset}: {kinds}")
    text = "\n".join(lines) + "\n"
    (out / "kernel_search.md").write_text(text)
    return text


def proposal_sizes(frame) -> list[str]:
    """What each method spends its oracle calls on: kernel size (hyperparameters, noise
    excluded), the share of redundant forms (ones :func:`~headstart.kernels.simplify.simplify`
    makes smaller), and oracle seconds per call, over all calls and after call 25."""
    from headstart.kernels.grammar import parse
    from headstart.kernels.simplify import simplify, size

    trees = [parse(e) for e in frame.expression]
    frame = frame.assign(
        size=[size(t) for t in trees],
        redundant=[size(simplify(t)) < size(t) for t in trees],
    )
    rows = []
    for method, grp in frame.groupby("method", sort=False):
        late = grp[grp.call > 25]
        rows.append(
            f"| {method} | {grp['size'].mean():.1f} | {late['size'].mean():.1f} | "
            f"{100 * grp.redundant.mean():.0f}% | {100 * late.redundant.mean():.0f}% | "
            f"{grp.oracle_seconds.mean():.2f} |"
        )
    return [
        "## What the oracle calls were spent on\n",
        "| method | hyperparameters per kernel | after call 25 | redundant forms | after call 25 "
        "| oracle s / call |",
        "|---|---|---|---|---|---|",
        *rows,
        "",
    ]


def truths(out: Path, datasets: list[str], restarts: int) -> dict[str, float]:
    """The oracle's score of each known-structure set's generating kernel (cached in JSON)."""
    from headstart.benchmarks.kernel_structures import STRUCTURES, truth_score

    path = out / "truths.json"
    known = json.loads(path.read_text()) if path.exists() else {}
    for name in datasets:
        key = f"{name}-r{restarts}"
        if key not in known:
            known[key] = truth_score(STRUCTURES[name], restarts)
            path.write_text(json.dumps(known, indent=1, sort_keys=True))
    return {name: known[f"{name}-r{restarts}"] for name in datasets}


def write_known_report(out: Path, budget: int, restarts: int, command: str) -> str:
    """Known-structure suite: best score as a fraction of the truth's, vs calls and vs time."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import pandas as pd

    from headstart.benchmarks.kernel_structures import STRUCTURES, fraction

    frame = pd.read_csv(out / "kernel_search.csv")
    datasets = [d for d in STRUCTURES if d in set(frame.dataset)]
    truth = truths(out, datasets, restarts)
    frame["fraction"] = [
        fraction(b, truth[d]) for d, b in zip(frame.dataset, frame.best, strict=True)
    ]
    frame["seconds"] = frame.oracle_seconds + frame.acquisition_seconds
    frame["elapsed"] = frame.groupby(["dataset", "method", "seed"]).seconds.cumsum()
    methods = [m for m in METHODS if m in set(frame.method)]
    checkpoints = sorted({c for c in CHECKPOINTS if c <= budget} | {budget})

    def at(run, call: int, column: str) -> float:
        """A run's value after ``call`` calls (its last value if it stopped earlier)."""
        run = run[run.call <= call]
        return float(run[column].iloc[-1])

    rows = []
    for (dataset, method, seed), run in frame.groupby(["dataset", "method", "seed"]):
        run = run.sort_values("call")
        for c in checkpoints:
            rows.append({"dataset": dataset, "method": method, "seed": seed, "calls": c,
                         "fraction": at(run, c, "fraction"), "seconds": at(run, c, "elapsed")})  # fmt: skip
    cp = pd.DataFrame(rows)
    med = cp.groupby(["dataset", "method", "calls"])[["fraction", "seconds"]].median()
    seeds = frame.groupby(["dataset", "method"]).seed.nunique()

    fig, axes = plt.subplots(2, len(datasets), figsize=(3.2 * len(datasets), 6), squeeze=False)
    for col, dataset in enumerate(datasets):
        for method in methods:
            runs = frame[(frame.dataset == dataset) & (frame.method == method)]
            if runs.empty:
                continue
            curves = []
            for _, run in runs.groupby("seed"):
                f = run.sort_values("call").fraction.to_numpy()
                curves.append(np.concatenate([f, np.full(budget - len(f), f[-1])])[:budget])
            m = np.median(curves, axis=0)
            axes[0, col].plot(np.arange(1, budget + 1), m, color=COLORS[method], label=method)
            t = [run.sort_values("call") for _, run in runs.groupby("seed")]
            grid = np.geomspace(max(min(r.elapsed.iloc[0] for r in t), 1e-2),
                                max(r.elapsed.iloc[-1] for r in t), 60)  # fmt: skip
            vals = [np.interp(grid, r.elapsed, r.fraction, left=np.nan) for r in t]
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", RuntimeWarning)
                axes[1, col].plot(grid, np.nanmedian(vals, 0), color=COLORS[method])
        axes[0, col].set_title(f"{dataset}\n{STRUCTURES[dataset].expression}", fontsize=8)
        axes[0, col].set_xlabel("oracle calls")
        axes[1, col].set_xscale("log")
        axes[1, col].set_xlabel("seconds")
        for ax in axes[:, col]:
            ax.axhline(1.0, color="grey", lw=0.8, ls=":")
    axes[0, 0].set_ylabel("best / truth (median)")
    axes[1, 0].set_ylabel("best / truth (median)")
    axes[0, 0].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(out / "kernel_search_known.png", dpi=90)
    plt.close(fig)

    lines = [
        "# Kernel search on data with a known structure\n",
        f"Generated by `{command}`. Each data set is a draw from a GP whose kernel is known "
        "(:mod:`headstart.benchmarks.kernel_structures`). `fraction` is the best log evidence / N "
        "found as a share of the truth's gain over i.i.d. noise, `(best - null) / (truth - null)`, "
        "with `truth` the oracle's score of the generating expression on the same training data "
        "(MAP started also from the true hyperparameters) and `null = -(log 2π + 1)/2`; above 1 "
        "means a kernel with more evidence than the truth. `seconds` is the run's oracle plus "
        f"acquisition time after that many calls. Medians over seeds; MAP restarts {restarts}.\n",
        "![fraction of the truth vs calls and seconds](kernel_search_known.png)\n",
    ]
    head = "| data set | truth | N | method | seeds | " + " | ".join(
        f"fraction @{c} | seconds @{c}" for c in checkpoints
    )
    lines += [head + " |", "|" + "---|" * (5 + 2 * len(checkpoints))]
    for dataset in datasets:
        spec = STRUCTURES[dataset]
        for method in methods:
            if (dataset, method) not in seeds:
                continue
            cells = []
            for c in checkpoints:
                f, t = med.loc[(dataset, method, c)]
                cells.append(f"{f:.3f} | {t:.1f}")
            lines.append(f"| {dataset} | `{spec.expression}` | {spec.n} | {method} | "
                         f"{seeds[dataset, method]} | " + " | ".join(cells) + " |")  # fmt: skip
    lines += ["", "## Default BOSOT against greedy (issue 17 targets)", ""]
    for c in checkpoints:
        ok_f, ok_t = [], []
        for dataset in datasets:
            if (dataset, "bosot", c) in med.index and (dataset, "greedy", c) in med.index:
                b, g = med.loc[(dataset, "bosot", c)], med.loc[(dataset, "greedy", c)]
                ok_f.append(b.fraction >= g.fraction - 1e-9)
                ok_t.append(b.seconds / g.seconds)
        if ok_f:
            lines.append(
                f"- @{c} calls: median fraction at or above greedy's on {sum(ok_f)}/{len(ok_f)} "
                f"data sets ({100 * np.mean(ok_f):.0f}%; target 80%); median over data sets of "
                f"the wall-time ratio to greedy {np.median(ok_t):.2f}x (target <= 1.5x)."
            )
    text = "\n".join(lines) + "\n"
    (out / "kernel_search_known.md").write_text(text)
    return text


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--datasets", default=DATASETS, help=f"Comma-separated; default {DATASETS}.")
    p.add_argument("--methods", default=",".join(METHODS), help="Comma-separated methods.")
    p.add_argument("--seeds", default="5", help="A count N (0..N-1), a range A-B or a list 0,3,7.")
    p.add_argument("--budget", type=int, default=50, help="Oracle calls per run (default 50).")
    p.add_argument("--restarts", type=int, default=3, help="MAP restarts per oracle call.")
    p.add_argument("--n-train", type=int, default=None, help="Training points (default: paper's).")
    p.add_argument("--uci-n-train", type=int, default=200,
                   help="Training points of the UCI sets when --n-train is not given (paper 500).")  # fmt: skip
    p.add_argument("--workers", type=int, default=2, help="Parallel jobs (processes).")
    p.add_argument("--out", type=Path, default=None, help=f"Output directory (default {DOCS_DIR}).")
    p.add_argument("--report-only", action="store_true", help="Rewrite the report from the CSV.")
    p.add_argument("--suite", choices=("real", "known"), default="real",
                   help="real: the five real data sets (default); known: the known-structure "
                   "suite (all of it unless --datasets names some), methods "
                   f"{KNOWN_METHODS} unless --methods is given.")  # fmt: skip
    p.add_argument(
        "--smoke", action="store_true", help="synthetic data, budget 6, 1 seed, temp dir"
    )
    args = p.parse_args(argv)
    known = args.suite == "known"
    if known:
        from headstart.benchmarks.kernel_structures import STRUCTURES

        if args.datasets == DATASETS:
            args.datasets = ",".join(STRUCTURES)
        if args.methods == ",".join(METHODS):
            args.methods = KNOWN_METHODS
    datasets = [d for d in args.datasets.split(",") if d]
    methods = [m for m in args.methods.split(",") if m]
    seeds, budget, out = _parse_seeds(args.seeds), args.budget, args.out
    if args.smoke:
        datasets, seeds, budget = ["ks-per+lin" if known else "synthetic"], [0], 6
        out = out or Path(tempfile.mkdtemp(prefix="kernel_search_smoke_"))
    out = out or (DOCS_DIR / "kernel_search_known" if known else DOCS_DIR)
    out.mkdir(parents=True, exist_ok=True)
    curve_csv, final_csv = out / "kernel_search.csv", out / "kernel_search_final.csv"
    cache_dir = out / "kernel_search_cache"
    cache_dir.mkdir(exist_ok=True)
    out_flag = f"--out {args.out} " if args.out else ""
    command = (
        f"python benchmarks/kernel_search.py --datasets {args.datasets} --seeds {args.seeds} "
        f"--budget {budget} --restarts {args.restarts} {out_flag}"
        f"--uci-n-train {args.uci_n_train}` (training sizes: Airline and "
        f"Mauna Loa 100, UCI sets {args.n_train or args.uci_n_train} (paper: 500); MAP restarts "
        f"per oracle call {args.restarts} (paper: 10"
    )
    if not args.report_only:
        import pandas as pd

        done = set()
        if final_csv.exists():
            prev = pd.read_csv(final_csv)
            done = set(zip(prev.dataset, prev.method, prev.seed, strict=True))
        jobs = [
            (d, m, s) for s in seeds for d in datasets for m in methods if (d, m, s) not in done
        ]

        def n_for(d: str):
            if args.n_train:
                return args.n_train
            return args.uci_n_train if d in ("airfoil", "ccpp", "concrete") else None

        start = time.time()
        for i, ((d, m, s), (rows, final)) in enumerate(
            _run_jobs(jobs, budget, args.restarts, n_for, cache_dir, args.workers), 1
        ):
            _append(curve_csv, CURVE_COLUMNS, rows)
            _append(final_csv, FINAL_COLUMNS, [final])
            print(f"[{i}/{len(jobs)} {time.time() - start:.0f}s] {d} {m} seed {s}: "
                  f"{final[4]} {final[5]:.4f}", file=sys.stderr, flush=True)  # fmt: skip
    if not curve_csv.exists():
        print(f"No results in {curve_csv}.", file=sys.stderr)
        return 1
    if known:
        command = (f"python benchmarks/kernel_search.py --suite known --seeds {args.seeds} "
                   f"--budget {budget} --restarts {args.restarts} --methods {args.methods}")  # fmt: skip
        sys.stdout.write(write_known_report(out, budget, args.restarts, command))
        return 0
    sys.stdout.write(write_report(out, budget, command))
    return 0


if __name__ == "__main__":
    sys.exit(main())
