r"""Acquisition functions in log space, and the piBO prior weighting.

References:
    .. [Ament2023] S. Ament, S. Daulton, D. Eriksson, M. Balandat, E. Bakshy. Unexpected
       Improvements to Expected Improvement for Bayesian Optimization. NeurIPS 2023.
    .. [Srinivas2010] N. Srinivas, A. Krause, S. Kakade, M. Seeger. Gaussian Process Optimization
       in the Bandit Setting: No Regret and Experimental Design. ICML 2010.
    .. [Hvarfner2022] C. Hvarfner, D. Stoll, A. Souza, M. Lindauer, F. Hutter, L. Nardi. piBO:
       Augmenting Acquisition Functions with User Beliefs for Bayesian Optimization. ICLR 2022.

All acquisitions *maximize* (the engine works with ``y`` to be maximized), and are evaluated in
numpy with closed-form gradients (the search makes many tiny batched calls).

* ``logei``: ``LogEI(x) = log E[max(f(x) - best_f, 0)] = log_h(z) + log sigma``,
  ``z = (mu - best_f) / sigma`` ([Ament2023]_, Eq. 9 for the stable ``log_h``), with
  ``d LogEI / d mu = Phi(z) / (sigma h(z))`` and ``d LogEI / d sigma = phi(z) / (sigma h(z))``.
* ``ei`` / ``pi``: expected improvement and probability of improvement in linear space (for piBO
  with the paper's plain EI / PI; LogEI is the numerically robust choice).
* ``ucb``: ``UCB(x) = mu + sqrt(beta) sigma`` with ``beta = 2`` ([Srinivas2010]_; a fixed beta as in
  common practice rather than the theoretical schedule).
* ``ts``: Thompson sampling, the argmax of one joint posterior sample on a candidate set
  (see :func:`headstart._engine.optimize.thompson_sample`).

piBO ([Hvarfner2022]_, Eq. 6) multiplies the acquisition by ``pi(x)^gamma``, ``gamma = beta / n``.
EI and PI are multiplied in linear space, exactly as Eq. 6 is written. In log space the product is
``log a(x) + gamma * log max(pi(x), 1e-12)``; LogEI is already a log. UCB and TS values can be
negative, so they are first mapped to a positive "optimistic improvement"
``softplus(a(x) - best_f)``, which is strictly increasing in ``a`` (same argmax without a prior)
and behaves like ``a - best_f`` above the incumbent and like ``exp(a - best_f)`` far below it:

    criterion(x) = log softplus(a(x) - best_f) + gamma * log max(pi(x), 1e-12)   (UCB, TS)
"""

from __future__ import annotations

import copy
import math

import numpy as np
from scipy.special import erfcx, log_ndtr, ndtr

from headstart._engine import UCB_BETA
from headstart._engine.prior_weight import PriorWeight
from headstart._engine.protocols import Posterior, focus_of

_C1 = 0.5 * math.log(2.0 * math.pi)
_C2 = 0.5 * math.log(0.5 * math.pi)
_INV_SQRT_EPS = 1.0 / math.sqrt(np.finfo(np.float64).eps)  # ~6.7e7 in float64
_PRIOR_FD_STEP = 1e-5  # central finite differences of the (numpy) user prior


def _log1mexp(x: np.ndarray) -> np.ndarray:
    """``log(1 - exp(x))`` for ``x < 0``, stable on both sides of ``-log 2`` (Mächler 2012)."""
    out = np.empty_like(x)
    near = x > -math.log(2.0)
    out[near] = np.log(-np.expm1(x[near]))
    out[~near] = np.log1p(-np.exp(x[~near]))
    return out


