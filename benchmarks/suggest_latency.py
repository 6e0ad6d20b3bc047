r"""Seconds per suggestion: headstart's GP engine vs Optuna's GPSampler vs a default BoTorch loop.

For each training-set size ``n`` (default 10, 20, 30, 40, 50) on Hartmann-6, every method
suggests from the *same* ``n`` Sobol points (maximizing ``-f``), ``--repeats`` times; the table
reports the median seconds per suggestion. The headstart engine is timed warm (the same
``GPOptimizer`` object is reused across repeats, as inside one ``Strategy``), Optuna through
``study.ask()`` on a study holding the ``n`` trials (its own hyperparameter cache warm too), and
BoTorch as ``SingleTaskGP`` + ``fit_gpytorch_mll`` + ``optimize_acqf(LogExpectedImprovement)``.

``--regret`` instead runs short BO loops (10 Sobol points, then BO up to ``--budget``) and prints
the final simple regret of headstart and GPSampler on Branin, Hartmann-3 and Hartmann-6.

Usage::

    python benchmarks/suggest_latency.py [--sizes 10 20 30 40 50] [--repeats 5] [--out x.csv]
    python benchmarks/suggest_latency.py --regret [--seeds 3] [--budget 50]
"""

from __future__ import annotations

import argparse
import csv
import statistics
import sys
import time
import warnings

import numpy as np
from scipy.stats import qmc

from headstart._gp import DimSpec, GPOptimizer

# --- test functions (minimization; encoded inputs in [0, 1]^d) -----------------------------------
_H_ALPHA = np.array([1.0, 1.2, 3.0, 3.2])
_H3_A = np.array([[3.0, 10, 30], [0.1, 10, 35], [3.0, 10, 30], [0.1, 10, 35]])
_H3_P = 1e-4 * np.array(
    [[3689, 1170, 2673], [4699, 4387, 7470], [1091, 8732, 5547], [381, 5743, 8828]]
)
_H6_A = np.array(
    [
        [10, 3, 17, 3.5, 1.7, 8],
        [0.05, 10, 17, 0.1, 8, 14],
        [3, 3.5, 1.7, 10, 17, 8],
        [17, 8, 0.05, 10, 0.1, 14],
    ]
)
_H6_P = 1e-4 * np.array(
    [
        [1312, 1696, 5569, 124, 8283, 5886],
        [2329, 4135, 8307, 3736, 1004, 9991],
        [2348, 1451, 3522, 2883, 3047, 6650],
        [4047, 8828, 8732, 5743, 1091, 381],
    ]
)


def _hartmann(x: np.ndarray, A: np.ndarray, P: np.ndarray) -> float:
    return float(-np.sum(_H_ALPHA * np.exp(-np.sum(A * (x - P) ** 2, axis=1))))


def hartmann3(x: np.ndarray) -> float:
    return _hartmann(x, _H3_A, _H3_P)


def hartmann6(x: np.ndarray) -> float:
    return _hartmann(x, _H6_A, _H6_P)


def branin(u: np.ndarray) -> float:
    x1, x2 = 15.0 * u[0] - 5.0, 15.0 * u[1]
    b, c, t = 5.1 / (4 * np.pi**2), 5.0 / np.pi, 1.0 / (8 * np.pi)
    return float((x2 - b * x1**2 + c * x1 - 6.0) ** 2 + 10 * (1 - t) * np.cos(x1) + 10.0)


PROBLEMS = {
    "branin": (branin, 2, 0.397887),
    "hartmann3": (hartmann3, 3, -3.86278),
    "hartmann6": (hartmann6, 6, -3.32237),
}


def _design(dim: int, n: int, seed: int) -> np.ndarray:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return qmc.Sobol(dim, scramble=True, seed=seed).random(n)


