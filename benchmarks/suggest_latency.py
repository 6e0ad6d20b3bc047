r"""Seconds per suggestion: headstart's GP engine vs Optuna's GPSampler vs a default BoTorch loop.

For each training-set size ``n`` (default 10, 20, 30, 40, 50) on Hartmann-6, every method
suggests from the *same* ``n`` Sobol points (maximizing ``-f``), ``--repeats`` times; the table
reports the median seconds per suggestion. As inside a real loop, each engine has just fitted
the first ``n - 1`` points (headstart: the same ``BOEngine`` with the ``MaternGP`` surrogate, as inside one ``Strategy``;
Optuna: ``study.ask()`` on the same study, whose hyperparameter cache is then warm) and the timed
call adds the ``n``-th point. BoTorch is timed as ``SingleTaskGP`` + ``fit_gpytorch_mll`` +
``optimize_acqf(LogExpectedImprovement)`` with 10 restarts and 512 raw samples.

Regret is measured by the benchmark runner (``benchmarks/gp_vs_peers.py``), not here. Both GP
engines are told the objective is noise-free, as in that comparison.

``--dims`` instead sweeps the dimension at a fixed ``n`` (``--sizes``) on Ackley-d, through the
public APIs of both libraries as a user runs them: a headstart study (``method="gp"``, in
memory) and an Optuna study with ``GPSampler``, each holding the same ``n`` trials; ``--space
mixed`` makes every third parameter an integer (0..20) and every third a categorical (5 choices).

Usage::

    python benchmarks/suggest_latency.py            # → docs/benchmarks/suggest_latency.{csv,md}
    python benchmarks/suggest_latency.py --sizes 10 50 --repeats 3 --out /tmp/lat
    python benchmarks/suggest_latency.py --dims 2 5 10 20 40 --sizes 50 --consecutive 5 \\
        --out docs/benchmarks/suggest_latency_dims          # (and --space mixed)
"""

from __future__ import annotations

import argparse
import csv
import statistics
import sys
import time
import warnings
from pathlib import Path

import numpy as np
from scipy.stats import qmc

from headstart._engine.engine import BOEngine, DimSpec
from headstart._gp import MaternGP
from headstart.benchmarks.csvlog import write_rows
from headstart.benchmarks.functions import get_task

DOCS = Path(__file__).resolve().parents[1] / "docs" / "benchmarks"


def hartmann6(u: np.ndarray) -> float:
    """Hartmann-6 from the benchmark registry, on encoded points of its unit cube."""
    task = get_task("hartmann6")
    return float(task.objective(task.space.decode(u)[0]))


def _design(dim: int, n: int, seed: int) -> np.ndarray:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return qmc.Sobol(dim, scramble=True, seed=seed).random(n)


# --- latency ------------------------------------------------------------------------------------
def time_headstart(X: np.ndarray, y: np.ndarray, repeats: int, consecutive: int = 1) -> float:
    """Median over repeats of the mean seconds of ``consecutive`` suggestions, each adding one of
    the last ``consecutive`` points, after a warm state on the points before them."""
    times = []
    k = len(X) - consecutive
    for r in range(repeats):
        d = X.shape[1]
        opt = BOEngine([DimSpec("continuous")] * d, MaternGP(np.zeros(d, bool), deterministic=True))
        opt.suggest(X[:k], y[:k], rng=np.random.default_rng(r))  # warm state
        t0 = time.perf_counter()
        for m in range(k + 1, len(X) + 1):
            opt.suggest(X[:m], y[:m], rng=np.random.default_rng(r))
        times.append((time.perf_counter() - t0) / consecutive)
    return statistics.median(times)


