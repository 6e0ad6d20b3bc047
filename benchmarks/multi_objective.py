r"""Several objectives and constraints: headstart against Optuna's samplers, in one run.

Problems are BoTorch's test functions (``botorch.test_functions``), all minimized, on the unit
cube (scaled to each problem's bounds), with their own reference points:

* two objectives: BraninCurrin (d = 2), DTLZ2 (d = 6), ZDT1-3 (d = 4); three: VehicleSafety
  (d = 5);
* two objectives and constraints: C2DTLZ2 (d = 4, 1 constraint), ConstrainedBraninCurrin (d = 2);
* one objective with constraints: ConstrainedHartmann (d = 6, 1), ConstrainedGramacy (d = 2, 2);
* a real trade-off: FC-Net's validation loss against its training time on one of four datasets'
  tables (``FCNet-<dataset>``, :class:`TableTradeOff`), where ``headstart-transfer``'s sources
  are the other three datasets.

A constraint value is ``-slack`` (BoTorch's slack is >= 0 when feasible; Optuna's and headstart's
convention is ``c <= 0``). Methods, each at its defaults: ``headstart`` (``create_study`` with
``directions`` / ``constraints``: one GP per output, log EHVI / log constrained EI),
``headstart-random``, ``headstart-transfer`` (ScaML-GP per output from earlier runs of related
tasks: for the BoTorch problems a random 40-trial run with every input shifted by +-0.05, for
FC-Net the other datasets; what transfer adds, not a peer comparison), Optuna's ``GPSampler``
(log EHVI / constrained log EI), ``TPESampler`` (at its defaults and with ``multivariate=True``)
and ``NSGAIISampler`` (Optuna's default for several objectives), and ``botorch``, BoTorch's
tutorial loop (:func:`_run_botorch`: qLogNEHVI / qLogNEI, told the problem's reference point,
which the others infer), the constrained ones with ``constraints_func``. ``headstart-init2d1``
(only when asked for with ``--methods``; reported, never ranked) is headstart with the
single-objective initial design, ``min(2 d + 1, 10)`` points, instead of the multi-output
default of 10 (the default until the ablation showed 10 to be better); ``headstart-ref`` (the
same way) is headstart told the problem's reference point (``create_study(reference_point=...)``,
as the BoTorch loop is); ``headstart-transfer-offset`` (the same way) is ``headstart-transfer``
with ScaML-GP's ``target_offset=1``, ``headstart-transfer-offset-fit`` with
``target_offset="fit"``, and ``headstart-transfer-400`` with 400 source trials (of each other
FC-Net dataset instead of 64; of the shifted run instead of 40 elsewhere). Metrics per trial:
the hypervolume of the feasible front as a share of the problem's maximum (``max_hv``), or, with
one objective, the simple regret of the best feasible value (``inf`` before the first feasible
trial); seconds per suggestion.

Resumable: finished (problem, method, seed) jobs in the CSV are skipped. Writes
``<out>/multi_objective.{csv.gz,md,png}``. ``--latency`` instead times single suggestions of
headstart and ``GPSampler`` after n random trials, on one thread (``multi_objective_latency.md``).

Usage::

    python benchmarks/multi_objective.py                       # 14 problems x 7 methods x 10 seeds
    python benchmarks/multi_objective.py --problems BraninCurrin --seeds 1 --budget 12 \
        --methods headstart,optuna-gp --out /tmp/mo             # a smoke run
    python benchmarks/multi_objective.py --latency 50 200       # seconds per suggestion
"""

from __future__ import annotations

import argparse
import csv
import functools
import math
import sys
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path

import numpy as np

DOCS = Path(__file__).resolve().parent.parent / "docs" / "benchmarks"
METHODS = (
    "headstart",
    "headstart-random",
    "optuna-gp",
    "optuna-tpe",
    "optuna-tpe-mv",
    "optuna-nsga2",
    "botorch",
    "headstart-transfer",
)
PROBLEMS = (
    "BraninCurrin",
    "DTLZ2",
    "ZDT1",
    "ZDT2",
    "ZDT3",
    "VehicleSafety",
    "C2DTLZ2",
    "ConstrainedBraninCurrin",
    "ConstrainedHartmann",
    "ConstrainedGramacy",
    "FCNet-slice",
    "FCNet-protein",
    "FCNet-naval",
    "FCNet-parkinsons",
)
#: run on request (--methods), reported, never ranked: the single-objective initial design,
#: headstart told the problem's reference point (``reference_point=``: information the peers
#: without such an option do not get), and the transfer arm with other ScaML-GP options or more
#: source trials (:data:`TRANSFER_ARMS`: each arm's ScaML-GP options, its column label, and its
#: source trials: per other dataset on FC-Net, of the shifted run elsewhere; ``None``: the default)
TRANSFER_ARMS = {
    "headstart-transfer-offset": ({"target_offset": 1.0}, "`target_offset=1`", None),
    "headstart-transfer-offset-fit": ({"target_offset": "fit"}, "`target_offset='fit'`", None),
    "headstart-transfer-400": ({}, "400 source trials per dataset", 400),
}
ABLATIONS = ("headstart-init2d1", "headstart-ref", *TRANSFER_ARMS)
#: Reported seed by seed against headstart when both are in the CSV (:func:`paired_table`):
#: the objective's GP of a constrained study at the default ``prior_mean="auto"`` (rows made at
#: commit d5dd400, where ``headstart`` did so; reverted), and the constraints' GPs at the
#: objective's noise floor of 1e-6 (the default before commit 9a64c7b gave constraints 1e-10)
PAIRED = ("headstart-auto", "headstart-floor-1e-6")
#: Left out of the mean ranks: an earlier run's data (transfer), or not run on every problem
#: and seed (the BoTorch loop, the ablations).
UNRANKED = ("headstart-transfer", "botorch", *ABLATIONS, *PAIRED)
LATENCY_PROBLEMS = (
    "DTLZ2",
    "VehicleSafety",
    "ConstrainedBraninCurrin",
    "ConstrainedHartmann",
    "FCNet-naval",
)
#: Constrained engineering design problems (one objective; not run by default; BoTorch's optimal
#: values are best-known values from the literature, PressureVessel's of its discrete original,
#: so a continuous run's regret can be negative): the
#: confirmation set of the constrained objective's prior mean and of the constraints' noise
#: floor (:data:`PAIRED`)
ENGINEERING = ("PressureVessel", "WeldedBeam", "TensionCompressionString", "SpeedReducer")
SINGLE_OBJECTIVE = ("ConstrainedHartmann", "ConstrainedGramacy", *ENGINEERING)
#: 2-D problems (not run by default) whose reference point and maximum hypervolume come from an
#: m x m grid (:func:`_grid_front`): a confirmation set for the initial design.
GRID_FRONT, GRID_SIZE = ("BNH", "SRN", "CONSTR", "GMM"), 1000
SOURCE_TRIALS, SOURCE_SHIFT = 40, 0.05  # headstart-transfer's earlier run: random, shifted inputs
TABLE_SOURCE_TRIALS = 64  # FC-Net trade-off: random configurations per other dataset
COLUMNS = ("problem", "method", "seed", "trial", "metric", "feasible", "seconds")
CHECKPOINTS = (10, 20, 30, 40, 50, 100)


