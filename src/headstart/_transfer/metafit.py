r"""Independent meta-task GPs of ScaML-GP, fitted and evaluated as one batch.

ScaML-GP (Tighineanu et al., "Scalable Meta-Learning with Gaussian Processes", AISTATS 2024)
models each meta-task ``m = 1..M`` by its own zero-mean GP (assumption A1, Sec. 4) and fits its
hyperparameters on its own data only (modularisation A3). The test-task prior (Theorem 1) needs
only the meta posteriors

    mu_m(x)         = k_m(x, X_m) K_m^{-1} y_m                              (R&W Eq. 2.25)
    Sigma_m(x, x')  = k_m(x, x') - k_m(x, X_m) K_m^{-1} k_m(X_m, x')        (R&W Eq. 2.26)

with ``K_m = k_m(X_m, X_m) + sigma_m^2 I`` and ``k_m`` the SE-ARD kernel of
:mod:`headstart._transfer.se_kernel`. Each task's ``y`` is standardized by its own mean and
standard deviation (App. C.1); predictions are returned in raw units.

**MAP fit** (Sec. 5, App. C.5). Each meta-GP maximizes ``log p(y_m | theta_m) + log p(theta_m)``
(the meta terms of Eq. 8 plus log-priors) with

    ell_j ~ Gamma(3, 6),  s ~ Gamma(2, 0.15)  (shape, rate),  log sigma^2 ~ N(-8, 2^2),
    ell_j, s in [1e-4, 1e2],  sigma^2 in [1e-8, 1e-2],

over the log-parameters with box bounds, by L-BFGS-B from one given (or default: ``ell = 0.5``,
``s = 1``, ``sigma^2 = 1e-3``) start plus ``n_restarts`` starts drawn from the priors, keeping the
best start per task. As BoTorch's ``ExactMarginalLogLikelihood`` does, L-BFGS-B sees the
objective divided by ``n_m``, so its tolerances mean the same for every task size.

**Batching.** All (task, start) pairs are independent L-BFGS-B runs of
:func:`headstart._engine.lbfgsb.batched_lbfgsb`, and every objective evaluation is one batched torch
computation over the requested runs. Tasks are padded to a common size: a padded row ``i`` has
``y_i = 0`` and ``K_ii = 1``, ``K_ij = 0`` (``j != i``), so ``K`` is block diagonal with an identity
block, its Cholesky factor is ``blockdiag(L_m, I)`` and the padding adds exactly 0 to
``y^T K^{-1} y`` and to ``log det K``. Tasks are grouped by size (geometric buckets) so that one
large task does not make every small one cubic in the large size.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from headstart._engine.lbfgsb import batched_lbfgsb
from headstart._engine.numerics import robust_cholesky, standardize
from headstart._engine.threads import limit_threads
from headstart._gp.fit_settings import FIT_FACTR, FIT_MAXITER, FIT_PGTOL, NOISE_BOUNDS
from headstart._transfer.hyperprior import META_HYPERPRIOR, SEHyperPrior
from headstart._transfer.se_kernel import DTYPE, FeatureMaps, log_kernel, se_kernel, vocabulary

# --- priors and constraints (App. C.5) --------------------------------------------------------
LENGTHSCALE_BOUNDS = (1e-4, 1e2)
OUTPUTSCALE_BOUNDS = (1e-4, 1e2)
_BUCKET_RATIO = 1.25  # tasks whose sizes differ by less than this factor share a padded size
_BUCKET_FLOOR = 16  # below this size padding costs nothing worth a separate batch
_FIT_CHUNK_ELEMENTS = 1 << 18  # runs per objective call: ~2 MB of kernel matrices (cache-sized)
# prediction works on row chunks of ~this many entries (2 MB: cache-sized)
_CHUNK_ELEMENTS = 1 << 18
_LOG_2PI = math.log(2.0 * math.pi)


def log_prior(
    log_ell: torch.Tensor,
    log_s: torch.Tensor,
    log_noise: torch.Tensor,
    prior: SEHyperPrior = META_HYPERPRIOR,
) -> torch.Tensor:
    r"""Log density of the meta-GP hyperprior (App. C.5), normalized, on the parameters themselves.

    log p = sum_j log Gamma(ell_j; 3, 6) + log Gamma(s; 2, 0.15) + log LogNormal(sigma^2; -8, 2)

    by default (:data:`~headstart._transfer.hyperprior.META_HYPERPRIOR`). As in GPyTorch, the
    density is that of ``theta`` (no Jacobian of the log transform).

    Args:
        log_ell: ``R x d`` log lengthscales.
        log_s: ``R`` log output scales.
        log_noise: ``R`` log noise variances.
        prior: The hyperprior object.

    Returns:
        ``R`` log densities.
    """
    return prior.log_prob(log_ell, log_s, log_noise)


def _raw_bounds(d: int) -> np.ndarray:
    """``(d + 2) x 2`` bounds of ``raw = (log ell_1..d, log s, log sigma^2)``."""
    rows = [LENGTHSCALE_BOUNDS] * d + [OUTPUTSCALE_BOUNDS, NOISE_BOUNDS]
    return np.log(np.asarray(rows, dtype=np.float64))


# --- parameters -------------------------------------------------------------------------------
@dataclass(frozen=True)
class MetaGPParams:
    r"""Hyperparameters of ``M`` meta-GPs, in standardized-``y`` units.

    Attributes:
        inv_sq_lengthscales: ``M x d`` weights ``w = 1 / ell^2``.
        outputscale: ``M`` output scales ``s``.
        noise: ``M`` noise variances ``sigma^2``.
    """

    inv_sq_lengthscales: np.ndarray
    outputscale: np.ndarray
    noise: np.ndarray

    def __post_init__(self) -> None:
        w = np.atleast_2d(np.asarray(self.inv_sq_lengthscales, dtype=np.float64))
        object.__setattr__(self, "inv_sq_lengthscales", w)
        for name in ("outputscale", "noise"):
            value = np.asarray(getattr(self, name), dtype=np.float64).reshape(-1)
            if value.shape != (w.shape[0],):
                raise ValueError(f"{name} must have {w.shape[0]} entries; got {value.shape}.")
            object.__setattr__(self, name, value)

    @property
    def lengthscales(self) -> np.ndarray:
        """``M x d`` lengthscales ``ell = w^{-1/2}``."""
        return 1.0 / np.sqrt(self.inv_sq_lengthscales)

    def select(self, idx: np.ndarray) -> MetaGPParams:
        """The rows ``idx``."""
        return MetaGPParams(self.inv_sq_lengthscales[idx], self.outputscale[idx], self.noise[idx])

    def to_raw(self) -> np.ndarray:
        """``M x (d + 2)`` log-parameters ``(log ell, log s, log sigma^2)``, clipped to the bounds."""
        raw = np.column_stack(
            [-0.5 * np.log(self.inv_sq_lengthscales), np.log(self.outputscale), np.log(self.noise)]
        )
        bounds = _raw_bounds(self.inv_sq_lengthscales.shape[1])
        return np.clip(raw, bounds[:, 0], bounds[:, 1])

    @classmethod
    def from_raw(cls, raw: np.ndarray) -> MetaGPParams:
        """Inverse of :meth:`to_raw`."""
        raw = np.atleast_2d(np.asarray(raw, dtype=np.float64))
        return cls(np.exp(-2.0 * raw[:, :-2]), np.exp(raw[:, -2]), np.exp(raw[:, -1]))


# --- batched MAP objective --------------------------------------------------------------------
def _batched_cholesky(K: torch.Tensor, diag_mask: torch.Tensor, *, warn: bool) -> torch.Tensor:
    """Cholesky of each ``K[r]``; jitter is added only to the matrices that fail (real rows only)."""
    return robust_cholesky(K, diag_mask=diag_mask, warn=warn, label="A meta-GP kernel matrix")


def _padded_gram(
    X: torch.Tensor,
    mask: torch.Tensor,
    is_cat: torch.Tensor,
    w: torch.Tensor,
    s: torch.Tensor,
    noise: torch.Tensor,
) -> torch.Tensor:
    """``K = k(X, X) + sigma^2 I`` on the real rows, identity on the padding: ``R x N x N``."""
    K = se_kernel(X, X, is_cat, w, s, symmetric=True)
    K = K * (mask.unsqueeze(-1) * mask.unsqueeze(-2))
    return K + torch.diag_embed(noise.unsqueeze(-1) * mask + (1.0 - mask))


def neg_log_posterior(
    raw: torch.Tensor,
    X: torch.Tensor,
    y: torch.Tensor,
    mask: torch.Tensor,
    n: torch.Tensor,
    is_cat: torch.Tensor,
    prior: SEHyperPrior = META_HYPERPRIOR,
) -> tuple[torch.Tensor, torch.Tensor]:
    r"""MAP objective ``-(log p(y | theta) + log p(theta))`` of ``R`` padded tasks at once.

    log p(y | theta) = -1/2 |L^{-1} y|^2 - sum_i log L_ii - n/2 log(2 pi)       (R&W Eq. 2.30)

    Args:
        raw: ``R x (d + 2)`` log-parameters ``(log ell, log s, log sigma^2)``.
        X: ``R x N x d`` inputs, padded rows arbitrary.
        y: ``R x N`` standardized targets, 0 on padded rows.
        mask: ``R x N``: 1 on real rows, 0 on padded rows (real rows first).
        n: ``R`` numbers of real rows.
        is_cat: ``d`` boolean mask of categorical columns.

    Returns:
        ``(objective R, log marginal likelihood R)``, differentiable in ``raw``.
    """
    d = X.shape[-1]
    log_ell, log_s, log_noise = raw[:, :d], raw[:, d], raw[:, d + 1]
    K = _padded_gram(
        X, mask, is_cat, torch.exp(-2.0 * log_ell), torch.exp(log_s), torch.exp(log_noise)
    )
    L = _batched_cholesky(K, mask, warn=False)
    a = torch.linalg.solve_triangular(L, y.unsqueeze(-1), upper=False).squeeze(-1)
    mll = (
        -0.5 * (a * a).sum(-1)
        - torch.log(torch.diagonal(L, dim1=-2, dim2=-1)).sum(-1)
        - 0.5 * n * _LOG_2PI
    )
    return -(mll + prior.log_prob(log_ell, log_s, log_noise)), mll


def neg_log_posterior_and_grad(
    raw: torch.Tensor,
    X: torch.Tensor,
    y: torch.Tensor,
    mask: torch.Tensor,
    n: torch.Tensor,
    is_cat: torch.Tensor,
    *,
    padded: bool = True,
    vocab: list[torch.Tensor] | None = None,
    prior: SEHyperPrior = META_HYPERPRIOR,
) -> tuple[torch.Tensor, torch.Tensor]:
    r""":func:`neg_log_posterior` and its gradient in ``raw``, in closed form.

    With ``W = (K^{-1} - alpha alpha^T) / 2`` (the gradient of ``-log p(y | theta)`` in ``K``,
    R&W Eq. 5.9), ``K_f = k(X, X)`` and ``P = W * K_f`` (elementwise):

        d / d log s        = sum_ik P_ik
        d / d log sigma^2  = sigma^2 tr(W)
        d / d log ell_j    = w_j sum_ik P_ik D_j,ik,    D_j,ik = (x_ij - x_kj)^2 or 1[x_ij != x_kj]

    and the numeric ``sum_ik P_ik D_j,ik = 2 sum_i x_ij^2 (P 1)_i - 2 x_j^T P x_j`` (``P``
    symmetric). This avoids autograd through the batched Cholesky (several times the cost of the
    factorization), and the kernel is built in place as ``exp(log s - r^2 / 2)`` so that each
    ``R x N x N`` array is streamed through memory as few times as possible.

    Args:
        raw, X, y, mask, n, is_cat: As for :func:`neg_log_posterior`.
        padded: ``False`` promises ``mask`` is all ones (skips the masking).
        vocab: Categorical vocabulary covering ``X`` (default: computed from ``X``).
        prior: The hyperprior object.

    Returns:
        ``(objective R, gradient R x (d + 2))``.
    """
    d = X.shape[-1]
    log_ell, log_s, log_noise = raw[:, :d], raw[:, d], raw[:, d + 1]
    w, noise = torch.exp(-2.0 * log_ell), torch.exp(log_noise)
    valid = mask > 0 if padded else None
    maps = FeatureMaps(w, log_s, is_cat, vocabulary(is_cat, X) if vocab is None else vocab)
    E = log_kernel(maps.phi(X, valid), maps.psi(X, valid))
    E = torch.minimum(E, log_s[:, None, None], out=E)  # r^2 >= 0
    diag = log_s.unsqueeze(-1).expand(-1, E.shape[-1])
    E.diagonal(dim1=-2, dim2=-1).copy_(
        diag if valid is None else diag.masked_fill(~valid, -math.inf)
    )
    Kf = E.exp_()  # exactly 0 in padded rows and columns
    K = Kf.clone()
    K.diagonal(dim1=-2, dim2=-1).add_(noise.unsqueeze(-1) * mask + (1.0 - mask))
    L = _batched_cholesky(K, mask, warn=False)
    K_inv = torch.cholesky_inverse(L)
    alpha = K_inv @ y.unsqueeze(-1)  # R x N x 1
    mll = (
        -0.5 * (y * alpha.squeeze(-1)).sum(-1)
        - torch.log(torch.diagonal(L, dim1=-2, dim2=-1)).sum(-1)
        - 0.5 * n * _LOG_2PI
    )
    W2 = K_inv.sub_(alpha * alpha.transpose(-1, -2))  # 2 W
    g_noise = 0.5 * noise * (torch.diagonal(W2, dim1=-2, dim2=-1) * mask).sum(-1)
    P2 = W2.mul_(Kf)  # 2 P
    row = P2.sum(-1)  # R x N
    Xc = X - 0.5  # P is 0 in padded rows and columns
    D = (Xc * Xc * row.unsqueeze(-1)).sum(-2) - (Xc * (P2 @ Xc)).sum(-2)  # R x d
    for j in maps.cat_cols:
        differ = X[:, :, j].unsqueeze(-1) != X[:, :, j].unsqueeze(-2)
        D[:, j] = 0.5 * (P2 * differ).sum((-1, -2))
    grad = torch.cat([w * D, 0.5 * row.sum(-1, keepdim=True), g_noise.unsqueeze(-1)], dim=-1)
    grad = grad - prior.grad(log_ell, log_s, log_noise)
    return -(mll + prior.log_prob(log_ell, log_s, log_noise)), grad


# --- data handling ----------------------------------------------------------------------------
def _unpack_tasks(
    tasks: Sequence[Any], is_cat: np.ndarray, names: Sequence[str] | None
) -> tuple[list[np.ndarray], list[np.ndarray], list[str]]:
    Xs, ys, task_names = [], [], []
    d = len(is_cat)
    for m, task in enumerate(tasks):
        if hasattr(task, "y_max"):  # headstart.sources.MetaTask
            X, y, name = task.X, task.y_max(), str(task.name)
        else:
            X, y = task
            name = f"task{m}"
        X = np.asarray(X, dtype=np.float64)
        y = np.asarray(y, dtype=np.float64).reshape(-1)
        if X.ndim != 2 or X.shape[1] != d or X.shape[0] != len(y):
            raise ValueError(
                f"Meta-task {m}: expected X of shape (n, {d}) and n values of y; got X "
                f"{X.shape} and {len(y)} values."
            )
        if len(y) == 0:
            raise ValueError(f"Meta-task {m} ({name!r}) has no observations.")
        if not (np.isfinite(X).all() and np.isfinite(y).all()):
            raise ValueError(f"Meta-task {m} ({name!r}) contains NaN or infinite values.")
        Xs.append(X)
        ys.append(y)
        task_names.append(name)
    if not Xs:
        raise ValueError("At least one meta-task is needed.")
    if names is not None:
        task_names = [str(v) for v in names]
        if len(task_names) != len(Xs):
            raise ValueError(f"Got {len(task_names)} names for {len(Xs)} meta-tasks.")
    return Xs, ys, task_names


def _standardize(ys: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """Per-task mean and standard deviation (:func:`headstart._engine.numerics.standardize`)."""
    stats = np.array([standardize(y)[1:] for y in ys]).reshape(-1, 2)
    return stats[:, 0], stats[:, 1]


def _pad(
    Xs: list[np.ndarray], zs: list[np.ndarray]
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Padded ``X`` (``M x N x d``, padding at the cube centre), ``y``, ``mask`` and ``n``."""
    n = np.array([len(z) for z in zs])
    size = int(n.max())
    X = np.full((len(Xs), size, Xs[0].shape[1]), 0.5)
    y = np.zeros((len(Xs), size))
    mask = np.zeros((len(Xs), size))
    for m, (Xm, zm) in enumerate(zip(Xs, zs, strict=True)):
        X[m, : len(zm)], y[m, : len(zm)], mask[m, : len(zm)] = Xm, zm, 1.0
    return (torch.from_numpy(X), torch.from_numpy(y), torch.from_numpy(mask), torch.from_numpy(n))


