r"""MPHD's two-step pre-training on a super-dataset of search spaces (Fan, Han & Wang 2024, Sec. 2.3).

A *super-dataset* is a list of :class:`Domain` s: each a search space (its column kinds) with the
sub-datasets observed on it (one per earlier study or task). The marginal likelihood of the
hierarchical GP is approximated by Laplace's method (Eq. 1-2), which splits pre-training in two:

**Step 1** (Eq. 3) -- one type-II maximum-likelihood GP per space, shared by all its
sub-datasets: ``theta_i = argmax sum_j log N(y_ij | 0, K_ij(theta_i) + sigma_i^2 I)`` with the
Matérn-5/2 ARD kernel of :mod:`headstart._gp.kernels` on encoded inputs in ``[0, 1]^d`` and each
sub-dataset's values standardized (the paper min-max scales them; standardizing is what the GP
does at BO time, so the learned scales match it, and it fixes the constant mean at 0 -- the
paper's Normal prior on a constant mean has no role on standardized values). All spaces are fit
by the GP core's batched exact GP (:func:`headstart._gp.exact.fit_exact_gp`): the sub-datasets
are padded to a common size and dimension (padded points get an identity block, padded
dimensions a zero distance), and every (space, start) pair is its own L-BFGS-B run on the sum of
its sub-datasets' negative log likelihoods (per observation), all evaluated in batches. Every sub-dataset is subsampled to at most ``n_points`` points
(the paper: 50 per Adam step).

**Step 2** (Eq. 4) -- the priors, by maximum likelihood on the step-1 estimates: a network from a
dimension's context (:mod:`headstart.mphd.context`) to the Gamma shape and rate of its lengthscale
(4 -> 16 -> 16 -> 2, tanh, linear output + softplus; Adam, started at the pooled Gamma fit), and
Gammas of the signal and noise variances by SciPy's MLE. ``lengthscale="shared"`` is the paper's
"Non-NN" ablation: one Gamma for every lengthscale.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from headstart.exceptions import PretrainingDataError
from headstart.mphd.context import KINDS, dimension_context
from headstart.mphd.network import (
    STEP2,
    Progress,
    fit_lengthscale_network,
    gamma_kl,
    gamma_mle,
    select_lengthscale_prior,
)
from headstart.mphd.prior_model import LENGTHSCALE_MODES, PriorModel

DEFAULT_POINTS = 64  # points per sub-dataset in step 1 (the paper subsamples 50 per Adam step)
# Step 1's exact GPs: a sub-dataset of more points is cut into independent blocks of at most this
# many (a block-diagonal likelihood; the paper's 50-point Adam steps approximate it the same way)
BLOCK = 64
MIN_SPACES = 3  # step 2 fits Gammas across spaces: 2 points give a degenerate spread
MIN_POINTS = 5  # a sub-dataset with fewer usable points says nothing about a lengthscale
STEP1 = "MPHD step 1: a GP per search space"
PRETRAIN_MODES = ("auto", *LENGTHSCALE_MODES)
_STARTS = (1.0, 0.2)  # step-1 starting lengthscales, both tried, the better fit kept


@dataclass(frozen=True)
class Domain:
    r"""One search space of the super-dataset and what was observed on it.

    Args:
        name: A label (a study name, a table id).
        kinds: ``"continuous"``, ``"integer"`` or ``"categorical"`` per encoded column.
        datasets: ``(X, y)`` per sub-dataset: ``X`` is ``n x d`` in ``[0, 1]`` (the space's
            encoding), ``y`` the ``n`` values (any direction: only their scale matters).
    """

    name: str
    kinds: tuple[str, ...]
    datasets: tuple[tuple[np.ndarray, np.ndarray], ...]

    def __post_init__(self) -> None:
        kinds = tuple(self.kinds)
        if not kinds or set(kinds) - set(KINDS):
            raise PretrainingDataError(
                f"Domain {self.name!r}: kinds must be a non-empty list of {KINDS}; got {kinds}."
            )
        object.__setattr__(self, "kinds", kinds)
        clean = []
        for j, (X, y) in enumerate(self.datasets):
            X = np.asarray(X, dtype=np.float64)
            y = np.asarray(y, dtype=np.float64).reshape(-1)
            if X.ndim != 2 or X.shape != (len(y), len(kinds)):
                raise PretrainingDataError(
                    f"Domain {self.name!r}, sub-dataset {j}: X must be {len(y)} x {len(kinds)} "
                    f"(one row per value, one column per kind); got {X.shape}."
                )
            clean.append((X, y))
        object.__setattr__(self, "datasets", tuple(clean))

    @property
    def dim(self) -> int:
        return len(self.kinds)


@dataclass(frozen=True)
class DomainFit:
    """Step 1's estimate for one space (standardized values)."""

    name: str
    lengthscales: np.ndarray
    outputscale: float
    noise: float
    neg_log_likelihood: float
    n_datasets: int

    def to_json(self) -> dict:
        return {
            "name": self.name,
            "lengthscales": self.lengthscales.tolist(),
            "outputscale": self.outputscale,
            "noise": self.noise,
            "neg_log_likelihood": self.neg_log_likelihood,
            "n_datasets": self.n_datasets,
        }

    @classmethod
    def from_json(cls, data: dict) -> DomainFit:
        return cls(**{**data, "lengthscales": np.asarray(data["lengthscales"], dtype=np.float64)})


