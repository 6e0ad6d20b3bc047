r"""Multi-task GP (intrinsic coregionalization) as a transfer surrogate, on BoTorch's MultiTaskGP.

References: E. Bonilla, K. Chai, C. Williams. Multi-task Gaussian Process Prediction. NeurIPS 2007;
K. Swersky, J. Snoek, R. Adams. Multi-Task Bayesian Optimization. NeurIPS 2013; P. Tighineanu et
al. Scalable Meta-Learning with Gaussian Processes. AISTATS 2024 (below: [ScaML]).
The model is [ScaML]'s Eq. 2 with a single coregionalization matrix (intrinsic coregionalization):

    k((x, i), (x', j)) = B_ij k_x(x, x'),     B = positive-definite task covariance

with the test task at index 0 and the meta-tasks at ``1..M``. It is BoTorch's ``MultiTaskGP``
(``PositiveIndexKernel``: ``B = (L L^T + diag(v))`` normalized so that ``B_00 = 1``, only positive
task correlations, BoTorch's default ``Beta(2.5, 1.5)`` prior on them; one constant mean and one
noise variance per task), fitted with ``fit_gpytorch_mll`` on the joint data. ``k_x`` is the
meta-GPs' kernel and priors (squared-exponential ARD with a Hamming term on categorical columns,
``ell ~ Gamma(3, 6)``, output scale ``s ~ Gamma(2, 0.15)``, ``sigma^2 ~ LogNormal(-8, 2)``; bounds
as in :mod:`headstart._transfer.metafit`).

**Data and units.** Each meta-task's ``y`` is standardized by its own mean and standard deviation
(BoTorch's docstring asks for per-task standardization); the test ``y_t`` by its own (the returned
``y_model``; a single point is centred only). The joint GP is cubic in the total number of points,
so if the meta-tasks hold more than ``max_meta_points`` (default :data:`MAX_META_POINTS`) points in
all, each meta-task keeps a uniformly drawn (seeded) share ``floor(n_m * cap / total)`` (at least
2); :attr:`MultiTaskGPSurrogate.meta_points_used` and a :class:`HeadstartWarning` report this.

**Fit.** Warm-started from the previous call's state (STYLE.md Sec. 6), first call from
``ell = 0.5``, ``s = 1``, ``sigma^2 = 1e-3`` and every task correlation at
:data:`INIT_TASK_CORRELATION` (BoTorch's random initialization of ``B`` let a pure-noise source
capture the test task). L-BFGS-B is capped at :data:`FIT_MAXITER` iterations
(:data:`FIT_MAXITER_WARM` when warm-started): ICM likelihoods are flat along the task-covariance
directions, and uncapped fits ran for thousands of iterations. The objective is evaluated on dense
tensors with a closed-form gradient (:func:`dense_loss`, equal to BoTorch's closure).
``deterministic=True`` pins the *test* task's noise at 1e-6 through its constraint (the meta noise
stays free). With no test data, the posterior is the test task's prior given the meta-data.

**Prediction.** The fitted model's training covariance (kernel plus noise) is factorized once;
means, variances and their gradients then have closed forms (numpy, as
:class:`headstart._gp.model.ExactGP`): with ``k_i = s B_{0 t_i} exp(-r_i^2 / 2)``,

    mean(x) = c_0 + k^T alpha,   var(x) = s B_00 - k^T K^{-1} k
    d mean / dx_j = -w_j sum_i alpha_i k_i (x_j - X_ij),   d var / dx_j = 2 w_j sum_i beta_i k_i (x_j - X_ij)
"""

from __future__ import annotations

import copy
import math
import warnings
from collections.abc import Sequence

import gpytorch
import numpy as np
import scipy.linalg
import torch
from botorch.exceptions.warnings import OptimizationWarning
from botorch.fit import fit_gpytorch_mll
from botorch.models import MultiTaskGP
from botorch.optim.closures import ForwardBackwardClosure
from botorch.optim.utils import get_parameters_and_bounds
from gpytorch.constraints import Interval
from gpytorch.kernels import Kernel, ScaleKernel
from gpytorch.likelihoods import HadamardGaussianLikelihood
from gpytorch.mlls import ExactMarginalLogLikelihood
from gpytorch.priors import GammaPrior, LogNormalPrior

