"""Run a test's computation under one pinned set of CPU kernels, whatever the machine's own.

Numeric libraries pick their kernels for the CPU they run on: OpenBLAS's core type, torch's
vectorized loops (``ATEN_CPU_CAPABILITY``), MKL's code path, numpy's SIMD loops. Results then differ
in the last bits between an AVX-512 and an AVX2 machine, and an optimizer turns such a difference
into another local optimum (multi-task GP suggestions moved by up to 0.8 in the unit cube between
the two kernel sets on one machine). A check against recorded numbers, or between two computations
that agree only up to rounding, is portable only if it runs on the same kernels everywhere:
:func:`call` runs a function in a child process under :data:`REFERENCE_ENV`, the AVX2 code path of
every library with one thread each, which every x86-64 CPU with AVX2 and FMA (Intel or AMD) runs
identically -- in intent. Measured: a recording made so on an Intel Xeon differs on an AMD EPYC
(family 25) in 17 of 59 golden cases, all of them through torch (the NumPy / SciPy-only cases
agree bit for bit), by up to 0.5 in the unit cube once an optimizer amplifies a last-bit
difference. So recorded numbers are also keyed to the CPU (:func:`cpu`): a check runs where a
recording of this CPU exists, and skips, saying so, elsewhere. The results also depend on the
library versions; :func:`versions` names them.
"""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

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
}
UNSET = ("NPY_ENABLE_CPU_FEATURES", "MKL_DEBUG_CPU_TYPE")  # would override the choices above

_CHILD = """
import json, runpy, sys
sys.path.insert(0, {tests!r})
import reference_kernels
reference_kernels.check_pinned()
function = runpy.run_path(sys.argv[1])[sys.argv[2]]
result = function(*json.loads(sys.argv[3]))
with open(sys.argv[4], "w") as f:
    json.dump(result, f)
"""


def environment() -> dict[str, str]:
    """This process's environment with the kernel choices replaced by :data:`REFERENCE_ENV`."""
    return {k: v for k, v in os.environ.items() if k not in UNSET} | REFERENCE_ENV


def missing() -> str | None:
    """Why this machine cannot run the reference kernels (x86-64 with AVX2 and FMA), or None."""
    if platform.machine() not in ("x86_64", "AMD64"):
        return f"the reference kernels are x86-64 ones; this is {platform.machine()}"
    from numpy._core._multiarray_umath import __cpu_features__

    if not (__cpu_features__.get("AVX2") and __cpu_features__.get("FMA3")):
        return "the reference kernels need a CPU with AVX2 and FMA"
    return None


def versions() -> dict[str, str]:
    """What results under the reference kernels depend on besides the code: library versions
    (numpy's and scipy's fix their OpenBLAS, torch's its MKL) and the C library's ``exp``."""
    import botorch
    import gpytorch
    import numpy as np
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


def cpu() -> dict[str, str] | None:
    """The CPU that recorded numbers are keyed to: vendor, family and model (``/proc/cpuinfo``);
    ``None`` where that cannot be read (recorded numbers are then never compared)."""
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return None
    fields = {}
    for line in text.splitlines():
        key, _, value = line.partition(":")
        fields.setdefault(key.strip(), value.strip())
    if "vendor_id" not in fields:
        return None
    return {
        "vendor": fields["vendor_id"],
        "family": fields.get("cpu family", ""),
        "model": fields.get("model", ""),
    }


def same_cpu(recorded: dict[str, str] | None) -> bool:
    """Whether numbers recorded on ``recorded`` (a :func:`cpu` key) may be compared here. A key
    without family and model (a recording made before keys had them) matches its vendor."""
    here = cpu()
    if recorded is None or here is None:
        return False
    return all(here.get(k) == v for k, v in recorded.items() if v)


def call(path: str | Path, function: str, *args: Any) -> Any:
    """``function(*args)`` from the Python file ``path``, run in a child process under the
    reference kernels; its JSON-able result. The arguments go to the child as JSON."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "result.json"
        code = _CHILD.format(tests=str(Path(__file__).parent))
        child = subprocess.run(
            [sys.executable, "-c", code, str(path), function, json.dumps(args), str(out)],
            env=environment(),
            capture_output=True,
            text=True,
        )
        if child.returncode != 0:
            raise RuntimeError(
                f"{function} under the reference kernels failed:\n{child.stderr[-4000:]}"
            )
        return json.loads(out.read_text())


def check_pinned() -> None:
    """In the child: every library did pick the reference code path."""
    import scipy.linalg  # noqa: F401  (loads scipy's OpenBLAS)
    import torch
    from numpy._core._multiarray_umath import __cpu_features__
    from threadpoolctl import threadpool_info

    capability = torch.backends.cpu.get_cpu_capability()
    assert capability == "AVX2", f"torch runs its {capability} kernels"
    assert not __cpu_features__["X86_V4"], "numpy still dispatches to AVX-512"
    cores = {i.get("architecture") for i in threadpool_info() if i["internal_api"] == "openblas"}
    assert cores == {"Haswell"}, f"OpenBLAS runs its {cores} kernels"
