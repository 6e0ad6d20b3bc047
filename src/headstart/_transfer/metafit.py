r"""Independent meta-task GPs of ScaML-GP, fitted as one batch by the GP core.

ScaML-GP (Tighineanu et al., "Scalable Meta-Learning with Gaussian Processes", AISTATS 2024)
models each meta-task ``m = 1..M`` by its own zero-mean GP (assumption A1, Sec. 4) and fits its
hyperparameters on its own data only (modularisation A3); the test-task prior (Theorem 1) needs
only the meta posteriors, which :class:`~headstart._gp.batched.BatchedGP` gives (raw units). The
kernel is the SE-ARD kernel of :mod:`headstart._gp.kernels`; each task's ``y`` is standardized by
its own mean and standard deviation (App. C.1).

**MAP fit** (Sec. 5, App. C.5). Each meta-GP maximizes ``log p(y_m | theta_m) + log p(theta_m)``
(the meta terms of Eq. 8 plus log-priors) under
:data:`~headstart._gp.hyperprior.META_HYPERPRIOR`,

    ell_j ~ Gamma(3, 6),  s ~ Gamma(2, 0.15)  (shape, rate),  log sigma^2 ~ N(-8, 2^2),
    ell_j, s in [1e-4, 1e2],  sigma^2 in [1e-8, 1e-2],

from one given (or the default: ``ell = 0.5``, ``s = 1``, ``sigma^2 = 1e-3``) start plus
``n_restarts`` starts drawn from the priors, keeping the best start per task: every (task, start)
pair is one L-BFGS-B run of :func:`headstart._gp.exact.fit_exact_gp`, all evaluated in batches.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

import numpy as np

from headstart._gp.batched import BatchedGP, standardize_each, unpack_tasks
from headstart._gp.exact import SE_FORM, fit_exact_gp
from headstart._gp.fit_settings import SE_COORDS
from headstart._gp.hyperprior import META_HYPERPRIOR, HyperPrior
from headstart._gp.params import GPParams


def _starts(
    M: int,
    d: int,
    init: GPParams | None,
    n_restarts: int,
    rng: np.random.Generator,
    prior: HyperPrior = META_HYPERPRIOR,
) -> np.ndarray:
    """``M x (1 + n_restarts) x (d + 2)`` raw starting points: ``init`` then prior draws."""
    if init is None:
        first = np.tile(prior.initial_raw(d), (M, 1))
    else:
        if init.inv_sq_lengthscales.shape != (M, d):
            raise ValueError(
                f"init has {init.inv_sq_lengthscales.shape} lengthscales; expected {(M, d)}."
            )
        first = init.to_raw(SE_COORDS)
    drawn = prior.sample_log(rng, (M, n_restarts), d)
    raw = np.concatenate([first[:, None, :], drawn], axis=1)
    bounds = SE_COORDS.bounds(d)
    return np.clip(raw, bounds[:, 0], bounds[:, 1])


def warped_tasks(tasks: Sequence[Any], kind: str) -> list[Any]:
    r"""``tasks`` with each task's values mapped by the output warp ``kind``
    (:func:`headstart._gp.warping.warp_targets`: ``"none"``, ``"yeo-johnson"`` or ``"copula"``),
    each by its own values, in the maximize convention; ``tasks`` themselves for ``"none"``.

    The copula is the per-task Gaussian-copula transform of Salinas, Shen & Perrone (ICML 2020,
    "A quantile-based approach for hyperparameter transfer learning", Sec. 3): only each task's
    order of configurations is kept, so tasks whose values differ in scale or tail become
    comparable.
    """
    from headstart._gp.warping import warp_targets
    from headstart._meta import MetaTask

    if kind == "none":
        return list(tasks)
    return [MetaTask(t.name, t.X, warp_targets(t.y_max(), kind), "maximize") for t in tasks]


def fit_meta_gps(
    tasks: Sequence[Any],
    is_cat: np.ndarray,
    *,
    names: Sequence[str] | None = None,
    seed: int = 0,
    n_restarts: int = 5,
    init: GPParams | None = None,
    prior: HyperPrior = META_HYPERPRIOR,
    map: Callable[[Callable, list], Iterable] | None = None,
    chunk_size: int = 256,
) -> BatchedGP:
    r"""Fit one independent zero-mean SE-ARD GP per meta-task by MAP, all tasks in one batch.

    Args:
        tasks: ``(X_m, y_m)`` pairs (``X_m`` ``n_m x d`` in ``[0, 1]``, ``y_m`` ``n_m`` raw values
            to be *maximized*) or :class:`headstart.sources.MetaTask` objects (``X``,
            ``y_max()``, ``name`` are used).
        is_cat: ``d`` boolean mask of categorical columns (Hamming distance).
        names: Task names (default: the ``MetaTask`` names, else ``"task0"``, ``"task1"``...).
        seed: Seed of the prior draws of the restarts.
        n_restarts: Starts drawn from the hyperprior, besides the first one.
        init: First start per task (e.g. an earlier fit); default ``prior.initial``.
        prior: The hyperprior object (default the paper's, App. C.5).
        map: ``map(function, payloads)`` to fit chunks of ``chunk_size`` tasks elsewhere (for
            example on a Dask cluster); ``None`` fits every task here, in one batch. The tasks'
            fits are independent and each keeps its starting points, so the result does not
            depend on the chunking beyond rounding.
        chunk_size: Tasks per chunk when ``map`` is given.

    Returns:
        The fitted :class:`~headstart._gp.batched.BatchedGP` (raw units).

    Example:
        >>> rng = np.random.default_rng(0)
        >>> X = rng.random((20, 1))
        >>> gps = fit_meta_gps([(X, np.sin(6 * X[:, 0])), (X, X[:, 0])], np.array([False]))
        >>> gps.mean(np.array([[0.3]])).shape
        (2, 1)
    """
    is_cat = np.asarray(is_cat, dtype=bool).reshape(-1)
    Xs, ys, task_names = unpack_tasks(tasks, len(is_cat), names)
    y_mean, y_std = standardize_each(ys)
    zs = [(y - mu) / sd for y, mu, sd in zip(ys, y_mean, y_std, strict=True)]
    M, d = len(Xs), len(is_cat)
    x0 = _starts(M, d, init, int(n_restarts), np.random.default_rng(seed), prior)
    if map is None or chunk_size >= M:
        best = _fit_chunk((Xs, zs, is_cat, x0, prior))
    else:  # chunks of tasks fitted elsewhere; every task keeps its own starting points
        chunks = [np.arange(i, min(i + chunk_size, M)) for i in range(0, M, chunk_size)]
        payloads = [([Xs[m] for m in c], [zs[m] for m in c], is_cat, x0[c], prior) for c in chunks]
        best = np.concatenate(list(map(_fit_chunk, payloads)))
    params = GPParams.from_raw(best, SE_COORDS)
    return BatchedGP.build(Xs, zs, is_cat, params, names=task_names, y_mean=y_mean, y_std=y_std)


def _fit_chunk(payload: tuple) -> np.ndarray:
    """MAP fits of a chunk of tasks from their starts: ``M x (d + 2)`` best raw parameters.

    ``payload = (Xs, zs, is_cat, x0, prior)`` with ``x0`` of shape ``M x S x (d + 2)``; one
    picklable argument, so chunks of a large meta-fit can be sent to other processes.
    """
    Xs, zs, is_cat, x0, prior = payload
    raw, _ = fit_exact_gp(Xs, zs, is_cat, x0, form=SE_FORM, prior=prior)
    return raw


__all__ = ["fit_meta_gps"]