def _size_buckets(n: np.ndarray) -> list[np.ndarray]:
    """Task indices grouped by geometric size class (ratio ``_BUCKET_RATIO``, floor ``16``)."""
    key = np.ceil(
        np.log(np.maximum(n, _BUCKET_FLOOR) / _BUCKET_FLOOR) / math.log(_BUCKET_RATIO) - 1e-9
    ).astype(int)
    return [np.flatnonzero(key == k) for k in np.unique(key)]


def _starts(
    M: int,
    d: int,
    init: MetaGPParams | None,
    n_restarts: int,
    rng: np.random.Generator,
    prior: SEHyperPrior = META_HYPERPRIOR,
) -> np.ndarray:
    """``M x (1 + n_restarts) x (d + 2)`` raw starting points: ``init`` then prior draws."""
    if init is None:
        first = np.tile(prior.initial_raw(d), (M, 1))
    else:
        if init.inv_sq_lengthscales.shape != (M, d):
            raise ValueError(
                f"init has {init.inv_sq_lengthscales.shape} lengthscales; expected {(M, d)}."
            )
        first = init.to_raw()
    drawn = prior.sample_log(rng, (M, n_restarts), d)
    raw = np.concatenate([first[:, None, :], drawn], axis=1)
    bounds = _raw_bounds(d)
    return np.clip(raw, bounds[:, 0], bounds[:, 1])