def _optuna_seconds_per_ask(
    trials: list[tuple[dict, float]], dists: dict, direction: str, seed: int, consecutive: int
) -> float:
    """An Optuna ``GPSampler`` study (told the objective is noise-free) holding ``trials[:k]``:
    mean seconds of ``ask()`` as one trial at a time of the last ``consecutive`` is added, after
    one untimed ask that warms its hyperparameter cache."""
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)

    def add(study, i: int) -> None:
        params, value = trials[i]
        study.add_trial(optuna.trial.create_trial(params=params, distributions=dists, value=value))

    k = len(trials) - consecutive
    with warnings.catch_warnings():  # deterministic_objective is experimental in Optuna 5
        warnings.simplefilter("ignore")
        sampler = optuna.samplers.GPSampler(
            seed=seed, n_startup_trials=10, deterministic_objective=True
        )
    study = optuna.create_study(direction=direction, sampler=sampler)
    for i in range(k):
        add(study, i)
    study.tell(study.ask(dists), state=optuna.trial.TrialState.FAIL)  # warm its cache
    elapsed = 0.0
    for i in range(k, len(trials)):
        add(study, i)
        t0 = time.perf_counter()
        trial = study.ask(dists)
        elapsed += time.perf_counter() - t0
        study.tell(trial, state=optuna.trial.TrialState.FAIL)
    return elapsed / consecutive


def time_optuna(X: np.ndarray, y: np.ndarray, repeats: int, consecutive: int = 1) -> float:
    from optuna.distributions import FloatDistribution

    d = X.shape[1]
    dists = {f"x{j}": FloatDistribution(0.0, 1.0) for j in range(d)}
    trials = [
        ({f"x{j}": float(x[j]) for j in range(d)}, float(v)) for x, v in zip(X, y, strict=True)
    ]
    times = [
        _optuna_seconds_per_ask(trials, dists, "maximize", r, consecutive) for r in range(repeats)
    ]
    return statistics.median(times)


def time_botorch(X: np.ndarray, y: np.ndarray, repeats: int) -> float:
    import torch
    from botorch.acquisition import LogExpectedImprovement
    from botorch.fit import fit_gpytorch_mll
    from botorch.models import SingleTaskGP
    from botorch.optim import optimize_acqf
    from gpytorch.mlls import ExactMarginalLogLikelihood

    d = X.shape[1]
    train_X = torch.tensor(X, dtype=torch.float64)
    train_Y = torch.tensor(y, dtype=torch.float64).unsqueeze(-1)
    bounds = torch.stack([torch.zeros(d), torch.ones(d)]).to(torch.float64)
    times = []
    for r in range(repeats):
        torch.manual_seed(r)
        t0 = time.perf_counter()
        model = SingleTaskGP(train_X, train_Y)
        fit_gpytorch_mll(ExactMarginalLogLikelihood(model.likelihood, model))
        acqf = LogExpectedImprovement(model, best_f=train_Y.max())
        optimize_acqf(acqf, bounds=bounds, q=1, num_restarts=10, raw_samples=512)
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


# --- the dimension sweep, through the public APIs -----------------------------------------------
CHOICES = ("a", "b", "c", "d", "e")


def _kind(j: int, space: str) -> str:
    if space == "continuous":
        return "float"
    return ("float", "int", "cat")[j % 3]


def _sweep_trials(d: int, n: int, space: str, seed: int) -> list[tuple[dict, float]]:
    """``n`` Sobol configurations of the ``d``-parameter space and their Ackley values."""
    U = _design(d, n, seed)
    trials = []
    for u in U:
        params, x = {}, np.empty(d)
        for j in range(d):
            kind = _kind(j, space)
            if kind == "float":
                params[f"x{j}"] = x[j] = float(-32.768 + 65.536 * u[j])
            elif kind == "int":
                params[f"x{j}"] = v = int(min(20, np.floor(21 * u[j])))
                x[j] = -32.768 + 65.536 * v / 20
            else:
                k = int(min(4, np.floor(5 * u[j])))
                params[f"x{j}"], x[j] = CHOICES[k], 4.0 * k
        trials.append((params, float(ackley_values(x[None])[0])))
    return trials


