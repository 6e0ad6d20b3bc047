r"""Covariance of a kernel tree, its hyperparameter priors, and the GPyTorch equivalent.

Base kernels act on one input column ``x`` (BOSOT App. A.4; inputs in ``[0, 1]``, outputs
standardised); every leaf has its own hyperparameters, never shared (App. C):

=====  ==========================================================  ===============================
kind   k(x, x')                                                    priors (shape, rate)
=====  ==========================================================  ===============================
SE     v exp(-(x - x')^2 / (2 l^2))                                l ~ G(2, 2), v ~ G(2, 3)
LIN    v x x' + c                                                  v ~ G(2, 3), c ~ G(2, 3)
PER    v exp(-sin^2(pi |x - x'| / p) / (2 l^2))                    l ~ G(2, 2), v ~ G(2, 3),
                                                                   p ~ G(2, 2)
RQ     v (1 + (x - x')^2 / (2 a l^2))^(-a)                         l ~ G(2, 2), v ~ G(2, 3),
                                                                   a ~ G(2, 2)
=====  ==========================================================  ===============================

The noise variance has an Exponential(100) prior and starts at 1e-4 (the authors' code; the
paper is silent). A fixed floor of 1e-6 is added to it for numerical stability.

All functions here are torch (float64) so that the oracle can take the Hessian of the log
posterior by autodiff; :func:`to_gpytorch` builds the same covariance as a GPyTorch kernel with
the same priors, for use in GPyTorch/BoTorch models.
"""

from __future__ import annotations

import math

import torch

from headstart.kernels.grammar import PARAM_NAMES, Base, Op, Tree, leaves

GAMMA_PRIORS = {
    "variance": (2.0, 3.0),
    "offset": (2.0, 3.0),
    "lengthscale": (2.0, 2.0),
    "period": (2.0, 2.0),
    "alpha": (2.0, 2.0),
}
"""Gamma(shape, rate) priors of App. A.4."""
NOISE_RATE = 100.0
NOISE_INIT = 1e-4
NOISE_FLOOR = 1e-6


def param_names(tree: Tree) -> list[str]:
    """Names of the kernel hyperparameters in their vector order, e.g. ``"SE[0].lengthscale"``.

    Leaves are numbered left to right when a kind/dimension repeats: ``"SE[0]#2.variance"``.
    The noise variance is not included.
    """
    seen: dict[str, int] = {}
    names = []
    for leaf in leaves(tree):
        label = str(leaf)
        seen[label] = seen.get(label, 0) + 1
        if seen[label] > 1:
            label = f"{label}#{seen[label]}"
        names.extend(f"{label}.{p}" for p in PARAM_NAMES[leaf.kind])
    return names


def leaf_offsets(tree: Tree) -> list[tuple[Base, int]]:
    """Each leaf, left to right, with the index of its first hyperparameter in the value vector.

    A leaf's parameters are ``values[offset : offset + len(PARAM_NAMES[leaf.kind])]`` in
    :data:`PARAM_NAMES` order (so a PER leaf's period is ``values[offset + 2]``).
    """
    out, offset = [], 0
    for leaf in leaves(tree):
        out.append((leaf, offset))
        offset += len(PARAM_NAMES[leaf.kind])
    return out


def n_params(tree: Tree) -> int:
    """Number of hyperparameters including the noise variance (the ``d`` of Laplace's formula)."""
    return sum(len(PARAM_NAMES[leaf.kind]) for leaf in leaves(tree)) + 1


def initial_values(tree: Tree) -> torch.Tensor:
    """All kernel hyperparameters at 1.0, then the noise variance at 1e-4."""
    values = torch.ones(n_params(tree), dtype=torch.float64)
    values[-1] = NOISE_INIT
    return values


def log_prior(tree: Tree, values: torch.Tensor) -> torch.Tensor:
    """``sum log p(theta)`` of the Gamma priors and the Exponential(100) noise prior.

    ``values`` is ``... x P`` (kernel hyperparameters, then the noise variance); returns ``...``.
    """
    shapes, rates = [], []
    for leaf in leaves(tree):
        for name in PARAM_NAMES[leaf.kind]:
            a, b = GAMMA_PRIORS[name]
            shapes.append(a)
            rates.append(b)
    a = torch.tensor(shapes, dtype=values.dtype)
    b = torch.tensor(rates, dtype=values.dtype)
    v = values[..., :-1]
    gamma = (a * torch.log(b) - torch.lgamma(a) + (a - 1) * torch.log(v) - b * v).sum(-1)
    noise = values[..., -1]
    return gamma + math.log(NOISE_RATE) - NOISE_RATE * noise


def noisy_covariance(tree: Tree, values: torch.Tensor, X: torch.Tensor) -> torch.Tensor:
    """``K(X, X) + (noise + 1e-6) I`` for ``... x P`` values whose last entry is the noise."""
    eye = torch.eye(len(X), dtype=values.dtype)
    return covariance(tree, values, X) + (values[..., -1, None, None] + NOISE_FLOOR) * eye