# --- fitting ----------------------------------------------------------------------------------
def fit_meta_gps(
    tasks: Sequence[Any],
    is_cat: np.ndarray,
    *,
    names: Sequence[str] | None = None,
    seed: int = 0,
    n_restarts: int = 5,
    init: MetaGPParams | None = None,
    prior: SEHyperPrior = META_HYPERPRIOR,
    map: Callable[[Callable, list], Iterable] | None = None,
    chunk_size: int = 256,
) -> MetaGPs:
    r"""Fit one independent zero-mean SE-ARD GP per meta-task by MAP, all tasks in one batch.

    Args:
        tasks: ``(X_m, y_m)`` pairs (``X_m`` ``n_m x d`` in ``[0, 1]``, ``y_m`` ``n_m`` raw values
            to be *maximized*) or :class:`headstart.sources.MetaTask` objects (``X``,
            ``y_max()``, ``name`` are used).
        is_cat: ``d`` boolean mask of categorical columns (Hamming distance).
        names: Task names (default: the ``MetaTask`` names, else ``"task0"``, ``"task1"``...).
        seed: Seed of the prior draws of the restarts.
        n_restarts: Starts drawn from the hyperprior, besides the first one.
        init: First start per task (e.g. an earlier fit); default ``ell = 0.5, s = 1,
            sigma^2 = 1e-3`` (``prior.initial``) for every task.
        prior: The hyperprior object (default the paper's, App. C.5).
        map: ``map(function, payloads)`` to fit chunks of ``chunk_size`` tasks elsewhere (for
            example on a Dask cluster); ``None`` fits every task here, in one batch. The tasks'
            fits are independent and each keeps its starting points, so the result does not
            depend on the chunking beyond rounding.
        chunk_size: Tasks per chunk when ``map`` is given.

    Returns:
        The fitted :class:`MetaGPs`.

    Example:
        >>> rng = np.random.default_rng(0)
        >>> X = rng.random((20, 1))
        >>> gps = fit_meta_gps([(X, np.sin(6 * X[:, 0])), (X, X[:, 0])], np.array([False]))
        >>> gps.mean(np.array([[0.3]])).shape
        (2, 1)
    """
    is_cat = np.asarray(is_cat, dtype=bool).reshape(-1)
    Xs, ys, task_names = _unpack_tasks(tasks, is_cat, names)
    y_mean, y_std = _standardize(ys)
    zs = [(y - mu) / sd for y, mu, sd in zip(ys, y_mean, y_std, strict=True)]
    M, d = len(Xs), len(is_cat)
    x0 = _starts(M, d, init, int(n_restarts), np.random.default_rng(seed), prior)
    if map is None or chunk_size >= M:
        best = _fit_batch((Xs, zs, is_cat, x0, prior))
    else:  # chunks of tasks fitted elsewhere; every task keeps its own starting points
        chunks = [np.arange(i, min(i + chunk_size, M)) for i in range(0, M, chunk_size)]
        payloads = [([Xs[m] for m in c], [zs[m] for m in c], is_cat, x0[c], prior) for c in chunks]
        best = np.concatenate(list(map(_fit_batch, payloads)))
    params = MetaGPParams.from_raw(best)
    return MetaGPs._build(Xs, zs, is_cat, params, task_names, y_mean, y_std)


