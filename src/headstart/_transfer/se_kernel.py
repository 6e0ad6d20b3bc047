r"""Batched squared-exponential ARD kernel with a Hamming distance on categorical columns.

Notation as in :mod:`headstart._gp.kernel`: inputs in ``[0, 1]^d``, ``w_j = 1 / ell_j^2``,
output scale ``s``. Every function here works on a *batch of tasks* (leading dimension ``M``), each
with its own hyperparameters, which is how the meta-GPs of ScaML-GP (Tighineanu et al., AISTATS
2024, Sec. 4) are fitted and evaluated together:

    r^2(x, x') = sum_{j numeric} w_j (x_j - x'_j)^2 + sum_{j categorical} w_j 1[x_j != x'_j]
    k(x, x')   = s * exp(-r^2 / 2)                    (Rasmussen & Williams 2006, Eq. 4.9)

With ``w = 1 / ell^2`` this is GPyTorch's ``ScaleKernel(RBFKernel(ard_num_dims=d))``.

The numeric part is expanded as ``|a|^2 + |b|^2 - 2 a.b`` on the scaled, centred inputs
``a = (x - 1/2) sqrt(w)`` (GPyTorch's scheme; centring limits cancellation), so a kernel matrix is
one batched matmul and no ``M x m x n x d`` temporary is formed. The fast path
(:class:`FeatureMaps`, :func:`log_kernel`) folds the norms, the output scale and the Hamming
term into that same matmul, so the *log* kernel matrix is a single ``bmm`` followed by one
in-place ``exp``: prediction is bound by memory traffic, and this touches each ``M x m x n``
entry twice. :func:`se_kernel` is the plain, autograd-safe version.
"""

from __future__ import annotations

import torch

DTYPE = torch.float64
CENTER = 0.5  # subtracted from numeric inputs before the |a|^2 + |b|^2 - 2ab expansion


def vocabulary(is_cat: torch.Tensor, *Xs: torch.Tensor) -> list[torch.Tensor]:
    """Sorted distinct values of each categorical column over all the given point sets."""
    cols = torch.nonzero(is_cat).flatten().tolist()
    return [torch.unique(torch.cat([X[..., j].reshape(-1) for X in Xs])) for j in cols]


class FeatureMaps:
    r"""Feature maps with ``log k_m(a, b) = phi_m(a) . psi_m(b)``: a kernel matrix is one ``bmm``.

    With ``a~ = (a - 1/2) sqrt(w)`` on the numeric columns and
    ``h(a) = (log s - |a~|^2 - sum_{j cat} w_j / 2) / 2``,

        phi(a) = [a~, h(a), 1, onehot(a)],     psi(b) = [b~, 1, h(b), onehot(b) * w / 2]

    so ``phi(a) . psi(b) = log s - |a~ - b~|^2 / 2 - sum_{j cat} w_j 1[a_j != b_j] / 2``, using
    ``1[a_j != b_j] = 1 - sum_v 1[a_j = v] 1[b_j = v]`` over a vocabulary of the values of
    column ``j``. A value outside the vocabulary has an all-zero one-hot code and so counts as
    different from everything: the vocabulary must contain every value of the ``psi`` side. A
    padded row gets ``h = -inf`` (on either side), hence ``k = 0`` exactly: ``h`` only ever meets
    the constant 1 of the other side, so no ``0 * inf`` or ``inf - inf`` arises.

    Args:
        inv_sq_lengthscales: ``M x d`` weights ``w``.
        log_s: ``M`` log output scales.
        is_cat: ``d`` boolean mask of categorical columns.
        vocab: One sorted value tensor per categorical column (:func:`vocabulary`).
    """

    def __init__(
        self,
        inv_sq_lengthscales: torch.Tensor,
        log_s: torch.Tensor,
        is_cat: torch.Tensor,
        vocab: list[torch.Tensor],
    ) -> None:
        w = inv_sq_lengthscales
        self.cat_cols = torch.nonzero(is_cat).flatten().tolist()
        self.sqrt_w_num = torch.sqrt(w) * (~is_cat).to(w.dtype)
        self.log_s = log_s
        self.vocab = vocab
        w_cat = w[:, self.cat_cols]  # M x c
        self._h0 = 0.5 * log_s - 0.25 * w_cat.sum(-1)  # M
        sizes = [len(v) for v in vocab]
        self._code_w = torch.repeat_interleave(
            0.5 * w_cat, torch.tensor(sizes, dtype=torch.long), dim=-1
        )

    def _parts(self, X: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        scaled = (X - CENTER) * self.sqrt_w_num.unsqueeze(-2)  # M x n x d
        h = self._h0.unsqueeze(-1) - 0.5 * (scaled * scaled).sum(-1)  # M x n
        codes = [
            (X[..., j, None] == v).to(X.dtype)
            for j, v in zip(self.cat_cols, self.vocab, strict=True)
        ]
        onehot = torch.cat(codes, dim=-1) if codes else X[..., :0]
        return scaled, h, onehot.expand(*scaled.shape[:-1], onehot.shape[-1])

    def phi(self, X: torch.Tensor, valid: torch.Tensor | None = None) -> torch.Tensor:
        """``M x n x k`` left features of ``X`` (``M x n x d`` or ``n x d``); see :meth:`psi`."""
        scaled, h, onehot = self._parts(X)
        if valid is not None:
            h = h.masked_fill(~valid, float("-inf"))
        return torch.cat([scaled, h.unsqueeze(-1), torch.ones_like(h).unsqueeze(-1), onehot], -1)

    def psi(self, X: torch.Tensor, valid: torch.Tensor | None = None) -> torch.Tensor:
        """``M x n x k`` right features; rows with ``valid == False`` give ``k = 0``."""
        scaled, h, onehot = self._parts(X)
        if valid is not None:
            h = h.masked_fill(~valid, float("-inf"))
        code = onehot * self._code_w.unsqueeze(-2)
        return torch.cat([scaled, torch.ones_like(h).unsqueeze(-1), h.unsqueeze(-1), code], -1)


def log_kernel(phi: torch.Tensor, psi: torch.Tensor) -> torch.Tensor:
    r"""``log k_m(A_m, B_m) = log s_m - r^2 / 2`` (fresh ``M x m x n`` tensor) from features.

    Rounding can leave ``r^2`` a few ulps below 0; callers that need ``k <= s`` exactly clamp.
    """
    return torch.bmm(phi, psi.transpose(-1, -2))


def scaled_sq_dist(
    As: torch.Tensor,
    A_norm: torch.Tensor,
    Bs: torch.Tensor,
    B_norm: torch.Tensor,
    cat_terms: list[tuple[torch.Tensor, torch.Tensor, torch.Tensor]] = (),
) -> torch.Tensor:
    r"""``r^2`` between two batches of scaled inputs (autograd-safe).

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
    ).clamp_min(0.0)
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
    As = ((A - CENTER) * sqrt_w.unsqueeze(-2)).expand(M, *A.shape[-2:])
    Bs = ((B - CENTER) * sqrt_w.unsqueeze(-2)).expand(M, *B.shape[-2:])
    cat = [
        (A[..., j], B[..., j], inv_sq_lengthscales[:, j])
        for j in torch.nonzero(is_cat).flatten().tolist()
    ]
    r2 = scaled_sq_dist(As, (As * As).sum(-1), Bs, (Bs * Bs).sum(-1), cat)
    if symmetric:
        r2 = r2 * (1.0 - torch.eye(r2.shape[-1], dtype=r2.dtype))
    return outputscale[:, None, None] * torch.exp(-0.5 * r2)
