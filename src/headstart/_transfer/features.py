r"""The shared basis functions of ABLR and ABRAC: a tanh MLP trained on the source tasks.

``phi_z: [0, 1]^D -> R^d`` (two hidden layers of 50 tanh units, ``d = 20`` linear outputs: the
ABRAC paper's Forrester network) is trained once on all source tasks (values standardized per
task), then frozen; only the target's Bayesian linear regression head (:mod:`.blr`) is refit
during BO. Three trainings (``mode``):

* ``"nested"`` -- **ABRAC** (Horváth et al. 2021, Sec. 4.1): mean squared error of per-task
  linear heads, with **nested dropout** on the output layer: for every point of every mini-batch
  a truncation ``b ~ Q`` keeps only the first ``b`` basis functions, so they come out *ordered*
  (the first ones carry the coarse structure). ``Q`` is uniform on ``1..d`` (the paper's choice)
  or geometric (Rippel et al. 2014; ``truncation="geometric"``). The paper uses SGD with momentum
  and states none of its settings; Adam (lr 3e-3) reached a lower training error than SGD
  (momentum 0.9, lr 0.01 / 0.05 / 0.1) in the same 3,000 steps on both of the paper's synthetic
  families (RMSE on standardized values, quadratics 0.041 vs 0.25 / 0.087 / 0.078, Forrester
  0.084 vs 0.12 / 0.13 at lr 0.05 / 0.1), so it is used.
* ``"plain"`` -- **ABLR SGD fixed** (the paper's ablation; a multi-task DNGO): the same without
  nested dropout.
* ``"ablr"`` -- **ABLR** (Perrone et al. 2018): the sum over tasks of the Bayesian linear
  regression negative log marginal likelihood (isotropic ``alpha_t``, noise ``beta_t`` per task),
  jointly in the network and the heads, by L-BFGS on the full batch (Adam on batches of tasks
  when the meta-data are large). The per-task Gram matrices ``Phi_t^T Phi_t`` are segment sums
  over one feature matrix, so all tasks are one batched Cholesky (no loop over tasks).

Training is seeded (same seed and data, same network) and costs ``O(points)`` per epoch. A
trained network is plain arrays: :meth:`FeatureNet.to_json` (with a SHA-256 checksum, so a
tampered cache entry is rejected) -- never pickle.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from headstart.exceptions import ModelFittingError

HIDDEN = (50, 50)
N_BASIS = 20
MODES = ("nested", "plain", "ablr")
TRUNCATIONS = ("uniform", "geometric")
ADAM_LR, BATCH = 3e-3, 128
EPOCHS, MIN_STEPS = 30, 3000
GEOMETRIC_P = 0.1
FORMAT = "headstart.neural-features/v1"


@dataclass(frozen=True, eq=False)
class FeatureNet:
    r"""A trained basis ``phi(x)``: ``layers`` are ``(W out x in, b)`` pairs, tanh between them.

    ``source_rmse`` is each source task's training error (standardized units), for reports.
    """

    layers: tuple[tuple[np.ndarray, np.ndarray], ...]
    mode: str
    source_rmse: tuple[float, ...] = ()

    @property
    def n_basis(self) -> int:
        return self.layers[-1][0].shape[0]

    def features(self, X: np.ndarray) -> np.ndarray:
        """``m x d`` basis functions at ``X`` (``m x D``)."""
        h = np.asarray(X, dtype=np.float64)
        for i, (W, b) in enumerate(self.layers):
            h = h @ W.T
            h += b  # in place (a new array per step costs page faults at 2,048 rows)
            if i < len(self.layers) - 1:
                _tanh(h)
        return h

    def features_and_jacobian(self, X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``(F m x d, dF/dX m x d x D)`` by the chain rule through the tanh layers."""
        h = np.asarray(X, dtype=np.float64)
        J = None  # the first layer's Jacobian is its weight matrix, the same for every row
        for i, (W, b) in enumerate(self.layers):
            h = h @ W.T + b
            J = W if J is None else W @ J  # m x out x D (einsum took 10x longer here)
            if i < len(self.layers) - 1:
                _tanh(h)
                J = (1.0 - h * h)[:, :, None] * J
        return h, (J if J.ndim == 3 else np.broadcast_to(J, (len(h), *J.shape)))

    def to_json(self) -> dict:
        body = {
            "mode": self.mode,
            "layers": [[W.tolist(), b.tolist()] for W, b in self.layers],
            "source_rmse": list(self.source_rmse),
        }
        return {"format": FORMAT, "sha256": _digest(body), "body": body}

    @classmethod
    def from_json(cls, data) -> FeatureNet:
        """Rebuild a network; :class:`ModelFittingError` if the entry is not one or was altered."""
        body = data.get("body") if isinstance(data, dict) else None
        if not isinstance(data, dict) or data.get("format") != FORMAT or body is None:
            raise ModelFittingError("The cached feature network has an unknown format.")
        if data.get("sha256") != _digest(body):
            raise ModelFittingError(
                "The cached feature network's checksum does not match its content (it was "
                "modified); it is retrained."
            )
        layers = tuple(
            (np.asarray(W, dtype=np.float64), np.asarray(b, dtype=np.float64))
            for W, b in body["layers"]
        )
        return cls(layers, body["mode"], tuple(body.get("source_rmse", ())))