def _fit_batch(payload: tuple) -> np.ndarray:
    """MAP fits of a batch of tasks from their starts: ``M x (d + 2)`` best raw parameters.

    ``payload = (Xs, zs, is_cat, x0, prior)`` with ``x0`` of shape ``M x S x (d + 2)``; one
    picklable argument, so chunks of a large meta-fit can be sent to other processes.
    """
    Xs, zs, is_cat, x0, prior = payload
    M, S, d = len(Xs), x0.shape[1], len(is_cat)
    x0 = x0.reshape(M * S, d + 2)
    is_cat_t = torch.from_numpy(is_cat)

    n_all = np.array([len(z) for z in zs])
    buckets = _size_buckets(n_all)
    bucket_of = np.empty(M, dtype=int)
    pos_in_bucket = np.empty(M, dtype=int)
    padded, vocabs = [], []
    for b, members in enumerate(buckets):
        bucket_of[members], pos_in_bucket[members] = b, np.arange(len(members))
        padded.append(_pad([Xs[m] for m in members], [zs[m] for m in members]))
        vocabs.append(vocabulary(is_cat_t, padded[-1][0]))

    def fun(idx: np.ndarray, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        task = idx // S
        values, grads = np.empty(len(idx)), np.empty_like(x)
        for b in np.unique(bucket_of[task]):
            in_bucket = np.flatnonzero(bucket_of[task] == b)
            size = padded[b][0].shape[1]
            step = max(1, _FIT_CHUNK_ELEMENTS // size**2)  # keep each chunk cache-sized
            for start in range(0, len(in_bucket), step):
                rows = in_bucket[start : start + step]
                loc = pos_in_bucket[task[rows]]
                Xb, yb, maskb, nb = (t[torch.from_numpy(loc)] for t in padded[b])
                objective, grad = neg_log_posterior_and_grad(
                    torch.from_numpy(x[rows]),
                    Xb,
                    yb,
                    maskb,
                    nb,
                    is_cat_t,
                    padded=bool((n_all[buckets[b][loc]] < size).any()),
                    vocab=vocabs[b],
                    prior=prior,
                )
                values[rows] = (objective / nb).numpy()
                grads[rows] = (grad / nb.unsqueeze(-1)).numpy()
        return values, grads

    with limit_threads():
        raw, per_datum = batched_lbfgsb(
            fun, x0, _raw_bounds(d), maxiter=FIT_MAXITER, pgtol=FIT_PGTOL, factr=FIT_FACTR
        )
    per_datum = np.where(np.isfinite(per_datum), per_datum, np.inf).reshape(M, S)
    best = per_datum.argmin(axis=1)
    return raw.reshape(M, S, d + 2)[np.arange(M), best]


# --- fitted meta-GPs --------------------------------------------------------------------------
class MetaGPs:
    r"""``M`` fitted meta-GPs with cached factors; predictions in raw units, batched over tasks.

    Internally the tasks are padded to ``N = max_m n_m`` rows (``X`` at the cube centre, ``y = 0``,
    kernel rows masked to 0, ``K`` identity on the padding), which leaves every posterior exactly
    unchanged. Cached per task: ``L^{-1}`` of ``K = L L^T`` and ``alpha = K^{-1} y``.

    Build with :func:`fit_meta_gps`, :meth:`from_params` or :meth:`from_json`.

    Attributes:
        names: Task names.
        is_cat: ``d`` boolean mask of categorical columns.
        params: Hyperparameters (standardized-``y`` units).
        y_mean, y_std: ``M`` standardization constants: ``raw = y_mean + y_std * standardized``.
        n_train: ``M`` numbers of observations.
        log_marginal_likelihoods: ``M`` values of ``log p(y_m | X_m, theta_m)`` of the
            standardized ``y`` at the fitted parameters (the meta terms of Eq. 8).
    """

    def __init__(
        self,
        names: list[str],
        is_cat: np.ndarray,
        params: MetaGPParams,
        y_mean: np.ndarray,
        y_std: np.ndarray,
        X: torch.Tensor,
        mask: torch.Tensor,
        L_inv: torch.Tensor,
        alpha: torch.Tensor,
        log_marginal_likelihoods: np.ndarray,
    ) -> None:
        self.names = list(names)
        self.is_cat = np.asarray(is_cat, dtype=bool)
        self.params = params
        self.y_mean = np.asarray(y_mean, dtype=np.float64)
        self.y_std = np.asarray(y_std, dtype=np.float64)
        self.log_marginal_likelihoods = np.asarray(log_marginal_likelihoods, dtype=np.float64)
        self._X, self._mask, self._L_inv, self._alpha = X, mask, L_inv, alpha
        self.n_train = mask.sum(-1).numpy().astype(int)
        self._is_cat_t = torch.from_numpy(self.is_cat)
        self._w = torch.from_numpy(params.inv_sq_lengthscales)
        self._w_num = self._w * (~self._is_cat_t).to(DTYPE)  # gradients: 0 on categorical columns
        self._s = torch.from_numpy(params.outputscale)
        self._log_s = torch.log(self._s)
        self._maps, self._psi_train = self._features(X[mask > 0])

    def inputs(self) -> np.ndarray:
        """All tasks' training inputs, stacked (``sum_m n_m x d``)."""
        return self._X[self._mask > 0].numpy()

    # --- construction --------------------------------------------------------------------------
    @classmethod
    def _build(
        cls,
        Xs: list[np.ndarray],
        zs: list[np.ndarray],
        is_cat: np.ndarray,
        params: MetaGPParams,
        names: list[str],
        y_mean: np.ndarray,
        y_std: np.ndarray,
    ) -> MetaGPs:
        """Factorize every task's ``K`` at ``params`` (standardized targets ``zs``)."""
        X, y, mask, n = _pad(Xs, zs)
        with torch.no_grad(), limit_threads():
            K = _padded_gram(
                X,
                mask,
                torch.from_numpy(np.asarray(is_cat, dtype=bool)),
                torch.from_numpy(params.inv_sq_lengthscales),
                torch.from_numpy(params.outputscale),
                torch.from_numpy(params.noise),
            )
            L = _batched_cholesky(K, mask, warn=True)
            eye = torch.eye(L.shape[-1], dtype=DTYPE).expand_as(L).contiguous()
            L_inv = torch.linalg.solve_triangular(L, eye, upper=False)
            a = (L_inv @ y.unsqueeze(-1)).squeeze(-1)
            alpha = (L_inv.transpose(-1, -2) @ a.unsqueeze(-1)).squeeze(-1)
            diag = torch.diagonal(L, dim1=-2, dim2=-1)
            lml = -0.5 * (a * a).sum(-1) - torch.log(diag).sum(-1) - 0.5 * n * _LOG_2PI
        return cls(names, is_cat, params, y_mean, y_std, X, mask, L_inv, alpha, lml.numpy())

    @classmethod
    def from_params(
        cls,
        tasks: Sequence[Any],
        is_cat: np.ndarray,
        params: MetaGPParams,
        *,
        names: Sequence[str] | None = None,
        y_mean: np.ndarray | None = None,
        y_std: np.ndarray | None = None,
    ) -> MetaGPs:
        """Meta-GPs at given hyperparameters (no fit); ``y`` statistics default to the data's."""
        is_cat = np.asarray(is_cat, dtype=bool).reshape(-1)
        Xs, ys, task_names = _unpack_tasks(tasks, is_cat, names)
        if params.inv_sq_lengthscales.shape != (len(Xs), len(is_cat)):
            raise ValueError(
                f"params hold {params.inv_sq_lengthscales.shape} lengthscales for "
                f"{len(Xs)} tasks of dimension {len(is_cat)}."
            )
        mean, std = _standardize(ys)
        mean = mean if y_mean is None else np.asarray(y_mean, dtype=np.float64)
        std = std if y_std is None else np.asarray(y_std, dtype=np.float64)
        zs = [(y - mu) / sd for y, mu, sd in zip(ys, mean, std, strict=True)]
        return cls._build(Xs, zs, is_cat, params, task_names, mean, std)

    def to_json(self) -> dict:
        """Names, hyperparameters and ``y`` statistics as JSON-safe values (not the data)."""
        p = self.params
        return {
            "names": list(self.names),
            "inv_sq_lengthscales": [[float(v) for v in row] for row in p.inv_sq_lengthscales],
            "outputscale": [float(v) for v in p.outputscale],
            "noise": [float(v) for v in p.noise],
            "y_mean": [float(v) for v in self.y_mean],
            "y_std": [float(v) for v in self.y_std],
        }

    @classmethod
    def from_json(cls, data: dict, tasks: Sequence[Any], is_cat: np.ndarray) -> MetaGPs:
        """Rebuild from :meth:`to_json` output and the same meta-data (no refit)."""
        params = MetaGPParams(
            np.asarray(data["inv_sq_lengthscales"], dtype=np.float64).reshape(
                len(data["names"]), -1
            ),
            np.asarray(data["outputscale"], dtype=np.float64),
            np.asarray(data["noise"], dtype=np.float64),
        )
        return cls.from_params(
            tasks,
            is_cat,
            params,
            names=data["names"],
            y_mean=np.asarray(data["y_mean"], dtype=np.float64),
            y_std=np.asarray(data["y_std"], dtype=np.float64),
        )

    @property
    def n_tasks(self) -> int:
        """Number of meta-tasks ``M``."""
        return len(self.names)

    def select(self, idx: Sequence[int] | np.ndarray) -> MetaGPs:
        """The meta-GPs of tasks ``idx`` (no refit; padding trimmed to their largest task)."""
        idx = np.asarray(idx, dtype=int).reshape(-1)
        t = torch.from_numpy(idx)
        size = int(self._mask[t].sum(-1).max()) if len(idx) else 0
        return MetaGPs(
            [self.names[i] for i in idx],
            self.is_cat,
            self.params.select(idx),
            self.y_mean[idx],
            self.y_std[idx],
            self._X[t, :size],
            self._mask[t, :size],
            self._L_inv[t, :size, :size],
            self._alpha[t, :size],
            self.log_marginal_likelihoods[idx],
        )

    # --- prediction ----------------------------------------------------------------------------
    def _features(self, *extra: torch.Tensor) -> tuple[FeatureMaps, torch.Tensor]:
        """Feature maps whose vocabulary covers the training data and ``extra``; train features."""
        maps = FeatureMaps(self._w, self._log_s, self._is_cat_t, vocabulary(self._is_cat_t, *extra))
        return maps, maps.psi(self._X, self._mask > 0)

    def _k_train(self, phi: torch.Tensor, psi_train: torch.Tensor | None = None) -> torch.Tensor:
        """``k_m(X, X_m)`` from the features of ``X``: ``M x m x N``, 0 in the padded columns."""
        return log_kernel(phi, self._psi_train if psi_train is None else psi_train).exp_()

    def _chunks(self, m: int, per_row: int) -> list[slice]:
        step = max(1, _CHUNK_ELEMENTS // max(1, self.n_tasks * per_row))
        return [slice(i, min(i + step, m)) for i in range(0, m, step)]

    def _as_tensor(self, X: np.ndarray) -> torch.Tensor:
        X = np.asarray(X, dtype=np.float64)
        return torch.from_numpy(X.reshape(-1, len(self.is_cat)))

    def mean(self, X: np.ndarray) -> np.ndarray:
        r"""Posterior means ``mu_m(X)`` in raw units: ``M x m``.

        mu_m^raw(x) = ybar_m + s_m^y k_m(x, X_m) K_m^{-1} y_m            (R&W Eq. 2.25)
        """
        Xt = self._as_tensor(X)
        out = torch.empty(self.n_tasks, len(Xt), dtype=DTYPE)
        with torch.no_grad():
            for c in self._chunks(len(Xt), self._mask.shape[1]):
                k = self._k_train(self._maps.phi(Xt[c]))
                out[:, c] = (k @ self._alpha.unsqueeze(-1)).squeeze(-1)
        return self.y_mean[:, None] + self.y_std[:, None] * out.numpy()

    def var(self, X: np.ndarray) -> np.ndarray:
        r"""Posterior variances ``Sigma_m(x, x)`` of ``f_m`` in raw units, clamped at 0: ``M x m``."""
        Xt = self._as_tensor(X)
        out = torch.empty(self.n_tasks, len(Xt), dtype=DTYPE)
        with torch.no_grad():
            for c in self._chunks(len(Xt), self._mask.shape[1]):
                V = self._L_inv @ self._k_train(self._maps.phi(Xt[c])).transpose(-1, -2)
                out[:, c] = (self._s[:, None] - (V * V).sum(-2)).clamp_min(0.0)
        return (self.y_std**2)[:, None] * out.numpy()

    def cov(self, X: np.ndarray, Z: np.ndarray) -> np.ndarray:
        r"""Posterior covariances ``Sigma_m(X, Z)`` of ``f_m`` (no noise) in raw units: ``M x m x p``.

        Sigma_m(x, z) = (s_m^y)^2 [k_m(x, z) - k_m(x, X_m) K_m^{-1} k_m(X_m, z)]   (R&W Eq. 2.26)
        """
        Xt, Zt = self._as_tensor(X), self._as_tensor(Z)
        with torch.no_grad():
            maps, psi_train = self._features(self._X[self._mask > 0], Xt, Zt)
            phi_X, phi_Z = maps.phi(Xt), maps.phi(Zt)
            VX = self._L_inv @ self._k_train(phi_X, psi_train).transpose(-1, -2)
            VZ = self._L_inv @ self._k_train(phi_Z, psi_train).transpose(-1, -2)
            cov = log_kernel(phi_X, maps.psi(Zt)).exp_() - VX.transpose(-1, -2) @ VZ
        return (self.y_std**2)[:, None, None] * cov.numpy()

    def weighted(self, a: np.ndarray, b: np.ndarray, Z: np.ndarray) -> WeightedMeta:
        """Weighted sums of the posteriors against fixed points ``Z``; see :class:`WeightedMeta`."""
        return WeightedMeta(self, a, b, Z)


class WeightedMeta:
    r"""Weighted sums of the meta posteriors, as in ScaML-GP's test prior (Theorem 1) and RGPE.

    For weights ``a_m``, ``b_m`` and fixed points ``Z`` (``p x d``, typically the test inputs
    ``X_t``; ``p`` may be 0), a call at ``X`` (``m x d``) returns, in raw units,

        mean(x)     = sum_m a_m mu_m(x)
        var(x)      = sum_m b_m Sigma_m(x, x)         (each Sigma_m(x, x) clamped at 0)
        cross(x, z) = sum_m b_m Sigma_m(x, z)

    (ScaML-GP: ``a_m = w_m``, ``b_m = w_m^2``; ``b_m >= 0``.) Tasks with ``a_m = b_m = 0`` are
    dropped. ``B_m = K_m^{-1} k_m(X_m, Z)`` is precomputed and stacked with ``L_m^{-1}`` and
    ``alpha_m``, so that after the kernel rows ``k_m(x, X_m)`` (one ``bmm`` and an ``exp``) one
    batched matmul yields the mean, variance and cross terms of every task; the task sums are then
    reductions over the leading dimension. The cost of a call is about
    ``2 M m N (N + p)`` flops plus ``M m (N + p)`` exponentials (and ~3x that with ``grad``), so
    ``M = 512, N = 64, p = 50`` is ~15 GFLOP per 2048 points: seconds on one core. A gradient
    call first builds (once) a stack of ``M N (2 N + 1 + p (d + 1))`` doubles; pass ``contract``
    to skip the ``d p`` part when only contractions of ``d cross`` are needed.

    Gradients in ``x`` (numeric columns; 0 on categorical ones), with ``k_i = k_m(x, X_{m,i})``,
    ``dk_i / dx_j = -w_mj k_i (x_j - X_{m,ij})`` and ``beta_m = K_m^{-1} k_m(X_m, x)``:

        d mean  / dx_j = -sum_m a_m w_mj sum_i alpha_mi k_i (x_j - X_mij)
        d var   / dx_j =  2 sum_m b_m w_mj sum_i beta_mi k_i (x_j - X_mij)
        d cross / dx_j = -sum_m b_m w_mj [k_m(x, z) (x_j - z_j) - sum_i k_i (x_j - X_mij) B_m,iz]

    Args:
        gps: The meta-GPs.
        a: ``M`` mean weights.
        b: ``M`` covariance weights.
        Z: ``p x d`` fixed points.
    """

    def __init__(self, gps: MetaGPs, a: np.ndarray, b: np.ndarray, Z: np.ndarray) -> None:
        a = np.asarray(a, dtype=np.float64).reshape(-1)
        b = np.asarray(b, dtype=np.float64).reshape(-1)
        if a.shape != (gps.n_tasks,) or b.shape != (gps.n_tasks,):
            raise ValueError(f"a and b need {gps.n_tasks} entries; got {a.shape}, {b.shape}.")
        if not (np.isfinite(a).all() and np.isfinite(b).all() and (b >= 0).all()):
            raise ValueError("The weights a must be finite and the weights b finite and >= 0.")
        self.d = len(gps.is_cat)
        self.active = np.flatnonzero((a != 0) | (b != 0))
        self._g = g = gps.select(self.active)
        self.Z = np.asarray(Z, dtype=np.float64).reshape(-1, self.d)
        Zt = torch.from_numpy(self.Z)
        a, b = a[self.active], b[self.active]
        self._const = float(a @ g.y_mean)
        self._a_alpha = torch.from_numpy(a * g.y_std)[:, None] * g._alpha  # Ma x N, raw units
        bs = b * g.y_std**2  # b_m for standardized-unit posteriors
        self._bs = torch.from_numpy(bs)
        self._bs_w = self._bs[:, None] * g._w_num  # Ma x d
        self._Z = Zt
        with torch.no_grad(), limit_threads():
            self._maps, self._psi_train = g._features(g._X[g._mask > 0], Zt)
            # psi of Z with log b_m folded into h: exp(phi(x) . psi_b(z)) = b_m k_m(x, z)
            psi_Z = self._maps.psi(Zt)
            with np.errstate(divide="ignore"):
                log_bs = torch.from_numpy(np.log(bs))
            psi_Z[..., self.d + 1] += log_bs.unsqueeze(-1)
            self._psi_Z_b = psi_Z
            V = g._L_inv @ g._k_train(self._maps.phi(Zt), self._psi_train).transpose(-1, -2)
            self._bB = self._bs[:, None, None] * (g._L_inv.transpose(-1, -2) @ V)  # b K^-1 k(X, Z)
            # [L^-1; a s^y alpha^T; (b B)^T], stored transposed (Ma x N x R): one matmul
            # k(x, X_m) @ it gives, per point, V = L^-1 k(X_m, x), the mean and the cross terms in
            # rows of R contiguous numbers (sums over them are then cheap)
            self._stacked = (
                torch.cat(
                    [g._L_inv, self._a_alpha.unsqueeze(-2), self._bB.transpose(-1, -2)], dim=-2
                )
                .transpose(-1, -2)
                .contiguous()
            )
        self._stacked_grad: dict[str, torch.Tensor] = {}  # built on the first call with grad

    def _grad_stack(self, full: bool) -> torch.Tensor:
        """``[L^-1; a s^y alpha^T; (b B)^T; K^-1]`` and, if ``full``, ``(X_:j * b B)^T`` for each
        ``j``: one matmul with ``k(X_m, x)`` then gives everything a gradient call needs.
        """
        key = "full" if full else "contracted"
        if key not in self._stacked_grad:
            L_inv = self._g._L_inv
            parts = [self._stacked, L_inv.transpose(-1, -2) @ L_inv]  # K^-1 is symmetric
            if full:
                XbB = self._g._X.unsqueeze(-1) * self._bB.unsqueeze(-2)  # Ma x N x d x p
                parts.append(XbB.reshape(self._g.n_tasks, XbB.shape[1], -1))
            self._stacked_grad[key] = torch.cat(parts, dim=-1).contiguous()
        return self._stacked_grad[key]

    @property
    def n_active(self) -> int:
        """Number of tasks with a non-zero weight."""
        return len(self.active)

    def __call__(
        self,
        X: np.ndarray,
        grad: bool = False,
        contract: Callable[[np.ndarray, np.ndarray], np.ndarray] | None = None,
    ) -> tuple[np.ndarray, ...]:
        r"""Weighted mean, variance and cross-covariance at ``X`` (``m x d``).

        Rows are processed in chunks whose temporaries hold at most ~``2^18`` entries.

        Args:
            X: ``m x d`` points.
            grad: Also return the gradients in ``X``.
            contract: Optional ``(X_chunk c x d, cross_chunk c x p) -> v (c x q x p)``. With
                ``grad``, the last output is then ``sum_z v[x, q, z] dcross[x, z, :]`` (``m x q x
                d``) instead of ``dcross``: what a GP posterior on top of this prior needs (e.g.
                ScaML-GP's ``v = [A^{-1} r, A^{-1} k(x, X_t)]``), at a fraction of the cost and
                memory of the full ``m x p x d`` gradient.

        Returns:
            ``(mean m, var m, cross m x p)`` and, if ``grad``,
            ``(dmean m x d, dvar m x d, dcross m x p x d)`` (or ``m x q x d``, see ``contract``).
        """
        Xt = torch.from_numpy(np.asarray(X, dtype=np.float64).reshape(-1, self.d))
        m, p, d = len(Xt), len(self._Z), self.d
        out = [
            torch.full((m,), self._const, dtype=DTYPE),
            torch.zeros(m, dtype=DTYPE),
            torch.zeros(m, p, dtype=DTYPE),
        ]
        if grad:
            out += [torch.zeros(m, d, dtype=DTYPE), torch.zeros(m, d, dtype=DTYPE)]
            out.append(None if contract is not None else torch.zeros(m, p, d, dtype=DTYPE))
        # temporaries per row and task: kernels (N, p); with a full gradient also d p
        per_row = max(self._g._mask.shape[1], p * (d if grad and contract is None else 1))
        with torch.no_grad():
            for c in self._g._chunks(m, per_row):
                parts = self._chunk(Xt[c], grad, contract)
                if grad and out[5] is None:
                    out[5] = torch.zeros(m, parts[5].shape[1], d, dtype=DTYPE)
                for total, part in zip(out, parts, strict=True):
                    total[c] += part
        if grad and out[5] is None:  # no rows
            out[5] = torch.zeros(0, 0, d, dtype=DTYPE)
        return tuple(t.numpy() for t in out)

    def _chunk(
        self,
        X: torch.Tensor,
        grad: bool,
        contract: Callable[[np.ndarray, np.ndarray], np.ndarray] | None,
    ) -> tuple[torch.Tensor, ...]:
        g = self._g
        c, d = len(X), self.d
        N, p, Ma = g._mask.shape[1], len(self._Z), g.n_tasks
        if Ma:
            phi = self._maps.phi(X)
            k = g._k_train(phi, self._psi_train)  # Ma x c x N
            stack = self._grad_stack(contract is None) if grad else self._stacked
            VAB = torch.bmm(k, stack)  # Ma x c x R
        else:  # no active task: every sum is empty
            k = torch.zeros(0, c, N, dtype=DTYPE)
            VAB = torch.zeros(0, c, 2 * N + 1 + p * (d + 1), dtype=DTYPE)
        mean = VAB[:, :, N].sum(0)
        V = VAB[:, :, :N]  # (L^-1 k(X_m, x))^T
        var_m = g._s.unsqueeze(-1) - torch.linalg.vecdot(V, V)  # Ma x c, standardized units
        var = self._bs @ var_m.clamp_min(0.0)
        kB = VAB[:, :, N + 1 : N + 1 + p]  # sum_i k_i b_m B_m,iz: Ma x c x p
        bk_xz = log_kernel(phi, self._psi_Z_b).exp_() if Ma else kB  # b_m k_m(x, z)
        cross = bk_xz.sum(0) - kB.sum(0)
        if not grad:
            return mean, var, cross
        # Every gradient is sum_m w_mj sum_i u_mi (x_j - X_mij) for some weights u.
        X_train, w = g._X, g._w_num
        G = k * self._a_alpha.unsqueeze(-2)  # a_m alpha_mi k_i
        dmean = torch.einsum("mcj,mj->cj", G @ X_train, w) - X * (G.sum(-1).T @ w)
        beta = VAB[:, :, N + 1 + p : 2 * N + 1 + p]  # (K^-1 k(X_m, x))^T: Ma x c x N
        H = beta * k * (var_m >= 0).to(DTYPE).unsqueeze(-1)  # 0 if clamped
        dvar = 2.0 * (
            X * (H.sum(-1).T @ self._bs_w) - torch.einsum("mcj,mj->cj", H @ X_train, self._bs_w)
        )
        # d cross / dx_j = sum_m w_mj [z_j b k_xz - x_j b Sigma_m(x, z) - sum_i k_i X_mij bB_iz]
        per_task = bk_xz - kB  # b_m Sigma_m(x, z)
        if contract is None:
            kXbB = VAB[:, :, 2 * N + 1 + p :].reshape(Ma, c, d, p)
            dcross = torch.einsum("mcp,mj->cpj", bk_xz, w) * self._Z.unsqueeze(0)
            dcross -= X.unsqueeze(1) * torch.einsum("mcp,mj->cpj", per_task, w)
            dcross -= torch.einsum("mcjp,mj->cpj", kXbB, w)
            return mean, var, cross, dmean, dvar, dcross
        v = torch.as_tensor(np.asarray(contract(X.numpy(), cross.numpy()), dtype=np.float64))
        if v.ndim != 3 or v.shape[0] != c or v.shape[2] != p:
            raise ValueError(f"contract must return a ({c}, q, {p}) array; got {tuple(v.shape)}.")
        q = v.shape[1]
        # the same three terms, each contracted with v over z before the task sum
        bkv = bk_xz.unsqueeze(2) * v.unsqueeze(0)  # Ma x c x q x p
        dcross_v = torch.einsum("mcqj,mj->cqj", bkv @ self._Z, w)
        dcross_v -= X.unsqueeze(1) * torch.einsum(
            "mcq,mj->cqj", (per_task.unsqueeze(2) * v).sum(-1), w
        )
        Bv = (self._bB @ v.reshape(c * q, p).T).reshape(Ma, N, c, q)  # sum_z bB_iz v_xqz
        kBv = (k.unsqueeze(-1) * Bv.permute(0, 2, 1, 3)).transpose(-1, -2)  # Ma x c x q x N
        kBvX = (kBv.reshape(Ma, c * q, N) @ X_train).reshape(Ma, c, q, d)
        dcross_v -= torch.einsum("mcqj,mj->cqj", kBvX, w)
        return mean, var, cross, dmean, dvar, dcross_v
