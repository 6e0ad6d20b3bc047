r"""StackGP: Google Vizier's stack of residual Gaussian processes.

Reference: D. Golovin, B. Solnik, S. Moitra, G. Kochanski, J. Karro, D. Sculley. Google Vizier: A
Service for Black-Box Optimization. KDD 2017, Sec. 3.3 "Transfer learning" (below: [Vizier]).
Cross-checked against OSS Vizier's ``StackedResidualGP`` (Apache-2.0) and OpenBox's
``GPStackingSurrogate``; no code is taken from either. P. Tighineanu et al. (AISTATS 2024; below:
[ScaML]) run it as the "StackGP" baseline.

**Model.** The tasks are ordered (the meta-tasks as given, then the test task). Level ``l`` is a
GP fitted to the *residuals* of task ``l`` against the stack below it,

    r_l = y_l - mu_{<l}(X_l),     mu_{<l}(x) = sum_{k < l} mu_k(x),

and the stack predicts ([Vizier] Sec. 3.3)

    mu_l^stack(x)    = mu_{<l}(x) + mu_l(x)
    sigma_l^stack(x) = sigma_l(x)^beta_l * sigma_{l-1}^stack(x)^(1 - beta_l),
    beta_l           = alpha n_l / (alpha n_l + n_{l-1}),   alpha = 1,

a weighted geometric mean of the new GP's and the prior stack's standard deviations, weighted by
their training-set sizes (``beta_1 = 1``; a test task without data has ``beta = 0`` and predicts
with the meta stack alone). Unrolled, ``log sigma^stack = sum_l c_l log sigma_l`` with
``c_l = beta_l prod_{k > l} (1 - beta_k)`` and ``sum_l c_l = 1``: :meth:`StackGP.report` returns
the ``c_l``. The stack is sequential in ``M`` by construction (each level needs the one below),
which is the scaling weakness [ScaML] reports.

**Joint covariance.** [Vizier] defines only marginals. For Thompson sampling,
:meth:`StackGPPosterior.joint_posterior` uses ``cov = D R D`` with ``D = diag(sigma^stack)`` and
``R = sum_l c_l R_l`` the same convex combination of the levels' posterior *correlation* matrices:
a valid covariance whose diagonal is exactly the marginal variance.

**Units.** All targets are mapped by one fixed affine map, ``z = (y - ybar) / sd`` with the mean
and standard deviation of the pooled meta targets (so the residual chain stays on one scale, and
the meta stack is fitted once). ``y_model`` is the test targets in these units. Each level's GP
standardizes its own residuals internally and has the meta-GPs' kernel and priors
(:func:`headstart._transfer._common.fit_se_gp`).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from headstart._engine.numerics import standardize
from headstart._gp.batched import MIN_VAR, BatchedGP, unpack_tasks
from headstart._gp.params import GPParams
from headstart._transfer._common import fit_se_gp, weighted_log_mean_lengthscales
from headstart._transfer.base import TransferSurrogate
from headstart._transfer.defaults import STACKGP_ALPHA as ALPHA

_JOINT_MIN_COEF = 1e-12  # levels with a smaller c_l are left out of the joint correlation
_JOINT_LEVEL_CHUNK_ELEMENTS = 1 << 24  # covariance entries per block of levels


def stack_coefficients(n: Sequence[int], alpha: float = ALPHA) -> np.ndarray:
    r"""Geometric-mean weights ``c_l = beta_l prod_{k > l} (1 - beta_k)`` of a stack.

    Args:
        n: Training-set sizes ``n_1..n_L`` in stack order (``n_l`` may be 0: no weight).
        alpha: [Vizier]'s ``alpha``.

    Returns:
        ``L`` non-negative weights summing to 1 (when some ``n_l > 0``).

    Example:
        >>> stack_coefficients([10, 10, 20]).round(4).tolist()
        [0.1667, 0.1667, 0.6667]
    """
    n = np.asarray(n, dtype=np.float64)
    beta = np.ones(len(n))
    for i in range(1, len(n)):
        own, prev = alpha * n[i], n[i - 1]
        beta[i] = own / (own + prev) if own + prev > 0 else 0.0
    tail = np.cumprod(np.r_[1.0 - beta[1:], 1.0][::-1])[::-1]  # prod_{k > l} (1 - beta_k)
    return beta * tail


class StackGPPosterior:
    r"""The stack's prediction (module docstring), in the pooled units ``z``.

    Args:
        levels: The meta levels (raw units = ``z`` residual units).
        target: The test level, or ``None``.
        coef: ``L`` coefficients ``c_l`` (meta levels, then the test level if present).
    """

    includes_noise = False

    def __init__(self, levels: BatchedGP, target: BatchedGP | None, coef: np.ndarray) -> None:
        self.levels, self.target = levels, target
        self.coef = np.asarray(coef, dtype=np.float64)
        self.d = len(levels.is_cat)
        M = levels.n_tasks
        log_prior = np.log(levels.prior_var)
        ells = [levels.params.lengthscales]
        if target is not None:
            log_prior = np.r_[log_prior, np.log(target.prior_var)]
            ells.append(target.params.lengthscales)
        self.outputscale = float(np.exp(self.coef @ log_prior))
        self.lengthscales = weighted_log_mean_lengthscales(np.vstack(ells), self.coef)
        self._c_meta, self._c_t = self.coef[:M], (self.coef[M] if target is not None else 0.0)

    def posterior(self, X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Stack mean and variance: ``m`` each."""
        mu, var = self.levels.moments(X)
        mean, log_var = mu.sum(0), self._c_meta @ np.log(var)
        if self.target is not None:
            mt, vt = self.target.moments(X)
            mean, log_var = mean + mt[0], log_var + self._c_t * np.log(vt[0])
        return mean, np.maximum(np.exp(log_var), MIN_VAR)

    def posterior_and_grad(
        self, X: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        r"""Stack mean and variance with gradients in ``X``.

        d mean / dx = sum_l d mu_l / dx
        d var  / dx = var * sum_l c_l (d var_l / dx) / var_l
        """
        mu, var, dmu, dvar = self.levels.moments(X, grad=True)
        mean, dmean = mu.sum(0), dmu.sum(0)
        log_var = self._c_meta @ np.log(var)
        rel = np.einsum("l,lmd->md", self._c_meta, dvar / var[:, :, None])
        if self.target is not None:
            mt, vt, dmt, dvt = self.target.moments(X, grad=True)
            mean, dmean = mean + mt[0], dmean + dmt[0]
            log_var = log_var + self._c_t * np.log(vt[0])
            rel = rel + self._c_t * dvt[0] / vt[0][:, None]
        v = np.exp(log_var)
        dv = np.where((v < MIN_VAR)[:, None], 0.0, v[:, None] * rel)
        return mean, np.maximum(v, MIN_VAR), dmean, dv

    def joint_posterior(self, X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        r"""Stack mean (``m``) and covariance ``D (sum_l c_l R_l) D`` (``m x m``)."""
        X = np.asarray(X, dtype=np.float64).reshape(-1, self.d)
        mean, var = self.posterior(X)
        m = len(X)
        R = np.zeros((m, m))
        active = np.flatnonzero(self._c_meta > _JOINT_MIN_COEF)
        step = max(1, _JOINT_LEVEL_CHUNK_ELEMENTS // max(1, m * m))
        for i in range(0, len(active), step):
            idx = active[i : i + step]
            R += _weighted_correlation(self.levels.cov(X, X, idx), self._c_meta[idx])
        if self.target is not None and self._c_t > _JOINT_MIN_COEF:
            R += _weighted_correlation(self.target.cov(X, X), np.array([self._c_t]))
        sd = np.sqrt(var)
        return mean, sd[:, None] * R * sd[None, :]


def _weighted_correlation(C: np.ndarray, c: np.ndarray) -> np.ndarray:
    """``sum_l c_l C_l / (sd_l sd_l^T)`` for covariances ``C`` (``L x m x m``)."""
    sd = np.sqrt(np.maximum(np.diagonal(C, axis1=1, axis2=2), MIN_VAR))  # L x m
    return np.einsum("l,lij->ij", c, C / (sd[:, :, None] * sd[:, None, :]))


class StackGP(TransferSurrogate):
    r"""StackGP as a transfer surrogate: the meta stack fitted once, the test level per call.

    Args:
        meta_tasks: The earlier tasks in stack order (:class:`headstart.sources.MetaTask` or
            ``(X, y)`` pairs).
        is_cat: ``d`` mask of categorical columns.
        seed: Seeds the levels' prior starts.
        deterministic: Pin the test level's noise (noise-free objectives).
        alpha: [Vizier]'s ``alpha`` in ``beta_l``.

    Example:
        >>> rng = np.random.default_rng(0)
        >>> X = rng.random((12, 1))
        >>> sources = [(X, np.sin(6 * X[:, 0])), (X, np.sin(6 * X[:, 0]) + X[:, 0])]
        >>> model = StackGP(sources, np.array([False]))  # a level per source, then the test level
        >>> post, y_model = model.condition(X[:4], np.sin(6 * X[:4, 0]), rng)
        >>> list(model.report())
        ['task0', 'task1', 'target']
    """

    def __init__(
        self,
        meta_tasks: Sequence,
        is_cat: np.ndarray,
        *,
        seed: int = 0,
        deterministic: bool = False,
        alpha: float = ALPHA,
    ) -> None:
        self.is_cat = np.asarray(is_cat, dtype=bool)
        Xs, ys, self.names = unpack_tasks(meta_tasks)
        _, self.ybar, self.scale = standardize(np.concatenate(ys))
        self.deterministic, self.alpha = deterministic, float(alpha)
        rng = np.random.default_rng(seed)
        rs, params, r_mean, r_std = [], [], [], []
        below: list[BatchedGP] = []
        for X, y in zip(Xs, ys, strict=True):
            resid = (y - self.ybar) / self.scale
            for gp in below:
                resid = resid - gp.moments(X)[0][0]
            r, mu, sd = standardize(resid)
            p = fit_se_gp(X, r, self.is_cat, rng=rng)
            below.append(BatchedGP.build([X], [r], self.is_cat, p, y_mean=[mu], y_std=[sd]))
            rs.append(r)
            params.append(p)
            r_mean.append(mu)
            r_std.append(sd)
        self.levels = BatchedGP.build(
            Xs,
            rs,
            self.is_cat,
            GPParams.stack(params),
            names=self.names,
            y_mean=r_mean,
            y_std=r_std,
        )
        self.n_meta = [len(y) for y in ys]
        self.coef = stack_coefficients([*self.n_meta, 0], self.alpha)
        self._target_params: GPParams | None = None

    def condition(
        self, X_t: np.ndarray, y_t: np.ndarray, rng: np.random.Generator
    ) -> tuple[StackGPPosterior, np.ndarray]:
        """Fit the test level on the residuals; return ``(posterior, y_t in pooled units)``."""
        X_t, y_t = self._test_data(X_t, y_t)
        z_t = (y_t - self.ybar) / self.scale
        n = len(z_t)
        target = None
        if n:
            r, mu, sd = standardize(z_t - self.levels.moments(X_t)[0].sum(0))
            target = self._refit_target(X_t, r, rng, mu, sd)
        self.coef = stack_coefficients([*self.n_meta, n], self.alpha)
        coef = self.coef if n else self.coef[:-1]
        return StackGPPosterior(self.levels, target, coef), z_t

    def report(self) -> dict[str, float]:
        """Each level's weight ``c_l`` in the stack's standard deviation (``"target"``: the test
        level's)."""
        out = {name: float(c) for name, c in zip(self.names, self.coef[:-1], strict=True)}
        out["target"] = float(self.coef[-1])
        return out

    @property
    def pooled_units(self) -> tuple[float, float]:
        """``(ybar, sd)`` of the map ``z = (y - ybar) / sd``."""
        return self.ybar, self.scale


__all__ = ["StackGP", "StackGPPosterior", "stack_coefficients"]
