r"""Thread limiting for the many small linear-algebra calls of the GP engine.

Fitting and acquisition search make thousands of tiny torch / BLAS calls (matrices of size
``n <= a few hundred``). Letting torch's OpenMP pool and OpenBLAS each spin up one thread per core
for such calls costs far more in synchronisation than it gains, and on a shared machine the pools
compete with each other. The engine therefore runs under :func:`limit_threads`, which sets torch to
one intra-op thread (restoring the previous value afterwards) and, when ``threadpoolctl`` is
installed, caps the BLAS pools to one thread as well. Same idea as Optuna's
``optuna/_gp/thread_limiting.py``.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

try:  # optional: caps OpenBLAS / MKL pools used by scipy and numpy
    from threadpoolctl import ThreadpoolController as _ThreadpoolController
except ImportError:  # pragma: no cover - threadpoolctl ships with scikit-learn and most stacks
    _ThreadpoolController = None

_controller = None  # scanning the loaded libraries costs ~5 ms, so it is done once


def _blas_controller():
    global _controller
    if _controller is None and _ThreadpoolController is not None:
        _controller = _ThreadpoolController()
    return _controller


@contextlib.contextmanager
def limit_threads(n: int = 1) -> Iterator[None]:
    """Run the body with ``n`` torch intra-op threads (and ``n`` BLAS threads if possible)."""
    import torch  # loaded on first use, so importing the engine does not load torch

    previous = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        controller = _blas_controller()
        if controller is None:
            yield
        else:
            with controller.limit(limits=n, user_api="blas"):
                yield
    finally:
        torch.set_num_threads(previous)
