r"""Optimisation methods the benchmark runs: headstart itself and its peers, behind one signature.

A method is a callable ``run(task, seed, budget) -> list[dict]`` that spends ``budget``
evaluations of ``task.objective`` and returns one record per evaluation, in order, with at least:

* ``iteration``: 1-based evaluation number;
* ``value``: the objective value at that evaluation;
* ``best_value``: the minimum of ``value`` so far;
* ``seconds_suggest``: wall-clock seconds spent choosing the point (the objective's own time is
  excluded).

When the task has ``noise_std > 0`` the method observes ``value + noise`` (Gaussian noise from a
stream seeded by the task name and seed, so every method gets the same noise sequence for a seed),
while the records keep the noise-free ``value`` and ``best_value``: regret is on true values.
Methods that use :class:`~headstart.benchmarks.functions.Task` ``meta_tasks`` (the
``headstart-scaml``, ``-rgpe``, ``-stackgp`` and ``-mtgp`` transfer methods) pass them to
``hs.create_study(transfer_from=...)``; the others ignore them.

Suggestion overhead is measured the same way for every method: the wall-clock time of the call
that returns the next configuration (``study.ask()`` for headstart and Optuna; model fit +
acquisition optimisation + decoding for the BoTorch loop). One-time fits on the sources alone
(ScaML-GP's and RGPE's meta GPs, ABRAC's and ABLR's basis) run before the first timed call and
are cached for the process's later runs (:func:`_process_storage`); rows written before this
rule charged ScaML-GP's meta fit to its first model-based suggestion.

Model-based methods use the same initial-design size, ``min(2 d + 1, 10, budget // 5)`` (at least 1),
the default of :func:`headstart._strategy.default_n_initial`. Third-party imports (optuna, torch,
botorch) happen inside the methods, so importing this module is cheap.
"""

from __future__ import annotations

import contextvars
import functools
import itertools
import time
import warnings
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from headstart._strategy import default_n_initial
from headstart.benchmarks import _registry
from headstart.benchmarks.functions import Task
from headstart.exceptions import InvalidSettingError
from headstart.space import Categorical, Fixed, Float, Int, SearchSpace

Method = Callable[[Task, int, int], list[dict[str, Any]]]

METHODS: dict[str, Method] = {}
DESCRIPTIONS: dict[str, str] = {}


def register_method(
    name: str, fn: Method, *, description: str = "", overwrite: bool = False
) -> Method:
    """Add a method to :data:`METHODS`.

    Args:
        name: Registry key used on the command line (``--methods``).
        fn: ``fn(task, seed, budget) -> list[dict]``; a module-level function, so that worker
            processes can receive it.
        description: One line shown by ``headstart bench list``.
        overwrite: Replace an existing method of the same name instead of raising.

    Returns:
        ``fn``, so this can be used inline.

    Raises:
        InvalidSettingError: ``fn`` is not callable, or the name is taken.
    """
    if not callable(fn):
        raise InvalidSettingError(f"register_method expects a callable; got {fn!r}.")
    _registry.add(METHODS, "method", name, fn, overwrite=overwrite)
    DESCRIPTIONS[name] = description or (fn.__doc__ or "").strip().split("\n")[0]
    return fn


def get_method(name: str) -> Method:
    """The registered method called ``name``.

    Raises:
        InvalidSettingError: no such method (the message lists the valid names).
    """
    return _registry.look_up(METHODS, "method", name)


def n_initial_for(task: Task, budget: int) -> int:
    """Initial-design size shared by every model-based method: ``min(2 d + 1, 10, budget // 5)``."""
    return default_n_initial(task.space.dim, budget)


class _Recorder:
    """Evaluates the objective and accumulates the per-evaluation records.

    :meth:`evaluate` returns what the optimiser observes: ``task.observe(params, rng)`` when the
    task has it, else the value plus ``task.noise_std`` Gaussian noise (``rng``: a stream seeded
    by ``(task.name, seed)``). The records hold the noise-free value.
    """

    def __init__(self, task: Task, seed: int = 0) -> None:
        self.task = task
        self.records: list[dict[str, Any]] = []
        self.best = float("inf")
        self._noise = np.random.default_rng([zlib.crc32(task.name.encode()), int(seed), 7])

    def evaluate(self, params: dict[str, Any], seconds_suggest: float) -> float:
        value = float(self.task.objective(params))
        self.best = min(self.best, value)
        self.records.append(
            {
                "iteration": len(self.records) + 1,
                "value": value,
                "best_value": self.best,
                "seconds_suggest": float(seconds_suggest),
            }
        )
        if self.task.observe is not None:
            return float(self.task.observe(params, self._noise))
        if self.task.noise_std > 0:
            return value + self.task.noise_std * float(self._noise.standard_normal())
        return value


# --- headstart ------------------------------------------------------------------------------------
def _warm_imports(*modules: str) -> None:
    """Import lazily loaded modules up front, so no suggestion is charged for an import."""
    import importlib
    from contextlib import suppress

    for name in modules:
        with suppress(ImportError):  # a missing module fails later, inside the timed call
            importlib.import_module(name)


@functools.cache
def _process_storage():
    """One in-memory storage for every benchmark study of this process.

    Its model cache keeps the fits that depend on the sources alone -- ScaML-GP's and RGPE's
    meta-task GPs, keyed by the sources' hash and fitted with a fixed seed
    (:mod:`headstart._transfer.cache`) -- so the seeds of a task fit them once per process, as
    a user's studies on one storage do, and a suggestion's time carries no fit that depends on
    no target data (minutes for 3 x 1,024 FC-Net sources), only rebuilding its factorizations
    from the cache. Results are those of a fresh storage (``tests/test_benchmarks.py``): the
    cache is keyed by everything the fit reads, and fits that depend on the seed (ABRAC's
    basis) key on it. :func:`_run_headstart` runs these fits before its first timed
    suggestion."""
    from headstart.storage import get_storage

    return get_storage(None)


_STUDY_NUMBER = itertools.count()  # unique study names inside the process's storage


