r"""Conformance suite for :class:`~headstart._engine.protocols.Surrogate` implementations.

Every check is a plain function taking a :class:`SurrogateCase`: a *surrogate factory* (a
zero-argument callable returning a fresh, unfitted surrogate) and training data; it conditions fresh surrogates as it needs, and
raises :class:`AssertionError` with the offending numbers when the contract of
:mod:`headstart._engine.protocols` is broken. :func:`check_all` runs them all.

Example:
    >>> import numpy as np
    >>> from headstart._gp import MaternGP
    >>> rng = np.random.default_rng(0)
    >>> X = rng.random((8, 2))
    >>> y = np.sin(5 * X[:, 0]) + X[:, 1]
    >>> check_all(SurrogateCase(lambda: MaternGP(np.zeros(2, dtype=bool)), X, y))

Tolerances (all arrays float64) are module constants, chosen so that rounding in float64 passes
and a wrong formula does not:

* gradients: central differences with step :data:`GRAD_STEP` = 1e-6 have a rounding error of
  about ``eps * sum_i |k_i alpha_i| / h`` (up to a few 1e-6 for a nearly interpolating GP); an
  element passes when ``|g - fd| <= GRAD_ATOL * max(1, max |fd|) + GRAD_RTOL * |fd|``;
* joint versus marginal posterior: :data:`JOINT_RTOL` = 1e-8 relative, plus
  :data:`VAR_FLOOR` (the ``1e-12`` clamp of the protocol) times the variance scale.
"""

from __future__ import annotations

import json
import math
import warnings
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from headstart._engine.protocols import Posterior, Surrogate
from headstart.exceptions import HeadstartError

SurrogateFactory = Callable[[], Surrogate]
"""A zero-argument callable returning a fresh, unfitted surrogate."""


@dataclass(frozen=True)
class SurrogateCase:
    r"""A surrogate factory and the data every check conditions it on.

    Args:
        factory: Returns a fresh, unfitted surrogate.
        train_X: ``n x d`` inputs in ``[0, 1]``.
        train_y: ``n`` finite targets (maximized).
        is_cat: ``d`` mask of categorical columns (``None``: all numeric).
        seed: Seeds the ``rng`` passed to ``condition`` and the query points.
    """

    factory: SurrogateFactory
    train_X: np.ndarray
    train_y: np.ndarray
    is_cat: np.ndarray | None = None
    seed: int = 0

    def unpack(self) -> tuple[SurrogateFactory, np.ndarray, np.ndarray, np.ndarray | None, int]:
        """``(factory, train_X, train_y, is_cat, seed)``, for checks that use all five."""
        return self.factory, self.train_X, self.train_y, self.is_cat, self.seed


VAR_FLOOR = 1e-12  # posterior variances are clamped here (protocols.Posterior.posterior)
GRAD_STEP = 1e-6  # central finite-difference step
GRAD_RTOL = 1e-4
GRAD_ATOL = 1e-6  # relative to max(1, largest |gradient| of the batch)
JOINT_RTOL = 1e-8  # joint vs marginal mean and variance, symmetry of the covariance
PSD_TOL = 1e-8  # smallest eigenvalue >= -PSD_TOL * scale
MIN_DISTANCE = 0.05  # gradient points keep this Euclidean distance from training points
SHAPE_SIZES = (1, 7)


# --- helpers ------------------------------------------------------------------------------------
OUTPUTSCALE_SLACK = 2.0  # posterior variance <= this x outputscale (ScaML-GP once reached 91x)


def _is_cat(is_cat: np.ndarray | None, d: int) -> np.ndarray:
    return np.zeros(d, dtype=bool) if is_cat is None else np.asarray(is_cat, dtype=bool)


