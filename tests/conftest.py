"""Test-run settings shared by every test module.

The suite runs in parallel worker processes (``make test`` passes ``-n``), so each worker uses one
BLAS / OpenMP thread: two workers on two cores with two threads each spend most of their time
waiting on each other (a GP fit at n = 490 took 1.4 s with one thread and 8 s oversubscribed).
Set before numpy, scipy or torch are loaded; an explicit setting in the environment wins.
"""

from __future__ import annotations

import os

for _variable in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_variable, "1")