def ackley_values(X: np.ndarray) -> np.ndarray:
    from headstart.benchmarks.functions import ackley

    return ackley(X)


def time_headstart_study(trials, d: int, space: str, seed: int, consecutive: int) -> float:
    """A headstart study holding ``trials[:k]``: mean seconds of ``ask()`` as one trial at a time
    of the last ``consecutive`` is added."""
    import headstart as hs

    params = {
        f"x{j}": {
            "float": hs.Float(-32.768, 32.768),
            "int": hs.Int(0, 20),
            "cat": hs.Categorical(list(CHOICES)),
        }[_kind(j, space)]
        for j in range(d)
    }
    k = len(trials) - consecutive
    study = hs.create_study(
        f"lat-{seed}", hs.SearchSpace(params), storage=None, seed=seed, deterministic=True
    )
    study.add_trials(trials[:k])
    study.tell(study.ask(), failed=True)  # warm state (not timed)
    elapsed = 0.0
    for i in range(k, len(trials)):
        study.add_trials([trials[i]])
        t0 = time.perf_counter()
        trial = study.ask()
        elapsed += time.perf_counter() - t0
        study.tell(trial, failed=True)
    return elapsed / consecutive


def time_optuna_study(trials, d: int, space: str, seed: int, consecutive: int) -> float:
    """The same with Optuna's ``GPSampler`` (defaults, told the objective is noise-free)."""
    from optuna.distributions import (
        CategoricalDistribution,
        FloatDistribution,
        IntDistribution,
    )

    dists = {
        f"x{j}": {
            "float": FloatDistribution(-32.768, 32.768),
            "int": IntDistribution(0, 20),
            "cat": CategoricalDistribution(list(CHOICES)),
        }[_kind(j, space)]
        for j in range(d)
    }
    return _optuna_seconds_per_ask(trials, dists, "minimize", seed, consecutive)


def dims_table(dims: list[int], n: int, space: str, repeats: int, consecutive: int) -> list[dict]:
    """One row per dimension: headstart's and Optuna's seconds per ask at ``n`` trials."""
    rows = []
    for d in dims:
        trials = _sweep_trials(d, n, space, seed=d)
        row = {"d": d, "n": n, "space": space}
        ours, theirs = [], []
        for r in range(repeats):  # interleaved, so drift in machine load hits both alike
            ours.append(time_headstart_study(trials, d, space, r, consecutive))
            theirs.append(time_optuna_study(trials, d, space, r, consecutive))
        row["headstart"], row["optuna"] = statistics.median(ours), statistics.median(theirs)
        rows.append(row)
        print(
            f"d={d:3d} {space}: headstart={row['headstart']:.4f}s optuna={row['optuna']:.4f}s "
            f"ratio={row['headstart'] / row['optuna']:.2f}",
            file=sys.stderr,
            flush=True,
        )
    return rows


