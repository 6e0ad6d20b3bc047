r"""Batched squared-exponential ARD kernel with a Hamming distance on categorical columns.

Notation as in :mod:`headstart._gp.kernel`: inputs in ``[0, 1]^d``, ``w_j = 1 / ell_j^2``,
output scale ``s``. Every function here works on a *batch of tasks* (leading dimension ``M``), each
with its own hyperparameters, which is how the meta-GPs of ScaML-GP (Tighineanu et al., AISTATS
2024, Sec. 4) are fitted and evaluated together:

    r^2(x, x') = sum_{j numeric} w_j (x_j - x'_j)^2 + sum_{j categorical} w_j 1[x_j != x'_j]
    k(x, x')   = s * exp(-r^2 / 2)                    (Rasmussen & Williams 2006, Eq. 4.9)

The numeric part is computed as ``|a|^2 + |b|^2 - 2 a.b`` on the scaled, centred inputs
``(x - 1/2) sqrt(w)`` (one batched matmul, no ``M x m x n x d`` temporary), clamped at 0. This is
GPyTorch's scheme for ``RBFKernel``; centring at the middle of the unit cube limits cancellation.
With ``w = 1 / ell^2`` this is exactly GPyTorch's ``ScaleKernel(RBFKernel(ard_num_dims=d))``.
The functions are plain torch code, so they serve both the autograd MAP fit and prediction.
"""

from __future__ import annotations

import torch

DTYPE = torch.float64
CENTER = 0.5  # subtracted from numeric inputs before the |a|^2 + |b|^2 - 2ab expansion


def scale_inputs(X: torch.Tensor, sqrt_w_num: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    r"""Scaled, centred numeric inputs ``(X - 1/2) sqrt(w)`` and their squared norms.

    Args:
        X: ``M x n x d`` (or ``n x d``, broadcast against the ``M`` tasks).
        sqrt_w_num: ``M x d`` square roots of ``w``, zero on categorical columns.

    Returns:
        ``(Xs M x n x d, |Xs|^2 M x n)``.
    """
    Xs = (X - CENTER) * sqrt_w_num.unsqueeze(-2)
    return Xs, (Xs * Xs).sum(-1)


def scaled_sq_dist(
    As: torch.Tensor,
    A_norm: torch.Tensor,
    Bs: torch.Tensor,
    B_norm: torch.Tensor,
    cat_terms: list[tuple[torch.Tensor, torch.Tensor, torch.Tensor]] = (),
) -> torch.Tensor:
    r"""``r^2`` between two batches of scaled inputs (see :func:`scale_inputs`).

    Args:
        As: ``M x m x d`` scaled inputs; ``A_norm``: ``M x m`` their squared norms.
        Bs: ``M x n x d`` scaled inputs; ``B_norm``: ``M x n`` their squared norms.
        cat_terms: One ``(a M x m (or m), b M x n, w M)`` triple per categorical column: its raw
            values on both sides and its weight ``w_j``.

    Returns:
        ``M x m x n``, non-negative.
    """
    r2 = torch.baddbmm(
        A_norm.unsqueeze(-1) + B_norm.unsqueeze(-2), As, Bs.transpose(-1, -2), alpha=-2.0
    ).clamp_min_(0.0)
    for a, b, w in cat_terms:
        r2 = r2 + w[:, None, None] * (a.unsqueeze(-1) != b.unsqueeze(-2)).to(r2.dtype)
    return r2


def se_kernel(
    A: torch.Tensor,
    B: torch.Tensor,
    is_cat: torch.Tensor,
    inv_sq_lengthscales: torch.Tensor,
    outputscale: torch.Tensor,
    *,
    symmetric: bool = False,
) -> torch.Tensor:
    r"""Kernel matrices ``k_m(A_m, B_m)`` of ``M`` tasks with their own hyperparameters.

    Args:
        A: ``M x m x d`` or ``m x d`` (shared by all tasks).
        B: ``M x n x d`` or ``n x d``.
        is_cat: ``d`` boolean mask of categorical columns.
        inv_sq_lengthscales: ``M x d`` weights ``w = 1 / ell^2``.
        outputscale: ``M`` output scales ``s``.
        symmetric: ``A`` and ``B`` are the same points: the diagonal distance is set to exactly 0.

    Returns:
        ``M x m x n`` (differentiable in the hyperparameters).

    Example:
        >>> X = torch.tensor([[0.0, 0.25], [0.5, 0.75]], dtype=DTYPE)
        >>> K = se_kernel(X, X, torch.tensor([False, True]), torch.ones(1, 2, dtype=DTYPE),
        ...               torch.tensor([2.0], dtype=DTYPE), symmetric=True)
        >>> K[0].diagonal().tolist()
        [2.0, 2.0]
    """
    M = inv_sq_lengthscales.shape[0]
    sqrt_w = torch.sqrt(inv_sq_lengthscales) * (~is_cat).to(inv_sq_lengthscales.dtype)
    As, A_norm = scale_inputs(A, sqrt_w)
    Bs, B_norm = scale_inputs(B, sqrt_w)
    As, Bs = As.expand(M, *As.shape[-2:]), Bs.expand(M, *Bs.shape[-2:])
    cat = [
        (A[..., j], B[..., j], inv_sq_lengthscales[:, j])
        for j in torch.nonzero(is_cat).flatten().tolist()
    ]
    r2 = scaled_sq_dist(As, A_norm.expand(As.shape[:-1]), Bs, B_norm.expand(Bs.shape[:-1]), cat)
    if symmetric:
        r2 = r2 * (1.0 - torch.eye(r2.shape[-1], dtype=r2.dtype))
    return outputscale[:, None, None] * torch.exp(-0.5 * r2)