def make_problem(name: str):
    """The BoTorch test problem ``name`` (minimized)."""
    from botorch.test_functions import multi_objective as mo
    from botorch.test_functions import synthetic as so

    made = {
        "BraninCurrin": lambda: mo.BraninCurrin(),
        "DTLZ2": lambda: mo.DTLZ2(dim=6, num_objectives=2),
        "ZDT1": lambda: mo.ZDT1(dim=4),
        "ZDT2": lambda: mo.ZDT2(dim=4),
        "ZDT3": lambda: mo.ZDT3(dim=4),
        "VehicleSafety": lambda: mo.VehicleSafety(),
        "C2DTLZ2": lambda: mo.C2DTLZ2(dim=4, num_objectives=2),
        "ConstrainedBraninCurrin": lambda: mo.ConstrainedBraninCurrin(),
        "ConstrainedHartmann": lambda: so.ConstrainedHartmann(),
        "ConstrainedGramacy": lambda: so.ConstrainedGramacy(),
        "PressureVessel": lambda: so.PressureVessel(),
        "WeldedBeam": lambda: so.WeldedBeamSO(),
        "TensionCompressionString": lambda: so.TensionCompressionString(),
        "SpeedReducer": lambda: so.SpeedReducer(),
        "BNH": lambda: mo.BNH(),
        "SRN": lambda: mo.SRN(),
        "CONSTR": lambda: mo.CONSTR(),
        "GMM": lambda: mo.GMM(num_objectives=2),
    }
    return made[name]()


@functools.cache
def _grid_front(name: str, m: int = GRID_SIZE) -> tuple[list[float], float]:
    """For 2-D problems without a maximum hypervolume in BoTorch: the feasible front of an
    ``m x m`` grid; reference = its nadir plus 10% of its range; its hypervolume (once per
    process)."""
    import torch

    from headstart._engine.multi_output import pareto_mask
    from headstart._objectives import hypervolume

    problem = make_problem(name)
    bounds = problem.bounds.numpy()
    g = np.linspace(0.0, 1.0, m)
    U = np.stack(np.meshgrid(g, g, indexing="ij"), axis=-1).reshape(-1, 2)
    x = torch.as_tensor(bounds[0] + (bounds[1] - bounds[0]) * U)
    Y = problem.evaluate_true(x).numpy()
    if getattr(problem, "num_constraints", 0):
        Y = Y[(problem.evaluate_slack_true(x).numpy() >= 0).all(axis=1)]
    front = Y[pareto_mask(-Y)]
    low, high = front.min(axis=0), front.max(axis=0)
    ref = (high + 0.1 * (high - low)).tolist()
    return ref, hypervolume(front, ref, ["minimize"] * front.shape[1])


