r"""Matérn-5/2 ARD kernel with a Hamming (overlap) distance on categorical columns.

Notation (used throughout :mod:`headstart._gp`): ``X`` is ``n x d`` in ``[0, 1]^d``; column ``j``
is *numeric* (continuous or integer) or *categorical*; ``ell_j`` is its lengthscale and
``w_j = 1 / ell_j^2`` its inverse squared lengthscale; ``s`` is the output scale.

    r^2(x, x') = sum_{j numeric} w_j (x_j - x'_j)^2 + sum_{j categorical} w_j 1[x_j != x'_j]
    k(x, x')   = s * (1 + sqrt(5) r + 5/3 r^2) * exp(-sqrt(5) r)

The categorical term puts the Hamming distance *inside* the Matérn (as Optuna's ``_gp/gp.py``
does), so one set of ARD weights covers both kinds of column and ``k`` stays a valid kernel: with
a one-hot embedding scaled by ``1/sqrt(2)`` the Hamming term is a squared Euclidean distance.
Matérn-5/2 is Eq. (4.17) of Rasmussen & Williams (2006), *Gaussian Processes for Machine
Learning*.

Both pieces are written as one ``d``-vector per pair of points (:func:`pairwise_sq_diffs`), so a
kernel matrix is a single matmul ``sq_diffs @ w`` followed by :func:`matern52`.
"""

from __future__ import annotations

import math

import numpy as np
import torch

DTYPE = torch.float64
_SQRT5 = math.sqrt(5.0)


class _Matern52(torch.autograd.Function):
    """``f(r^2) = (1 + sqrt(5 r^2) + 5/3 r^2) exp(-sqrt(5 r^2))`` with an exact gradient at 0.

    Autograd through ``sqrt`` would give ``inf * 0 = nan`` at ``r = 0`` (the diagonal of every
    kernel matrix); the closed form ``f'(r^2) = -5/6 (1 + sqrt(5 r^2)) exp(-sqrt(5 r^2))`` is
    finite there.
    """

    @staticmethod
    def forward(ctx, sq_dist: torch.Tensor) -> torch.Tensor:
        root = torch.sqrt(5.0 * sq_dist)
        exp_part = torch.exp(-root)
        ctx.save_for_backward(root, exp_part)
        return exp_part * (1.0 + root + (5.0 / 3.0) * sq_dist)

    @staticmethod
    def backward(ctx, grad_output: torch.Tensor) -> torch.Tensor:
        root, exp_part = ctx.saved_tensors
        return grad_output * (-5.0 / 6.0) * (1.0 + root) * exp_part


def matern52(sq_dist: torch.Tensor) -> torch.Tensor:
    r"""Matérn-5/2 correlation as a function of the squared scaled distance ``r^2 >= 0``.

    f(r^2) = (1 + sqrt(5) r + 5/3 r^2) exp(-sqrt(5) r)     (Rasmussen & Williams 2006, Eq. 4.17)

    Args:
        sq_dist: Any shape, non-negative.

    Returns:
        Same shape as ``sq_dist``, values in ``(0, 1]``.

    Example:
        >>> float(matern52(torch.zeros(1, dtype=DTYPE))[0])
        1.0
    """
    return _Matern52.apply(sq_dist)


def pairwise_sq_diffs(A: torch.Tensor, B: torch.Tensor, is_cat: torch.Tensor) -> torch.Tensor:
    r"""Per-column squared differences; ``1[a_j != b_j]`` on categorical columns.

    D[..., i, k, j] = (A_ij - B_kj)^2  (numeric j),   1[A_ij != B_kj]  (categorical j)

    Args:
        A: ``... x m x d``.
        B: ``n x d`` (broadcast against ``A``'s batch shape).
        is_cat: ``d`` boolean mask of categorical columns.

    Returns:
        ``... x m x n x d``.
    """
    diff = A.unsqueeze(-2) - B
    sq = diff * diff
    if bool(is_cat.any()):
        sq = torch.where(is_cat, (diff != 0).to(sq.dtype), sq)
    return sq


