r"""Canonical simplification of kernel expressions, and the map that proves it loses nothing.

The grammar moves happily produce redundant forms: ``RQ[1] + RQ[1]``, ``PER[0] * PER[0]``,
``(A + B) * C + C * (B + A)``. Each costs oracle time (more hyperparameters to fit), is penalised
by the Laplace evidence for its redundant parameters, and is a *different* point to the SOT
meta-GP, so a search that does not simplify spends its budget re-discovering kernels it has
already scored under new names (issue 17). :func:`simplify` maps every expression to one
canonical representative, bottom-up:

1. associativity is flattened and operands are sorted (exact: the same function);
2. in a sum, equal operands collapse, ``A + A -> A`` (the duplicate's sum ``v1 A + v2 A`` with
   equal inner hyperparameters is ``A`` with variance ``v1 + v2``);
3. in a product, equal SE, PER or RQ leaves on one input collapse, ``SE[i] * SE[i] -> SE[i]``:
   a product of ``c`` SE leaves is an SE leaf (``1 / l^2`` adds up), ``c`` PER leaves with one
   period are a PER leaf with lengthscale ``l / sqrt(c)``, and ``c`` RQ leaves with one
   ``(alpha, l)`` are an RQ leaf with ``(c alpha, l / sqrt(c))``. ``LIN[i] * LIN[i]`` (a
   quadratic) and products of equal composite operands are kept: they are new kernels.

Every kernel the simplified expression can express, the original can too: :func:`lift_values`
returns hyperparameters of the original expression that give exactly the same covariance as
given hyperparameters of the simplified one (tested on random trees and inputs). The converse
holds for rules 1 and 3 on SE and for ``LIN + LIN``; for the others the original is a superset
whose extra freedom (two lengthscales in ``RQ + RQ``) the search can still reach through a
different expression (``RQ[1] + SE[1]``), or through ``*`` of composite operands.

Each base kernel carries its own variance (BOSOT App. C), so any expression can be scaled by
``s > 0``: a sum scales each operand, a product its first operand, ``LIN`` both its variance and
offset.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable

import numpy as np

from headstart.kernels.grammar import PARAM_NAMES, Base, Op, Tree, canonical, leaves

MERGEABLE_IN_PRODUCT = ("SE", "PER", "RQ")
"""Kinds whose product with an equal leaf (same kind and input) is a leaf of the same kind."""

Lift = Callable[[np.ndarray], np.ndarray]


def simplify(tree: Tree) -> Tree:
    """The canonical representative of ``tree`` (see the module docstring for the rules).

    Idempotent, and equal for expressions that :func:`~headstart.kernels.grammar.canonical`
    identifies. Operands are sorted by their canonical key and joined left to right.

    Example:
        >>> from headstart.kernels.grammar import parse
        >>> str(simplify(parse("(RQ[1] + RQ[1]) * PER[0] * PER[0] + SE[0] * SE[0]")))
        'PER[0] * RQ[1] + SE[0]'
    """
    return _plan(tree)[0]


def lift_values(tree: Tree, values: np.ndarray) -> np.ndarray:
    """Kernel hyperparameters of ``tree`` with the covariance of ``simplify(tree)`` at ``values``.

    Args:
        tree: The original expression.
        values: Positive kernel hyperparameters of ``simplify(tree)`` in
            :func:`~headstart.kernels.covariance.param_names` order (no noise entry).

    Returns:
        Positive hyperparameters of ``tree`` (same order convention) with
        ``k_tree(x, x') == k_simplified(x, x')`` for all inputs.
    """
    return _plan(tree)[1](np.asarray(values, dtype=np.float64))


def size(tree: Tree) -> int:
    """Number of kernel hyperparameters of ``tree`` (noise excluded)."""
    return sum(len(PARAM_NAMES[leaf.kind]) for leaf in leaves(tree))


# --- implementation -------------------------------------------------------------------------------
def _operands(tree: Tree, op: str) -> list[Tree]:
    """The maximal subtrees joined by ``op`` at the top of ``tree``, left to right."""
    if isinstance(tree, Op) and tree.op == op:
        return _operands(tree.left, op) + _operands(tree.right, op)
    return [tree]


def _chain(op: str, operands: list[Tree]) -> Tree:
    out = operands[0]
    for operand in operands[1:]:
        out = Op(op, out, operand)
    return out


def _split(values: np.ndarray, trees: list[Tree]) -> list[np.ndarray]:
    bounds = np.cumsum([0, *(size(t) for t in trees)])
    return [values[a:b] for a, b in itertools.pairwise(bounds)]


def _plan(tree: Tree) -> tuple[Tree, Lift]:
    """``(simplify(tree), lift)`` with ``lift`` mapping simplified values to ``tree``'s values."""
    if isinstance(tree, Base):
        return tree, lambda v: v
    op = tree.op
    originals = _operands(tree, op)
    plans = [_plan(t) for t in originals]
    # pieces: the simplified operands, with same-op results spliced into this level
    pieces: list[tuple[str, Tree, int]] = []  # (key, piece, index of its original operand)
    for i, (simple, _) in enumerate(plans):
        pieces.extend((canonical(p), p, i) for p in _operands(simple, op))
    groups: dict[str, list[int]] = {}  # group key -> indices into pieces
    for j, (key, piece, _) in enumerate(pieces):
        mergeable = op == "+" or (isinstance(piece, Base) and piece.kind in MERGEABLE_IN_PRODUCT)
        groups.setdefault(key if mergeable else f"{key}#{j}", []).append(j)
    order = sorted(groups, key=lambda g: (pieces[groups[g][0]][0], g))
    kept = [pieces[groups[g][0]][1] for g in order]
    simplified = _chain(op, kept)

    def lift(values: np.ndarray) -> np.ndarray:
        piece_values: list[np.ndarray | None] = [None] * len(pieces)
        for g, rep, v in zip(order, kept, _split(values, kept), strict=True):
            members = groups[g]
            share = _scaled(rep, v, 1.0 / len(members)) if op == "+" else None
            for j in members:
                piece_values[j] = share if op == "+" else _root(pieces[j][1], v, len(members))
        out = []
        for i, (_, lift_i) in enumerate(plans):
            mine = [piece_values[j] for j in range(len(pieces)) if pieces[j][2] == i]
            out.append(lift_i(np.concatenate(mine)))
        return np.concatenate(out)

    if len(kept) == 1:
        return kept[0], lift
    return simplified, lift


def _scaled(tree: Tree, values: np.ndarray, s: float) -> np.ndarray:
    """Values of ``tree`` whose covariance is ``s`` times that at ``values``."""
    values = values.copy()
    if isinstance(tree, Base):
        values[0] *= s  # variance
        if tree.kind == "LIN":
            values[1] *= s  # offset: v x x' + c
        return values
    left, right = _split(values, [tree.left, tree.right])
    right = _scaled(tree.right, right, s) if tree.op == "+" else right
    return np.concatenate([_scaled(tree.left, left, s), right])


def _root(leaf: Tree, values: np.ndarray, c: int) -> np.ndarray:
    """Values of one of ``c`` equal leaves whose product has the covariance at ``values``."""
    if c == 1:
        return values
    assert isinstance(leaf, Base) and leaf.kind in MERGEABLE_IN_PRODUCT
    out = values.copy()
    out[0] = values[0] ** (1.0 / c)  # variance
    out[1] = values[1] * np.sqrt(c)  # lengthscale (SE, PER and RQ alike)
    if leaf.kind == "RQ":
        out[2] = values[2] / c  # alpha
    return out


__all__ = ["MERGEABLE_IN_PRODUCT", "lift_values", "simplify", "size"]
