r"""The model-selection oracle: Laplace-approximated log evidence per data point (or BIC).

BOSOT's criterion (Sec. 2 and App. A.3) for a kernel ``k`` on data ``(X, y)`` with ``N`` rows:

    g(k | D) = log p(y | X, k) / N,
    log p(y | X, k) ~ log p(y | X, k, g^) + log p(g^) - 1/2 log det(-H) + d/2 log(2 pi),

where ``g`` stacks all ``d`` hyperparameters (the kernel's and the noise variance) in the
unconstrained space ``g = softplus^-1(theta)`` (so ``log p(g)`` includes the log-Jacobian
``sum log sigmoid(g)``), ``g^`` is the MAP estimate found by L-BFGS-B from ``restarts`` starts
(the first at the initial values, the others with the unconstrained values scaled by
``U(0.5, 1.5)`` factors), and ``H`` is the Hessian of the log posterior at ``g^``, by autodiff.

Unlike the reference code, which ignores the sign of ``det(-H)``, a Hessian that is not negative
definite (a saddle or a flat direction) is guarded: the next-best restart with a valid Hessian is
used, and if none has one, the eigenvalues of ``-H`` are clipped at ``1e-8`` and the result is
flagged ``hessian_clipped``.

``criterion="bic"`` scores ``(log p(y | X, k, theta_MAP) - d/2 log N) / N`` instead (the BIC
approximation on the same per-point scale), the guard against over-fitting the paper suggests in
App. E.

The oracle is a deterministic function of the expression: the restarts' random factors are seeded
from a stable hash of ``str(tree)``, so results can be cached and shared between searches.
"""

from __future__ import annotations

import hashlib
import math
import time
from collections.abc import MutableMapping, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict, dataclass

import numpy as np
import torch
import torch.nn.functional as F

from headstart._engine.threads import limit_threads
from headstart._gp.fit import minimize
from headstart._gp.fit_settings import Limits
from headstart.exceptions import InvalidSettingError
from headstart.kernels.covariance import (
    NOISE_FLOOR,
    initial_values,
    leaf_offsets,
    log_prior,
    n_params,
    noisy_covariance,
)
from headstart.kernels.covariance import param_names as kernel_param_names
from headstart.kernels.grammar import Tree, parse

CRITERIA = ("laplace", "bic")
RAW_BOUNDS = (-12.0, 10.0)
HESSIAN_FLOOR = 1e-8


@dataclass(frozen=True)
class OracleResult:
    """One scored kernel.

    Attributes:
        expression: ``str(tree)``.
        score: The maximised criterion (log evidence / N or BIC / N); ``-inf`` if every fit
            failed.
        log_evidence: Laplace log evidence (not divided by N).
        log_likelihood: ``log p(y | X, k, theta_MAP)``.
        values: MAP hyperparameters in :func:`~headstart.kernels.covariance.param_names` order,
            then the noise variance.
        seconds: Wall time of this oracle call.
        hessian_clipped: The Laplace step needed the eigenvalue guard.
        criterion: ``"laplace"`` or ``"bic"``.
    """

    expression: str
    score: float
    log_evidence: float
    log_likelihood: float
    values: tuple[float, ...]
    seconds: float
    hessian_clipped: bool = False
    criterion: str = "laplace"

    @property
    def tree(self) -> Tree:
        return parse(self.expression)

    @property
    def failed(self) -> bool:
        return not math.isfinite(self.score)

    @property
    def noise(self) -> float:
        """The MAP noise variance (standardised units, floor included)."""
        return self.values[-1] + NOISE_FLOOR

    def hyperparameters(self) -> dict[str, float]:
        """``{"SE[0].lengthscale": ..., ..., "noise": ...}`` at the MAP (scaled data units)."""
        names = [*kernel_param_names(self.tree), "noise"]
        return dict(zip(names, [*self.values[:-1], self.noise], strict=True))

    def to_json(self) -> dict:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict) -> OracleResult:
        return cls(**{**data, "values": tuple(data["values"])})


def _stable_seed(text: str, seed: int) -> int:
    digest = hashlib.sha256(f"{seed}:{text}".encode()).digest()
    return int.from_bytes(digest[:8], "little")


def inv_softplus(v: torch.Tensor) -> torch.Tensor:
    return v + torch.log(-torch.expm1(-v))