def covariance(
    tree: Tree,
    values: torch.Tensor,
    X: torch.Tensor,
    Z: torch.Tensor | None = None,
    *,
    diag: bool = False,
) -> torch.Tensor:
    """``k(X, Z)`` (``... x n x m``), or its diagonal ``k(x_i, x_i)`` (``... x n``) when ``diag``.

    Args:
        tree: The kernel expression.
        values: ``... x P`` positive hyperparameters in :func:`param_names` order; leading batch
            dimensions give a batch of covariances (a trailing noise entry, as in
            :func:`initial_values`, is ignored).
        X: ``n x D`` inputs.
        Z: ``m x D`` inputs (defaults to ``X``).
    """
    Z = X if Z is None else Z
    offsets = iter(leaf_offsets(tree))
    extra = (None,) if diag else (None, None)

    def walk(node: Tree) -> torch.Tensor:
        if isinstance(node, Op):
            left, right = walk(node.left), walk(node.right)
            return left + right if node.op == "+" else left * right
        _, start = next(
            offsets
        )  # walk() meets the leaves left to right, as leaf_offsets lists them
        theta = [values[(..., start + j, *extra)] for j in range(len(PARAM_NAMES[node.kind]))]
        x = X[:, node.dim]
        z = Z[:, node.dim]
        if not diag:
            x, z = x[:, None], z[None, :]
        return base_covariance(node, theta, x, z)

    return walk(tree)


def base_covariance(
    leaf: Base, theta: list[torch.Tensor], x: torch.Tensor, z: torch.Tensor
) -> torch.Tensor:
    """One base kernel on broadcastable column tensors ``x`` and ``z``."""
    v = theta[0]
    if leaf.kind == "LIN":
        return v * (x * z) + theta[1]
    r2 = (x - z) ** 2
    ell2 = theta[1] ** 2
    if leaf.kind == "SE":
        return v * torch.exp(-0.5 * r2 / ell2)
    if leaf.kind == "PER":
        s = torch.sin(math.pi * (x - z) / theta[2])
        return v * torch.exp(-0.5 * s * s / ell2)
    alpha = theta[2]  # RQ
    return v * (1.0 + r2 / (2.0 * alpha * ell2)) ** (-alpha)


def _per_lengthscale(lam: torch.Tensor) -> torch.Tensor:
    """GPyTorch's periodic ``lambda`` (``exp(-2 sin^2 / lambda)``) as BOSOT's ``l = sqrt(lambda) / 2``."""
    return lam.sqrt() / 2.0


def to_gpytorch(tree: Tree, values: torch.Tensor | None = None):
    """The tree as a float64 GPyTorch kernel with the same priors (and values, if given).

    * SE and RQ: ``ScaleKernel(RBFKernel | RQKernel)`` on the leaf's column.
    * LIN: ``LinearKernel + ConstantKernel``.
    * PER: ``ScaleKernel(PeriodicKernel)``. GPyTorch's periodic kernel is
      ``exp(-2 sin^2(pi r / p) / lambda)``, so ``lambda = 4 l^2`` gives BOSOT's
      ``exp(-sin^2 / (2 l^2))``; its Gamma(2, 2) prior is evaluated at ``l = sqrt(lambda) / 2``
      through the prior's ``transform``.

    GPyTorch priors act on the constrained values without the change-of-variables term that the
    oracle's Laplace approximation includes (:mod:`headstart.kernels.oracle`).
    """
    from gpytorch.kernels import (
        ConstantKernel,
        LinearKernel,
        PeriodicKernel,
        RBFKernel,
        RQKernel,
        ScaleKernel,
    )
    from gpytorch.priors import GammaPrior

    def g(name: str, **kwargs) -> GammaPrior:
        return GammaPrior(*GAMMA_PRIORS[name], **kwargs)

    offsets = iter(leaf_offsets(tree))
    setters = []

    def build(node: Tree):
        if isinstance(node, Op):
            left, right = build(node.left), build(node.right)
            return left + right if node.op == "+" else left * right
        _, start = next(offsets)
        k = len(PARAM_NAMES[node.kind])
        theta = None if values is None else values[start : start + k]
        dims = (node.dim,)
        if node.kind == "LIN":
            lin = LinearKernel(active_dims=dims, variance_prior=g("variance"))
            const = ConstantKernel(active_dims=dims, constant_prior=g("offset"))
            if theta is not None:
                setters.append(
                    lambda t=theta: (
                        setattr(lin, "variance", t[0]),
                        setattr(const, "constant", t[1]),
                    )
                )
            return lin + const
        if node.kind == "SE":
            inner = RBFKernel(active_dims=dims, lengthscale_prior=g("lengthscale"))
        elif node.kind == "PER":
            inner = PeriodicKernel(
                active_dims=dims,
                lengthscale_prior=g("lengthscale", transform=_per_lengthscale),
                period_length_prior=g("period"),
            )
        else:
            inner = RQKernel(
                active_dims=dims, lengthscale_prior=g("lengthscale"), alpha_prior=g("alpha")
            )
        scaled = ScaleKernel(inner, outputscale_prior=g("variance"))
        if theta is not None:

            def set_values(t=theta, kind=node.kind, inner=inner, scaled=scaled):
                scaled.outputscale = t[0]
                inner.lengthscale = 4.0 * t[1] ** 2 if kind == "PER" else t[1]
                if kind == "PER":
                    inner.period_length = t[2]
                elif kind == "RQ":
                    inner.alpha = t[2]

            setters.append(set_values)
        return scaled

    kernel = build(tree).to(torch.float64)
    for setter in setters:
        setter()
    return kernel


__all__ = [
    "GAMMA_PRIORS",
    "PARAM_NAMES",
    "base_covariance",
    "covariance",
    "initial_values",
    "leaf_offsets",
    "log_prior",
    "n_params",
    "noisy_covariance",
    "param_names",
    "to_gpytorch",
]