def study_at_sobol_points(task: Task, n: int, name: str, method: str, **options: Any):
    """An in-memory study (minimized, seed 0, no priors) of ``task`` told ``n`` scrambled Sobol
    points and their values: the state a timing benchmark starts its suggestions from."""
    import warnings

    from scipy.stats import qmc

    import headstart as hs

    study = hs.create_study(
        name, task.space, direction="minimize", storage=None, method=method, seed=0,
        use_priors=False, **options,
    )  # fmt: skip
    points = task.space.decode(qmc.Sobol(task.space.dim, seed=0).random(n))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # Sobol's balance warning for n not a power of 2
        study.add_trials([(p, float(task.objective(p))) for p in points])
    return study


def _run_headstart(
    task: Task, seed: int, budget: int, method: str, **settings: Any
) -> list[dict[str, Any]]:
    import headstart as hs

    # winners_first=True: the warm start's design (the sources' best configurations, ranked per
    # source and interleaved, as many as GP-BO's initial design) is enqueued before the method;
    # the count is method="warmstart"'s for a single-objective study without n_initial
    winners_first = []
    if settings.pop("winners_first", False):
        from headstart._meta import ranked_configurations

        rows = ranked_configurations(task.meta_tasks, default_n_initial(task.space.dim, budget))
        winners_first = task.space.decode(rows) if len(rows) else []

    if method != "random":
        _warm_imports("headstart._gp", "headstart._transfer", "headstart.sources._domains")

    settings.setdefault("use_priors", False)  # plain methods ignore priors on the task's space
    # noiseless test functions and tables: interpolate (Optuna's GP is told so too)
    settings.setdefault("deterministic", task.noise_std == 0)
    variant = _POOL_VARIANT.get()  # inside a PoolArgmax call: its create_study settings
    settings.update(dict(variant or ()))
    study = hs.create_study(
        f"bench-{task.name}-{method}-{seed}-{next(_STUDY_NUMBER)}",
        task.space,
        direction="minimize",
        storage=_process_storage(),
        method=method,
        seed=seed,
        budget=budget,
        **settings,
    )
    # one-time fits on the sources alone (ScaML-GP's meta GPs; ABRAC's basis is trained in
    # create_study) are cached in the storage and charged to no suggestion
    study._strategy.prefit()
    for params in winners_first:  # queued ahead of the method's own suggestions
        study.enqueue(params)
    recorder = _Recorder(task, seed)
    pool = getattr(task.objective, "X", None) if variant is not None else None
    if pool is not None:
        from headstart.benchmarks.hpob import encode_rows

        pool, taken = encode_rows(task.space, pool), {}
    for _ in range(budget):
        t0 = time.perf_counter()
        if pool is None:
            trial = study.ask()
        else:
            trial = _ask_pool_argmax(study, task.objective, pool, taken)
        seconds = time.perf_counter() - t0
        study.tell(trial, recorder.evaluate(trial.params, seconds))
    return recorder.records


# The settings of the PoolArgmax call in progress (None: not inside one)
_POOL_VARIANT: contextvars.ContextVar[tuple | None] = contextvars.ContextVar(
    "pool_variant", default=None
)


def _ask_pool_argmax(study, objective, encoded: np.ndarray, taken: dict[int, np.ndarray]):
    """The next trial of a pool-based task as MPHD's paper and HPO-B's pool protocol take it
    (Fan et al. 2024): the acquisition's argmax over the pool's configurations not yet evaluated,
    after the study's own initial design. ``objective`` is the task's pool objective (``X``,
    ``nearest``), ``encoded`` its rows in the model's coordinates
    (:func:`headstart.benchmarks.hpob.encode_rows`). A configuration is evaluated once:
    re-picking the incumbent, where the acquisition of a noisy model can peak, stalled the runs
    on a handful of rows. ``taken`` maps trial numbers to the rows of the configuration each
    evaluated (every copy of it in the pool), filled once per trial."""
    done = [t for t in study.trials if t.state == "complete"]
    if len(done) < study._strategy.n_initial:
        return study.ask()
    for t in done:
        if t.number not in taken:
            row = objective.X[objective.nearest(t.params)]
            taken[t.number] = np.flatnonzero((row == objective.X).all(axis=1))
    free = np.ones(len(encoded), dtype=bool)
    for rows in taken.values():
        free[rows] = False
    if not free.any():  # every configuration evaluated: the study's own choice
        return study.ask()
    values = [study._to_max(t.value) for t in done]
    criterion = study._strategy.criteria([t.params for t in done], values)[0]
    candidates = np.flatnonzero(free)
    scores = np.asarray(criterion.value(encoded[candidates]), dtype=np.float64)
    best = candidates[int(np.argmax(np.nan_to_num(scores, nan=-np.inf)))]
    study.enqueue(study.space.decode(encoded[best : best + 1])[0])
    return study.ask()


@dataclass(frozen=True)
class PoolArgmax:
    """A registered headstart method whose model-based suggestions are the acquisition's argmax
    over the task's pool (:func:`_ask_pool_argmax`) instead of a continuous search scored at the
    nearest pool point (issue 33: the protocol of the MPHD paper's pool benchmarks);
    ``settings`` are passed on to ``create_study`` (e.g. PI with a margin, the paper's
    acquisition)."""

    base: str
    settings: tuple[tuple[str, Any], ...] = ()

    def __call__(self, task: Task, seed: int, budget: int) -> list[dict[str, Any]]:
        token = _POOL_VARIANT.set(self.settings)
        try:
            return METHODS[self.base](task, seed, budget)
        finally:
            _POOL_VARIANT.reset(token)


def run_headstart_gp(task: Task, seed: int, budget: int) -> list[dict[str, Any]]:
    """headstart GP-BO at the library's defaults (method="gp": Sobol init, Matérn-5/2 GP with
    learned noise, LogEI), as a user who sets nothing runs it."""
    return _run_headstart(task, seed, budget, "gp", deterministic=False)


def run_headstart_gp_deterministic(task: Task, seed: int, budget: int) -> list[dict[str, Any]]:
    """headstart GP-BO told a noiseless task is noise-free (``deterministic=True``; the
    benchmarks' setting before issue 30)."""
    return _run_headstart(task, seed, budget, "gp")


