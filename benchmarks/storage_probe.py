r"""The distributed-work probes of issue 28, on SQLite and PostgreSQL: what ``docs/distributed.md``
states as measured.

* ``heartbeat``: ``--workers`` processes released by a barrier each ask and tell ``--trials``
  trials with ``heartbeat_interval=1``, ``grace_period=2``; every fourth suggestion of every
  worker takes 2.5 s (longer than the grace period). Counted: live trials failed by another
  worker's stale-trial sweep, i.e. tells that raised ``TrialAlreadyFinishedError`` (the old code
  then overwrote the trial's ``fail_reason`` with the suggestion's attributes, so only the
  worker saw it).
* ``restart`` (PostgreSQL): ``optimize(n_workers=4)`` of 300 trials of 0.1 s while the server
  restarts (``pg_ctl restart -m fast``) every 2 s; counted: runs that aborted.
* ``duplicates``: 16 GP workers on a 100-configuration space, 5 asks each at one barrier;
  counted: configurations evaluated twice.
* ``stop``: ``optimize(n_workers=2)`` of 200 trials whose first evaluation raises; measured:
  seconds until the error reaches the caller and trials run by then.

Each row is labelled with ``--label`` (e.g. ``before`` for a checkout of the code before the
fixes, run with ``PYTHONPATH=<that checkout>/src``), so both sides sit in one CSV.

Usage::

    python benchmarks/storage_probe.py --label after     # -> docs/benchmarks/storage_probe.{csv,md}
    python benchmarks/storage_probe.py --probes stop --runs 1 --out /tmp/probe   # smoke
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import multiprocessing as mp
import os
import subprocess
import tempfile
import threading
import time
import uuid
import warnings
from pathlib import Path

import headstart as hs
from headstart.testing.faults import ExplodeOnce, postgres_restart_script

DOCS = Path(__file__).resolve().parents[1] / "docs" / "benchmarks"
FIELDS = ["label", "probe", "backend", "run", "metric", "value", "of"]


def _x(params: dict) -> float:
    return float(params["x"])


def slow_objective(params: dict) -> float:  # module level: picklable for worker processes
    time.sleep(0.1)
    return _x(params)


# --- heartbeat ---------------------------------------------------------------------------------
def _heartbeat_worker(url: str, name: str, barrier, n_trials: int, errors) -> None:
    study = hs.load_study(name, url)
    suggest, calls = study._strategy.suggest, [0]

    def sometimes_slow(*args, **kwargs):
        calls[0] += 1
        if calls[0] % 4 == 0:
            time.sleep(2.5)
        return suggest(*args, **kwargs)

    study._strategy.suggest = sometimes_slow
    barrier.wait()
    for _ in range(n_trials):
        trial = study.ask()
        try:
            study.tell(trial, _x(trial.params))
        except hs.TrialAlreadyFinishedError:
            errors.put(1)


def probe_heartbeat(url: str, workers: int, n_trials: int) -> dict:
    name = f"hb-{uuid.uuid4().hex[:8]}"
    space = hs.SearchSpace({"x": hs.Float(0.0, 1.0)})
    hs.create_study(
        name, space, storage=url, method="random", heartbeat_interval=1.0, grace_period=2.0
    )
    ctx = mp.get_context("spawn")
    barrier, errors = ctx.Barrier(workers), ctx.Queue()
    procs = [
        ctx.Process(target=_heartbeat_worker, args=(url, name, barrier, n_trials, errors))
        for _ in range(workers)
    ]
    for p in procs:
        p.start()
    for p in procs:
        p.join()
    trials = hs.load_study(name, url).trials
    raised = 0
    while not errors.empty():
        raised += errors.get()
    hs.delete_study(name, url)
    return {"live trials failed (their tell raised)": (raised, len(trials))}


# --- restart -----------------------------------------------------------------------------------
def probe_restart(url: str, script: Path, n_trials: int = 300) -> dict:
    name = f"rs-{uuid.uuid4().hex[:8]}"
    study = hs.create_study(name, hs.SearchSpace({"x": hs.Float(0.0, 1.0)}), storage=url,
                            method="random")  # fmt: skip
    done, restarts = threading.Event(), [0]

    def restart_in_a_loop() -> None:
        while not done.wait(2.0):
            subprocess.run([str(script)], check=False, timeout=120)
            restarts[0] += 1

    looping = threading.Thread(target=restart_in_a_loop)
    looping.start()
    aborted = 0
    try:
        study.optimize(slow_objective, n_trials, n_workers=4, show_progress=False)
    except Exception as e:  # what the probe counts
        aborted = 1
        print(f"  aborted: {type(e).__name__}: {str(e)[:160]}")
    finally:
        done.set()
        looping.join()
    complete = sum(t.state == "complete" for t in hs.load_study(name, url).trials)
    hs.delete_study(name, url)
    return {"aborted runs": (aborted, 1), "server restarts": (restarts[0], 1),
            "complete trials": (complete, n_trials)}  # fmt: skip


# --- duplicates --------------------------------------------------------------------------------
def _discrete_worker(url: str, name: str, barrier, rounds: int) -> None:
    study = hs.load_study(name, url)
    for _ in range(rounds):
        barrier.wait(timeout=900)
        trial = study.ask()
        study.tell(trial, (trial.params["n"] - 7) ** 2 + 3 * (trial.params["c"] != "b"))


def probe_duplicates(url: str, workers: int = 16, rounds: int = 5) -> dict:
    name = f"dup-{uuid.uuid4().hex[:8]}"
    space = hs.SearchSpace({"n": hs.Int(1, 20), "c": hs.Categorical(list("abcde"))})
    hs.create_study(name, space, storage=url, method="gp", n_initial=4)
    ctx = mp.get_context("spawn")
    barrier = ctx.Barrier(workers)
    procs = [ctx.Process(target=_discrete_worker, args=(url, name, barrier, rounds))
             for _ in range(workers)]  # fmt: skip
    for p in procs:
        p.start()
    for p in procs:
        p.join()
    trials = hs.load_study(name, url).trials
    configs = [tuple(sorted(t.params.items())) for t in trials]
    hs.delete_study(name, url)
    return {"duplicate configurations": (len(configs) - len(set(configs)), len(configs))}


# --- stop --------------------------------------------------------------------------------------
def probe_stop(url: str, n_trials: int = 200) -> dict:
    name = f"st-{uuid.uuid4().hex[:8]}"
    study = hs.create_study(name, hs.SearchSpace({"x": hs.Float(0.0, 1.0)}), storage=url,
                            method="random")  # fmt: skip
    marker = Path(tempfile.mkdtemp()) / "marker"
    start = time.perf_counter()
    with contextlib.suppress(ValueError):
        study.optimize(ExplodeOnce(str(marker)), n_trials, n_workers=2, show_progress=False)
    seconds = time.perf_counter() - start
    trials = hs.load_study(name, url).trials
    running = sum(t.state == "running" for t in trials)
    hs.delete_study(name, url)
    return {"seconds until the error is raised": (round(seconds, 2), 1),
            "trials run": (len(trials), n_trials), "trials left running": (running, len(trials))}  # fmt: skip


PROBES = ("heartbeat", "restart", "duplicates", "stop")


def main(argv: list[str] | None = None) -> Path:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--label", default="after")
    parser.add_argument("--probes", nargs="+", default=list(PROBES), choices=PROBES)
    parser.add_argument("--runs", type=int, default=3, help="repetitions per probe (restart: 10)")
    parser.add_argument("--workers", type=int, default=8, help="heartbeat probe's workers")
    parser.add_argument("--trials", type=int, default=15, help="heartbeat probe's trials each")
    parser.add_argument("--out", type=Path, default=DOCS / "storage_probe")
    args = parser.parse_args(argv)
    tmp = Path(tempfile.mkdtemp())
    backends = {"sqlite": None, "postgresql": os.environ.get("HEADSTART_TEST_POSTGRES_URL")}
    rows = []
    warnings.simplefilter("ignore")
    for probe in args.probes:
        for backend, pg in backends.items():
            if backend == "postgresql" and not pg:
                continue
            if probe == "restart" and (
                backend != "postgresql" or postgres_restart_script() is None
            ):
                continue
            runs = 10 if probe == "restart" and args.runs >= 3 else args.runs
            for run in range(runs):
                url = pg or f"sqlite:///{tmp / f'{probe}-{run}.db'}"
                if probe == "heartbeat":
                    result = probe_heartbeat(url, args.workers, args.trials)
                elif probe == "restart":
                    result = probe_restart(url, postgres_restart_script())
                elif probe == "duplicates":
                    result = probe_duplicates(url)
                else:
                    result = probe_stop(url)
                for metric, (value, of) in result.items():
                    rows.append([args.label, probe, backend, run, metric, value, of])
                print(args.label, probe, backend, run, result, flush=True)
        write(rows, args.out)  # after each probe: an interrupted run keeps what it measured
    return write(rows, args.out)


def write(rows: list[list], out: Path) -> Path:
    """Append ``rows`` to ``out.csv`` (rows of other labels and probes kept) and rewrite
    ``out.md``."""
    out.parent.mkdir(parents=True, exist_ok=True)
    path = out.with_suffix(".csv")
    old = []
    if path.exists():
        with path.open() as f:
            replaced = {(r[0], r[1]) for r in rows}
            old = [r for r in csv.reader(f)][1:]
            old = [r for r in old if (r[0], r[1]) not in replaced]
    every = old + [[str(v) for v in r] for r in rows]
    with path.open("w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(FIELDS)
        writer.writerows(every)
    totals: dict[tuple, list] = {}
    for label, probe, backend, _run, metric, value, of in every:
        entry = totals.setdefault((probe, backend, metric), {})
        total = entry.setdefault(label, [0.0, 0.0, 0])
        total[0] += float(value)
        total[1] += float(of)
        total[2] += 1
    labels = sorted({r[0] for r in every}, key=lambda s: (s != "before", s))
    lines = [
        "# Storage and worker probes (issue 28)",
        "",
        "`python benchmarks/storage_probe.py --label LABEL`; `before` ran the code before the "
        "issue-28 fixes (PYTHONPATH of that checkout), `after` this one. Sums over the runs "
        "(`of`: the total they are out of); seconds are means.",
        "",
        "| probe | backend | metric | " + " | ".join(labels) + " |",
        "|---|---|---|" + "---:|" * len(labels),
    ]
    for (probe, backend, metric), entry in sorted(totals.items()):
        cells = []
        for label in labels:
            if label not in entry:
                cells.append("-")
                continue
            value, of, n = entry[label]
            if metric.startswith("seconds"):
                cells.append(f"{value / n:.2f} s (mean of {n})")
            elif metric == "server restarts":
                cells.append(f"{value:g} ({n} runs)")
            else:
                cells.append(f"{value:g} of {of:g} ({n} runs)")
        lines.append(f"| {probe} | {backend} | {metric} | " + " | ".join(cells) + " |")
    out.with_suffix(".md").write_text("\n".join(lines) + "\n")
    return path


if __name__ == "__main__":
    main()