class Evaluator:
    """A BoTorch problem on the unit cube: ``(objective values, constraint values)`` of a point."""

    def __init__(self, name: str) -> None:
        self.problem = make_problem(name)
        self.dim = self.problem.dim
        self.k = getattr(self.problem, "num_objectives", 1)
        self.r = getattr(self.problem, "num_constraints", 0)
        bounds = self.problem.bounds.numpy()
        self.low, self.span = bounds[0], bounds[1] - bounds[0]
        if self.k > 1 and name in GRID_FRONT:
            self.ref_point, self.max_hv = _grid_front(name)
        elif self.k > 1:
            self.ref_point = self.problem.ref_point.tolist()
            self.max_hv = float(self.problem.max_hv)
        else:
            self.optimal_value = float(self.problem.optimal_value)

    def space(self):
        import headstart as hs

        return hs.SearchSpace({f"x{i}": hs.Float(0.0, 1.0) for i in range(self.dim)})

    def suggest(self, trial) -> dict:
        """Optuna's suggestions for a trial."""
        return {f"x{i}": trial.suggest_float(f"x{i}", 0.0, 1.0) for i in range(self.dim)}

    def from_unit(self, u: np.ndarray) -> tuple[np.ndarray, dict]:
        """A unit-cube point (BoTorch's loop) and the configuration it names."""
        return u, {f"x{i}": float(v) for i, v in enumerate(u)}

    def random_params(self, rng: np.random.Generator) -> dict:
        return {f"x{i}": float(rng.random()) for i in range(self.dim)}

    def __call__(self, params: dict) -> tuple[list[float], list[float]]:
        import torch

        u = np.array([params[f"x{i}"] for i in range(self.dim)])
        x = torch.from_numpy(np.asarray(self.low + self.span * u, dtype=np.float64)[None, :])
        values = self.problem.evaluate_true(x).reshape(-1).tolist()
        slack = self.problem.evaluate_slack_true(x).reshape(-1).tolist() if self.r else []
        return values, [-s for s in slack]

    def sources(
        self, seed: int, trials: int = SOURCE_TRIALS
    ) -> dict[str, list[tuple[dict, list, list]]]:
        """An earlier run of a related task: ``trials`` random points, every input shifted by
        +-0.05."""
        rng = np.random.default_rng(1000 + seed)
        rows = []
        for _ in range(trials):
            u = rng.random(self.dim)
            shifted = np.clip(u + SOURCE_SHIFT * rng.choice([-1, 1], self.dim), 0, 1)
            params = {f"x{i}": float(v) for i, v in enumerate(u)}
            rows.append((params, *self({f"x{i}": float(v) for i, v in enumerate(shifted)})))
        return {"earlier": rows}


class TableTradeOff:
    r"""FC-Net's accuracy / cost trade-off on one dataset's table (``FCNet-<dataset>``).

    Two objectives, both minimized and on the log scale (as a user would give them; the raw
    validation MSE spans five decades): ``log val_loss`` and ``log train_time`` (seconds), each
    the mean of the table's 4 seeds, over the 6 ordinal hyperparameters of
    :mod:`headstart.benchmarks.hpo_tables` (7,776 configurations; an ``Int`` grid index each).
    Reference point: the table's median of each objective, so the share measures the good
    corner of the front; the maximum hypervolume is the table's own front's. The sources for
    ``headstart-transfer`` are the other three datasets, :data:`TABLE_SOURCE_TRIALS` random
    configurations each.
    """

    k, r = 2, 0

    def __init__(self, name: str) -> None:
        from headstart._objectives import hypervolume
        from headstart.benchmarks.hpo_tables import DATASETS, GRIDS

        self.short = name.split("-", 1)[1]
        self.grids = GRIDS["fcnet"]
        self.dim = len(self.grids)
        self.table = self._objectives(DATASETS["fcnet"][self.short])
        flat = self.table.reshape(-1, 2)
        self.ref_point = np.median(flat, axis=0).tolist()
        self.max_hv = hypervolume(flat, self.ref_point, ["minimize"] * 2)  # of its front
        self.others = [d for s, d in DATASETS["fcnet"].items() if s != self.short]

    @staticmethod
    def _objectives(dataset: str) -> np.ndarray:
        from headstart.benchmarks.hpo_tables import load_table

        loss = load_table("fcnet", dataset)
        time_ = load_table("fcnet", dataset, "train_time")
        return np.stack([np.log(loss), np.log(time_)], axis=-1)

    def space(self):
        from headstart.benchmarks.hpo_tables import table_space

        return table_space("fcnet")

    def suggest(self, trial) -> dict:
        return {n: trial.suggest_int(n, 0, len(g) - 1) for n, g in self.grids.items()}

    def from_unit(self, u: np.ndarray) -> tuple[np.ndarray, dict]:
        """A unit-cube point moved onto the grid, and the grid indices it names."""
        sizes = np.array([len(g) - 1 for g in self.grids.values()], dtype=float)
        index = np.round(u * sizes)
        return index / sizes, dict(zip(self.grids, map(int, index), strict=True))

    def random_params(self, rng: np.random.Generator) -> dict:
        return {name: int(rng.integers(len(g))) for name, g in self.grids.items()}

    def __call__(self, params: dict) -> tuple[list[float], list[float]]:
        return self.table[tuple(int(params[n]) for n in self.grids)].tolist(), []

    def consensus_front(self) -> np.ndarray:
        """The other datasets' consensus front: the (flat) configurations Pareto-optimal in the
        mean over them of each objective, standardized per dataset, over their full tables."""
        from headstart._engine.multi_output import pareto_mask

        def standardized(dataset: str) -> np.ndarray:
            flat = self._objectives(dataset).reshape(-1, 2)
            return (flat - flat.mean(axis=0)) / flat.std(axis=0)

        consensus = np.mean([standardized(d) for d in self.others], axis=0)
        return np.flatnonzero(pareto_mask(-consensus))

    def share(self, configurations: np.ndarray) -> float:
        """The hypervolume share on this dataset of the (flat) ``configurations``."""
        from headstart._objectives import hypervolume

        chosen = self.table.reshape(-1, 2)[configurations]
        return hypervolume(chosen, self.ref_point, ["minimize"] * 2) / self.max_hv

    def consensus_share(self) -> float:
        """The share of :meth:`consensus_front`: what knowing the sources everywhere buys
        without one trial on the target."""
        return self.share(self.consensus_front())

    def sources(
        self, seed: int, trials: int = TABLE_SOURCE_TRIALS
    ) -> dict[str, list[tuple[dict, list, list]]]:
        rng = np.random.default_rng(1000 + seed)
        out = {}
        for dataset in self.others:
            table = self._objectives(dataset)
            flat = rng.choice(table.size // 2, size=trials, replace=False)
            index = np.stack(np.unravel_index(flat, table.shape[:-1]), axis=1)
            out[dataset] = [
                (dict(zip(self.grids, map(int, row), strict=True)), table[tuple(row)].tolist(), [])
                for row in index
            ]
        return out


def evaluator(name: str):
    return TableTradeOff(name) if name.startswith("FCNet-") else Evaluator(name)


def headstart_rows(ev, rows: list[tuple[dict, list, list]]) -> list[dict]:
    """``(params, values, constraints)`` results as rows for headstart's ``add_trials``."""
    return [
        {"params": p, "values": v, "constraints": c or None}
        if ev.k > 1
        else {"params": p, "value": v[0], "constraints": c or None}
        for p, v, c in rows
    ]


def optuna_rows(ev, rows: list[tuple[dict, list, list]]) -> list:
    """The same results as Optuna ``FrozenTrial`` s for ``study.add_trials``, with the constraint
    values where ``constraints_func`` would have stored them."""
    import optuna
    from optuna.samplers._base import _CONSTRAINTS_KEY

    probe = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=0)).ask()
    ev.suggest(probe)  # the problem's distributions, as its suggest calls declare them
    return [
        optuna.trial.create_trial(
            params=p,
            distributions=probe.distributions,
            values=v,
            user_attrs={"constraints": c},
            system_attrs={_CONSTRAINTS_KEY: c} if c else None,
        )
        for p, v, c in rows
    ]