def cached_fit_domains(
    path, make_domains, *, n_points: int | None = DEFAULT_POINTS, seed: int = 0
) -> tuple[list[DomainFit], dict[str, tuple[str, ...]], dict]:
    r"""Step 1 (:func:`fit_domains`), kept in the JSON file ``path`` so step 2 can be redone.

    ``make_domains()`` builds the domains only when ``path`` does not exist yet; the file also
    records the kinds of each space, ``n_points`` and the step's wall time in ``seconds``.

    Returns:
        ``(fits, {space name: kinds}, the stored dict)``.
    """
    import json
    import time
    from pathlib import Path

    path = Path(path)
    if not path.exists():
        domains = make_domains()
        t0 = time.perf_counter()
        fits = fit_domains(domains, n_points=n_points, seed=seed)
        stored = {
            "seconds": round(time.perf_counter() - t0, 1),
            "n_points": n_points,
            "kinds": {d.name: list(d.kinds) for d in domains},
            "fits": [f.to_json() for f in fits],
        }
        path.write_text(json.dumps(stored, indent=1))
    stored = json.loads(path.read_text())
    if stored["n_points"] != n_points:
        raise PretrainingDataError(
            f"{path} holds step 1 on {stored['n_points']} points per sub-dataset, not "
            f"{n_points}; use another path for another n_points."
        )
    fits = [DomainFit.from_json(f) for f in stored["fits"]]
    return fits, {k: tuple(v) for k, v in stored["kinds"].items()}, stored


