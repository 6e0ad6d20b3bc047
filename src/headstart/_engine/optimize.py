r"""Acquisition search on the mixed unit cube: Sobol screening, multi-start L-BFGS-B, discrete moves.

The search follows the design of Optuna's ``_gp/optim_mixed.py`` (our own implementation):

1. **Screening.** Evaluate the criterion on :data:`N_SOBOL` scrambled Sobol points (or the
   posterior's ``screening_points``; seeded by the caller's ``rng``), snapped to the integer /
   categorical grids, in one batched no-grad call.
   With a piBO prior that can be sampled, a share of these points (default half) are draws from
   the prior instead, so a narrow prior is not missed by uniform screening.
2. **Starts.** The incumbent (best training point), the best Sobol point, and further Sobol points
   drawn by roulette with ``p ∝ exp(f - f_max)`` (for LogEI: proportional to EI), :data:`N_STARTS`
   in all (or the posterior's ``search_starts``).
3. **Local search**, all starts together, a few rounds of
   a. one batched, decoupled L-BFGS-B (:func:`headstart._engine.lbfgsb.batched_lbfgsb`) over the
      *relaxed* columns (continuous ones, and integers with more than :data:`EXHAUSTIVE_MAX`
      values, which are snapped afterwards). It works in preconditioned coordinates
      ``z_j = x_j / ell_j`` (bounds ``[0, 1 / ell_j]``), which equalizes the curvature across
      columns;
   b. a coordinate-wise discrete search: every value of each categorical column and small integer
      column, the :data:`NEIGHBOURS` nearest grid values of each large integer column; a move is
      kept if it improves the criterion.
   Rounds stop when no start improves (at most :data:`MAX_ROUNDS`; one round without discrete
   columns).
4. **Selection.** The best point among local-search results and screened points that does not
   duplicate a training row (re-evaluating a deterministic objective is wasted), falling back to
   the overall best if every candidate is a duplicate. On a plateau the objective is the same
   over a region, so a point *near* an evaluated one repeats it too: two evaluated points with
   exactly the same value show that the objective is flat at least over the distance between
   them, and a candidate closer than that (:func:`tie_radii`, at most :data:`TIE_RADIUS_MAX`)
   to either counts as their duplicate -- the resolution of the objective there, where the
   model expects no gain it can observe (issue 31). When refinement has stalled -- the latest
   :data:`STALL_WINDOW` completed trials all within :data:`STALL_RADIUS` lengthscales of the
   incumbent -- candidates inside that ball are excluded too (:func:`stalled_incumbent`; the
   stall rule, on for GP-BO; issue 30).

Thompson sampling (:func:`thompson_sample`) instead draws one joint posterior sample on a
candidate set (Sobol points plus perturbations of the best training points) and takes its argmax.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np
from scipy.stats import qmc

from headstart._engine.acquisition import Criterion, PriorWeight, log_softplus
from headstart._engine.lbfgsb import batched_lbfgsb
from headstart._engine.numerics import jittered_cholesky_np
from headstart._engine.protocols import Posterior

N_SOBOL = 2048  # screening points (Optuna GPSampler: 2048 preliminary samples)
N_STARTS = 10  # local searches (Optuna GPSampler: 10)
EXHAUSTIVE_MAX = 16  # integer columns with at most this many values are searched exhaustively
NEIGHBOURS = 2  # large integer columns: try this many grid values on each side
MAX_ROUNDS = 3  # alternations of continuous and discrete steps
LBFGSB_MAXITER = 200
LBFGSB_PGTOL = 1e-4  # in preconditioned coordinates; criterion units are nats for LogEI
TS_N_SOBOL = 1024  # Thompson sampling candidates: Sobol points ...
TS_N_LOCAL = 256  # ... plus perturbations of the best training points
TS_N_TOP = 5
TS_PERTURB_SD = 0.05
TIE_RADIUS_MAX = 0.25  # a tie's exclusion ball never exceeds this (unit cube, Euclidean)
STALL_WINDOW = 3  # the stall rule looks at this many latest completed trials ...
STALL_RADIUS = 0.1  # ... all closer than this to the incumbent (in lengthscales): the next leaves


@dataclass(frozen=True)
class MixedSpace:
    r"""Column layout of the encoded space.

    Args:
        grids: One entry per column: ``None`` (continuous) or the sorted valid values.
        is_cat: ``d`` boolean mask of categorical columns.
    """

    grids: tuple[np.ndarray | None, ...]
    is_cat: np.ndarray

    @property
    def dim(self) -> int:
        return len(self.grids)

    @property
    def relaxed_cols(self) -> np.ndarray:
        """Continuous columns and integer columns too large for exhaustive search."""
        return np.array(
            [
                j
                for j, g in enumerate(self.grids)
                if g is None or (not self.is_cat[j] and len(g) > EXHAUSTIVE_MAX)
            ],
            dtype=np.intp,
        )

    @property
    def discrete_cols(self) -> np.ndarray:
        return np.array([j for j, g in enumerate(self.grids) if g is not None], dtype=np.intp)

    def snap(self, X: np.ndarray) -> np.ndarray:
        """Clip to ``[0, 1]`` and move grid columns to their nearest valid value: ``m x d``."""
        X = np.clip(X, 0.0, 1.0)
        for j, g in enumerate(self.grids):
            if g is not None:
                X[:, j] = g[_nearest_index(g, X[:, j])]
        return X

    def moves(self, j: int, current: np.ndarray) -> np.ndarray:
        """Candidate values of grid column ``j`` for each start: ``b x c``."""
        g = self.grids[j]
        if self.is_cat[j] or len(g) <= EXHAUSTIVE_MAX:
            return np.broadcast_to(g, (len(current), len(g)))
        idx = _nearest_index(g, current)[:, None] + np.arange(-NEIGHBOURS, NEIGHBOURS + 1)
        return g[np.clip(idx, 0, len(g) - 1)]


def _nearest_index(grid: np.ndarray, values: np.ndarray) -> np.ndarray:
    if len(grid) == 1:
        return np.zeros(len(values), dtype=np.intp)
    i = np.clip(np.searchsorted(grid, values), 1, len(grid) - 1)
    return np.where(np.abs(values - grid[i - 1]) <= np.abs(grid[i] - values), i - 1, i)


def _sobol(dim: int, n: int, rng: np.random.Generator) -> np.ndarray:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # balance warning when n is not a power of two
        return qmc.Sobol(dim, scramble=True, seed=rng).random(n)


def is_duplicate(X: np.ndarray, train_X: np.ndarray, atol: float = 1e-12) -> np.ndarray:
    """Whether each row of ``X`` (``m x d``) equals a training row: ``m`` booleans."""
    if len(train_X) == 0:
        return np.zeros(len(X), dtype=bool)
    out = np.zeros(len(X), dtype=bool)
    for i in range(0, len(X), 512):
        block = X[i : i + 512]
        out[i : i + 512] = (np.abs(block[:, None, :] - train_X[None]) <= atol).all(-1).any(-1)
    return out


def _pick_starts(values: np.ndarray, n: int, rng: np.random.Generator) -> np.ndarray:
    """The best index plus ``n - 1`` more by roulette, ``p ∝ exp(f - f_max)``, no repeats."""
    best = int(np.argmax(values))
    n = min(n, len(values))
    if n <= 1:
        return np.array([best])
    w = np.exp(values - values[best])
    w[best] = 0.0
    w = np.where(np.isfinite(w), w, 0.0)
    k = min(n - 1, int(np.count_nonzero(w)))
    rest = rng.choice(len(values), size=k, replace=False, p=w / w.sum()) if k else []
    if k < n - 1:  # roulette ran out of mass: fill with random distinct points
        remaining = np.setdiff1d(np.arange(len(values)), np.concatenate([[best], rest]))
        rest = np.concatenate([rest, rng.choice(remaining, size=n - 1 - k, replace=False)])
    return np.concatenate([[best], rest]).astype(np.intp)


def optimize_criterion(
    criterion: Criterion,
    space: MixedSpace,
    train_X: np.ndarray,
    train_y: np.ndarray,
    rng: np.random.Generator,
    lengthscales: np.ndarray,
    candidates: np.ndarray | None = None,
    tie_values: np.ndarray | None = None,
    avoid: np.ndarray | None = None,
    warm_starts: np.ndarray | None = None,
) -> np.ndarray:
    r"""Maximize ``criterion`` over the mixed unit cube (steps 1-4 of the module docstring).

    Args:
        criterion: The maximized criterion.
        space: Column layout.
        train_X: ``n x d`` training inputs (on their grids).
        train_y: ``n`` targets (only the argmax is used: the incumbent start); may be empty.
        rng: Seeds the Sobol screening and the roulette.
        lengthscales: ``d`` fitted lengthscales (preconditioning).
        candidates: ``c x d`` points screened besides the Sobol points (for transfer: the
            sources' best configurations), on their grids; or ``None``.
        tie_values: The observed values of the first ``len(tie_values)`` rows of ``train_X``
            (the completed trials, not fantasies), whose exact ties set exclusion balls
            (:func:`tie_radii`); ``None``: exact duplicates only.
        avoid: A ``d`` point whose ball of :data:`STALL_RADIUS` lengthscales the chosen point
            must leave (the stall rule, :func:`stalled_incumbent`), or ``None``.
        warm_starts: ``w x d`` points the local search starts from as well, in place of as
            many screened starts (at most half of them): with several objectives, Pareto-optimal
            trials besides the incumbent, as Optuna's ``GPSampler`` does. EHVI's gains lie in
            the front's gaps, and where the front is a thin set (ZDT's edge of the cube) no
            screened point is near it. ``None``: none.

    Returns:
        ``d`` point in ``[0, 1]``, grid columns exactly on grid values.
    """
    d = space.dim
    n_screen = getattr(criterion.posterior, "screening_points", N_SOBOL)
    pool = space.snap(screening_points(criterion.prior, d, n_screen, rng))
    if candidates is not None:
        pool = np.concatenate([pool, candidates])
    pool_values = criterion.value(pool)
    n_starts = getattr(criterion.posterior, "search_starts", N_STARTS)
    warm = np.zeros((0, d))
    if warm_starts is not None and len(train_y):  # (no incumbent: no data to start from)
        warm = np.asarray(warm_starts, dtype=np.float64).reshape(-1, d)
        warm = space.snap(warm[: min(n_starts // 2, max(n_starts - 2, 0))].copy())
    starts = pool[_pick_starts(pool_values, n_starts - 1 - len(warm), rng)]
    if len(train_y):
        incumbent = space.snap(train_X[np.argmax(train_y)][None, :].copy())
        X = np.concatenate([incumbent, warm, starts])
    else:  # no data yet (a transfer model's prior): Sobol starts only
        X = starts
    F = criterion.value(X)

    relaxed = space.relaxed_cols
    discrete = space.discrete_cols
    scale = 1.0 / np.maximum(lengthscales[relaxed], 1e-6)  # z = x / ell
    rounds = MAX_ROUNDS if len(discrete) else 1
    search, focused_at = criterion, None
    for _ in range(rounds):
        improved = False
        if len(relaxed):
            # the local search climbs the posterior's smooth stand-in around the starts, if it
            # has one (protocols.Posterior.focus), made again where the starts have moved since
            # (discrete moves); end points are scored with the criterion itself below
            if hasattr(criterion, "focused") and (
                focused_at is None or not np.array_equal(focused_at, X)
            ):
                search, focused_at = criterion.focused(X), X.copy()
            X_new = X.copy()

            def neg_criterion(
                idx: np.ndarray, Z: np.ndarray, climbed: Criterion = search
            ) -> tuple[np.ndarray, np.ndarray]:
                full = X[idx].copy()
                full[:, relaxed] = Z / scale
                f, g = climbed.value_and_grad(full, relaxed)
                return -f, -g / scale

            bounds = np.stack([np.zeros_like(scale), scale], axis=-1)
            Z, _ = batched_lbfgsb(
                neg_criterion,
                X[:, relaxed] * scale,
                bounds,
                maxiter=LBFGSB_MAXITER,
                pgtol=LBFGSB_PGTOL,
            )
            X_new[:, relaxed] = Z / scale
            X_new = space.snap(X_new)
            F_new = criterion.value(X_new)
            better = F_new > F
            X[better], F[better] = X_new[better], F_new[better]
            improved |= bool(better.any()) and len(discrete) > 0
        for j in discrete:
            options = space.moves(j, X[:, j])  # b x c
            b, c = options.shape
            cand = np.repeat(X[:, None, :], c, axis=1)
            cand[:, :, j] = options
            values = criterion.value(cand.reshape(b * c, d)).reshape(b, c)
            best = np.argmax(values, axis=1)
            best_values = values[np.arange(b), best]
            better = best_values > F
            if better.any():
                X[better, j] = options[better, best[better]]
                F[better] = best_values[better]
                improved = True
        if not improved:
            break

    all_X = np.concatenate([X, pool])
    all_F = np.concatenate([F, pool_values])
    radii = None if tie_values is None else tie_radii(train_X[: len(tie_values)], tie_values)
    ball = None if avoid is None else (avoid, lengthscales * STALL_RADIUS)
    return _best_non_duplicate(all_X, all_F, train_X, separation(criterion.posterior), radii, ball)


def stalled_incumbent(
    X: np.ndarray, y: np.ndarray, lengthscales: np.ndarray, window: int = STALL_WINDOW
) -> np.ndarray | None:
    """The incumbent (best row of ``X``; values ``y``, maximized; rows in trial order) when the
    last ``window`` rows all lie within :data:`STALL_RADIUS` lengthscales of it, else ``None``.

    LogEI keeps refining an incumbent while the refinements gain anything at all: on Branin a
    run spent trials 16-40 on one boundary point, each trial gaining ~1e-4, while a global
    minimum lay 0.1 lengthscales away, unseen by the smooth fit. When refinement has stalled
    like this, the next point must leave the incumbent's neighbourhood
    (``optimize_criterion(avoid=...)``); the trial after it refines again, so refinement goes
    on at three trials in four.
    """
    if len(y) <= window:
        return None
    best = X[int(np.argmax(y))]
    scaled = (X[-window:] - best) / np.maximum(lengthscales, 1e-12)
    return best.copy() if bool((np.sqrt((scaled**2).sum(-1)) < STALL_RADIUS).all()) else None


def screening_points(
    prior: PriorWeight | None, d: int, n: int, rng: np.random.Generator
) -> np.ndarray:
    """``n`` Sobol points, a share of them replaced by draws from piBO's ``prior`` (if any)."""
    n_prior = 0
    if prior is not None and prior.sample is not None:
        n_prior = round(n * prior.candidate_share)
    points = _sobol(d, n - n_prior, rng)
    if n_prior:
        draws = np.clip(np.asarray(prior.sample(n_prior, rng), dtype=np.float64), 0.0, 1.0)
        points = np.concatenate([points, draws.reshape(n_prior, d)])
    return points