def _headstart_settings(ev, seed: int) -> dict:
    """``create_study`` keywords for ``ev``: its directions and constraints, in memory."""
    from headstart.storage import get_storage

    objectives = {"directions": ["minimize"] * ev.k} if ev.k > 1 else {"direction": "minimize"}
    return dict(objectives, constraints=ev.r > 0, storage=get_storage(None), seed=seed)


def _tell_headstart(study, trial, ev) -> tuple[list, list]:
    """Evaluate ``trial`` on ``ev`` and tell ``study``: ``(values, constraints)``."""
    values, cons = ev(trial.params)
    study.tell(trial, values if ev.k > 1 else values[0], constraints=cons or None)
    return values, cons


def _run_headstart(ev, seed: int, budget: int, method: str):
    import headstart as hs
    from headstart._strategy import default_n_initial

    space = ev.space()
    settings = _headstart_settings(ev, seed)
    if method == "gp-init2d1":  # the ablation: the single-objective design, min(2d+1, 10)
        method, settings["n_initial"] = "gp", default_n_initial(ev.dim, None)
    if method == "gp-ref":  # told the reference point the front is judged by (minimized units)
        method = "gp"
        if ev.k > 1:
            settings["reference_point"] = [float(r) for r in ev.ref_point]
    options, source_trials = {}, None
    if method in TRANSFER_ARMS:  # the ablations: other ScaML-GP options or sources (issues 31, 34)
        options, _, source_trials = TRANSFER_ARMS[method]
        method = "scaml"
    if method == "scaml":  # earlier runs of related tasks
        sources = ev.sources(seed) if source_trials is None else ev.sources(seed, source_trials)
        for name, rows in sources.items():
            source = hs.create_study(name, space, method="random", **settings)
            source.add_trials(headstart_rows(ev, rows))
        settings["transfer_from"] = list(sources)
    study = hs.create_study("bench", space, method=method, **settings, **options)
    out = []
    for _ in range(budget):
        t0 = time.perf_counter()
        trial = study.ask()
        seconds = time.perf_counter() - t0
        out.append((*_tell_headstart(study, trial, ev), seconds))
    return out


def _run_optuna(ev, seed: int, budget: int, method: str):
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    kwargs = {"seed": seed}
    if ev.r:
        kwargs["constraints_func"] = lambda t: t.user_attrs["constraints"]
    if method == "optuna-tpe-mv":  # TPE's documented better setting for correlated parameters
        kwargs["multivariate"] = True
    sampler = {
        "optuna-gp": optuna.samplers.GPSampler,
        "optuna-tpe": optuna.samplers.TPESampler,
        "optuna-tpe-mv": optuna.samplers.TPESampler,
        "optuna-nsga2": optuna.samplers.NSGAIISampler,
    }[method](**kwargs)
    study = optuna.create_study(directions=["minimize"] * ev.k, sampler=sampler)
    out = []
    for _ in range(budget):
        t0 = time.perf_counter()
        trial = study.ask()
        params = ev.suggest(trial)
        seconds = time.perf_counter() - t0
        values, cons = ev(params)
        trial.set_user_attr("constraints", cons)
        study.tell(trial, values)
        out.append((values, cons, seconds))
    return out


