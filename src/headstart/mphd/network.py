r"""MPHD step 2 for lengthscales: the context network, its pull toward one shared Gamma, and the choice.

The network (Fan, Han & Wang 2024, Sec. 2.3, Eq. 4) maps a dimension's context ``s_k``
(:mod:`headstart.mphd.context`) to the Gamma shape and rate of its lengthscale, fitted by maximum
likelihood on the step-1 estimates ``ell_k``. With a dozen training spaces it can memorise their
contexts: on HPO-B's held-out spaces its prior gave their lengthscales a lower likelihood than one
shared Gamma (the paper's "Non-NN" ablation). So the fit here minimizes

    -mean_k log Gamma(ell_k | a(s_k), b(s_k)) + lambda mean_k KL(Gamma(a(s_k), b(s_k)) || Gamma(a0, b0))

where ``(a0, b0)`` is the shared Gamma's maximum-likelihood fit: ``lambda = 0`` is the paper's
network, ``lambda -> inf`` the shared Gamma. :func:`select_lengthscale_prior` chooses ``lambda``
from :data:`STRENGTHS` -- or the shared Gamma itself -- by leave-one-space-out log likelihood
(each space's lengthscales scored under the prior fitted to the other spaces), so a network is
used only where it predicts unseen spaces better than the shared Gamma. (This is
``pretrain(lengthscale="auto")``, not the default: on HPO-B and the synthetic super-dataset S its
better held-out likelihood did not buy a lower BO regret than the paper's network.)

Every (fold, strength) pair is an independent network; all are trained in one batched Adam run
(Adam's update is elementwise, so batching changes nothing but the speed).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from headstart.mphd.prior_model import GAMMA_FLOOR, network_gammas

NETWORK_ITERATIONS = 2000
NETWORK_LR = 1e-2
HIDDEN = 16
STRENGTHS = (0.0, 0.3, 1.0, 3.0, 10.0)  # lambda, the pull toward the shared Gamma (0: the paper's)
STEP2 = "MPHD step 2: the lengthscale network"
Progress = Callable[[str, int, int], None]


def gamma_mle(x: np.ndarray) -> tuple[float, float]:
    r"""Maximum-likelihood Gamma ``(shape a, rate b)`` of positive samples (SciPy, ``loc = 0``).

    Samples that are (nearly) all equal give a Gamma concentrated at their mean (``a = 1e4``).
    """
    import scipy.stats

    from headstart.exceptions import PretrainingDataError

    x = np.asarray(x, dtype=np.float64)
    x = x[np.isfinite(x) & (x > 0)]
    if len(x) == 0:
        raise PretrainingDataError("No positive estimate to fit a Gamma prior to.")
    if len(x) < 2 or float(np.std(np.log(x))) < 1e-6:
        return 1e4, 1e4 / float(np.mean(x))
    a, _, scale = scipy.stats.gamma.fit(x, floc=0.0)
    return float(a), float(1.0 / scale)


def _special(x):
    """``(lgamma, digamma, log)`` for torch tensors or numpy values, whichever ``x`` is."""
    import torch

    if isinstance(x, torch.Tensor):
        return torch.lgamma, torch.digamma, torch.log
    from scipy.special import digamma, gammaln

    return gammaln, digamma, np.log


def gamma_log_pdf(x, a, b):
    """``log Gamma(x | a, b)`` (shape ``a``, rate ``b``), for numpy arrays or torch tensors."""
    lgamma, _, log = _special(a)
    return a * log(b) - lgamma(a) + (a - 1.0) * log(x) - b * x


def gamma_kl(a1, b1, a2, b2):
    r"""``KL(Gamma(a1, b1) || Gamma(a2, b2))`` (shapes ``a``, rates ``b``), closed form:

    (a1 - a2) psi(a1) - ln G(a1) + ln G(a2) + a2 (ln b1 - ln b2) + a1 (b2 - b1) / b1

    Elementwise on torch tensors or numpy arrays; a float for floats.
    """
    lgamma, digamma, log = _special(a1)
    kl = (
        (a1 - a2) * digamma(a1)
        - lgamma(a1)
        + lgamma(a2)
        + a2 * (log(b1) - log(b2))
        + a1 * (b2 - b1) / b1
    )
    return float(kl) if np.ndim(kl) == 0 and not hasattr(kl, "requires_grad") else kl


def _inv_softplus(y: float) -> float:
    y = max(float(y) - GAMMA_FLOOR, 1e-12)
    return y + math.log(-math.expm1(-y))


def _standardizer(contexts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    mean = contexts.mean(0)
    std = contexts.std(0)
    return mean, np.where(std > 1e-12, std, 1.0)


def _fit_networks(
    contexts: np.ndarray,
    lengthscales: np.ndarray,
    weights: np.ndarray,
    strengths: np.ndarray,
    *,
    seed: int,
    iterations: int,
    progress: Progress | None,
) -> tuple[list[list], np.ndarray, np.ndarray, np.ndarray]:
    r"""``B`` independent networks in one Adam run: member ``i`` fits the lengthscales with
    ``weights[i] > 0`` (its training set), pulled toward their shared Gamma by ``strengths[i]``.

    Each member standardizes the contexts with its own training rows' mean and sd and starts at
    its shared Gamma (zero output weights, bias = its inverse softplus), so ``lambda`` only ever
    trades training fit for closeness to that Gamma. The best iterate of each member is kept.

    Returns:
        ``(layers per member, feature means B x F, feature sds B x F, final losses B)``.
    """
    import torch

    B, F = len(weights), contexts.shape[1]
    means, stds, shared = np.zeros((B, F)), np.ones((B, F)), np.zeros((B, 2))
    per_set: dict[bytes, tuple] = {}  # members with one training set (strengths) share these
    for i, w in enumerate(weights):
        mask = w > 0
        if mask.tobytes() not in per_set:
            per_set[mask.tobytes()] = (
                *_standardizer(contexts[mask]),
                gamma_mle(lengthscales[mask]),
            )
        means[i], stds[i], shared[i] = per_set[mask.tobytes()]
    # a space's dimensions share a context per kind: run the network on the distinct ones
    distinct, rows = np.unique(contexts, axis=0, return_inverse=True)
    h0 = torch.from_numpy((distinct[None] - means[:, None]) / stds[:, None])  # B x U x F
    rows = torch.from_numpy(rows.reshape(-1))
    ell = torch.from_numpy(np.asarray(lengthscales, dtype=np.float64))
    w = torch.from_numpy(weights / weights.sum(1, keepdims=True))
    lam = torch.from_numpy(np.asarray(strengths, dtype=np.float64))
    a0, b0 = (torch.from_numpy(shared[:, j : j + 1]) for j in (0, 1))
    gen = torch.Generator().manual_seed(int(seed))
    sizes = [F, HIDDEN, HIDDEN, 2]
    params = []
    for k in range(len(sizes) - 1):
        fan_in, fan_out = sizes[k], sizes[k + 1]
        last = k == len(sizes) - 2
        bound = 0.0 if last else 1.0 / math.sqrt(fan_in)
        W = (torch.rand(fan_out, fan_in, generator=gen, dtype=torch.float64) * 2 - 1) * bound
        W = W.expand(B, fan_out, fan_in).clone()  # one initialization for every member
        b = torch.zeros(B, fan_out, dtype=torch.float64)
        if last:
            b = torch.tensor(
                [[_inv_softplus(x), _inv_softplus(y)] for x, y in shared], dtype=torch.float64
            )
        params += [W.requires_grad_(True), b.requires_grad_(True)]

    def losses() -> torch.Tensor:
        h = h0
        for k in range(0, len(params), 2):
            h = h @ params[k].transpose(1, 2) + params[k + 1][:, None, :]
            if k < len(params) - 2:
                h = torch.tanh(h)
        ab = torch.nn.functional.softplus(h[:, rows]) + GAMMA_FLOOR
        a, b = ab[..., 0], ab[..., 1]
        nll = -(w * gamma_log_pdf(ell, a, b)).sum(1)
        return nll + lam * (w * gamma_kl(a, b, a0, b0)).sum(1)

    opt = torch.optim.Adam(params, lr=NETWORK_LR)
    best_loss = torch.full((B,), math.inf, dtype=torch.float64)
    best = [p.detach().clone() for p in params]
    for done in range(iterations + 1):
        if progress is not None and done and done % 50 == 0:
            progress(STEP2, done, iterations)
        loss = losses()
        with torch.no_grad():  # keep each member's best iterate (Adam's path is not monotone)
            better = loss < best_loss
            for kept, now in zip(best, params, strict=True):
                kept[better] = now[better]
            best_loss = torch.where(better, loss, best_loss)
        if done == iterations:
            break
        opt.zero_grad()
        loss.sum().backward()
        opt.step()
    layers = [
        [(best[k][i].numpy(), best[k + 1][i].numpy()) for k in range(0, len(best), 2)]
        for i in range(B)
    ]
    return layers, means, stds, best_loss.numpy()


def fit_lengthscale_network(
    contexts: np.ndarray,
    lengthscales: np.ndarray,
    *,
    strength: float = 0.0,
    seed: int = 0,
    iterations: int = NETWORK_ITERATIONS,
    progress: Progress | None = None,
) -> tuple[list, np.ndarray, np.ndarray, float]:
    r"""The network ``context -> (a, b)`` on all the lengthscales, pulled toward their shared
    Gamma by ``strength`` (``lambda`` in the module docstring; 0 is the paper's fit).

    Returns:
        ``(layers [(W, b), ...], feature mean, feature std, final loss)``.
    """
    contexts = np.asarray(contexts, dtype=np.float64)
    lengthscales = np.asarray(lengthscales, dtype=np.float64)
    layers, means, stds, loss = _fit_networks(
        contexts,
        lengthscales,
        np.ones((1, len(lengthscales))),
        np.array([strength]),
        seed=seed,
        iterations=iterations,
        progress=progress,
    )
    return layers[0], means[0], stds[0], float(loss[0])


@dataclass(frozen=True)
class Selection:
    r"""What :func:`select_lengthscale_prior` chose, and the held-out evidence for it.

    Attributes:
        chosen: ``"network"`` or ``"shared"``.
        strength: The chosen ``lambda`` (``None`` for the shared Gamma).
        heldout: Mean held-out log likelihood per candidate (``"shared"``, ``"lambda=0"``, ...):
            each space's step-1 lengthscales under the prior fitted without that space, averaged
            over all lengthscales.
        per_space: ``{space: {candidate: mean log likelihood of its lengthscales}}``.
    """

    chosen: str
    strength: float | None
    heldout: dict[str, float]
    per_space: dict[str, dict[str, float]]

    def to_json(self) -> dict:
        best = "shared" if self.strength is None else _label(self.strength)
        return {
            "chosen": self.chosen,
            "strength": self.strength,
            "criterion": "leave-one-space-out mean log likelihood of the step-1 lengthscales",
            "reason": f"{best} has the highest held-out log likelihood "
            f"({self.heldout[best]:.3f}; the shared Gamma {self.heldout['shared']:.3f})",
            "heldout_loglik": self.heldout,
            "heldout_loglik_per_space": self.per_space,
        }


def _label(strength: float) -> str:
    return f"lambda={strength:g}"


def select_lengthscale_prior(
    spaces: Sequence[str],
    contexts: Sequence[np.ndarray],
    lengthscales: Sequence[np.ndarray],
    *,
    strengths: Sequence[float] = STRENGTHS,
    seed: int = 0,
    iterations: int = NETWORK_ITERATIONS,
    progress: Progress | None = None,
) -> tuple[Selection, tuple[list, np.ndarray, np.ndarray, float] | None]:
    r"""Choose between the shared Gamma and a network with each pull in ``strengths`` by
    leave-one-space-out log likelihood, and fit the winner on every space.

    Args:
        spaces, contexts, lengthscales: Per training space: its name, its ``d x 4`` contexts
            and its ``d`` step-1 lengthscales.

    Returns:
        ``(selection, network)``: ``network`` is :func:`fit_lengthscale_network`'s output on all
        spaces at the chosen strength, ``None`` when the shared Gamma wins (ties go to it: it
        is the simpler prior).
    """
    names = list(spaces)
    owner = np.concatenate([np.full(len(e), i) for i, e in enumerate(lengthscales)])
    X = np.vstack(contexts).astype(np.float64)
    ell = np.concatenate(lengthscales).astype(np.float64)
    folds = len(names)
    strengths = [float(s) for s in strengths]
    # members: (fold, strength) for every held-out fold, then (all spaces, strength)
    train = np.array([owner != f for f in range(folds)] + [np.ones_like(owner, bool)], float)
    weights = np.repeat(train, len(strengths), axis=0)
    lam = np.tile(strengths, folds + 1)
    layers, means, stds, losses = _fit_networks(
        X, ell, weights, lam, seed=seed, iterations=iterations, progress=progress
    )
    scores: dict[str, np.ndarray] = {"shared": np.zeros(len(ell))}
    for f in range(folds):
        held = owner == f
        a0, b0 = gamma_mle(ell[~held])
        scores["shared"][held] = gamma_log_pdf(ell[held], a0, b0)
    for j, s in enumerate(strengths):
        scores[_label(s)] = np.zeros(len(ell))
        for f in range(folds):
            held, i = owner == f, f * len(strengths) + j
            a, b = network_gammas(layers[i], means[i], stds[i], X[held])
            scores[_label(s)][held] = gamma_log_pdf(ell[held], a, b)
    heldout = {k: float(v.mean()) for k, v in scores.items()}
    per_space = {
        name: {k: float(v[owner == f].mean()) for k, v in scores.items()}
        for f, name in enumerate(names)
    }
    best = max(heldout, key=lambda k: (heldout[k], k == "shared"))
    if best == "shared":
        return Selection("shared", None, heldout, per_space), None
    j = [_label(s) for s in strengths].index(best)
    i = folds * len(strengths) + j
    network = (layers[i], means[i], stds[i], float(losses[i]))
    return Selection("network", strengths[j], heldout, per_space), network


__all__ = [
    "STRENGTHS",
    "Selection",
    "fit_lengthscale_network",
    "gamma_kl",
    "gamma_log_pdf",
    "gamma_mle",
    "select_lengthscale_prior",
]
