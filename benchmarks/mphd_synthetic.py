r"""MPHD on the paper's synthetic super-datasets "L" and "S": does the learned prior approach the true one?

Fan, Han & Wang (2024), App. E.1 (``--family``):

- **"L"** (the default): 20 domains of 20 sub-datasets; domain ``i`` has ``d_i`` in 2..14
  dimensions; its lengthscales are drawn from ``Gamma(a(d), b(d))`` with
  ``a(d) = 0.07692 d + 0.8462`` and ``b(d) = -0.3539 d + 5.7077`` (shape, rate), its signal
  variance from ``Gamma(15, 100)`` and its noise variance from ``Gamma(1, 10000)``. These
  Gammas have shapes of 1-2: wide, so even the true prior says little.
- **"S"**: 20 domains of 10 sub-datasets, ``d`` in 2..5, every lengthscale from
  ``Gamma(10, 30)`` (an informative prior: 90% of its mass in [0.18, 0.53]), signal variance
  ``Gamma(1, 1)``, noise variance ``Gamma(10, 100000)``. The paper draws its functions with a
  Matérn-3/2 kernel; here both families use the Matérn-5/2 of headstart's GP.

Every sub-dataset is a GP draw with its domain's parameters at uniform inputs in ``[0, 1]^d``.
We draw ``n_points`` points per sub-dataset (pre-training subsamples that many anyway; the paper
draws 3,000 (L) or 300 (S) and subsamples 50 per Adam step).

1. **Prior recovery (paper Fig. 6)**: KL(true lengthscale Gamma || learned Gamma), averaged over
   the family's dimensions, against the number of training domains, for the paper's context
   network (headstart's default), ``auto`` (the network pulled toward the shared Gamma, or the
   shared Gamma, by leave-one-domain-out likelihood) and the "Non-NN" shared Gamma. Step 1 is run once on all training domains (its per-domain estimates do not
   depend on the other domains); step 2 on the first N.
2. **BO regret (paper Fig. 7, pool-based)**: on 4 held-out domains, a 1,000-point pool per
   sub-dataset (a joint GP draw); MPHD trained on 16 domains vs the shared Gamma, the paper's
   hand-specified prior and headstart's default GP; 5 random initial points; normalized regret.
3. **The upper bound** (issue 33): the same GP under the *generating* lengthscale Gamma of each
   held-out domain (``headstart-mphd-true``; signal and noise Gammas as MPHD's), and the share
   of its gain over the default GP that each learned prior recovers.

Writes ``<out>/mphd_synthetic.{csv,md,png}`` and ``mphd_synthetic_bo.csv.gz`` (family S:
``mphd_synthetic_S.*``). Usage::

    python benchmarks/mphd_synthetic.py                  # 10 super-dataset seeds, BO budget 40
    python benchmarks/mphd_synthetic.py --family S
    python benchmarks/mphd_synthetic.py --seeds 1 --bo-budget 10 --out /tmp/ms   # smoke run
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np

DOCS = Path(__file__).resolve().parent.parent / "docs" / "benchmarks"
N_DOMAINS, N_TRAIN = 20, 16
TRAIN_COUNTS = (3, 4, 8, 16)
MODES = ("auto", "network", "shared")
BO_METHODS = (
    "headstart-mphd,headstart-mphd-auto,headstart-mphd-shared,headstart-mphd-true,"
    "headstart-gp-hand,headstart-gp-init5"
)


@dataclass(frozen=True)
class Family:
    """One of the paper's synthetic super-datasets (module docstring)."""

    name: str
    n_sub: int  # sub-datasets per domain
    dims: tuple[int, ...]  # domain i has dims[i % len(dims)] dimensions
    signal: tuple[float, float]  # Gamma (shape, rate) of the signal variance
    noise: tuple[float, float]

    def true_gamma(self, d: int) -> tuple[float, float]:
        if self.name == "S":
            return 10.0, 30.0
        return 0.07692 * d + 0.8462, -0.3539 * d + 5.7077

    @property
    def prefix(self) -> str:
        """File and task names: family L keeps the names of the runs before S existed."""
        return "" if self.name == "L" else f"{self.name}-"

    @property
    def outputs(self) -> str:
        return "mphd_synthetic" if self.name == "L" else f"mphd_synthetic_{self.name}"


FAMILIES = {
    "L": Family("L", 20, tuple(range(2, 15)), (15.0, 100.0), (1.0, 10000.0)),
    "S": Family("S", 10, (2, 3, 4, 5), (1.0, 1.0), (10.0, 100000.0)),
}
L = FAMILIES["L"]