def _run_botorch(ev, seed: int, budget: int, method: str):
    """BoTorch's tutorial loop: ``2 (d + 1)`` Sobol points, then one ``SingleTaskGP`` per output
    (a ``ModelListGP``), qLogNEHVI (several objectives, at the problem's reference point) or
    qLogNEI (one), the constraints as BoTorch's ``constraints`` (feasible when ``<= 0``),
    ``optimize_acqf`` with 10 restarts and 512 raw samples; q = 1."""
    import torch
    from botorch.acquisition.logei import qLogNoisyExpectedImprovement
    from botorch.acquisition.multi_objective.logei import (
        qLogNoisyExpectedHypervolumeImprovement,
    )
    from botorch.acquisition.multi_objective.objective import IdentityMCMultiOutputObjective
    from botorch.acquisition.objective import GenericMCObjective
    from botorch.fit import fit_gpytorch_mll
    from botorch.models import ModelListGP, SingleTaskGP
    from botorch.optim import optimize_acqf
    from botorch.sampling import SobolQMCNormalSampler
    from botorch.utils.sampling import draw_sobol_samples
    from gpytorch.mlls import SumMarginalLogLikelihood

    torch.manual_seed(seed)
    d, k = ev.dim, ev.k
    bounds = torch.stack([torch.zeros(d), torch.ones(d)]).double()
    n_init = min(2 * (d + 1), budget)
    initial = draw_sobol_samples(bounds, n=n_init, q=1, seed=seed).squeeze(1).numpy()
    X, Y, out = [], [], []

    def evaluate(u: np.ndarray, seconds: float) -> None:
        u, params = ev.from_unit(np.clip(u, 0.0, 1.0))
        values, cons = ev(params)
        X.append(u)
        Y.append([-v for v in values] + list(cons))  # objectives maximized, constraints <= 0
        out.append((values, cons, seconds))

    for u in initial:
        evaluate(u, 0.0)
    constraints = [lambda Z, j=j: Z[..., k + j] for j in range(ev.r)]
    while len(out) < budget:
        t0 = time.perf_counter()
        train_x = torch.tensor(np.array(X), dtype=torch.float64)
        train_y = torch.tensor(np.array(Y), dtype=torch.float64)
        models = [SingleTaskGP(train_x, train_y[:, j : j + 1]) for j in range(train_y.shape[1])]
        model = ModelListGP(*models)
        fit_gpytorch_mll(SumMarginalLogLikelihood(model.likelihood, model))
        sampler = SobolQMCNormalSampler(torch.Size([128]))
        if k > 1:
            acq = qLogNoisyExpectedHypervolumeImprovement(
                model,
                ref_point=[-r for r in ev.ref_point],
                X_baseline=train_x,
                sampler=sampler,
                objective=IdentityMCMultiOutputObjective(outcomes=list(range(k))),
                constraints=constraints or None,
                prune_baseline=True,
            )
        else:
            acq = qLogNoisyExpectedImprovement(
                model,
                X_baseline=train_x,
                sampler=sampler,
                objective=GenericMCObjective(lambda Z, X=None: Z[..., 0]),
                constraints=constraints or None,
            )
        candidate, _ = optimize_acqf(
            acq,
            bounds=bounds,
            q=1,
            num_restarts=10,
            raw_samples=512,
            options={"batch_limit": 5, "maxiter": 200},
        )
        evaluate(candidate.detach().numpy()[0], time.perf_counter() - t0)
    return out


def run_job(problem: str, method: str, seed: int, budget: int) -> list[dict]:
    """One run: a row per trial with the metric after it."""
    import torch

    torch.set_num_threads(1)
    ev = evaluator(problem)
    runner = (
        _run_headstart
        if method.startswith("headstart")
        else _run_botorch
        if method == "botorch"
        else _run_optuna
    )
    inner = {
        "headstart": "gp",
        "headstart-init2d1": "gp-init2d1",
        "headstart-ref": "gp-ref",
        "headstart-random": "random",
        "headstart-transfer": "scaml",
    }
    inner = inner.get(method, method)
    trials = runner(ev, seed, budget, inner)
    rows, feasible_values = [], []
    for i, (values, cons, seconds) in enumerate(trials):
        ok = all(c <= 0 for c in cons)
        if ok:
            feasible_values.append(values)
        rows.append(
            {
                "problem": problem,
                "method": method,
                "seed": seed,
                "trial": i + 1,
                "metric": metric(ev, feasible_values),
                "feasible": int(ok),
                "seconds": seconds,
            }
        )
    return rows


def metric(ev: Evaluator, feasible_values: list) -> float:
    """Share of the maximum hypervolume (several objectives) or the best feasible regret."""
    if ev.k == 1:
        if not feasible_values:
            return math.inf
        return min(v[0] for v in feasible_values) - ev.optimal_value
    from headstart._objectives import hypervolume

    Y = np.array(feasible_values, dtype=float).reshape(-1, ev.k)
    return hypervolume(Y, ev.ref_point, ["minimize"] * ev.k) / ev.max_hv


def _done(path: Path, budget: int) -> set:
    if not path.exists():
        return set()
    counts: dict = {}
    with path.open() as f:
        for row in csv.DictReader(f):
            key = (row["problem"], row["method"], int(row["seed"]))
            counts[key] = counts.get(key, 0) + 1
    return {k for k, n in counts.items() if n >= budget}


