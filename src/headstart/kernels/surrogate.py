r"""The surrogate of ``kernel="auto"`` or a kernel expression: a GP with a grammar kernel.

:class:`GrammarKernelGP` is a :class:`~headstart._engine.protocols.Surrogate` whose posterior is a
:class:`~headstart.kernels.model.TreeGP`: its kernel is a grammar expression instead of Matérn-5/2
ARD, and the one BO engine (:class:`headstart._engine.engine.BOEngine`) runs on it unchanged. With ``kernel="auto"`` a BOSOT search on the study's own
data (encoded inputs in ``[0, 1]``, standardised values) picks the expression, and is re-run
every ``every`` new observations; in between, only the winning kernel's hyperparameters are
re-fitted (MAP, ``restarts`` starts). The acquisition search, piBO weighting and Thompson
sampling run unchanged on the new surrogate.

Cost: a search scores ``budget`` kernels at ``restarts`` MAP fits each, about 0.1-1.5 s per kernel
for up to a few hundred observations on one core, so ``kernel="auto"`` suits objectives that
take at least seconds to evaluate.
"""

from __future__ import annotations

import numpy as np

from headstart._engine.numerics import check_training_data, standardize
from headstart.kernels.grammar import KernelGrammar, Tree, parse
from headstart.kernels.model import TreeGP
from headstart.kernels.oracle import Oracle, evaluate
from headstart.kernels.settings import KernelSearchSettings, check_kernel
from headstart.kernels.strategies import BOSOT


class GrammarKernelGP:
    """Exact GP surrogate whose kernel is a grammar expression (searched or fixed).

    Args:
        dim: Number of (numeric) encoded columns.
        kernel: ``"auto"`` or a kernel expression such as ``"SE[0] * PER[1] + LIN[0]"``.
        settings: :class:`KernelSearchSettings` of the search.
        seed: Seeds the searches and MAP restarts (``seed + n`` at ``n`` observations).
    """

    informative_prior = False

    def __init__(
        self,
        dim: int,
        *,
        kernel: str = "auto",
        settings: KernelSearchSettings | None = None,
        seed: int = 0,
    ) -> None:
        self.dim = dim
        self.seed = seed
        kernel = check_kernel(kernel, ["continuous"] * dim)
        self.settings = settings or KernelSearchSettings()
        self.auto = kernel == "auto"
        self.tree: Tree | None = None if self.auto else parse(kernel)
        self._searched_at: int | None = None
        self.searches = 0
        self.last_fit: dict = {}

    @property
    def expression(self) -> str | None:
        """The kernel in use (``None`` before the first fit of ``kernel="auto"``)."""
        return None if self.tree is None else str(self.tree)

    def condition(
        self, train_X: np.ndarray, train_y: np.ndarray, rng: np.random.Generator
    ) -> tuple[TreeGP, np.ndarray]:
        """Standardize, search or refit the kernel, and return ``(TreeGP, standardized y)``."""
        check_training_data(train_X, train_y)
        y = standardize(train_y)[0]
        s, n = self.settings, len(y)
        seed = self.seed + n
        if n < 2:
            tree = self.tree or KernelGrammar(self.dim, s.space).base_kernels[0]
            result = evaluate(tree, train_X, y, restarts=s.restarts, seed=seed)
        elif self.auto and (self._searched_at is None or n - self._searched_at >= s.every):
            result = self._search(train_X, y, seed)
        else:
            result = evaluate(self.tree, train_X, y, restarts=s.restarts, seed=seed)
        self.tree = result.tree
        gp = TreeGP(result.tree, np.array(result.values[:-1]), result.noise, train_X, y)
        self.last_fit = {
            "kernel": str(result.tree),
            "lengthscales": gp.lengthscales,
            "outputscale": gp.outputscale,
            "noise": gp.noise,
            "mll": result.log_likelihood,
            "map_objective": -result.score * n,
            "n_train": n,
            "searches": self.searches,
        }
        return gp, y

    def _search(self, X: np.ndarray, y: np.ndarray, seed: int):
        s = self.settings
        grammar = KernelGrammar(self.dim, s.space)
        with Oracle(X, y, restarts=s.restarts, seed=seed) as oracle:
            history = BOSOT(steps=s.ea_steps).run(
                grammar, oracle, s.budget, np.random.default_rng(seed)
            )
            candidates = [e.result for e in history]
            if self.tree is not None:  # the incumbent competes on the new data too
                candidates.append(oracle(self.tree))
        self._searched_at = len(y)
        self.searches += 1
        return max(candidates, key=lambda r: r.score)

    def state(self) -> dict:
        """The kernel in use and when it was last searched."""
        return {"kernel": self.expression, "searched_at": self._searched_at}

    def load_state(self, state: dict) -> None:
        if state.get("kernel"):
            self.tree = parse(state["kernel"], self.dim)
            self._searched_at = state.get("searched_at")

    def diagnostics(self) -> dict:
        """The last fit: kernel expression, hyperparameter summary, number of searches."""
        return dict(self.last_fit)


__all__ = ["GrammarKernelGP"]
