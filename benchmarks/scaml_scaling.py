"""ScaML-GP scaling: meta-fit time and seconds per suggestion vs the number of meta-tasks M.

Measured in one process on the same data (N_m = 64 points per meta-task, d = 6, meta-tasks drawn
from the Hartmann-6 family of ScaML-GP App. C.6):

* ``headstart-batched``: :func:`headstart._transfer.metafit.fit_meta_gps` (all tasks in one batch);
* ``botorch-one-by-one``: one BoTorch ``SingleTaskGP`` (same SE-ARD kernel and priors) per task,
  each fitted with ``fit_gpytorch_mll`` from the same number of starts (1 + 5 prior draws);
* ``botorch-mtgp``: BoTorch ``MultiTaskGP`` on the joint data, one ``fit_gpytorch_mll``;
* ScaML-GP suggestions (test-model MAP fit + UCB search) at N_t = 50 test observations, meta GPs
  already fitted: the median over the suggestions at N_t = 46..50 of a BO loop, and the first,
  cold suggestion of a fresh model at N_t = 50.

Peers that would take too long are run only up to ``--max-one-by-one`` / ``--max-mtgp`` tasks;
the table says "not run" above that. Every number in the output was measured by this script.

    python benchmarks/scaml_scaling.py                 # M in 8 32 128 512 2048
    python benchmarks/scaml_scaling.py --ms 8 32 --max-one-by-one 32 --max-mtgp 8  # smoke run

Writes docs/benchmarks/scaml_scaling.{csv,png,md}. Rows already in the CSV are skipped (resume).
"""

from __future__ import annotations

import argparse
import csv
import math
import statistics
import time
import warnings
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "docs" / "benchmarks"
COLUMNS = ("M", "measure", "method", "seconds", "note")
D, N_M, N_T = 6, 64, 50
N_STARTS = 6  # 1 default + 5 prior draws, for every method


def hartmann6_family(M: int, seed: int):
    """``M`` meta-tasks of the Hartmann-6 family (random alphas as App. C.6), ``N_M`` points each."""
    from headstart.sources import MetaTask

    A = np.array(
        [
            [10, 3, 17, 3.5, 1.7, 8],
            [0.05, 10, 17, 0.1, 8, 14],
            [3, 3.5, 1.7, 10, 17, 8],
            [17, 8, 0.05, 10, 0.1, 14],
        ]
    )
    P = 1e-4 * np.array(
        [
            [1312, 1696, 5569, 124, 8283, 5886],
            [2329, 4135, 8307, 3736, 1004, 9991],
            [2348, 1451, 3522, 2883, 3047, 6650],
            [4047, 8828, 8732, 5743, 1091, 381],
        ]
    )
    lo, hi = np.array([1.0, 1.18, 2.8, 3.2]), np.array([1.02, 1.20, 3.0, 3.4])
    rng = np.random.default_rng(seed)
    tasks = []
    for m in range(M):
        alpha = rng.uniform(lo, hi)
        X = rng.random((N_M, D))
        f = -(alpha * np.exp(-(A * (X[:, None, :] - P) ** 2).sum(-1))).sum(-1)
        tasks.append(MetaTask(f"h6-{m}", X, f + 0.1 * rng.standard_normal(N_M), "minimize"))
    return tasks


def time_batched(tasks) -> float:
    from headstart._transfer.metafit import fit_meta_gps

    t0 = time.perf_counter()
    fit_meta_gps(tasks, np.zeros(D, dtype=bool), seed=0, n_restarts=N_STARTS - 1)
    return time.perf_counter() - t0


def _botorch_model(X, y):
    import torch
    from botorch.models import SingleTaskGP
    from gpytorch.constraints import Interval
    from gpytorch.kernels import RBFKernel, ScaleKernel
    from gpytorch.likelihoods import GaussianLikelihood
    from gpytorch.means import ZeroMean
    from gpytorch.priors import GammaPrior, LogNormalPrior

    lik = GaussianLikelihood(
        noise_prior=LogNormalPrior(-8.0, 2.0), noise_constraint=Interval(1e-8, 1e-2)
    )
    kernel = ScaleKernel(
        RBFKernel(
            ard_num_dims=D,
            lengthscale_prior=GammaPrior(3.0, 6.0),
            lengthscale_constraint=Interval(1e-4, 1e2),
        ),
        outputscale_prior=GammaPrior(2.0, 0.15),
        outputscale_constraint=Interval(1e-4, 1e2),
    )
    return SingleTaskGP(
        torch.from_numpy(X),
        torch.from_numpy(y[:, None]),
        likelihood=lik,
        covar_module=kernel,
        mean_module=ZeroMean(),
        outcome_transform=None,
    )