def separation(posterior: Posterior) -> float:
    """How close to an evaluated point (in every column) a candidate counts as its duplicate:
    the posterior's ``min_separation``, else exact duplicates only (``1e-12``)."""
    return max(float(getattr(posterior, "min_separation", 0.0)), 1e-12)


def tie_radii(X: np.ndarray, y: np.ndarray, cap: float | None = None) -> np.ndarray:
    """Per evaluated point (``n x d``, values ``n``), the distance to its nearest other evaluated
    point of exactly the same value, at most ``cap`` (default :data:`TIE_RADIUS_MAX`; 0 turns
    the rule off); 0 where no other point ties with it.

    A tie at distance ``r`` is evidence that the objective is flat over ``r`` there (a plateau,
    or a pool or table scored at its nearest entry)."""
    cap = TIE_RADIUS_MAX if cap is None else cap
    n = len(y)
    radii = np.zeros(n)
    if n < 2 or cap <= 0:
        return radii
    same = (y[:, None] == y[None, :]) & ~np.eye(n, dtype=bool)
    if not same.any():
        return radii
    dist = np.sqrt(((X[:, None, :] - X[None, :, :]) ** 2).sum(-1))
    nearest = np.where(same, dist, np.inf).min(1)
    tied = np.isfinite(nearest)
    radii[tied] = np.minimum(nearest[tied], cap)
    return radii