def write_dims_outputs(rows: list[dict], out: Path, repeats: int, consecutive: int) -> None:
    """``<out>.csv`` and ``<out>.md``; rows of earlier runs with another space or ``n`` are kept."""
    out.parent.mkdir(parents=True, exist_ok=True)
    fields = ["space", "d", "n", "headstart", "optuna"]
    old = []
    if out.with_suffix(".csv").exists():
        with open(out.with_suffix(".csv")) as fh:
            runs = {(r["space"], str(r["n"])) for r in rows}
            old = [r for r in csv.DictReader(fh) if (r["space"], r["n"]) not in runs]
    allrows = [{k: r[k] for k in fields} for r in old + rows]
    write_rows(out.with_suffix(".csv"), fields, allrows)
    lines = [
        "# Seconds per ask vs the dimension (Ackley-d)",
        "",
        "Generated by `python benchmarks/suggest_latency.py --dims ...` (median of "
        f"{repeats} repeats, interleaved, of the mean over {consecutive} consecutive asks, each "
        "after adding one trial; both libraries through their public study APIs at defaults, "
        "told the objective is noise-free; same trials for both; 2-core CPU machine). `mixed`: "
        "every third parameter an integer 0..20, every third a categorical of 5 choices.",
        "",
        "| space | d | trials | headstart (s) | Optuna GPSampler (s) | headstart / optuna |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for r in allrows:
        h, o = float(r["headstart"]), float(r["optuna"])
        lines.append(f"| {r['space']} | {r['d']} | {r['n']} | {h:.4f} | {o:.4f} | {h / o:.2f} |")
    out.with_suffix(".md").write_text("\n".join(lines) + "\n")


def latency_table(
    sizes: list[int], repeats: int, methods: list[str], consecutive: int = 1
) -> list[dict]:
    rows = []
    for n in sizes:
        X = _design(6, n, seed=n)
        y = -np.array([hartmann6(x) for x in X])
        row = {"n": n}
        for name in methods:
            if name == "botorch":  # fits from scratch every time: nothing to amortise
                row[name] = time_botorch(X, y, repeats)
            else:
                fn = {"headstart": time_headstart, "optuna": time_optuna}[name]
                row[name] = fn(X, y, repeats, consecutive)
        rows.append(row)
        print(
            f"n={n:3d}  " + "  ".join(f"{m}={row[m]:.4f}s" for m in methods),
            file=sys.stderr,
            flush=True,
        )
    return rows


def write_outputs(
    rows: list[dict], methods: list[str], out: Path, repeats: int, consecutive: int = 1
) -> None:
    """``<out>.csv`` and ``<out>.md`` (a table with ratios to Optuna's GPSampler)."""
    out.parent.mkdir(parents=True, exist_ok=True)
    write_rows(out.with_suffix(".csv"), ["n", *methods], rows)
    lines = [
        "# Seconds per suggestion on Hartmann-6",
        "",
        "Generated by `python benchmarks/suggest_latency.py` (median of "
        f"{repeats} repeats per cell of the mean over {consecutive} consecutive suggestions; "
        "same n Sobol points for every method; 2-core CPU machine).",
        "",
        "| n | " + " | ".join(methods) + " | headstart / optuna |",
        "|---:|" + "---:|" * (len(methods) + 1),
    ]
    for row in rows:
        ratio = (
            row["headstart"] / row["optuna"]
            if {"headstart", "optuna"} <= set(row)
            else float("nan")
        )
        cells = " | ".join(f"{row[m]:.4f}" for m in methods)
        lines.append(f"| {row['n']} | {cells} | {ratio:.2f} |")
    out.with_suffix(".md").write_text("\n".join(lines) + "\n")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10, 20, 30, 40, 50])
    parser.add_argument("--repeats", type=int, default=9, help="Timed suggestions per cell.")
    parser.add_argument("--methods", nargs="+", default=["headstart", "optuna", "botorch"])
    parser.add_argument(
        "--consecutive",
        type=int,
        default=1,
        help="Time this many consecutive suggestions per cell (each adding a point) and report "
        "their mean, so periodic refits are amortised as in a real study.",
    )
    parser.add_argument(
        "--out",
        type=Path,
        default=DOCS / "suggest_latency",
        help="Output path without suffix (.csv and .md are written).",
    )
    parser.add_argument(
        "--dims", type=int, nargs="+", default=None, help="Sweep these dimensions (Ackley-d)."
    )
    parser.add_argument("--space", choices=["continuous", "mixed"], default="continuous")
    args = parser.parse_args(argv)
    if args.dims:
        rows = dims_table(args.dims, args.sizes[0], args.space, args.repeats, args.consecutive)
        write_dims_outputs(rows, args.out, args.repeats, args.consecutive)
        print(args.out.with_suffix(".md").read_text())
        return
    rows = latency_table(args.sizes, args.repeats, args.methods, args.consecutive)
    write_outputs(rows, args.methods, args.out, args.repeats, args.consecutive)
    print(args.out.with_suffix(".md").read_text())


if __name__ == "__main__":
    main()