def sample_points(
    train_X: np.ndarray,
    m: int,
    rng: np.random.Generator,
    *,
    is_cat: np.ndarray | None = None,
    min_distance: float = 0.0,
    margin: float = 0.05,
) -> np.ndarray:
    r"""``m`` query points: continuous columns uniform in ``[margin, 1 - margin]``, categorical
    columns drawn from the values the training data take.

    Args:
        train_X: ``n x d`` training inputs (``n`` may be 0; categorical columns then draw from
            ``{0, 1}``).
        m: Number of points.
        rng: Random source.
        is_cat: ``d`` mask of categorical columns (``None``: all continuous).
        min_distance: Keep at least this Euclidean distance, over the continuous columns, from
            every training point (rejection sampling).
        margin: Distance of the continuous coordinates from the cube's faces (so that finite
            differences stay inside it).

    Returns:
        ``m x d`` points.
    """
    train_X = np.asarray(train_X, dtype=np.float64)
    d = train_X.shape[1]
    cat = _is_cat(is_cat, d)
    out = np.empty((0, d))
    for _ in range(1000):
        X = rng.uniform(margin, 1.0 - margin, (4 * m, d))
        for j in np.flatnonzero(cat):
            levels = np.unique(train_X[:, j]) if len(train_X) else np.array([0.0, 1.0])
            X[:, j] = rng.choice(levels, len(X))
        if min_distance > 0.0 and len(train_X):
            diff = X[:, None, ~cat] - train_X[None, :, ~cat]
            X = X[np.sqrt((diff * diff).sum(-1)).min(1) >= min_distance]
        out = np.vstack([out, X])
        if len(out) >= m:
            return out[:m]
    raise AssertionError(f"Could not draw {m} points {min_distance} away from the training data.")


def _condition(
    surrogate: Surrogate, train_X: np.ndarray, train_y: np.ndarray, seed: int
) -> tuple[Posterior, np.ndarray]:
    return surrogate.condition(
        np.asarray(train_X, dtype=np.float64),
        np.asarray(train_y, dtype=np.float64),
        np.random.default_rng(seed),
    )


def _variance_scale(posterior: Posterior, *variances: np.ndarray) -> float:
    """``max(outputscale, largest variance seen)``: the scale absolute tolerances refer to."""
    seen = [float(np.max(v)) for v in variances if np.size(v)]
    return max(float(posterior.outputscale), *seen, VAR_FLOOR)


def _assert_finite(label: str, **arrays: np.ndarray) -> None:
    for name, a in arrays.items():
        a = np.asarray(a, dtype=np.float64)
        bad = ~np.isfinite(a)
        if bad.any():
            raise AssertionError(
                f"{label}: {name} has {int(bad.sum())} non-finite value(s) of {a.size}: "
                f"{a.ravel()[bad.ravel()][:5].tolist()}."
            )


def _assert_posterior_finite(label: str, posterior: Posterior, X: np.ndarray) -> None:
    """Every output of the posterior at ``X`` is finite and variances are ``>= VAR_FLOOR``."""
    names = ("mean", "var", "grad_mean", "grad_var", "dmean", "dvar", "joint_mean", "cov")
    outputs = (*posterior.posterior(X), *posterior.posterior_and_grad(X))
    outputs += posterior.joint_posterior(X)
    _assert_finite(label, **dict(zip(names, outputs, strict=True)))
    var, var_g = outputs[1], outputs[3]
    for name, v in (("posterior var", var), ("posterior_and_grad var", var_g)):
        if np.min(v) < VAR_FLOOR:
            raise AssertionError(f"{label}: {name} {np.min(v):.3e} is below the {VAR_FLOOR} clamp.")


def _json_default(obj: Any) -> Any:
    """``json.dumps`` converter for numpy arrays and scalars (as a report writer would use)."""
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    if isinstance(obj, np.generic):
        return obj.item()
    raise TypeError(f"{type(obj).__name__} is not JSON serializable")