def within_radii(X: np.ndarray, centres: np.ndarray, radii: np.ndarray) -> np.ndarray:
    """Whether each row of ``X`` lies strictly inside a ball ``(centres[i], radii[i])``."""
    keep = radii > 0
    if not keep.any():
        return np.zeros(len(X), dtype=bool)
    C, r = centres[keep], radii[keep]
    return (((X[:, None, :] - C[None]) ** 2).sum(-1) < r * r).any(-1)


def _best_non_duplicate(
    X: np.ndarray,
    values: np.ndarray,
    train_X: np.ndarray,
    atol: float = 1e-12,
    radii: np.ndarray | None = None,
    ball: tuple[np.ndarray, np.ndarray] | None = None,
) -> np.ndarray:
    """The best row of ``X`` that duplicates no training row, lies in no tie ball (``radii``)
    and outside ``ball = (centre, per-column radii)`` (an ellipsoid); else the best row."""
    order = np.argsort(-np.where(np.isnan(values), -np.inf, values), kind="stable")
    start, size = 0, 8  # the best few first: usually one of them is fresh (n x d work per row)
    while start < len(order):
        block = order[start : start + size]
        start, size = start + size, min(2 * size, 256)
        dup = is_duplicate(X[block], train_X, atol)
        if radii is not None:
            dup |= within_radii(X[block], train_X[: len(radii)], radii)
        if ball is not None:  # the ellipsoid is the unit ball in coordinates scaled by its axes
            centre, axes = ball
            axes = np.maximum(axes, 1e-12)
            dup |= within_radii(X[block] / axes, (centre / axes)[None, :], np.ones(1))
        if not dup.all():
            return X[block[int(np.argmin(dup))]].copy()
    return X[order[0]].copy()


