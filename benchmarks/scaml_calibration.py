r"""How well ScaML-GP's predictive variance covers the target, with and without the weights'
uncertainty (a diagnostic for issues 31 and 34; no default depends on it).

ScaML-GP fits its source weights ``w`` by MAP (Tighineanu et al. 2024, Eq. 9) and predicts
with them as if they were known. This script conditions it on ``n`` random configurations of an
FC-Net table (the other three data sets' tables as sources, as ``multi_objective.py``'s transfer
arm has them), predicts every configuration of the table, and reports the mean of ``z^2 =
(y - mean)^2 / var`` over the table (1 for a calibrated Gaussian predictive; above 1 is
overconfident), for each output (validation loss, training time):

* ``scaml``: the posterior as BO uses it;
* ``scaml+w``: the same plus the weights' Laplace variance, ``g(x)^T Sigma_w g(x)``, where
  ``Sigma_w`` is the weights' block of the inverse Hessian of the MAP objective
  (:meth:`~headstart._transfer.scaml.ScaML.weight_covariance`) and ``g_m(x) = (mu_m(x) -
  k(x, X_t) A^{-1} mu_m(X_t)) / s``, the derivative of the posterior mean in ``w_m`` with the
  covariance held fixed (a first-order propagation);
* ``gp``: GP-BO's Matérn GP on the same ``n`` points, for reference.

A mean ``z^2`` can come from a few configurations predicted far off, so the median ``z^2`` is
reported beside it (a Gaussian's median ``z^2`` is 0.45). The CSV also holds the mean ``z`` over
the table's best 3% (``top_z``; negative: the model predicts them better than they are), and
for ``scaml+w`` whether the weights' covariance was not usable (``fallback``: the Hessian's
block was not positive semi-definite, and no variance was added).

Usage::

    python benchmarks/scaml_calibration.py  # docs/benchmarks/scaml_calibration.{csv,md}
"""

from __future__ import annotations

import argparse
import itertools
import sys
from pathlib import Path

import numpy as np

DOCS = Path(__file__).resolve().parent.parent / "docs" / "benchmarks"
PROBLEMS = ("FCNet-slice", "FCNet-protein", "FCNet-naval", "FCNet-parkinsons")
OUTPUTS = ("loss", "time")
MODELS = ("scaml", "scaml+w", "gp")
FIELDS = ("problem", "output", "seed", "n", "model", "z2", "z2_median", "top_z", "fallback")


def _grid(ev) -> list[dict]:
    """Every configuration of the table (grid indices by parameter)."""
    sizes = [range(len(values)) for values in ev.grids.values()]
    return [dict(zip(ev.grids, index, strict=True)) for index in itertools.product(*sizes)]


def _study(ev, seed: int, method: str, loss_only: bool = False):
    """A target study of ``ev`` (both outputs, or the validation loss alone) with ``method``;
    ``"scaml"`` gets the other tables' trials as sources."""
    import headstart as hs
    import multi_objective as mo

    settings = mo._headstart_settings(ev, seed)
    if loss_only:
        settings.pop("directions")
        settings["direction"] = "minimize"
    if method == "scaml":
        for name, rows in ev.sources(seed).items():
            source = hs.create_study(name, ev.space(), method="random", **settings)
            if loss_only:
                source.add_trials([{"params": p, "values": v[0]} for p, v, _ in rows])
            else:
                source.add_trials(mo.headstart_rows(ev, rows))
        settings["transfer_from"] = list(ev.sources(seed))
    return hs.create_study("target", ev.space(), method=method, **settings)


def _weights_variance(model, posterior, X_t: np.ndarray, G: np.ndarray) -> np.ndarray | None:
    """``g(x)^T Sigma_w g(x)`` at the rows of ``G`` (normalized units; see the module docs), or
    ``None`` where the weights' covariance is not usable. Every source enters ``g``, also those
    the prediction prunes: the weights are strongly anti-correlated when the sources are nearly
    collinear, and leaving some out would overstate the variance."""
    import scipy.linalg

    cov = model.weight_covariance()
    if not np.isfinite(cov).all():
        return None
    mu_G = model.meta.mean(G) / model.scale  # M x m
    mu_X = model.meta.mean(X_t) / model.scale  # M x n
    cross = posterior._meta(G)[2]
    k = cross / posterior.scale**2 + posterior._test_kernel(G)
    g = mu_G.T - k @ scipy.linalg.cho_solve((posterior.L, True), mu_X.T)
    return np.maximum(np.einsum("mi,ij,mj->m", g, cov, g), 0.0)