def _assert_json_close(a: Any, b: Any, path: str = "state", rtol: float = 1e-6) -> None:
    """Nested JSON values equal, numbers to ``rtol`` (log/exp round trips of stored parameters)."""
    if isinstance(a, dict) and isinstance(b, dict):
        if set(a) != set(b):
            raise AssertionError(f"{path}: keys {sorted(a)} != {sorted(b)}.")
        for k in a:
            _assert_json_close(a[k], b[k], f"{path}[{k!r}]", rtol)
    elif isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            raise AssertionError(f"{path}: lengths {len(a)} != {len(b)}.")
        for i, (u, v) in enumerate(zip(a, b, strict=True)):
            _assert_json_close(u, v, f"{path}[{i}]", rtol)
    elif (
        isinstance(a, int | float)
        and isinstance(b, int | float)
        and not isinstance(a, bool)
        and not isinstance(b, bool)
    ):
        if not math.isclose(a, b, rel_tol=rtol, abs_tol=rtol * 1e-6):
            raise AssertionError(f"{path}: {a!r} != {b!r}.")
    elif a != b:
        raise AssertionError(f"{path}: {a!r} != {b!r}.")


# --- (a) condition ------------------------------------------------------------------------------
def check_condition(case: SurrogateCase) -> tuple[Posterior, np.ndarray]:
    r"""``condition`` returns a :class:`Posterior` and ``n`` finite training targets.

    Checks that the surrogate satisfies the :class:`Surrogate` protocol (``informative_prior``
    is a bool), that the posterior satisfies :class:`Posterior` with a finite positive
    ``outputscale``, ``lengthscales`` either ``None`` or ``d`` finite positive numbers and a
    bool ``includes_noise``, and that ``y_model`` is a finite float array of shape ``(n,)``.

    Args:
        factory: Returns a fresh surrogate.
        train_X: ``n x d`` inputs in ``[0, 1]``.
        train_y: ``n`` finite targets (maximized).
        seed: Seeds the ``rng`` passed to ``condition``.

    Returns:
        ``(posterior, y_model)`` for further checks.
    """
    factory, train_X, train_y, seed = case.factory, case.train_X, case.train_y, case.seed
    surrogate = factory()
    assert isinstance(surrogate, Surrogate), f"{type(surrogate).__name__} is not a Surrogate."
    assert isinstance(surrogate.informative_prior, bool), "informative_prior must be a bool."
    n, d = np.shape(train_X)
    posterior, y_model = _condition(surrogate, train_X, train_y, seed)
    name = type(posterior).__name__
    assert isinstance(posterior, Posterior), f"{name} does not satisfy the Posterior protocol."
    scale = posterior.outputscale
    assert isinstance(scale, float | np.floating), f"{name}.outputscale is a {type(scale)}."
    assert math.isfinite(scale) and scale > 0, f"{name}.outputscale = {scale!r}."
    assert isinstance(posterior.includes_noise, bool), f"{name}.includes_noise is not a bool."
    if posterior.lengthscales is not None:
        ell = np.asarray(posterior.lengthscales, dtype=np.float64)
        assert ell.shape == (d,), f"{name}.lengthscales has shape {ell.shape}, expected ({d},)."
        assert np.all(np.isfinite(ell) & (ell > 0)), f"{name}.lengthscales = {ell.tolist()}."
    _, var = posterior.posterior(
        sample_points(np.asarray(train_X), 32, np.random.default_rng(seed))
    )
    ratio = float(np.max(var)) / scale
    assert ratio <= OUTPUTSCALE_SLACK, (
        f"{name}: posterior variance reaches {ratio:.3g} x outputscale; outputscale must be the "
        "prior variance scale of f (Thompson sampling's jitter is relative to it)."
    )
    y_model = np.asarray(y_model)
    assert y_model.shape == (n,), f"y_model has shape {y_model.shape}, expected ({n},)."
    assert y_model.dtype.kind == "f", f"y_model has dtype {y_model.dtype}."
    _assert_finite("y_model", y_model=y_model)
    return posterior, y_model


