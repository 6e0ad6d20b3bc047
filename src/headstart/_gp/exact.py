r"""The batched exact GP's marginal likelihood and its MAP fit: every exact-GP fit of headstart.

Model (Rasmussen & Williams 2006, Ch. 2): ``y = f(X) + eps``, ``f ~ GP(0, s f(r^2))`` (Matérn-5/2
or SE, :mod:`headstart._gp.kernels`), ``eps ~ N(0, sigma^2 I)``, on standardized ``y`` and ``X``
in ``[0, 1]^d``. With ``K = k(X, X) + sigma^2 I = L L^T`` and ``alpha = K^{-1} y``:

    log p(y | theta) = -1/2 y^T alpha - sum_i log L_ii - n/2 log(2 pi)          (R&W Eq. 2.30)

**Batching.** ``R`` GPs -- tasks, restarts, or several data sets per task (MPHD's sub-datasets
share one task's hyperparameters) -- are evaluated in one batched torch computation. Data sets
are padded to a common size: a padded row ``i`` has ``y_i = 0`` and ``K_ii = 1``, ``K_ij = 0``
(``j != i``), so ``K`` is block diagonal with an identity block, its Cholesky factor is
``blockdiag(L_m, I)`` and the padding adds exactly 0 to ``y^T K^{-1} y`` and to ``log det K``.
Sets are grouped by size (geometric buckets, :func:`size_buckets`) so that one large set does not
make every small one cubic in the large size.

**Gradient** (:func:`neg_log_lik_and_grad`), in closed form: with ``W = K^{-1} - alpha alpha^T``
(the gradient of ``-log p(y | theta)`` in ``K`` is ``W / 2``, R&W Eq. 5.9), ``K_f = s f(r^2)``
and ``G = s f'(r^2)``:

    d / d log s        = 1/2 sum_ik W_ik K_f,ik
    d / d raw_noise    = 1/2 (sigma^2 - floor) tr(W)
    d / d log w_j      = 1/2 w_j sum_ik W_ik G_ik D_j,ik,   D_j,ik = (x_ij - x_kj)^2 or 1[x_ij != x_kj]

and for numeric ``j``, ``sum_ik P_ik D_j,ik = 2 sum_i x_ij^2 (P 1)_i - 2 x_j^T P x_j`` (``P``
symmetric, ``x`` centred), so no ``N x N x d`` tensor is formed. This avoids autograd through the
batched Cholesky (several times the cost of the factorization); :func:`neg_log_lik` is the
autograd reference it is tested against. The hyperprior's terms (:mod:`headstart._gp.hyperprior`)
have closed-form gradients too.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
import torch

from headstart._engine.numerics import robust_cholesky
from headstart._engine.threads import limit_threads
from headstart._gp.fit import minimize
from headstart._gp.fit_settings import (
    DEFAULT_LIMITS,
    MATERN_COORDS,
    SE_COORDS,
    Coordinates,
    Limits,
)
from headstart._gp.hyperprior import META_HYPERPRIOR, HyperPrior
from headstart._gp.kernels import (
    MATERN52,
    SE,
    FeatureMaps,
    StationaryKernel,
    log_kernel,
    pairwise_sq_diffs,
    vocabulary,
)
from headstart._gp.params import unpack_raw

_BUCKET_RATIO = 1.25  # data sets whose sizes differ by less than this factor share a padded size
_BUCKET_FLOOR = 16  # below this size padding costs nothing worth a separate batch
_FIT_CHUNK_ELEMENTS = 1 << 18  # rows per objective call: ~2 MB of kernel matrices (cache-sized)
# A bucket whose per-column differences hold at most this many numbers (1 MB) gets them
# precomputed: r^2 is then one matmul per evaluation, in fewer operations than the feature
# maps take. Measured (benchmarks/gp_gradient.py, docs/benchmarks/gp_gradient.md): the Matérn
# GP at n = 25 in 0.24 ms per evaluation instead of 0.38; equal at n = 100; from 64 points x 64
# GPs or 400 points on, the feature maps are faster (they stream less memory).
_DIFFS_ELEMENTS = 1 << 17
_LOG_2PI = math.log(2.0 * math.pi)


@dataclass(frozen=True)
class GPForm:
    """A GP family as its fit sees it: the kernel, and the coordinates L-BFGS-B moves."""

    kernel: StationaryKernel
    coords: Coordinates


MATERN_FORM = GPForm(MATERN52, MATERN_COORDS)  # the Matérn GP of GP-BO and MPHD
SE_FORM = GPForm(SE, SE_COORDS)  # the SE GPs of the transfer models


# --- padding ----------------------------------------------------------------------------------
class Padded(NamedTuple):
    """``R`` data sets padded to a common size ``N`` (real rows first)."""

    X: torch.Tensor  # R x N x d inputs; padding, and columns beyond a set's own, at 0.5
    y: torch.Tensor  # R x N standardized targets, 0 on padding
    mask: torch.Tensor  # R x N: 1 on real rows, 0 on padding
    n: torch.Tensor  # R real rows (float64: an integer tensor makes 0.5 * n a float32)

    def rows(self, idx: torch.Tensor) -> Padded:
        """The data sets ``idx``."""
        return Padded(self.X[idx], self.y[idx], self.mask[idx], self.n[idx])


def pad(Xs: Sequence[np.ndarray], ys: Sequence[np.ndarray], d: int | None = None) -> Padded:
    """The data sets ``Xs``, ``ys`` padded to the largest (:class:`Padded`)."""
    n = np.array([len(y) for y in ys], dtype=np.float64)
    d = max(X.shape[1] for X in Xs) if d is None else d
    X = np.full((len(Xs), int(n.max()), d), 0.5)
    y = np.zeros((len(Xs), int(n.max())))
    mask = np.zeros((len(Xs), int(n.max())))
    for m, (Xm, ym) in enumerate(zip(Xs, ys, strict=True)):
        X[m, : len(ym), : Xm.shape[1]], y[m, : len(ym)], mask[m, : len(ym)] = Xm, ym, 1.0
    return Padded(
        torch.from_numpy(X), torch.from_numpy(y), torch.from_numpy(mask), torch.from_numpy(n)
    )


def size_buckets(n: np.ndarray) -> list[np.ndarray]:
    """Indices grouped by geometric size class (ratio ``1.25``, floor ``16``)."""
    key = np.ceil(
        np.log(np.maximum(n, _BUCKET_FLOOR) / _BUCKET_FLOOR) / math.log(_BUCKET_RATIO) - 1e-9
    ).astype(int)
    return [np.flatnonzero(key == k) for k in np.unique(key)]


# --- the marginal likelihood ------------------------------------------------------------------
def neg_log_lik(
    raw: torch.Tensor, data: Padded, is_cat: torch.Tensor, form: GPForm = SE_FORM
) -> torch.Tensor:
    r"""``-log p(y | theta)`` of ``R`` padded data sets (autograd-safe reference).

    Args:
        raw: ``R x (d + 2)`` coordinates (:class:`~headstart._gp.fit_settings.Coordinates`).
        data: The data sets (:class:`Padded`).
        is_cat: ``d`` boolean mask of categorical columns.
        form: The kernel and the coordinates ``raw`` is in (:data:`SE_FORM`,
            :data:`MATERN_FORM`).

    Returns:
        ``R`` values, differentiable in ``raw``.
    """
    from headstart._gp.kernels import batched_kernel

    X, y, mask, n = data
    w, _, log_s, noise, _ = unpack_raw(raw, form.coords)
    K = batched_kernel(X, X, is_cat, w, torch.exp(log_s), kernel=form.kernel, symmetric=True)
    K = K * (mask.unsqueeze(-1) * mask.unsqueeze(-2))
    K = K + torch.diag_embed(noise.unsqueeze(-1) * mask + (1.0 - mask))
    L = robust_cholesky(K, diag_mask=mask, warn=False, label="A GP kernel matrix")
    a = torch.linalg.solve_triangular(L, y.unsqueeze(-1), upper=False).squeeze(-1)
    logdet = torch.log(torch.diagonal(L, dim1=-2, dim2=-1)).sum(-1)
    return 0.5 * (a * a).sum(-1) + logdet + 0.5 * n * _LOG_2PI


def neg_log_lik_and_grad(
    raw: torch.Tensor,
    data: Padded,
    is_cat: torch.Tensor,
    form: GPForm = SE_FORM,
    *,
    padded: bool = True,
    vocab: list[torch.Tensor] | None = None,
    sq: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    r""":func:`neg_log_lik` and its gradient in ``raw``, in closed form (module docstring).

    ``r^2`` comes from one of two places. With ``sq``, the per-column squared differences of
    the inputs (computed once per fit), it is one matmul ``sq @ w``, and the lengthscales'
    gradient one contraction with ``sq``: few operations, what small problems need. Without
    it, the kernel matrix is built in place from the feature maps (``log s - r^2 / 2`` in one
    ``bmm``, :class:`~headstart._gp.kernels.FeatureMaps`), so no ``R x N x N x d`` array is
    held and each ``R x N x N`` one is streamed through memory as few times as possible: what
    large batches need (``benchmarks/gp_gradient.py`` measures both).

    Args:
        raw, data, is_cat, form: As for :func:`neg_log_lik`.
        padded: ``False`` promises ``mask`` is all ones (skips the masking).
        vocab: Categorical vocabulary covering ``X`` (default: computed from ``X``).
        sq: ``R x N x N x d`` :func:`~headstart._gp.kernels.pairwise_sq_diffs` of ``X``.

    Returns:
        ``(values R, gradients R x (d + 2))``.
    """
    X, y, mask, n = data
    kernel, coords = form.kernel, form.coords
    w, _, log_s, noise, excess = unpack_raw(raw, coords)
    valid = mask > 0 if padded else None
    if sq is None:
        Kf, G, maps = _gram_from_features(X, w, log_s, is_cat, vocab, kernel, valid)
    else:
        R, N = y.shape
        sq_flat = sq.reshape(R, N * N, -1)
        f, df = kernel.f_and_df((sq_flat @ w.unsqueeze(-1)).view(R, N, N))
        s = torch.exp(log_s)[:, None, None]
        Kf, G = s * f, s * df
        if valid is not None:
            outer = mask.unsqueeze(-1) * mask.unsqueeze(-2)
            Kf, G = Kf * outer, G * outer
    K = Kf.clone()
    K.diagonal(dim1=-2, dim2=-1).add_(noise.unsqueeze(-1) * mask + (1.0 - mask))
    L = robust_cholesky(K, diag_mask=mask, warn=False, label="A GP kernel matrix")
    K_inv = torch.cholesky_inverse(L)
    alpha = torch.cholesky_solve(y.unsqueeze(-1), L)  # R x N x 1 (two triangular solves: more
    # accurate than K_inv @ y on an ill-conditioned K)
    value = (
        0.5 * (y * alpha.squeeze(-1)).sum(-1)
        + torch.log(torch.diagonal(L, dim1=-2, dim2=-1)).sum(-1)
        + 0.5 * n * _LOG_2PI
    )
    W = K_inv.sub_(alpha * alpha.transpose(-1, -2))  # K^-1 - alpha alpha^T
    g_noise = 0.5 * excess * (torch.diagonal(W, dim1=-2, dim2=-1) * mask).sum(-1)
    if G is None:  # SE: G = -K_f / 2, one product serves the scale's and lengthscales' gradients
        P = W.mul_(Kf)
        row = P.sum(-1)  # R x N
        g_s = 0.5 * row.sum(-1, keepdim=True)
        factor = -0.5 if coords.log_w else 1.0  # d/dl of -mll = factor * w * D(W * K_f)
    else:
        g_s = 0.5 * (W * Kf).sum((-1, -2)).unsqueeze(-1)
        P = W.mul_(G)
        factor = 1.0 if coords.log_w else -2.0  # d/dl of -mll = factor * w * D(W * G)
    if sq is not None:  # D_j = 1/2 sum_ik P_ik sq_ikj
        R, N = y.shape
        D = 0.5 * (P.reshape(R, 1, N * N) @ sq.reshape(R, N * N, -1)).squeeze(1)
    else:
        D = _contract_with_differences(P, P.sum(-1) if G is not None else row, X, maps.cat_cols)
    g_ls = w * D if factor == 1.0 else factor * w * D
    return value, torch.cat([g_ls, g_s, g_noise.unsqueeze(-1)], dim=-1)


def _gram_from_features(
    X: torch.Tensor,
    w: torch.Tensor,
    log_s: torch.Tensor,
    is_cat: torch.Tensor,
    vocab: list[torch.Tensor] | None,
    kernel: StationaryKernel,
    valid: torch.Tensor | None,
) -> tuple[torch.Tensor, torch.Tensor | None, FeatureMaps]:
    """``K_f = s f(r^2)``, ``G = s f'(r^2)`` (``None`` for SE) and the feature maps, from one
    ``bmm`` of the features (0 in padded rows and columns)."""
    se = kernel is SE
    maps = FeatureMaps(w, log_s, is_cat, vocabulary(is_cat, X) if vocab is None else vocab)
    # SE: padded rows get log k = -inf, hence k = 0 exactly; other kernels are masked after
    E = log_kernel(*maps.phi_psi(X, valid if se else None))
    E = torch.minimum(E, log_s[:, None, None], out=E)  # r^2 >= 0
    diag = log_s.unsqueeze(-1).expand(-1, E.shape[-1])
    E.diagonal(dim1=-2, dim2=-1).copy_(
        diag if valid is None or not se else diag.masked_fill(~valid, -math.inf)
    )
    if se:
        return E.exp_(), None, maps
    r2 = E.neg_().add_(log_s[:, None, None]).mul_(2.0).clamp_min_(0.0)
    f, df = kernel.f_and_df(r2)
    s = torch.exp(log_s)[:, None, None]
    Kf, G = s * f, s * df
    if valid is not None:
        outer = valid.unsqueeze(-1) * valid.unsqueeze(-2)
        Kf, G = Kf * outer, G * outer
    return Kf, G, maps


def _contract_with_differences(
    P: torch.Tensor, row: torch.Tensor, X: torch.Tensor, cat_cols: list[int]
) -> torch.Tensor:
    r"""``D_j = 1/2 sum_ik P_ik D_j,ik`` (``R x d``) without the per-column differences:
    ``sum_i x_ij^2 (P 1)_i - x_j^T P x_j`` on numeric columns (``P`` symmetric, ``x`` centred),
    the Hamming sums on categorical ones."""
    Xc = X - 0.5  # P is 0 in padded rows and columns
    D = (Xc * Xc * row.unsqueeze(-1)).sum(-2) - (Xc * (P @ Xc)).sum(-2)
    for j in cat_cols:
        differ = X[:, :, j].unsqueeze(-1) != X[:, :, j].unsqueeze(-2)
        D[:, j] = 0.5 * (P * differ).sum((-1, -2))
    return D


def prior_and_grad(
    raw: torch.Tensor | np.ndarray, prior: HyperPrior, coords: Coordinates
) -> tuple[torch.Tensor, torch.Tensor] | tuple[np.ndarray, np.ndarray]:
    r"""``log p(theta)`` of ``R x (d + 2)`` coordinates and its gradient in them (chain rule of
    :class:`~headstart._gp.fit_settings.Coordinates`), as tensors or arrays like ``raw`` (the
    fit uses numpy: a few dozen numbers, where torch's per-call cost dominates)."""
    xp = torch if isinstance(raw, torch.Tensor) else np
    ls, log_s, raw_noise = raw[:, :-2], raw[:, -2], raw[:, -1]
    scale = coords.ls_to_log_ell()
    log_ell = ls if scale == 1.0 else scale * ls
    if coords.noise_floor:
        excess = xp.exp(raw_noise)
        noise = excess + coords.noise_floor
        log_noise = xp.log(noise)
    else:
        log_noise = raw_noise
    value, grad = prior.value_and_grad(log_ell, log_s, log_noise)
    if scale != 1.0:
        grad[:, :-2] *= scale
    if coords.noise_floor:
        grad[:, -1] *= excess / noise
    return value, grad


# --- the fit ----------------------------------------------------------------------------------
def fit_exact_gp(
    Xs: Sequence[np.ndarray],
    ys: Sequence[np.ndarray],
    is_cat: np.ndarray,
    starts: np.ndarray,
    *,
    form: GPForm = SE_FORM,
    prior: HyperPrior = META_HYPERPRIOR,
    owner: np.ndarray | None = None,
    bounds: np.ndarray | None = None,
    deterministic: bool = False,
    per_datum: bool = True,
    limits: Limits = DEFAULT_LIMITS,
    penalize_failures: bool = False,
    callback: Callable[[int], None] | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    r"""MAP hyperparameters of ``T`` GPs, every (GP, start) pair one L-BFGS-B run, all batched.

    GP ``t`` maximizes ``sum_{i: owner_i = t} log p(y_i | theta_t) + log p(theta_t)`` over its
    data sets ``i`` (one per GP unless ``owner`` says otherwise), from each of its starts; the
    best start wins.

    Args:
        Xs: Data sets' inputs ``n_i x d_i`` in ``[0, 1]`` (``d_i <= d``: missing columns are
            padded at the cube centre; pin their coordinates with ``bounds``).
        ys: Their standardized targets.
        is_cat: ``d`` mask of categorical columns, or one per data set (``len(Xs) x d``).
        starts: ``T x S x (d + 2)`` starting coordinates (``form.coords``, as the result).
        form: The kernel and the coordinates (:data:`SE_FORM`, :data:`MATERN_FORM`).
        prior: The hyperprior.
        owner: ``len(Xs)`` GP index of each data set (default ``0..T-1``).
        bounds: ``T x (d + 2) x 2`` boxes (default ``form.coords``' for every GP).
        deterministic: Pin the noise (``coords.deterministic_noise``).
        per_datum: L-BFGS-B sees each GP's objective divided by its number of observations (as
            BoTorch's ``ExactMarginalLogLikelihood``, so tolerances mean the same for every size).
        limits, penalize_failures, callback: As :func:`headstart._gp.fit.minimize`.

    Returns:
        ``(raw T x (d + 2), objective T)``: each GP's best coordinates and its minimized
        ``-(log p(y | theta) + log p(theta))`` (not divided by the size; ``inf`` when every
        start of the GP failed).
    """
    T, S, k = starts.shape
    d = k - 2
    owner = np.arange(T) if owner is None else np.asarray(owner, dtype=int)
    cats = np.broadcast_to(np.asarray(is_cat, dtype=bool), (len(Xs), d))
    sizes = np.array([len(y) for y in ys])
    total = np.bincount(owner, weights=sizes, minlength=T)
    if bounds is None:
        bounds = form.coords.bounds(d, deterministic=deterministic)
    run_bounds = np.repeat(np.broadcast_to(bounds, (T, k, 2)), S, axis=0)
    sets_of = [np.flatnonzero(owner == t) for t in range(T)]
    # buckets of data sets: one size class and one categorical pattern each
    buckets = []
    for pattern in np.unique(cats, axis=0):
        same = np.flatnonzero((cats == pattern).all(axis=1))
        for members in size_buckets(sizes[same]):
            members = same[members]
            data = pad([Xs[i] for i in members], [ys[i] for i in members], d)
            cat_t = torch.from_numpy(pattern.copy())
            N = data.X.shape[1]
            small = len(members) * N * N * d <= _DIFFS_ELEMENTS
            sq = pairwise_sq_diffs(data.X, data.X, cat_t) if small else None
            buckets.append((members, data, cat_t, vocabulary(cat_t, data.X), sq))
    bucket_of = np.empty(len(Xs), dtype=int)
    pos_in_bucket = np.empty(len(Xs), dtype=int)
    for b, (members, *_) in enumerate(buckets):
        bucket_of[members], pos_in_bucket[members] = b, np.arange(len(members))

    one_each = len(Xs) == T and (owner == np.arange(T)).all()  # one data set per GP

    def fun(idx: np.ndarray, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        gp = idx // S
        raw = torch.from_numpy(x)
        if one_each:  # every row of the batch is one run's only data set
            row_run, row_set = np.arange(len(idx)), gp
        else:
            row_run = np.concatenate([np.full(len(sets_of[t]), r) for r, t in enumerate(gp)])
            row_set = np.concatenate([sets_of[t] for t in gp])
        in_buckets = bucket_of[row_set]
        all_rows = np.arange(len(row_set))
        parts = []  # (runs, values, gradients) of each chunk of rows
        for b in np.unique(in_buckets) if len(buckets) > 1 else (0,):
            members, padded_sets, cat_t, vocab, sq = buckets[b]
            in_bucket = np.flatnonzero(in_buckets == b) if len(buckets) > 1 else all_rows
            size = padded_sets.X.shape[1]
            step = max(1, _FIT_CHUNK_ELEMENTS // size**2)  # keep each chunk cache-sized
            for start in range(0, len(in_bucket), step):
                rows = in_bucket[start : start + step]
                loc = torch.from_numpy(pos_in_bucket[row_set[rows]])
                runs = row_run[rows]
                value, grad = neg_log_lik_and_grad(
                    raw[torch.from_numpy(runs)],
                    padded_sets.rows(loc),
                    cat_t,
                    form,
                    padded=bool((sizes[members[loc.numpy()]] < size).any()),
                    vocab=vocab,
                    sq=None if sq is None else sq[loc],
                )
                parts.append((runs, value.numpy(), grad.numpy()))
        if len(parts) == 1 and one_each:  # one chunk, rows in run order: no scatter
            values, grads = parts[0][1], parts[0][2]
        else:
            values, grads = np.zeros(len(idx)), np.zeros((len(idx), k))
            for runs, value, grad in parts:
                np.add.at(values, runs, value)
                np.add.at(grads, runs, grad)
        log_prior, prior_grad = prior_and_grad(x, prior, form.coords)
        values, grads = values - log_prior, grads - prior_grad
        if per_datum:
            scale = total[gp]
            values, grads = values / scale, grads / scale[:, None]
        return values, grads

    with limit_threads():
        xs, fs = minimize(
            fun,
            starts.reshape(T * S, k),
            run_bounds,
            limits=limits,
            penalize_failures=penalize_failures,
            callback=callback,
        )
    fs = fs.reshape(T, S) * (total[:, None] if per_datum else 1.0)
    best = fs.argmin(axis=1)
    return xs.reshape(T, S, k)[np.arange(T), best], fs[np.arange(T), best]


__all__ = [
    "MATERN_FORM",
    "SE_FORM",
    "GPForm",
    "Padded",
    "fit_exact_gp",
    "neg_log_lik",
    "neg_log_lik_and_grad",
    "pad",
    "prior_and_grad",
    "size_buckets",
]
