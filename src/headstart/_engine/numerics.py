r"""The one standardiser and the one Cholesky-with-jitter of the code base.

* :func:`standardize`: ``z = (y - mean) / std`` (``ddof = 0``); a constant ``y`` -- ``std <=
  1e-12 max(1, |mean|)`` -- or an empty one gets ``std = 1``, so it maps to zeros, never to NaN.
* :func:`robust_cholesky`: ``L L^T = K + jitter I`` with jitter ``1e-8 * 10^k`` (``k < 6``, the
  scheme of linear_operator's ``psd_safe_cholesky``), batched: only the matrices that fail get
  jitter; a :class:`~headstart.exceptions.NumericsWarning` per retry, NaN input raises
  :class:`~headstart.exceptions.ModelFittingError` at once, and so does a matrix still not
  positive definite after the last try.
* :func:`extend_cholesky`: the factor of a kernel matrix grown by ``p`` rows and columns, from
  the old factor in ``O(n^2 p)`` (block Cholesky), for conditioning on fantasies without a refit.
* :func:`jittered_cholesky_np`: the same idea in numpy for covariances of samples (Thompson
  sampling), relative to a scale and never raising.
"""

from __future__ import annotations

import warnings
from typing import TYPE_CHECKING

import numpy as np

from headstart.exceptions import InvalidValueError, ModelFittingError, NumericsWarning

if TYPE_CHECKING:
    import torch

JITTER_TRIES = 6  # jitter 1e-8 * 10^k, k = 0..5 (linear_operator's psd_safe_cholesky)


def check_training_data(train_X: np.ndarray, train_y: np.ndarray) -> None:
    r"""Refuse non-finite training data at a surrogate's ``condition`` (the NaN guard).

    The engine drops non-finite rows before conditioning; a surrogate called directly must not
    turn a NaN into a NaN posterior.

    Raises:
        InvalidValueError: a NaN or infinite entry (the message names the first row).
    """
    X = np.asarray(train_X, dtype=np.float64)
    y = np.asarray(train_y, dtype=np.float64).reshape(-1)
    checks = [("train_y", ~np.isfinite(y))]
    if X.size:
        checks.append(("train_X", ~np.isfinite(X.reshape(X.shape[0], -1)).all(axis=1)))
    for label, bad in checks:
        if bad.any():
            raise InvalidValueError(
                f"{label} row {int(np.argmax(bad))} is not finite; drop non-finite rows before "
                "conditioning a surrogate (BOEngine does)."
            )


def standardize(y: np.ndarray) -> tuple[np.ndarray, float, float]:
    r"""``((y - mean) / std, mean, std)``; a constant or empty ``y`` gets ``std = 1``.

    Example:
        >>> standardize(np.array([1.0, 3.0]))[0].tolist()
        [-1.0, 1.0]
        >>> standardize(np.array([2.0, 2.0]))
        (array([0., 0.]), 2.0, 1.0)
        >>> standardize(np.array([0.0, 1e300]))[0].tolist()  # no overflow in the moments
        [-1.0, 1.0]
    """
    y = np.asarray(y, dtype=np.float64).reshape(-1)
    if len(y) == 0:
        return y.copy(), 0.0, 1.0
    big = float(np.abs(y).max())
    if big > 1e150:  # y^2 would overflow: take the moments of y / max|y| instead
        mean, std = (float(v) * big for v in (np.mean(y / big), np.std(y / big)))
    else:
        mean, std = float(y.mean()), float(y.std())
    std = std if std > 1e-12 * max(1.0, abs(mean)) else 1.0
    return (y - mean) / std, mean, std