# --- (b) shapes ---------------------------------------------------------------------------------
def check_shapes(case: SurrogateCase) -> None:
    r"""Output shapes of the three posterior methods for ``m = 1`` and ``m = 7`` points.

    ``posterior`` gives ``(m,), (m,)``; ``posterior_and_grad`` gives ``(m,), (m,), (m, d),
    (m, d)`` whose mean and variance equal ``posterior``'s (to :data:`JOINT_RTOL`);
    ``joint_posterior`` gives ``(m,), (m, m)``. All values are finite and variances are at least
    the ``1e-12`` clamp. Rows are independent: the batch of 7 equals the 7 single-point calls.
    """
    train_X, is_cat, seed = case.train_X, case.is_cat, case.seed
    posterior, _ = check_condition(case)
    d = np.shape(train_X)[1]
    rng = np.random.default_rng(seed + 1)
    for m in SHAPE_SIZES:
        X = sample_points(train_X, m, rng, is_cat=is_cat)
        mean, var = posterior.posterior(X)
        mean_g, var_g, dmean, dvar = posterior.posterior_and_grad(X)
        joint_mean, cov = posterior.joint_posterior(X)
        shapes = {
            "posterior mean": (np.shape(mean), (m,)),
            "posterior var": (np.shape(var), (m,)),
            "posterior_and_grad mean": (np.shape(mean_g), (m,)),
            "posterior_and_grad var": (np.shape(var_g), (m,)),
            "posterior_and_grad dmean": (np.shape(dmean), (m, d)),
            "posterior_and_grad dvar": (np.shape(dvar), (m, d)),
            "joint_posterior mean": (np.shape(joint_mean), (m,)),
            "joint_posterior cov": (np.shape(cov), (m, m)),
        }
        wrong = {k: v for k, v in shapes.items() if v[0] != v[1]}
        assert not wrong, f"m={m}: wrong shapes (got, expected): {wrong}."
        _assert_posterior_finite(f"m={m}", posterior, X)
        scale = _variance_scale(posterior, var)
        np.testing.assert_allclose(
            mean_g, mean, rtol=JOINT_RTOL, atol=JOINT_RTOL * math.sqrt(scale), err_msg="mean"
        )
        np.testing.assert_allclose(
            var_g, var, rtol=JOINT_RTOL, atol=VAR_FLOOR * scale, err_msg="variance"
        )
        if m > 1:
            single = [posterior.posterior(x[None, :]) for x in X]
            np.testing.assert_allclose(
                np.concatenate([s[0] for s in single]),
                mean,
                rtol=JOINT_RTOL,
                atol=JOINT_RTOL * math.sqrt(scale),
                err_msg="batched vs single-point mean",
            )
            np.testing.assert_allclose(
                np.concatenate([s[1] for s in single]),
                var,
                rtol=JOINT_RTOL,
                atol=VAR_FLOOR * scale,
                err_msg="batched vs single-point variance",
            )


# --- (c) gradients ------------------------------------------------------------------------------
def finite_difference_errors(
    posterior: Posterior, X: np.ndarray, cols: np.ndarray, h: float = GRAD_STEP
) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    r"""Analytic and central-difference gradients of the mean and variance in columns ``cols``.

    Returns:
        ``{"mean": (analytic, fd), "var": (analytic, fd)}``, each ``m x len(cols)``.
    """
    _, _, dmean, dvar = posterior.posterior_and_grad(X)
    fd_mean = np.empty((len(X), len(cols)))
    fd_var = np.empty_like(fd_mean)
    for k, j in enumerate(cols):
        plus, minus = X.copy(), X.copy()
        plus[:, j] += h
        minus[:, j] -= h
        mp, vp = posterior.posterior(plus)
        mm, vm = posterior.posterior(minus)
        fd_mean[:, k] = (mp - mm) / (2.0 * h)
        fd_var[:, k] = (vp - vm) / (2.0 * h)
    return {"mean": (dmean[:, cols], fd_mean), "var": (dvar[:, cols], fd_var)}


