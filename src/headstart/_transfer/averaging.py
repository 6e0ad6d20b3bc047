r"""Bayesian model averaging of two or more posteriors, matched to the mixture's first two moments.

ScaML-GP's hand-over (:class:`headstart._transfer.scaml.ScaML`, ``handover_mode="average"``)
keeps both the transfer posterior and the target-only GP and weights them by how well each
explains the target's observations: with ``E_k = log p(y | model k)`` the raw-unit log evidence
(:func:`headstart._transfer.scaml.raw_log_evidence`) and equal prior odds shifted by a margin,

    w_k = exp(E_k - margin_k) / sum_j exp(E_j - margin_j)              (posterior model odds)

The average of the predictive distributions is the mixture ``sum_k w_k N(m_k, v_k)``. The engine's
criteria read a mean and a variance, so the mixture is replaced by the Gaussian with its mean and
variance (the law of total variance):

    m = sum_k w_k m_k,     v = sum_k w_k v_k + sum_k w_k (m_k - m)^2

and, for joint predictions, ``C = sum_k w_k (C_k + m_k m_k^T) - m m^T``. Where the models agree
this is each of them; where they disagree the variance grows by their spread, which is where a
search should look before trusting either. Each part speaks in its own units; ``shift`` and
``factor`` map them to the common ones (``common = shift + factor * own``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from headstart._engine.protocols import Posterior, cheapest_search

MIN_PART_WEIGHT = 1e-4  # parts below this weight are dropped (renormalized): they change nothing


def evidence_weights(log_evidence: np.ndarray, margins: np.ndarray | None = None) -> np.ndarray:
    r"""Posterior model probabilities ``softmax(E - margin)`` (equal prior odds when no margin).

    Example:
        >>> evidence_weights(np.array([0.0, np.log(3.0)])).round(3).tolist()
        [0.25, 0.75]
    """
    e = np.asarray(log_evidence, dtype=np.float64)
    if margins is not None:
        e = e - np.asarray(margins, dtype=np.float64)
    w = np.exp(e - e.max())
    return w / w.sum()


@dataclass(frozen=True)
class Part:
    """One model of the average: its posterior, weight, and the map to the common units."""

    posterior: Posterior
    weight: float
    shift: float = 0.0
    factor: float = 1.0


class AveragedPosterior:
    r"""The moment-matched average of :class:`Part` posteriors (see the module docstring).

    Parts whose weight is below :data:`MIN_PART_WEIGHT` are dropped and the rest renormalized.
    Every part must describe the latent ``f`` (``includes_noise = False``), or every part the
    observation.

    Args:
        parts: At least one part; weights ``>= 0`` with a positive sum.
    """

    def __init__(self, parts: list[Part]) -> None:
        kept = [p for p in parts if p.weight >= MIN_PART_WEIGHT] or [
            max(parts, key=lambda p: p.weight)
        ]
        total = sum(p.weight for p in kept)
        self.parts = [Part(p.posterior, p.weight / total, p.shift, p.factor) for p in kept]
        noise = {bool(p.posterior.includes_noise) for p in self.parts}
        if len(noise) != 1:
            raise ValueError("every averaged posterior must include noise, or none.")
        self.includes_noise = noise.pop()
        self.weights = np.array([p.weight for p in self.parts])
        self.outputscale = float(
            sum(p.weight * p.factor**2 * p.posterior.outputscale for p in self.parts)
        )
        heaviest = self.parts[int(np.argmax(self.weights))].posterior
        self.lengthscales = heaviest.lengthscales  # preconditions the search like the main part
        cheapest_search(self, [p.posterior for p in self.parts])

    def _moments(self, X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Every part's mean and variance at ``X`` in the common units (``k x m`` each)."""
        means, variances = [], []
        for p in self.parts:
            m, v = p.posterior.posterior(X)
            means.append(p.shift + p.factor * m)
            variances.append(p.factor**2 * v)
        return np.array(means), np.array(variances)

    def posterior(self, X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Mixture mean and variance at ``X`` (``m x d``)."""
        means, variances = self._moments(X)
        w = self.weights[:, None]
        mean = (w * means).sum(0)
        var = (w * (variances + (means - mean) ** 2)).sum(0)
        return mean, np.maximum(var, 1e-12)

    def posterior_and_grad(
        self, X: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        r"""Mean, variance and their input gradients:

        dm = sum_k w_k dm_k,   dv = sum_k w_k (dv_k + 2 (m_k - m) dm_k)
        """
        outs = []
        for p in self.parts:
            m, v, dm, dv = p.posterior.posterior_and_grad(X)
            f = p.factor
            outs.append((p.shift + f * m, f * f * v, f * dm, f * f * dv))
        means = np.array([o[0] for o in outs])
        w = self.weights
        mean = np.einsum("k,km->m", w, means)
        var = np.zeros_like(mean)
        dmean = np.zeros_like(outs[0][2])
        dvar = np.zeros_like(outs[0][3])
        for wk, (mk, vk, dmk, dvk) in zip(w, outs, strict=True):
            gap = mk - mean
            var += wk * (vk + gap * gap)
            dmean += wk * dmk
            dvar += wk * (dvk + 2.0 * gap[:, None] * dmk)
        return mean, np.maximum(var, 1e-12), dmean, dvar

    def joint_posterior(self, X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Mixture mean and covariance ``sum_k w_k (C_k + m_k m_k^T) - m m^T`` at ``X``."""
        mean = np.zeros(X.shape[0])
        second = np.zeros((X.shape[0], X.shape[0]))
        for p in self.parts:
            m, C = p.posterior.joint_posterior(X)
            m = p.shift + p.factor * m
            mean += p.weight * m
            second += p.weight * (p.factor**2 * C + np.outer(m, m))
        cov = second - np.outer(mean, mean)
        return mean, 0.5 * (cov + cov.T)

    def fantasize(self, X: np.ndarray, y: np.ndarray) -> AveragedPosterior:
        r"""Every part after also observing ``y`` (common units) at ``X``, at the same weights.

        Part ``k`` observes ``m_k(X) + (y - m(X))``: the residual from the average is shared. At
        the engine's kriging-believer values ``y = m(X)`` each part so observes its own mean, as
        it would alone: no mean moves, every variance shrinks at ``X``, and the order of the
        fantasies does not matter.
        """
        means = self._moments(X)[0]  # k x p, common units
        residual = np.asarray(y, dtype=np.float64) - self.weights @ means
        parts = []
        for p, mean in zip(self.parts, means, strict=True):
            own = (mean + residual - p.shift) / p.factor  # m_k(X) + residual, in its own units
            parts.append(Part(p.posterior.fantasize(X, own), p.weight, p.shift, p.factor))
        return AveragedPosterior(parts)


__all__ = ["AveragedPosterior", "Part", "evidence_weights"]
