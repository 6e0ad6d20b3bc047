r"""Parallel BO on Hartmann-6 with a slow objective: sequential vs batch vs asynchronous workers.

Each run evaluates ``--budget`` configurations of Hartmann-6, every evaluation sleeping
``--delay`` seconds (a stand-in for training a model), in one of these modes:

* ``sequential``: one ``optimize`` loop;
* ``async-k``: ``study.optimize(..., n_workers=k)``, k worker processes on one SQLite study
  (each asks as soon as it is free; reserve-then-suggest keeps them apart);
* ``batch-k``: ``study.ask(n=k)``, the k configurations evaluated in k threads, then told;
* Optuna's ``GPSampler`` with ``optimize(n_jobs=k)`` (k threads, one RDB storage) as the peer,
  ``n_jobs=1`` for its sequential run.

Reported per mode: wall-clock seconds to the budget, the final simple regret and the number of
duplicate configurations, median over seeds, with ratios to the same library's sequential run.
Targets (issue 12): at 8 asynchronous workers, regret <= 1.3x sequential and wall-clock >= 5x
faster, with zero duplicates. Writes ``<out>/parallel.{csv,md,png}``; resumable per
(library, mode, seed).

Usage::

    python benchmarks/parallel.py                       # 3 seeds, workers 2,4,8, delay 0.5 s
    python benchmarks/parallel.py --seeds 1 --budget 12 --workers 2 --delay 0.05 --out /tmp/p
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from headstart.benchmarks.csvlog import append_row, read_rows

DOCS = Path(__file__).resolve().parents[1] / "docs" / "benchmarks"
FIELDS = ["library", "mode", "workers", "seed", "wall_s", "regret", "duplicates", "n"]
DELAY = 0.5  # seconds per evaluation; set from --delay in each process


def objective(params: dict) -> float:
    """Hartmann-6 after a pause (module level, so worker processes can import it)."""
    from headstart.benchmarks.functions import get_task

    time.sleep(DELAY)
    return get_task("hartmann6").objective(params)


def _objective_with_delay(delay: float):
    global DELAY
    DELAY = delay
    return objective


def _summary(values: list[float], configs: list[dict], t0: float) -> dict:
    from headstart.benchmarks.functions import get_task

    keys = [json.dumps(c, sort_keys=True) for c in configs]
    return {
        "wall_s": time.perf_counter() - t0,
        "regret": min(values) - get_task("hartmann6").optimum,
        "duplicates": len(keys) - len(set(keys)),
        "n": len(values),
    }


def run_headstart(mode: str, workers: int, seed: int, budget: int, folder: Path) -> dict:
    import headstart as hs
    from headstart.benchmarks.functions import get_task

    task = get_task("hartmann6")
    url = f"sqlite:///{folder / f'hs-{mode}-{workers}-{seed}.db'}"
    study = hs.create_study(
        "p", task.space, storage=url, seed=seed, budget=budget, deterministic=True
    )
    t0 = time.perf_counter()
    if mode == "batch":
        with ThreadPoolExecutor(workers) as pool:
            while len(study.trials) < budget:
                batch = study.ask(n=min(workers, budget - len(study.trials)))
                values = pool.map(objective, [t.params for t in batch])
                for trial, value in zip(batch, values, strict=True):
                    study.tell(trial, value)
    else:
        study.optimize(objective, budget, n_workers=workers, show_progress=False)
    done = [t for t in study.trials if t.state == "complete"]
    return _summary([t.value for t in done], [t.params for t in done], t0)


def run_optuna(workers: int, seed: int, budget: int, folder: Path) -> dict:
    import optuna

    from headstart.benchmarks.functions import get_task
    from headstart.benchmarks.methods import optuna_distributions

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    task = get_task("hartmann6")
    dists, fixed = optuna_distributions(task.space)
    study = optuna.create_study(
        storage=f"sqlite:///{folder / f'optuna-{workers}-{seed}.db'}",
        sampler=optuna.samplers.GPSampler(seed=seed, deterministic_objective=True),
    )

    def wrapped(trial):
        return objective({**fixed, **{name: trial._suggest(name, d) for name, d in dists.items()}})

    t0 = time.perf_counter()
    study.optimize(wrapped, n_trials=budget, n_jobs=workers)
    done = [t for t in study.trials if t.value is not None]
    return _summary([t.value for t in done], [t.params for t in done], t0)


def _load(path: Path) -> list[dict]:
    return read_rows(path)


def _report(rows: list[dict], out: Path, command: str) -> None:
    groups: dict[tuple[str, str, int], list[dict]] = {}
    for r in rows:
        groups.setdefault((r["library"], r["mode"], int(r["workers"])), []).append(r)
    med = {
        k: {m: statistics.median(float(r[m]) for r in v) for m in ("wall_s", "regret")}
        | {"mean_regret": statistics.fmean(float(r["regret"]) for r in v)}
        | {"duplicates": sum(int(r["duplicates"]) for r in v), "seeds": len(v)}
        for k, v in groups.items()
    }
    lines = [
        "# Parallel BO: sequential vs batch vs asynchronous workers",
        "",
        f"Generated by `{command}`: Hartmann-6, every evaluation sleeps the given delay. Wall-clock "
        "is the median over seeds, final simple regret the mean and the median; ratios against "
        "the same library's sequential run (speed-up: sequential / mode wall-clock, higher is "
        "faster; regret ratio: mode / sequential mean regret, lower is better).",
        "",
        "| library | mode | workers | seeds | wall s | speed-up | mean regret | median regret | "
        "regret ratio | dup. |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for (lib, mode, k), m in sorted(med.items()):
        seq = med.get((lib, "sequential", 1))
        speed = f"{seq['wall_s'] / m['wall_s']:.2f}" if seq else "-"
        ratio = "-"
        if seq and seq["mean_regret"] > 0:
            ratio = f"{m['mean_regret'] / seq['mean_regret']:.2f}"
        lines.append(
            f"| {lib} | {mode} | {k} | {m['seeds']} | {m['wall_s']:.1f} | {speed} | "
            f"{m['mean_regret']:.3g} | {m['regret']:.3g} | {ratio} | {m['duplicates']} |"
        )
    (out / "parallel.md").write_text("\n".join(lines) + "\n")
    from matplotlib.figure import Figure

    fig = Figure(figsize=(9, 3.6))
    ax1, ax2 = fig.subplots(1, 2)
    labels = [f"{lib}\n{mode}-{k}" for (lib, mode, k) in sorted(med)]
    ax1.bar(labels, [med[k]["wall_s"] for k in sorted(med)], color="tab:blue")
    ax1.set_ylabel("wall-clock s to the budget")
    ax2.bar(labels, [med[k]["mean_regret"] for k in sorted(med)], color="tab:orange")
    ax2.set_ylabel("final simple regret (mean)")
    ax2.set_yscale("log")
    for ax in (ax1, ax2):
        ax.tick_params(axis="x", labelsize=6, rotation=90)
    fig.tight_layout()
    fig.savefig(out / "parallel.png", dpi=110)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--seeds", type=int, default=3)
    p.add_argument("--budget", type=int, default=100)
    p.add_argument("--workers", default="2,4,8", help="Comma-separated worker counts.")
    p.add_argument("--delay", type=float, default=DELAY, help="Seconds per evaluation.")
    p.add_argument("--no-optuna", action="store_true", help="Skip the Optuna peer.")
    p.add_argument("--out", type=Path, default=DOCS)
    args = p.parse_args()
    _objective_with_delay(args.delay)
    import headstart._gp.surrogate  # noqa: F401  (torch loaded before any timing)

    args.out.mkdir(parents=True, exist_ok=True)
    path = args.out / "parallel.csv"
    rows = _load(path)
    done = {(r["library"], r["mode"], int(r["workers"]), int(r["seed"])) for r in rows}
    plan = [("headstart", "sequential", 1)]
    for k in map(int, args.workers.split(",")):
        plan += [("headstart", "async", k), ("headstart", "batch", k)]
    if not args.no_optuna:
        plan += [("optuna", "sequential", 1)]
        plan += [("optuna", "async", k) for k in map(int, args.workers.split(","))]
    with tempfile.TemporaryDirectory() as tmp:
        for seed in range(args.seeds):
            for lib, mode, k in plan:
                if (lib, mode, k, seed) in done:
                    continue
                if lib == "headstart":
                    result = run_headstart(mode, k, seed, args.budget, Path(tmp))
                else:
                    result = run_optuna(k, seed, args.budget, Path(tmp))
                row = {"library": lib, "mode": mode, "workers": k, "seed": seed, **result}
                print(json.dumps(row), flush=True)
                rows.append(append_row(path, FIELDS, row))
    command = "python benchmarks/parallel.py"
    if args.out != DOCS:
        command += f" --out {args.out}"
    _report(
        rows,
        args.out,
        f"{command} --seeds {args.seeds} --budget {args.budget} "
        f"--workers {args.workers} --delay {args.delay}",
    )


if __name__ == "__main__":
    main()