def log_posterior(
    tree: Tree, raw: torch.Tensor, X: torch.Tensor, y: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(log p(raw | D) + const, log p(y | X, theta))`` in the unconstrained space.

    ``raw`` is ``... x d``; both outputs are ``...``. Entries whose covariance has no Cholesky
    factor come back as ``nan``.
    """
    values = F.softplus(raw)
    n = len(y)
    eye = torch.eye(n, dtype=raw.dtype)
    K = noisy_covariance(tree, values, X)
    L, info = torch.linalg.cholesky_ex(K)
    bad = info != 0
    if bool(bad.any()):  # refactor a harmless matrix so that the other rows keep clean gradients
        L, _ = torch.linalg.cholesky_ex(torch.where(bad[..., None, None], eye, K))
    yb = y.expand(*L.shape[:-2], n)[..., None]
    a = torch.linalg.solve_triangular(L, yb, upper=False)[..., 0]
    loglik = (
        -0.5 * (a * a).sum(-1)
        - torch.log(torch.diagonal(L, dim1=-2, dim2=-1)).sum(-1)
        - 0.5 * n * math.log(2 * math.pi)
    )
    loglik = torch.where(bad, torch.nan, loglik)
    logpost = loglik + log_prior(tree, values) + F.logsigmoid(raw).sum(-1)
    return logpost, loglik


def period_floor(X: np.ndarray) -> np.ndarray:
    """Per input, twice the median gap between its sorted distinct values (the Nyquist period).

    A PER kernel with a shorter period aliases on (nearly) gridded inputs: any period
    ``spacing / k`` interpolates the samples and can beat every honest kernel on evidence, the
    paper's priors notwithstanding (a period of 2e-5 fits monthly data "perfectly"). Periods are
    therefore bounded below by this floor; a deviation from the paper, which has no bound.
    """
    floors = np.full(X.shape[1], 1e-6)
    for j in range(X.shape[1]):
        gaps = np.diff(np.unique(X[:, j]))
        if len(gaps):
            floors[j] = max(2.0 * float(np.median(gaps)), 1e-6)
    return floors


def dominant_period(x: np.ndarray, y: np.ndarray, floor: float) -> float:
    """The period with the most power in the Lomb-Scargle periodogram of ``y`` against ``x``.

    A quadratic trend in ``x`` is removed first (else the trend dominates), and periods are
    searched on a log grid between ``floor`` and half the input range (0.5 on scaled data).
    """
    import scipy.signal

    resid = y - np.polyval(np.polyfit(x, y, 2), x) if len(np.unique(x)) > 3 else y - y.mean()
    periods = np.geomspace(min(max(floor, 1e-4), 0.25), 0.5, 400)
    power = scipy.signal.lombscargle(x, resid, 2 * np.pi / periods)
    return float(periods[int(np.argmax(power))])


def period_starts(tree: Tree, X: np.ndarray, y: np.ndarray, restarts: int, rng):
    """Start values of the PER periods for restarts ``1 .. restarts - 1``, or ``None``.

    The likelihood is very multimodal in the period, and from the paper's start of 1.0 (the whole
    input range) L-BFGS-B does not reach a seasonal period such as Mauna Loa's one year (0.023
    of the range). Restart 1 starts every PER leaf at its input's dominant periodogram period
    (:func:`dominant_period`); later restarts draw periods log-uniformly between the Nyquist floor
    (:func:`period_floor`) and 1. A deviation from the paper, which uses 1.0 with random scaling.

    Returns:
        ``(indices of the period parameters, (restarts - 1) x len(indices) periods)``.
    """
    if restarts < 2:
        return None
    per = [(start + 2, leaf.dim) for leaf, start in leaf_offsets(tree) if leaf.kind == "PER"]
    if not per:
        return None
    floors = period_floor(X)
    index, dims = zip(*per, strict=True)
    rows = np.empty((restarts - 1, len(index)))
    for k, dim in enumerate(dims):
        low = np.log(max(floors[dim], 1e-4))
        rows[:, k] = np.exp(rng.uniform(low, 0.0, size=restarts - 1))
        rows[0, k] = dominant_period(X[:, dim], y, floors[dim])
    return np.array(index), rows


def raw_bounds(tree: Tree, X: np.ndarray) -> np.ndarray:
    """``d x 2`` bounds of the unconstrained parameters; periods start at :func:`period_floor`."""
    bounds = np.array([RAW_BOUNDS] * n_params(tree), dtype=np.float64)
    floors = period_floor(X)
    for leaf, start in leaf_offsets(tree):
        if leaf.kind == "PER":
            low = float(inv_softplus(torch.tensor(floors[leaf.dim], dtype=torch.float64)))
            bounds[start + 2, 0] = max(bounds[start + 2, 0], low)
    return bounds


def fit_map(
    tree: Tree,
    X: torch.Tensor,
    y: torch.Tensor,
    *,
    restarts: int,
    rng: np.random.Generator,
    maxiter: int = 200,
    start: np.ndarray | None = None,
) -> list[tuple[float, np.ndarray]]:
    """MAP fits from ``restarts`` starts: ``[(log posterior, raw)]``, best first (failed dropped).

    The starts run as decoupled L-BFGS-B instances whose evaluations are batched into one
    batched Cholesky (the GP core's :func:`headstart._gp.fit.minimize`). Start 0 is the paper's
    (every value 1.0, noise 1e-4); the others scale the unconstrained values by ``U(0.5, 1.5)``
    factors, and set PER periods as in :func:`period_starts`. ``start`` (positive values, noise
    last) adds one more start, e.g. known generating hyperparameters.
    """
    raw0 = inv_softplus(initial_values(tree)).numpy()
    starts = np.stack(
        [raw0 if r == 0 else raw0 * rng.uniform(0.5, 1.5, size=raw0.shape) for r in range(restarts)]
    )
    if start is not None:
        given = inv_softplus(torch.as_tensor(np.asarray(start, dtype=np.float64))).numpy()
        starts = np.vstack([starts, given[None]])
    period_rows = period_starts(tree, X.numpy(), y.numpy(), restarts, rng)
    if period_rows is not None:
        index, periods = period_rows
        starts[1:restarts, index] = inv_softplus(torch.from_numpy(periods)).numpy()

    n = len(y)
    eye = torch.eye(n, dtype=torch.float64)

    def fun(_: np.ndarray, raw_np: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        # d log N(y; 0, K) / d theta = 1/2 tr((a a^T - K^-1) dK/dtheta)   (R&W Eq. 5.9): the
        # Cholesky is not differentiated; autodiff only runs through the elementwise K(theta).
        raw = torch.from_numpy(raw_np).requires_grad_(True)
        values = F.softplus(raw)
        K = noisy_covariance(tree, values, X)
        with torch.no_grad():
            L, info = torch.linalg.cholesky_ex(K)
            bad = (info != 0).numpy()
            L = torch.where(torch.from_numpy(bad)[:, None, None], eye, L)
            a = torch.cholesky_solve(y.expand(len(raw_np), n)[..., None], L)[..., 0]
            W = a[:, :, None] * a[:, None, :] - torch.cholesky_inverse(L)
            loglik = (
                -0.5 * (a * y).sum(-1)
                - torch.log(torch.diagonal(L, dim1=-2, dim2=-1)).sum(-1)
                - 0.5 * n * math.log(2 * math.pi)
            )
        surrogate = (
            0.5 * (W * K).sum() + (log_prior(tree, values) + F.logsigmoid(raw).sum(-1)).sum()
        )
        (grad,) = torch.autograd.grad(surrogate, raw)
        value = (
            loglik + log_prior(tree, values.detach()) + F.logsigmoid(raw.detach()).sum(-1)
        ).numpy()
        grad = grad.numpy()
        bad |= ~np.isfinite(value) | ~np.isfinite(grad).all(axis=1)
        return np.where(bad, 1e25, -value), np.where(bad[:, None], 0.0, -grad)

    bounds = raw_bounds(tree, X.numpy())
    x, f = minimize(fun, starts, bounds, limits=Limits(maxiter=maxiter), penalize_failures=False)
    fits = [(-float(fi), xi) for fi, xi in zip(f, x, strict=True) if np.isfinite(fi) and fi < 1e24]
    fits.sort(key=lambda fit: -fit[0])
    return fits


def laplace_log_det(tree: Tree, raw: np.ndarray, X: torch.Tensor, y: torch.Tensor):
    """``(log det(-H), clipped)`` with ``H`` the Hessian of the log posterior at ``raw``."""

    def f(r: torch.Tensor) -> torch.Tensor:
        return log_posterior(tree, r, X, y)[0]

    if not np.isfinite(float(f(torch.from_numpy(raw)))):
        return math.nan, True

    H = torch.autograd.functional.hessian(f, torch.from_numpy(raw))
    return _guarded_log_det(-H)


def _guarded_log_det(A: torch.Tensor) -> tuple[float, bool]:
    """``(log det A, clipped)``; eigenvalues of ``A`` below ``1e-8`` are clipped and flagged."""
    eig = torch.linalg.eigvalsh(0.5 * (A + A.T))
    if bool((eig > HESSIAN_FLOOR).all()):
        return float(torch.log(eig).sum()), False
    return float(torch.log(torch.clamp(eig, min=HESSIAN_FLOOR)).sum()), True


def evaluate(
    tree: Tree | str,
    X: np.ndarray,
    y: np.ndarray,
    *,
    criterion: str = "laplace",
    restarts: int = 10,
    seed: int = 0,
    initial: np.ndarray | None = None,
) -> OracleResult:
    """Score one kernel on ``(X, y)`` (``X`` scaled to ``[0, 1]``, ``y`` standardised).

    ``initial`` (positive hyperparameters, noise variance last) is tried besides the ``restarts``
    starts; the benchmarks use it to score a generating kernel from its true hyperparameters.
    """
    if criterion not in CRITERIA:
        raise InvalidSettingError(f"criterion must be one of {CRITERIA}; got {criterion!r}.")
    tree = parse(tree) if isinstance(tree, str) else tree
    start = time.perf_counter()
    Xt = torch.as_tensor(np.asarray(X, dtype=np.float64))
    yt = torch.as_tensor(np.asarray(y, dtype=np.float64))
    n = len(yt)
    rng = np.random.default_rng(_stable_seed(str(tree), seed))
    with limit_threads():  # many small factorisations: one thread is fastest (see _gp.threads)
        fits = fit_map(tree, Xt, yt, restarts=max(1, restarts), rng=rng, start=initial)
        if not fits:
            return OracleResult(str(tree), -math.inf, -math.inf, -math.inf, (), _since(start))
        best = None
        for logpost, raw in fits[:3]:
            logdet, clipped = laplace_log_det(tree, raw, Xt, yt)
            if best is None or not clipped:
                best = (logpost, raw, logdet, clipped)
            if not clipped:
                break
        logpost, raw, logdet, clipped = best
        with torch.no_grad():
            _, loglik = log_posterior(tree, torch.from_numpy(raw), Xt, yt)
    d = len(raw)
    log_evidence = logpost - 0.5 * logdet + 0.5 * d * math.log(2 * math.pi)
    loglik = float(loglik)
    score = log_evidence / n if criterion == "laplace" else (loglik - 0.5 * d * math.log(n)) / n
    values = tuple(F.softplus(torch.from_numpy(raw)).tolist())
    return OracleResult(
        str(tree), score, log_evidence, loglik, values, _since(start), clipped, criterion
    )


def _since(start: float) -> float:
    return time.perf_counter() - start


def _init_worker() -> None:
    torch.set_num_threads(1)


class Oracle:
    """Scores kernels on one data set, caching by expression and fanning out over processes.

    Args:
        X: ``N x D`` inputs scaled to ``[0, 1]``.
        y: ``N`` standardised targets.
        criterion: ``"laplace"`` (default) or ``"bic"``.
        restarts: MAP restarts per call (paper: 10).
        seed: Seeds the restarts (together with the expression).
        workers: Processes for :meth:`evaluate_many`; 1 evaluates in this process.
        cache: Optional mapping ``str(tree) -> OracleResult`` shared with other searches.
    """

    def __init__(
        self,
        X: np.ndarray,
        y: np.ndarray,
        *,
        criterion: str = "laplace",
        restarts: int = 10,
        seed: int = 0,
        workers: int = 1,
        cache: MutableMapping[str, OracleResult] | None = None,
    ) -> None:
        if criterion not in CRITERIA:
            raise InvalidSettingError(f"criterion must be one of {CRITERIA}; got {criterion!r}.")
        if int(restarts) < 1 or int(workers) < 1:
            raise InvalidSettingError(
                f"restarts and workers must be at least 1; got {restarts} and {workers}."
            )
        self.X = np.asarray(X, dtype=np.float64)
        self.y = np.asarray(y, dtype=np.float64)
        self.criterion, self.restarts, self.seed = criterion, int(restarts), int(seed)
        self.workers = int(workers)
        self.cache: MutableMapping[str, OracleResult] = {} if cache is None else cache
        self._pool: ProcessPoolExecutor | None = None

    def __call__(self, tree: Tree) -> OracleResult:
        return self.evaluate_many([tree])[0]

    def evaluate_many(self, trees: Sequence[Tree]) -> list[OracleResult]:
        """Scores of ``trees`` in order; uncached ones run on ``workers`` processes."""
        todo = list(dict.fromkeys(str(t) for t in trees if str(t) not in self.cache))
        kwargs = {"criterion": self.criterion, "restarts": self.restarts, "seed": self.seed}
        if self.workers == 1 or len(todo) <= 1:
            for text in todo:
                self.cache[text] = evaluate(text, self.X, self.y, **kwargs)
        else:
            if self._pool is None:
                import multiprocessing

                self._pool = ProcessPoolExecutor(
                    self.workers,
                    mp_context=multiprocessing.get_context("spawn"),
                    initializer=_init_worker,
                )
            futures = {t: self._pool.submit(evaluate, t, self.X, self.y, **kwargs) for t in todo}
            for text, future in futures.items():
                self.cache[text] = future.result()
        return [self.cache[str(t)] for t in trees]

    def close(self) -> None:
        """Shut the worker processes down (they are started on first parallel use)."""
        if self._pool is not None:
            self._pool.shutdown()
            self._pool = None

    def __enter__(self) -> Oracle:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


__all__ = ["CRITERIA", "Oracle", "OracleResult", "evaluate", "fit_map", "log_posterior"]
