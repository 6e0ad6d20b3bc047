r"""Acquisitions over several outputs: log expected hypervolume improvement and constraints.

References:
    .. [Yang2019] K. Yang, M. Emmerich, A. Deutz, T. Bäck. Efficient computation of expected
       hypervolume improvement using box decomposition algorithms. J. Global Optim. 75, 2019.
    .. [Daulton2020] S. Daulton, M. Balandat, E. Bakshy. Differentiable Expected Hypervolume
       Improvement for Parallel Multi-Objective Bayesian Optimization. NeurIPS 2020.
    .. [Ament2023] S. Ament et al. Unexpected Improvements to Expected Improvement for Bayesian
       Optimization. NeurIPS 2023 (LogEI, and LogEHVI / log constrained EI, Sec. 4-5).
    .. [Gardner2014] J. Gardner, M. Kusner, Z. Xu, K. Weinberger, J. Cunningham. Bayesian
       Optimization with Inequality Constraints. ICML 2014.

Every output has its own independent model (one GP per objective and per constraint, as Optuna's
GPSampler and BoTorch's ``ModelListGP`` do). All objectives are *maximized*; a constraint is
satisfied when its value is ``<= threshold`` (Optuna's ``c <= 0``, in each model's units).

**LogEHVI** (closed form for independent Gaussian outputs, [Yang2019]_). The region a new point
``y`` may improve is split into boxes ``[l_c, u_c)`` (:func:`hypercells`: the non-dominated space
above the reference point, sliced along the last objective; the top boxes reach ``u = +inf``),
and ``HVI(y) = sum_c prod_j (min(y_j, u_cj) - l_cj)^+``. With independent outputs the expectation
factorizes per box and per output:

    E[(min(Y, u) - l)^+] = sigma (h(z_l) - h(z_u)),   z_b = (mu - b) / sigma,   h(z) = phi(z) + z Phi(z)

    log EHVI = logsumexp_c  sum_j [ log sigma_j + log h(z_l) + log1mexp(log h(z_u) - log h(z_l)) ]

with LogEI's stable ``log h`` ([Ament2023]_, Eq. 9), so EHVI far from the front is a finite log
instead of an underflowed 0. Its partials are ``d/d mu = Phi(z_l) - Phi(z_u)`` and
``d/d sigma = phi(z_l) - phi(z_u)`` per box and output, divided by the box term (log space).

**Constraints** ([Gardner2014]_): the acquisition is multiplied by each constraint's probability
of feasibility ``Phi((t - mu_c) / sigma_c)``, in log space ``+ sum_i log Phi(z_i)``. Before any
feasible observation there is no incumbent; the criterion is then the log probability of
feasibility alone (find a feasible point first).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from scipy.special import log_ndtr, logsumexp

from headstart._engine.acquisition import (
    _C1,
    SCREEN_CHUNK,
    Criterion,
    _log1mexp,
    log_ei_and_grad,
    log_h,
)
from headstart._engine.prior_weight import PriorWeight
from headstart._engine.protocols import Posterior, cheapest_search, focus_of

NO_INCUMBENT = -math.inf  # best feasible value before any feasible observation
CHUNK_ELEMENTS = 2_000_000  # point x box x objective terms evaluated at once (memory bound)


def box_term(
    mean: np.ndarray, var: np.ndarray, lower: np.ndarray, upper: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    r"""``log E[(min(Y, u) - l)^+]`` for ``Y ~ N(mean, var)`` and its partials in mean and var.

    Args:
        mean, var: ``m`` (broadcast against the bounds).
        lower, upper: Box bounds, ``lower < upper``; ``upper`` may be ``+inf``.

    Returns:
        ``(log term, d log term / d mean, d log term / d var)``, broadcast shape.
    """
    sigma = np.sqrt(var)
    z_l = (mean - lower) / sigma
    finite_u = np.broadcast_to(np.isfinite(upper), np.broadcast(mean, upper).shape)
    z_u = np.where(finite_u, (mean - np.where(finite_u, upper, 0.0)) / sigma, -np.inf)
    lh_l = log_h(z_l)
    lh_u = np.where(finite_u, log_h(np.where(finite_u, z_u, 0.0)), -np.inf)
    gap = np.minimum(lh_u - lh_l, -1e-300)  # < 0: h increases and upper > lower
    log_g = lh_l + _log1mexp(gap)
    log_term = np.log(sigma) + log_g
    # d term / d mu = Phi(z_l) - Phi(z_u);  d term / d sigma = phi(z_l) - phi(z_u); each divided
    # by the term in log space (the term itself may underflow far below the box)
    safe_u = np.where(finite_u, z_u, 0.0)
    log_pdf_l = -0.5 * z_l * z_l - _C1
    log_pdf_u = np.where(finite_u, -0.5 * safe_u * safe_u - _C1, -np.inf)
    log_cdf_u = np.where(finite_u, log_ndtr(safe_u), -np.inf)
    d_mean = np.exp(log_ndtr(z_l) - log_term) - np.exp(log_cdf_u - log_term)
    d_sigma = np.exp(log_pdf_l - log_term) - np.exp(log_pdf_u - log_term)
    return log_term, d_mean, d_sigma / (2.0 * sigma)


def log_ehvi_and_grad(
    mean: np.ndarray, var: np.ndarray, lower: np.ndarray, upper: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    r"""Log expected hypervolume improvement of independent Gaussian outputs ([Yang2019]_).

    Args:
        mean, var: ``m x k`` posterior means and variances of the ``k`` objectives (maximized).
        lower, upper: ``c x k`` boxes partitioning the non-dominated region (upper may be inf).

    Returns:
        ``(log EHVI m, d/d mean m x k, d/d var m x k)``.

    Example:
        >>> lo, up = np.array([[0.0, 0.0]]), np.array([[np.inf, np.inf]])
        >>> v = log_ehvi_and_grad(np.zeros((1, 2)), np.ones((1, 2)), lo, up)[0]
        >>> round(float(np.exp(v[0])), 4)  # E[Y+]^2 = phi(0)^2
        0.1592
    """
    lt, dm, dv = box_term(mean[:, None, :], var[:, None, :], lower[None], upper[None])
    per_box = lt.sum(axis=2)  # m x c
    value = logsumexp(per_box, axis=1)
    weight = np.exp(per_box - value[:, None])[:, :, None]  # softmax over boxes
    # a box whose weight underflows to 0 may carry an inf partial: it contributes nothing
    d_mean = np.where(weight > 0, dm, 0.0)
    d_var = np.where(weight > 0, dv, 0.0)
    return value, (weight * d_mean).sum(axis=1), (weight * d_var).sum(axis=1)


def log_feasibility_and_grad(
    mean: np.ndarray, var: np.ndarray, threshold: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    r"""``sum_i log Phi((t_i - mu_i) / sigma_i)`` over constraints and its partials ([Gardner2014]_).

    Args:
        mean, var: ``m x r`` posterior of the ``r`` constraint values (feasible: ``<= t``).
        threshold: ``r`` feasibility thresholds in the models' units.

    Returns:
        ``(value m, d/d mean m x r, d/d var m x r)``.
    """
    sigma = np.sqrt(var)
    z = (threshold[None, :] - mean) / sigma
    log_cdf = log_ndtr(z)
    ratio = np.exp(-0.5 * z * z - _C1 - log_cdf)  # phi / Phi, stable far in the tail
    return log_cdf.sum(axis=1), -ratio / sigma, -ratio * z / (2.0 * var)


def pareto_mask(Y: np.ndarray, chunk: int = 256) -> np.ndarray:
    """Which rows of ``Y`` (``n x k``, maximized) no other row dominates (duplicates all kept).

    Two objectives: one sort, ``O(n log n)`` (:func:`_pareto_mask_2d`); more: ``chunk`` rows at a
    time against all, so a large study stays within memory."""
    Y = np.asarray(Y, dtype=np.float64)
    if Y.ndim == 2 and Y.shape[1] == 2:
        return _pareto_mask_2d(Y)
    dominated = np.zeros(len(Y), dtype=bool)
    for i in range(0, len(Y), chunk):
        rows = Y[i : i + chunk, None, :]
        ge = (rows >= Y[None, :, :]).all(axis=2)
        gt = (rows > Y[None, :, :]).any(axis=2)
        dominated |= (ge & gt).any(axis=0)  # row j dominated by some row of this chunk
    return ~dominated


def _pareto_mask_2d(Y: np.ndarray) -> np.ndarray:
    """:func:`pareto_mask` for two objectives by a sweep: sorted by the first objective (then the
    second) descending, a row is dominated iff a row with a strictly larger first value has a
    second value at least as large, or a row with the same first value has a larger second."""
    if not len(Y):
        return np.zeros(0, dtype=bool)
    order = np.lexsort((-Y[:, 1], -Y[:, 0]))
    first, second = Y[order, 0], Y[order, 1]
    starts = np.flatnonzero(np.r_[True, first[1:] != first[:-1]])
    group = np.cumsum(np.r_[True, first[1:] != first[:-1]]) - 1
    top = second[starts]  # each equal-first group's largest second value (its first row)
    above = np.r_[-np.inf, np.maximum.accumulate(top)[:-1]]  # best second of larger firsts
    dominated = (above[group] >= second) | (top[group] > second)
    mask = np.empty(len(Y), dtype=bool)
    mask[order] = ~dominated
    return mask


def infer_reference(front: np.ndarray, k: int) -> np.ndarray:
    """BoTorch's default reference point: the front's nadir minus 10% of its range (maximized,
    models' units); 3 below 0 (standardized outputs) without a front."""
    if not len(front):
        return np.full(k, -3.0)
    nadir, ideal = front.min(axis=0), front.max(axis=0)
    span = np.where(ideal - nadir > 0, ideal - nadir, np.maximum(np.abs(nadir), 1.0))
    return nadir - 0.1 * span


def hypercells(front: np.ndarray, ref: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    r"""Boxes ``(lower c x k, upper c x k)`` that partition the region above ``ref`` that no
    point of ``front`` dominates (maximization; the top boxes reach ``+inf``).

    By slicing along the last objective: with the points sorted by it, ``z_1 >= ... >= z_n``,
    a ``y`` whose last coordinate lies in ``[z_{i+1}, z_i)`` can only be dominated by the points
    ``1..i``, so that slice is the ``(k - 1)``-dimensional region those points leave free, times
    the interval (the top slice ``[z_1, inf)`` is free). In one dimension the free region is
    ``[max, inf)``. ``k = 2`` gives ``n + 1`` boxes; ``k`` objectives at most ``O(n^(k-1))``.

    Example:
        >>> lo, up = hypercells(np.array([[1.0, 0.0], [0.0, 1.0]]), np.array([-1.0, -1.0]))
        >>> np.c_[lo, up].tolist()  # [l1, l2, u1, u2] per box
        [[-1.0, 1.0, inf, inf], [0.0, 0.0, inf, 1.0], [1.0, -1.0, inf, 0.0]]
    """
    ref = np.asarray(ref, dtype=np.float64)
    pts = np.asarray(front, dtype=np.float64).reshape(-1, len(ref))
    pts = pts[(pts > ref).all(axis=1)]  # points not above the reference dominate nothing
    if len(pts):
        pts = np.unique(pts[pareto_mask(pts)], axis=0)
    boxes = _free_boxes(pts, ref)
    lower = np.array([b[0] for b in boxes]).reshape(-1, len(ref))
    upper = np.array([b[1] for b in boxes]).reshape(-1, len(ref))
    # a box narrower than rounding adds no volume, and its log term cannot be told from 0
    scale = np.maximum(np.abs(np.concatenate([pts, ref[None, :]])).max(axis=0), 1.0)
    wide = ((upper - lower) > 1e-12 * scale).all(axis=1)
    return lower[wide], upper[wide]


def _free_boxes(pts: np.ndarray, ref: np.ndarray) -> list[tuple[np.ndarray, np.ndarray]]:
    """:func:`hypercells`' slicing recursion (``pts`` above ``ref``, any dominance allowed)."""
    k = len(ref)
    if k == 1:
        low = pts[:, 0].max() if len(pts) else ref[0]
        return [(np.array([low]), np.array([np.inf]))]
    if not len(pts):
        return [(ref.copy(), np.full(k, np.inf))]
    order = np.argsort(-pts[:, -1], kind="stable")
    pts = pts[order]
    z = pts[:, -1]
    boxes = [(np.r_[ref[:-1], z[0]], np.full(k, np.inf))]  # above every point: free
    for i in range(len(pts)):
        bottom = z[i + 1] if i + 1 < len(pts) else ref[-1]
        if bottom >= z[i]:
            continue  # a tie in the last objective: an empty slice
        for lo, up in _free_boxes(pts[: i + 1, :-1], ref[:-1]):
            boxes.append((np.r_[lo, bottom], np.r_[up, z[i]]))
    return boxes


def to_model_units(y: np.ndarray, y_model: np.ndarray, value: float, beyond: str = "end") -> float:
    """``value`` (in ``y``'s units) in a model's units, given its training targets in both.

    A surrogate maps its targets by a monotone transform (standardization, a power warp); the
    map is read off the pairs ``(y_i, y_model_i)`` by linear interpolation, and beyond them
    continued with the end segment's slope (``beyond="end"``) or the whole range's
    (``"range"``) -- both exact for an affine map (standardization). A constraint's threshold
    ``c <= 0`` so becomes a threshold on its model's posterior. A reference point usually lies
    far beyond the data, where an end segment of a warped map can be nearly vertical (two
    close worst values under a copula): it uses ``"range"``.
    """
    order = np.argsort(y, kind="stable")
    ys, ms = np.asarray(y, dtype=np.float64)[order], np.asarray(y_model, dtype=np.float64)[order]
    ys, first = np.unique(ys, return_index=True)
    ms = ms[first]
    if len(ys) == 1:  # one distinct value: a unit slope through it
        return float(ms[0] + (value - ys[0]))
    whole = (ms[-1] - ms[0]) / (ys[-1] - ys[0])
    if value < ys[0]:
        slope = (ms[1] - ms[0]) / (ys[1] - ys[0]) if beyond == "end" else whole
        return float(ms[0] + (value - ys[0]) * slope)
    if value > ys[-1]:
        slope = (ms[-1] - ms[-2]) / (ys[-1] - ys[-2]) if beyond == "end" else whole
        return float(ms[-1] + (value - ys[-1]) * slope)
    return float(np.interp(value, ys, ms))


class StackedPosterior:
    """Several outputs' posteriors seen by the search as one (lengthscales: their geometric
    mean; the smallest screening budget and number of local searches; the largest duplicate
    separation; each output's ``focus``)."""

    includes_noise = False

    def __init__(self, posteriors: Sequence[Posterior]) -> None:
        self.posteriors = tuple(posteriors)
        self.outputscale = float(np.mean([p.outputscale for p in self.posteriors]))
        ells = [p.lengthscales for p in self.posteriors if p.lengthscales is not None]
        self.lengthscales = np.exp(np.mean(np.log(ells), axis=0)) if ells else None
        cheapest_search(self, self.posteriors)
        seps = [getattr(p, "min_separation", None) for p in self.posteriors]
        if any(s is not None for s in seps):
            self.min_separation = max(s for s in seps if s is not None)

    def focus(self, X: np.ndarray) -> StackedPosterior:
        """Each output's smooth stand-in around the starts ``X`` (``protocols.Posterior``; the
        output itself where it has none), or ``self`` if no output has one."""
        focused = [focus_of(p, X) for p in self.posteriors]
        if all(f is p for f, p in zip(focused, self.posteriors, strict=True)):
            return self
        return StackedPosterior(focused)

    def posterior(self, X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``(m x o means, m x o variances)``, one column per output."""
        both = [p.posterior(X) for p in self.posteriors]
        return np.stack([b[0] for b in both], axis=1), np.stack([b[1] for b in both], axis=1)

    def posterior_and_grad(self, X: np.ndarray):
        """``(m x o, m x o, m x o x d, m x o x d)``."""
        parts = [p.posterior_and_grad(X) for p in self.posteriors]
        return tuple(np.stack([part[i] for part in parts], axis=1) for i in range(4))


class MultiOutputCriterion:
    r"""The maximized criterion over ``k`` objectives and ``r`` constraints (see module docs).

    * ``k = 1``: LogEI above the best *feasible* value, plus the constraints' log feasibility;
    * ``k >= 2``: LogEHVI over the feasible front's boxes, plus the log feasibility;
    * no feasible observation yet: the log feasibility alone;

    then ``+ gamma * log max(pi(x), 1e-12)`` with a piBO belief ([Hvarfner2022]_, Eq. 6, in log
    space, as for LogEI). The interface is :class:`~headstart._engine.acquisition.Criterion`'s
    (``value``, ``value_and_grad``, ``posterior``, ``prior``), so the one search maximizes it.

    Args:
        posterior: Outputs ``0..k-1`` the objectives, ``k..k+r-1`` the constraints.
        k: Number of objectives.
        thresholds: ``r`` feasibility thresholds in the constraint models' units.
        best_f: ``k = 1``: the best feasible value (:data:`NO_INCUMBENT` if none).
        cells: ``k >= 2``: ``(lower, upper)`` boxes (:func:`hypercells`), or ``None`` if nothing
            is feasible yet.
        prior: The piBO factor, or ``None``.
    """

    kind = "logei"

    def __init__(
        self,
        posterior: StackedPosterior,
        k: int,
        thresholds: np.ndarray,
        *,
        best_f: float = NO_INCUMBENT,
        cells: tuple[np.ndarray, np.ndarray] | None = None,
        prior: PriorWeight | None = None,
    ) -> None:
        self.posterior = posterior
        self.k = int(k)
        self.thresholds = np.asarray(thresholds, dtype=np.float64).reshape(-1)
        self.best_f = float(best_f)
        self.cells = cells
        self.prior = prior if (prior is not None and prior.active) else None
        self._prior_terms = Criterion.__new__(Criterion)  # borrow its piBO term and gradient
        self._prior_terms.prior = self.prior

    focused = Criterion.focused  # on each output's focus (StackedPosterior.focus)

    @property
    def feasible_seen(self) -> bool:
        return self.cells is not None if self.k > 1 else self.best_f > NO_INCUMBENT

    def _parts(self, mean: np.ndarray, var: np.ndarray):
        """``(value m, d/d mean m x o, d/d var m x o)`` before the prior."""
        m, o = mean.shape
        d_mean, d_var = np.zeros((m, o)), np.zeros((m, o))
        value = np.zeros(m)
        k = self.k
        if self.feasible_seen:
            if k == 1:
                v, dm, dv = log_ei_and_grad(mean[:, 0], var[:, 0], self.best_f)
                value, d_mean[:, 0], d_var[:, 0] = v, dm, dv
            else:
                v, dm, dv = log_ehvi_and_grad(mean[:, :k], var[:, :k], *self.cells)
                value, d_mean[:, :k], d_var[:, :k] = v, dm, dv
        if o > k:
            v, dm, dv = log_feasibility_and_grad(mean[:, k:], var[:, k:], self.thresholds)
            value = value + v
            d_mean[:, k:], d_var[:, k:] = dm, dv
        return value, d_mean, d_var

    def prior_term(self, X: np.ndarray) -> np.ndarray:
        return self._prior_terms.prior_term(X)

    def value(self, X: np.ndarray, chunk: int | None = None) -> np.ndarray:
        """Criterion at ``X`` (``m x d``): returns ``m`` (in chunks of ``chunk`` rows if given,
        else of at most :data:`~headstart._engine.acquisition.SCREEN_CHUNK` rows and about
        :data:`CHUNK_ELEMENTS` point x box x objective terms)."""
        if chunk is None:
            boxes = 1 if self.cells is None else len(self.cells[0])
            chunk = min(SCREEN_CHUNK, max(1, CHUNK_ELEMENTS // (boxes * max(self.k, 1))))
        out = np.empty(X.shape[0])
        for i in range(0, X.shape[0], chunk):
            mean, var = self.posterior.posterior(X[i : i + chunk])
            out[i : i + chunk] = self._parts(mean, var)[0]
        return out + self.prior_term(X) if self.prior is not None else out

    def value_and_grad(self, X: np.ndarray, cols: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Criterion and its gradient in columns ``cols``: ``m``, ``m x len(cols)``."""
        mean, var, dmean, dvar = self.posterior.posterior_and_grad(X)
        values, d_mean, d_var = self._parts(mean, var)
        grad = (d_mean[:, :, None] * dmean + d_var[:, :, None] * dvar).sum(axis=1)[:, cols]
        if self.prior is None:
            return values, grad
        return values + self.prior_term(X), grad + self._prior_terms._prior_grad(X, cols)


__all__ = [
    "MultiOutputCriterion",
    "StackedPosterior",
    "box_term",
    "hypercells",
    "infer_reference",
    "log_ehvi_and_grad",
    "log_feasibility_and_grad",
    "pareto_mask",
    "to_model_units",
]