def log_h(z: np.ndarray) -> np.ndarray:
    r"""``log h(z) = log(phi(z) + z Phi(z))``, accurate for every finite ``z`` ([Ament2023]_, Eq. 9).

        z > -1:                 log(phi(z) + z Phi(z))
        -1/sqrt(eps) < z <= -1: -z^2/2 - c1 + log1mexp(log(erfcx(-z/sqrt 2) |z|) + c2)
        z <= -1/sqrt(eps):      -z^2/2 - c1 - 2 log|z|

    with ``c1 = log(2 pi)/2``, ``c2 = log(pi/2)/2`` and ``eps`` the float64 machine epsilon.

    Args:
        z: Any shape.

    Returns:
        Same shape.

    Example:
        >>> round(float(np.exp(log_h(np.array(0.0)))), 6)  # phi(0)
        0.398942
    """
    z = np.asarray(z, dtype=np.float64)
    out = np.empty_like(z)
    upper = z > -1.0
    low = z <= -_INV_SQRT_EPS
    mid = ~upper & ~low
    zu = z[upper]
    out[upper] = np.log(np.exp(-0.5 * zu * zu - _C1) + zu * ndtr(zu))
    if mid.any():  # (the local search's few rows are often all in one branch)
        zm = z[mid]
        out[mid] = -0.5 * zm * zm - _C1 + _log1mexp(np.log(erfcx(-zm / math.sqrt(2.0)) * -zm) + _C2)
    if low.any():
        zl = z[low]
        out[low] = -0.5 * zl * zl - _C1 - 2.0 * np.log(-zl)
    return out


def log_ei(mean: np.ndarray, var: np.ndarray, best_f: float) -> np.ndarray:
    r"""``LogEI = log_h((mu - best_f) / sigma) + log sigma`` ([Ament2023]_, Eq. 9).

    Args:
        mean: ``m`` posterior means.
        var: ``m`` posterior variances (> 0).
        best_f: Incumbent value (standardized units).

    Returns:
        ``m`` log expected improvements.

    Example:
        >>> round(float(np.exp(log_ei(np.array([-0.5]), np.array([1.0]), 0.0))[0]), 5)
        0.1978
    """
    sigma = np.sqrt(var)
    return log_h((mean - best_f) / sigma) + np.log(sigma)