def _draw(rng, X, ell, s, noise):
    from headstart._gp.kernels import matern52_np

    r2 = (((X[:, None, :] - X[None]) / ell) ** 2).sum(-1)
    K = s * np.asarray(matern52_np(r2)[0]) + (noise + 1e-6) * np.eye(len(X))
    return np.linalg.cholesky(K) @ rng.standard_normal(len(X))


def super_dataset(seed: int, n_points: int, family: Family = L):
    """``[(d, ell, s, noise, [(X, y), ...])]`` for the 20 domains of one super-dataset seed."""
    rng = np.random.default_rng(seed if family.name == "L" else [seed, ord(family.name)])
    out = []
    for i in range(N_DOMAINS):
        d = family.dims[i % len(family.dims)]
        a, b = family.true_gamma(d)
        ell = rng.gamma(a, 1 / b, size=d)
        s = rng.gamma(family.signal[0], 1 / family.signal[1])
        noise = rng.gamma(family.noise[0], 1 / family.noise[1])
        subs = []
        for _ in range(family.n_sub):
            X = rng.random((n_points, d))
            subs.append((X, _draw(rng, X, ell, s, noise)))
        out.append((d, ell, s, noise, subs))
    return out


def step1(seed: int, n_points: int, prior_dir: Path, family: Family = L):
    """Step 1 on the 16 training domains of a super-dataset seed (cached as JSON; timed)."""
    from headstart.mphd import Domain
    from headstart.mphd.pretrain import cached_fit_domains

    def make_domains():
        data = super_dataset(seed, n_points, family)
        return [
            Domain(f"s{seed}-d{i}", ("continuous",) * d, tuple(subs))
            for i, (d, _, _, _, subs) in enumerate(data[:N_TRAIN])
        ]

    path = prior_dir / f"synthetic-{family.prefix}{seed}-step1.json"
    fits, kinds, stored = cached_fit_domains(path, make_domains, n_points=n_points, seed=seed)
    return fits, kinds, stored["seconds"]


def recovery(jobs, n_points, prior_dir: Path, family: Family = L) -> list[dict]:
    """KL rows for each ``(seed, mode)`` in ``jobs``."""
    from headstart.mphd.pretrain import fit_priors, gamma_kl

    rows = []
    for seed, mode in jobs:
        fits, kinds, seconds = step1(seed, n_points, prior_dir, family)
        for n in TRAIN_COUNTS:
            prior = fit_priors(fits[:n], kinds, lengthscale=mode, seed=seed)
            kls = []
            for d in family.dims:
                a, b = prior.lengthscale_gammas(["continuous"] * d)
                kls.append(gamma_kl(*family.true_gamma(d), float(a[0]), float(b[0])))
            rows.append(
                {
                    "seed": seed,
                    "n_train": n,
                    "mode": mode,
                    "kl": float(np.mean(kls)),
                    "step1_seconds": seconds,
                }
            )
    return rows


def true_prior(d: int, learned: Path, path: Path, family: Family = L) -> Path:
    """The upper bound's prior file (issue 33): the generating lengthscale Gamma of a
    ``d``-dimensional domain for every lengthscale, and the signal and noise Gammas of the learned
    prior ``learned`` (in standardized units, the same in every arm), MAP-fitted as MPHD's."""
    from headstart.mphd import PriorModel

    if not path.exists():
        fitted = PriorModel.load(learned)
        PriorModel.shared(
            family.true_gamma(d),
            fitted.outputscale,
            fitted.noise,
            {"true_prior": f"super-dataset {family.name}'s lengthscale Gamma at d = {d}"},
        ).save(path)
    return path


def register_pool(name: str, rng, d: int, ell, s: float, noise: float, priors) -> str:
    """Register a 1,000-point pool of one domain (a fresh joint GP draw at uniform inputs, values
    scaled to [0, 1] and maximized as "accuracy") as the pool task ``name``; ``priors`` are the
    ``(name, path)`` prior files the task carries."""
    from headstart.benchmarks.functions import Task, register_task
    from headstart.benchmarks.hpob import PoolObjective
    from headstart.space import Float, SearchSpace

    X = rng.random((1000, d))
    y = _draw(rng, X, ell, s, noise)
    y = (y - y.min()) / (y.max() - y.min())
    space = SearchSpace({f"c{j}": Float(0.0, 1.0) for j in range(d)})
    objective = PoolObjective(X, y, tuple(priors))
    register_task(Task(name, space, objective, float(1.0 - y.max())), overwrite=True)
    return name