def _usable(domain: Domain, n_points: int | None, rng: np.random.Generator):
    """The domain's sub-datasets: finite rows, at most ``n_points`` of them (all for ``None``),
    values standardized, each cut into blocks of at most :data:`BLOCK` points."""
    out = []
    for X, y in domain.datasets:
        keep = np.isfinite(y) & np.isfinite(X).all(axis=1)
        X, y = X[keep], y[keep]
        order = rng.permutation(len(y))[:n_points]
        X, y = np.clip(X[order], 0.0, 1.0), y[order]
        std = float(np.std(y)) if len(y) else 0.0
        if len(y) >= MIN_POINTS and std > 1e-12 * max(1.0, abs(float(np.mean(y)))):
            y = (y - y.mean()) / std
            blocks = np.array_split(np.arange(len(y)), -(-len(y) // BLOCK))
            out.append([(X[b], y[b]) for b in blocks])
    return out


def _select(domains: Sequence[Domain], n_points: int | None, seed: int):
    kept, reasons = [], []
    for i, domain in enumerate(domains):
        data = _usable(domain, n_points, np.random.default_rng([seed, i]))
        if data:
            kept.append((domain, data))
        else:
            reasons.append(
                f"{domain.name!r} has no sub-dataset with >= {MIN_POINTS} finite, non-constant "
                "values"
            )
    if len(kept) < MIN_SPACES:
        why = f" ({'; '.join(reasons[:3])})" if reasons else ""
        raise PretrainingDataError(
            f"MPHD pre-training needs at least {MIN_SPACES} search spaces, each with a "
            f"sub-dataset of >= {MIN_POINTS} finite values that are not all equal; got "
            f"{len(kept)} usable of {len(domains)}{why}. Add earlier studies on other spaces "
            "(transfer_from=[...]) or use a saved prior (prior_model=...)."
        )
    return kept


def fit_domains(
    domains: Sequence[Domain],
    *,
    n_points: int | None = DEFAULT_POINTS,
    seed: int = 0,
    maxiter: int = 500,
    progress: Progress | None = None,
) -> list[DomainFit]:
    r"""Step 1: a maximum-likelihood GP per space, all spaces in one batched L-BFGS-B.

    Raises:
        PretrainingDataError: fewer than :data:`MIN_SPACES` spaces with usable data.
    """
    kept = _select(domains, n_points, seed)
    return _fit_batched(kept, maxiter, progress)


def _fit_batched(kept, maxiter: int, progress: Progress | None = None) -> list[DomainFit]:
    """Every space's ML GP (:func:`headstart._gp.exact.fit_exact_gp`): a space's sub-datasets
    share its hyperparameters; spaces and starts are independent L-BFGS-B runs, batched."""
    from headstart._gp.exact import MATERN_FORM, fit_exact_gp
    from headstart._gp.fit_settings import MATERN_COORDS, Limits
    from headstart._gp.hyperprior import FLAT_HYPERPRIOR
    from headstart._gp.params import GPParams

    D = max(domain.dim for domain, _ in kept)
    sets = [
        (g, X, y, domain)
        for g, (domain, data) in enumerate(kept)
        for blocks in data
        for X, y in blocks
    ]
    is_cat = np.zeros((len(sets), D), dtype=bool)
    for i, (_, _, _, domain) in enumerate(sets):
        is_cat[i, : domain.dim] = [k == "categorical" for k in domain.kinds]
    full = MATERN_COORDS.bounds(D)
    starts, bounds = [], []
    for domain, _ in kept:
        box = full.copy()
        box[domain.dim : D] = 0.0  # padded dimensions: w = 1 on a zero distance
        bounds.append(box)
        starts.append(
            [
                np.r_[
                    np.full(domain.dim, -2.0 * math.log(ell0)),
                    np.zeros(D - domain.dim),
                    0.0,
                    math.log(1e-2),
                ]
                for ell0 in _STARTS
            ]
        )

    def step(calls: int) -> None:
        progress(STEP1, min(calls, maxiter), maxiter)

    raw, nll = fit_exact_gp(
        [X for _, X, _, _ in sets],
        [y for _, _, y, _ in sets],
        is_cat,
        np.asarray(starts),
        prior=FLAT_HYPERPRIOR,
        form=MATERN_FORM,
        owner=np.array([g for g, *_ in sets]),
        bounds=np.asarray(bounds),
        limits=Limits(maxiter=maxiter),
        callback=None if progress is None else step,
    )
    if progress is not None:
        progress(STEP1, maxiter, maxiter)  # converged early: the step is done
    params = GPParams.from_raw(raw, MATERN_COORDS)
    return [
        DomainFit(
            domain.name,
            params.lengthscales[g, : domain.dim],
            float(params.outputscale[g]),
            float(params.noise[g]),
            float(nll[g]),
            len(data),
        )
        for g, (domain, data) in enumerate(kept)
    ]


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("headstart")
    except PackageNotFoundError:  # a source checkout that is not installed
        return "unknown"


def _check_mode(lengthscale: str) -> None:
    if lengthscale not in PRETRAIN_MODES:
        raise PretrainingDataError(
            f"lengthscale must be one of {PRETRAIN_MODES}; got {lengthscale!r}."
        )


def pretrain(
    domains: Sequence[Domain],
    *,
    lengthscale: str = "network",
    n_points: int | None = DEFAULT_POINTS,
    seed: int = 0,
    progress: Progress | None = None,
) -> PriorModel:
    r"""Pre-train an MPHD prior on ``domains`` (step 1, then step 2; module docstring).

    Args:
        domains: The super-dataset: at least :data:`MIN_SPACES` spaces with usable data.
        lengthscale: ``"network"`` (the paper's context network), ``"auto"`` (the network
            pulled toward the shared Gamma as far as leave-one-space-out likelihood says, or the
            shared Gamma itself when that predicts unseen spaces better;
            :mod:`headstart.mphd.network`) or ``"shared"`` (the paper's "Non-NN" ablation).
            ``"network"`` is the default because it measured best in BO: ``"auto"`` predicts an
            unseen space's lengthscales better (HPO-B, ``docs/benchmarks/mphd.md``) but its
            regret was not lower on HPO-B or on the synthetic super-dataset S.
        n_points: Points per sub-dataset in step 1 (``None``: every point; more than
            :data:`BLOCK` are fitted in blocks, so time and memory grow linearly).
        seed: Subsampling and network initialization (same seed, same prior).
        progress: Called as ``progress(stage, done, total)`` while the steps run (step 1's
            L-BFGS-B iterations, step 2's Adam steps), e.g. to move a progress bar.

    Returns:
        The :class:`~headstart.mphd.prior_model.PriorModel` (save it with ``.save(path)``); with
        ``"auto"``, ``trained_on["selection"]`` records what was chosen and why.

    Raises:
        PretrainingDataError: too few usable spaces, or an unknown ``lengthscale``.
    """
    _check_mode(lengthscale)
    if n_points is not None and (not isinstance(n_points, int) or n_points < MIN_POINTS):
        raise PretrainingDataError(
            f"n_points must be an integer >= {MIN_POINTS} or None (every point); got {n_points}."
        )
    fits = fit_domains(domains, n_points=n_points, seed=seed, progress=progress)
    kinds = {domain.name: domain.kinds for domain in domains}
    return fit_priors(
        fits, kinds, lengthscale=lengthscale, n_points=n_points, seed=seed, progress=progress
    )


def fit_priors(
    fits: Sequence[DomainFit],
    kinds: dict[str, tuple[str, ...]],
    *,
    lengthscale: str = "network",
    n_points: int | None = DEFAULT_POINTS,
    seed: int = 0,
    progress: Progress | None = None,
) -> PriorModel:
    r"""Step 2 on step-1 estimates (:func:`fit_domains`); ``kinds`` maps each space's name to
    its column kinds. Every lengthscale mode can be fitted from one step 1."""
    _check_mode(lengthscale)
    contexts = [dimension_context(kinds[f.name]) for f in fits]
    ells = np.concatenate([f.lengthscales for f in fits])
    network, selection = None, None
    if lengthscale == "auto":
        selection, network = select_lengthscale_prior(
            [f.name for f in fits],
            contexts,
            [f.lengthscales for f in fits],
            seed=seed,
            progress=progress,
        )
    elif lengthscale == "network":
        network = fit_lengthscale_network(np.vstack(contexts), ells, seed=seed, progress=progress)
    loss = None if network is None else network[3]
    trained_on = {
        "spaces": [
            {"name": f.name, "kinds": list(kinds[f.name]), "n_subdatasets": f.n_datasets}
            for f in fits
        ],
        "points_per_subdataset": n_points,
        "headstart_version": _version(),
        "step1_neg_log_likelihood": float(sum(f.neg_log_likelihood for f in fits)),
        # the network's final training loss (with "auto", its KL pull is included)
        "step2_lengthscale_loss": loss if loss is not None and math.isfinite(loss) else None,
        "seed": int(seed),
    }
    if selection is not None:
        trained_on["selection"] = selection.to_json()
    gammas = (
        gamma_mle(ells),
        gamma_mle([f.outputscale for f in fits]),
        gamma_mle([f.noise for f in fits]),
    )
    if network is None:
        return PriorModel.shared(*gammas, trained_on)
    layers, mean, std, _ = network
    return PriorModel(
        "network",
        [(np.asarray(W).tolist(), np.asarray(b).tolist()) for W, b in layers],
        np.asarray(mean).tolist(),
        np.asarray(std).tolist(),
        *gammas,
        trained_on,
    )


__all__ = [
    "BLOCK",
    "DEFAULT_POINTS",
    "MIN_SPACES",
    "PRETRAIN_MODES",
    "STEP1",
    "STEP2",
    "Domain",
    "DomainFit",
    "cached_fit_domains",
    "fit_domains",
    "fit_lengthscale_network",
    "fit_priors",
    "gamma_kl",
    "gamma_mle",
    "pretrain",
]