def report(path: Path, out: Path, budget: int) -> str:
    import pandas as pd

    frame = pd.read_csv(path)
    checkpoints = [t for t in CHECKPOINTS if t <= budget]
    lines = [
        "# Several objectives and constraints: headstart vs Optuna",
        "",
        "Generated by `python benchmarks/multi_objective.py`. BoTorch test problems (minimized, "
        "their reference points) and FC-Net's loss / training-time trade-off (log scale, the "
        f"table's median as reference), budget {budget}; each section states its seeds per "
        "method. Every method at its defaults; Optuna's with `constraints_func` where there are "
        "constraints. Several objectives: hypervolume of the feasible front as a share of the "
        "problem's maximum (higher is better). One objective: simple regret of the best feasible "
        "value (lower is better; `inf` until a feasible trial). Mean over seeds.",
        "",
        "![curves](multi_objective.png)",
        "",
    ]
    methods = [m for m in (*METHODS, *ABLATIONS, *PAIRED) if m in set(frame["method"])]
    ranks = []
    for problem, part in frame.groupby("problem", sort=False):
        mo = problem not in SINGLE_OBJECTIVE
        seeds = part.groupby("method")["seed"].nunique()
        counts = sorted(set(seeds))
        count = str(counts[0]) if len(counts) == 1 else f"{counts[0]}-{counts[-1]}"
        what = "hypervolume share" if mo else "regret"
        lines += [f"### {problem} ({what}; {count} seeds)", ""]
        lines += ["| method | " + " | ".join(f"t={t}" for t in checkpoints) + " | s / ask |"]
        lines += ["|---|" + "---:|" * (len(checkpoints) + 1)]
        at = part[part["trial"].isin(checkpoints)]
        table = at.groupby(["method", "trial"])["metric"].mean().unstack()
        secs = part.groupby("method")["seconds"].mean()
        for m in methods:
            if m not in table.index:
                continue
            cells = " | ".join(f"{table.loc[m, t]:.4g}" for t in checkpoints)
            lines.append(f"| {m} | {cells} | {secs[m]:.3f} |")
        last = part[(part["trial"] == budget) & ~part["method"].isin(UNRANKED)].copy()
        last["score"] = last["metric"] if mo else -last["metric"]
        last["rank"] = last.groupby("seed")["score"].rank(ascending=False)
        ranks.append(last.groupby("method")["rank"].mean().rename(problem))
        lines.append("")
    rank_table = pd.concat(ranks, axis=1)
    left_out = ", ".join(f"`{m}`" for m in UNRANKED if m in methods)
    why = (
        f"; without {left_out}: an earlier run's data, the judging reference point, a reverted "
        "setting, or not every problem and seed"
    )
    lines += [
        f"### Mean rank at t = {budget} (1 = best; per seed, then averaged{why if left_out else ''})",
        "",
    ]
    lines += ["| method | " + " | ".join(rank_table.columns) + " | mean |"]
    lines += ["|---|" + "---:|" * (len(rank_table.columns) + 1)]
    for m in [m for m in methods if m in rank_table.index]:
        row = rank_table.loc[m]
        lines.append(f"| {m} | " + " | ".join(f"{v:.2f}" for v in row) + f" | {row.mean():.2f} |")
    lines += ["", *summary_table(frame, budget), "", *summary_table(frame, budget, log_gap=True)]
    lines += ["", *transfer_table(frame)]
    for arm in PAIRED:
        pairs = paired_table(frame, arm, "headstart", checkpoints)
        lines += ["", *pairs] if pairs else []
    text = "\n".join(lines).rstrip("\n") + "\n"
    (out / "multi_objective.md").write_text(text)
    _plot(frame, out / "multi_objective.png", methods)
    return text


SUMMARY = (
    ("headstart", "headstart"),
    ("optuna-gp", "Optuna `GPSampler`"),
    ("botorch", "BoTorch qLogNEHVI"),
    ("optuna-tpe-mv", "TPE (multivariate)"),
    ("optuna-nsga2", "NSGA-II"),
    ("headstart-transfer", "headstart + sources"),
    ("headstart-ref", "headstart + reference point"),
    *((arm, f"headstart + sources, {label}") for arm, (_, label, _) in TRANSFER_ARMS.items()),
)
#: Summary columns given more than the peers (an earlier run's data, the judging reference):
#: reported, never bold
INFORMED = ("headstart-transfer", "headstart-ref", *TRANSFER_ARMS)


def summary_table(frame, budget: int, log_gap: bool = False) -> list[str]:
    """The README's table: each problem's mean metric at ``budget`` per method, the best of the
    methods told only what the peers are told in bold (:data:`INFORMED`: an earlier run's data,
    or the judging reference point).

    With ``log_gap``: the several-objective problems only, as the mean over seeds of
    ``log10(1 - share)``, the log hypervolume difference to the maximum (lower is better)."""
    last = frame[frame["trial"] == budget].copy()
    if log_gap:
        last = last[~last["problem"].isin(SINGLE_OBJECTIVE)]
        last["metric"] = np.log10(np.clip(1.0 - last["metric"], 1e-12, None))
    if last.empty:  # e.g. the log gap of a run with one-objective problems only
        return []
    means = last.groupby(["problem", "method"])["metric"].mean().unstack()
    cols = [(m, label) for m, label in SUMMARY if m in means.columns]
    title = (
        "log10 hypervolume gap to the maximum, mean over seeds; lower is better"
        if log_gap
        else "hypervolume share; regret for one objective"
    )
    lines = [
        f"### Summary at t = {budget} ({title})",
        "",
        "| problem | " + " | ".join(label for _, label in cols) + " |",
        "|---|" + "---:|" * len(cols),
    ]
    for problem in dict.fromkeys(last["problem"]):
        row = means.loc[problem]
        peers = row[[m for m, _ in cols if m not in INFORMED]].dropna()
        lower = log_gap or problem in SINGLE_OBJECTIVE
        best = None if peers.empty else peers.idxmin() if lower else peers.idxmax()
        if best is not None and not np.isfinite(row[best]):  # inf: no feasible best to mark
            best = None
        cells = []
        for m, _ in cols:
            text = "–" if np.isnan(row[m]) else f"{row[m]:.4g}"
            cells.append(f"**{text}**" if m == best else text)
        what = " (regret)" if problem in SINGLE_OBJECTIVE else ""
        lines.append(f"| {problem}{what} | " + " | ".join(cells) + " |")
    return lines