def bo_tasks(seed, n_points, prior_dir: Path, family: Family = L) -> list[str]:
    """Register the 4 held-out domains' pools (2 sub-datasets each) as pool tasks."""
    from headstart.mphd.pretrain import fit_priors

    data = super_dataset(seed, n_points, family)
    tag = f"synthetic-{family.prefix}{seed}"
    paths = {m: prior_dir / f"{tag}-{m}.json" for m in MODES}
    if not all(p.exists() for p in paths.values()):
        fits, kinds, _ = step1(seed, n_points, prior_dir, family)
        for mode, path in paths.items():
            if not path.exists():
                fit_priors(fits, kinds, lengthscale=mode, seed=seed).save(path)
    rng = np.random.default_rng([seed, 99])
    names = []
    for i, (d, ell, s, noise, _) in enumerate(data[N_TRAIN:]):
        true = true_prior(d, paths["network"], prior_dir / f"{tag}-true-d{d}.json", family)
        priors = (*((m, str(p)) for m, p in paths.items()), ("true", str(true)))
        for k in range(2):
            name = f"synth{family.name}-{seed}-{i}-{k}"
            names.append(register_pool(name, rng, d, ell, s, noise, priors))
    return names


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--family", choices=sorted(FAMILIES), default="L", help="super-dataset")
    p.add_argument("--seeds", type=int, default=10)
    p.add_argument("--n-points", type=int, default=64)
    p.add_argument("--bo-budget", type=int, default=40)
    p.add_argument("--bo-seeds", type=int, default=2)
    p.add_argument(
        "--search",
        choices=("pool", "continuous"),
        default="pool",
        help="pool: each suggestion is the acquisition's argmax over the pool (the paper's "
        "protocol); continuous: the engine's search, scored at the nearest pool point",
    )
    p.add_argument(
        "--acquisition",
        choices=("logei", "pi"),
        default="logei",
        help="pi: PI with the paper's target margin (pool search only; methods -pool-pi)",
    )
    p.add_argument(
        "--methods", default=BO_METHODS, help="comma-separated (suffixed -pool/-pool-pi as set)"
    )
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--out", type=Path, default=DOCS)
    args = p.parse_args(argv)
    import pandas as pd

    from headstart.benchmarks.runner import pack_csv, read_results, run_benchmark, unpack_csv

    family = FAMILIES[args.family]
    args.out.mkdir(parents=True, exist_ok=True)
    prior_dir = args.out / "mphd_priors"
    prior_dir.mkdir(exist_ok=True)
    kl_csv = args.out / f"{family.outputs}.csv"
    kl = pd.read_csv(kl_csv) if kl_csv.exists() else pd.DataFrame({"seed": [], "mode": []})
    done = set(zip(kl["seed"], kl["mode"], strict=True))
    missing = [(seed, m) for seed in range(args.seeds) for m in MODES if (seed, m) not in done]
    if missing:  # resumable: each super-dataset seed's rows of each mode once
        new = pd.DataFrame(recovery(missing, args.n_points, prior_dir, family))
        kl = pd.concat([kl, new], ignore_index=True) if len(kl) else new
        kl.to_csv(kl_csv, index=False)
    names = [
        n for seed in range(args.seeds) for n in bo_tasks(seed, args.n_points, prior_dir, family)
    ]
    bo_csv = unpack_csv(args.out / f"{family.outputs}_bo.csv")
    methods = [m for m in args.methods.split(",") if m]
    if args.search == "pool":
        suffix = "-pool-pi" if args.acquisition == "pi" else "-pool"
        methods = [f"{m}{suffix}" for m in methods]
    run_benchmark(
        methods, names, range(args.bo_seeds), args.bo_budget, bo_csv, workers=args.workers
    )
    bo = read_results(bo_csv)
    pack_csv(bo_csv)
    bo = bo[bo["task"].isin(names)]
    table = kl.groupby(["n_train", "mode"])["kl"].agg(["mean", "std"]).unstack("mode")
    flag = "" if family.name == "L" else f" --family {family.name}"
    dims = f"d = {min(family.dims)}..{max(family.dims)}"
    lines = [
        f"# MPHD on the synthetic super-dataset {family.name} (prior recovery and BO)",
        "",
        f"Generated by `python benchmarks/mphd_synthetic.py{flag}` ({args.seeds} super-dataset "
        f"seeds, {args.n_points} points per sub-dataset, {family.n_sub} sub-datasets per "
        "domain).",
        "",
        f"![kl and regret]({family.outputs}.png)",
        "",
        f"### KL(true || learned) of the lengthscale Gamma, mean over {dims}",
        "",
        "`network` is the paper's context network (headstart's default, `headstart-mphd`); "
        "`auto` pulls it toward the shared Gamma as far as leave-one-domain-out likelihood says, "
        "or takes the shared Gamma (`headstart-mphd-auto`).",
        "",
        "| training domains | "
        + " | ".join(f"{m} (mean +- sd)" for m in MODES if ("mean", m) in table)
        + " |",
        "|---:|" + "---:|" * sum(("mean", m) in table for m in MODES),
    ]
    for n, row in table.iterrows():
        cells = [
            f"{row[('mean', m)]:.3f} +- {row[('std', m)]:.3f}"
            for m in MODES
            if ("mean", m) in table
        ]
        lines.append(f"| {n} | " + " | ".join(cells) + " |")
    checkpoints = sorted({t for t in (10, 25, args.bo_budget) if t <= args.bo_budget})
    reg = bo[bo["iteration"].isin(checkpoints)].groupby(["method", "iteration"])["regret"]
    reg = reg.mean().unstack()
    lines += [
        "",
        f"### BO on the 4 held-out domains x 2 pools x {args.seeds} super-datasets, "
        f"{args.bo_seeds} seeds (normalized regret, pool-based)",
        "",
        "| method | " + " | ".join(f"t={t}" for t in checkpoints) + " | s / suggestion |",
        "|---|" + "---:|" * (len(checkpoints) + 1),
    ]
    secs = bo.groupby("method")["seconds_suggest"].mean()
    for method, row in reg.iterrows():
        cells = " | ".join(f"{row[t]:.4f}" for t in checkpoints)
        lines.append(f"| {method} | {cells} | {secs[method]:.3f} |")
    for suffix in ("", "-pool", "-pool-pi"):
        lines += upper_bound_lines(bo, checkpoints, suffix)
    (args.out / f"{family.outputs}.md").write_text("\n".join(lines) + "\n")
    _plot(table, bo, args.out / f"{family.outputs}.png")
    sys.stdout.write("\n".join(lines) + "\n")
    return 0