def check_gradients(
    case: SurrogateCase,
    *,
    m: int = 16,
    h: float = GRAD_STEP,
    rtol: float = GRAD_RTOL,
    atol: float = GRAD_ATOL,
) -> None:
    r"""``posterior_and_grad``'s gradients match central finite differences of ``posterior``.

    At ``m`` points at least :data:`MIN_DISTANCE` away from the training points (where the
    posterior is smooth and the variance far above its clamp), on the continuous columns only
    (categorical columns are searched discretely; their gradient need only be finite). An element
    passes when ``|g - fd| <= atol * max(1, max |fd|) + rtol * |fd|``, the maximum being over the
    batch and the quantity (mean or variance): the central-difference truncation error is
    ``O(h^2)`` and its rounding error ``O(eps / h)`` times the size of the terms summed.
    """
    train_X, is_cat, seed = case.train_X, case.is_cat, case.seed
    posterior, _ = check_condition(case)
    d = np.shape(train_X)[1]
    cat = _is_cat(is_cat, d)
    X = sample_points(
        train_X, m, np.random.default_rng(seed + 2), is_cat=cat, min_distance=MIN_DISTANCE
    )
    _assert_posterior_finite("gradient points", posterior, X)
    cols = np.flatnonzero(~cat)
    for name, (g, fd) in finite_difference_errors(posterior, X, cols, h).items():
        err = np.abs(g - fd)
        tol = atol * max(1.0, float(np.abs(fd).max(initial=0.0))) + rtol * np.abs(fd)
        if np.any(err > tol):
            i, k = np.unravel_index(int(np.argmax(err / tol)), err.shape)
            raise AssertionError(
                f"d{name}/dx disagrees with central differences (h={h}) at "
                f"{int((err > tol).sum())} of {err.size} entries; worst: point {X[i].tolist()}, "
                f"column {int(cols[k])}: analytic {g[i, k]:.10g}, finite difference "
                f"{fd[i, k]:.10g}, error {err[i, k]:.3e} > tolerance {tol[i, k]:.3e}."
            )


# --- (d) joint posterior ------------------------------------------------------------------------
def check_joint_posterior(
    case: SurrogateCase, *, rtol: float = JOINT_RTOL, psd_tol: float = PSD_TOL
) -> None:
    r"""``joint_posterior`` agrees with the marginals and is a covariance.

    On 7 points -- 4 random, 2 training points and a duplicate of the first (so the covariance is
    singular) -- the joint mean equals ``posterior``'s mean, the covariance is symmetric, its
    diagonal (clamped at ``1e-12``) equals the marginal variance, all to ``rtol`` relative (plus
    ``1e-12`` times the variance scale ``max(outputscale, max var)`` where variances vanish), and
    its smallest eigenvalue is at least ``-psd_tol`` times that scale.
    """
    train_X, is_cat, seed = case.train_X, case.is_cat, case.seed
    posterior, _ = check_condition(case)
    train_X = np.asarray(train_X, dtype=np.float64)
    random = sample_points(train_X, 4, np.random.default_rng(seed + 3), is_cat=is_cat)
    X = np.vstack([random, train_X[:2], random[:1]])
    mean, var = posterior.posterior(X)
    joint_mean, cov = posterior.joint_posterior(X)
    _assert_finite("joint_posterior", joint_mean=joint_mean, cov=cov)
    scale = _variance_scale(posterior, var, np.diagonal(cov))
    np.testing.assert_allclose(
        joint_mean, mean, rtol=rtol, atol=rtol * math.sqrt(scale), err_msg="joint vs marginal mean"
    )
    asym = float(np.abs(cov - cov.T).max())
    assert asym <= rtol * scale, f"covariance asymmetric: max |C - C^T| = {asym:.3e}."
    np.testing.assert_allclose(
        np.maximum(np.diagonal(cov), VAR_FLOOR),
        var,
        rtol=rtol,
        atol=VAR_FLOOR * max(1.0, scale),
        err_msg="diag of the joint covariance vs marginal variance",
    )
    min_eig = float(np.linalg.eigvalsh(0.5 * (cov + cov.T)).min())
    assert min_eig >= -psd_tol * scale, (
        f"covariance not PSD: smallest eigenvalue {min_eig:.3e} < -{psd_tol} * {scale:.3e}."
    )