from headstart._engine.numerics import robust_cholesky, standardize
from headstart._gp.batched import MIN_VAR, unpack_tasks
from headstart._gp.fit_settings import (
    DETERMINISTIC_NOISE,
    FIT_MAXITER,
    NOISE_BOUNDS,
    SE_SCALE_BOUNDS,
)
from headstart._gp.hyperprior import META_HYPERPRIOR as _PRIOR
from headstart._gp.kernels import CENTER, sq_dist_np
from headstart._transfer.base import TransferSurrogate
from headstart.exceptions import HeadstartWarning, NumericsWarning

MAX_META_POINTS = 1024  # cap on the meta points in the joint GP (cubic cost)
MIN_POINTS_PER_TASK = 2
FIT_MAXITER_WARM = 50  # ... and of a warm-started refit (on 8 x 64 meta points, 40 test points:
# RMSE 0.0075 after 50 vs 0.0065 after 150 iterations, at a third of the time)
TARGET_TASK = 0
INIT_TASK_CORRELATION = 0.5  # first fit: every pair of tasks starts equally, moderately correlated
DTYPE = torch.float64


class SEHammingKernel(Kernel):
    r"""``exp(-r^2 / 2)`` with ``r^2`` as :mod:`headstart._gp.kernels` (ARD lengthscales).

    Numeric columns contribute ``(x_j - x'_j)^2 / ell_j^2``, categorical ones
    ``1[x_j != x'_j] / ell_j^2``. Wrap it in a ``ScaleKernel`` for the output scale.

    Args:
        is_cat: ``d`` boolean mask of categorical columns.
    """

    has_lengthscale = True

    def __init__(self, is_cat: np.ndarray, **kwargs) -> None:
        is_cat = np.asarray(is_cat, dtype=bool)
        super().__init__(ard_num_dims=len(is_cat), **kwargs)
        self.register_buffer("is_cat", torch.from_numpy(is_cat))

    def forward(self, x1: torch.Tensor, x2: torch.Tensor, diag: bool = False, **params):
        w = self.lengthscale.pow(-2.0)  # ... x 1 x d
        num = (~self.is_cat).to(x1.dtype)
        a = (x1 - CENTER) * torch.sqrt(w) * num
        b = (x2 - CENTER) * torch.sqrt(w) * num
        cat = torch.nonzero(self.is_cat).flatten().tolist()
        if diag:
            r2 = ((a - b) ** 2).sum(-1)
            for j in cat:
                r2 = r2 + w[..., 0, j] * (x1[..., j] != x2[..., j]).to(x1.dtype)
            return torch.exp(-0.5 * r2)
        r2 = (
            (a * a).sum(-1, keepdim=True)
            + (b * b).sum(-1).unsqueeze(-2)
            - 2.0 * a @ b.transpose(-1, -2)
        ).clamp_min(0.0)
        if x1.shape == x2.shape and torch.equal(x1, x2):
            r2 = r2 * (1.0 - torch.eye(r2.shape[-1], dtype=r2.dtype, device=r2.device))
        for j in cat:
            differ = x1[..., :, j].unsqueeze(-1) != x2[..., :, j].unsqueeze(-2)
            r2 = r2 + w[..., 0, j].unsqueeze(-1).unsqueeze(-1) * differ.to(x1.dtype)
        return torch.exp(-0.5 * r2)


class _PinnedInterval(Interval):
    """An ``Interval`` whose entry ``index`` (last dimension) is the constant ``value``."""

    def __init__(self, lower: float, upper: float, index: int, value: float) -> None:
        super().__init__(lower, upper)
        self.pin_index, self.pin_value = int(index), float(value)

    def _pin_mask(self, tensor: torch.Tensor) -> torch.Tensor:
        mask = torch.zeros(tensor.shape[-1], dtype=torch.bool, device=tensor.device)
        mask[self.pin_index] = True
        return mask

    def transform(self, tensor: torch.Tensor) -> torch.Tensor:
        out = super().transform(tensor)
        if out.dim() == 0:
            return out
        return torch.where(self._pin_mask(out), torch.full_like(out, self.pin_value), out)

    def inverse_transform(self, transformed_tensor: torch.Tensor) -> torch.Tensor:
        if transformed_tensor.dim() == 0:  # the bounds themselves (BoTorch's bound lookup)
            return super().inverse_transform(transformed_tensor)
        mid = math.sqrt(float(self.lower_bound) * float(self.upper_bound))
        safe = torch.where(
            self._pin_mask(transformed_tensor),
            torch.full_like(transformed_tensor, mid),
            transformed_tensor,
        )
        return super().inverse_transform(safe)


