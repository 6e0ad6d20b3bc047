r"""Kernel search strategies behind one interface: BOSOT, greedy compositional search, random.

Every strategy spends a budget of oracle calls on one :class:`~headstart.kernels.oracle.Oracle`
and returns the calls in order as :class:`Evaluation` records (the oracle result plus the time the
strategy itself spent choosing that kernel), so that methods compare at equal oracle counts and
the acquisition-to-oracle time ratio (BOSOT Table 3) can be reported.

* :class:`BOSOT` (Bitzer et al. 2022, Alg. 1): GP over kernels with the SOT kernel-kernel
  (:mod:`headstart.kernels.metagp`), EI maximised by the evolutionary algorithm of Alg. 2; by
  default greedy's stages come first, scored in EI order (``"bosot"``); ``"bosot-paper"`` is the
  paper's algorithm, ``"bosot-ea"`` the EA from the start with simplification, ``"bosot-cost"``
  the same with cost-aware EI.
* :class:`GreedySearch` (Duvenaud et al. 2013): score every base kernel, then every neighbour of
  the best kernel so far, and repeat until a stage brings no improvement.
* :class:`RandomSearch`: random walks from a uniformly drawn base kernel, with Geometric(1/3) - 1
  grammar moves (0, 1, 2, ...), the sampler of the paper's Hellinger-BO baseline.

Kernels are scored in canonical simplified form (:func:`~headstart.kernels.simplify.simplify`;
not by ``"bosot-paper"``), and kernels equal up to operand order or association
(:func:`~headstart.kernels.grammar.canonical`) are evaluated once per run.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial

import numpy as np

from headstart._engine.threads import limit_threads
from headstart.exceptions import InvalidSettingError
from headstart.kernels.cost import OracleCostModel
from headstart.kernels.grammar import KernelGrammar, Tree, canonical
from headstart.kernels.metagp import SOTMetaGP
from headstart.kernels.oracle import Oracle, OracleResult
from headstart.kernels.simplify import simplify
from headstart.kernels.sot import TreeFeatures

Callback = Callable[["Evaluation"], None]


@dataclass(frozen=True)
class Evaluation:
    """One oracle call of a search: what was scored, and what choosing it cost."""

    result: OracleResult
    acquisition_seconds: float = 0.0
    phase: str = "search"


class _Run:
    """Book-keeping shared by the strategies: budget, seen kernels, callback.

    With ``simplify`` (the default) every proposed kernel is first replaced by its canonical
    simplified form (:func:`~headstart.kernels.simplify.simplify`), so ``RQ[1] + RQ[1]`` is
    scored, stored and shown as ``RQ[1]``, and counts as seen once ``RQ[1]`` has been scored.
    """

    def __init__(
        self, oracle: Oracle, budget: int, callback: Callback | None, simplify: bool = True
    ) -> None:
        if int(budget) < 1:
            raise InvalidSettingError(f"The kernel search budget must be at least 1; got {budget}.")
        self.oracle, self.budget, self.callback = oracle, int(budget), callback
        self.simplify = simplify
        self.history: list[Evaluation] = []
        self.seen: set[str] = set()

    @property
    def left(self) -> int:
        return self.budget - len(self.history)

    def form(self, tree: Tree) -> Tree:
        """The form in which ``tree`` is scored: simplified, unless the run keeps expressions."""
        return simplify(tree) if self.simplify else tree

    def key(self, tree: Tree) -> str:
        return canonical(self.form(tree))

    def new(self, trees: list[Tree]) -> list[Tree]:
        """``trees`` in scored form, without kernels already scored or repeated, in order."""
        out, keys = [], set()
        for t in trees:
            t = self.form(t)
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


class _Strategy:
    """A kernel search: :meth:`run` scores at most ``budget`` kernels, :meth:`search` chooses them."""

    simplify = True  # propose kernels in canonical simplified form (:class:`_Run`)

    def run(
        self,
        grammar: KernelGrammar,
        oracle: Oracle,
        budget: int,
        rng: np.random.Generator,
        callback: Callback | None = None,
    ) -> list[Evaluation]:
        """Score at most ``budget`` kernels of ``grammar`` with ``oracle``; the evaluations in the
        order they were made (``callback`` sees each one as it is made)."""
        run = _Run(oracle, budget, callback, simplify=self.simplify)
        self.search(grammar, run, rng)
        return run.history

    def search(self, grammar: KernelGrammar, run: _Run, rng: np.random.Generator) -> None:
        raise NotImplementedError


class BOSOT(_Strategy):
    """Bayesian optimisation over kernel structures with the SOT kernel-kernel (BOSOT).

    The default changes the paper's Alg. 1-2 in two measured ways (issue 17,
    ``docs/benchmarks/kernel_search_known/kernel_search_known.md``); :meth:`paper` (``method=
    "bosot-paper"``) is the paper as published:

    * ``simplify``: kernels are proposed, scored and shown in canonical simplified form
      (:func:`~headstart.kernels.simplify.simplify`). In the paper-style runs of
      ``docs/benchmarks/kernel_search.md``, 50% of BOSOT's proposals (69% after call 25) were
      redundant forms such as ``RQ[1] + RQ[1]``; they averaged 16.5 hyperparameters against
      greedy's 6.3 and cost 3.6 s per oracle call against 0.7 s (the table "What the oracle
      calls were spent on" of that report);
    * ``stages``: the search starts as greedy compositional search does (every base kernel,
      then the neighbours of the best kernel, stage by stage), but scores each stage in the
      order of the acquisition, refitting the meta-GP after every call, and hands the rest of
      the budget to the evolutionary search once a stage brings no improvement. On the
      known-structure suite this reaches at least greedy's median score on 9 of 10 data sets
      after 20 calls and 10 of 10 after 50, at 1.1-1.2x greedy's time, where the paper's
      evolutionary search from the start took 2.4-8.7x as long (one seed).

    ``cost_aware`` (off by default) divides EI by the oracle time predicted from the kernel's
    size (:class:`~headstart.kernels.cost.OracleCostModel`) to the power ``gamma``, cooled from 1
    (EI per second) to 0 (plain EI) over the budget (cost cooling, Lee et al. 2020). Measured
    with ``stages=False``, it cut the evolutionary search's time by 12-51% at equal or lower
    scores (one seed), so it is an option.

    Args:
        population: EA population ``P`` (paper: 100).
        n_offspring: Children per survivor (paper: 4); ``P / (n_offspring + 1)`` survive.
        steps: EA generations ``L`` (paper: 10; 6 for Airline).
        n_initial: Size of the initial design; default ``3 r`` (each of the ``r`` base kernels and
            two random moves from it, as in the paper), capped at half the budget, base kernels
            first.
        xi: EI's exploration offset (0.01).
        batch_size: Kernels proposed per iteration; default: the oracle's ``workers`` (1 is the
            paper's sequential BOSOT). A batch is chosen by maximising the acquisition, adding
            the choice to the meta-GP at its predicted score (kriging believer), and maximising
            again; the batch is then scored in parallel.
        simplify, stages, cost_aware: The options above.
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
        simplify: bool = True,
        cost_aware: bool = False,
        stages: bool = True,
    ) -> None:
        if population < n_offspring + 1 or n_offspring < 1 or steps < 1:
            raise InvalidSettingError(
                "BOSOT needs population >= n_offspring + 1, n_offspring >= 1 and steps >= 1; got "
                f"population={population}, n_offspring={n_offspring}, steps={steps}."
            )
        self.population, self.n_offspring, self.steps = population, n_offspring, steps
        self.n_initial, self.xi, self.batch_size = n_initial, xi, batch_size
        self.simplify, self.cost_aware = bool(simplify), bool(cost_aware)
        self.stages = bool(stages)
        self.last_model: SOTMetaGP | None = None

    @classmethod
    def paper(cls, **kwargs) -> BOSOT:
        """The paper's BOSOT (Alg. 1-2): plain EI and expressions scored as proposed."""
        return cls(**{"simplify": False, "cost_aware": False, "stages": False, **kwargs})

    def initial_design(self, grammar: KernelGrammar, rng: np.random.Generator, budget: int):
        walks = []
        for b in grammar.base_kernels:
            m1 = grammar.random_move(b, rng)
            walks.extend([m1, grammar.random_move(m1, rng)])
        order = rng.permutation(len(walks))
        design = list(grammar.base_kernels) + [walks[i] for i in order]
        n = self.n_initial or min(3 * len(grammar.base_kernels), max(1, budget // 2))
        return design, n

    def search(self, grammar: KernelGrammar, run: _Run, rng: np.random.Generator) -> None:
        budget, oracle = run.budget, run.oracle
        features: dict[str, TreeFeatures] = {}
        if self.stages:
            self.run_stages(grammar, run, features)
        else:
            design, n_initial = self.initial_design(grammar, rng, budget)
            run.score(run.new(design)[:n_initial], phase="initial")
        start_left = max(run.left, 1)
        while run.left > 0:
            start = time.perf_counter()
            with limit_threads():
                model, cost = self.fit_models(grammar, run, features, run.left / start_left)
                batch: list[Tree] = []
                taken = set(run.seen)
                for j in range(min(self.batch_size or oracle.workers, run.left)):
                    if j:  # later members of a batch: kriging believer on the earlier ones
                        model = model.with_fantasy(batch[-1])
                    batch.append(self.maximize_acquisition(grammar, model, run, taken, rng, cost))
                    taken.add(canonical(batch[-1]))
            run.score(batch, time.perf_counter() - start)

    def fit_models(self, grammar: KernelGrammar, run: _Run, features: dict, gamma: float):
        """The meta-GP on every scored kernel, and ``(cost model, gamma)`` if cost-aware."""
        observed = [e.result for e in run.history]
        trees = [r.tree for r in observed]
        model = SOTMetaGP.fit(
            trees, np.array([r.score for r in observed]), grammar.n_dims, features
        )
        self.last_model = model
        if not self.cost_aware:
            return model, None
        return model, (OracleCostModel.fit(trees, [r.seconds for r in observed]), gamma)

    def run_stages(self, grammar: KernelGrammar, run: _Run, features: dict) -> None:
        """Greedy's stages (:func:`walk_stages`), each scored in the order of the acquisition.

        Within a stage the next kernel is the one the meta-GP (refitted after every call) ranks
        first (the ``batch_size`` first with parallel workers), so a partly scored stage holds
        its most promising members rather than a random subset. Stage 1, the base kernels, is
        scored at once (there is nothing to rank them by). Returns, handing the rest of the
        budget to the evolutionary search, when a whole stage brings no improvement (where
        greedy would stop).
        """

        def score_in_order(stage: list[Tree]) -> list[OracleResult]:
            if not run.history:
                return run.score(stage, phase="stage")
            pending, results = run.new(stage), []
            while pending and run.left > 0:
                start = time.perf_counter()
                with limit_threads():
                    model, cost = self.fit_models(grammar, run, features, 1.0)
                    value = self.acquisition(model, pending, cost)
                k = min(self.batch_size or run.oracle.workers, len(pending), run.left)
                best = sorted(np.argsort(-value, kind="stable")[:k].tolist(), reverse=True)
                batch = [pending.pop(i) for i in best]  # the k best, scored in parallel
                results += run.score(batch, time.perf_counter() - start, phase="stage")
            return results

        walk_stages(run, list(grammar.base_kernels), grammar.neighbours, score_in_order)

    def acquisition(self, model: SOTMetaGP, trees: list[Tree], cost=None) -> np.ndarray:
        """EI, divided by the predicted oracle seconds to the power ``gamma`` if cost-aware."""
        ei = model.expected_improvement(trees, xi=self.xi)
        if cost is None:
            return ei
        cost_model, gamma = cost
        return ei / cost_model.predict(trees) ** gamma

    def maximize_acquisition(
        self,
        grammar: KernelGrammar,
        model: SOTMetaGP,
        run: _Run,
        seen: set[str],
        rng: np.random.Generator,
        cost=None,
    ) -> Tree:
        """Alg. 2: evolve a population from the base kernels, return the best unseen kernel by
        the acquisition (in the run's scored form)."""
        pop: list[Tree] = list(grammar.base_kernels)
        while len(pop) < self.population:
            pop.append(run.form(grammar.random_move(pop[int(rng.integers(len(pop)))], rng)))
        n_survive = self.population // (self.n_offspring + 1)
        best_tree, best_value = None, -np.inf
        for _ in range(self.steps):
            value = self.acquisition(model, pop, cost)
            value[[canonical(t) in seen for t in pop]] = -np.inf
            i = int(np.argmax(value))
            if value[i] > best_value:
                best_tree, best_value = pop[i], float(value[i])
            survivors = [pop[j] for j in np.argsort(-value, kind="stable")[:n_survive]]
            pop = survivors + [
                run.form(grammar.random_move(s, rng))
                for s in survivors
                for _ in range(self.n_offspring)
            ]
        if best_tree is None:  # every candidate was scored already: step away from one of them
            best_tree = run.form(grammar.random_move(pop[0], rng))
        return best_tree


def walk_stages(
    run: _Run,
    stage: list[Tree],
    next_stage: Callable[[Tree], list[Tree]],
    score: Callable[[list[Tree]], list[OracleResult]],
) -> None:
    """Greedy compositional search's schedule (Duvenaud et al. 2013), shared by
    :class:`GreedySearch` and BOSOT's ``stages``: ``score`` a stage, then make
    ``next_stage(best kernel of the stage)`` the next one, until the budget is spent or a whole
    stage brings no improvement.
    """
    best_score = -np.inf
    while run.left > 0 and stage:
        top = max(score(stage), key=lambda r: r.score, default=None)
        if top is None or top.score <= best_score:
            return
        best_score = top.score
        stage = next_stage(top.tree)


class GreedySearch(_Strategy):
    """Greedy compositional kernel search (Duvenaud et al. 2013), in random neighbour order.

    Stops early (before the budget) when a whole stage brings no improvement, as the original.
    """

    name = "greedy"

    def search(self, grammar: KernelGrammar, run: _Run, rng: np.random.Generator) -> None:
        def shuffled(trees) -> list[Tree]:
            return [trees[i] for i in rng.permutation(len(trees))]

        walk_stages(
            run,
            shuffled(grammar.base_kernels),
            lambda tree: shuffled(grammar.neighbours(tree)),
            lambda stage: run.score(stage, phase="greedy"),
        )


class RandomSearch(_Strategy):
    """Random walks over the grammar from a uniformly drawn base kernel."""

    name = "random"

    def search(self, grammar: KernelGrammar, run: _Run, rng: np.random.Generator) -> None:
        for _ in range(100 * run.budget):
            if run.left == 0:
                break
            batch = []
            while len(batch) < max(1, run.oracle.workers):
                batch.append(grammar.random_walk(rng, int(rng.geometric(1 / 3)) - 1))
            run.score(batch[: run.left], phase="random")


def make_strategy(method: str, ea_steps: int = 10):
    """The strategy called ``method`` in :data:`STRATEGIES`, BOSOT variants with ``ea_steps``."""
    if method not in STRATEGIES:
        raise InvalidSettingError(
            f"Unknown kernel search method {method!r}; use one of {sorted(STRATEGIES)}."
        )
    factory = STRATEGIES[method]
    return factory(steps=ea_steps) if method.startswith("bosot") else factory()


STRATEGIES = {
    "bosot": BOSOT,
    "bosot-paper": BOSOT.paper,
    "bosot-ea": partial(BOSOT, stages=False),
    "bosot-cost": partial(BOSOT, stages=False, cost_aware=True),
    "greedy": GreedySearch,
    "random": RandomSearch,
}


__all__ = [
    "BOSOT",
    "STRATEGIES",
    "Evaluation",
    "GreedySearch",
    "RandomSearch",
    "make_strategy",
    "walk_stages",
]
