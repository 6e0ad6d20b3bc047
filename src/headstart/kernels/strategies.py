r"""Kernel search strategies behind one interface: BOSOT, greedy compositional search, random.

Every strategy spends a budget of oracle calls on one :class:`~headstart.kernels.oracle.Oracle`
and returns the calls in order as :class:`Evaluation` records (the oracle result plus the time the
strategy itself spent choosing that kernel), so that methods compare at equal oracle counts and
the acquisition-to-oracle time ratio (BOSOT Table 3) can be reported.

* :class:`BOSOT` (Bitzer et al. 2022, Alg. 1): GP over kernels with the SOT kernel-kernel
  (:mod:`headstart.kernels.metagp`), EI maximised by the evolutionary algorithm of Alg. 2.
* :class:`GreedySearch` (Duvenaud et al. 2013): score every base kernel, then every neighbour of
  the best kernel so far, and repeat until a stage brings no improvement.
* :class:`RandomSearch`: random walks from a uniformly drawn base kernel, with Geometric(1/3) - 1
  grammar moves (0, 1, 2, ...), the sampler of the paper's Hellinger-BO baseline.

Kernels that only differ by operand order or association (:func:`~headstart.kernels.grammar.
canonical`) are evaluated once per run.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from headstart._engine.threads import limit_threads
from headstart.exceptions import InvalidSettingError
from headstart.kernels.grammar import KernelGrammar, Tree, canonical
from headstart.kernels.metagp import SOTMetaGP
from headstart.kernels.oracle import Oracle, OracleResult
from headstart.kernels.sot import TreeFeatures

Callback = Callable[["Evaluation"], None]


@dataclass(frozen=True)
class Evaluation:
    """One oracle call of a search: what was scored, and what choosing it cost."""

    result: OracleResult
    acquisition_seconds: float = 0.0
    phase: str = "search"


class _Run:
    """Book-keeping shared by the strategies: budget, seen kernels, callback."""

    def __init__(self, oracle: Oracle, budget: int, callback: Callback | None) -> None:
        if int(budget) < 1:
            raise InvalidSettingError(f"The kernel search budget must be at least 1; got {budget}.")
        self.oracle, self.budget, self.callback = oracle, int(budget), callback
        self.history: list[Evaluation] = []
        self.seen: set[str] = set()

    @property
    def left(self) -> int:
        return self.budget - len(self.history)

    def new(self, trees: list[Tree]) -> list[Tree]:
        """``trees`` without kernels already scored or repeated, in order."""
        out, keys = [], set()
        for t in trees:
            key = canonical(t)
            if key not in self.seen and key not in keys:
                out.append(t)
                keys.add(key)
        return out

    def score(self, trees: list[Tree], acquisition_seconds: float = 0.0, phase: str = "search"):
        """Score up to ``left`` new kernels (in parallel if the oracle has workers)."""
        trees = self.new(trees)[: self.left]
        if not trees:
            return []
        share = acquisition_seconds / len(trees)
        results = []
        chunk = max(1, self.oracle.workers)
        for i in range(0, len(trees), chunk):  # chunks keep the progress bar moving
            for r in self.oracle.evaluate_many(trees[i : i + chunk]):
                self.seen.add(canonical(r.tree))
                ev = Evaluation(r, share, phase)
                self.history.append(ev)
                results.append(r)
                if self.callback is not None:
                    self.callback(ev)
        return results


class BOSOT:
    """Bayesian optimisation over kernel structures with the SOT kernel-kernel (BOSOT).

    Args:
        population: EA population ``P`` (paper: 100).
        n_offspring: Children per survivor (paper: 4); ``P / (n_offspring + 1)`` survive.
        steps: EA generations ``L`` (paper: 10; 6 for Airline).
        n_initial: Size of the initial design; default ``3 r`` (each of the ``r`` base kernels and
            two random moves from it, as in the paper), capped at half the budget, base kernels
            first.
        xi: EI's exploration offset (0.01).
        batch_size: Kernels proposed per iteration; default: the oracle's ``workers`` (1 is the
            paper's sequential BOSOT). A batch is chosen by maximising EI, adding the choice to
            the meta-GP at its predicted score (kriging believer), and maximising again; the
            batch is then scored in parallel.
    """

    name = "bosot"

    def __init__(
        self,
        *,
        population: int = 100,
        n_offspring: int = 4,
        steps: int = 10,
        n_initial: int | None = None,
        xi: float = 0.01,
        batch_size: int | None = None,
    ) -> None:
        if population < n_offspring + 1 or n_offspring < 1 or steps < 1:
            raise InvalidSettingError(
                "BOSOT needs population >= n_offspring + 1, n_offspring >= 1 and steps >= 1; got "
                f"population={population}, n_offspring={n_offspring}, steps={steps}."
            )
        self.population, self.n_offspring, self.steps = population, n_offspring, steps
        self.n_initial, self.xi, self.batch_size = n_initial, xi, batch_size
        self.last_model: SOTMetaGP | None = None

    def initial_design(self, grammar: KernelGrammar, rng: np.random.Generator, budget: int):
        walks = []
        for b in grammar.base_kernels:
            m1 = grammar.random_move(b, rng)
            walks.extend([m1, grammar.random_move(m1, rng)])
        order = rng.permutation(len(walks))
        design = list(grammar.base_kernels) + [walks[i] for i in order]
        n = self.n_initial or min(3 * len(grammar.base_kernels), max(1, budget // 2))
        return design, n

    def run(
        self,
        grammar: KernelGrammar,
        oracle: Oracle,
        budget: int,
        rng: np.random.Generator,
        callback: Callback | None = None,
    ) -> list[Evaluation]:
        run = _Run(oracle, budget, callback)
        design, n_initial = self.initial_design(grammar, rng, budget)
        run.score(run.new(design)[:n_initial], phase="initial")
        features: dict[str, TreeFeatures] = {}
        while run.left > 0:
            start = time.perf_counter()
            observed = [e.result for e in run.history]
            with limit_threads():
                model = SOTMetaGP.fit(
                    [r.tree for r in observed], np.array([r.score for r in observed]),
                    grammar.n_dims, features,
                )  # fmt: skip
                self.last_model = model
                batch: list[Tree] = []
                taken = set(run.seen)
                for j in range(min(self.batch_size or oracle.workers, run.left)):
                    if j:  # later members of a batch: kriging believer on the earlier ones
                        model = model.with_fantasy(batch[-1])
                    batch.append(self.maximize_ei(grammar, model, taken, rng))
                    taken.add(canonical(batch[-1]))
            run.score(batch, time.perf_counter() - start)
        return run.history

    def maximize_ei(
        self,
        grammar: KernelGrammar,
        model: SOTMetaGP,
        seen: set[str],
        rng: np.random.Generator,
    ) -> Tree:
        """Alg. 2: evolve a population from the base kernels, return the best unseen kernel by EI."""
        pop: list[Tree] = list(grammar.base_kernels)
        while len(pop) < self.population:
            pop.append(grammar.random_move(pop[int(rng.integers(len(pop)))], rng))
        n_survive = self.population // (self.n_offspring + 1)
        best_tree, best_ei = None, -np.inf
        for _ in range(self.steps):
            ei = model.expected_improvement(pop, xi=self.xi)
            ei[[canonical(t) in seen for t in pop]] = -np.inf
            i = int(np.argmax(ei))
            if ei[i] > best_ei:
                best_tree, best_ei = pop[i], float(ei[i])
            survivors = [pop[j] for j in np.argsort(-ei, kind="stable")[:n_survive]]
            pop = survivors + [
                grammar.random_move(s, rng) for s in survivors for _ in range(self.n_offspring)
            ]
        if best_tree is None:  # every candidate was scored already: step away from one of them
            best_tree = grammar.random_move(pop[0], rng)
        return best_tree


class GreedySearch:
    """Greedy compositional kernel search (Duvenaud et al. 2013), in random neighbour order.

    Stops early (before the budget) when a whole stage brings no improvement, as the original.
    """

    name = "greedy"

    def run(
        self,
        grammar: KernelGrammar,
        oracle: Oracle,
        budget: int,
        rng: np.random.Generator,
        callback: Callback | None = None,
    ) -> list[Evaluation]:
        run = _Run(oracle, budget, callback)
        stage = [grammar.base_kernels[i] for i in rng.permutation(len(grammar.base_kernels))]
        best_score = -np.inf
        while run.left > 0 and stage:
            results = run.score(stage, phase="greedy")
            top = max(results, key=lambda r: r.score, default=None)
            if top is None or top.score <= best_score:
                break
            best_score = top.score
            neighbours = grammar.neighbours(top.tree)
            stage = [neighbours[i] for i in rng.permutation(len(neighbours))]
        return run.history


class RandomSearch:
    """Random walks over the grammar from a uniformly drawn base kernel."""

    name = "random"

    def run(
        self,
        grammar: KernelGrammar,
        oracle: Oracle,
        budget: int,
        rng: np.random.Generator,
        callback: Callback | None = None,
    ) -> list[Evaluation]:
        run = _Run(oracle, budget, callback)
        for _ in range(100 * budget):
            if run.left == 0:
                break
            batch = []
            while len(batch) < max(1, oracle.workers):
                batch.append(grammar.random_walk(rng, int(rng.geometric(1 / 3)) - 1))
            run.score(batch[: run.left], phase="random")
        return run.history


STRATEGIES = {"bosot": BOSOT, "greedy": GreedySearch, "random": RandomSearch}


__all__ = ["BOSOT", "STRATEGIES", "Evaluation", "GreedySearch", "RandomSearch"]