def paired_table(frame, a: str, b: str, checkpoints: list[int]) -> list[str]:
    """Method ``a`` against ``b`` seed by seed: at each checkpoint, the seeds where ``a`` is
    better / worse than ``b`` (ties, both without a feasible trial, are neither) and both
    medians. Counts and medians, not means: a run without a feasible trial has regret ``inf``."""
    both = frame[frame["method"].isin([a, b]) & frame["trial"].isin(checkpoints)]
    if both.empty or set(both["method"]) != {a, b}:
        return []
    wide = both.pivot_table(
        index=["problem", "seed", "trial"], columns="method", values="metric", aggfunc="first"
    ).dropna()
    lines = [
        f"### `{a}` against `{b}`, seed by seed",
        "",
        f"Per checkpoint: seeds where `{a}` is better : worse; then the median of `{a}` / `{b}`.",
        "",
        "| problem | seeds | " + " | ".join(f"t={t}" for t in checkpoints) + " |",
        "|---|---:|" + "---|" * len(checkpoints),
    ]
    for problem in dict.fromkeys(both["problem"]):  # in run order
        if problem not in wide.index.get_level_values("problem"):
            continue
        part = wide.xs(problem, level="problem", drop_level=False)
        sign = 1.0 if problem in SINGLE_OBJECTIVE else -1.0  # lower regret, higher share
        cells = []
        for t in checkpoints:
            if t not in part.index.get_level_values("trial"):
                cells.append("–")
                continue
            at = part.xs(t, level="trial")
            x, y = sign * at[a].to_numpy(), sign * at[b].to_numpy()
            better = int(np.sum(x < y))
            worse = int(np.sum(x > y))
            cells.append(f"{better} : {worse}; {np.median(at[a]):.4g} / {np.median(at[b]):.4g}")
        seeds = part.index.get_level_values("seed").nunique()
        lines.append(f"| {problem} | {seeds} | " + " | ".join(cells) + " |")
    return lines


def transfer_table(frame, early: int = 10, late: int = 25) -> list[str]:
    """FC-Net with the other datasets as sources: the hypervolume share at trial ``early`` with
    sources against trial ``late`` without (issue 34's target), mean over seeds."""
    part = frame[frame["problem"].str.startswith("FCNet-")]
    if part.empty or "headstart-transfer" not in set(part["method"]):
        return []
    means = part.groupby(["problem", "method", "trial"])["metric"].mean()
    offsets = [arm for arm in TRANSFER_ARMS if arm in set(part["method"])]  # the ablations run
    lines = [
        f"### Sources on FC-Net: trial {early} with them against trial {late} without",
        "",
        f"| problem | headstart + sources, t={early} | headstart, t={late} | "
        f"GPSampler, t={late} | met |"
        + "".join(f" {TRANSFER_ARMS[arm][1]}, t={early} |" for arm in offsets)
        + " sources' full-table front |",
        "|---|---:|---:|---:|---|" + "---:|" * (len(offsets) + 1),
    ]
    for problem in dict.fromkeys(part["problem"]):
        with_sources = means[problem, "headstart-transfer", early]
        without = means[problem, "headstart", late]
        peer = means.get((problem, "optuna-gp", late), float("nan"))
        met = "yes" if with_sources >= without else "no"
        extra = "".join(
            f" {means.get((problem, arm, early), float('nan')):.3f} |" for arm in offsets
        )
        table = TableTradeOff(problem)
        front = table.consensus_front()
        lines.append(
            f"| {problem} | {with_sources:.3f} | {without:.3f} | {peer:.3f} | {met} |"
            + extra
            + f" {table.share(front):.3f} ({len(front)}) |"
        )
    note = (
        "The last column evaluates on the target every configuration Pareto-optimal in the "
        "other datasets' mean (each objective standardized per dataset) over their full tables "
        "(in brackets how many, against 10 trials): what knowing the sources everywhere buys "
        "without adapting to the target (`TableTradeOff.consensus_front`)."
    )
    return [*lines, "", note]