# --- (e) training points ------------------------------------------------------------------------
def check_training_points(
    case: SurrogateCase,
    *,
    interpolates: bool = False,
    mean_atol: float = 1e-3,
    var_rtol: float = 1e-4,
) -> None:
    r"""The posterior at the training inputs is finite (gradients included, where ``r = 0``).

    With ``interpolates=True`` (a noise-free model such as ``MaternGP(deterministic=True)``,
    noise variance ``1e-6``) also: ``|mean - y_model| <= mean_atol * max(1, std(y_model))`` and
    ``var <= var_rtol * outputscale`` at every training point.
    """
    train_X = case.train_X
    posterior, y_model = check_condition(case)
    X = np.asarray(train_X, dtype=np.float64)
    _assert_posterior_finite("training points", posterior, X)
    if not interpolates:
        return
    mean, var = posterior.posterior(X)
    err = np.abs(mean - y_model)
    tol = mean_atol * max(1.0, float(np.std(y_model)))
    assert err.max() <= tol, (
        f"mean does not interpolate: max |mean - y_model| = {err.max():.3e} > {tol:.3e}."
    )
    ratio = float(var.max() / posterior.outputscale)
    assert ratio <= var_rtol, f"variance at training points: max var / outputscale = {ratio:.3e}."


# --- (f) constant targets -----------------------------------------------------------------------
def check_constant_targets(case: SurrogateCase, *, value: float = 3.7) -> None:
    r"""Conditioning on ``n`` equal targets gives a finite posterior (no NaN from ``std = 0``).

    ``y_model`` is finite and constant, and every output of the posterior at 7 random points and
    at the training points is finite.
    """
    train_X, is_cat, seed = case.train_X, case.is_cat, case.seed
    n = len(train_X)
    posterior, y_model = check_condition(replace(case, train_y=np.full(n, value)))
    assert np.ptp(y_model) <= 1e-9 * max(1.0, float(np.abs(y_model).max())), (
        f"constant targets mapped to non-constant y_model {y_model.tolist()}."
    )
    X = sample_points(train_X, 7, np.random.default_rng(seed + 4), is_cat=is_cat)
    _assert_posterior_finite("constant targets", posterior, np.vstack([X, train_X]))