# --- latency ------------------------------------------------------------------------------------
def time_headstart(X: np.ndarray, y: np.ndarray, repeats: int) -> float:
    opt = GPOptimizer([DimSpec("continuous")] * X.shape[1])
    opt.suggest(X[:-1], y[:-1], rng=np.random.default_rng(0))  # warm state from n - 1 points
    times = []
    for r in range(repeats):
        t0 = time.perf_counter()
        opt.suggest(X, y, rng=np.random.default_rng(r))
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def time_optuna(X: np.ndarray, y: np.ndarray, repeats: int) -> float:
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    d = X.shape[1]
    dists = {f"x{j}": optuna.distributions.FloatDistribution(0.0, 1.0) for j in range(d)}
    times = []
    sampler = optuna.samplers.GPSampler(seed=0, n_startup_trials=10)
    study = optuna.create_study(direction="maximize", sampler=sampler)
    for i in range(len(X) - 1):
        study.add_trial(
            optuna.trial.create_trial(
                params={f"x{j}": float(X[i, j]) for j in range(d)},
                distributions=dists,
                value=float(y[i]),
            )
        )
    trial = study.ask(dists)  # warm its hyperparameter cache on n - 1 points
    study.tell(trial, state=optuna.trial.TrialState.FAIL)
    study.add_trial(
        optuna.trial.create_trial(
            params={f"x{j}": float(X[-1, j]) for j in range(d)},
            distributions=dists,
            value=float(y[-1]),
        )
    )
    for _ in range(repeats):
        t0 = time.perf_counter()
        trial = study.ask(dists)
        times.append(time.perf_counter() - t0)
        study.tell(trial, state=optuna.trial.TrialState.FAIL)  # keep the training set fixed
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


def latency_table(sizes: list[int], repeats: int, methods: list[str]) -> list[dict]:
    rows = []
    for n in sizes:
        X = _design(6, n, seed=n)
        y = -np.array([hartmann6(x) for x in X])
        row = {"n": n}
        for name in methods:
            fn = {"headstart": time_headstart, "optuna": time_optuna, "botorch": time_botorch}[name]
            row[name] = fn(X, y, repeats)
        rows.append(row)
        print(
            f"n={n:3d}  " + "  ".join(f"{m}={row[m]:.4f}s" for m in methods),
            file=sys.stderr,
            flush=True,
        )
    return rows


# --- regret -------------------------------------------------------------------------------------
def run_headstart(problem: str, seed: int, budget: int, n_init: int = 10, **kw) -> float:
    f, d, _ = PROBLEMS[problem]
    X = list(_design(d, n_init, seed))
    y = [-f(x) for x in X]
    opt = GPOptimizer([DimSpec("continuous")] * d, **kw)
    for t in range(n_init, budget):
        x = opt.suggest(np.array(X), np.array(y), rng=np.random.default_rng([seed, t]))
        X.append(x)
        y.append(-f(x))
    return -max(y)


def run_optuna(problem: str, seed: int, budget: int, n_init: int = 10) -> float:
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    f, d, _ = PROBLEMS[problem]
    sampler = optuna.samplers.GPSampler(seed=seed, n_startup_trials=n_init)
    study = optuna.create_study(sampler=sampler)
    study.optimize(
        lambda t: f(np.array([t.suggest_float(f"x{j}", 0.0, 1.0) for j in range(d)])),
        n_trials=budget,
    )
    return study.best_value


def regret_table(seeds: int, budget: int, problems: list[str]) -> None:
    for problem in problems:
        opt_value = PROBLEMS[problem][2]
        ours, theirs = [], []
        for s in range(seeds):
            ours.append(run_headstart(problem, s, budget) - opt_value)
            theirs.append(run_optuna(problem, s, budget) - opt_value)
            print(
                f"{problem} seed={s}: headstart={ours[-1]:.4g} optuna={theirs[-1]:.4g}", flush=True
            )
        print(
            f"{problem}: median regret headstart={np.median(ours):.4g} "
            f"optuna={np.median(theirs):.4g} (mean {np.mean(ours):.4g} vs {np.mean(theirs):.4g})",
            flush=True,
        )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10, 20, 30, 40, 50])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--methods", nargs="+", default=["headstart", "optuna", "botorch"])
    parser.add_argument("--out", help="optional CSV path")
    parser.add_argument("--regret", action="store_true", help="run the regret comparison instead")
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--budget", type=int, default=50)
    parser.add_argument("--problems", nargs="+", default=list(PROBLEMS))
    args = parser.parse_args(argv)
    if args.regret:
        regret_table(args.seeds, args.budget, args.problems)
        return
    rows = latency_table(args.sizes, args.repeats, args.methods)
    print("median seconds per suggestion, Hartmann-6")
    print(f"{'n':>4} " + " ".join(f"{m:>10}" for m in args.methods))
    for row in rows:
        print(f"{row['n']:>4} " + " ".join(f"{row[m]:>10.4f}" for m in args.methods))
    if args.out:
        with open(args.out, "w", newline="") as fh:
            writer = csv.DictWriter(fh, fieldnames=["n", *args.methods])
            writer.writeheader()
            writer.writerows(rows)


if __name__ == "__main__":
    main()
