r"""GP-BO whose surrogate kernel is searched (``kernel="auto"``) or given as an expression.

:class:`KernelSearchOptimizer` is the fast engine (:class:`headstart._gp.GPOptimizer`) with one
change: the surrogate is a :class:`~headstart.kernels.model.TreeGP` whose kernel is a grammar
expression instead of Matérn-5/2 ARD. With ``kernel="auto"`` a BOSOT search on the study's own
data (encoded inputs in ``[0, 1]``, standardised values) picks the expression, and is re-run
every ``every`` new observations; in between, only the winning kernel's hyperparameters are
re-fitted (MAP, ``restarts`` starts). The acquisition search, piBO weighting and Thompson
sampling run unchanged on the new surrogate.

Cost: a search scores ``budget`` kernels at ``restarts`` MAP fits each, about 0.1-1.5 s per kernel
for up to a few hundred observations on one core, so ``kernel="auto"`` suits objectives that
take at least seconds to evaluate.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from headstart._gp.acquisition import Criterion, PriorWeight
from headstart._gp.engine import DimSpec, FitSummary, GPOptimizer
from headstart.exceptions import InvalidSettingError
from headstart.kernels.grammar import SPACES, KernelGrammar, Tree, parse
from headstart.kernels.model import TreeGP
from headstart.kernels.oracle import Oracle, evaluate
from headstart.kernels.strategies import BOSOT


@dataclass(frozen=True)
class KernelSearchSettings:
    """How often and how hard ``kernel="auto"`` searches.

    Attributes:
        every: Re-run the search after this many new observations (default 10).
        budget: Kernels scored per search (default 20).
        space: ``"se-rq"`` (default; smooth objectives) or ``"full"`` (adds LIN and PER).
        restarts: MAP restarts per scored kernel and per refit (default 3).
        ea_steps: BOSOT's EA generations (default 6).
    """

    every: int = 10
    budget: int = 20
    space: str = "se-rq"
    restarts: int = 3
    ea_steps: int = 6

    @classmethod
    def from_mapping(cls, options: Mapping | None) -> KernelSearchSettings:
        options = dict(options or {})
        unknown = sorted(set(options) - set(cls.__dataclass_fields__))
        if unknown:
            raise InvalidSettingError(
                f"Unknown kernel_search option(s) {unknown}; use {sorted(cls.__dataclass_fields__)}."
            )
        settings = cls(**options)
        for name in ("every", "budget", "restarts", "ea_steps"):
            v = getattr(settings, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise InvalidSettingError(
                    f"kernel_search[{name!r}] must be an integer >= 1; got {v!r}."
                )
        if settings.space not in SPACES:
            raise InvalidSettingError(
                f"kernel_search['space'] must be one of {sorted(SPACES)}; got {settings.space!r}."
            )
        return settings

    def to_json(self) -> dict:
        return dict(self.__dict__)


def check_kernel(kernel: str, kinds: Sequence[str]) -> str:
    """Validate ``kernel`` for columns of these ``kinds``; returns its canonical text.

    ``"matern"`` suits any space; ``"auto"`` and expressions (over ``len(kinds)`` inputs) need
    numeric columns only.
    """
    if not isinstance(kernel, str):
        raise InvalidSettingError(
            f"kernel must be 'matern', 'auto' or an expression like 'SE[0] * SE[1]'; got {kernel!r}."
        )
    if kernel == "matern":
        return kernel
    if "categorical" in kinds:
        raise InvalidSettingError(
            f"kernel={kernel!r} supports numeric parameters only; this space has categorical "
            "ones. Use kernel='matern' (the default)."
        )
    return kernel if kernel == "auto" else str(parse(kernel, len(kinds)))


class KernelSearchOptimizer(GPOptimizer):
    """:class:`~headstart._gp.GPOptimizer` with a grammar kernel (searched or fixed).

    Args:
        dims: One :class:`~headstart._gp.DimSpec` per encoded column (numeric only).
        kernel: ``"auto"`` or a kernel expression such as ``"SE[0] * PER[1] + LIN[0]"``.
        settings: :class:`KernelSearchSettings` of the search.
        acquisition, seed, ucb_beta: As for :class:`~headstart._gp.GPOptimizer`.
    """

    def __init__(
        self,
        dims: Sequence[DimSpec],
        *,
        kernel: str = "auto",
        settings: KernelSearchSettings | None = None,
        acquisition: str = "logei",
        seed: int = 0,
        deterministic: bool = False,
        ucb_beta: float | None = None,
    ) -> None:
        kwargs = {} if ucb_beta is None else {"ucb_beta": ucb_beta}
        super().__init__(
            dims, acquisition=acquisition, seed=seed, deterministic=deterministic, **kwargs
        )
        kernel = check_kernel(kernel, [d.kind for d in self.dims])
        self.settings = settings or KernelSearchSettings()
        self.auto = kernel == "auto"
        self.tree: Tree | None = None if self.auto else parse(kernel)
        self._searched_at: int | None = None
        self.searches = 0

    @property
    def expression(self) -> str | None:
        """The kernel in use (``None`` before the first fit of ``kernel="auto"``)."""
        return None if self.tree is None else str(self.tree)

    def _criterion(
        self, train_X: np.ndarray, train_y: np.ndarray, prior: PriorWeight | None
    ) -> tuple[Criterion, np.ndarray]:
        std = train_y.std()
        y = (train_y - train_y.mean()) / (std if std > 0 else 1.0)
        s, n = self.settings, len(y)
        seed = self.seed + n
        if n < 2:
            tree = self.tree or KernelGrammar(len(self.dims), s.space).base_kernels[0]
            result = evaluate(tree, train_X, y, restarts=s.restarts, seed=seed)
        elif self.auto and (self._searched_at is None or n - self._searched_at >= s.every):
            result = self._search(train_X, y, seed)
        else:
            result = evaluate(self.tree, train_X, y, restarts=s.restarts, seed=seed)
        self.tree = result.tree
        gp = TreeGP(result.tree, np.array(result.values[:-1]), result.noise, train_X, y)
        self._last_fit = FitSummary(
            lengthscales=gp.params.lengthscales,
            outputscale=gp.outputscale,
            noise=gp.noise,
            mll=result.log_likelihood,
            map_objective=-result.score * n,
            n_train=n,
            warm_started=False,
        )
        kind = "logei" if self.acquisition == "ts" else self.acquisition
        return Criterion(gp, kind, float(y.max()), prior, beta=self.ucb_beta), y

    def _search(self, X: np.ndarray, y: np.ndarray, seed: int):
        s = self.settings
        grammar = KernelGrammar(len(self.dims), s.space)
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


__all__ = ["KernelSearchOptimizer", "KernelSearchSettings", "check_kernel"]
