r"""The GP core's kernels: Matérn-5/2 and squared-exponential ARD, Hamming distance on categoricals.

Notation (used throughout :mod:`headstart._gp`): ``X`` is ``n x d`` in ``[0, 1]^d``; column ``j``
is *numeric* (continuous or integer) or *categorical*; ``ell_j`` is its lengthscale and
``w_j = 1 / ell_j^2`` its inverse squared lengthscale; ``s`` is the output scale. Both kernels are
stationary functions of one scaled squared distance,

    r^2(x, x') = sum_{j numeric} w_j (x_j - x'_j)^2 + sum_{j categorical} w_j 1[x_j != x'_j]
    k(x, x')   = s f(r^2),
    Matérn-5/2: f(r^2) = (1 + sqrt(5) r + 5/3 r^2) exp(-sqrt(5) r)   (Rasmussen & Williams 2006, Eq. 4.17)
    SE:         f(r^2) = exp(-r^2 / 2)                                (R&W Eq. 4.9)

so one code path (:data:`MATERN52`, :data:`SE`: ``f`` and its derivative ``f'``) serves every GP
of headstart. The categorical term puts the Hamming distance *inside* the kernel (as Optuna's
``_gp/gp.py`` does): with a one-hot embedding scaled by ``1/sqrt(2)`` it is a squared Euclidean
distance, so ``k`` stays a valid kernel. With ``w = 1 / ell^2``, SE is GPyTorch's
``ScaleKernel(RBFKernel(ard_num_dims=d))``.

Two ways to get ``r^2``:

* per-column squared differences (:func:`pairwise_sq_diffs`, ``... x m x n x d``), then one matmul
  with ``w``: exact zeros on the diagonal; the numpy prediction path (:func:`sq_dist_np`);
* batched over tasks with their own hyperparameters (:class:`FeatureMaps`): the numeric part is
  expanded as ``|a|^2 + |b|^2 - 2 a.b`` on the scaled, centred inputs ``a = (x - 1/2) sqrt(w)``
  (GPyTorch's scheme; centring limits cancellation), and the norms, ``log s`` and the Hamming term
  are folded into the same matmul, so ``log s - r^2 / 2`` of a whole batch is one ``bmm``
  (:func:`log_kernel`): prediction and fitting are then bound by memory traffic, and no
  ``M x m x n x d`` temporary is formed.
"""

from __future__ import annotations

import math

import numpy as np
import torch

DTYPE = torch.float64
CENTER = 0.5  # subtracted from numeric inputs before the |a|^2 + |b|^2 - 2ab expansion
_SQRT5 = math.sqrt(5.0)


