r"""Symbolical optimal transport (SOT) between kernel expression trees (BOSOT, Sec. 3.1-3.2).

Each tree is mapped to three discrete distributions (Sec. 3.1):

* ``base``: for every input dimension ``i``, the base kernels acting on ``i``, with the empty
  symbol ``NULL`` when none does;
* ``paths``: the operator sequence from the root to every leaf plus the leaf's label, with runs of
  the same operator collapsed (``+ > + > * > PER[0]`` is ``+ > * > PER[0]``);
* ``subtrees``: the subtree under every node, leaves and root included, identified by a key that
  ignores the order of a node's two children (but not re-association, as in the paper).

Under the 0/1 ground metric the OT distance between two distributions is their total-variation
distance ``W = 1/2 sum_E |w1_E - w2_E|`` (Sec. 3.2), and (Eq. 3)

    d(T1, T2) = a1 sum_i W(base_i) + a2 W(paths) + a3 W(subtrees),   a >= 0, sum a = 1.

All keys are plain strings, so features are identical across processes (no ``hash()``).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from headstart.kernels.grammar import Base, Tree, leaves, nodes

FEATURES = ("base", "paths", "subtrees")
NULL = "NULL"


def base_distribution(tree: Tree, n_dims: int) -> dict[str, float]:
    """``{"i:KIND": weight}``: per-dimension shares of the base kernels, ``i:NULL`` if none.

    The shares of each dimension sum to 1, so the summed per-dimension TV distances of Eq. 3 are
    one TV distance over the concatenated keys.
    """
    by_dim: dict[int, Counter[str]] = {i: Counter() for i in range(n_dims)}
    for leaf in leaves(tree):
        by_dim[leaf.dim][leaf.kind] += 1
    out: dict[str, float] = {}
    for i, counts in by_dim.items():
        total = sum(counts.values())
        if total == 0:
            out[f"{i}:{NULL}"] = 1.0
        for kind, c in counts.items():
            out[f"{i}:{kind}"] = c / total
    return out


def path_distribution(tree: Tree) -> dict[str, float]:
    """Reduced root-to-leaf operator paths with the leaf label, e.g. ``"*>+>SE[0]"``."""
    counts: Counter[str] = Counter()

    def walk(node: Tree, ops: tuple[str, ...]) -> None:
        if isinstance(node, Base):
            counts[">".join((*ops, str(node)))] += 1
            return
        ops = ops if ops and ops[-1] == node.op else (*ops, node.op)
        walk(node.left, ops)
        walk(node.right, ops)

    walk(tree, ())
    return _normalise(counts)


def subtree_key(tree: Tree) -> str:
    """Child-order-invariant key of a subtree: ``op(sorted(key(left), key(right)))``."""
    if isinstance(tree, Base):
        return str(tree)
    a, b = sorted((subtree_key(tree.left), subtree_key(tree.right)))
    return f"{tree.op}({a},{b})"


def subtree_distribution(tree: Tree) -> dict[str, float]:
    """Shares of the subtrees rooted at every node (leaves and the whole tree included)."""
    return _normalise(Counter(subtree_key(node) for _, node in nodes(tree)))


def _normalise(counts: Counter[str]) -> dict[str, float]:
    total = sum(counts.values())
    return {k: c / total for k, c in counts.items()}


def tv_distance(p: dict[str, float], q: dict[str, float]) -> float:
    """Total-variation distance ``1/2 sum |p - q|``, the 0/1-metric OT distance (Sec. 3.2)."""
    return 0.5 * sum(abs(p.get(k, 0.0) - q.get(k, 0.0)) for k in p.keys() | q.keys())


@dataclass(frozen=True)
class TreeFeatures:
    """The three distributions of one tree."""

    base: dict[str, float]
    paths: dict[str, float]
    subtrees: dict[str, float]

    @classmethod
    def of(cls, tree: Tree, n_dims: int) -> TreeFeatures:
        return cls(
            base_distribution(tree, n_dims), path_distribution(tree), subtree_distribution(tree)
        )


def feature_distances(a: TreeFeatures, b: TreeFeatures) -> np.ndarray:
    """``[sum_i W(base_i), W(paths), W(subtrees)]`` between two trees."""
    return np.array([tv_distance(getattr(a, f), getattr(b, f)) for f in FEATURES])


def distance_matrices(rows: Sequence[TreeFeatures], cols: Sequence[TreeFeatures]) -> np.ndarray:
    """``3 x len(rows) x len(cols)`` TV distances, vectorised over a shared key vocabulary.

    Each distribution becomes a dense vector over the keys present in ``rows`` and ``cols``; the
    distance is half the L1 norm of the difference. Cost ``O(n m |vocab|)``.
    """
    out = np.empty((len(FEATURES), len(rows), len(cols)))
    for f, name in enumerate(FEATURES):
        vocab: dict[str, int] = {}
        for feats in (*rows, *cols):
            for key in getattr(feats, name):
                vocab.setdefault(key, len(vocab))
        A = _dense([getattr(r, name) for r in rows], vocab)
        B = _dense([getattr(c, name) for c in cols], vocab)
        out[f] = 0.5 * np.abs(A[:, None, :] - B[None, :, :]).sum(-1)
    return out


def _dense(dists: list[dict[str, float]], vocab: dict[str, int]) -> np.ndarray:
    M = np.zeros((len(dists), len(vocab)))
    for i, dist in enumerate(dists):
        for key, w in dist.items():
            M[i, vocab[key]] = w
    return M


def sot_kernel(
    D: np.ndarray, alpha: np.ndarray, outputscale: float, lengthscale: float
) -> np.ndarray:
    """``K = s^2 exp(-d / l^2)`` with ``d = sum_f alpha_f D_f`` (Eq. 4); ``D`` is ``3 x n x m``."""
    d = np.tensordot(np.asarray(alpha, dtype=np.float64), D, axes=1)
    return outputscale * np.exp(-d / lengthscale**2)


__all__ = [
    "FEATURES",
    "TreeFeatures",
    "base_distribution",
    "distance_matrices",
    "feature_distances",
    "path_distribution",
    "sot_kernel",
    "subtree_distribution",
    "subtree_key",
    "tv_distance",
]
