r"""Seconds to write a study's HTML report (``headstart report``), idle and on a busy machine.

Issue 27 measured 67-71 s of wall time (8 s of CPU) for a 30-trial report on a shared machine;
the model fits behind the report (importance, slices, contour, the transfer model) ran with every
BLAS / OpenMP thread of the machine, which then waited on each other and on the other jobs. They
now run with one thread, as the suggestion engine does.

For each study (100 completed trials: GP-BO, and ScaML-GP from two earlier studies) this times
``headstart report STUDY -o FILE`` (a fresh process, as a user runs it) ``--repeats`` times,
idle, and again while ``--load`` busy-loop processes occupy the cores. Wall and CPU seconds of the
report process; the median is reported.

Usage::

    python benchmarks/report_time.py                       # -> docs/benchmarks/report_time.{csv,md}
    python benchmarks/report_time.py --repeats 1 --out /tmp/report_time     # smoke
"""

from __future__ import annotations

import argparse
import csv
import math
import multiprocessing as mp
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path

import headstart as hs
from headstart.benchmarks.csvlog import write_rows

DOCS = Path(__file__).resolve().parents[1] / "docs" / "benchmarks"
HEADSTART = str(Path(sys.executable).with_name("headstart"))


def objective(p: dict) -> float:
    return (math.log10(p["lr"]) + 3) ** 2 + 0.1 * abs(p["layers"] - 3) + 0.5 * (p["opt"] == "sgd")


SPACE = hs.SearchSpace(
    {
        "lr": hs.Float(1e-5, 1e-1, log=True),
        "layers": hs.Int(1, 8),
        "opt": hs.Categorical(["adam", "sgd"]),
    }
)


def make_studies(url: str, n_trials: int, names: list[str]) -> list[str]:
    """A GP-BO study ("gp") and a ScaML-GP study ("scaml", from two random-search sources) of
    ``n_trials`` each, those in ``names``."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for i, shift in enumerate((0.5, -0.3) if "scaml" in names else ()):
            source = hs.create_study(f"src{i}", SPACE, storage=url, method="random", seed=i)
            source.optimize(lambda p, s=shift: objective(p) + s, 40, show_progress=False)
        for name, method, sources in (("gp", "gp", None), ("scaml", "scaml", ["src0", "src1"])):
            if name not in names:
                continue
            study = hs.create_study(
                name, SPACE, storage=url, method=method, transfer_from=sources, seed=0
            )
            study.optimize(objective, n_trials, show_progress=False)
    return names


def _busy(seconds: float) -> None:
    end = time.time() + seconds
    while time.time() < end:
        pass


def time_report(url: str, name: str, out: Path) -> tuple[float, float]:
    """``(wall, cpu)`` seconds of one ``headstart report`` process."""
    env = {**os.environ, "HEADSTART_STORAGE": url}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run([HEADSTART, "report", name, "-o", str(out)], env=env, check=True,
                   capture_output=True)  # fmt: skip
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--trials", type=int, default=100, help="completed trials per study")
    parser.add_argument("--repeats", type=int, default=3, help="reports per study and condition")
    parser.add_argument("--load", type=int, default=os.cpu_count() or 2,
                        help="busy-loop processes during the loaded runs (default: one per core)")  # fmt: skip
    parser.add_argument("--conditions", nargs="+", default=["idle", "loaded"],
                        choices=["idle", "loaded"], help="which conditions to time")  # fmt: skip
    parser.add_argument("--studies", nargs="+", default=["gp", "scaml"], choices=["gp", "scaml"],
                        help="which studies to report on")  # fmt: skip
    parser.add_argument("--out", type=Path, default=DOCS / "report_time", help="output prefix")
    args = parser.parse_args(argv)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        url = f"sqlite:///{Path(tmp) / 'report.db'}"
        names = make_studies(url, args.trials, args.studies)
        for condition in args.conditions:
            burners = []
            if condition == "loaded":
                seconds = 60.0 * args.repeats * len(names)
                burners = [mp.Process(target=_busy, args=(seconds,)) for _ in range(args.load)]
                for b in burners:
                    b.start()
            try:
                for name in names:
                    runs = [time_report(url, name, Path(tmp) / f"{name}.html")
                            for _ in range(args.repeats)]  # fmt: skip
                    rows.append({
                        "study": name, "trials": args.trials, "condition": condition,
                        "repeats": args.repeats,
                        "wall_s": round(statistics.median(w for w, _ in runs), 2),
                        "cpu_s": round(statistics.median(c for _, c in runs), 2),
                    })  # fmt: skip
                    print(rows[-1], flush=True)
            finally:
                for b in burners:
                    b.terminate()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    write_rows(args.out.with_suffix(".csv"), list(rows[0]), rows)
    lines = [
        "# Seconds to write the HTML report",
        "",
        f"`python benchmarks/report_time.py` on {os.cpu_count()} cores; `headstart report` of a "
        f"{args.trials}-trial study in a fresh process, median of {args.repeats}; *loaded*: "
        f"{args.load} busy-loop processes running. Target (issue 27): at most 10 s for 100 "
        "trials.",
        "",
        "| study | condition | wall s | CPU s |",
        "|---|---|---:|---:|",
        *(f"| {r['study']} | {r['condition']} | {r['wall_s']} | {r['cpu_s']} |" for r in rows),
        "",
    ]
    before = args.out.parent / f"{args.out.name}_before.csv"
    if before.exists():  # the same script, run on the commit before the one-thread fix
        with open(before) as f:
            old = list(csv.DictReader(f))
        lines += [
            f"Before the fix ({before.name}: this script on the commit before it, same machine): "
            "the model fits behind the report used every BLAS / OpenMP thread.",
            "",
            "| study | condition | wall s | CPU s |",
            "|---|---|---:|---:|",
            *(f"| {r['study']} | {r['condition']} | {r['wall_s']} | {r['cpu_s']} |" for r in old),
            "",
        ]
    args.out.with_suffix(".md").write_text("\n".join(lines))


if __name__ == "__main__":
    main()