def log_ei_and_grad(
    mean: np.ndarray, var: np.ndarray, best_f: float
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    r"""LogEI and its partial derivatives in ``mu`` and ``var``.

        d/d mu  = exp(log Phi(z) - log h(z)) / sigma
        d/d var = exp(log phi(z) - log h(z)) / (2 sigma^2)

    Returns:
        ``(value m, d_mean m, d_var m)``.
    """
    sigma = np.sqrt(var)
    z = (mean - best_f) / sigma
    lh = log_h(z)
    d_mean = np.exp(log_ndtr(z) - lh) / sigma
    d_var = np.exp(-0.5 * z * z - _C1 - lh) / (2.0 * var)
    return lh + np.log(sigma), d_mean, d_var


def ucb(mean: np.ndarray, var: np.ndarray, beta: float = UCB_BETA) -> np.ndarray:
    r"""``UCB = mu + sqrt(beta) sigma`` ([Srinivas2010]_), ``beta = 2`` by default."""
    return mean + math.sqrt(beta) * np.sqrt(var)


def log_softplus(u: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``log(log(1 + exp(u)))`` and its derivative, stable for very negative ``u`` (``~u``)."""
    u = np.asarray(u, dtype=np.float64)
    sp = np.logaddexp(0.0, u)
    far = u < -30.0
    safe_sp = np.where(far, 1.0, sp)
    value = np.where(far, u, np.log(safe_sp))
    grad = np.where(far, 1.0, 1.0 / (1.0 + np.exp(-np.clip(u, -30.0, None))) / safe_sp)
    return value, grad


KINDS = ("logei", "ei", "pi", "ucb")
# Rows per posterior call when a criterion is evaluated without gradient (the acquisition search's
# 2,048-point screening; posteriors are row-independent, so the values do not depend on it). Each
# call builds a few ``rows x n`` temporaries; at 512 rows they stay small enough for the cache and
# the allocator's reuse. In fresh processes 512 was the fastest of 4,096 / 1,024 / 512 / 256 rows
# (or within 2% of it) for GP-BO and ABRAC at n = 100-500, 22-36% faster than 4,096 (GP-BO at
# n = 500: 38 against 49 ms), and 0.2-0.4 ms slower than 4,096 at n = 50
# (``docs/benchmarks/screening_chunks.md``; issue 32, item 4).
SCREEN_CHUNK = 512
_LINEAR_KINDS = ("ei", "pi")  # multiplied by pi^gamma in linear space, as written in Eq. 6


def ei_and_grad(
    mean: np.ndarray, var: np.ndarray, best_f: float
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    r"""``EI = sigma (z Phi(z) + phi(z))`` and its partials in ``mu`` and ``var``.

        d/d mu = Phi(z),   d/d var = phi(z) / (2 sigma)

    Computed in linear space, so it underflows to 0 far below the incumbent (that is what
    separates piBO-EI from piBO-LogEI in practice).
    """
    sigma = np.sqrt(var)
    z = (mean - best_f) / sigma
    pdf = np.exp(-0.5 * z * z - _C1)
    cdf = ndtr(z)
    return sigma * (z * cdf + pdf), cdf, pdf / (2.0 * sigma)


def pi_and_grad(
    mean: np.ndarray, var: np.ndarray, best_f: float
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    r"""Probability of improvement ``PI = Phi(z)`` and its partials in ``mu`` and ``var``.

    d/d mu = phi(z) / sigma,   d/d var = -phi(z) z / (2 var)
    """
    sigma = np.sqrt(var)
    z = (mean - best_f) / sigma
    pdf = np.exp(-0.5 * z * z - _C1)
    return ndtr(z), pdf / sigma, -pdf * z / (2.0 * var)


class Criterion:
    r"""The maximized acquisition criterion, optionally prior-weighted (piBO, [Hvarfner2022]_).

        logei: LogEI(x) + gamma * log max(pi(x), 1e-12)                   (log space)
        ei:    EI(x) * max(pi(x), 1e-12)^gamma                             (linear, Eq. 6)
        pi:    PI(x) * max(pi(x), 1e-12)^gamma                             (linear, Eq. 6)
        ucb:   UCB(x) (no prior) or log softplus(UCB(x) - best_f) + gamma * log max(pi, 1e-12)

    UCB is shifted by the incumbent before the prior multiplies it (App. B.1 of the paper fits
    UCB/TS on ``y - y*``); the softplus keeps the shifted value positive and smooth where SMAC3
    clips at 0. The GP part has closed-form gradients; the user prior is a numpy callable, so its
    gradient is taken by central finite differences (one vectorized call for all points and
    columns).

    Args:
        posterior: A :class:`~headstart._engine.protocols.Posterior` (units of ``best_f``).
        kind: One of :data:`KINDS`.
        best_f: Incumbent (largest standardized observation).
        prior: The piBO factor, or ``None``.
        beta: UCB exploration weight (``mu + sqrt(beta) sigma``); ScaML-GP's experiments use 9.
            A negative ``beta`` gives the pessimistic ``mu - sqrt(-beta) sigma``.
    """

    def __init__(
        self,
        posterior: Posterior,
        kind: str,
        best_f: float,
        prior: PriorWeight | None = None,
        beta: float = UCB_BETA,
    ) -> None:
        if kind not in KINDS:
            raise ValueError(f"kind must be one of {KINDS}; got {kind!r}.")
        self.posterior = posterior
        self.kind = kind
        self.best_f = float(best_f)
        self.prior = prior if (prior is not None and prior.active) else None
        if not math.isfinite(beta):
            raise ValueError(f"beta must be finite; got {beta!r}.")
        self.beta = float(beta)
        # beta < 0: the pessimistic bound mu - sqrt(-beta) sigma (a transfer model's first trial)
        self._kappa = math.copysign(math.sqrt(abs(self.beta)), self.beta)

    def focused(self, X: np.ndarray) -> Criterion:
        """This criterion on the posterior's ``focus`` around the starts ``X`` (the local
        search's, :class:`~headstart._engine.protocols.Posterior`), or itself."""
        posterior = focus_of(self.posterior, X)
        if posterior is self.posterior:
            return self
        out = copy.copy(self)
        out.posterior = posterior
        return out

    def prior_term(self, X: np.ndarray) -> np.ndarray:
        """``gamma * log max(pi(X), 1e-12)`` for ``X`` (``m x d``): returns ``m`` (0 if no prior)."""
        return np.zeros(X.shape[0]) if self.prior is None else self.prior.term(X)

    def _base(self, mean: np.ndarray, var: np.ndarray) -> tuple[np.ndarray, ...]:
        """The acquisition before the prior: ``(value, d_mean, d_var)``."""
        if self.kind == "logei":
            return log_ei_and_grad(mean, var, self.best_f)
        if self.kind == "ei":
            return ei_and_grad(mean, var, self.best_f)
        if self.kind == "pi":
            return pi_and_grad(mean, var, self.best_f)
        sigma = np.sqrt(var)
        values = mean + self._kappa * sigma
        d_mean, d_var = np.ones_like(mean), self._kappa / (2.0 * sigma)
        if self.prior is not None:
            values, outer = log_softplus(values - self.best_f)
            d_mean, d_var = d_mean * outer, d_var * outer
        return values, d_mean, d_var

    def _combine(self, base: np.ndarray, term: np.ndarray) -> np.ndarray:
        if self.kind in _LINEAR_KINDS:
            return base * np.exp(term)
        return base + term

    def value(self, X: np.ndarray, chunk: int = SCREEN_CHUNK) -> np.ndarray:
        """Criterion at ``X`` (``m x d``), no gradient, in calls of ``chunk`` rows: returns ``m``."""
        out = np.empty(X.shape[0])
        for i in range(0, X.shape[0], chunk):
            mean, var = self.posterior.posterior(X[i : i + chunk])
            if self.kind == "logei":
                out[i : i + chunk] = log_ei(mean, var, self.best_f)
            else:
                out[i : i + chunk] = self._base(mean, var)[0]
        return self._combine(out, self.prior_term(X)) if self.prior is not None else out

    def value_and_grad(self, X: np.ndarray, cols: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Criterion at ``X`` (``m x d``) and its gradient in columns ``cols``: ``m``, ``m x k``."""
        mean, var, dmean, dvar = self.posterior.posterior_and_grad(X)
        values, d_mean, d_var = self._base(mean, var)
        grad = (d_mean[:, None] * dmean + d_var[:, None] * dvar)[:, cols]
        if self.prior is None:
            return values, grad
        term, d_term = self.prior_term(X), self._prior_grad(X, cols)
        if self.kind in _LINEAR_KINDS:  # d(a e^t) = e^t (da + a dt)
            weight = np.exp(term)
            return values * weight, weight[:, None] * (grad + values[:, None] * d_term)
        return values + term, grad + d_term

    def _prior_grad(self, X: np.ndarray, cols: np.ndarray) -> np.ndarray:
        m, k = X.shape[0], len(cols)
        if k == 0:
            return np.zeros((m, 0))
        h = _PRIOR_FD_STEP
        plus = np.repeat(X[:, None, :], k, axis=1)
        minus = plus.copy()
        idx = np.arange(k)
        plus[:, idx, cols] = np.minimum(X[:, cols] + h, 1.0)
        minus[:, idx, cols] = np.maximum(X[:, cols] - h, 0.0)
        step = plus[:, idx, cols] - minus[:, idx, cols]
        both = np.concatenate([plus.reshape(-1, X.shape[1]), minus.reshape(-1, X.shape[1])])
        vals = self.prior_term(both)
        diff = vals[: m * k].reshape(m, k) - vals[m * k :].reshape(m, k)
        return np.where(step > 0, diff / np.where(step > 0, step, 1.0), 0.0)
