r"""ABLR and ABRAC as :class:`~headstart._engine.protocols.Surrogate` s: a frozen neural basis,
trained once on the sources (:mod:`.features`), and a Bayesian linear regression head on the
target (:mod:`.blr`), refit on every ``condition`` in O(n r^2 + r^3) -- linear in the target's
observations, with no ``n x n`` matrix -- and, by default, a Matérn GP beside the head
(``residual``). Past ``local_points`` observations (default
:data:`~headstart._transfer.defaults.NEURAL_LOCAL_POINTS`) the
residual is exact only among the points nearest the incumbent (``fit_residual``'s
``max_points``; each prediction is also conditioned on its nearest point outside them) and
the hyperparameters are refitted per :func:`refit_due`, so a suggestion's
cost grows with the trials only through ``O(n r^2)`` terms and a linear nearest-point search
per candidate (issue 32: 1.8x GP-BO's at n = 500 before, 0.15x after; 0.12x with ABRAC's
lighter acquisition search there, ``screening_points`` and ``search_starts``, and 0.095x once
ask's storage statements were built once instead of per call; ``docs/benchmarks/abrac.md``).

Settings (the methods ``abrac``, ``ablr`` and ``ablr-sgd-fixed`` of :mod:`headstart._methods`
are three presets of them):

* ``basis``: how the basis is trained (:func:`~headstart._transfer.features.train_features`):
  ``"nested"`` (ABRAC, Horváth et al., AISTATS 2021: nested dropout, so the basis is ordered),
  ``"ablr"`` (ABLR, Perrone et al., NeurIPS 2018: basis and per-task heads trained jointly by
  the marginal likelihood) or ``"plain"`` (MSE without nested dropout: the ABRAC paper's
  "ABLR-SGD-fixed" ablation).
* ``ard``: one ARD precision per basis function in the head (the ABRAC paper's), else one for
  all (ABLR's, and ABRAC's default beside the residual: ``defaults.ABRAC_ARD``).
* ``active`` (ARD heads on a nested basis): the head uses the **first r** basis functions; ``r``
  grows with the target's data: ``"n_obs"`` (default) is ``r = min(n, d)`` -- the paper never
  states its rule (its "filter F^k" is undefined); its Fig. 1 shows 5 active basis functions
  after 5 observations, and a head with at most one basis function per observation cannot
  interpolate noise with unused directions, which is the over-fitting ABRAC is built to avoid.
  ``"all"`` is the paper's "ABRAC fixed" ablation; an integer fixes ``r``.
* ``truncation``: nested dropout's distribution (``"uniform"`` or ``"geometric"``).
* ``residual`` (default ``True``): a Matérn GP beside the head, ``f = phi^T w + g``
  (:mod:`.neural_residual`), fitted with it by MAP: what the frozen basis cannot represent, the
  residual learns from the target's data, so the model refines as GP-BO does when the target
  data grow (issue 32). ``False`` is the papers' method.
* ``source_mean``: the head's prior mean at the sources' average head instead of 0
  (:class:`ShiftedPosterior`).
* ``local_points`` (default 100): the size past which the residual is exact only among the
  points nearest the incumbent (and each prediction's nearest other point) and every head's
  hyperparameters follow :func:`refit_due`;
  ``None``: exact, and fitted as below that size, at every size.

The prior (no target data) is ``w ~ N(0, A^{-1})``: mean 0 everywhere, so the engine starts with
an initial design (3 points, as in the ABRAC paper). The predictive variance includes the noise
``1 / beta`` (the paper feeds it to EI): :attr:`NeuralPosterior.includes_noise` is ``True``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from headstart._cached import cached
from headstart._engine.numerics import check_training_data, standardize
from headstart._engine.protocols import focus_of, with_search
from headstart._gp.surrogate import default_refit_due
from headstart._gp.warping import warp_targets, yeo_johnson_targets
from headstart._transfer.blr import BLRFit, ard_theta, blr_at, fit_blr, theta_of
from headstart._transfer.defaults import (
    NEURAL_ACTIVE,
    NEURAL_BASES,
    NEURAL_LOCAL_POINTS,
    NEURAL_OUTPUT_WARP,
    NEURAL_OUTPUT_WARPS,
    NEURAL_REFIT_GROWTH,
    NEURAL_RESIDUAL,
    NEURAL_SCREENING_POINTS,
    NEURAL_SEARCH_STARTS,
    NEURAL_TRUNCATION,
)
from headstart._transfer.features import N_BASIS, FeatureNet, train_features
from headstart._transfer.neural_residual import fit_residual, valid_init

MIN_SOURCE_POINTS = 20  # fewer source evaluations than this cannot train 20 basis functions
CACHE_PREFIX = "neural-features/v1"
MIN_SEPARATION = 0.05  # unit-cube distance per column below which a suggestion repeats a trial


class NeuralPosterior:
    """The BLR head's predictive distribution on the frozen basis (first ``r`` functions)."""

    outputscale = 1.0
    lengthscales = None
    includes_noise = True
    # The head's variance is nearly flat around an evaluated point (a few basis functions,
    # well determined after a few trials), so EI kept proposing the incumbent's neighbourhood:
    # four trials within 0.02 of each other in one run (issue 27). Closer counts as a duplicate.
    min_separation = MIN_SEPARATION

    def __init__(self, net: FeatureNet, r: int, fit: BLRFit, Phi: np.ndarray, y: np.ndarray):
        self.net, self.r, self.fit = net, r, fit
        self._Phi, self._y = Phi, y

    def _features(self, X):
        return self.net.features(np.atleast_2d(X))[:, : self.r]

    def posterior(self, X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return self.fit.predict(self._features(X))

    def posterior_and_grad(self, X: np.ndarray):
        F, J = self.net.features_and_jacobian(np.atleast_2d(X))
        F, J = F[:, : self.r], J[:, : self.r]
        SF = self.fit.solve(F).T  # m x r: S f; f^T S f = ||L^{-1} f||^2 (one solve for both)
        mean = F @ self.fit.mean_w
        var = np.maximum(((F * SF).sum(1) + 1.0) / self.fit.beta, 1e-12)
        dmean = self.fit.mean_w @ J
        dvar = 2.0 / self.fit.beta * (SF[:, None, :] @ J)[:, 0]
        return mean, var, dmean, dvar

    def joint_posterior(self, X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        F = self._features(X)
        cov = F @ self.fit.solve(F) / self.fit.beta + np.eye(len(F)) / self.fit.beta
        return F @ self.fit.mean_w, 0.5 * (cov + cov.T)

    def fantasize(self, X: np.ndarray, y: np.ndarray) -> NeuralPosterior:
        """Condition on more observations at the same ``alpha``, ``beta`` (exact for a BLR)."""
        Phi = np.vstack([self._Phi, self._features(X)])
        yy = np.concatenate([self._y, np.asarray(y, dtype=np.float64)])
        theta = np.concatenate([np.log(self.fit.alpha), [math.log(self.fit.beta)]])
        return NeuralPosterior(self.net, self.r, blr_at(theta, Phi, yy), Phi, yy)


class ShiftedPosterior:
    r"""A posterior whose prior mean is ``phi(x)^T w0`` instead of 0: ``inner`` models
    ``y - Phi w0`` (:attr:`NeuralTransfer.source_mean`); means and their gradients add
    ``phi(x)^T w0``, variances are unchanged. The prior mean uses every basis function, also
    those an ABRAC head does not fit yet."""

    def __init__(self, inner, net: FeatureNet, w0: np.ndarray) -> None:
        self.inner, self.net, self.w0 = inner, net, w0
        self.outputscale = inner.outputscale
        self.lengthscales = inner.lengthscales
        self.includes_noise = inner.includes_noise
        if hasattr(inner, "min_separation"):
            self.min_separation = inner.min_separation
        with_search(self, inner)

    def _offset(self, X):
        return self.net.features(np.atleast_2d(X)) @ self.w0

    def posterior(self, X):
        mean, var = self.inner.posterior(X)
        return mean + self._offset(X), var

    def posterior_and_grad(self, X):
        mean, var, dmean, dvar = self.inner.posterior_and_grad(X)
        F, J = self.net.features_and_jacobian(np.atleast_2d(X))
        return mean + F @ self.w0, var, dmean + self.w0 @ J, dvar

    def joint_posterior(self, X):
        mean, cov = self.inner.joint_posterior(X)
        return mean + self._offset(X), cov

    def fantasize(self, X, y):
        y = np.asarray(y, dtype=np.float64).reshape(-1)
        return ShiftedPosterior(self.inner.fantasize(X, y - self._offset(X)), self.net, self.w0)

    def focus(self, X):
        inner = focus_of(self.inner, X)
        return self if inner is self.inner else ShiftedPosterior(inner, self.net, self.w0)


def refit_due(n: int, n_at_fit: int) -> bool:
    """Beyond ``local_points`` observations, whether the hyperparameters are refitted
    on ``n`` points: once they have grown by :data:`NEURAL_REFIT_GROWTH` since the last fit."""
    return n - n_at_fit >= max(1, math.ceil(NEURAL_REFIT_GROWTH * n_at_fit))


def source_mean_weights(net: FeatureNet, meta_tasks, ard: bool) -> np.ndarray:
    r"""The average of the sources' own head means on the basis: ``w0 = mean_t m_t``, each
    ``m_t`` the posterior mean of a BLR head fitted to source ``t`` (standardized values)."""
    heads = [fit_blr(net.features(X), y, ard=ard).mean_w for X, y in _training_data(meta_tasks)]
    return np.mean(heads, axis=0)


class NeuralTransfer:
    r"""ABLR / ABRAC surrogate (module docstring).

    Args:
        meta_tasks: The sources (:class:`headstart._meta.MetaTask`), on the study's space.
        is_cat: ``d`` mask of categorical columns (they enter the network as their codes).
        seed: Seed of the network's training.
        basis: ``"nested"``, ``"ablr"`` or ``"plain"`` (module docstring).
        ard: One precision per basis function in the head.
        active: The active basis rule of an ARD head on a nested basis: ``"n_obs"``, ``"all"``
            or an integer.
        cache: A model cache: the trained network is stored under the sources' hash and reused.
        truncation: Nested dropout's distribution (``"uniform"`` or ``"geometric"``).
        net: An already trained basis (skips the training).
        residual: A Matérn GP beside the head (:mod:`.neural_residual`).
        deterministic: The objective is noise-free (the residual model's noise is pinned).
        local_points: Past this many observations the residual GP is exact only among the
            ones nearest the incumbent, and the hyperparameters refit on a schedule (module
            docstring); ``None``: exact and refitted at every size.
        output_warp: The map of the target's values before the fits (:mod:`headstart._gp.
            warping`): ``"none"`` (standardized), ``"yeo-johnson"`` or ``"copula"``; ``"auto"``:
            the first two by their evidence (:meth:`_choose_warp`).
        screening_points, search_starts: The acquisition search's effort past the exact block
            (with ``residual``, beyond ``local_points`` observations): the Sobol points it
            screens and the local searches it runs (:class:`~headstart._engine.protocols.
            Posterior`; set on the posteriors this model gives there, fantasies included;
            below, the engine's own).
    """

    informative_prior = False

    def __init__(
        self,
        meta_tasks: Sequence[Any],
        is_cat: np.ndarray,
        *,
        seed: int = 0,
        deterministic: bool = False,
        basis: str = "nested",
        ard: bool = True,
        active: str | int = NEURAL_ACTIVE,
        cache: Any = None,
        truncation: str = NEURAL_TRUNCATION,
        net: FeatureNet | None = None,
        residual: bool = NEURAL_RESIDUAL,
        source_mean: bool = False,
        local_points: int | None = NEURAL_LOCAL_POINTS,
        output_warp: str = NEURAL_OUTPUT_WARP,
        screening_points: int = NEURAL_SCREENING_POINTS,
        search_starts: int = NEURAL_SEARCH_STARTS,
    ) -> None:
        if basis not in NEURAL_BASES:
            raise ValueError(f"basis must be one of {NEURAL_BASES}; got {basis!r}.")
        if output_warp not in NEURAL_OUTPUT_WARPS:
            raise ValueError(
                f"output_warp must be one of {NEURAL_OUTPUT_WARPS}; got {output_warp!r}."
            )
        self.output_warp = output_warp
        self._warp_choice: str | None = None  # output_warp="auto": the warp chosen ...
        self._warp_lambda = 1.0  # ... and its Yeo-Johnson parameter
        self._warp_scores: dict[str, float] = {}
        self.meta_tasks = list(meta_tasks)
        self.is_cat = np.asarray(is_cat, dtype=bool)
        self.basis, self.ard, self.active = basis, bool(ard), active
        self.net = (
            net
            if net is not None
            else load_or_train(
                self.meta_tasks, basis, seed=seed, cache=cache, truncation=truncation
            )
        )
        self.residual, self.deterministic = bool(residual), bool(deterministic)
        if local_points is not None and (isinstance(local_points, bool) or local_points < 1):
            raise ValueError(f"local_points must be >= 1 or None; got {local_points!r}.")
        self.local_points = local_points
        self._search = {
            "screening_points": int(screening_points),
            "search_starts": int(search_starts),
        }
        self.source_mean = (
            source_mean_weights(self.net, self.meta_tasks, self.ard) if source_mean else None
        )
        self._theta: np.ndarray | None = None
        self._residual_theta: np.ndarray | None = None
        self._n_at_full_fit = 0  # the last fit from every start
        self._n_at_fit = 0  # the last fit (beyond local_points, fits follow refit_due)
        self._head: BLRFit | None = None
        self._head_at: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None  # deferred head
        self._last: Any = None

    def n_active(self, n: int) -> int:
        """Basis functions the head uses after ``n`` target observations."""
        d = self.net.n_basis
        if not self.ard or self.basis != "nested" or self.active == "all":
            return d
        if self.active == "n_obs":
            return max(1, min(n, d))
        return max(1, min(int(self.active), d))

    def condition(self, train_X: np.ndarray, train_y: np.ndarray, rng: np.random.Generator):
        check_training_data(train_X, train_y)
        if self.output_warp != "auto":
            return self._condition_as(train_X, warp_targets(train_y, self.output_warp))
        n = len(train_y)
        if self._warp_choice is not None and not default_refit_due(n, self._n_at_full_fit):
            if self._warp_choice == "none":
                return self._condition_as(train_X, warp_targets(train_y, "none"))
            y_model = yeo_johnson_targets(train_y, self._warp_lambda)[0]  # lambda as fitted
            return self._condition_as(train_X, y_model)
        return self._choose_warp(train_X, train_y)

    def _choose_warp(self, train_X: np.ndarray, train_y: np.ndarray):
        r"""``output_warp="auto"``: fit the model to the standardized and to the Yeo-Johnson
        targets, keep the one of higher evidence for the *observed* values -- the fit's log
        evidence plus the map's log Jacobian (:func:`headstart._gp.warping.
        yeo_johnson_targets`), minus ``log(n) / 2`` for the fitted ``lambda`` (BIC) -- and keep
        that choice, and the fitted ``lambda``, until the next fit from every start
        (``default_refit_due``, the schedule of the fits themselves). With fewer than 3 values
        or equal ones the map is the identity: one fit, and no choice yet."""
        y_none = warp_targets(train_y, "none")
        y_yj, log_det_yj, lam = yeo_johnson_targets(train_y)
        if np.array_equal(y_yj, y_none):  # the map fell back (too few or equal values)
            return self._condition_as(train_X, y_none)  # nothing to choose yet
        before = self._fit_state()
        scores, states, results = {}, {}, {}
        targets = {"none": (y_none, 0.0), "yeo-johnson": (y_yj, log_det_yj)}
        for warp, (y_model, log_det) in targets.items():
            self._load_fit_state(before)
            results[warp] = self._condition_as(train_X, y_model)
            penalty = 0.5 * math.log(len(train_y)) if warp != "none" else 0.0
            scores[warp] = self._log_evidence() + log_det - penalty
            states[warp] = self._fit_state()
        best = max(scores, key=lambda w: (scores[w], w == "none"))  # a tie: no warp
        self._load_fit_state(states[best])
        self._warp_choice, self._warp_lambda = best, lam
        self._warp_scores = scores
        return results[best]

    def _log_evidence(self) -> float:
        """The last fit's log evidence of its targets (the residual model's, else the head's)."""
        return float(self._last.log_evidence) if self.residual else -float(self._head.nll)

    _FIT_ATTRS = (
        "_n_at_full_fit", "_n_at_fit", "_theta", "_head", "_head_at", "_residual_theta", "_last",
    )  # fmt: skip

    def _head_fit(self) -> BLRFit | None:
        """The last conditioning's head (made now if that conditioning deferred it)."""
        if self._head is None and self._head_at is not None:
            self._head = self._head_at_theta(*self._head_at)
        return self._head

    def _head_at_theta(self, theta: np.ndarray, Phi: np.ndarray, y: np.ndarray) -> BLRFit:
        """The head on ``Phi``, ``y`` at fixed hyperparameters ``theta`` (no fit)."""
        return blr_at(theta if self.ard else ard_theta(theta, Phi.shape[1]), Phi, y)

    def _fit_state(self) -> dict[str, Any]:
        return {a: getattr(self, a) for a in self._FIT_ATTRS}

    def _load_fit_state(self, state: dict[str, Any]) -> None:
        for a, v in state.items():
            setattr(self, a, v)

    def _condition_as(self, train_X: np.ndarray, y_model: np.ndarray):
        """Fit (on the refit schedule) and condition on the model targets ``y_model``."""
        r = self.n_active(len(y_model))
        F = self.net.features(train_X)
        Phi = F[:, :r]
        y = y_model if self.source_mean is None else y_model - F @ self.source_mean
        n_params = (r if self.ard else 1) + 1
        warm = self._theta is not None and len(self._theta) == n_params
        n = len(y)
        due = default_refit_due(n, self._n_at_full_fit)
        warm_only = not due and (self._residual_theta is not None if self.residual else warm)
        if not warm_only:
            self._n_at_full_fit = n
        # beyond local_points: the head's default start on the schedule too, and between
        # refits (refit_due) no fit at all (up to it, every fit runs as the papers' heads do)
        local = self.local_points is not None and n > self.local_points
        large = local and warm and warm_only
        frozen = large and not refit_due(n, self._n_at_fit)
        # the residual's own previous fit, valid for this head and these columns
        resumable = valid_init(self._residual_theta, n_params - 1, train_X.shape[1])
        if frozen and self.residual and resumable:
            # the residual model starts from its own previous fit: the head at the frozen
            # theta is only reported (diagnostics), so it is made when asked for (0.5 ms of a
            # 20 ms suggestion at n = 500)
            fit, self._head, self._head_at = None, None, (self._theta, Phi, y)
        else:
            if frozen:
                fit = self._head_at_theta(self._theta, Phi, y)
            else:
                self._n_at_fit = n
                fit = fit_blr(
                    Phi, y, ard=self.ard, init=self._theta if warm else None, warm_only=large
                )
            self._theta, self._head, self._head_at = theta_of(fit, self.ard), fit, None
        if self.residual:
            self._last = fit_residual(
                self.net,
                r,
                train_X,
                y,
                self.is_cat,
                fit,
                Phi=Phi,
                ard=self.ard,
                deterministic=self.deterministic,
                init=self._residual_theta,
                warm_only=warm_only,
                max_points=self.local_points,
                frozen=frozen,
                incumbent=int(np.argmax(y_model)),  # y is shifted with source_mean
            )
            self._residual_theta = self._last.theta
        else:
            self._last = NeuralPosterior(self.net, r, fit, Phi, y)
        if self.residual and local:  # past the exact block: the search's own effort
            with_search(self._last, self._search)
        if self.source_mean is not None:
            return ShiftedPosterior(self._last, self.net, self.source_mean), y_model
        return self._last, y_model

    def state(self) -> dict[str, Any]:
        """The last fit's hyperparameters and where the refit schedules stand (JSON), so a
        resumed study refits when a continuous run would."""
        out: dict[str, Any] = {"n_at_full_fit": self._n_at_full_fit, "n_at_fit": self._n_at_fit}
        if self._theta is not None:
            out["theta"] = self._theta.tolist()
        if self._residual_theta is not None:
            out["residual_theta"] = self._residual_theta.tolist()
        if self._warp_choice is not None:
            out["warp_choice"], out["warp_lambda"] = self._warp_choice, self._warp_lambda
        return out

    def load_state(self, state: dict[str, Any]) -> None:
        for key, attr in (("theta", "_theta"), ("residual_theta", "_residual_theta")):
            theta = state.get(key)
            if isinstance(theta, list) and all(isinstance(v, int | float) for v in theta):
                setattr(self, attr, np.asarray(theta, dtype=np.float64))
        for key in ("n_at_full_fit", "n_at_fit"):
            count = state.get(key)
            if isinstance(count, int) and not isinstance(count, bool) and count >= 0:
                setattr(self, f"_{key}", count)
        if state.get("warp_choice") in ("none", "yeo-johnson"):
            self._warp_choice = state["warp_choice"]
        lam = state.get("warp_lambda")
        if isinstance(lam, int | float) and not isinstance(lam, bool) and math.isfinite(lam):
            self._warp_lambda = float(lam)

    def diagnostics(self) -> dict[str, Any]:
        """Each source's training error, and the head: active basis, precisions, noise."""
        out: dict[str, Any] = {
            "weights": {},
            "source_rmse": dict(
                zip([t.name for t in self.meta_tasks], self.net.source_rmse, strict=False)
            ),
        }
        fit = self._head_fit()
        if self._last is not None and fit is not None:
            out["head"] = {
                "basis": self.basis,
                "active_basis": self._last.r,
                "ard": self.ard,  # one precision per basis function, else one for all
                "ard_precisions": fit.alpha.tolist(),
                "noise_variance": 1.0 / fit.beta,
                "output_warp": self._warp_choice or self.output_warp,  # "auto": the choice
            }
            if self._warp_choice == "yeo-johnson":
                out["head"]["warp_lambda"] = self._warp_lambda
            if self.residual:
                post = self._last
                out["head"]["residual"] = {
                    "outputscale": post.s,
                    "lengthscales": post.lengthscales.tolist(),
                    "noise_variance": post.noise,
                    "log_evidence": post.log_evidence,  # of the whole data, as the head's
                    "head_log_evidence": -fit.nll,
                    "exact_points": len(post.y),  # the points its correlations are kept among
                }
        return out


def _training_data(meta_tasks) -> list[tuple[np.ndarray, np.ndarray]]:
    return [(t.X, standardize(t.y_max())[0]) for t in meta_tasks]


def cache_key(meta_tasks, mode: str, seed: int, truncation: str) -> str:
    from headstart._meta import data_hash

    return f"{CACHE_PREFIX}/{mode}-{truncation}-{seed}/{data_hash(meta_tasks)}"


def check_sources(meta_tasks) -> None:
    """Refuse sources the basis cannot be trained on (called by ``create_study``, before the
    study is stored, and again before training).

    Raises:
        MetaDataValueError: fewer than :data:`MIN_SOURCE_POINTS` evaluations in all, or a
            source whose values are all equal.
    """
    from headstart.exceptions import MetaDataValueError

    n = sum(t.n for t in meta_tasks)
    if n < MIN_SOURCE_POINTS:
        raise MetaDataValueError(
            f"The neural transfer methods need at least {MIN_SOURCE_POINTS} source evaluations "
            f"to train {N_BASIS} basis functions; the sources have {n}. Use method='scaml' or "
            "add earlier trials."
        )
    for t in meta_tasks:
        if t.n >= 2 and float(np.ptp(t.y)) == 0.0:
            raise MetaDataValueError(
                f"Source {t.name!r} has the same value at every configuration: it says nothing "
                "about where to look. Leave it out of transfer_from."
            )


def load_or_train(
    meta_tasks,
    mode: str,
    *,
    seed: int = 0,
    cache=None,
    truncation="uniform",
    progress: bool = False,
):
    r"""The sources' feature network from ``cache`` (checksum verified), else trained (and
    stored). ``progress``: a progress bar over the training (``create_study`` shows one); a
    training of more than 5,000 source evaluations always shows one."""

    check_sources(meta_tasks)
    n = sum(t.n for t in meta_tasks)
    key = cache_key(meta_tasks, mode, seed, truncation)
    stored = cached(cache, key, FeatureNet.from_json, "feature basis")
    if stored is not None:
        return stored
    from headstart._progress import TrainingProgress

    description = f"training the {mode} basis on {n} source evaluations"
    with TrainingProgress(description, enabled=progress or n > 5000) as bar:
        net = train_features(
            _training_data(meta_tasks),
            mode=mode,
            seed=seed,
            truncation=truncation,
            on_step=bar.update,
        )
    if cache is not None:
        cache.put_cache(key, "neural-features", net.to_json())
    return net


__all__ = ["NeuralPosterior", "NeuralTransfer", "load_or_train"]
