r"""Start-up cost: ``import headstart`` and ``headstart --help`` vs ``import optuna`` and ``import torch``.

Every measurement is the wall-clock time of a fresh interpreter (``sys.executable``) that does one
thing and exits, repeated ``--repeats`` times with the kinds interleaved (one warm-up run each, not
counted, so byte-code is compiled and files are cached). The cost of the interpreter itself is
removed: the median (min) of a kind minus the median (min) of a bare ``python -c pass``. Kinds:

* ``import headstart``: ``python -c "import headstart"`` (public names load on first use);
* ``from headstart import create_study, SearchSpace, Float``: what a study's first use loads;
* ``headstart --help``: the CLI, as ``python -m headstart.cli --help`` when that module runs
  as a script, else the ``headstart`` console script next to ``sys.executable``;
* ``import optuna``: the reference the ratios are computed against;
* ``import torch``: for scale.

``torch_loaded`` says whether ``torch`` is in ``sys.modules`` once the kind has run (checked in a
separate, untimed run). A package that is not installed gets a row with empty times.

Usage::

    python benchmarks/import_time.py              # → docs/benchmarks/import_time.{csv,md}
    python benchmarks/import_time.py --repeats 3 --out /tmp/import_time
"""

from __future__ import annotations

import argparse
import importlib.util
import math
import platform
import re
import shlex
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

DOCS = Path(__file__).resolve().parents[1] / "docs" / "benchmarks"
REFERENCE = "import optuna"
_SENTINEL = "__import_time_torch_loaded__="
# Reports whether torch was imported, at interpreter exit (also after the CLI's sys.exit).
_PROBE = (
    "import atexit, sys\n"
    "atexit.register(lambda: sys.stderr.write("
    f"'\\n{_SENTINEL}' + str('torch' in sys.modules) + '\\n'))\n"
)


@dataclass
class Kind:
    """One measurement: the timed command and an untimed probe that reports ``torch_loaded``."""

    name: str
    command: list[str]
    probe: list[str]
    module: str | None = None  # checked with find_spec; a missing one is reported, not timed
    times: list[float] = field(default_factory=list)
    torch_loaded: bool | None = None
    note: str = ""


def cli_command() -> list[str]:
    """How to run ``headstart --help`` in this environment (see the module docstring)."""
    spec = importlib.util.find_spec("headstart")  # a top-level spec: headstart is not imported
    for folder in (spec.submodule_search_locations or []) if spec is not None else []:
        source = Path(folder) / "cli.py"
        if source.exists() and re.search(
            r"^if __name__ == [\"']__main__[\"']", source.read_text(), re.M
        ):
            return [sys.executable, "-m", "headstart.cli", "--help"]
    script = Path(sys.executable).with_name("headstart")
    if script.exists():
        return [str(script), "--help"]
    return [
        sys.executable,
        "-c",
        "import sys; from headstart.cli import main; sys.exit(main())",
        "--help",
    ]


# `import headstart` is lazy (PEP 562); this is what the first real use loads.
_STUDY_API = "from headstart import create_study, SearchSpace, Float"


def kinds() -> list[Kind]:
    py = sys.executable
    cli_probe = (
        "sys.argv = ['headstart', '--help']\nfrom headstart.cli import main\nsys.exit(main())"
    )
    return [
        Kind("baseline", [py, "-c", "pass"], [py, "-c", _PROBE]),
        _python_kind("import headstart", "import headstart", "headstart"),
        _python_kind(_STUDY_API, _STUDY_API, "headstart"),
        Kind("headstart --help", cli_command(), [py, "-c", _PROBE + cli_probe], "headstart"),
        _python_kind("import optuna", "import optuna", "optuna"),
        _python_kind("import torch", "import torch", "torch"),
    ]


def _python_kind(label: str, code: str, package: str) -> Kind:
    """A measurement of ``python -c code`` (and its probe for loaded modules)."""
    py = sys.executable
    return Kind(label, [py, "-c", code], [py, "-c", _PROBE + code], package)