def time_one_by_one(tasks) -> float:
    import torch
    from botorch.fit import fit_gpytorch_mll
    from gpytorch.mlls import ExactMarginalLogLikelihood

    t0 = time.perf_counter()
    for task in tasks:
        y = task.y_max()
        y = (y - y.mean()) / (y.std() or 1.0)
        best, best_state = -math.inf, None
        for start in range(N_STARTS):
            model = _botorch_model(task.X, y)
            if start:  # prior draws, as the batched fit does
                for name, module, prior, closure, setting in model.named_priors():
                    lo, hi = (2e-8, 9e-3) if "noise" in name else (2e-4, 90.0)
                    setting(module, prior.sample(closure(module).shape).clamp(lo, hi))
            mll = ExactMarginalLogLikelihood(model.likelihood, model)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                try:
                    fit_gpytorch_mll(mll, optimizer_kwargs={"options": {"maxiter": 200}})
                except Exception:  # a failed start is skipped, as in the batched fit
                    continue
            model.train()
            with torch.no_grad():
                value = float(mll(model(*model.train_inputs), model.train_targets))
            if value > best:
                best, best_state = value, model.state_dict()
        del best_state
    return time.perf_counter() - t0


def time_mtgp(tasks) -> float:
    import torch
    from botorch.fit import fit_gpytorch_mll
    from botorch.models import MultiTaskGP
    from gpytorch.mlls import ExactMarginalLogLikelihood

    X = np.concatenate([np.column_stack([t.X, np.full(t.n, i)]) for i, t in enumerate(tasks)])
    y = np.concatenate([(t.y_max() - t.y_max().mean()) / t.y_max().std() for t in tasks])
    t0 = time.perf_counter()
    model = MultiTaskGP(torch.from_numpy(X), torch.from_numpy(y[:, None]), task_feature=-1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fit_gpytorch_mll(ExactMarginalLogLikelihood(model.likelihood, model))
    return time.perf_counter() - t0


def time_suggest(tasks, loop: bool) -> float:
    """Seconds for ScaML-GP suggestions at ``N_T`` test observations, meta GPs already fitted.

    ``loop=False``: the first suggestion of a fresh model (cold: caches built, all restarts).
    ``loop=True``: the median of the suggestions at ``N_T - 4 .. N_T`` observations in a BO loop
    (incremental caches, warm-started fit, one of the five with prior restarts).
    """
    from headstart._engine.engine import BOEngine, DimSpec
    from headstart._transfer.metafit import fit_meta_gps
    from headstart._transfer.scaml import ScaML

    is_cat = np.zeros(D, dtype=bool)
    meta = fit_meta_gps(tasks, is_cat, seed=0)
    rng = np.random.default_rng(1)
    X_t = rng.random((N_T, D))
    y_t = -np.sum((X_t - 0.4) ** 2, axis=1)
    model = ScaML(tasks, is_cat, meta=meta)
    opt = BOEngine([DimSpec("continuous")] * D, model, acquisition="ucb", ucb_beta=9.0)
    _ = opt.surrogate
    if not loop:
        t0 = time.perf_counter()
        opt.suggest(X_t, y_t, rng=np.random.default_rng(0))
        return time.perf_counter() - t0
    for n in range(N_T - 10, N_T - 4):  # the loop so far (untimed)
        opt.suggest(X_t[:n], y_t[:n], rng=np.random.default_rng(n))
    times = []
    for n in range(N_T - 4, N_T + 1):
        t0 = time.perf_counter()
        opt.suggest(X_t[:n], y_t[:n], rng=np.random.default_rng(n))
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def _load(path: Path) -> dict[tuple[int, str, str], tuple[float, str]]:
    if not path.exists():
        return {}
    with path.open() as f:
        return {
            (int(r["M"]), r["measure"], r["method"]): (float(r["seconds"]), r["note"])
            for r in csv.DictReader(f)
        }


def _append(path: Path, row: tuple) -> None:
    new = not path.exists()
    with path.open("a", newline="") as f:
        writer = csv.writer(f)
        if new:
            writer.writerow(COLUMNS)
        writer.writerow(row)
        f.flush()


def report(path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = _load(path)
    Ms = sorted({m for m, _, _ in rows})
    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    for ax, measure in zip(axes, ("meta_fit", "suggest"), strict=True):  # loop suggestions
        for method in sorted({k[2] for k in rows if k[1] == measure}):
            pts = [(m, rows[(m, measure, method)][0]) for m in Ms if (m, measure, method) in rows]
            pts = [(m, s) for m, s in pts if math.isfinite(s)]
            if pts:
                ax.loglog(*zip(*pts, strict=True), "o-", label=method)
        ax.set_xlabel("number of meta-tasks M")
        ax.set_ylabel("seconds")
        ax.set_title("meta-task fit" if measure == "meta_fit" else f"one suggestion (N_t = {N_T})")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path.with_suffix(".png"), dpi=110)
    plt.close(fig)

    def cell(m, measure, method):
        if (m, measure, method) not in rows:
            return "not run"
        seconds, note = rows[(m, measure, method)]
        return note if not math.isfinite(seconds) else f"{seconds:.3g}"

    lines = [
        "# ScaML-GP scaling in the number of meta-tasks",
        "",
        f"Generated by `python benchmarks/scaml_scaling.py` (N_m = {N_M}, d = {D}, "
        f"{N_STARTS} starts per GP fit, N_t = {N_T} for suggestions; 2-core CPU).",
        "",
        "![scaling](scaml_scaling.png)",
        "",
        "| M | batched meta-fit (s) | BoTorch one-by-one (s) | speed-up | BoTorch MultiTaskGP fit (s)"
        " | ScaML suggestion in a loop (s) | first suggestion, cold (s) |",
        "|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for m in Ms:
        b = rows.get((m, "meta_fit", "headstart-batched"), (math.nan, ""))[0]
        o = rows.get((m, "meta_fit", "botorch-one-by-one"), (math.nan, ""))[0]
        speed = f"{o / b:.1f}x" if math.isfinite(b) and math.isfinite(o) else "-"
        lines.append(
            f"| {m} | {cell(m, 'meta_fit', 'headstart-batched')} | "
            f"{cell(m, 'meta_fit', 'botorch-one-by-one')} | {speed} | "
            f"{cell(m, 'meta_fit', 'botorch-mtgp')} | {cell(m, 'suggest', 'headstart-scaml')} | "
            f"{cell(m, 'suggest-cold', 'headstart-scaml')} |"
        )
    batched = [
        (m, rows[(m, "meta_fit", "headstart-batched")][0])
        for m in Ms
        if (m, "meta_fit", "headstart-batched") in rows
    ]
    if len(batched) >= 2:
        (m0, t0), (m1, t1) = batched[0], batched[-1]
        slope = math.log(t1 / t0) / math.log(m1 / m0)
        lines += ["", f"Batched meta-fit time grows as M^{slope:.2f} from M = {m0} to M = {m1}."]
    path.with_suffix(".md").write_text("\n".join(lines) + "\n")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--ms", type=int, nargs="+", default=[8, 32, 128, 512, 2048])
    parser.add_argument("--max-one-by-one", type=int, default=128)
    parser.add_argument("--max-mtgp", type=int, default=8)
    parser.add_argument("--out", type=Path, default=OUT / "scaml_scaling.csv")
    args = parser.parse_args(argv)
    import torch

    torch.set_num_threads(2)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    done = _load(args.out)
    for M in args.ms:
        tasks = hartmann6_family(M, seed=M)
        jobs = [
            ("meta_fit", "headstart-batched", time_batched, True),
            ("meta_fit", "botorch-one-by-one", time_one_by_one, args.max_one_by_one >= M),
            ("meta_fit", "botorch-mtgp", time_mtgp, args.max_mtgp >= M),
            ("suggest", "headstart-scaml", lambda t: time_suggest(t, loop=True), True),
            ("suggest-cold", "headstart-scaml", lambda t: time_suggest(t, loop=False), True),
        ]
        for measure, method, fn, run in jobs:
            if (M, measure, method) in done or not run:
                continue
            print(f"M={M} {measure} {method} ...", flush=True)
            try:
                seconds, note = fn(tasks), ""
            except Exception as e:  # recorded, not hidden
                seconds, note = math.nan, f"failed: {type(e).__name__}"
            print(f"  {seconds:.3f} s {note}", flush=True)
            _append(args.out, (M, measure, method, f"{seconds:.6g}", note))
    report(args.out)
    print(f"wrote {args.out.with_suffix('.md')}")


if __name__ == "__main__":
    main()
