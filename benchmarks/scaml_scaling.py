"""ScaML-GP scaling: meta-fit time and seconds per suggestion vs the number of meta-tasks M.

Measured in one process on the same data (N_m = 64 points per meta-task, d = 6, meta-tasks drawn
from the Hartmann-6 family of ScaML-GP App. C.6), single-threaded except the meta-fits:

* ``headstart-batched``: :func:`headstart._transfer.metafit.fit_meta_gps` (all tasks in one batch);
* ``botorch-one-by-one``: one BoTorch ``SingleTaskGP`` (same SE-ARD kernel and priors) per task,
  each fitted with ``fit_gpytorch_mll`` from the same number of starts (1 + 5 prior draws);
* ``botorch-mtgp``: BoTorch ``MultiTaskGP`` on the joint data, one ``fit_gpytorch_mll``;
* steady suggestions in a BO loop (meta GPs already fitted): the median and mean seconds of the
  suggestions at N_t = 41..60 test observations, for ScaML-GP and, on the same observations, for
  headstart's plain GP (``method="gp"``'s model, UCB as ScaML-GP): their ratio is the price of the
  meta-tasks;
* the first, cold suggestion of a fresh model at N_t = 50;
* a *second* study on the same sources: rebuilding the meta GPs from the model cache (JSON, no
  refit) and that study's first ``ask()`` (SQLite storage, the cache already filled by a first
  study).

Peers that would take too long are run only up to ``--max-one-by-one`` / ``--max-mtgp`` tasks;
the table says "not run" above that. Every number in the output was measured by this script.

    python benchmarks/scaml_scaling.py                 # M in 16 64 256 1024 2048
    python benchmarks/scaml_scaling.py --ms 16 64 --max-one-by-one 16 --max-mtgp 0  # smoke run

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
STEADY = range(41, 61)  # the test observations of the timed steady suggestions
MAX_SUGGEST_M = 512  # above this, only the cold suggestion is timed
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


def _loop_data() -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(1)
    X_t = rng.random((STEADY[-1] + 1, D))
    return X_t, -np.sum((X_t - 0.4) ** 2, axis=1)


def _steady(model, X_t, y_t) -> tuple[float, float]:
    """Median and mean seconds of the suggestions at ``STEADY`` observations of a BO loop."""
    from headstart._engine.engine import BOEngine, DimSpec

    opt = BOEngine([DimSpec("continuous")] * D, model, acquisition="ucb", ucb_beta=9.0)
    _ = opt.surrogate
    for n in range(STEADY[0] - 10, STEADY[0]):  # the loop so far (untimed)
        opt.suggest(X_t[:n], y_t[:n], rng=np.random.default_rng(n))
    times = []
    for n in STEADY:
        t0 = time.perf_counter()
        opt.suggest(X_t[:n], y_t[:n], rng=np.random.default_rng(n))
        times.append(time.perf_counter() - t0)
    return statistics.median(times), statistics.fmean(times)


def time_steady(tasks, meta_gps) -> dict[tuple[str, str], tuple[float, str]]:
    """Steady suggestions of ScaML-GP and of the plain GP on the same observations.

    ``meta_gps()`` returns the fitted meta GPs (one fit per M, shared by the suggestion jobs).
    """
    from headstart._gp import MaternGP
    from headstart._transfer.scaml import ScaML

    is_cat = np.zeros(D, dtype=bool)
    X_t, y_t = _loop_data()
    out = {}
    for method, model in (
        ("headstart-gp", MaternGP(is_cat)),
        ("headstart-scaml", ScaML(tasks, is_cat, meta=meta_gps())),
    ):
        median, mean = _steady(model, X_t, y_t)
        out[("suggest", method)] = (median, "")
        out[("suggest-mean", method)] = (mean, "")
    return out


def time_cold(tasks, meta_gps) -> dict[tuple[str, str], tuple[float, str]]:
    """The first suggestion of a fresh ScaML-GP model at ``N_T`` observations."""
    from headstart._engine.engine import BOEngine, DimSpec
    from headstart._transfer.scaml import ScaML

    is_cat = np.zeros(D, dtype=bool)
    X_t, y_t = _loop_data()
    model = ScaML(tasks, is_cat, meta=meta_gps())
    opt = BOEngine([DimSpec("continuous")] * D, model, acquisition="ucb", ucb_beta=9.0)
    _ = opt.surrogate
    t0 = time.perf_counter()
    opt.suggest(X_t[:N_T], y_t[:N_T], rng=np.random.default_rng(0))
    return {("suggest-cold", "headstart-scaml"): (time.perf_counter() - t0, "")}


def time_second_study(tasks, meta_gps) -> dict[tuple[str, str], tuple[float, str]]:
    """A second study on the same sources: cache rebuild and its first ask (median of 3)."""
    import tempfile

    import headstart as hs
    from headstart._gp.batched import BatchedGP

    is_cat = np.zeros(D, dtype=bool)
    data = meta_gps().to_json()
    rebuild = []
    for _ in range(3):
        t0 = time.perf_counter()
        BatchedGP.from_json(data, tasks, is_cat)
        rebuild.append(time.perf_counter() - t0)
    space = hs.SearchSpace({f"x{i}": hs.Float(0.0, 1.0) for i in range(D)})
    firsts = []
    with tempfile.TemporaryDirectory() as tmp:
        url = f"sqlite:///{tmp}/scaling.db"
        for i in range(4):  # study 0 fits and caches the meta GPs; 1..3 reuse them
            study = hs.create_study(
                f"s{i}", space, storage=url, method="scaml", transfer_from=tasks, seed=i
            )
            t0 = time.perf_counter()
            study.ask()
            if i:
                firsts.append(time.perf_counter() - t0)
    return {
        ("cache-rebuild", "headstart-scaml"): (statistics.median(rebuild), "median of 3"),
        ("first-ask-cached", "headstart-scaml"): (statistics.median(firsts), "median of 3"),
    }


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
    panels = (
        ("meta-task fit", ("meta_fit",)),
        ("one suggestion", ("suggest", "suggest-cold", "first-ask-cached")),
    )
    for ax, (title, measures) in zip(axes, panels, strict=True):
        for measure in measures:
            for method in sorted({k[2] for k in rows if k[1] == measure}):
                pts = [
                    (m, rows[(m, measure, method)][0]) for m in Ms if (m, measure, method) in rows
                ]
                pts = [(m, s) for m, s in pts if math.isfinite(s)]
                label = method if measure in ("meta_fit", "suggest") else f"{method}, {measure}"
                if pts:
                    ax.loglog(*zip(*pts, strict=True), "o-", label=label)
        ax.set_xlabel("number of meta-tasks M")
        ax.set_ylabel("seconds")
        ax.set_title(title)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path.with_suffix(".png"), dpi=110)
    plt.close(fig)

    def value(m, measure, method):
        return rows.get((m, measure, method), (math.nan, ""))[0]

    def cell(m, measure, method):
        if (m, measure, method) not in rows:
            return "not run"
        seconds, note = rows[(m, measure, method)]
        return note if not math.isfinite(seconds) else f"{seconds:.3g}"

    def ratio(a, b):
        return f"{a / b:.1f}x" if math.isfinite(a) and math.isfinite(b) and b > 0 else "-"

    lines = [
        "# ScaML-GP scaling in the number of meta-tasks",
        "",
        f"Generated by `python benchmarks/scaml_scaling.py` (N_m = {N_M}, d = {D}, "
        f"{N_STARTS} starts per GP fit; 2-core CPU).",
        "",
        "![scaling](scaml_scaling.png)",
        "",
        "## Meta-fit",
        "",
        "| M | batched meta-fit (s) | BoTorch one-by-one (s) | speed-up | BoTorch MultiTaskGP fit (s) |",
        "|---:|---:|---:|---:|---:|",
    ]
    for m in Ms:
        b = value(m, "meta_fit", "headstart-batched")
        o = value(m, "meta_fit", "botorch-one-by-one")
        lines.append(
            f"| {m} | {cell(m, 'meta_fit', 'headstart-batched')} | "
            f"{cell(m, 'meta_fit', 'botorch-one-by-one')} | {ratio(o, b)} | "
            f"{cell(m, 'meta_fit', 'botorch-mtgp')} |"
        )
    batched = [(m, value(m, "meta_fit", "headstart-batched")) for m in Ms]
    batched = [(m, t) for m, t in batched if math.isfinite(t)]
    if len(batched) >= 2:
        (m0, t0), (m1, t1) = batched[0], batched[-1]
        slope = math.log(t1 / t0) / math.log(m1 / m0)
        lines += ["", f"Batched meta-fit time grows as M^{slope:.2f} from M = {m0} to M = {m1}."]
    lines += [
        "",
        "## Suggestions",
        "",
        f"Steady: the suggestions at N_t = {STEADY[0]}..{STEADY[-1]} test observations of a BO "
        "loop, ScaML-GP and headstart's plain GP on the same observations (one thread, UCB "
        f"beta = 9). Cold: a fresh ScaML-GP model's first suggestion at N_t = {N_T}. Second "
        "study: rebuilding the meta GPs from the model cache (JSON, no refit) and the first "
        "`ask()` of a study whose sources' fit is already cached (SQLite).",
        "",
        "| M | ScaML steady, median (s) | plain GP, median (s) | ratio | ScaML steady, mean (s) "
        "| plain GP, mean (s) | ratio | cold (s) | cache rebuild (s) | second study's first ask (s) |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for m in Ms:
        sm, gm = value(m, "suggest", "headstart-scaml"), value(m, "suggest", "headstart-gp")
        sa = value(m, "suggest-mean", "headstart-scaml")
        ga = value(m, "suggest-mean", "headstart-gp")
        lines.append(
            f"| {m} | {cell(m, 'suggest', 'headstart-scaml')} | "
            f"{cell(m, 'suggest', 'headstart-gp')} | {ratio(sm, gm)} | "
            f"{cell(m, 'suggest-mean', 'headstart-scaml')} | "
            f"{cell(m, 'suggest-mean', 'headstart-gp')} | {ratio(sa, ga)} | "
            f"{cell(m, 'suggest-cold', 'headstart-scaml')} | "
            f"{cell(m, 'cache-rebuild', 'headstart-scaml')} | "
            f"{cell(m, 'first-ask-cached', 'headstart-scaml')} |"
        )
    path.with_suffix(".md").write_text("\n".join(lines) + "\n")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--ms", type=int, nargs="+", default=[16, 64, 256, 1024, 2048])
    parser.add_argument("--max-one-by-one", type=int, default=256)
    parser.add_argument("--max-mtgp", type=int, default=16)
    parser.add_argument("--out", type=Path, default=OUT / "scaml_scaling.csv")
    args = parser.parse_args(argv)
    import torch

    torch.set_num_threads(2)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    done = _load(args.out)

    def single(measure, method, fn):
        return ((measure, method),), lambda tasks, _: {(measure, method): (fn(tasks), "")}

    for M in args.ms:
        tasks = hartmann6_family(M, seed=M)
        fitted = []  # the suggestion jobs share one meta fit (made when the first one runs)

        def meta_gps(tasks=tasks, fitted=fitted):
            if not fitted:
                from headstart._transfer.metafit import fit_meta_gps

                fitted.append(fit_meta_gps(tasks, np.zeros(D, dtype=bool), seed=0))
            return fitted[0]

        jobs = [
            (*single("meta_fit", "headstart-batched", time_batched), True),
            (*single("meta_fit", "botorch-one-by-one", time_one_by_one), args.max_one_by_one >= M),
            (*single("meta_fit", "botorch-mtgp", time_mtgp), args.max_mtgp >= M),
            (
                (("suggest", "headstart-scaml"), ("suggest", "headstart-gp")),
                time_steady,
                M <= MAX_SUGGEST_M,
            ),
            ((("suggest-cold", "headstart-scaml"),), time_cold, True),
            ((("first-ask-cached", "headstart-scaml"),), time_second_study, True),
        ]
        for keys, fn, run in jobs:
            if all((M, *key) in done for key in keys) or not run:
                continue
            print(f"M={M} {', '.join(' '.join(k) for k in keys)} ...", flush=True)
            try:
                results = fn(tasks, meta_gps)
            except Exception as e:  # recorded, not hidden
                results = {key: (math.nan, f"failed: {type(e).__name__}") for key in keys}
            for (measure, method), (seconds, note) in results.items():
                print(f"  {measure} {method}: {seconds:.4f} s {note}", flush=True)
                _append(args.out, (M, measure, method, f"{seconds:.6g}", note))
    report(args.out)
    print(f"wrote {args.out.with_suffix('.md')}")


if __name__ == "__main__":
    main()
