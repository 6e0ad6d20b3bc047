"""Seeded suggestions equal the golden file (to 1e-9) on every CPU it holds a recording of.

The golden file (``tests/golden/suggestions.json``) is recorded with ``python
tests/golden/make_golden.py``; every intended difference since is listed in ``INTENDED`` with its
reason, or the file is re-recorded in the commit that changes the behaviour. Both the recording and
this check run the cases in a child process pinned to one set of CPU kernels
(``tests/reference_kernels.py``), so the comparison does not depend on the kernels the machine
would pick (AVX-512 or AVX2). Torch's results still differ between an Intel and an AMD CPU, so
each recording is keyed to its CPU (vendor, family, model) and to the library versions; the check
runs where they match and skips, naming the reason, elsewhere.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest

import reference_kernels

_SPEC = importlib.util.spec_from_file_location(
    "make_golden", Path(__file__).parent / "golden" / "make_golden.py"
)
golden = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(golden)

RECORDED, NOT_HERE = golden.recording_for_this_cpu()
INTENDED: dict[str, str] = {}  # case -> why its suggestions changed on purpose (every CPU)


def test_same_seed_same_suggestions():
    """Every case, run now in a child process under the reference kernels, equals its recording.

    One test over all cases (not one per case): pytest-xdist ran a session fixture shared by
    parametrized cases once on *each* worker, doubling the suite's most expensive setup.
    """
    missing = reference_kernels.missing()
    if missing:
        pytest.skip(missing)
    if RECORDED is None:
        pytest.skip(NOT_HERE)
    fresh = golden.record_under_reference_kernels()
    assert fresh["versions"] == RECORDED["versions"]
    differ = {}
    for name, _ in golden.cases():
        if name in INTENDED or name in RECORDED.get("stale", {}):
            continue
        now, then = np.array(fresh["cases"][name]), np.array(RECORDED["cases"][name])
        gap = np.inf if now.shape != then.shape else float(np.max(np.abs(now - then), initial=0))
        if gap > 1e-9:
            differ[name] = gap
    assert not differ, f"{len(differ)} cases differ from the recording (max |difference|): {differ}"


def test_every_case_recorded():
    """Each recording holds every case, or names it stale: changed on purpose by a commit after
    the recording, on a CPU that commit could not record again (the reason says which change)."""
    for recording in golden.recordings():
        stale = recording.get("stale", {})
        assert not set(stale) & set(recording["cases"])
        assert all(isinstance(why, str) and why for why in stale.values())
        assert sorted([*recording["cases"], *stale]) == sorted(name for name, _ in golden.cases())


def test_the_reference_kernels_are_pinned_whatever_the_parent_runs(monkeypatch):
    """The child's environment overrides the parent's kernel and thread choices."""
    monkeypatch.setenv("OPENBLAS_CORETYPE", "SkylakeX")
    monkeypatch.setenv("MKL_CBWR", "AUTO")
    monkeypatch.setenv("NPY_ENABLE_CPU_FEATURES", "X86_V4")
    monkeypatch.setenv("OMP_NUM_THREADS", "8")
    env = reference_kernels.environment()
    assert env["OPENBLAS_CORETYPE"] == "Haswell" and env["MKL_CBWR"] == "COMPATIBLE"
    assert env["OMP_NUM_THREADS"] == "1" and "NPY_ENABLE_CPU_FEATURES" not in env
