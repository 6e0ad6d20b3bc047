r"""Shared pieces of the transfer baselines (RGPE, StackGP): their single SE-ARD GPs, sampling.

The baselines use the meta-GPs' model (Tighineanu et al., AISTATS 2024, App. C.5: "other
baselines" share the meta-GP priors): a zero-mean squared-exponential ARD GP on standardized
targets under :data:`~headstart._gp.hyperprior.META_HYPERPRIOR`, fitted by MAP exactly as the
meta-task GPs (:func:`headstart._gp.exact.fit_exact_gp`, per-datum scaling, L-BFGS-B from a first
start plus prior draws). :func:`fit_se_gp` adds what the test-task model of a baseline needs: a
warm start and a noise variance pinned for noise-free objectives. Predictions come from a
one-GP :class:`~headstart._gp.batched.BatchedGP`.
"""

from __future__ import annotations

import numpy as np

from headstart._gp.exact import fit_exact_gp
from headstart._gp.fit_settings import N_PRIOR_STARTS, SE_COORDS
from headstart._gp.hyperprior import META_HYPERPRIOR
from headstart._gp.params import GPParams


def fit_se_gp(
    X: np.ndarray,
    z: np.ndarray,
    is_cat: np.ndarray,
    *,
    rng: np.random.Generator,
    init: GPParams | None = None,
    n_prior_starts: int = N_PRIOR_STARTS,
    deterministic: bool = False,
) -> GPParams:
    r"""MAP hyperparameters of one zero-mean SE-ARD GP on standardized targets ``z``.

    Minimizes ``-(log p(z | theta) + log p(theta)) / n`` (the meta-GP objective) by L-BFGS-B from
    ``init`` (default ``ell = 0.5, s = 1, sigma^2 = 1e-3``) and ``n_prior_starts`` prior draws,
    batched and decoupled; the best start wins.

    Args:
        X: ``n x d`` inputs in ``[0, 1]`` (``n >= 1``).
        z: ``n`` standardized targets.
        is_cat: ``d`` boolean mask of categorical columns.
        rng: Draws the prior starts.
        init: First start (e.g. the previous fit: a warm start).
        n_prior_starts: Starts drawn from the hyperprior.
        deterministic: Pin ``sigma^2`` at :data:`~headstart._gp.fit_settings.DETERMINISTIC_NOISE`.

    Returns:
        One-row :class:`~headstart._gp.params.GPParams`.
    """
    X = np.asarray(X, dtype=np.float64)
    d = X.shape[1]
    first = META_HYPERPRIOR.initial_raw(d) if init is None else init.to_raw(SE_COORDS)[0]
    drawn = META_HYPERPRIOR.sample_log(rng, (n_prior_starts,), d)
    starts = np.vstack([first[None, :], drawn])[None]
    raw, _ = fit_exact_gp(
        [X],
        [np.asarray(z, dtype=np.float64).reshape(-1)],
        is_cat,
        starts,
        deterministic=deterministic,
        penalize_failures=True,
    )
    return GPParams.from_raw(raw, SE_COORDS)


def psd_sample(
    mean: np.ndarray, cov: np.ndarray, n_samples: int, rng: np.random.Generator
) -> np.ndarray:
    r"""Joint Gaussian samples for a batch of ``(mean, cov)``: ``B x n_samples x n``.

    Uses the symmetric square root ``Q diag(sqrt(max(lambda, 0))) Q^T`` of each covariance, which
    needs no jitter for the (near-)singular covariances of posteriors at training points.

    Args:
        mean: ``B x n``; cov: ``B x n x n`` (PSD up to rounding).
        n_samples: Samples per batch member.
        rng: Source of the standard normals.
    """
    evals, evecs = np.linalg.eigh(cov)
    root = evecs * np.sqrt(np.maximum(evals, 0.0))[:, None, :]  # B x n x n, root root^T = cov
    eps = rng.standard_normal((cov.shape[0], n_samples, cov.shape[-1]))
    return mean[:, None, :] + eps @ np.swapaxes(root, -1, -2)


def weighted_log_mean_lengthscales(
    lengthscales: np.ndarray, weights: np.ndarray, fallback: np.ndarray | None = None
) -> np.ndarray:
    """Per-column weighted geometric mean of ``K x d`` lengthscales (acquisition preconditioning)."""
    weights = np.asarray(weights, dtype=np.float64)
    if weights.sum() <= 0:
        return np.ones(lengthscales.shape[1]) if fallback is None else fallback
    return np.exp((weights[:, None] * np.log(lengthscales)).sum(0) / weights.sum())