def measure(problem: str, seed: int, n: int) -> list[dict]:
    """One (problem, seed, n): a row per output and model."""
    import multi_objective as mo
    from headstart._engine.multi_output import to_model_units

    ev = mo.evaluator(problem)
    grid = _grid(ev)
    truth = -ev.table.reshape(-1, len(OUTPUTS))  # in _grid's order; maximized, as models see it
    rng = np.random.default_rng(seed)
    params = [ev.random_params(rng) for _ in range(n)]
    values = [ev(p)[0] for p in params]
    Y = -np.array(values)
    rows = []
    for method in ("scaml", "gp"):
        study = _study(ev, seed, method)
        study.add_trials([{"params": p, "values": v} for p, v in zip(params, values, strict=True)])
        strategy = study._strategy
        X, G = strategy._encode(params), strategy._encode(grid)
        models = strategy.engine._output_surrogates(len(OUTPUTS))
        for j, (output, model) in enumerate(zip(OUTPUTS, models, strict=True)):
            posterior, y_model = model.condition(X, Y[:, j], np.random.default_rng(seed))
            mean, var = posterior.posterior(G)
            t = np.array([to_model_units(Y[:, j], y_model, v, beyond="range") for v in truth[:, j]])
            top = t >= np.quantile(t, 0.97)
            variants = {method: (var, 0)}
            if method == "scaml":
                extra = _weights_variance(model, posterior, X, G)
                variants["scaml+w"] = (var, 1) if extra is None else (var + extra, 0)
            for name, (v, fallback) in variants.items():
                z2 = (t - mean) ** 2 / v
                row = {"problem": problem, "output": output, "seed": seed, "n": n, "model": name}
                row |= {"z2": float(np.mean(z2)), "z2_median": float(np.median(z2))}
                top_z = float(np.mean((t - mean)[top] / np.sqrt(v[top])))
                rows.append(row | {"top_z": top_z, "fallback": fallback})
    return rows


def pool_bo(problem: str, model: str, seed: int, budget: int, n_initial: int = 3) -> list[float]:
    """``--bo``: the validation loss alone, minimized by LogEI's argmax over the table's
    configurations not yet evaluated, after ``n_initial`` random ones (the same for every
    model); the regret (best loss found minus the table's best) after each trial."""
    import multi_objective as mo
    from headstart._engine.acquisition import log_ei

    ev = mo.evaluator(problem)
    grid = _grid(ev)
    loss = ev.table.reshape(-1, len(OUTPUTS))[:, 0]  # in _grid's order
    study = _study(ev, seed, "gp" if model == "gp" else "scaml", loss_only=True)
    G = study._strategy._encode(grid)
    surrogate = study._strategy.engine.surrogate
    rng = np.random.default_rng(seed)
    taken = [int(i) for i in rng.choice(len(grid), n_initial, replace=False)]
    while len(taken) < budget:
        X = G[taken]
        posterior, y_model = surrogate.condition(X, -loss[taken], np.random.default_rng(seed))
        mean, var = posterior.posterior(G)
        extra = _weights_variance(surrogate, posterior, X, G) if model == "scaml+w" else None
        if extra is not None:
            var = var + extra
        score = log_ei(mean, var, float(np.max(y_model)))
        score[taken] = -np.inf
        taken.append(int(np.argmax(score)))
    return [float(loss[taken[: i + 1]].min() - loss.min()) for i in range(budget)]


def bo_report(frame, argv: list[str] | None, checkpoints=(5, 10, 15, 20)) -> str:
    """``--bo``'s markdown: mean regret per checkpoint and the seed-paired counts of ``scaml+w``
    against ``scaml``."""
    from headstart.bench_cli import command_line

    lines = [
        "# ScaML-GP with the weights' variance in BO: the FC-Net validation loss by pool argmax",
        "",
        f"Generated by `{command_line('scaml_calibration', argv)}` ({frame['seed'].nunique()} "
        "seeds; see `pool_bo`). Mean regret of the log validation loss; in the last column, "
        "seeds where `scaml+w` is lower : higher than `scaml` (the rest tie).",
        "",
        "| problem | t | " + " | ".join(f"`{m}`" for m in MODELS) + " | `scaml+w` vs `scaml` |",
        "|---|---:|" + "---:|" * len(MODELS) + "---|",
    ]
    for problem, part in frame.groupby("problem", sort=False):
        for t in checkpoints:
            at = part[part["trial"] == t].pivot_table(
                index="seed", columns="model", values="regret"
            )
            cells = " | ".join(f"{at[m].mean():.4f}" for m in MODELS)
            lower = int((at["scaml+w"] < at["scaml"]).sum())
            higher = int((at["scaml+w"] > at["scaml"]).sum())
            lines.append(f"| {problem} | {t} | {cells} | {lower} : {higher} |")
    return "\n".join(lines) + "\n"


