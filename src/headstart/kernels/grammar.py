r"""The kernel grammar: expression trees of one-dimensional base kernels joined by ``+`` and ``*``.

A kernel is a binary expression tree (BOSOT, Bitzer et al. 2022, Sec. 3 and Alg. 3): leaves are
base kernels acting on one input dimension (``SE[0]``, ``LIN[2]``, ``PER[0]``, ``RQ[1]``), inner
nodes are the operators ``+`` and ``*``. The canonical text form prints ``*`` tighter than ``+``
and parenthesises only where the tree's shape needs it, so ``parse(str(tree)) == tree`` for every
tree, including the association ``A + (B + C)``, which is a different tree from ``(A + B) + C``.

The grammar moves of Duvenaud et al. (2013), as used by BOSOT (Sec. 2.2 of the note):

1. *extend*: replace any subexpression ``S`` (a leaf, an inner node or the root) by ``S op B``;
2. *swap*: replace one base kernel ``B`` by another ``B'``.

A tree with ``m`` leaves has ``m (r - 1)`` swaps and ``(2m - 1) |ops| r`` extensions, ``r`` being
the number of base kernels of the space.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Union

import numpy as np

from headstart.exceptions import InvalidSettingError, KernelExpressionError

BASE_KINDS = ("SE", "LIN", "PER", "RQ")
"""Base kernel families: squared exponential, linear, periodic, rational quadratic."""
OPERATORS = ("+", "*")
SPACES = {"full": ("SE", "LIN", "PER", "RQ"), "se-rq": ("SE", "RQ")}
"""The paper's two search spaces: S1 (``full``, Airline/LGBB) and S2 (``se-rq``, the UCI sets)."""
PARAM_NAMES = {
    "SE": ("variance", "lengthscale"),
    "LIN": ("variance", "offset"),
    "PER": ("variance", "lengthscale", "period"),
    "RQ": ("variance", "lengthscale", "alpha"),
}
"""Hyperparameters of each base kernel, in their vector order (:mod:`~headstart.kernels.covariance`)."""


@dataclass(frozen=True)
class Base:
    """A base kernel ``kind`` acting on input column ``dim``."""

    kind: str
    dim: int

    def __str__(self) -> str:
        return f"{self.kind}[{self.dim}]"


@dataclass(frozen=True)
class Op:
    """``left op right`` with ``op`` in ``{"+", "*"}``."""

    op: str
    left: Tree
    right: Tree

    def __str__(self) -> str:
        return f"{_child(self, self.left, right=False)} {self.op} {_child(self, self.right, True)}"


Tree = Union[Base, Op]  # noqa: UP007  (dataclass field annotations are evaluated lazily)


def _child(parent: Op, child: Tree, right: bool) -> str:
    text = str(child)
    if isinstance(child, Base):
        return text
    needs = (parent.op == "*" and child.op == "+") or (right and child.op == parent.op)
    return f"({text})" if needs else text


# --- structure ------------------------------------------------------------------------------------
def leaves(tree: Tree) -> list[Base]:
    """Base kernels from left to right."""
    if isinstance(tree, Base):
        return [tree]
    return leaves(tree.left) + leaves(tree.right)


def nodes(tree: Tree, path: tuple[int, ...] = ()) -> Iterator[tuple[tuple[int, ...], Tree]]:
    """Every subtree with its path (0 = left, 1 = right), pre-order, root first."""
    yield path, tree
    if isinstance(tree, Op):
        yield from nodes(tree.left, (*path, 0))
        yield from nodes(tree.right, (*path, 1))


def replace(tree: Tree, path: tuple[int, ...], new: Tree) -> Tree:
    """``tree`` with the subtree at ``path`` replaced by ``new``."""
    if not path:
        return new
    assert isinstance(tree, Op)
    if path[0] == 0:
        return Op(tree.op, replace(tree.left, path[1:], new), tree.right)
    return Op(tree.op, tree.left, replace(tree.right, path[1:], new))