def robust_cholesky(
    K: torch.Tensor,
    *,
    diag_mask: torch.Tensor | None = None,
    warn: bool = True,
    label: str = "Kernel matrix",
) -> torch.Tensor:
    r"""Lower Cholesky factor of each matrix of ``K``, with jitter where it is needed.

    Args:
        K: ``... x n x n`` symmetric matrices.
        diag_mask: ``... x n`` (or ``n``) weights of the jitter per diagonal entry (for padded
            batches: 1 on real rows, 0 on padding); ``None`` for all ones.
        warn: Issue a :class:`~headstart.exceptions.NumericsWarning` per retry.
        label: Names the matrix in messages.

    Returns:
        ``... x n x n`` lower-triangular ``L`` with ``L L^T = K + jitter diag(diag_mask)``; the
        jitter is 0 for matrices that factorize as they are.

    Raises:
        ModelFittingError: ``K`` holds NaN, or a matrix is not positive definite even with the
            largest jitter.
    """
    import torch

    L, info = torch.linalg.cholesky_ex(K)
    bad = info > 0
    if not bool(bad.any()):
        return L
    if bool(torch.isnan(K).any()):
        raise ModelFittingError(f"{label} contains NaN; cannot factorize it.")
    n = K.shape[-1]
    mask = torch.ones(n, dtype=K.dtype) if diag_mask is None else diag_mask.to(K.dtype)
    for k in range(JITTER_TRIES):
        jitter = 1e-8 * 10.0**k
        if warn:
            warnings.warn(
                f"{label} not positive definite ({int(bad.sum())} of them); retrying its "
                f"Cholesky with jitter {jitter:.0e}.",
                NumericsWarning,
                stacklevel=2,
            )
        L_try, info = torch.linalg.cholesky_ex(
            K + torch.diag_embed(jitter * bad.to(K.dtype).unsqueeze(-1) * mask)
        )
        L = torch.where(bad[..., None, None], L_try, L)
        bad = bad & (info > 0)
        if not bool(bad.any()):
            return L
    raise ModelFittingError(
        f"{label} of size {n} is not positive definite even with jitter "
        f"{1e-8 * 10.0 ** (JITTER_TRIES - 1):.0e}. Check the training data for NaN or duplicates."
    )


def extend_cholesky(L: np.ndarray, K_np: np.ndarray, K_pp: np.ndarray) -> np.ndarray:
    r"""Lower factor of ``[[K, K_np], [K_np^T, K_pp]]`` given ``L L^T = K``.

    With ``B = L^{-1} K_np`` and ``S = K_pp - B^T B = L_S L_S^T`` (the Schur complement, factored
    by :func:`robust_cholesky`):

        [[K, K_np], [K_np^T, K_pp]] = [[L, 0], [B^T, L_S]] [[L, 0], [B^T, L_S]]^T

    Args:
        L: ``n x n`` lower factor (``n`` may be 0).
        K_np: ``n x p`` cross-covariance; K_pp: ``p x p`` new block (noise on its diagonal).

    Returns:
        ``(n + p) x (n + p)`` lower factor.
    """
    import scipy.linalg
    import torch

    n, p = K_np.shape
    B = scipy.linalg.solve_triangular(L, K_np, lower=True, check_finite=False) if n else K_np
    S = K_pp - B.T @ B
    L_S = robust_cholesky(torch.from_numpy(0.5 * (S + S.T)), label="Fantasy kernel block").numpy()
    out = np.zeros((n + p, n + p))
    out[:n, :n], out[n:, :n], out[n:, n:] = L, B.T, L_S
    return out


def jittered_cholesky_np(cov: np.ndarray, scale: float, tries: int = 8) -> np.ndarray:
    r"""Cholesky of ``cov + 1e-10 10^k scale I`` for the first ``k < tries`` that works.

    Falls back to the diagonal square root when none does (a posterior covariance is PSD up to
    rounding, so this is only a guard).
    """
    eye = scale * np.eye(len(cov))
    for k in range(tries):
        try:
            return np.linalg.cholesky(cov + 1e-10 * 10.0**k * eye)
        except np.linalg.LinAlgError:
            continue
    return np.diag(np.sqrt(np.maximum(np.diagonal(cov), 0.0)))  # pragma: no cover


__all__ = [
    "JITTER_TRIES",
    "check_training_data",
    "extend_cholesky",
    "jittered_cholesky_np",
    "robust_cholesky",
    "standardize",
]
