r"""ABRAC past its exact block: where its suggestions land, and what the local search costs (issue 32).

Past ``local_points`` (100) trials ABRAC's residual GP is exact among the 100 trials nearest the
best one and counts the others ("the rest") as noise in the head's weights. Three variants of the
same model, each in its own process:

* ``block``: the block's posterior alone (the model before this benchmark's fix: near a rest
  point the residual keeps its prior variance);
* ``nearest``: every prediction also conditioned on its nearest rest point, and the local
  search climbing that posterior (which jumps where the nearest point changes);
* ``default``: the same predictions, the local search climbing ``ResidualPosterior.focus`` (the
  block plus the rest points nearest its starts, a smooth posterior).

Two measurements per variant:

1. **Where the suggestions land**: ABRAC (the defaults) on FC-Net-naval, seed 6, trials 101-140:
   the share of suggestions whose nearest evaluated point is a rest point, and the median ratio
   of the model's predictive variance at the suggestion to the exact residual model's (the same
   hyperparameters, every trial in one block).
2. **The local search's cost**: a study told ``n`` scrambled Sobol points of quadratic-loo target
   0 (``n`` = 500 and 1,000), then 27 ask + tell pairs: L-BFGS-B posterior-and-gradient
   evaluations per suggestion and mean seconds per ask.

Writes ``docs/benchmarks/abrac_local_rest.{csv,md}``.

Usage::

    python benchmarks/abrac_local_rest.py [--trials 140] [--sizes 500,1000] [--out DIR]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

OUT = Path(__file__).resolve().parent.parent / "docs" / "benchmarks"
VARIANTS = ("block", "nearest", "default")


def _patch(variant: str) -> None:
    """Turn the current code into ``variant`` (module docstring)."""
    from headstart._engine.acquisition import Criterion
    from headstart._transfer.neural_residual import ResidualPosterior

    if variant == "block":
        init = ResidualPosterior.__init__

        def block_only(self, *args, **kwargs):
            kwargs["rest"] = None
            init(self, *args, **kwargs)

        ResidualPosterior.__init__ = block_only
    if variant in ("block", "nearest"):
        Criterion.focused = lambda self, X: self


def landing(trials: int) -> dict:
    """Measurement 1 (module docstring)."""
    import headstart as hs
    from headstart._engine import engine
    from headstart._gp.kernels import sq_dist_np
    from headstart._transfer.neural_residual import ResidualPosterior
    from headstart.benchmarks.functions import get_task, resolve

    task = resolve(get_task("fcnet-naval-n1024"), 6)
    seen: dict = {}
    condition, suggest = engine.BOEngine._condition, engine.BOEngine.suggest

    def keep_condition(self, X, y, rng):
        out = condition(self, X, y, rng)
        seen.update(posterior=out[0], X=X, y=out[1])
        return out

    def keep_suggest(self, *args, **kwargs):
        seen["x"] = suggest(self, *args, **kwargs)
        return seen["x"]

    engine.BOEngine._condition, engine.BOEngine.suggest = keep_condition, keep_suggest
    study = hs.create_study(
        "local-rest", task.space, direction="minimize", storage=None, method="abrac", seed=6,
        use_priors=False, deterministic=True, transfer_from=list(task.meta_tasks),
    )  # fmt: skip
    near_rest, ratios, best = [], [], np.inf
    for t in range(1, trials + 1):
        seen.clear()
        trial = study.ask()
        value = float(task.objective(trial.params))
        study.tell(trial, value)
        best = min(best, value)
        if t <= 100 or "posterior" not in seen:
            continue
        post, X, x = seen["posterior"], seen["X"], seen["x"][None, :]
        to_block = sq_dist_np(x, post.X, post.is_cat, post.w).min()
        to_any = sq_dist_np(x, X, post.is_cat, post.w).min()
        near_rest.append(to_any < to_block)
        exact = ResidualPosterior(post.net, post.r, X, seen["y"], post.is_cat, post.theta)
        ratios.append(post.posterior(x)[1][0] / exact.posterior(x)[1][0])
    return {
        "share_near_rest": float(np.mean(near_rest)),
        "variance_ratio": float(np.median(ratios)),
        "suggestions": len(ratios),
        "best": best,
    }


def search_cost(n: int, asks: int = 27) -> dict:
    """Measurement 2 (module docstring)."""
    from headstart._transfer import neural_residual
    from headstart.benchmarks.functions import get_task, resolve
    from headstart.benchmarks.methods import study_at_sobol_points

    calls = [0]
    grad = neural_residual.ResidualPosterior.posterior_and_grad

    def counted(self, X):
        calls[0] += 1
        return grad(self, X)

    neural_residual.ResidualPosterior.posterior_and_grad = counted
    task = resolve(get_task("quadratic-loo"), 0)
    study = study_at_sobol_points(
        task, n, "search-cost", "abrac", deterministic=True, transfer_from=task.meta_tasks
    )
    trial = study.ask()  # the full fit from every start
    study.tell(trial, float(task.objective(trial.params)))
    calls[0], seconds = 0, []
    for _ in range(asks):
        t0 = time.perf_counter()
        trial = study.ask()
        seconds.append(time.perf_counter() - t0)
        study.tell(trial, float(task.objective(trial.params)))
    return {"evaluations": calls[0] / asks, "seconds": float(np.mean(seconds))}


def _child(variant: str, trials: int, sizes: list[int]) -> list[dict]:
    _patch(variant)
    rows = [{"variant": variant, "part": "landing", **landing(trials)}]
    for n in sizes:
        rows.append({"variant": variant, "part": f"search n={n}", **search_cost(n)})
    return rows


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--trials", type=int, default=140)
    p.add_argument("--sizes", default="500,1000")
    p.add_argument("--out", type=Path, default=OUT)
    p.add_argument("--child", default=None, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",") if s]
    if args.child:
        print(json.dumps(_child(args.child, args.trials, sizes)))
        return
    import pandas as pd

    rows = []
    for variant in VARIANTS:  # one process each: the patches stay in their own
        cmd = [sys.executable, __file__, "--child", variant, "--trials", str(args.trials)]
        cmd += ["--sizes", args.sizes]
        out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
        rows += json.loads(out.strip().splitlines()[-1])
        print(variant, "done", flush=True)
    frame = pd.DataFrame(rows)
    args.out.mkdir(parents=True, exist_ok=True)
    frame.to_csv(args.out / "abrac_local_rest.csv", index=False)
    land = frame[frame.part == "landing"].set_index("variant")
    lines = [
        "# ABRAC past its exact block: where suggestions land, what the search costs",
        "",
        f"Generated by `python benchmarks/abrac_local_rest.py` (naval seed 6, trials 101-"
        f"{args.trials}; search cost at n = {args.sizes}). Variants: `block` = the block's "
        "posterior alone (before), `nearest` = conditioned on the nearest rest point too, "
        "search on it, `default` = the same, search on `focus`. FC-Net's columns are all "
        "integer grids, searched by discrete moves without L-BFGS-B, so on naval `nearest` and "
        "`default` make the same suggestions; the search's cost is measured on the quadratics, "
        "whose columns are continuous.",
        "",
        "| variant | suggestions beside a rest point | model / exact variance there (median) |"
        " best value at the last trial |",
        "|---|---:|---:|---:|",
    ]
    for v in VARIANTS:
        r = land.loc[v]
        lines.append(f"| {v} | {r.share_near_rest:.0%} | {r.variance_ratio:.3g} | {r.best:.4g} |")
    lines += ["", "| variant | " + " | ".join(
        f"evaluations / suggestion (n = {n}) | s / ask (n = {n})" for n in sizes
    ) + " |", "|---|" + "---:|---:|" * len(sizes)]  # fmt: skip
    for v in VARIANTS:
        cells = []
        for n in sizes:
            r = frame[(frame.variant == v) & (frame.part == f"search n={n}")].iloc[0]
            cells += [f"{r.evaluations:.0f}", f"{r.seconds:.3f}"]
        lines.append(f"| {v} | " + " | ".join(cells) + " |")
    text = "\n".join(lines) + "\n"
    (args.out / "abrac_local_rest.md").write_text(text)
    print(text)


if __name__ == "__main__":
    main()