def canonical(tree: Tree) -> str:
    """A key that equal kernel *functions* share: associativity flattened, operands sorted.

    ``(A + B) + C``, ``C + (B + A)`` and ``A + C + B`` all map to ``+(A,B,C)``. Used to avoid
    re-evaluating a kernel the search has already scored; the SOT features keep the paper's
    finer, association-sensitive subtree identity (:mod:`headstart.kernels.sot`).
    """
    if isinstance(tree, Base):
        return str(tree)
    operands: list[str] = []
    stack = [tree.right, tree.left]
    while stack:
        node = stack.pop()
        if isinstance(node, Op) and node.op == tree.op:
            stack.extend([node.right, node.left])
        else:
            operands.append(canonical(node))
    return f"{tree.op}({','.join(sorted(operands))})"


# --- parsing --------------------------------------------------------------------------------------
_TOKEN = re.compile(r"\s*(?:(?P<base>[A-Za-z]+)\s*\[\s*(?P<dim>\d+)\s*\]|(?P<sym>[+*()]))")


def parse(text: str, n_dims: int | None = None) -> Tree:
    """Parse a kernel expression such as ``"SE[0] * PER[1] + LIN[0]"``.

    ``*`` binds tighter than ``+``; both associate to the left. Kinds are case-insensitive.

    Args:
        text: The expression.
        n_dims: If given, every dimension index must be below it.

    Raises:
        KernelExpressionError: The text does not parse; the message shows the position.
    """
    if not isinstance(text, str):
        raise KernelExpressionError(f"A kernel expression must be a string; got {text!r}.")
    parser = _Parser(text, n_dims)
    tree = parser.expression()
    parser.skip_space()
    if parser.pos != len(text):
        parser.fail("expected '+', '*' or the end of the expression")
    return tree


class _Parser:
    def __init__(self, text: str, n_dims: int | None) -> None:
        self.text, self.n_dims, self.pos = text, n_dims, 0

    def fail(self, what: str, pos: int | None = None) -> None:
        pos = self.pos if pos is None else pos
        raise KernelExpressionError(
            f"Cannot parse kernel expression at position {pos}: {what}.\n"
            f"  {self.text}\n  {' ' * pos}^\n"
            f"Write base kernels as KIND[dim] with KIND in {', '.join(BASE_KINDS)} and join them "
            "with + and *, e.g. 'SE[0] * PER[0] + LIN[1]'."
        )

    def skip_space(self) -> None:
        while self.pos < len(self.text) and self.text[self.pos].isspace():
            self.pos += 1

    def peek(self) -> str:
        self.skip_space()
        return self.text[self.pos] if self.pos < len(self.text) else ""

    def expression(self) -> Tree:
        return self.chain("+", self.term)

    def term(self) -> Tree:
        return self.chain("*", self.factor)

    def chain(self, op: str, operand) -> Tree:
        """``operand (op operand)*``, associated to the left."""
        tree = operand()
        while self.peek() == op:
            self.pos += 1
            tree = Op(op, tree, operand())
        return tree

    def factor(self) -> Tree:
        char = self.peek()
        if char == "(":
            self.pos += 1
            tree = self.expression()
            if self.peek() != ")":
                self.fail("expected ')'")
            self.pos += 1
            return tree
        start = self.pos
        match = _TOKEN.match(self.text, self.pos)
        if match is None or match.group("base") is None:
            self.fail("expected a base kernel such as SE[0] or '('" if char else "unexpected end")
        kind = match.group("base").upper()
        if kind not in BASE_KINDS:
            self.fail(f"unknown base kernel {match.group('base')!r}", start)
        dim = int(match.group("dim"))
        if self.n_dims is not None and dim >= self.n_dims:
            self.fail(f"dimension {dim} is out of range; the data have {self.n_dims} inputs", start)
        self.pos = match.end()
        return Base(kind, dim)


