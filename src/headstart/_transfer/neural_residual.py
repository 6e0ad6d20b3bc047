r"""A residual GP beside the neural basis: the target is ``f(x) = phi(x)^T w + g(x)`` (issue 32).

ABLR and ABRAC (:mod:`.neural`) model the target as a linear head on a frozen basis ``phi``
trained on the sources. A frozen basis cannot represent what the sources did not show, so the
head stops improving once it has fitted what it can (ABRAC ended at regret 1.2 on the
quadratics, where GP-BO reaches 0.005). Following ScaML-GP's residual kernel (Tighineanu et al.
2024, Eq. 6: a prior from the sources plus a target-only GP), the target here is

    w ~ N(0, A^{-1}),  A = diag(alpha),   g ~ GP(0, s k_Matern52(. / ell)),   y = f + eps,

that is a GP with the kernel ``k(x, x') = phi(x)^T A^{-1} phi(x') + s k_M(x, x')``. With
``K = Phi A^{-1} Phi^T + s K_M + sigma^2 I = L L^T`` and ``a = K^{-1} y`` (Rasmussen & Williams
2006, Eqs. 2.25-2.30):

    mean(x) = k(x, X) a,      var(x) = phi^T A^{-1} phi + s - ||L^{-1} k(X, x)||^2
    NLL     = 1/2 y^T a + sum_i log L_ii + n/2 log 2 pi
    d NLL / d theta = -1/2 tr((a a^T - K^{-1}) dK / d theta)                     (R&W Eq. 5.9)

The model nests both parts: ``s -> 0`` is the BLR head, ``alpha -> inf`` is GP-BO's Matérn GP.
Its hyperparameters ``(log alpha, log ell, log s, log sigma^2)`` are fitted by MAP under
:data:`RESIDUAL_HYPERPRIOR`: GP-BO's lengthscale and noise priors, and ScaML-GP's prior of its
residual's scale, ``s ~ LogNormal(-2, 3)`` (Tighineanu et al. 2024, App. C.5; median 0.14 of the
standardized targets' variance). The precisions are fitted by evidence alone, as the head's.
(The fits differ from GP-BO's in their boxes too: the precisions stop at ``e^12``, the
residual's lengthscales and scale have their own bounds, and noise-free objectives pin the noise
at 1e-8 here, 1e-6 in GP-BO.)

Starts: the BLR head's own fit with a small residual, the head with a unit residual and little
noise (where the head had left everything to noise, the first start is stationary), and the
previous fit.

Why not GP-BO's ``s ~ Gamma(2, 1)``, under which ``alpha -> inf`` was exactly GP-BO's MAP
objective: that prior says the residual is as large as the whole signal. With 3 target points
(the initial design) the data cannot say otherwise, so the residual carried them and the first
suggestions were GP-BO's: on forrester-loo (30 seeds) the mean regret at trial 5 was 3.5 with it
and 1.2 with ScaML-GP's prior (and one precision in ABRAC's head, :mod:`.neural`), against 1.1
for the papers' ABLR-SGD-fixed and 5.3 for GP-BO (``docs/benchmarks/abrac_diagnosis.md``,
finding 5; the default's figures are in ``abrac.md``).

The residual's lengthscale prior was ScaML-GP's too (App. C.5: ``ell ~ LogNormal(0.5, 1.5)``),
made for a residual beside meta-GPs that already carry the shape. On HPO-B's SVM space (5891,
leave one data set out, 12 seeds), where the basis trained on the other data sets explains
little of the held-out one, the head's precisions sat at their bound and
that prior let the residual's lengthscales on the one-hot columns fall to 0.14-0.17 (a trace of
seed 0's fits): every combination of those columns uncorrelated with the others, so seed 0
spent trials 2-17 on new combinations at the median's value (regret 0.99; GP-BO left it at
trial 5). Under GP-BO's prior the same seed reached the pool's best at trial 7; over the 12
seeds, mean regret at trial 25 went from 0.156 to 0.105 (GP-BO 0.122;
``docs/benchmarks/abrac.md``, issue 32).
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import scipy.linalg
import torch

from headstart._engine.numerics import robust_cholesky
from headstart._engine.protocols import with_search
from headstart._gp.fit import minimize, row_by_row
from headstart._gp.hyperprior import DEFAULT_HYPERPRIOR, SCAML_TEST_HYPERPRIOR
from headstart._gp.kernels import (
    matern52_np,
    matern52_value_np,
    scaled_numeric,
    sq_dist_np,
    sq_dist_scaled,
)
from headstart._transfer.blr import LOG_ALPHA_BOUNDS, BLRFit
from headstart._transfer.features import FeatureNet
from headstart.exceptions import ModelFittingError

LOG_ELL_BOUNDS = (math.log(5e-3), math.log(20.0))
LOG_S_BOUNDS = (-14.0, 3.0)  # s -> 0: the residual is off and the model is the BLR head
LOG_NOISE_BOUNDS = (math.log(1e-8), 0.0)
# Noise-free objectives: sigma^2 pinned here (standardized units). At the Matérn GP's 1e-6 the
# model cannot resolve differences below ~1e-3 standard deviations: ABRAC with the residual
# stopped at regret 0.017 and 0.052 on quadratic-loo targets 0 and 3 (values of sd ~50); at
# 1e-8 it went on to 2e-4 and 2e-3 by trial 50.
DETERMINISTIC_LOG_NOISE = math.log(1e-8)
START_LOG_S = math.log(1e-3)  # the first start: the head's fit and a small residual
START_LOG_ELL = 0.5  # the first start's residual lengthscales (e^0.5 = 1.6)
# past the exact block: the rest points each start of the local search adds (see .focus)
FOCUS_NEIGHBOURS = 5
# the residual's prior (module docstring): GP-BO's lengthscales and noise, ScaML-GP's scale
RESIDUAL_HYPERPRIOR = dataclasses.replace(
    DEFAULT_HYPERPRIOR, outputscale=SCAML_TEST_HYPERPRIOR.outputscale
)


def _sq_diffs(X: np.ndarray, Z: np.ndarray, is_cat: np.ndarray) -> np.ndarray:
    """``m x n x d`` squared differences per column (0 / 1 for categorical columns): what the
    fit's lengthscale gradient needs; predictions use :func:`~headstart._gp.kernels.sq_dist_np`
    (no ``m x n x d`` temporary)."""
    diff = X[:, None, :] - Z[None, :, :]
    return np.where(is_cat, diff != 0, diff * diff)


class ResidualPosterior:
    """The posterior of ``f = phi^T w + g`` at fixed hyperparameters (module docstring)."""

    includes_noise = False

    def __init__(
        self,
        net: FeatureNet,
        r: int,
        X: np.ndarray,
        y: np.ndarray,
        is_cat: np.ndarray,
        theta: np.ndarray,
        sq_diffs: np.ndarray | None = None,
        w_prior: tuple[np.ndarray, np.ndarray] | None = None,
        Phi: np.ndarray | None = None,
        rest_evidence: float = 0.0,
        rest: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None,
        mean_from: ResidualPosterior | None = None,
    ) -> None:
        """``sq_diffs``: :func:`_sq_diffs` of ``X`` with itself as ``n^2 x d``, and ``Phi`` the
        first ``r`` features of ``X``, when the caller has them (the fit does). ``w_prior``: the
        weights' prior ``N(m0, C0)`` in place of ``N(0, A^{-1})`` (:func:`fit_residual` with
        ``max_points``: what the points outside the exact block say), and ``rest_evidence``
        their log evidence (:func:`rest_weight_prior`). ``rest``: those points ``(X_R, y_R,
        Phi_R)``; each prediction is then conditioned on its nearest one as well
        (:meth:`_rest_tables`). ``mean_from``: the posterior whose rest correction of the mean
        this one keeps (:meth:`fantasize`)."""
        self.net, self.r, self.is_cat = net, r, np.asarray(is_cat, dtype=bool)
        self.X, self.y = np.asarray(X, dtype=np.float64), np.asarray(y, dtype=np.float64)
        self.theta = np.asarray(theta, dtype=np.float64)
        k, d = len(self.theta) - X.shape[1] - 2, X.shape[1]
        log_alpha = self.theta[:k]
        self.inv_alpha = np.broadcast_to(np.exp(-log_alpha), (r,)).copy()
        self.w_prior = w_prior
        self.m0, self.C0 = (
            w_prior if w_prior is not None else (np.zeros(r), np.diag(self.inv_alpha))
        )
        self.lengthscales = np.exp(self.theta[k : k + d])
        self.w = self.lengthscales**-2.0
        self._two_w = 2.0 * np.where(self.is_cat, 0.0, self.w)  # d r^2 / dx = 2 w (x - z)
        self.s = float(np.exp(self.theta[k + d]))
        self.noise = float(np.exp(self.theta[k + d + 1]))
        self.outputscale = 1.0  # standardized targets: the prior variance's scale
        self.Phi = self._features(self.X) if Phi is None else Phi
        n = len(self.y)
        self._train_half = None  # without categorical columns: sq_dist_np's training side
        if not self.is_cat.any():
            self._root_w = np.sqrt(self.w)
            self._train_half = scaled_numeric(self.X, self.is_cat, self.w)
        if sq_diffs is None:  # (fantasies, focus): no n x n x d temporary
            r2 = sq_dist_np(self.X, self.X, self.is_cat, self.w)
            np.fill_diagonal(r2, 0.0)
        else:
            r2 = (sq_diffs @ self.w).reshape(n, n)  # exact zeros on the diagonal
        self.PC = self.Phi @ self.C0  # n x r
        K = self.PC @ self.Phi.T + self.s * matern52_value_np(r2)
        K[np.diag_indices(len(y))] += self.noise
        self.L = robust_cholesky(torch.from_numpy(K)).numpy()
        # L^{-1} once per conditioning: the search's ~30 batched evaluations per suggestion
        # then multiply by it (two small products) instead of two triangular solves, whose
        # SciPy wrappers cost more than the products at n <= 100 (issue 32, item 4)
        self.L_inv = scipy.linalg.solve_triangular(
            self.L, np.eye(n), lower=True, check_finite=False
        )
        resid = self.y - self.Phi @ self.m0
        self.a = scipy.linalg.cho_solve((self.L, True), resid)
        self._c = self.m0 + self.PC.T @ self.a  # the feature part of the mean's weights
        self.mll = float(
            -0.5 * resid @ self.a
            - np.log(np.diagonal(self.L)).sum()
            - 0.5 * len(y) * math.log(2 * math.pi)
        )
        """Log marginal likelihood of the standardized targets (given ``w_prior``'s data)."""
        self.rest_evidence = float(rest_evidence)
        self.log_evidence = self.mll + self.rest_evidence
        """The whole data's: the exact block's given the rest, plus the rest's (with local
        blocks the hyperparameters are the block's fit, so the rest may be scored poorly)."""
        self.rest = rest if rest is not None and len(rest[1]) else None
        self._mean_from = mean_from
        if self.rest is not None:
            self._rest_tables(*self.rest)

    def _rest_tables(self, X_R: np.ndarray, y_R: np.ndarray, Phi_R: np.ndarray) -> None:
        r"""What conditioning a prediction on its nearest rest point as well needs.

        Outside the exact block a point's residual is counted as noise (:func:`fit_residual`),
        so the block's posterior keeps the residual's prior variance ``s`` right next to an
        evaluated rest point: on FC-Net-naval (seed 6, trials 101-140) 95% of the suggestions
        landed beside such points, where the block's variance was 4.3e4 times the exact
        model's (median; ``docs/benchmarks/abrac_local_rest.md``), and over 10 seeds the regret
        did not move from trial 100 to 200. Each prediction at ``x`` is therefore also
        conditioned on its nearest rest point ``j`` (in the residual's lengthscales), a
        one-neighbour Vecchia correction (Vecchia 1988; Katzfuss & Guinness 2021) of the
        block's posterior ``(mu_b, Sigma_b)``:

            c(x) = Sigma_b(x, x_j) = k(x, x_j) - k(x, B) K^{-1} k(B, x_j)
            mean(x) = mu_b(x) + c(x) (y_j - mu_b(x_j)) / (v_j + sigma^2)
            var(x)  = var_b(x) - c(x)^2 / (v_j + sigma^2),     v_j = Sigma_b(x_j, x_j)

        which is the exact posterior given the block and ``y_j`` (``y_j`` is then counted twice
        in the weights, once through ``w_prior``: one point among the rest). It jumps where the
        nearest point changes, so the local search climbs :meth:`focus` instead. Per rest point
        this keeps ``V_j = L^{-1} k(B, x_j)``, ``U_j = K^{-1} k(B, x_j)``, ``C0 phi_j``,
        ``1 / (v_j + sigma^2)`` and ``(y_j - mu_b(x_j)) / (v_j + sigma^2)``, and, without
        categorical columns, the scaled points for the neighbour search."""
        F = np.asarray(Phi_R, dtype=np.float64)[:, : self.r]
        k = self._k_train(X_R, F)
        V = k @ self.L_inv.T
        v = np.maximum(self._prior_var(F) - (V * V).sum(1), 0.0)
        self._rest_X = np.asarray(X_R, dtype=np.float64)
        self._rest_V, self._rest_FC = V, F @ self.C0
        self._rest_U: np.ndarray | None = None  # V L^{-1}, made when a gradient first needs it
        self._rest_inv = 1.0 / (v + self.noise)
        if self._mean_from is None:  # (a fantasized posterior's mean correction is its base's)
            self._rest_shift = (y_R - (F @ self.m0 + k @ self.a)) * self._rest_inv
        self._rest_scaled = None
        self._rest_scale = float((self._rest_X**2 @ self.w).max())  # for _nearest's tolerance
        if not self.is_cat.any():
            scaled = self._rest_X * self._root_w
            self._rest_scaled, self._rest_sq_norm = -2.0 * scaled.T, (scaled * scaled).sum(1)

    def _train_sq_dist(self, X: np.ndarray) -> np.ndarray:
        """``sq_dist_np(X, self.X, ...)`` with the training side made once per conditioning
        (the same helpers, so the same bits): the search calls it ~30 times a suggestion."""
        if self._train_half is None:
            return sq_dist_np(X, self.X, self.is_cat, self.w)
        return sq_dist_scaled(*scaled_numeric(X, self.is_cat, self.w), *self._train_half)

    def _rest_dist(self, X: np.ndarray) -> np.ndarray:
        """``m x n_R`` distances to the rest points in matrix form, up to a constant per row
        (without categorical columns ``|x_R|^2 - 2 x.x_R``, one matmul): for ranking only."""
        if self._rest_scaled is None:
            return sq_dist_np(X, self._rest_X, self.is_cat, self.w)
        D = (X * self._root_w) @ self._rest_scaled
        D += self._rest_sq_norm
        return D

    def _nearest(self, X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Each row's nearest rest point and its scaled squared distance, summed column by
        column; of equally near points (grids, categories) the first. The matrix form only
        shortlists (its rounding depends on how many rows a call has), so a row's neighbour,
        like every other part of its prediction, depends on that row alone."""
        dist = self._rest_dist(X)
        every = np.arange(len(X))
        j = np.argmin(dist, axis=1)
        low = dist[every, j]
        bound = low + 1e-9 * (np.abs(low) + (X * X) @ self.w + self._rest_scale)
        dist[every, j] = np.inf  # is the runner-up within the tolerance too?
        tied = np.flatnonzero(dist.min(axis=1) <= bound)
        if len(tied):  # equally near by the matrix form: the first by exact distance
            dist[tied, j[tied]] = low[tied]
            rows, cols = np.nonzero(dist[tied] <= bound[tied, None])
            rows = tied[rows]
            exact = self._paired_sq_dist(X[rows], self._rest_X[cols])
            order = np.lexsort((cols, exact, rows))  # by row, then distance, then index
            first = order[np.r_[True, rows[order][1:] != rows[order][:-1]]]
            j[rows[first]] = cols[first]
        return j, self._paired_sq_dist(X, self._rest_X[j])

    def _paired_sq_dist(self, A: np.ndarray, B: np.ndarray) -> np.ndarray:
        """Scaled squared distances of the rows of ``A`` to the same rows of ``B``, summed
        column by column (each row's bits independent of the others)."""
        diff = A - B
        return (np.where(self.is_cat, diff != 0, diff * diff) * self.w).sum(axis=1)

    def _rest_cov(self, X, F, J, V, G, j, r2):
        """``c(x)`` (:meth:`_rest_tables`) against rest point ``j`` of each row and, with ``J``
        (the features' Jacobian) and ``G`` (``s f'(r^2)`` against the block), its gradient."""
        f, df = matern52_np(r2)
        FC, Vj = self._rest_FC[j], self._rest_V[j]
        c = (F * FC).sum(1) + self.s * f - (V * Vj).sum(1)
        if J is None:
            return c, None
        if self._rest_U is None:  # (the search climbs focus(), so only some gradients need it)
            self._rest_U = self._rest_V @ self.L_inv
        Uj = self._rest_U[j]
        Gu = G * Uj  # d k(x, B) U_j: the block's mean gradient with a -> U_j, row by row
        dk_rest = (self.s * df)[:, None] * (X - self._rest_X[j])
        dk_block = X * Gu.sum(1)[:, None] - Gu @ self.X
        dc = ((FC - Uj @ self.PC)[:, None, :] @ J)[:, 0] + self._two_w * (dk_rest - dk_block)
        return c, dc

    def _mean_shift(self, X, F, J, j, r2):
        """The rest correction of the mean, ``c(x) (y_j - mu_b(x_j)) / (v_j + sigma^2)``, by
        this posterior's block (a fantasized one defers to ``mean_from``), and with ``J`` (the
        Jacobian of the features ``F`` of ``X``) its gradient, else ``None``."""
        if self._mean_from is not None:
            return self._mean_from._mean_shift(X, F, J, j, r2)
        G = None
        if J is None:
            k = self._k_train(X, F)
        else:
            f, df = matern52_np(self._train_sq_dist(X))
            k, G = F @ self.PC.T + self.s * f, self.s * df
        c, dc = self._rest_cov(X, F, J, k @ self.L_inv.T, G, j, r2)
        return self._rest_mean(X, F, J, j, r2, c, dc)

    def _rest_mean(self, X, F, J, j, r2, c, dc):
        """The rest correction of the mean and, with ``J``, its gradient, from this block's
        ``c(x)`` (and ``dc``): ``c (y_j - mu_b(x_j)) / (v_j + sigma^2)``, or for a fantasized
        posterior its base's (:meth:`_mean_shift`)."""
        if self._mean_from is not None:
            return self._mean_from._mean_shift(X, F, J, j, r2)
        shift = self._rest_shift[j]
        return c * shift, (None if dc is None else dc * shift[:, None])

    def _features(self, X: np.ndarray) -> np.ndarray:
        return self.net.features(np.atleast_2d(X))[:, : self.r]

    def _k_train(self, X: np.ndarray, F: np.ndarray) -> np.ndarray:
        """``k(X, self.X)`` (``m x n``) from ``X``'s features ``F``."""
        k = matern52_value_np(self._train_sq_dist(X))
        k *= self.s
        k += F @ self.PC.T  # in place: m x n temporaries cost page faults (matern52_value_np)
        return k

    def kernel(self, X, Z, FX=None, FZ=None) -> np.ndarray:
        """``k(X, Z) = phi(X) C0 phi(Z)^T + s k_M(X, Z)`` (``C0 = A^{-1}`` by default)."""
        FX = self._features(X) if FX is None else FX
        FZ = self._features(Z) if FZ is None else FZ
        r2 = sq_dist_np(X, Z, self.is_cat, self.w)
        return FX @ self.C0 @ FZ.T + self.s * matern52_value_np(r2)

    def _prior_var(self, F: np.ndarray) -> np.ndarray:
        return ((F @ self.C0) * F).sum(1) + self.s

    def posterior(self, X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        X = np.atleast_2d(np.asarray(X, dtype=np.float64))
        F = self._features(X)
        k = self._k_train(X, F)
        V = k @ self.L_inv.T  # rows L^{-1} k(X, x)
        mean, var = self._with_rest(
            X, F, V, F @ self.m0 + k @ self.a, self._prior_var(F) - (V * V).sum(1)
        )
        return mean, np.maximum(var, 1e-12)

    def _with_rest(self, X, F, V, mean, var):
        """The block's ``mean`` and ``var`` at ``X`` (features ``F``, ``V = L^{-1} k(B, X)``),
        also conditioned on each row's nearest rest point when there are rest points."""
        if self.rest is None:
            return mean, var
        j, r2 = self._nearest(X)
        c, _ = self._rest_cov(X, F, None, V, None, j, r2)
        shift = self._rest_mean(X, F, None, j, r2, c, None)[0]
        return mean + shift, var - c * c * self._rest_inv[j]

    def posterior_and_grad(self, X: np.ndarray):
        r"""Mean and variance with their gradients in ``X``: the feature part through the
        network's Jacobian, the Matérn part as :meth:`headstart._gp.model.ExactGP.
        posterior_and_grad`; categorical columns get 0 in the Matérn part."""
        X = np.atleast_2d(np.asarray(X, dtype=np.float64))
        F, J = self.net.features_and_jacobian(X)
        F, J = F[:, : self.r], J[:, : self.r]  # m x r, m x r x D
        f, df = matern52_np(self._train_sq_dist(X))
        FA = F @ self.C0
        k = F @ self.PC.T + self.s * f  # m x n
        V = k @ self.L_inv.T  # rows L^{-1} k_i
        B = V @ self.L_inv  # rows K^{-1} k_i
        mean = F @ self._c + self.s * (f @ self.a)  # = F m0 + k a
        raw_var = ((FA * F).sum(1) + self.s) - (V * V).sum(1)
        # dk_i/dx = J^T C0 phi_i + s f'(r_i^2) 2 w (x - X_i)
        G = self.s * df
        PA = self.PC  # n x r
        Ga, Gb = G * self.a, G * B
        two_w = self._two_w
        dmean = self._c @ J + two_w * (X * Ga.sum(1)[:, None] - Ga @ self.X)
        # d var = d prior - 2 d k K^{-1} k: the feature parts (2 FA J and 2 (B PA) J) in one
        # product through the Jacobian, then the Matern part
        dvar = (2.0 * (FA - B @ PA)[:, None, :] @ J)[:, 0]
        dvar -= (2.0 * two_w) * (X * Gb.sum(1)[:, None] - Gb @ self.X)
        if self.rest is not None:  # conditioned on the nearest rest point too
            j, r2 = self._nearest(X)
            c, dc = self._rest_cov(X, F, J, V, G, j, r2)
            inv = self._rest_inv[j]
            raw_var = raw_var - c * c * inv
            dvar -= (2.0 * c * inv)[:, None] * dc
            m_shift, dm_shift = self._rest_mean(X, F, J, j, r2, c, dc)
            mean, dmean = mean + m_shift, dmean + dm_shift
        dvar[raw_var < 1e-12] = 0.0
        return mean, np.maximum(raw_var, 1e-12), dmean, dvar

    def joint_posterior(self, X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        X = np.atleast_2d(X)
        F = self._features(X)
        k = self._k_train(X, F)
        V = k @ self.L_inv.T
        cov = self.kernel(X, X, F, F) - V @ V.T
        cov = 0.5 * (cov + cov.T)
        if self.rest is None:
            return F @ self.m0 + k @ self.a, cov
        # each row has its own nearest rest point, so no one conditioning gives every marginal:
        # the block's correlations scaled to the corrected marginals (D R D, a covariance whose
        # diagonal is exactly the marginal variance; StackGP's joint is built so too)
        var_b = self._prior_var(F) - (V * V).sum(1)  # posterior()'s, bit for bit
        mean, var = self._with_rest(X, F, V, F @ self.m0 + k @ self.a, var_b)
        var = np.maximum(var, 1e-12)
        sd_b = np.sqrt(np.maximum(np.diagonal(cov), 1e-12))
        scale = np.sqrt(var) / sd_b
        return mean, cov * np.outer(scale, scale)

    def focus(self, X: np.ndarray) -> ResidualPosterior:
        r"""The posterior the acquisition's local search climbs from the starts ``X``
        (:mod:`headstart._engine.optimize`): the exact block grown by the
        :data:`FOCUS_NEIGHBOURS` rest points nearest each start, and no rest correction.

        Conditioning each prediction on its own nearest rest point (:meth:`posterior`) makes
        the criterion jump where the nearest point changes; L-BFGS-B then took 90 evaluations
        per suggestion at n = 500 and 170 at n = 1,000, against 40 and 37 before the correction
        and 38 and 39 with this stand-in (``docs/benchmarks/abrac_local_rest.md``; blends of
        the 2-3 nearest, tried in scratch runs, still took 200 at n = 1,000). It is a plain GP
        posterior, smooth everywhere, and exact (given the weights' prior) near the starts,
        where the search moves; where a search strays towards rest points it does not hold, the
        engine scores the end point with :meth:`posterior` again. ``self`` without rest points;
        a fantasized posterior gives its base's stand-in with the same fantasies."""
        if self.rest is None:
            return self
        if self._mean_from is not None:
            return self._mean_from.focus(X).fantasize(*self._fantasies)
        X_R, y_R, Phi_R = self.rest
        dist = self._rest_dist(np.atleast_2d(np.asarray(X, dtype=np.float64)))
        k = min(FOCUS_NEIGHBOURS, dist.shape[1])
        j = np.unique(np.argpartition(dist, k - 1, axis=1)[:, :k])
        Phi = np.vstack([self.Phi, np.asarray(Phi_R, dtype=np.float64)[j, : self.r]])
        return ResidualPosterior(
            self.net, self.r, np.vstack([self.X, X_R[j]]), np.concatenate([self.y, y_R[j]]),
            self.is_cat, self.theta, w_prior=self.w_prior, Phi=Phi,
        )  # fmt: skip

    def fantasize(self, X: np.ndarray, y: np.ndarray) -> ResidualPosterior:
        """Condition on more observations at the same hyperparameters (exact for a GP; with
        rest points, the variance is exact).

        With rest points (:meth:`_rest_tables`) the observations join the block, and the rest
        correction of the mean stays the unfantasized posterior's (``mean_from``); the block
        is told ``y`` minus that correction, so fantasies at the posterior mean leave the mean
        unchanged everywhere, and the variance is the exact one given the block, them and the
        nearest rest point."""
        X_new = np.atleast_2d(np.asarray(X, dtype=np.float64))
        y_new = np.asarray(y, dtype=np.float64).reshape(-1)
        told = (X_new, y_new)
        base = self._mean_from if self._mean_from is not None else self
        if self.rest is not None:
            j, r2 = self._nearest(X_new)
            y_new = y_new - base._mean_shift(X_new, self._features(X_new), None, j, r2)[0]
        out = ResidualPosterior(
            self.net, self.r, np.vstack([self.X, X_new]), np.concatenate([self.y, y_new]),
            self.is_cat, self.theta, w_prior=self.w_prior, rest_evidence=self.rest_evidence,
            rest=self.rest, mean_from=base if self.rest is not None else None,
        )  # fmt: skip
        if self._mean_from is not None:  # every fantasy as told, for focus
            told = tuple(np.concatenate(pair) for pair in zip(self._fantasies, told, strict=True))
        out._fantasies = told
        return with_search(out, self)


def valid_init(theta: np.ndarray | None, k: int, d: int) -> bool:
    """Whether ``theta`` can start (or freeze) a fit of ``k`` precisions and ``d`` columns."""
    return theta is not None and len(theta) == k + d + 2 and bool(np.isfinite(theta).all())


def neg_log_posterior(
    theta: np.ndarray,
    Phi: np.ndarray,
    X: np.ndarray,
    y: np.ndarray,
    is_cat: np.ndarray,
    k: int,
    D2: np.ndarray | None = None,
) -> tuple[float, np.ndarray]:
    r"""``(-log p(y | theta) - log p(theta), gradient)`` at ``theta = (log alpha (k = 1 or r),
    log ell (D), log s, log sigma^2)`` (module docstring; the prior is on the residual's part).

    ``D2``: :func:`_sq_diffs` of ``X`` with itself as ``n^2 x d``, which does not depend on
    ``theta`` (a fit computes it once; it was a third of each evaluation's time at n = 500)."""
    n, r = Phi.shape
    d = X.shape[1]
    inv_alpha = np.broadcast_to(np.exp(-theta[:k]), (r,))
    ell = np.exp(theta[k : k + d])
    s, noise = math.exp(theta[k + d]), math.exp(theta[k + d + 1])
    if D2 is None:
        D2 = _sq_diffs(X, X, is_cat).reshape(n * n, d)
    f, df = matern52_np((D2 @ ell**-2.0).reshape(n, n))
    K = (Phi * inv_alpha) @ Phi.T + s * f
    K[np.diag_indices(n)] += noise
    try:
        L = np.linalg.cholesky(K)
    except np.linalg.LinAlgError:
        raise ModelFittingError(
            "The residual model's kernel matrix is not positive definite."
        ) from None
    a = scipy.linalg.cho_solve((L, True), y)
    nll = 0.5 * y @ a + np.log(np.diagonal(L)).sum() + 0.5 * n * math.log(2 * math.pi)
    # dNLL = -1/2 tr(W dK); K^-1 from the factor (LAPACK potri via torch, as the GP's fit)
    W = np.outer(a, a) - torch.cholesky_inverse(torch.from_numpy(L)).numpy()
    g_alpha_r = 0.5 * ((W @ Phi) * Phi).sum(0) * inv_alpha  # dK/dlog a_r = -..
    g_alpha = g_alpha_r if k == r else np.array([g_alpha_r.sum()])
    G = s * df * W  # n x n
    g_ell = (G.reshape(-1) @ D2) * ell**-2.0  # d r2 / d log ell_j = -2 D2_j / ell_j^2
    g_s = -0.5 * s * float((W * f).sum())
    g_noise = -0.5 * noise * float(np.trace(W))
    prior, prior_grad = RESIDUAL_HYPERPRIOR.value_and_grad(
        theta[None, k : k + d], theta[None, k + d], theta[None, k + d + 1]
    )
    value = float(nll) - float(np.asarray(prior)[0])
    grad = np.concatenate([g_alpha, g_ell, [g_s, g_noise]])
    grad[k:] -= np.asarray(prior_grad)[0]
    return value, grad


def nearest_to_incumbent(
    X: np.ndarray, incumbent: int, is_cat: np.ndarray, lengthscales: np.ndarray, m: int
) -> np.ndarray:
    """Indices of the ``m`` rows of ``X`` nearest row ``incumbent``, in lengthscale-scaled
    distance (Hamming on categorical columns), the incumbent first."""
    dist = sq_dist_np(
        X[incumbent][None, :], X, np.asarray(is_cat, dtype=bool), np.asarray(lengthscales) ** -2.0
    )[0]
    dist[incumbent] = -1.0  # first even when another row has the same x
    return np.argsort(dist, kind="stable")[:m]


def rest_weight_prior(
    Phi_rest: np.ndarray, y_rest: np.ndarray, theta: np.ndarray, k: int, d: int
) -> tuple[np.ndarray, np.ndarray, float]:
    r"""The weights' posterior ``N(m0, C0)`` given the points outside the exact subset, each seen
    as ``y_i = phi_i^T w + e_i`` with ``e_i ~ N(0, s + sigma^2)``: the residual there counted as
    independent noise of its prior variance (Bishop 2006, Eqs. 3.50-3.51); and those points' log
    evidence under that model (Eq. 3.86), so that it plus the block's ``mll`` (``log p(y_S |
    y_R)``) is the whole data's under the block-diagonal kernel. With ``tau = 1 / (s + sigma^2)``,
    ``P = A + tau Phi_R^T Phi_R`` and ``b = tau Phi_R^T y_R``:

        C0 = P^{-1},    m0 = C0 b,
        log p(y_R) = 1/2 (sum log alpha + n log tau - log|P| - tau y_R^T y_R + b^T P^{-1} b
                          - n log 2 pi)
    """
    r, n = Phi_rest.shape[1], len(y_rest)
    alpha = np.broadcast_to(np.exp(theta[:k]), (r,))
    tau = 1.0 / (math.exp(theta[k + d]) + math.exp(theta[k + d + 1]))
    P = np.diag(alpha) + tau * (Phi_rest.T @ Phi_rest)
    L = robust_cholesky(torch.from_numpy(P), warn=False).numpy()  # tau ~ 1e8 when noise-free
    C0 = scipy.linalg.cho_solve((L, True), np.eye(r), check_finite=False)
    b = tau * (Phi_rest.T @ y_rest)
    v = scipy.linalg.solve_triangular(L, b, lower=True, check_finite=False)
    log_evidence = 0.5 * (
        float(np.log(alpha).sum())
        + n * math.log(tau)
        - 2.0 * float(np.log(np.diagonal(L)).sum())
        - tau * float(y_rest @ y_rest)
        + float(v @ v)
        - n * math.log(2 * math.pi)
    )
    return C0 @ b, 0.5 * (C0 + C0.T), log_evidence


def fit_residual(
    net: FeatureNet,
    r: int,
    X: np.ndarray,
    y: np.ndarray,
    is_cat: np.ndarray,
    head: BLRFit | None,
    *,
    Phi: np.ndarray | None = None,
    ard: bool,
    deterministic: bool = False,
    init: np.ndarray | None = None,
    warm_only: bool = False,
    max_points: int | None = None,
    frozen: bool = False,
    incumbent: int | None = None,
) -> ResidualPosterior:
    r"""MAP fit of the residual model from the head's fit (and ``init``, a previous ``theta``).

    ``Phi``: the features of ``X`` (at least ``r`` columns), when the caller has them.
    ``warm_only``: fit from ``init`` alone (the caller's schedule decides when the other starts
    run again, as the Matérn GP's does: :func:`headstart._gp.surrogate.default_refit_due`).
    ``frozen``: no fit, ``init`` as it is (a valid ``init`` is required; else it fits); then
    ``head`` may be ``None`` (it only seeds the fit's starts).

    ``max_points``: with more observations than this, the model keeps the residual's
    correlations among the ``max_points`` nearest the incumbent (row ``incumbent``, default the
    largest ``y``; :func:`nearest_to_incumbent`, in the lengthscales of ``init``) and counts the
    residual at the others as independent noise (:func:`rest_weight_prior`). The evidence and
    the weights' prior are those of the kernel whose residual part is block-diagonal -- one
    block for the subset, which every predicted point joins, and one per other point -- in the
    spirit of local-and-global approximations (Snelson & Ghahramani 2007, AISTATS), with the
    global part, the basis, exact. Under that kernel alone a far evaluated
    point lowers the head's uncertainty but not the residual's near itself, so each prediction
    is also conditioned on its nearest point outside the subset
    (:meth:`ResidualPosterior._rest_tables`). The hyperparameters are fitted on the subset alone
    (``mll`` is then the subset's, given the rest); a suggestion costs ``O(m^2 + (n - m) d)``
    per candidate instead of ``O(n^2)`` (issue 32: 1.8x GP-BO's time at n = 500 before)."""
    X, y = np.asarray(X, dtype=np.float64), np.asarray(y, dtype=np.float64)
    Phi = (net.features(X) if Phi is None else np.asarray(Phi, dtype=np.float64))[:, :r]
    d, k = X.shape[1], (r if ard else 1)
    warm = np.asarray(init, dtype=np.float64) if valid_init(init, k, d) else None
    if head is None and not (frozen and warm is not None):
        raise ValueError("fit_residual needs the head's fit unless it is frozen at a valid init.")
    rest = None
    if max_points is not None and len(y) > max_points:
        ell = np.exp(warm[k : k + d]) if warm is not None else np.ones(d)
        best = int(np.argmax(y)) if incumbent is None else int(incumbent)
        near = nearest_to_incumbent(X, best, is_cat, ell, max_points)
        outside = np.ones(len(y), dtype=bool)
        outside[near] = False
        rest = np.flatnonzero(outside)  # (sorted, as setdiff1d's, at a tenth of its cost)
        X_rest, Phi_rest, y_rest = X[rest], Phi[rest], y[rest]
        X, y, Phi = X[near], y[near], Phi[near]
    D2 = None  # the fit's n^2 x d differences (a frozen conditioning needs none)
    if frozen and warm is not None:
        theta = warm
    else:
        D2 = _sq_diffs(X, X, is_cat).reshape(len(X) ** 2, d)
        log_alpha = np.log(head.alpha) if ard else np.log(head.alpha[:1])
        noise = 1 / head.beta
        log_noise = DETERMINISTIC_LOG_NOISE if deterministic else math.log(max(noise, 1e-6))
        first = np.concatenate([log_alpha, np.full(d, START_LOG_ELL), [START_LOG_S, log_noise]])
        second = first.copy()  # the residual carries the data: GP-BO's start, the basis beside it
        second[-2:] = [0.0, max(log_noise, math.log(1e-2)) if not deterministic else log_noise]
        starts = [first, second]
        if warm is not None:
            starts = [warm] if warm_only else [*starts, warm]
        bounds = [LOG_ALPHA_BOUNDS] * k + [LOG_ELL_BOUNDS] * d + [LOG_S_BOUNDS, LOG_NOISE_BOUNDS]
        if deterministic:
            bounds[-1] = (DETERMINISTIC_LOG_NOISE, DETERMINISTIC_LOG_NOISE)
        objective = row_by_row(lambda row: neg_log_posterior(row, Phi, X, y, is_cat, k, D2))
        xs, fs = minimize(objective, np.array(starts), np.asarray(bounds))
        if not np.isfinite(fs).any():
            xs, fs = np.array(starts[:1]), np.zeros(1)
        theta = xs[int(np.argmin(fs))]
    w_prior, rest_evidence, rest_points = None, 0.0, None
    if rest is not None:
        m0, C0, rest_evidence = rest_weight_prior(Phi_rest, y_rest, theta, k, d)
        w_prior, rest_points = (m0, C0), (X_rest, y_rest, Phi_rest)
    return ResidualPosterior(
        net, r, X, y, is_cat, theta, sq_diffs=D2, w_prior=w_prior, Phi=Phi,
        rest_evidence=rest_evidence, rest=rest_points,
    )  # fmt: skip


__all__ = [
    "ResidualPosterior",
    "fit_residual",
    "nearest_to_incumbent",
    "neg_log_posterior",
    "rest_weight_prior",
    "valid_init",
]