def kernel_from_sq_diffs(
    sq_diffs: torch.Tensor, inv_sq_lengthscales: torch.Tensor, outputscale: torch.Tensor
) -> torch.Tensor:
    r"""``s * matern52(sq_diffs @ w)``: the kernel matrix from precomputed squared differences.

    Args:
        sq_diffs: ``... x m x n x d`` from :func:`pairwise_sq_diffs`.
        inv_sq_lengthscales: ``d`` vector ``w = 1 / ell^2``.
        outputscale: Scalar tensor ``s``.

    Returns:
        ``... x m x n`` kernel matrix.
    """
    return outputscale * matern52(sq_diffs @ inv_sq_lengthscales)


def kernel(
    A: torch.Tensor,
    B: torch.Tensor,
    is_cat: torch.Tensor,
    inv_sq_lengthscales: torch.Tensor,
    outputscale: torch.Tensor,
) -> torch.Tensor:
    r"""Kernel matrix ``k(A, B)`` (see the module docstring for the formula).

    Args:
        A: ``... x m x d``.
        B: ``n x d``.
        is_cat: ``d`` boolean mask of categorical columns.
        inv_sq_lengthscales: ``d`` vector ``1 / ell^2``.
        outputscale: Scalar tensor.

    Returns:
        ``... x m x n``.

    Example:
        >>> X = torch.tensor([[0.0, 0.25], [0.5, 0.75]], dtype=DTYPE)
        >>> K = kernel(X, X, torch.tensor([False, True]), torch.ones(2, dtype=DTYPE),
        ...            torch.tensor(2.0, dtype=DTYPE))
        >>> K.diagonal().tolist()
        [2.0, 2.0]
    """
    return kernel_from_sq_diffs(pairwise_sq_diffs(A, B, is_cat), inv_sq_lengthscales, outputscale)


# --- numpy versions for prediction (many small batched calls; no autograd needed) -------------
def matern52_np(sq_dist: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    r"""Matérn-5/2 ``f(r^2)`` and its derivative ``f'(r^2) = -5/6 (1 + sqrt(5 r^2)) e^{-sqrt(5 r^2)}``.

    Args:
        sq_dist: Any shape, non-negative.

    Returns:
        ``(f, f')``, each of the same shape.
    """
    root = np.sqrt(5.0 * sq_dist)
    exp_part = np.exp(-root)
    value = exp_part * (1.0 + root + (5.0 / 3.0) * sq_dist)
    return value, (-5.0 / 6.0) * (1.0 + root) * exp_part


def sq_dist_np(
    A: np.ndarray, B: np.ndarray, is_cat: np.ndarray, inv_sq_lengthscales: np.ndarray
) -> np.ndarray:
    r"""Scaled squared distances ``r^2(A_i, B_k)`` (``m x n``) without an ``m x n x d`` temporary.

    Numeric columns use ``|a|^2 + |b|^2 - 2 a.b`` on the scaled inputs ``x sqrt(w)`` (clamped at 0,
    one matmul); categorical columns add ``w_j 1[a_j != b_j]`` column by column.

    Args:
        A: ``m x d``; B: ``n x d``; is_cat: ``d`` booleans; inv_sq_lengthscales: ``d``.

    Returns:
        ``m x n``.
    """
    num = ~is_cat
    root_w = np.sqrt(inv_sq_lengthscales[num])
    As, Bs = A[:, num] * root_w, B[:, num] * root_w
    out = (As * As).sum(1)[:, None] + (Bs * Bs).sum(1)[None, :] - 2.0 * (As @ Bs.T)
    np.maximum(out, 0.0, out=out)
    for j in np.flatnonzero(is_cat):
        out += inv_sq_lengthscales[j] * (A[:, j, None] != B[None, :, j])
    return out