# --- the grammar ----------------------------------------------------------------------------------
class KernelGrammar:
    """The search space: base kernel kinds on every input dimension, joined by ``+`` and ``*``.

    Args:
        n_dims: Number of input columns.
        kinds: Base kernel kinds, or a space name: ``"full"`` (SE, LIN, PER, RQ; the paper's S1)
            or ``"se-rq"`` (SE, RQ; S2).
        operators: Subset of ``("+", "*")``.

    Example:
        >>> g = KernelGrammar(1, "se-rq")
        >>> [str(b) for b in g.base_kernels]
        ['SE[0]', 'RQ[0]']
        >>> len(g.neighbours(parse("SE[0]")))  # 1 swap + 1 node x 2 ops x 2 bases
        5
    """

    def __init__(
        self,
        n_dims: int,
        kinds: str | Sequence[str] = "full",
        operators: Sequence[str] = OPERATORS,
    ) -> None:
        if isinstance(kinds, str):
            if kinds not in SPACES:
                raise InvalidSettingError(
                    f"Unknown kernel space {kinds!r}; use one of {sorted(SPACES)} or a list of "
                    f"base kernel kinds from {BASE_KINDS}."
                )
            kinds = SPACES[kinds]
        kinds = tuple(k.upper() for k in kinds)
        bad = [k for k in kinds if k not in BASE_KINDS]
        if bad or not kinds:
            raise InvalidSettingError(
                f"Base kernel kinds must come from {BASE_KINDS}; got {kinds}."
            )
        if not operators or any(op not in OPERATORS for op in operators):
            raise InvalidSettingError(f"Operators must come from {OPERATORS}; got {operators}.")
        if int(n_dims) < 1:
            raise InvalidSettingError(f"The grammar needs at least one input; got {n_dims}.")
        self.n_dims = int(n_dims)
        self.kinds = kinds
        self.operators = tuple(operators)
        self.base_kernels = tuple(Base(k, i) for i in range(self.n_dims) for k in kinds)

    def contains(self, tree: Tree) -> bool:
        """Whether every base kernel and operator of ``tree`` belongs to this grammar."""
        return all(
            (isinstance(n, Base) and n in self.base_kernels)
            or (isinstance(n, Op) and n.op in self.operators)
            for _, n in nodes(tree)
        )

    def neighbours(self, tree: Tree) -> list[Tree]:
        """All trees one grammar move away: swaps of each leaf, then extensions of each node."""
        out: list[Tree] = []
        for path, node in nodes(tree):
            if isinstance(node, Base):
                out.extend(replace(tree, path, b) for b in self.base_kernels if b != node)
        for path, node in nodes(tree):
            for op in self.operators:
                out.extend(replace(tree, path, Op(op, node, b)) for b in self.base_kernels)
        return out

    def random_move(self, tree: Tree, rng: np.random.Generator) -> Tree:
        """One grammar move chosen uniformly among all :meth:`neighbours` (without listing them)."""
        all_nodes = list(nodes(tree))
        n_leaves = sum(isinstance(n, Base) for _, n in all_nodes)
        r = len(self.base_kernels)
        n_swaps = n_leaves * (r - 1)
        n_ext = len(all_nodes) * len(self.operators) * r
        k = int(rng.integers(n_swaps + n_ext))
        if k < n_swaps:
            leaf_paths = [(p, n) for p, n in all_nodes if isinstance(n, Base)]
            path, leaf = leaf_paths[k // (r - 1)]
            others = [b for b in self.base_kernels if b != leaf]
            return replace(tree, path, others[k % (r - 1)])
        k -= n_swaps
        path, node = all_nodes[k // (len(self.operators) * r)]
        op = self.operators[(k // r) % len(self.operators)]
        return replace(tree, path, Op(op, node, self.base_kernels[k % r]))

    def random_walk(self, rng: np.random.Generator, length: int) -> Tree:
        """A uniformly drawn base kernel followed by ``length`` random moves."""
        tree: Tree = self.base_kernels[int(rng.integers(len(self.base_kernels)))]
        for _ in range(length):
            tree = self.random_move(tree, rng)
        return tree


__all__ = [
    "BASE_KINDS",
    "OPERATORS",
    "PARAM_NAMES",
    "SPACES",
    "Base",
    "KernelGrammar",
    "Op",
    "Tree",
    "canonical",
    "leaves",
    "nodes",
    "parse",
    "replace",
]