def _plot(frame, path: Path, methods: list[str]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    problems = list(dict.fromkeys(frame["problem"]))
    cols = 4
    rows = -(-len(problems) // cols)
    fig, axes = plt.subplots(rows, cols, figsize=(4 * cols, 3.2 * rows), squeeze=False)
    for ax, problem in zip(axes.ravel(), problems, strict=False):
        part = frame[frame["problem"] == problem]
        for m in methods:
            curve = part[part["method"] == m].groupby("trial")["metric"].mean()
            ax.plot(curve.index, curve.values, label=m)
        if problem in SINGLE_OBJECTIVE:
            ax.set_yscale("log")
            ax.set_ylabel("best feasible regret")
        else:
            ax.set_ylabel("hypervolume share")
        ax.set_title(problem, fontsize=9)
        ax.set_xlabel("trial")
        ax.grid(alpha=0.3)
    for ax in axes.ravel()[len(problems) :]:
        ax.set_visible(False)
    axes[0, 0].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


def _results(jobs: list[tuple], budget: int, workers: int):
    """``(job, rows)`` as jobs finish: inline with one worker, else in processes."""
    if workers <= 1:
        for job in jobs:
            yield job, run_job(*job, budget)
        return
    with ProcessPoolExecutor(workers) as pool:
        futures = {pool.submit(run_job, *job, budget): job for job in jobs}
        for future in as_completed(futures):
            yield futures[future], future.result()


def _latency_rows(ev, n: int, rng: np.random.Generator) -> list[tuple[dict, list, list]]:
    """``n`` uniform random points of ``ev``'s space with their results."""
    return [(params, *ev(params)) for params in (ev.random_params(rng) for _ in range(n))]


def _time_headstart(ev, rows, repeats: int) -> list[float]:
    import headstart as hs

    study = hs.create_study("latency", ev.space(), **_headstart_settings(ev, 0))
    study.add_trials(headstart_rows(ev, rows))
    seconds = []
    for i in range(repeats + 1):  # the first ask warms the fit, as inside a running loop
        t0 = time.perf_counter()
        trial = study.ask()
        if i:
            seconds.append(time.perf_counter() - t0)
        _tell_headstart(study, trial, ev)
    return seconds


def _time_optuna(ev, rows, repeats: int) -> list[float]:
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    kwargs = {"constraints_func": lambda t: t.user_attrs["constraints"]} if ev.r else {}
    study = optuna.create_study(
        directions=["minimize"] * ev.k, sampler=optuna.samplers.GPSampler(seed=0, **kwargs)
    )
    study.add_trials(optuna_rows(ev, rows))
    seconds = []
    for i in range(repeats + 1):
        t0 = time.perf_counter()
        trial = study.ask()
        params = ev.suggest(trial)
        if i:
            seconds.append(time.perf_counter() - t0)
        values, cons = ev(params)
        trial.set_user_attr("constraints", cons)
        study.tell(trial, values)
    return seconds


def latency(problems: list[str], sizes: list[int], repeats: int, out: Path) -> str:
    """Median seconds per suggestion after ``n`` random trials, one thread for every library
    (headstart's and Optuna's ``ask`` on the same points); writes
    ``multi_objective_latency.{csv,md}``."""
    import statistics

    import torch
    from threadpoolctl import threadpool_limits

    torch.set_num_threads(1)
    rows_out = []
    with threadpool_limits(1):
        for problem in problems:
            ev = evaluator(problem)
            for n in sizes:
                rows = _latency_rows(ev, n, np.random.default_rng(n))
                for method, timer in (("headstart", _time_headstart), ("optuna-gp", _time_optuna)):
                    seconds = timer(ev, rows, repeats)
                    rows_out.append((problem, n, method, statistics.median(seconds)))
                    print(rows_out[-1], file=sys.stderr, flush=True)
    with (out / "multi_objective_latency.csv").open("w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["problem", "n", "method", "median_seconds"])
        writer.writerows(rows_out)
    lines = [
        "# Seconds per suggestion with several objectives or constraints",
        "",
        "Generated by `python benchmarks/multi_objective.py --latency`. Each library's study holds "
        f"the same n uniform random trials; one untimed `ask` warms its fit, then the median of "
        f"{repeats} timed `ask` calls (each told before the next), every library on one thread.",
        "",
        "| problem | n | headstart (s) | optuna-gp (s) | ratio |",
        "|---|---:|---:|---:|---:|",
    ]
    table = {(p, n, m): s for p, n, m, s in rows_out}
    for problem in problems:
        for n in sizes:
            a, b = table[(problem, n, "headstart")], table[(problem, n, "optuna-gp")]
            lines.append(f"| {problem} | {n} | {a:.3f} | {b:.3f} | {a / b:.2f} |")
    text = "\n".join(lines) + "\n"
    (out / "multi_objective_latency.md").write_text(text)
    return text


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument(
        "--problems",
        help="comma-separated problems (default: all but the 2-D confirmation set and the "
        "constrained engineering problems; with "
        "--latency: " + ", ".join(LATENCY_PROBLEMS) + ")",
    )
    p.add_argument("--methods", default=",".join(METHODS), help="comma-separated methods")
    p.add_argument("--seeds", type=int, default=10, help="seeds 0..N-1 of every pair")
    p.add_argument("--budget", type=int, default=50, help="trials per run")
    p.add_argument("--workers", type=int, default=2, help="processes running jobs")
    p.add_argument("--out", type=Path, default=DOCS, help="folder of the CSV and reports")
    p.add_argument("--report-only", action="store_true", help="report the CSV; run nothing")
    p.add_argument(
        "--latency",
        type=int,
        nargs="*",
        metavar="N",
        help="time single asks after N random trials instead (default sizes 50 200)",
    )
    p.add_argument("--repeats", type=int, default=3, help="timed asks per size (--latency)")
    args = p.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    if args.latency is not None:
        problems = args.problems.split(",") if args.problems else list(LATENCY_PROBLEMS)
        sizes = args.latency or [50, 200]
        sys.stdout.write(latency(problems, sizes, args.repeats, args.out))
        return 0
    from headstart.benchmarks.runner import pack_csv, unpack_csv

    path = unpack_csv(args.out / "multi_objective.csv")  # committed gzipped
    if not args.report_only:
        done = _done(path, args.budget)
        jobs = [
            (problem, method, seed)
            for seed in range(args.seeds)
            for problem in (args.problems or ",".join(PROBLEMS)).split(",")
            for method in args.methods.split(",")
            if (problem, method, seed) not in done
        ]
        new = not path.exists()
        with path.open("a", newline="") as f:
            writer = csv.DictWriter(f, COLUMNS)
            if new:
                writer.writeheader()
            for i, (job, rows) in enumerate(_results(jobs, args.budget, args.workers)):
                writer.writerows(rows)
                f.flush()
                print(f"[{i + 1}/{len(jobs)}] {job}", file=sys.stderr, flush=True)
    sys.stdout.write(report(path, args.out, args.budget))
    pack_csv(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
