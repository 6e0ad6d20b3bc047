r"""Record (or check) seeded suggestions through the public API: the redesign's safety net.

Every method x every acquisition x with and without user priors, pending points, kernel="auto"
and a fixed kernel expression, on a mixed space (float, log-float, int, categorical) and a numeric
space. Each case runs a short ask/tell loop with ``storage=None`` and a fixed seed and records the
suggestions encoded to the unit cube.

The cases run in a child process under the pinned CPU kernels of
``tests/reference_kernels.py`` (AVX-512 or not), and each recording is keyed to the CPU that made
it (vendor, family, model: :func:`reference_kernels.cpu`), since torch's results still differ
between an Intel and an AMD CPU under those kernels. ``python tests/golden/make_golden.py``
records this CPU's cases into ``suggestions.json`` (replacing its earlier recording, keeping the
other CPUs'); ``tests/test_golden.py`` compares a fresh run against this CPU's recording to 1e-9.
A commit that changes cases on purpose re-records here and, for the CPUs it cannot run on, moves
those cases of their recordings to ``"stale"`` with the reason (:func:`mark_stale`).
"""

from __future__ import annotations

import json
import math
import sys
import warnings
from pathlib import Path

import numpy as np

import headstart as hs

sys.path.insert(0, str(Path(__file__).parents[1]))  # tests/, when run as a script
import reference_kernels

GOLDEN = Path(__file__).with_name("suggestions.json")
TRANSFER = ("scaml", "rgpe", "stackgp", "mtgp")
METHODS = ("gp", "random", *TRANSFER)
ACQUISITIONS = ("logei", "ei", "pi", "ucb", "ts")
N_TRIALS = 6
N_INITIAL = 3


def mixed_space(priors: bool) -> hs.SearchSpace:
    return hs.SearchSpace(
        {
            "x": hs.Float(-2.0, 2.0, prior=hs.Normal(0.5, 0.6) if priors else hs.Uniform()),
            "lr": hs.Float(1e-4, 1e-1, log=True),
            "n": hs.Int(1, 6, prior=hs.Normal(2, 1.0) if priors else hs.Uniform()),
            "c": hs.Categorical(["a", "b", "c"]),
        }
    )


def numeric_space() -> hs.SearchSpace:
    return hs.SearchSpace({"x": hs.Float(-2.0, 2.0), "y": hs.Float(0.0, 3.0)})


def objective(p: dict) -> float:
    value = (p["x"] - 0.7) ** 2
    if "lr" in p:
        value += 0.3 * (math.log10(p["lr"]) + 2.5) ** 2 + 0.1 * abs(p["n"] - 3)
        value += {"a": 0.0, "b": 0.4, "c": 0.8}[p["c"]]
    if "y" in p:
        value += math.sin(3 * p["y"]) + 0.2 * p["y"]
    return value


def meta_tasks(space: hs.SearchSpace) -> list[hs.MetaTask]:
    rng = np.random.default_rng(123)
    tasks = []
    for k, shift in enumerate((0.3, -0.2)):
        configs = space.decode(rng.random((12, space.dim)))
        values = [objective(c) + shift + 0.1 * k * c["x"] for c in configs]
        tasks.append(hs.MetaTask(f"src{k}", space.encode(configs), np.array(values)))
    return tasks


def run_case(
    space: hs.SearchSpace, *, pending: bool = False, n_trials: int = N_TRIALS, **settings
) -> list[list[float]]:
    study = hs.create_study("golden", space, storage=None, seed=7, **settings)
    out = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        while len(out) < n_trials:
            trials = [study.ask() for _ in range(2 if pending else 1)]
            for t in trials:
                out.append(space.encode([t.params])[0].tolist())
                study.tell(t, objective(t.params))
    return out[:n_trials]


def cases():
    """(name, thunk) for every recorded case."""
    for method in METHODS:
        for acq in ACQUISITIONS:
            if method == "random" and acq != "logei":
                continue
            for priors in (False, True):
                name = f"{method}/{acq}/{'priors' if priors else 'flat'}"

                def thunk(method=method, acq=acq, priors=priors):
                    space = mixed_space(priors)
                    extra = {}
                    if method in TRANSFER:
                        extra = {"transfer_from": meta_tasks(space)}
                    else:
                        extra = {"n_initial": N_INITIAL}
                    return run_case(space, method=method, acquisition=acq, budget=20, **extra)

                yield name, thunk
    yield (
        "gp/pending",
        lambda: run_case(mixed_space(False), pending=True, n_initial=N_INITIAL, budget=20),
    )
    yield (
        "scaml/pending",
        lambda: run_case(
            mixed_space(False),
            pending=True,
            method="scaml",
            transfer_from=meta_tasks(mixed_space(False)),
        ),
    )
    yield (
        "gp/deterministic",
        lambda: run_case(mixed_space(False), n_initial=N_INITIAL, deterministic=True),
    )
    yield (
        "gp/kernel-expression",
        lambda: run_case(numeric_space(), n_initial=N_INITIAL, kernel="SE[0] * SE[1] + LIN[1]"),
    )
    yield (
        "gp/kernel-auto",
        lambda: run_case(
            numeric_space(),
            n_initial=N_INITIAL,
            n_trials=7,
            kernel="auto",
            kernel_search={"every": 2, "budget": 4, "restarts": 1, "ea_steps": 1},
        ),
    )


def record() -> dict:
    """``{"cpu", "versions", "cases"}``: every case, run in this process."""
    return {
        "cpu": reference_kernels.cpu(),
        "versions": reference_kernels.versions(),
        "cases": {n: t() for n, t in cases()},
    }


def recordings() -> list[dict]:
    """The recordings in ``suggestions.json``, one per CPU (and library versions)."""
    return json.loads(GOLDEN.read_text())["recordings"] if GOLDEN.exists() else []


def recording_for_this_cpu() -> tuple[dict | None, str]:
    """The recording to compare with here, or ``None`` and why there is none."""
    here = reference_kernels.cpu()
    mine = [r for r in recordings() if reference_kernels.same_cpu(r["cpu"])]
    if not mine:
        return None, f"no golden suggestions were recorded on this CPU ({here})"
    versions = reference_kernels.versions()
    for rec in mine:
        if rec["versions"] == versions:
            return rec, ""
    return None, f"golden suggestions for this CPU were recorded with {mine[0]['versions']}"


def record_under_reference_kernels() -> dict:
    """:func:`record`, run in a child process under the reference kernels."""
    return reference_kernels.call(__file__, "record")


def mark_stale(reasons: dict[str, str]) -> None:
    """Move ``reasons``' cases to ``"stale"`` (case -> why) in every recording but this CPU's."""
    here = reference_kernels.cpu()
    out = []
    for rec in recordings():
        if rec["cpu"] != here:
            stale = rec.setdefault("stale", {})
            for name, why in reasons.items():
                if name in rec["cases"]:
                    del rec["cases"][name]
                    stale[name] = why
        out.append(rec)
    GOLDEN.write_text(json.dumps({"recordings": out}, indent=1) + "\n")


if __name__ == "__main__":
    result = record_under_reference_kernels()
    kept = [r for r in recordings() if r["cpu"] != result["cpu"]]
    GOLDEN.write_text(json.dumps({"recordings": [*kept, result]}, indent=1) + "\n")
    print(f"wrote {len(result['cases'])} cases for {result['cpu']} to {GOLDEN}", file=sys.stderr)