def thompson_sample(
    posterior: Posterior,
    space: MixedSpace,
    train_X: np.ndarray,
    train_y: np.ndarray,
    rng: np.random.Generator,
    criterion: Criterion | None = None,
    tie_values: np.ndarray | None = None,
) -> np.ndarray:
    r"""Argmax of one joint posterior sample ``f ~ p(f(C) | data)`` on a candidate set ``C``.

    ``C`` is :data:`TS_N_SOBOL` Sobol points plus :data:`TS_N_LOCAL` Gaussian perturbations (sd
    :data:`TS_PERTURB_SD`; each grid column re-drawn with probability ``1/d``) of the
    :data:`TS_N_TOP` best training points, all snapped to the grids, minus training duplicates.
    With a prior, the sample is scored as ``log softplus(f - best_f) + gamma log pi``.

    Args:
        posterior: The model's posterior (units of ``train_y``).
        space: Column layout.
        train_X: ``n x d``; train_y: ``n`` (standardized).
        rng: Seeds the candidates and the sample.
        criterion: Supplies ``best_f`` and the prior term when a prior is active.
        tie_values: As in :func:`optimize_criterion`: the completed trials' values, whose
            exact ties drop the candidates inside their balls (:func:`tie_radii`) unless no
            candidate is left; ``None``: exact duplicates only.

    Returns:
        ``d`` point.
    """
    d = space.dim
    top = train_X[np.argsort(-train_y)[:TS_N_TOP]]
    local = np.repeat(top, -(-TS_N_LOCAL // len(top)), axis=0)[:TS_N_LOCAL]
    local = local + TS_PERTURB_SD * rng.standard_normal(local.shape)
    for j in space.discrete_cols:
        redraw = rng.random(len(local)) < 1.0 / d
        local[redraw, j] = rng.choice(space.grids[j], size=int(redraw.sum()))
    prior = None if criterion is None else criterion.prior
    screen = screening_points(prior, d, TS_N_SOBOL, rng)  # with piBO, part are prior draws
    cand = space.snap(np.concatenate([screen, local]))
    cand = np.unique(cand, axis=0)
    fresh = ~is_duplicate(cand, train_X, separation(posterior))
    if tie_values is not None:
        done = train_X[: len(tie_values)]  # the completed trials (the rest are fantasies)
        fresh &= ~within_radii(cand, done, tie_radii(done, tie_values))
    if fresh.any():
        cand = cand[fresh]
    mean, cov = posterior.joint_posterior(cand)
    L = jittered_cholesky_np(cov, posterior.outputscale)
    sample = mean + L @ rng.standard_normal(len(cand))
    if criterion is not None and criterion.prior is not None:
        score = log_softplus(sample - criterion.best_f)[0] + criterion.prior_term(cand)
    else:
        score = sample
    return cand[int(np.argmax(score))].copy()