class _GaussianLogDensity(torch.autograd.Function):
    r"""``log N(r; 0, K)`` with the closed-form gradient (R&W Eq. 5.9):

        d/dK = (alpha alpha^T - K^{-1}) / 2,   d/dr = -alpha,   alpha = K^{-1} r

    Autograd through the Cholesky factorization costs several times the factorization itself;
    this needs one ``cholesky_inverse``.
    """

    @staticmethod
    def forward(ctx, K: torch.Tensor, r: torch.Tensor) -> torch.Tensor:
        L = robust_cholesky(K)
        alpha = torch.cholesky_solve(r.unsqueeze(-1), L).squeeze(-1)
        ctx.save_for_backward(L, alpha)
        n = r.shape[-1]
        return (
            -0.5 * (r * alpha).sum()
            - torch.log(torch.diagonal(L)).sum()
            - 0.5 * n * math.log(2.0 * math.pi)
        )

    @staticmethod
    def backward(ctx, grad: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        L, alpha = ctx.saved_tensors
        grad_K = 0.5 * grad * (torch.outer(alpha, alpha) - torch.cholesky_inverse(L))
        return grad_K, -grad * alpha


def dense_loss(model: MultiTaskGP) -> torch.Tensor:
    r"""``-(log p(y | theta) + log p(theta)) / N`` of a ``MultiTaskGP`` built by this module.

    The same value as BoTorch's closure on ``ExactMarginalLogLikelihood`` (GPyTorch adds the
    log-priors of every registered prior and divides by ``N``), computed on dense tensors:

        K = s k_x(X, X) * B[t, t'] + diag(sigma^2_t),   log p(y) = log N(y; c_t, K)

    This skips GPyTorch's lazy-tensor machinery, whose overhead dominates at the sizes used here.
    """
    X, y = model.train_inputs[0], model.train_targets
    d = X.shape[-1] - 1
    tasks = X[:, d].long()
    data_kernel, task_kernel = model.covar_module.kernels
    K = data_kernel.outputscale * data_kernel.base_kernel.forward(X[:, :d], X[:, :d])
    B = task_kernel.covar_matrix
    noise = model.likelihood.noise.reshape(-1)
    K = K * B[tasks][:, tasks] + torch.diag(noise[tasks])
    means = torch.stack([m.constant.reshape(()) for m in model.mean_module.base_means])
    value = _GaussianLogDensity.apply(K, y - means[tasks])
    for _, module, prior, closure, _ in model.named_priors():
        value = value + prior.log_prob(closure(module)).sum()
    return -value / len(y)


def subsample(
    Xs: list[np.ndarray], zs: list[np.ndarray], cap: int, seed: int
) -> tuple[list[np.ndarray], list[np.ndarray], list[int]]:
    r"""Uniform per-task subsamples with ``floor(n_m cap / total)`` points (at least 2) each.

    Returns the inputs unchanged if ``sum n_m <= cap``.
    """
    n = np.array([len(z) for z in zs])
    total = int(n.sum())
    if total <= cap:
        return Xs, zs, n.tolist()
    rng = np.random.default_rng(seed)
    keep = np.minimum(n, np.maximum(MIN_POINTS_PER_TASK, (n * cap) // total))
    out_X, out_z = [], []
    for X, z, k in zip(Xs, zs, keep, strict=True):
        idx = np.sort(rng.choice(len(z), size=int(k), replace=False))
        out_X.append(X[idx])
        out_z.append(z[idx])
    return out_X, out_z, keep.tolist()


class MTGPPosterior:
    r"""The test task's posterior of a fitted ICM model, with closed-form gradients.

    Args:
        model: A fitted ``MultiTaskGP`` (test task 0, task feature last).
        is_cat: ``d`` boolean mask of categorical columns.
    """

    includes_noise = False

    def __init__(self, model: MultiTaskGP, is_cat: np.ndarray) -> None:
        self.is_cat = np.asarray(is_cat, dtype=bool)
        d = len(self.is_cat)
        train_X = model.train_inputs[0]
        data_kernel, task_kernel = model.covar_module.kernels
        with torch.no_grad():
            model.eval()
            prior = model.forward(train_X)
            noisy = model.likelihood(prior, train_X)
            K = noisy.covariance_matrix
            resid = model.train_targets - prior.mean
            x0 = torch.cat([train_X[:1, :d], torch.zeros(1, 1, dtype=DTYPE)], dim=-1)
            self.mean_constant = float(model.forward(x0).mean[0])
            self.outputscale_data = float(data_kernel.outputscale)
            ell = data_kernel.base_kernel.lengthscale.reshape(-1)
            self.B = task_kernel.covar_matrix.numpy().copy()
        self.lengthscales = ell.numpy().copy()
        self._w = self.lengthscales**-2.0
        self._w_num = np.where(self.is_cat, 0.0, self._w)
        self.train_X = train_X[:, :d].numpy().copy()
        tasks = train_X[:, d].numpy().astype(int)
        self._b0 = self.outputscale_data * self.B[TARGET_TASK, tasks]  # s B_{0 t_i}
        self.prior_var = self.outputscale_data * float(self.B[TARGET_TASK, TARGET_TASK])
        self.outputscale = self.prior_var
        self.L = robust_cholesky(K).numpy()
        a = scipy.linalg.solve_triangular(self.L, resid.numpy(), lower=True)
        self.alpha = scipy.linalg.solve_triangular(self.L, a, lower=True, trans="T")

    def _k(self, X: np.ndarray) -> np.ndarray:
        r2 = sq_dist_np(X, self.train_X, self.is_cat, self._w)
        return np.exp(-0.5 * r2) * self._b0

    def posterior(self, X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Marginal posterior mean and variance of the test task: ``m`` each."""
        X = np.asarray(X, dtype=np.float64)
        k = self._k(X)
        V = scipy.linalg.solve_triangular(self.L, k.T, lower=True, check_finite=False)
        var = self.prior_var - (V * V).sum(0)
        return self.mean_constant + k @ self.alpha, np.maximum(var, MIN_VAR)

    def posterior_and_grad(
        self, X: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Posterior mean and variance with their gradients in ``X`` (module docstring)."""
        X = np.asarray(X, dtype=np.float64)
        k = self._k(X)
        V = scipy.linalg.solve_triangular(self.L, k.T, lower=True, check_finite=False)
        beta = scipy.linalg.solve_triangular(
            self.L, V, lower=True, trans="T", check_finite=False
        ).T  # m x N
        mean = self.mean_constant + k @ self.alpha
        raw_var = self.prior_var - (V * V).sum(0)
        Ga, Gb = k * self.alpha, k * beta
        dmean = -self._w_num * (X * Ga.sum(1)[:, None] - Ga @ self.train_X)
        dvar = 2.0 * self._w_num * (X * Gb.sum(1)[:, None] - Gb @ self.train_X)
        dvar[raw_var < MIN_VAR] = 0.0
        return mean, np.maximum(raw_var, MIN_VAR), dmean, dvar

    def joint_posterior(self, X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Joint posterior mean (``m``) and covariance (``m x m``) of the test task."""
        X = np.asarray(X, dtype=np.float64)
        k = self._k(X)
        V = scipy.linalg.solve_triangular(self.L, k.T, lower=True, check_finite=False)
        K_xx = self.prior_var * np.exp(-0.5 * sq_dist_np(X, X, self.is_cat, self._w))
        return self.mean_constant + k @ self.alpha, K_xx - V.T @ V

    def task_correlations(self) -> np.ndarray:
        """``T`` correlations ``B_0j / sqrt(B_00 B_jj)`` of the test task with every task."""
        d = np.sqrt(np.diagonal(self.B))
        return self.B[TARGET_TASK] / (d[TARGET_TASK] * d)


class MultiTaskGPSurrogate(TransferSurrogate):
    r"""A multi-task GP on the meta- and test data, refitted on every call.

    Args:
        meta_tasks: The earlier tasks (:class:`headstart.sources.MetaTask` or ``(X, y)`` pairs).
        is_cat: ``d`` mask of categorical columns.
        seed: Seeds the meta subsample and the task-covariance initialization.
        deterministic: Pin the test task's noise (noise-free objectives).
        max_meta_points: Cap on the meta points in the joint GP.

    Example:
        >>> rng = np.random.default_rng(0)
        >>> X = rng.random((12, 1))
        >>> model = MultiTaskGPSurrogate([(X, 2 * np.sin(6 * X[:, 0]) + 1)], np.array([False]))
        >>> post, y_model = model.condition(X[:4], np.sin(6 * X[:4, 0]), rng)
        >>> -1.0 <= model.report()["task0"] <= 1.0  # the source's correlation with the test task
        True
    """

    def __init__(
        self,
        meta_tasks: Sequence,
        is_cat: np.ndarray,
        *,
        seed: int = 0,
        deterministic: bool = False,
        max_meta_points: int = MAX_META_POINTS,
    ) -> None:
        self.is_cat = np.asarray(is_cat, dtype=bool)
        Xs, ys, self.names = unpack_tasks(meta_tasks)
        zs = [standardize(y)[0] for y in ys]
        Xs, zs, kept = subsample(Xs, zs, int(max_meta_points), seed)
        self.meta_points_used = {
            name: (k, len(y)) for name, k, y in zip(self.names, kept, ys, strict=True)
        }
        if sum(kept) < sum(len(y) for y in ys):
            warnings.warn(
                f"The multi-task GP keeps {sum(kept)} of the {sum(len(y) for y in ys)} meta "
                f"points (cap max_meta_points={max_meta_points}); each meta-task is subsampled "
                "uniformly.",
                HeadstartWarning,
                stacklevel=2,
            )
        d = len(self.is_cat)
        self._meta_X = np.vstack(
            [np.column_stack([X, np.full(len(X), m + 1.0)]) for m, X in enumerate(Xs)]
        ).reshape(-1, d + 1)
        self._meta_z = np.concatenate(zs)
        self.seed, self.deterministic = seed, deterministic
        self._state: dict | None = None
        self.correlations = np.zeros(len(self.names))
        self.noise_variances: np.ndarray | None = None  # per task (test task first), last fit

    @property
    def n_tasks(self) -> int:
        """Number of tasks ``M + 1`` (test task included)."""
        return len(self.names) + 1

    def _model(self, train_X: torch.Tensor, train_Y: torch.Tensor) -> MultiTaskGP:
        d = len(self.is_cat)
        data_kernel = ScaleKernel(
            SEHammingKernel(
                self.is_cat,
                lengthscale_prior=GammaPrior(_PRIOR.lengthscale.shape, _PRIOR.lengthscale.rate),
                lengthscale_constraint=Interval(*SE_SCALE_BOUNDS),
            ),
            outputscale_prior=GammaPrior(_PRIOR.outputscale.shape, _PRIOR.outputscale.rate),
            outputscale_constraint=Interval(*SE_SCALE_BOUNDS),
        )
        if self.deterministic:
            noise_constraint = _PinnedInterval(*NOISE_BOUNDS, TARGET_TASK, DETERMINISTIC_NOISE)
        else:
            noise_constraint = Interval(*NOISE_BOUNDS)
        likelihood = HadamardGaussianLikelihood(
            num_tasks=self.n_tasks,
            noise_prior=LogNormalPrior(_PRIOR.noise.mu, _PRIOR.noise.sigma),
            noise_constraint=noise_constraint,
            task_feature_index=d,
        )
        model = MultiTaskGP(
            train_X,
            train_Y,
            task_feature=d,
            covar_module=data_kernel,
            likelihood=likelihood,
            output_tasks=[TARGET_TASK],
            all_tasks=list(range(self.n_tasks)),
            outcome_transform=None,
        )
        if self._state is not None:
            model.load_state_dict(self._state)
        else:
            ell, s, noise = _PRIOR.initial
            data_kernel.base_kernel.lengthscale = torch.full((1, d), ell, dtype=DTYPE)
            data_kernel.outputscale = torch.tensor(s, dtype=DTYPE)
            likelihood.noise = torch.full((self.n_tasks,), noise, dtype=DTYPE)
            # B = rank a^2 11^T + v I: every task correlation starts at INIT_TASK_CORRELATION
            task_kernel = model.covar_module.kernels[1]
            rank = task_kernel.raw_covar_factor.shape[-1]
            a = math.sqrt(INIT_TASK_CORRELATION / rank)
            task_kernel.covar_factor = torch.full((self.n_tasks, rank), a, dtype=DTYPE)
            task_kernel.var = torch.full((self.n_tasks,), 1.0 - INIT_TASK_CORRELATION, dtype=DTYPE)
        return model

    def condition(
        self, X_t: np.ndarray, y_t: np.ndarray, rng: np.random.Generator
    ) -> tuple[MTGPPosterior, np.ndarray]:
        """Refit the joint GP with the test data; return ``(posterior, standardized y_t)``."""
        X_t, y_t = self._test_data(X_t, y_t)
        z_t, _, _ = standardize(y_t)
        X = np.vstack([np.column_stack([X_t, np.zeros(len(X_t))]), self._meta_X])
        z = np.concatenate([z_t, self._meta_z])
        train_X, train_Y = torch.from_numpy(X), torch.from_numpy(z).unsqueeze(-1)
        with (
            torch.random.fork_rng(),
            gpytorch.settings.max_cholesky_size(1 << 30),
            warnings.catch_warnings(),
        ):
            warnings.filterwarnings("ignore", message="Sparse invariant checks")  # GPyTorch
            warnings.filterwarnings("ignore", category=OptimizationWarning)  # capped iterations
            warnings.filterwarnings("ignore", category=NumericsWarning)  # jitter mid-fit
            torch.manual_seed(self.seed if self._state is None else int(rng.integers(2**31)))
            maxiter = FIT_MAXITER if self._state is None else FIT_MAXITER_WARM
            model = self._model(train_X, train_Y)
            mll = ExactMarginalLogLikelihood(model.likelihood, model)
            params, _ = get_parameters_and_bounds(mll)
            params = {name: p for name, p in params.items() if p.requires_grad}
            fit_gpytorch_mll(
                mll,
                closure=ForwardBackwardClosure(lambda: dense_loss(model), params),
                optimizer_kwargs={"options": {"maxiter": maxiter}},
            )
            model.eval()
            self._state = copy.deepcopy(model.state_dict())
            self.noise_variances = model.likelihood.noise.detach().numpy().reshape(-1).copy()
            posterior = MTGPPosterior(model, self.is_cat)
        self.correlations = posterior.task_correlations()[1:]
        return posterior, z_t

    def state(self) -> dict:
        """The fitted model's ``state_dict`` as JSON (the warm start of the next fit).

        Values are stored as ``float.hex`` strings: exact, and the constraint buffers' infinite
        bounds survive JSON.
        """
        if self._state is None:
            return {}
        return {
            name: {
                "dtype": str(v.dtype).removeprefix("torch."),
                "shape": list(v.shape),
                "hex": [float(x).hex() for x in v.double().reshape(-1).tolist()],
            }
            for name, v in self._state.items()
        }

    def load_state(self, state: dict) -> None:
        entries = {k: v for k, v in state.items() if isinstance(v, dict) and "hex" in v}
        if entries:  # anything else is not a state this class wrote: ignored
            self._state = {
                name: torch.tensor([float.fromhex(x) for x in v["hex"]], dtype=torch.float64)
                .reshape(v["shape"])
                .to(getattr(torch, v["dtype"]))
                for name, v in entries.items()
            }

    def report(self) -> dict[str, float]:
        """Each source's task correlation with the test task (``B_0m / sqrt(B_00 B_mm)``)."""
        return {name: float(c) for name, c in zip(self.names, self.correlations, strict=True)}


__all__ = ["MTGPPosterior", "MultiTaskGPSurrogate", "SEHammingKernel", "subsample"]