def report(rows: list[dict], argv: list[str] | None) -> str:
    import pandas as pd

    from headstart.bench_cli import command_line

    frame = pd.DataFrame(rows)
    seeds = frame["seed"].nunique()
    lines = [
        "# ScaML-GP's predictive calibration on the FC-Net tables, with and without the weights' "
        "uncertainty",
        "",
        f"Generated by `{command_line('scaml_calibration', argv)}`: {seeds} seeds, the target "
        "conditioned on n random configurations, the other three tables as sources. Mean over "
        "seeds of the mean `z^2` over the whole table (1 for a calibrated Gaussian predictive, "
        "above 1 overconfident), and in brackets the mean over seeds of the median `z^2` (0.45 "
        "for a calibrated one). `scaml+w` adds the weights' Laplace variance; `gp` is GP-BO's "
        "Matérn GP on the same points. See the script's docstring.",
        "",
        "| problem | output | n | " + " | ".join(f"`{m}`" for m in MODELS) + " |",
        "|---|---|---:|" + "---:|" * len(MODELS),
    ]
    keys = ["problem", "output", "n", "model"]
    means = frame.groupby(keys, sort=False)[["z2", "z2_median"]].mean()
    for (problem, output, n), part in means.groupby(level=[0, 1, 2], sort=False):
        part = part.droplevel([0, 1, 2])
        cells = [f"{part.loc[m, 'z2']:.2f} ({part.loc[m, 'z2_median']:.2f})" for m in MODELS]
        lines.append(f"| {problem} | {output} | {n} | " + " | ".join(cells) + " |")
    fallbacks = int(frame.loc[frame["model"] == "scaml+w", "fallback"].sum())
    runs = int((frame["model"] == "scaml+w").sum())
    lines += [
        "",
        f"In {fallbacks} of {runs} `scaml+w` fits the weights' covariance was not positive "
        "semi-definite; those rows equal `scaml`'s.",
    ]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    import torch

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    torch.set_num_threads(1)
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--problems", default=",".join(PROBLEMS), help="comma-separated FC-Net tables")
    p.add_argument("--seeds", type=int, default=6, help="seeds 0..N-1 (random target points)")
    p.add_argument("--n", default="8,16", help="comma-separated numbers of target points")
    p.add_argument("--out", type=Path, default=DOCS, help="folder of the CSV and the report")
    p.add_argument(
        "--bo", type=int, default=0, metavar="BUDGET",
        help="instead run pool-argmax BO of the loss for BUDGET trials per seed (--seeds seeds)",
    )  # fmt: skip
    args = p.parse_args(argv)
    if args.bo:
        return _main_bo(args, argv)
    rows = [
        row
        for problem in args.problems.split(",")
        for n in map(int, args.n.split(","))
        for seed in range(args.seeds)
        for row in measure(problem, seed, n)
    ]
    args.out.mkdir(parents=True, exist_ok=True)
    from headstart.benchmarks.csvlog import write_rows

    write_rows(args.out / "scaml_calibration.csv", FIELDS, rows)
    text = report(rows, argv)
    (args.out / "scaml_calibration.md").write_text(text)
    sys.stdout.write(text)
    return 0


def _main_bo(args, argv: list[str] | None) -> int:
    import pandas as pd

    rows = [
        {"problem": problem, "model": model, "seed": seed, "trial": t + 1, "regret": r}
        for problem in args.problems.split(",")
        for model in MODELS
        for seed in range(args.seeds)
        for t, r in enumerate(pool_bo(problem, model, seed, args.bo))
    ]
    frame = pd.DataFrame(rows)
    args.out.mkdir(parents=True, exist_ok=True)
    frame.to_csv(args.out / "scaml_calibration_bo.csv", index=False)
    checkpoints = [t for t in (5, 10, 15, 20) if t <= args.bo] or [args.bo]
    text = bo_report(frame, argv, checkpoints)
    (args.out / "scaml_calibration_bo.md").write_text(text)
    sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