def _tanh(h: np.ndarray) -> None:
    """``h <- tanh(h)`` in place, as ``1 - 2 / (exp(2 h) + 1)``: within 1e-15 of ``np.tanh``
    (absolute; exact limits +-1 where ``exp`` overflows or underflows) at less than half its
    cost on the machines measured (13 ns an element, ``exp`` 5 ns), which was most of
    screening 2,048 points through the basis (issue 32, item 4). Inputs are clipped to
    [-20, 20] (``tanh(20)`` is 1 in float64), so ``exp`` neither overflows nor underflows
    (no floating-point error even under ``np.seterr(all="raise")``)."""
    np.clip(h, -20.0, 20.0, out=h)
    np.multiply(h, 2.0, out=h)
    np.exp(h, out=h)
    h += 1.0
    np.divide(-2.0, h, out=h)
    h += 1.0


def _digest(body) -> str:
    try:
        text = json.dumps(body, sort_keys=True, separators=(",", ":"), allow_nan=False)
    except (TypeError, ValueError):
        return ""
    return hashlib.sha256(text.encode()).hexdigest()


def truncation_probabilities(d: int, kind: str = "uniform") -> np.ndarray:
    r"""``Q(b = j)`` for ``j = 1..d``: uniform ``1/d``, or geometric ``p (1-p)^(j-1)``
    renormalized to ``1..d`` (Rippel et al. 2014)."""
    if kind == "uniform":
        return np.full(d, 1.0 / d)
    if kind == "geometric":
        q = GEOMETRIC_P * (1 - GEOMETRIC_P) ** np.arange(d)
        return q / q.sum()
    raise ValueError(f"truncation must be one of {TRUNCATIONS}; got {kind!r}.")


def sample_truncations(d: int, n: int, kind: str, generator):
    """``n`` draws of the truncation ``b`` in ``1..d`` from ``Q`` (a torch ``LongTensor``): each
    row of a mini-batch keeps its first ``b`` basis functions."""
    import torch

    probs = torch.from_numpy(truncation_probabilities(d, kind))
    return torch.multinomial(probs, n, replacement=True, generator=generator) + 1


def train_features(
    tasks: Sequence[tuple[np.ndarray, np.ndarray]],
    *,
    mode: str = "nested",
    n_basis: int = N_BASIS,
    hidden: Sequence[int] = HIDDEN,
    truncation: str = "uniform",
    seed: int = 0,
    on_step: Callable[[int, int], None] | None = None,
) -> FeatureNet:
    r"""Train the basis on ``tasks`` (``(X n_t x D, y n_t)`` each, ``y`` standardized).

    Args:
        mode: One of :data:`MODES` (module docstring).
        truncation: Nested dropout's ``Q``: ``"uniform"`` or ``"geometric"``.
        seed: Initialization and mini-batches (same seed, same network).
        on_step: ``on_step(done, total)`` for a progress bar.
    """
    import torch

    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}; got {mode!r}.")
    X = torch.from_numpy(np.vstack([np.asarray(x, dtype=np.float64) for x, _ in tasks]))
    y = torch.from_numpy(np.concatenate([np.asarray(v, dtype=np.float64) for _, v in tasks]))
    task = torch.from_numpy(np.repeat(np.arange(len(tasks)), [len(v) for _, v in tasks]))
    gen = torch.Generator().manual_seed(int(seed))
    sizes = [X.shape[1], *hidden, n_basis]
    params = []
    for fan_in, fan_out in itertools.pairwise(sizes):
        bound = 1.0 / math.sqrt(fan_in)
        W = (torch.rand(fan_out, fan_in, generator=gen, dtype=torch.float64) * 2 - 1) * bound
        b = (torch.rand(fan_out, generator=gen, dtype=torch.float64) * 2 - 1) * bound
        params += [W.requires_grad_(True), b.requires_grad_(True)]

    def net(inputs: torch.Tensor) -> torch.Tensor:
        h = inputs
        for i in range(0, len(params), 2):
            h = h @ params[i].T + params[i + 1]
            if i < len(params) - 2:
                h = torch.tanh(h)
        return h

    if mode == "ablr":
        rmse = _train_ablr(net, params, X, y, task, len(tasks), n_basis, on_step)
    else:
        rmse = _train_mse(
            net, params, X, y, task, len(tasks), n_basis, mode, truncation, gen, on_step
        )
    layers = tuple(
        (params[i].detach().numpy().copy(), params[i + 1].detach().numpy().copy())
        for i in range(0, len(params), 2)
    )
    return FeatureNet(layers, mode, tuple(float(v) for v in rmse))