# --- (g) NaN guard ------------------------------------------------------------------------------
def nan_cases(train_X: np.ndarray, train_y: np.ndarray) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Corrupted copies of the data: a NaN target, an infinite target, a NaN input."""
    X, y = np.array(train_X, dtype=np.float64), np.array(train_y, dtype=np.float64)
    y_nan, y_inf, X_nan = y.copy(), y.copy(), X.copy()
    y_nan[len(y) // 2] = np.nan
    y_inf[len(y) // 2] = np.inf
    X_nan[len(y) // 2, 0] = np.nan
    return {"nan_y": (X, y_nan), "inf_y": (X, y_inf), "nan_X": (X_nan, y)}


def check_nan_guard(case: SurrogateCase, *, only: str | None = None) -> dict[str, str]:
    r"""Non-finite data passed straight to ``condition`` never yield a NaN posterior.

    For each corrupted data set of :func:`nan_cases` (or only the one named ``only``), ``condition`` must
    either raise a :class:`~headstart.exceptions.HeadstartError` (for example
    :class:`~headstart.exceptions.ModelFittingError`) or a :class:`ValueError`, or return a
    posterior whose outputs -- at 7 random points -- and ``y_model`` are all finite. Any other
    exception type fails the check too (the engine catches only those two).

    Returns:
        ``{case: "raised <type>" | "finite"}``.
    """
    factory, train_X, train_y, is_cat, seed = case.unpack()
    cases = nan_cases(train_X, train_y)
    if only is not None:
        cases = {only: cases[only]}
    X_query = sample_points(np.asarray(train_X), 7, np.random.default_rng(seed + 5), is_cat=is_cat)
    outcome = {}
    for name, (X, y) in cases.items():
        surrogate = factory()
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                posterior, y_model = _condition(surrogate, X, y, seed)
        except (HeadstartError, ValueError) as e:
            outcome[name] = f"raised {type(e).__name__}"
            continue
        except Exception as e:
            raise AssertionError(
                f"{name}: condition raised {type(e).__name__} ({e}); expected a HeadstartError "
                "or ValueError, or a finite posterior."
            ) from e
        label = f"{name}: condition returned a posterior"
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            _assert_finite(label, y_model=y_model)
            _assert_posterior_finite(label, posterior, X_query)
        outcome[name] = "finite"
    return outcome


# --- (h) state and diagnostics ------------------------------------------------------------------
def check_state_roundtrip(case: SurrogateCase) -> None:
    r"""``state`` survives strict JSON, ``load_state`` restores it, ``diagnostics`` serializes.

    * ``state()`` of a fitted surrogate is a dict that ``json.dumps(..., allow_nan=False)``
      accepts as it is (no numpy types, no NaN);
    * a fresh surrogate's ``load_state(json.loads(...))`` gives back the same ``state()`` (numbers
      to 1e-6 relative) and then conditions to a finite posterior;
    * ``load_state`` ignores ``{}`` and unknown keys;
    * ``diagnostics()`` is a dict, before and after ``condition``, that ``json.dumps`` accepts
      with a numpy-to-list ``default=`` converter.
    """
    factory, train_X, train_y, is_cat, seed = case.unpack()
    surrogate = factory()
    before = surrogate.diagnostics()
    assert isinstance(before, dict), f"diagnostics() before condition is a {type(before)}."
    json.dumps(before, default=_json_default)
    _condition(surrogate, train_X, train_y, seed)
    diagnostics = surrogate.diagnostics()
    assert isinstance(diagnostics, dict), f"diagnostics() is a {type(diagnostics)}."
    json.dumps(diagnostics, default=_json_default)
    state = surrogate.state()
    assert isinstance(state, dict), f"state() is a {type(state)}."
    restored = json.loads(json.dumps(state, allow_nan=False))
    fresh = factory()
    fresh.load_state(restored)
    _assert_json_close(json.loads(json.dumps(fresh.state(), allow_nan=False)), restored)
    posterior, _ = _condition(fresh, train_X, train_y, seed)
    X = sample_points(train_X, 3, np.random.default_rng(seed + 6), is_cat=is_cat)
    _assert_posterior_finite("after load_state", posterior, X)
    other = factory()
    other.load_state({})
    other.load_state({"no such key": [1, 2, 3]})


# --- extras: empty data, determinism ------------------------------------------------------------
def check_empty_data(case: SurrogateCase) -> bool:
    r"""A surrogate with ``informative_prior`` conditions on ``n = 0`` points to a finite prior.

    ``y_model`` has shape ``(0,)`` and the posterior's outputs at 7 points are finite.

    Returns:
        ``False`` (nothing checked) when the surrogate has no informative prior.
    """
    factory, train_X, is_cat, seed = case.factory, case.train_X, case.is_cat, case.seed
    d = np.shape(train_X)[1]
    surrogate = factory()
    if not surrogate.informative_prior:
        return False
    cat = _is_cat(is_cat, d)
    posterior, y_model = _condition(surrogate, np.zeros((0, d)), np.zeros(0), seed)
    assert isinstance(posterior, Posterior), "condition on no data: not a Posterior."
    assert np.shape(y_model) == (0,), f"y_model has shape {np.shape(y_model)} for no data."
    X = sample_points(np.zeros((0, d)), 7, np.random.default_rng(seed + 7), is_cat=cat)
    _assert_posterior_finite("no data", posterior, X)
    return True


def check_determinism(case: SurrogateCase) -> None:
    r"""``rng`` is the only randomness: two fresh surrogates given equal seeds agree.

    Means and variances at 7 points agree to 1e-10 relative (room for threaded reductions).
    """
    factory, train_X, train_y, is_cat, seed = case.unpack()
    X = sample_points(train_X, 7, np.random.default_rng(seed + 8), is_cat=is_cat)
    results = [_condition(factory(), train_X, train_y, seed)[0].posterior(X) for _ in range(2)]
    (m1, v1), (m2, v2) = results
    np.testing.assert_allclose(m2, m1, rtol=1e-10, atol=1e-12, err_msg="mean")
    np.testing.assert_allclose(v2, v1, rtol=1e-10, atol=1e-14, err_msg="variance")


FANTASY_TOL = 1e-6  # relative to the variance scale: fantasies vs a fresh conditioning


def check_fantasize(case: SurrogateCase) -> bool:
    r"""A posterior's ``fantasize`` (optional; :class:`~headstart._engine.protocols.
    FantasizingPosterior`) conditions on more observations as Bayes' rule does.

    Fantasies at ``p = 3`` new points ``X_p`` with values equal to the posterior mean there (the
    engine's "kriging believer" for pending points) must:

    * return a posterior that satisfies the protocol, finite at the query points;
    * leave the mean unchanged everywhere (observing the expected value teaches nothing about
      the mean of a Gaussian model);
    * never increase the variance, and decrease it at ``X_p``;
    * not depend on the order of the fantasies: ``fantasize(A).fantasize(B)`` equals
      ``fantasize(A + B)``;
    * leave the original posterior as it was.

    Returns:
        ``False`` when the posterior has no ``fantasize`` (the engine then refits on the
        constant liar), ``True`` when the checks ran.
    """
    factory, train_X, train_y, is_cat, seed = case.unpack()
    posterior, _ = _condition(factory(), train_X, train_y, seed)
    if not hasattr(posterior, "fantasize"):
        return False
    name = type(posterior).__name__
    rng = np.random.default_rng(seed + 3)
    cat = _is_cat(is_cat, np.shape(train_X)[1])
    X_p = sample_points(train_X, 3, rng, is_cat=cat, min_distance=MIN_DISTANCE)
    X_q = sample_points(train_X, 7, rng, is_cat=cat)
    X_q = np.vstack([X_q, X_p])
    mean_p, var_p = posterior.posterior(X_p)
    before = posterior.posterior(X_q)
    fantasy = posterior.fantasize(X_p, mean_p)
    assert isinstance(fantasy, Posterior), f"{name}.fantasize does not return a Posterior."
    _assert_posterior_finite(f"{name}.fantasize", fantasy, X_q)
    mean, var = fantasy.posterior(X_q)
    scale = _variance_scale(posterior, before[1], var)
    tol = FANTASY_TOL * scale
    np.testing.assert_allclose(
        mean, before[0], atol=tol**0.5 * 1e-3 + tol, err_msg=f"{name}: fantasies moved the mean"
    )
    assert np.all(var <= before[1] + tol), f"{name}: fantasies increased the variance."
    assert np.all(var[-3:] < var_p), f"{name}: the variance at the fantasies did not decrease."
    one_by_one = posterior.fantasize(X_p[:1], mean_p[:1]).fantasize(X_p[1:], mean_p[1:])
    m2, v2 = one_by_one.posterior(X_q)
    np.testing.assert_allclose(m2, mean, atol=tol, err_msg=f"{name}: fantasy order, mean")
    np.testing.assert_allclose(v2, var, atol=tol, err_msg=f"{name}: fantasy order, variance")
    again = posterior.posterior(X_q)
    np.testing.assert_array_equal(again[0], before[0], err_msg=f"{name}: fantasize mutated it")
    np.testing.assert_array_equal(again[1], before[1], err_msg=f"{name}: fantasize mutated it")
    return True


def check_all(case: SurrogateCase, *, interpolates: bool = False) -> None:
    """Run every check of this module (about 15 ``condition`` calls)."""
    for check in (
        check_shapes,
        check_gradients,
        check_joint_posterior,
        check_constant_targets,
        check_nan_guard,
        check_state_roundtrip,
        check_empty_data,
        check_determinism,
        check_fantasize,
    ):
        check(case)
    check_training_points(case, interpolates=interpolates)


__all__ = [
    "GRAD_ATOL",
    "GRAD_RTOL",
    "GRAD_STEP",
    "JOINT_RTOL",
    "OUTPUTSCALE_SLACK",
    "PSD_TOL",
    "SurrogateCase",
    "SurrogateFactory",
    "check_all",
    "check_condition",
    "check_constant_targets",
    "check_determinism",
    "check_empty_data",
    "check_fantasize",
    "check_gradients",
    "check_joint_posterior",
    "check_nan_guard",
    "check_shapes",
    "check_state_roundtrip",
    "check_training_points",
    "finite_difference_errors",
    "nan_cases",
    "sample_points",
]
