r"""Does the sources' agreement with each other predict transfer to the target? (issue 31)

Issue 31's trials-1-5 target asks transfer to beat both the warm start (which trusts the
sources' winners) and plain GP-BO (which ignores the sources) on every family. A default could
only do both if it knew, before the first trial, how far to trust the sources. The signal
available then is the sources' agreement with each other.

For every instance (family, seed) of the HPO-B selection families
(:data:`~headstart.benchmarks.hpob_transfer.SELECTION_SPACES`) this script computes:

* ``source_agreement`` -- the mean over ordered pairs ``(i, j)``, ``i != j``, of the Spearman
  correlation between source ``i``'s fitted meta GP mean (ScaML-GP's, :func:`fit_meta_gps`) at
  source ``j``'s configurations and source ``j``'s values;
* ``target_agreement`` -- the Spearman correlation between the sources' mean prediction and
  the target's own pool values (known only after target data);

and correlates both with ScaML-GP's regret relative to plain GP-BO and to the warm start in a
committed transfer-protocol run (``--runs``): the log ratio over trials 1-5, at trial 10 and at
the final trial.

Usage::

    python benchmarks/source_agreement.py        # writes docs/benchmarks/source_agreement.{csv,md}
"""

from __future__ import annotations

import argparse
import warnings
from pathlib import Path

import numpy as np

DOCS = Path(__file__).resolve().parent.parent / "docs" / "benchmarks"
RUNS = DOCS / "transfer_protocol_noise_selection.csv.gz"
TRANSFER, GP, WARM = "headstart-scaml-default", "headstart-gp", "headstart-warmstart"
FLOOR = 1e-3  # regret floor of the log ratios (normalized regret; 0 = the pool's best)


def source_agreement(meta, sources) -> float:
    """Mean over ordered pairs ``i != j`` of the Spearman correlation between source ``i``'s
    meta GP mean at source ``j``'s configurations and source ``j``'s values (NaN pairs, from a
    constant source, skipped; NaN if all are)."""
    from scipy.stats import ConstantInputWarning, spearmanr

    pairs = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConstantInputWarning)
        for j, source in enumerate(sources):
            means = meta.mean(source.X)  # M x n_j
            pairs += [spearmanr(means[i], source.y_max()).statistic
                      for i in range(len(sources)) if i != j]  # fmt: skip
    pairs = np.asarray(pairs, dtype=float)
    return float(pairs[np.isfinite(pairs)].mean()) if np.isfinite(pairs).any() else float("nan")


def agreements(family: str, seed: int) -> dict[str, float]:
    """``source_agreement`` and ``target_agreement`` of one instance (module docstring)."""
    from scipy.stats import spearmanr

    from headstart._transfer.metafit import fit_meta_gps
    from headstart.benchmarks import get_task

    task = get_task(family).instance(seed)
    sources = task.meta_tasks
    # HPO-B spaces are all numeric (unit cube), so no column is categorical, as in ScaML-GP's fit
    meta = fit_meta_gps(sources, np.zeros(sources[0].X.shape[1], dtype=bool), seed=0)
    pool = task.objective.pool
    target = spearmanr(meta.mean(pool.X).mean(axis=0), pool.accuracy).statistic
    return {"source_agreement": source_agreement(meta, sources), "target_agreement": target}


def log_ratios(runs, method: str, baseline: str):
    """Per (task, seed): ``log`` of ``method``'s regret over ``baseline``'s (floored), over
    trials 1-5, at trial 10 and at the final trial."""
    import pandas as pd

    out = {}
    for name, cut in (("1-5", lambda g: g[g.iteration <= 5]),
                      ("t=10", lambda g: g[g.iteration == 10]),
                      ("final", lambda g: g[g.iteration == g.budget])):  # fmt: skip
        per = {m: cut(runs[runs.method == m]).groupby(["task", "seed"]).regret.mean()
               for m in (method, baseline)}  # fmt: skip
        out[name] = np.log((per[method] + FLOOR) / (per[baseline] + FLOOR))
    return pd.DataFrame(out)


def main(argv: list[str] | None = None) -> int:
    import pandas as pd
    from scipy.stats import spearmanr

    from headstart.bench_cli import command_line
    from headstart.benchmarks import TASKS
    from headstart.benchmarks.hpob_transfer import (
        SELECTION_SPACES,
        register_hpob_transfer_families,
    )

    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--seeds", type=int, default=10)
    p.add_argument("--runs", type=Path, default=RUNS, help="A transfer_protocol.py CSV.")
    p.add_argument("--families", default=None, help="Comma-separated families (default all).")
    p.add_argument("--out", type=Path, default=DOCS)
    args = p.parse_args(argv)
    families = [f"hpob-{s}{x}" for s in SELECTION_SPACES for x in ("", "-s2")]
    families = args.families.split(",") if args.families else families
    if not all(f in TASKS for f in families):  # (the HPO-B ones need the data to register)
        register_hpob_transfer_families()
    rows = [{"task": f, "seed": s, **agreements(f, s)} for f in families for s in range(args.seeds)]
    frame = pd.DataFrame(rows).set_index(["task", "seed"])
    args.out.mkdir(parents=True, exist_ok=True)
    frame.to_csv(args.out / "source_agreement.csv", float_format="%.4f")
    runs = pd.read_csv(args.runs)
    runs = runs[runs.task.isin(families)]
    frame = frame.dropna()
    lines = [
        "# Does the sources' agreement predict transfer? (issue 31)",
        "",
        f"Generated by `{command_line('source_agreement', argv)}` from "
        f"`{args.runs.name}` ({len(frame)} instances of the {len(families)} HPO-B selection "
        "families with a defined agreement). Spearman correlations over instances; the log "
        f"ratios are of `{TRANSFER}`'s regret over the baseline's (floored at {FLOOR}).",
        "",
        "| signal | vs | 1-5 | t=10 | final |",
        "|---|---|---:|---:|---:|",
    ]
    for signal in ("source_agreement", "target_agreement"):
        for baseline in (GP, WARM):
            ratio = log_ratios(runs, TRANSFER, baseline).reindex(frame.index)
            cells = []
            for col in ("1-5", "t=10", "final"):
                r = spearmanr(frame[signal], ratio[col], nan_policy="omit")
                cells.append(f"{r.statistic:+.2f} (p = {r.pvalue:.2f})")
            lines.append(f"| {signal} | `{baseline}` | " + " | ".join(cells) + " |")
    both = spearmanr(frame.source_agreement, frame.target_agreement)
    lines += [
        "",
        f"Source agreement against target agreement: rho = {both.statistic:+.2f} "
        f"(p = {both.pvalue:.2f}).",
        "",
    ]
    (args.out / "source_agreement.md").write_text("\n".join(lines))
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