def _train_mse(net, params, X, y, task, T, d, mode, truncation, gen, on_step):
    import torch

    heads = torch.zeros(T, d, dtype=torch.float64, requires_grad=True)
    bias = torch.zeros(T, dtype=torch.float64, requires_grad=True)
    opt = torch.optim.Adam([*params, heads, bias], lr=ADAM_LR)
    n = len(y)
    steps = max(MIN_STEPS, EPOCHS * math.ceil(n / BATCH))
    arange = torch.arange(1, d + 1)
    for step in range(steps):
        idx = torch.randint(n, (min(BATCH, n),), generator=gen)
        F = net(X[idx])
        if mode == "nested":
            b = sample_truncations(d, len(idx), truncation, gen)
            F = F * (arange[None, :] <= b[:, None])
        pred = (F * heads[task[idx]]).sum(1) + bias[task[idx]]
        loss = ((pred - y[idx]) ** 2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        if not torch.isfinite(loss):
            raise ModelFittingError("Training the basis functions diverged (non-finite loss).")
        if on_step is not None and (step % 100 == 0 or step == steps - 1):
            on_step(step + 1, steps)
    with torch.no_grad():
        pred = (net(X) * heads[task]).sum(1) + bias[task]
        sq = torch.zeros(T, dtype=torch.float64).index_add_(0, task, (pred - y) ** 2)
        counts = torch.bincount(task, minlength=T).to(torch.float64)
    return torch.sqrt(sq / counts).numpy()


def ablr_task_nll(F, y, task, pos, T, max_n, log_alpha, log_beta):
    r"""Sum over tasks of the isotropic BLR negative log marginal likelihood (torch, batched).

    The rows of ``F`` are scattered to a ``T x max_n x d`` padded tensor (``task``, ``pos``: each
    row's task and position in it; padded rows are 0 and add nothing), so ``Phi_t^T Phi_t`` and
    ``Phi_t^T y_t`` of every task are one batched matrix product.
    """
    import torch

    d = F.shape[1]
    Fp = torch.zeros(T, max_n, d, dtype=F.dtype).index_put((task, pos), F)
    yp = torch.zeros(T, max_n, dtype=F.dtype).index_put((task, pos), y)
    PtP = Fp.transpose(1, 2) @ Fp
    Pty = (Fp.transpose(1, 2) @ yp.unsqueeze(-1)).squeeze(-1)
    yy = (yp * yp).sum(1)
    n = torch.bincount(task, minlength=T).to(F.dtype)
    alpha, beta = log_alpha.exp(), log_beta.exp()
    M = PtP + (alpha / beta)[:, None, None] * torch.eye(d, dtype=F.dtype)
    L = torch.linalg.cholesky(M)
    v = torch.linalg.solve_triangular(L, Pty.unsqueeze(-1), upper=False).squeeze(-1)
    logdet = torch.log(torch.diagonal(L, dim1=-2, dim2=-1)).sum(-1)
    nll = (
        -0.5 * (n - d) * log_beta
        - 0.5 * d * log_alpha
        + logdet
        + 0.5 * beta * (yy - (v * v).sum(-1))
        + 0.5 * n * math.log(2 * math.pi)
    )
    return nll.sum()


def _train_ablr(net, params, X, y, task, T, d, on_step):
    import torch

    counts = np.bincount(task.numpy(), minlength=T)
    starts = np.concatenate([[0], np.cumsum(counts)[:-1]])
    pos = torch.from_numpy(np.arange(len(task)) - np.repeat(starts, counts))
    max_n = int(counts.max())
    log_alpha = torch.zeros(T, dtype=torch.float64, requires_grad=True)
    log_beta = torch.full((T,), math.log(10.0), dtype=torch.float64, requires_grad=True)
    opt = torch.optim.LBFGS(
        [*params, log_alpha, log_beta], lr=1.0, max_iter=20, line_search_fn="strong_wolfe"
    )
    outer = max(10, min(50, MIN_STEPS // 20))

    def closure():
        opt.zero_grad()
        loss = ablr_task_nll(
            net(X), y, task, pos, T, max_n, log_alpha.clamp(-10, 12), log_beta.clamp(-6, 16)
        )
        loss.backward()
        return loss

    for step in range(outer):
        loss = opt.step(closure)
        if not torch.isfinite(loss):
            raise ModelFittingError("Training ABLR diverged (non-finite marginal likelihood).")
        if on_step is not None:
            on_step(step + 1, outer)
    with torch.no_grad():  # each task's own BLR fit: its residual error
        F = net(X)
        rmse = np.zeros(T)
        task_np = task.numpy()
        for t in range(T):
            rows = task_np == t
            Ft, yt = F[rows].numpy(), y[rows].numpy()
            a, b = float(log_alpha[t].exp()), float(log_beta[t].exp())
            ridge = np.vstack([Ft, np.sqrt(max(a / b, 1e-12)) * np.eye(d)])  # the head's mean,
            w = np.linalg.lstsq(ridge, np.concatenate([yt, np.zeros(d)]), rcond=None)[0]  # stably
            rmse[t] = float(np.sqrt(np.mean((Ft @ w - yt) ** 2)))
    return rmse


__all__ = [
    "MODES",
    "FeatureNet",
    "ablr_task_nll",
    "sample_truncations",
    "train_features",
    "truncation_probabilities",
]