def upper_bound_lines(bo, checkpoints, suffix: str = "") -> list[str]:
    """The upper bound (issue 33): the true prior's gain over the default GP, paired by task and
    seed (mean +- standard error), and the share of it each learned prior recovers; among the
    methods whose names end in ``suffix`` (``"-pool"``: the pool-argmax protocol)."""
    gp, true = f"headstart-gp-init5{suffix}", f"headstart-mphd-true{suffix}"
    if not {gp, true} <= set(bo["method"]):
        return []
    ours = [
        m
        for m in bo["method"].unique()
        if m.endswith(suffix) and m.count("-pool") == (1 if suffix else 0)
    ]
    wide = bo[bo["iteration"].isin(checkpoints) & bo["method"].isin(ours)].pivot_table(
        index=["task", "seed", "iteration"], columns="method", values="regret"
    )
    protocol = {
        "": "LogEI, continuous search, nearest pool point",
        "-pool": "LogEI, argmax over the pool",
        "-pool-pi": "PI with a target margin of 0.5 sd, argmax over the pool",
    }[suffix]
    lines = [
        "",
        f"### The upper bound: the generating lengthscale Gamma as the prior ({protocol})",
        "",
        "Gain = default GP's regret - the method's, paired by pool and seed (mean +- standard "
        "error; positive: better than the default GP). Share = the method's gain / the true "
        "prior's (the share of the gap it closes; `nan` where the true prior's gain is not above 2 "
        "standard errors: then there is no gap to close).",
        "",
        "| method | " + " | ".join(f"gain t={t} | share t={t}" for t in checkpoints) + " |",
        "|---|" + "---:|---:|" * len(checkpoints),
    ]
    gain = {m: (wide[gp] - wide[m]).groupby(level="iteration") for m in wide.columns if m != gp}
    for method, g in gain.items():
        mean, sem = g.mean(), g.sem()
        cells = []
        for t in checkpoints:
            ref, ref_se = gain[true].mean()[t], gain[true].sem()[t]
            share = mean[t] / ref if ref > 2 * ref_se else float("nan")
            cells += [f"{mean[t]:.4f} +- {sem[t]:.4f}", f"{share:.2f}"]
        lines.append(f"| {method} | " + " | ".join(cells) + " |")
    return lines


def _plot(table, bo, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from headstart.benchmarks.report import draw_mean_curves

    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(10, 4))
    labels = {"network": "MPHD network (default)", "auto": "auto", "shared": "Non-NN (shared)"}
    for mode, label in labels.items():
        if ("mean", mode) not in table:
            continue
        ax1.errorbar(
            table.index,
            table[("mean", mode)],
            yerr=table[("std", mode)],
            label=label,
            marker="o",
            capsize=3,
        )
    ax1.set_xlabel("training domains")
    ax1.set_ylabel("KL(true || learned), mean over d")
    ax1.set_yscale("log")
    ax1.legend()
    draw_mean_curves(ax2, bo, "regret", "mean normalized regret")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


if __name__ == "__main__":
    sys.exit(main())
