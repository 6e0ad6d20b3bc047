r"""Record (or check) seeded suggestions through the public API: the redesign's safety net.

Every method x every acquisition x with and without user priors, pending points, kernel="auto"
and a fixed kernel expression, on a mixed space (float, log-float, int, categorical) and a numeric
space. Each case runs a short ask/tell loop with ``storage=None`` and a fixed seed and records the
suggestions encoded to the unit cube.

The numbers depend on which CPU kernels the numeric libraries pick: OpenBLAS's core type, torch's
vectorized kernels (``ATEN_CPU_CAPABILITY``), MKL's code path and numpy's SIMD loops. An optimizer
turns a last-bit difference into a different local optimum (multi-task GP suggestions moved by up
to 0.8 in the unit cube between AVX-512 and AVX2 kernels on one machine), so no tolerance is both
portable and a real check. The cases therefore always run in a child process under
``REFERENCE_ENV``: the same AVX2 code path of every library, one thread each, on any x86-64 CPU
with AVX2 and FMA (Intel or AMD), whatever the parent's kernels. ``python
tests/golden/make_golden.py`` rewrites ``suggestions.json`` that way; ``tests/test_golden.py``
compares a fresh run against it to 1e-9.
"""

from __future__ import annotations

import json
import math
import os
import platform
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np

import headstart as hs

GOLDEN = Path(__file__).with_name("suggestions.json")
# One code path for every numeric library, whatever the CPU (needs AVX2 and FMA):
REFERENCE_ENV = {
    "OPENBLAS_CORETYPE": "Haswell",  # numpy's and scipy's OpenBLAS: the AVX2 kernels
    "ATEN_CPU_CAPABILITY": "avx2",  # torch's vectorized loops
    "MKL_ENABLE_INSTRUCTIONS": "AVX2",  # torch's BLAS / LAPACK ...
    "MKL_CBWR": "COMPATIBLE",  # ... on its reproducible branch, the same on Intel and AMD
    "ONEDNN_MAX_CPU_ISA": "AVX2",
    "NPY_DISABLE_CPU_FEATURES": "X86_V4 AVX512_ICL AVX512_SPR",  # numpy's SIMD loops: AVX2
    "OMP_NUM_THREADS": "1",  # reductions split across threads sum in another order
    "OPENBLAS_NUM_THREADS": "1",
    "MKL_NUM_THREADS": "1",
    "HEADSTART_GOLDEN_CHILD": "1",
}
UNSET = ("NPY_ENABLE_CPU_FEATURES", "MKL_DEBUG_CPU_TYPE", "MKL_CBWR_BRANCH")
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


def versions() -> dict:
    """What the recorded numbers depend on besides the code: library versions (numpy's and scipy's
    versions fix their OpenBLAS, torch's its MKL) and the C library's ``exp`` / ``log``."""
    import botorch
    import gpytorch
    import scipy
    import torch

    return {
        "numpy": np.__version__,
        "scipy": scipy.__version__,
        "torch": torch.__version__,
        "botorch": botorch.__version__,
        "gpytorch": gpytorch.__version__,
        "libc": "-".join(platform.libc_ver()),
        "machine": platform.machine(),
    }


def reference_kernels_missing() -> str | None:
    """Why this machine cannot run ``REFERENCE_ENV`` (it needs x86-64 with AVX2 and FMA), or None."""
    if platform.machine() not in ("x86_64", "AMD64"):
        return f"the reference kernels are x86-64 ones; this is {platform.machine()}"
    from numpy._core._multiarray_umath import __cpu_features__

    if not (__cpu_features__.get("AVX2") and __cpu_features__.get("FMA3")):
        return "the reference kernels need a CPU with AVX2 and FMA"
    return None


def reference_environment() -> dict[str, str]:
    """This process's environment with the kernel choices replaced by ``REFERENCE_ENV``."""
    return {k: v for k, v in os.environ.items() if k not in UNSET} | REFERENCE_ENV


def record_under_reference_kernels() -> dict:
    """Every case run in a child process under ``REFERENCE_ENV``: ``{"versions", "cases"}``."""
    child = subprocess.run(
        [sys.executable, __file__], env=reference_environment(), capture_output=True, text=True
    )
    if child.returncode != 0:
        raise RuntimeError(f"the golden run failed:\n{child.stderr[-4000:]}")
    return json.loads(child.stdout)


def _check_reference_kernels() -> None:
    """In the child: the libraries did pick the reference code paths."""
    import torch
    from numpy._core._multiarray_umath import __cpu_features__
    from threadpoolctl import threadpool_info

    assert torch.backends.cpu.get_cpu_capability() == "AVX2", (
        torch.backends.cpu.get_cpu_capability()
    )
    assert not __cpu_features__["X86_V4"], "numpy still dispatches to AVX-512"
    import scipy.linalg  # noqa: F401  (loads scipy's OpenBLAS)

    cores = {i.get("architecture") for i in threadpool_info() if i["internal_api"] == "openblas"}
    assert cores == {"Haswell"}, cores


if __name__ == "__main__":
    if os.environ.get("HEADSTART_GOLDEN_CHILD") != "1":
        result = record_under_reference_kernels()
        GOLDEN.write_text(json.dumps(result, indent=1) + "\n")
        print(f"wrote {len(result['cases'])} cases to {GOLDEN}", file=sys.stderr)
    else:
        _check_reference_kernels()
        result = {"versions": versions(), "cases": {name: thunk() for name, thunk in cases()}}
        json.dump(result, sys.stdout)