# --- the two correlation functions ------------------------------------------------------------
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
        Same shape as ``sq_dist``, values in ``(0, 1]`` (differentiable, exact at 0).

    Example:
        >>> float(matern52(torch.zeros(1, dtype=DTYPE))[0])
        1.0
    """
    return _Matern52.apply(sq_dist)


def matern52_np(sq_dist: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    r"""Matérn-5/2 ``f(r^2)`` and its derivative ``f'(r^2) = -5/6 (1 + sqrt(5 r^2)) e^{-sqrt(5 r^2)}``.

    Args:
        sq_dist: Any shape, non-negative.

    Returns:
        ``(f, f')``, each of the same shape.
    """
    root, exp_part = _root_and_exp(sq_dist)
    one_root = np.add(root, 1.0, out=root)
    value = np.multiply(sq_dist, 5.0 / 3.0, out=np.empty(np.shape(sq_dist)))
    value += one_root
    value *= exp_part
    one_root *= -5.0 / 6.0
    one_root *= exp_part
    return value, one_root


def matern52_value_np(sq_dist: np.ndarray) -> np.ndarray:
    """:func:`matern52_np`'s ``f(r^2)`` alone (the same arithmetic, so the same bits), for
    predictions, which need no derivative."""
    root, exp_part = _root_and_exp(sq_dist)
    value = np.multiply(sq_dist, 5.0 / 3.0, out=np.empty(np.shape(sq_dist)))
    value += np.add(root, 1.0, out=root)
    value *= exp_part
    return value


def _root_and_exp(sq_dist: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(sqrt(5 r^2), exp(-sqrt(5 r^2)))`` as new float64 arrays (so the helpers return float64,
    0-d for a scalar). The Matérn helpers work in place on as few ``m x n`` arrays as they can:
    at 2,048 x 500 each fresh temporary costs more in page faults than its arithmetic (the C
    allocator hands large freed blocks back to the OS)."""
    root = np.multiply(sq_dist, 5.0, out=np.empty(np.shape(sq_dist)))
    np.sqrt(root, out=root)
    exp_part = np.negative(root, out=np.empty_like(root))
    np.exp(exp_part, out=exp_part)
    return root, exp_part


class Matern52Kernel:
    r"""Matérn-5/2: ``f(r^2) = (1 + sqrt(5) r + 5/3 r^2) e^{-sqrt(5) r}`` (R&W Eq. 4.17)."""

    name = "matern52"

    def f(self, sq_dist: torch.Tensor) -> torch.Tensor:
        """``f(r^2)``, differentiable (exact gradient at 0)."""
        return matern52(sq_dist)

    def f_and_df(self, sq_dist: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``(f, f')`` at ``r^2`` (no autograd), for closed-form gradients."""
        root = torch.sqrt(5.0 * sq_dist)
        exp_part = torch.exp(-root)
        return exp_part * (1.0 + root + (5.0 / 3.0) * sq_dist), (-5.0 / 6.0) * (
            1.0 + root
        ) * exp_part

    def gram_from_log_se(self, E: torch.Tensor, log_s: torch.Tensor) -> torch.Tensor:
        """``s f(r^2)`` from ``E = log s - r^2 / 2`` (:func:`log_kernel`'s output; overwritten)."""
        sq = E.neg_().add_(log_s[:, None, None]).mul_(2.0).clamp_min_(0.0)
        return torch.exp(log_s)[:, None, None] * matern52(sq)

    def __repr__(self) -> str:
        return "MATERN52"


class SquaredExponentialKernel:
    r"""Squared exponential: ``f(r^2) = exp(-r^2 / 2)`` (R&W Eq. 4.9)."""

    name = "se"

    def f(self, sq_dist: torch.Tensor) -> torch.Tensor:
        """``f(r^2)``, differentiable."""
        return torch.exp(-0.5 * sq_dist)

    def f_and_df(self, sq_dist: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``(f, f' = -f / 2)`` at ``r^2``."""
        value = torch.exp(-0.5 * sq_dist)
        return value, -0.5 * value

    def gram_from_log_se(self, E: torch.Tensor, log_s: torch.Tensor) -> torch.Tensor:
        """``s f(r^2) = exp(E)`` from ``E = log s - r^2 / 2`` (in place: one pass over ``E``)."""
        return E.exp_()

    def __repr__(self) -> str:
        return "SE"


MATERN52 = Matern52Kernel()
SE = SquaredExponentialKernel()
KERNELS = {k.name: k for k in (MATERN52, SE)}
StationaryKernel = Matern52Kernel | SquaredExponentialKernel


# --- squared distances from per-column differences ---------------------------------------------
def pairwise_sq_diffs(A: torch.Tensor, B: torch.Tensor, is_cat: torch.Tensor) -> torch.Tensor:
    r"""Per-column squared differences; ``1[a_j != b_j]`` on categorical columns.

    D[..., i, k, j] = (A_ij - B_kj)^2  (numeric j),   1[A_ij != B_kj]  (categorical j)

    Args:
        A: ``... x m x d``.
        B: ``n x d`` or ``... x n x d`` (broadcast against ``A``'s batch shape).
        is_cat: ``d`` boolean mask of categorical columns.

    Returns:
        ``... x m x n x d``.
    """
    diff = A.unsqueeze(-2) - B.unsqueeze(-3)
    sq = diff * diff
    if bool(is_cat.any()):
        sq = torch.where(is_cat, (diff != 0).to(sq.dtype), sq)
    return sq


def kernel(
    A: torch.Tensor,
    B: torch.Tensor,
    is_cat: torch.Tensor,
    inv_sq_lengthscales: torch.Tensor,
    outputscale: torch.Tensor,
) -> torch.Tensor:
    r"""Matérn-5/2 kernel matrix ``s f(r^2(A, B))`` (see the module docstring).

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
    return outputscale * matern52(pairwise_sq_diffs(A, B, is_cat) @ inv_sq_lengthscales)


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
    out = sq_dist_scaled(
        *scaled_numeric(A, is_cat, inv_sq_lengthscales),
        *scaled_numeric(B, is_cat, inv_sq_lengthscales),
    )
    for j in np.flatnonzero(is_cat):
        out += inv_sq_lengthscales[j] * (A[:, j, None] != B[None, :, j])
    return out


def scaled_numeric(
    A: np.ndarray, is_cat: np.ndarray, inv_sq_lengthscales: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """One side of :func:`sq_dist_np`'s numeric part: ``A``'s numeric columns times ``sqrt(w)``
    and their squared norms. A model that predicts many times makes its training side once."""
    num = ~is_cat
    scaled = A[:, num] * np.sqrt(inv_sq_lengthscales[num])
    return scaled, (scaled * scaled).sum(1)


def sq_dist_scaled(
    A_scaled: np.ndarray, A_norm: np.ndarray, B_scaled: np.ndarray, B_norm: np.ndarray
) -> np.ndarray:
    """The numeric part of :func:`sq_dist_np` from both sides' :func:`scaled_numeric`."""
    cross = A_scaled @ B_scaled.T
    cross *= 2.0
    out = A_norm[:, None] + B_norm[None, :]
    out -= cross  # in place: the same arithmetic as one expression, fewer m x n temporaries
    np.maximum(out, 0.0, out=out)
    return out


def se_np(
    A: np.ndarray, B: np.ndarray, is_cat: np.ndarray, lengthscales: np.ndarray, scale: float
) -> np.ndarray:
    """Squared-exponential ARD kernel ``s exp(-r^2 / 2)`` in numpy (``m x n``)."""
    return scale * np.exp(-0.5 * sq_dist_np(A, B, is_cat, np.asarray(lengthscales) ** -2.0))


# --- batched over tasks: feature maps -----------------------------------------------------------
def vocabulary(is_cat: torch.Tensor, *Xs: torch.Tensor) -> list[torch.Tensor]:
    """Sorted distinct values of each categorical column over all the given point sets."""
    cols = torch.nonzero(is_cat).flatten().tolist()
    return [torch.unique(torch.cat([X[..., j].reshape(-1) for X in Xs])) for j in cols]


class FeatureMaps:
    r"""Feature maps with ``log s_m - r^2 / 2 = phi_m(a) . psi_m(b)``: a batch is one ``bmm``.

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
        return self.phi_psi(X, valid)[1]

    def phi_psi(
        self, X: torch.Tensor, valid: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """:meth:`phi` and :meth:`psi` of the same points, sharing the work."""
        scaled, h, onehot = self._parts(X)
        if valid is not None:
            h = h.masked_fill(~valid, float("-inf"))
        one = torch.ones_like(h).unsqueeze(-1)
        h = h.unsqueeze(-1)
        code = onehot * self._code_w.unsqueeze(-2)
        return torch.cat([scaled, h, one, onehot], -1), torch.cat([scaled, one, h, code], -1)


def log_kernel(phi: torch.Tensor, psi: torch.Tensor) -> torch.Tensor:
    r"""``log s_m - r^2 / 2`` between two batches (fresh ``M x m x n`` tensor) from features:
    the log of the SE kernel.

    Rounding can leave ``r^2`` a few ulps below 0; callers that need ``k <= s`` exactly clamp.
    """
    return torch.bmm(phi, psi.transpose(-1, -2))


def batched_kernel(
    A: torch.Tensor,
    B: torch.Tensor,
    is_cat: torch.Tensor,
    inv_sq_lengthscales: torch.Tensor,
    outputscale: torch.Tensor,
    *,
    kernel: StationaryKernel = SE,
    symmetric: bool = False,
) -> torch.Tensor:
    r"""Kernel matrices ``s_m f(r_m^2(A_m, B_m))`` of ``M`` tasks with their own hyperparameters.

    Args:
        A: ``M x m x d`` or ``m x d`` (shared by all tasks).
        B: ``M x n x d`` or ``n x d``.
        is_cat: ``d`` boolean mask of categorical columns.
        inv_sq_lengthscales: ``M x d`` weights ``w = 1 / ell^2``.
        outputscale: ``M`` output scales ``s``.
        kernel: :data:`SE` (default) or :data:`MATERN52`.
        symmetric: ``A`` and ``B`` are the same points: the diagonal distance is set to exactly 0.

    Returns:
        ``M x m x n`` (differentiable in the hyperparameters).

    Example:
        >>> X = torch.tensor([[0.0, 0.25], [0.5, 0.75]], dtype=DTYPE)
        >>> K = batched_kernel(X, X, torch.tensor([False, True]), torch.ones(1, 2, dtype=DTYPE),
        ...                    torch.tensor([2.0], dtype=DTYPE), symmetric=True)
        >>> K[0].diagonal().tolist()
        [2.0, 2.0]
    """
    M = inv_sq_lengthscales.shape[0]
    w = inv_sq_lengthscales
    sqrt_w = torch.sqrt(w) * (~is_cat).to(w.dtype)
    As = ((A - CENTER) * sqrt_w.unsqueeze(-2)).expand(M, *A.shape[-2:])
    Bs = ((B - CENTER) * sqrt_w.unsqueeze(-2)).expand(M, *B.shape[-2:])
    r2 = torch.baddbmm(
        (As * As).sum(-1).unsqueeze(-1) + (Bs * Bs).sum(-1).unsqueeze(-2),
        As,
        Bs.transpose(-1, -2),
        alpha=-2.0,
    ).clamp_min(0.0)
    for j in torch.nonzero(is_cat).flatten().tolist():
        differ = A[..., j].unsqueeze(-1) != B[..., j].unsqueeze(-2)
        r2 = r2 + w[:, j, None, None] * differ.to(r2.dtype)
    if symmetric:
        r2 = r2 * (1.0 - torch.eye(r2.shape[-1], dtype=r2.dtype))
    return outputscale[:, None, None] * kernel.f(r2)


__all__ = [
    "CENTER",
    "DTYPE",
    "KERNELS",
    "MATERN52",
    "SE",
    "FeatureMaps",
    "StationaryKernel",
    "batched_kernel",
    "kernel",
    "log_kernel",
    "matern52",
    "matern52_np",
    "pairwise_sq_diffs",
    "scaled_numeric",
    "se_np",
    "sq_dist_np",
    "sq_dist_scaled",
    "vocabulary",
]