def _run(command: list[str]) -> float:
    """Wall-clock seconds of one subprocess; raises if it fails."""
    t0 = time.perf_counter()
    proc = subprocess.run(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    seconds = time.perf_counter() - t0
    if proc.returncode != 0:
        raise RuntimeError(
            f"{shlex.join(command)} exited with {proc.returncode}:\n{proc.stderr[-2000:]}"
        )
    return seconds


def _probe(kind: Kind) -> bool:
    proc = subprocess.run(kind.probe, capture_output=True, text=True)
    lines = [ln for ln in proc.stderr.splitlines() if ln.startswith(_SENTINEL)]
    if proc.returncode != 0 or not lines:
        raise RuntimeError(
            f"{kind.name}: probe exited with {proc.returncode}:\n{proc.stderr[-2000:]}"
        )
    return lines[-1].removeprefix(_SENTINEL) == "True"


def measure(all_kinds: list[Kind], repeats: int) -> None:
    """Fill ``times`` and ``torch_loaded`` of every available kind (runs interleaved)."""
    active = []
    for kind in all_kinds:
        if kind.module is not None and importlib.util.find_spec(kind.module) is None:
            kind.note = f"{kind.module} is not installed"
            print(f"{kind.name}: skipped ({kind.note})", file=sys.stderr)
            continue
        _run(kind.command)  # warm-up: byte-code compiled, files in the page cache
        kind.torch_loaded = _probe(kind)
        active.append(kind)
    for r in range(repeats):
        for kind in active:
            kind.times.append(_run(kind.command))
        print(f"repeat {r + 1}/{repeats} done", file=sys.stderr, flush=True)


def summarize(all_kinds: list[Kind]) -> list[dict]:
    """One row per kind: net median and min seconds (baseline subtracted; the baseline is raw)."""
    base = all_kinds[0]
    base_median, base_min = statistics.median(base.times), min(base.times)
    rows = []
    for kind in all_kinds:
        if not kind.times:
            median = minimum = math.nan
        elif kind is base:
            median, minimum = base_median, base_min
        else:
            median = statistics.median(kind.times) - base_median
            minimum = min(kind.times) - base_min
        rows.append(
            {
                "kind": kind.name,
                "command": shlex.join(kind.command),
                "median_s": median,
                "min_s": minimum,
                "repeats": len(kind.times),
                "torch_loaded": "" if kind.torch_loaded is None else kind.torch_loaded,
            }
        )
    return rows


def _fmt(x: float) -> str:
    return "n/a" if math.isnan(x) else f"{x:.3f}"


def write_outputs(rows: list[dict], all_kinds: list[Kind], out: Path, command: str) -> None:
    """``import_time.csv`` and ``import_time.md`` in ``out``."""
    out.mkdir(parents=True, exist_ok=True)
    from headstart.benchmarks.csvlog import write_rows

    write_rows(out / "import_time.csv", list(rows[0]), rows)
    ref = next((r for r in rows if r["kind"] == REFERENCE), None)
    base = rows[0]
    lines = [
        "# Import and CLI start-up time",
        "",
        f"Generated by `{command}` (Python {platform.python_version()}, {platform.platform()}). "
        "Each time is the wall-clock time of a fresh interpreter running the command, minus that "
        f"of a bare `python -c pass` (median {_fmt(base['median_s'])} s, min "
        f"{_fmt(base['min_s'])} s over {base['repeats']} runs): the median of the kind minus the "
        "baseline's median, and the min minus the baseline's min. Runs of the different kinds "
        "are interleaved, after one uncounted warm-up run each. `torch loaded` says whether "
        f"`torch` is in `sys.modules` afterwards. Ratios are to `{REFERENCE}`'s median.",
        "",
        f"| measurement | median s | min s | repeats | torch loaded | median / {REFERENCE} |",
        "|---|---:|---:|---:|---|---:|",
    ]
    for row in rows[1:]:
        ratio = (
            row["median_s"] / ref["median_s"]
            if ref is not None and ref["median_s"] > 0 and not math.isnan(row["median_s"])
            else math.nan
        )
        loaded = {True: "yes", False: "no", "": "-"}[row["torch_loaded"]]
        ratio_text = "n/a" if math.isnan(ratio) else f"{ratio:.2f}"
        lines.append(
            f"| `{row['kind']}` | {_fmt(row['median_s'])} | {_fmt(row['min_s'])} | "
            f"{row['repeats']} | {loaded} | {ratio_text} |"
        )
    notes = [f"`{k.name}`: {k.note}." for k in all_kinds if k.note]
    cli = next(k for k in all_kinds if k.name == "headstart --help")
    lines += ["", f"The CLI was run as `{shlex.join(cli.command)}`.", *notes]
    (out / "import_time.md").write_text("\n".join(lines) + "\n")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=7, help="Timed runs per kind.")
    parser.add_argument(
        "--out",
        type=Path,
        default=DOCS,
        help=f"Directory for import_time.csv and import_time.md (default {DOCS}).",
    )
    args = parser.parse_args(argv)
    if args.repeats < 1:
        parser.error("--repeats must be at least 1")
    all_kinds = kinds()
    try:
        measure(all_kinds, args.repeats)
    except RuntimeError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    rows = summarize(all_kinds)
    given = sys.argv[1:] if argv is None else argv
    command = shlex.join(["python", "benchmarks/import_time.py", *given])
    write_outputs(rows, all_kinds, args.out, command)
    sys.stdout.write((args.out / "import_time.md").read_text())
    return 0


if __name__ == "__main__":
    sys.exit(main())