def run_headstart_gp_budget5(task: Task, seed: int, budget: int) -> list[dict[str, Any]]:
    """headstart GP-BO with the initial design of before issue 18: ``min(2 d + 1, budget // 5)``."""
    n = max(min(2 * task.space.dim + 1, budget // 5), 1)
    return _run_headstart(task, seed, budget, "gp", n_initial=n)


def run_headstart_gp_2d1(task: Task, seed: int, budget: int) -> list[dict[str, Any]]:
    """headstart GP-BO with ``2 d + 1`` initial points (before issue 18, budget not given)."""
    return _run_headstart(task, seed, budget, "gp", n_initial=min(2 * task.space.dim + 1, budget))


def run_headstart_random(task: Task, seed: int, budget: int) -> list[dict[str, Any]]:
    """headstart random search (method="random")."""
    return _run_headstart(task, seed, budget, "random")


def run_headstart_pibo(task: Task, seed: int, budget: int) -> list[dict[str, Any]]:
    """headstart piBO, defaults: EI * pi^(beta/n), beta = budget/10, prior-based design."""
    return _run_headstart(task, seed, budget, "gp", use_priors=True)


def run_headstart_pibo_logei(task: Task, seed: int, budget: int) -> list[dict[str, Any]]:
    """headstart piBO with LogEI: LogEI + (beta/n) log pi."""
    return _run_headstart(task, seed, budget, "gp", use_priors=True, acquisition="logei")


def prior_strength_method(beta: float) -> Method:
    """A piBO method with a fixed ``prior_strength`` (for the beta ablation).

    The acquisition is the default with active priors, EI: ``EI * pi^(beta/n)``.
    """
    return _PiBOStrength(float(beta))


@dataclass(frozen=True)
class _PiBOStrength:
    beta: float

    def __call__(self, task: Task, seed: int, budget: int) -> list[dict[str, Any]]:
        return _run_headstart(task, seed, budget, "gp", use_priors=True, prior_strength=self.beta)


def run_prior_sampling(task: Task, seed: int, budget: int) -> list[dict[str, Any]]:
    """Sampling from the prior only (no model): i.i.d. draws of the task space's priors."""
    rng = np.random.default_rng([seed, 0x5A])
    recorder = _Recorder(task, seed)
    for _ in range(budget):
        t0 = time.perf_counter()
        params = task.space.decode(task.space.sample_prior_encoded(1, rng))[0]
        recorder.evaluate(params, time.perf_counter() - t0)
    return recorder.records


# The ScaML-GP paper's acquisition for every method: UCB with beta = 9 (mu - 3 sigma when
# minimising).
PAPER_UCB = {"acquisition": "ucb", "ucb_beta": 9.0, "first_trial": "acquisition"}


def run_headstart_gp_ucb(task: Task, seed: int, budget: int) -> list[dict[str, Any]]:
    """headstart GP-BO without meta-data, UCB beta = 9 (the ScaML-GP paper's GPBO baseline)."""
    return _run_headstart(task, seed, budget, "gp", **PAPER_UCB)


def _run_transfer(
    task: Task, seed: int, budget: int, method: str, **options: Any
) -> list[dict[str, Any]]:
    return _run_headstart(
        task, seed, budget, method, transfer_from=list(task.meta_tasks), **PAPER_UCB, **options
    )


def run_headstart_scaml(task: Task, seed: int, budget: int) -> list[dict[str, Any]]:
    """headstart ScaML-GP transfer on task.meta_tasks (method="scaml", UCB beta = 9)."""
    return _run_transfer(task, seed, budget, "scaml")


def run_headstart_rgpe(task: Task, seed: int, budget: int) -> list[dict[str, Any]]:
    """headstart RGPE ensemble on task.meta_tasks (method="rgpe", UCB beta = 9)."""
    return _run_transfer(task, seed, budget, "rgpe")


def run_headstart_stackgp(task: Task, seed: int, budget: int) -> list[dict[str, Any]]:
    """headstart stacked GPs on task.meta_tasks (method="stackgp", UCB beta = 9)."""
    return _run_transfer(task, seed, budget, "stackgp")


@dataclass(frozen=True)
class GPVariant:
    """headstart GP-BO at the library's defaults but for ``settings`` (ablations, issue 30)."""

    settings: tuple[tuple[str, Any], ...]

    def __call__(self, task: Task, seed: int, budget: int) -> list[dict[str, Any]]:
        return _run_headstart(
            task, seed, budget, "gp", **{"deterministic": False, **dict(self.settings)}
        )


@dataclass(frozen=True)
class TransferVariant:
    """A transfer method with its own acquisition settings (for the defaults study, issue 13)."""

    method: str
    settings: tuple[tuple[str, Any], ...]

    def __call__(self, task: Task, seed: int, budget: int) -> list[dict[str, Any]]:
        return _run_headstart(
            task,
            seed,
            budget,
            self.method,
            transfer_from=list(task.meta_tasks),
            **dict(self.settings),
        )


def run_headstart_gp_lognormal(task: Task, seed: int, budget: int) -> list[dict[str, Any]]:
    """headstart GP-BO under the dimension-scaled log-normal hyperprior (Hvarfner et al. 2024):
    the option ``hyperprior="lognormal"`` of ``method="gp"``."""
    return _run_headstart(task, seed, budget, "gp", hyperprior="lognormal")


# ScaML-GP's fit tolerance, restart schedule and screening before issue 18, as its options:
# prior restarts every 5 observations, SciPy's default tolerance, the GP's screening
SCAML_BEFORE18 = {"restart_growth": 0.0, "fit_factr": 1e7, "screening_points": 2048}


def run_headstart_scaml_before18(task: Task, seed: int, budget: int) -> list[dict[str, Any]]:
    """headstart-scaml with the fit tolerance, restart schedule and screening before issue 18."""
    return _run_transfer(task, seed, budget, "scaml", **SCAML_BEFORE18)


def run_headstart_scaml_default(task: Task, seed: int, budget: int) -> list[dict[str, Any]]:
    """headstart ScaML-GP with the library's defaults (first trial mu - sigma, then LogEI; the
    plateau rule on since issue 31)."""
    return _run_headstart(task, seed, budget, "scaml", transfer_from=list(task.meta_tasks))


def run_headstart_scaml_before31(task: Task, seed: int, budget: int) -> list[dict[str, Any]]:
    """headstart ScaML-GP with the defaults before issue 31: the plateau rule off."""
    return _run_headstart(
        task, seed, budget, "scaml", transfer_from=list(task.meta_tasks), plateau_rule=False
    )


def run_headstart_warmstart(task: Task, seed: int, budget: int) -> list[dict[str, Any]]:
    """The sources' best configurations first, then GP-BO (method="warmstart", LogEI)."""
    return _run_headstart(task, seed, budget, "warmstart", transfer_from=list(task.meta_tasks))


def run_headstart_mtgp(task: Task, seed: int, budget: int) -> list[dict[str, Any]]:
    """headstart multi-task GP on task.meta_tasks (method="mtgp", UCB beta = 9)."""
    return _run_transfer(task, seed, budget, "mtgp")


def _neural_method(method: str, suffix: str = "", **options: Any) -> Method:
    def run(task: Task, seed: int, budget: int) -> list[dict[str, Any]]:
        return _run_headstart(
            task, seed, budget, method, transfer_from=list(task.meta_tasks), **options
        )

    run.__name__ = f"run_headstart_{(method + suffix).replace('-', '_')}"
    run.__qualname__ = run.__name__
    return run


run_headstart_abrac = _neural_method("abrac")  # the library's defaults (residual, warp "auto")
run_headstart_ablr = _neural_method("ablr")
# the papers' methods (no residual GP, no warp; ABLR-SGD-fixed is the ABRAC paper's ablation)
run_headstart_abrac_paper = _neural_method(
    "abrac", "-paper", residual=False, ard=True, output_warp="none"
)
run_headstart_ablr_paper = _neural_method("ablr", "-paper", residual=False)
run_headstart_ablr_sgd_fixed = _neural_method("ablr-sgd-fixed", residual=False)
# issue 32: a Matérn GP beside the head, spelt out (ABRAC's head: one precision, ard=False;
# the target's warp chosen by the evidence, output_warp="auto")
run_headstart_abrac_residual = _neural_method("abrac", "-residual", residual=True)
run_headstart_ablr_residual = _neural_method("ablr", "-residual", residual=True)
# The ablations below were measured before ABRAC's warp: they keep output_warp="none".
# ... the default before the warp (its rows: docs/benchmarks/abrac_*.csv)
run_headstart_abrac_residual_nowarp = _neural_method(
    "abrac", "-residual-nowarp", residual=True, output_warp="none"
)
# ... with the paper's ARD head (the default before issue 32's second round)
run_headstart_abrac_residual_ard = _neural_method(
    "abrac", "-residual-ard", residual=True, ard=True, output_warp="none"
)
# ... with every basis function active from the start (ARD: the paper's "ABRAC fixed")
run_headstart_abrac_residual_all = _neural_method(
    "abrac", "-residual-all", residual=True, ard=True, active="all", output_warp="none"
)
# ... and the head's prior mean at the sources' average head (source_mean=True)
run_headstart_abrac_residual_mean = _neural_method(
    "abrac", "-residual-mean", residual=True, source_mean=True, output_warp="none"
)
run_headstart_ablr_residual_mean = _neural_method(
    "ablr", "-residual-mean", residual=True, source_mean=True
)
# ... exact at every size: no local block, fitted as below 100 trials at every size
# (local_points=None; the same as -residual-nowarp up to 100 trials)
run_headstart_abrac_residual_exact = _neural_method(
    "abrac", "-residual-exact", residual=True, local_points=None, output_warp="none"
)
# ... with an exact block of 50 trials in place of 100 (issue 32, item 4: the block is most of a
# suggestion's cost past it; the rest are conditioned on one neighbour each)
run_headstart_abrac_residual_local50 = _neural_method(
    "abrac", "-residual-local50", residual=True, local_points=50
)
# ... with the engine's full acquisition search past the exact block (2,048 Sobol points, 10
# local searches: the default before issue 32's last round, which made it 1,024 and 5)
run_headstart_abrac_residual_fullsearch = _neural_method(
    "abrac", "-residual-fullsearch", residual=True, screening_points=2048, search_starts=10
)
# ... with the target's values always through the Yeo-Johnson transform (issue 32)
run_headstart_abrac_residual_yj = _neural_method(
    "abrac", "-residual-yj", residual=True, output_warp="yeo-johnson"
)
# ... with the noise learned, as a user who sets nothing gets it (GP-BO's arm runs so too)
run_headstart_abrac_residual_noisy = _neural_method(
    "abrac", "-residual-noisy", residual=True, deterministic=False, output_warp="none"
)


# --- MPHD on pool-based HPO-B tasks (benchmarks/mphd.py) -----------------------------------------
HPOB_INITIAL = 5  # the MPHD paper's protocol: 5 random initial points, then BO
# The paper's hand-specified HGP (Sec. 4.3): ell ~ Gamma(1, 0.1), s ~ Gamma(1, 5), sigma^2 ~
# Gamma(1, 100) on values min-max scaled to [0, 1]. headstart standardizes the values instead;
# the signal and noise rates are scaled by 1/12 (the variance of a uniform on [0, 1]) to match.
HAND_PRIOR = {"lengthscale": (1.0, 0.1), "outputscale": (1.0, 5.0 / 12), "noise": (1.0, 100.0 / 12)}


def _hand_prior():
    from headstart.mphd import PriorModel

    return PriorModel.shared(
        HAND_PRIOR["lengthscale"],
        HAND_PRIOR["outputscale"],
        HAND_PRIOR["noise"],
        {"hand_specified": "Fan et al. 2024, Sec. 4.3"},
    )


# headstart's default signal and noise priors, Gamma(2, 1) and Gamma(1.1, 30) on the variance
# without the Jacobian, as Gammas with the Jacobian (MPHD's convention): the shape less 1
DEFAULT_SIGNAL_NOISE = {"outputscale": (1.0, 1.0), "noise": (0.1, 30.0)}


def _hpob_settings() -> dict[str, Any]:
    return {"n_initial": HPOB_INITIAL, "deterministic": False}


def _run_mphd_prior(
    task: Task, seed: int, budget: int, prior: str, default_noise: bool = False
) -> list[dict[str, Any]]:
    """GP-BO under the task's pre-trained prior file ``prior``; ``default_noise`` swaps its
    signal and noise Gammas for headstart's default priors (:data:`DEFAULT_SIGNAL_NOISE`)."""
    from headstart.mphd import PriorModel

    model = PriorModel.load(task.objective.prior_path(prior))
    if default_noise:
        from dataclasses import replace

        model = replace(model, **DEFAULT_SIGNAL_NOISE)
    return _run_headstart(task, seed, budget, "mphd", prior_model=model, **_hpob_settings())


def run_headstart_mphd(task: Task, seed: int, budget: int) -> list[dict[str, Any]]:
    """MPHD as headstart pre-trains it by default (the paper's context network); this task's
    space held out of pre-training (NToT)."""
    return _run_mphd_prior(task, seed, budget, "network")


def run_headstart_mphd_auto(task: Task, seed: int, budget: int) -> list[dict[str, Any]]:
    """MPHD with ``lengthscale="auto"``: the network pulled toward the shared Gamma, or the shared
    Gamma, as leave-one-space-out likelihood chooses."""
    return _run_mphd_prior(task, seed, budget, "auto")


def run_headstart_mphd_auto_default_noise(
    task: Task, seed: int, budget: int
) -> list[dict[str, Any]]:
    """A diagnosis arm (issue 33): headstart-mphd-auto's lengthscale priors with headstart's
    default signal and noise priors instead of the pre-trained ones."""
    return _run_mphd_prior(task, seed, budget, "auto", default_noise=True)


def run_headstart_mphd_true_default_noise(
    task: Task, seed: int, budget: int
) -> list[dict[str, Any]]:
    """The generating lengthscale Gamma with headstart's default signal and noise priors."""
    return _run_mphd_prior(task, seed, budget, "true", default_noise=True)


def run_headstart_mphd_shared(task: Task, seed: int, budget: int) -> list[dict[str, Any]]:
    """MPHD's "Non-NN" ablation: one pre-trained Gamma for every lengthscale."""
    return _run_mphd_prior(task, seed, budget, "shared")


def run_headstart_mphd_true(task: Task, seed: int, budget: int) -> list[dict[str, Any]]:
    """MPHD's upper bound on a synthetic domain: the generating lengthscale Gamma as the prior
    (issue 33; the task carries the file, :func:`benchmarks.mphd_synthetic.true_prior`)."""
    return _run_mphd_prior(task, seed, budget, "true")


def run_headstart_mphd_oracle(task: Task, seed: int, budget: int) -> list[dict[str, Any]]:
    """An in-sample reference on HPO-B (issue 33), not a bound: the held-out space's own step-1
    lengthscales' Gamma as the prior (the task carries the file, ``benchmarks/mphd.py``'s
    ``oracle_prior``)."""
    return _run_mphd_prior(task, seed, budget, "oracle")


def run_headstart_gp_hand(task: Task, seed: int, budget: int) -> list[dict[str, Any]]:
    """GP with the MPHD paper's hand-specified Gamma priors (see HAND_PRIOR)."""
    return _run_headstart(task, seed, budget, "mphd", prior_model=_hand_prior(), **_hpob_settings())


def run_headstart_gp_init5(task: Task, seed: int, budget: int) -> list[dict[str, Any]]:
    """headstart GP-BO with its default priors, 5 initial points (the MPHD protocol)."""
    return _run_headstart(task, seed, budget, "gp", **_hpob_settings())


def run_headstart_scaml_loto(task: Task, seed: int, budget: int) -> list[dict[str, Any]]:
    """ScaML-GP (defaults) on the other tasks of the same space (leave one task out)."""
    return _run_headstart(
        task, seed, budget, "scaml", transfer_from=list(task.meta_tasks), deterministic=False
    )


# --- optuna ---------------------------------------------------------------------------------------
def optuna_distributions(space: SearchSpace) -> tuple[dict[str, Any], dict[str, Any]]:
    """Map a headstart space to Optuna distributions.

    Returns:
        ``(distributions, fixed)``: Optuna distributions of the free parameters and the values of
        the ``Fixed`` ones (added to every configuration). Priors are ignored: Optuna's samplers
        have no notion of them.
    """
    from optuna.distributions import (
        CategoricalDistribution,
        FloatDistribution,
        IntDistribution,
    )

    distributions: dict[str, Any] = {}
    fixed: dict[str, Any] = {}
    for name, p in space.items():
        if isinstance(p, Float):
            distributions[name] = FloatDistribution(p.low, p.high, log=p.log)
        elif isinstance(p, Int):
            distributions[name] = IntDistribution(p.low, p.high, log=p.log)
        elif isinstance(p, Categorical):
            distributions[name] = CategoricalDistribution(list(p.choices))
        elif isinstance(p, Fixed):
            fixed[name] = p.value
        else:  # pragma: no cover - SearchSpace only holds the four kinds
            raise InvalidSettingError(f"Cannot map parameter {name!r} ({p!r}) to Optuna.")
    return distributions, fixed


def _run_optuna(task: Task, seed: int, budget: int, sampler: Any) -> list[dict[str, Any]]:
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    distributions, fixed = optuna_distributions(task.space)
    study = optuna.create_study(direction="minimize", sampler=sampler)
    recorder = _Recorder(task, seed)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        for _ in range(budget):
            t0 = time.perf_counter()
            trial = study.ask(distributions)  # every parameter is sampled inside ask()
            seconds = time.perf_counter() - t0
            params = {**trial.params, **fixed}
            study.tell(trial, recorder.evaluate(params, seconds))
    return recorder.records


def run_optuna_tpe(task: Task, seed: int, budget: int) -> list[dict[str, Any]]:
    """Optuna TPESampler with default settings (seeded)."""
    import optuna

    return _run_optuna(task, seed, budget, optuna.samplers.TPESampler(seed=seed))


def _optuna_gp_sampler(seed: int, **settings: Any) -> Any:
    import optuna

    _warm_imports(  # GPSampler loads these lazily at its first model-based suggestion
        "torch",
        "optuna._gp.search_space",
        "optuna._gp.gp",
        "optuna._gp.optim_mixed",
        "optuna._gp.acqf",
        "optuna._gp.prior",
    )
    with warnings.catch_warnings():  # GPSampler's options are experimental in Optuna 4-5
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        return optuna.samplers.GPSampler(seed=seed, **settings)


def run_optuna_gp(task: Task, seed: int, budget: int) -> list[dict[str, Any]]:
    """Optuna GPSampler at its defaults (seeded): 10 random startup trials, noise learned.

    Against :func:`run_optuna_gp_deterministic` on the noiseless test functions (30 seeds,
    issue 30) neither setting is better everywhere: the defaults win on Hartmann-6 and on Branin
    after trial 30, the deterministic setting on Branin at trial 20 and on Hartmann-3 from trial
    30. Comparisons report the defaults and name the other where it is the stronger peer.
    """
    return _run_optuna(task, seed, budget, _optuna_gp_sampler(seed))


def run_optuna_gp_deterministic(task: Task, seed: int, budget: int) -> list[dict[str, Any]]:
    """Optuna GPSampler told the objective is noise-free (``deterministic_objective`` on
    noiseless tasks), with headstart's initial-design size (the setting before issue 30)."""
    sampler = _optuna_gp_sampler(
        seed,
        n_startup_trials=n_initial_for(task, budget),
        deterministic_objective=task.noise_std == 0,
    )
    return _run_optuna(task, seed, budget, sampler)


def run_optuna_tpe_multivariate(task: Task, seed: int, budget: int) -> list[dict[str, Any]]:
    """Optuna TPESampler with ``multivariate=True`` (seeded), the setting Optuna's
    documentation recommends for dependent parameters."""
    import optuna

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        sampler = optuna.samplers.TPESampler(seed=seed, multivariate=True)
    return _run_optuna(task, seed, budget, sampler)


# --- SMAC3 -----------------------------------------------------------------------------------------
_SMAC_CHALLENGERS = 1000  # BlackBoxFacade's default number of random challengers


def run_smac_pibo(task: Task, seed: int, budget: int) -> list[dict[str, Any]]:
    """SMAC3 piBO: BlackBoxFacade GP + PriorAcquisitionFunction(EI, beta = budget/10), prior search.

    The peer is configured as SMAC3's own "User Priors over the Optimum" example, on its GP
    facade: ``PriorAcquisitionFunction(EI(), decay_beta=budget / 10)``, a
    ``LocalAndSortedRandomSearch`` that draws half of its challengers from the prior and half
    uniformly, and the same initial design as headstart's piBO (the prior's mode, then prior
    samples; ``min(2 d + 1, 10, budget // 5)`` points). SMAC's default 8% interleaved random
    configurations stay on.
    """
    import shutil
    import tempfile

    from ConfigSpace import Configuration
    from smac import BlackBoxFacade, Scenario
    from smac.acquisition.function import EI, PriorAcquisitionFunction
    from smac.acquisition.maximizer import LocalAndSortedRandomSearch

    from headstart.configspace import to_configspace

    cs = to_configspace(task.space, seed=seed)
    uniform_cs = to_configspace(_without_priors(task.space), seed=seed)
    outdir = tempfile.mkdtemp(prefix="smac-pibo-")
    try:
        scenario = Scenario(
            cs,
            deterministic=True,
            n_trials=budget,
            seed=seed,
            output_directory=Path(outdir) / "run",
        )
        n_init = n_initial_for(task, budget)
        rng = np.random.default_rng(seed)
        design = [Configuration(cs, values=task.space.prior_mode())]
        for U in task.space.sample_prior_encoded(n_init - 1, rng):
            design.append(Configuration(cs, values=task.space.decode(U)[0]))
        initial = BlackBoxFacade.get_initial_design(
            scenario, n_configs=0, additional_configs=design
        )
        acquisition = PriorAcquisitionFunction(EI(), decay_beta=budget / 10.0)
        maximizer = LocalAndSortedRandomSearch(
            cs,
            acquisition_function=acquisition,
            challengers=_SMAC_CHALLENGERS,
            seed=seed,
            uniform_configspace=uniform_cs,
            prior_sampling_fraction=0.5,
        )
        smac = BlackBoxFacade(
            scenario,
            target_function=lambda config, seed=0: 0.0,  # ask/tell: never called
            initial_design=initial,
            acquisition_function=acquisition,
            acquisition_maximizer=maximizer,
            intensifier=BlackBoxFacade.get_intensifier(scenario, max_config_calls=1),
            overwrite=True,
            logging_level=40,
        )
        return run_smac_ask_tell(smac, task, seed, budget)
    finally:
        shutil.rmtree(outdir, ignore_errors=True)


def run_smac_ask_tell(smac: Any, task: Task, seed: int, budget: int) -> list[dict[str, Any]]:
    """``budget`` ask/tell rounds of a built SMAC3 facade on ``task``; the records."""
    from smac.runhistory.dataclasses import TrialValue

    recorder = _Recorder(task, seed)
    for _ in range(budget):
        t0 = time.perf_counter()
        info = smac.ask()
        seconds = time.perf_counter() - t0
        params = task.space.validate(dict(info.config))
        smac.tell(info, TrialValue(cost=recorder.evaluate(params, seconds)))
    return recorder.records


def _without_priors(space: SearchSpace) -> SearchSpace:
    from dataclasses import replace

    from headstart.priors import Uniform

    params: dict[str, Any] = {}
    for name, p in space.items():
        if isinstance(p, Float | Int):
            params[name] = replace(p, prior=Uniform())
        elif isinstance(p, Categorical):
            params[name] = Categorical(p.choices)
        else:
            params[name] = p
    return SearchSpace(params)


# --- plain BoTorch ----------------------------------------------------------------------------------
# NOTE: the defaults of the BoTorch tutorials ("closed-loop BO"), not tuned for speed.
_BOTORCH_NUM_RESTARTS = 10
_BOTORCH_RAW_SAMPLES = 512


def run_botorch_gp(task: Task, seed: int, budget: int) -> list[dict[str, Any]]:
    """Default BoTorch loop: Sobol init, SingleTaskGP, fit_gpytorch_mll, LogEI, optimize_acqf."""
    import torch
    from botorch.acquisition import LogExpectedImprovement
    from botorch.fit import fit_gpytorch_mll
    from botorch.models import SingleTaskGP
    from botorch.optim import optimize_acqf
    from gpytorch.mlls import ExactMarginalLogLikelihood
    from torch.quasirandom import SobolEngine

    space = task.space
    dim = space.dim
    dtype = torch.float64
    torch.manual_seed(seed)
    bounds = torch.stack([torch.zeros(dim, dtype=dtype), torch.ones(dim, dtype=dtype)])
    n_init = n_initial_for(task, budget)
    t0 = time.perf_counter()
    design = SobolEngine(dim, scramble=True, seed=seed).draw(n_init, dtype=dtype).numpy()
    design_seconds = (time.perf_counter() - t0) / n_init
    recorder = _Recorder(task, seed)
    configs: list[dict[str, Any]] = []
    values: list[float] = []
    for i in range(budget):
        t0 = time.perf_counter()
        if i < n_init:
            params = space.decode(design[i])[0]
            seconds = design_seconds + time.perf_counter() - t0
        else:
            train_X = torch.as_tensor(space.encode(configs), dtype=dtype)
            train_Y = -torch.tensor(values, dtype=dtype).unsqueeze(-1)  # BoTorch maximizes
            model = SingleTaskGP(train_X, train_Y)  # Standardize outcome transform by default
            fit_gpytorch_mll(ExactMarginalLogLikelihood(model.likelihood, model))
            acqf = LogExpectedImprovement(model, best_f=train_Y.max())
            candidate, _ = optimize_acqf(
                acqf,
                bounds=bounds,
                q=1,
                num_restarts=_BOTORCH_NUM_RESTARTS,
                raw_samples=_BOTORCH_RAW_SAMPLES,
            )
            params = space.decode(candidate.detach().numpy()[0])[0]
            seconds = time.perf_counter() - t0
        value = recorder.evaluate(params, seconds)
        configs.append(params)
        values.append(value)
    return recorder.records


register_method("headstart-gp", run_headstart_gp)
register_method("headstart-gp-budget5", run_headstart_gp_budget5)
register_method("headstart-gp-2d1", run_headstart_gp_2d1)
register_method("headstart-random", run_headstart_random)
register_method("headstart-gp-ucb", run_headstart_gp_ucb)
register_method("headstart-scaml", run_headstart_scaml)
register_method("headstart-rgpe", run_headstart_rgpe)
register_method("headstart-stackgp", run_headstart_stackgp)
register_method("headstart-mtgp", run_headstart_mtgp)
register_method("headstart-warmstart", run_headstart_warmstart)
register_method("headstart-scaml-default", run_headstart_scaml_default)
register_method("headstart-scaml-before31", run_headstart_scaml_before31)
register_method("headstart-scaml-before18", run_headstart_scaml_before18)
register_method("headstart-gp-lognormal", run_headstart_gp_lognormal)
register_method("optuna-tpe", run_optuna_tpe)
register_method("optuna-gp", run_optuna_gp)
register_method("optuna-gp-deterministic", run_optuna_gp_deterministic)
register_method("optuna-tpe-mv", run_optuna_tpe_multivariate)
register_method("headstart-gp-deterministic", run_headstart_gp_deterministic)
register_method("botorch-gp", run_botorch_gp)
register_method("smac-pibo", run_smac_pibo)
register_method("headstart-pibo", run_headstart_pibo)
register_method("headstart-pibo-logei", run_headstart_pibo_logei)
register_method("prior-sampling", run_prior_sampling)
register_method("headstart-abrac", run_headstart_abrac)
register_method("headstart-ablr", run_headstart_ablr)
register_method("headstart-ablr-sgd-fixed", run_headstart_ablr_sgd_fixed)
register_method("headstart-abrac-paper", run_headstart_abrac_paper)
register_method("headstart-abrac-residual-all", run_headstart_abrac_residual_all)
register_method("headstart-abrac-residual-ard", run_headstart_abrac_residual_ard)
register_method("headstart-ablr-paper", run_headstart_ablr_paper)
register_method("headstart-abrac-residual", run_headstart_abrac_residual)
register_method("headstart-ablr-residual", run_headstart_ablr_residual)
register_method("headstart-abrac-residual-mean", run_headstart_abrac_residual_mean)
register_method("headstart-ablr-residual-mean", run_headstart_ablr_residual_mean)
register_method("headstart-abrac-residual-exact", run_headstart_abrac_residual_exact)
register_method("headstart-abrac-residual-local50", run_headstart_abrac_residual_local50)
register_method("headstart-abrac-residual-fullsearch", run_headstart_abrac_residual_fullsearch)
register_method("headstart-abrac-residual-noisy", run_headstart_abrac_residual_noisy)
register_method("headstart-abrac-residual-yj", run_headstart_abrac_residual_yj)
register_method("headstart-abrac-residual-nowarp", run_headstart_abrac_residual_nowarp)
register_method("headstart-mphd", run_headstart_mphd)
register_method("headstart-mphd-auto", run_headstart_mphd_auto)
register_method("headstart-mphd-auto-default-noise", run_headstart_mphd_auto_default_noise)
register_method("headstart-mphd-true-default-noise", run_headstart_mphd_true_default_noise)
register_method("headstart-mphd-shared", run_headstart_mphd_shared)
register_method("headstart-mphd-true", run_headstart_mphd_true)
register_method("headstart-mphd-oracle", run_headstart_mphd_oracle)
register_method("headstart-gp-hand", run_headstart_gp_hand)
# MPHD's PI target margin, zeta = 0.1 on values in [0, 1] (Fan et al. 2024); in standard
# deviations of the observations (pi_margin's unit) that is about 0.5 on the synthetic pools
PAPER_PI = (("acquisition", "pi"), ("pi_margin", 0.5))
for _base in (
    "mphd",
    "mphd-auto",
    "mphd-shared",
    "mphd-true",
    "mphd-oracle",
    "mphd-auto-default-noise",
    "mphd-true-default-noise",
    "gp-hand",
    "gp-init5",
):
    register_method(f"headstart-{_base}-pool", PoolArgmax(f"headstart-{_base}"))
    register_method(f"headstart-{_base}-pool-pi", PoolArgmax(f"headstart-{_base}", PAPER_PI))
register_method("headstart-gp-init5", run_headstart_gp_init5)
register_method("headstart-scaml-loto", run_headstart_scaml_loto)
for _suffix, _settings, _what in (
    ("mean", {**PAPER_UCB, "first_trial": "mean"}, "prior mean first, then UCB beta = 9"),
    ("mean-logei", {"first_trial": "mean", "acquisition": "logei"}, "prior mean first, LogEI"),
    ("mean-ucb2", {"first_trial": "mean", "acquisition": "ucb", "ucb_beta": 2.0}, "mean, UCB 2"),
    ("cand", {**PAPER_UCB, "first_trial": "candidates"}, "best source config first, UCB 9"),
    ("cand-logei", {"first_trial": "candidates", "acquisition": "logei"}, "source config, LogEI"),
    ("lcb-logei", {"first_trial": "lcb", "acquisition": "logei"}, "mu - sigma first, LogEI"),
    ("lcb", {**PAPER_UCB, "first_trial": "lcb"}, "mu - sigma first, UCB beta = 9"),
):
    register_method(
        f"headstart-scaml-{_suffix}",
        TransferVariant("scaml", tuple(_settings.items())),
        description=f"headstart ScaML-GP, {_what}",
    )
for _warp in ("yeo-johnson", "copula"):
    register_method(
        f"headstart-gp-{_warp}",
        GPVariant((("output_warp", _warp),)),
        description=f"headstart GP-BO at its defaults with output_warp={_warp!r} (issue 30)",
    )
register_method(
    "headstart-gp-nostall",
    GPVariant((("stall_rule", False),)),
    description="headstart GP-BO with stall_rule=False (issue 30)",
)
for _name, _variant in (
    ("headstart-gp-plateau", GPVariant((("plateau_rule", True),))),
    (
        "headstart-scaml-plateau",
        TransferVariant("scaml", (*PAPER_UCB.items(), ("plateau_rule", True))),
    ),
    ("headstart-warmstart-plateau", TransferVariant("warmstart", (("plateau_rule", True),))),
):
    register_method(_name, _variant, description=f"{_name[:-8]} with plateau_rule=True (issue 31)")
register_method(
    "headstart-scaml-handover",
    TransferVariant("scaml", (("handover", True),)),
    description="headstart ScaML-GP at its defaults with handover=True (issue 31)",
)
for _margin in (1, 3):
    register_method(
        f"headstart-scaml-handover{_margin}",
        TransferVariant("scaml", (("handover", True), ("handover_margin", float(_margin)))),
        description=f"headstart ScaML-GP, handover=True with a {_margin}-nat margin (issue 31)",
    )
register_method(
    "headstart-scaml-average",
    TransferVariant("scaml", (("handover", True), ("handover_mode", "average"))),
    description="headstart ScaML-GP averaged with the target-only GP by evidence (issue 31)",
)
register_method(
    "headstart-scaml-offset",
    TransferVariant("scaml", (("target_offset", 1.0),)),
    description="headstart ScaML-GP with target_offset=1 (issue 34's FC-Net trade-off)",
)
register_method(
    "headstart-scaml-offset-fit",
    TransferVariant("scaml", (("target_offset", "fit"),)),
    description="headstart ScaML-GP with target_offset='fit' (offset variance by MAP; issues 31, 34)",
)
register_method(
    "headstart-scaml-lcbwinner",
    TransferVariant("scaml", (("first_trial", "lcb-winner"),)),
    description="headstart ScaML-GP, mu - sigma first, then the best-rated source winner (issue 31)",
)
for _base in ("scaml", "warmstart"):
    register_method(
        f"headstart-{_base}-learnednoise",
        TransferVariant(_base, (("deterministic", False),)),
        description=f"headstart {_base} at the library's defaults, noise learned even on a "
        "noiseless task (deterministic=False, as a user who sets nothing; issue 31)",
    )
register_method(
    "headstart-scaml-winners",
    TransferVariant("scaml", (("winners_first", True),)),
    description="headstart ScaML-GP after the warm start's design of source winners (issue 31)",
)
for _warp in ("copula", "yeo-johnson"):
    register_method(
        f"headstart-scaml-{_warp}",
        TransferVariant("scaml", (("output_warp", _warp),)),
        description=f"headstart ScaML-GP with output_warp={_warp!r}: each task's values warped "
        "by their own (issue 31)",
    )
register_method(
    "headstart-gp-init10",
    GPVariant((("n_initial", 10),)),
    description="headstart GP-BO at its defaults with 10 initial points whatever d (GPSampler's)",
)
register_method(
    "headstart-gp-priorauto",
    GPVariant((("prior_mean", "auto"),)),
    description="headstart GP-BO with prior_mean='auto' (its default since issue 30's stop 61)",
)
register_method(
    "headstart-gp-mean",
    GPVariant((("prior_mean", "mean"),)),
    description="headstart GP-BO with prior_mean='mean' (its default before issue 30's stop 61)",
)
register_method(
    "headstart-gp-kumaraswamy",
    GPVariant((("input_warp", "kumaraswamy"),)),
    description="headstart GP-BO at its defaults with input_warp='kumaraswamy' (issue 30)",
)
for _beta in (1, 2, 5, 10, 20, 50):
    register_method(
        f"headstart-pibo-beta{_beta}",
        prior_strength_method(_beta),
        description=f"headstart piBO (EI) with prior_strength beta = {_beta}",
    )

__all__ = [
    "DESCRIPTIONS",
    "METHODS",
    "PAPER_UCB",
    "Method",
    "get_method",
    "n_initial_for",
    "optuna_distributions",
    "register_method",
    "run_botorch_gp",
    "run_headstart_gp",
    "run_headstart_gp_deterministic",
    "run_headstart_gp_ucb",
    "run_headstart_mtgp",
    "run_headstart_random",
    "run_headstart_rgpe",
    "run_headstart_scaml",
    "run_headstart_scaml_default",
    "run_headstart_stackgp",
    "run_headstart_warmstart",
    "run_optuna_gp",
    "run_optuna_gp_deterministic",
    "run_optuna_tpe",
    "run_optuna_tpe_multivariate",
    "run_smac_pibo",
    "study_at_sobol_points",
]
