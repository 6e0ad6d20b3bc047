r"""Two more model-based peers at their defaults: SMAC3's random-forest facade and HEBO.

* ``smac-hpo``: SMAC3's :class:`~smac.HyperparameterOptimizationFacade`, its recommended facade
  for hyperparameter optimisation: a random forest surrogate (10 trees, log-transformed costs),
  EI, local-and-random search, a Sobol initial design of ``min(10 d, budget / 4)`` configurations
  and 20% interleaved random configurations. The scenario says ``deterministic=True`` because
  every benchmark objective here returns one value per configuration (the intensifier then runs
  each configuration once, as every other method does). SMAC's initial design depends on the
  budget, so its runs at different budgets are separate.
* ``hebo``: HEBO 0.3.6 (Cowen-Rivers et al. 2022, the NeurIPS 2020 black-box challenge winner)
  at its defaults: a GP with Kumaraswamy input warping, power-transformed outputs, the MACE
  ensemble of acquisitions optimised by NSGA-II, ``1 + d`` Sobol points first. Its trials do not
  depend on the budget. HEBO's wheel pins ``numpy<1.25``; ``make bench-peers`` installs it with
  ``--no-deps`` next to the project's numpy (it runs unchanged on numpy 2).

Both record the same per-evaluation fields as every method of
:mod:`headstart.benchmarks.methods` and are registered there on import.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from headstart.benchmarks.functions import Task
from headstart.benchmarks.methods import _Recorder, register_method, run_smac_ask_tell
from headstart.space import Categorical, Fixed, Float, Int, SearchSpace


def run_smac_hpo(task: Task, seed: int, budget: int) -> list[dict[str, Any]]:
    """SMAC3 HyperparameterOptimizationFacade (random forest) at its defaults (seeded)."""
    from smac import HyperparameterOptimizationFacade, Scenario

    from headstart.configspace import to_configspace

    cs = to_configspace(task.space, seed=seed)
    outdir = tempfile.mkdtemp(prefix="smac-hpo-")
    try:
        scenario = Scenario(
            cs, deterministic=True, n_trials=budget, seed=seed, output_directory=Path(outdir)
        )
        smac = HyperparameterOptimizationFacade(
            scenario,
            target_function=lambda config, seed=0: 0.0,  # ask/tell: never called
            overwrite=True,
            logging_level=40,
        )
        return run_smac_ask_tell(smac, task, seed, budget)
    finally:
        shutil.rmtree(outdir, ignore_errors=True)


def hebo_space(space: SearchSpace) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """HEBO's parameter list for ``space`` and the values of its ``Fixed`` parameters.

    Linear floats and integers map to ``num`` and ``int``; log-scaled ones to ``pow`` and
    ``pow_int``; categoricals to ``cat`` over the choices' indices (as strings), which
    :func:`hebo_params` maps back.
    """
    params: list[dict[str, Any]] = []
    fixed: dict[str, Any] = {}
    for name, p in space.items():
        if isinstance(p, Float):
            kind = "pow" if p.log else "num"
            params.append({"name": name, "type": kind, "lb": p.low, "ub": p.high})
        elif isinstance(p, Int):
            kind = "pow_int" if p.log else "int"
            params.append({"name": name, "type": kind, "lb": p.low, "ub": p.high})
        elif isinstance(p, Categorical):
            choices = [str(i) for i in range(len(p.choices))]
            params.append({"name": name, "type": "cat", "categories": choices})
        elif isinstance(p, Fixed):
            fixed[name] = p.value
    return params, fixed


def hebo_params(space: SearchSpace, row: dict[str, Any], fixed: dict[str, Any]) -> dict[str, Any]:
    """One HEBO suggestion (a data-frame row) as a validated headstart configuration."""
    out: dict[str, Any] = dict(fixed)
    for name, p in space.items():
        if isinstance(p, Fixed):
            continue
        value = row[name]
        if isinstance(p, Categorical):
            out[name] = p.choices[int(value)]
        elif isinstance(p, Int):
            out[name] = min(max(round(float(value)), p.low), p.high)
        else:
            out[name] = min(max(float(value), p.low), p.high)
    return space.validate(out)


def run_hebo(task: Task, seed: int, budget: int) -> list[dict[str, Any]]:
    """HEBO at its defaults (seeded: numpy, torch and its Sobol scramble)."""
    import torch

    os.environ.setdefault("PYMOO_NO_COMPILE_WARNING", "1")
    from hebo.design_space.design_space import DesignSpace
    from hebo.optimizers.hebo import HEBO

    try:  # pymoo prints a notice about its uncompiled modules on first use
        from pymoo.config import Config

        Config.warnings["not_compiled"] = False
    except ImportError:  # pragma: no cover - other pymoo versions
        pass
    np.random.seed(seed)  # HEBO draws from the global generators
    torch.manual_seed(seed)
    params, fixed = hebo_space(task.space)
    optimizer = HEBO(DesignSpace().parse(params), scramble_seed=seed)
    recorder = _Recorder(task, seed)
    for _ in range(budget):
        t0 = time.perf_counter()
        suggestion = optimizer.suggest(n_suggestions=1)
        seconds = time.perf_counter() - t0
        config = hebo_params(task.space, suggestion.iloc[0].to_dict(), fixed)
        observed = recorder.evaluate(config, seconds)
        optimizer.observe(suggestion, np.array([[observed]]))
    return recorder.records


register_method("smac-hpo", run_smac_hpo)
register_method("hebo", run_hebo)

__all__ = ["hebo_params", "hebo_space", "run_hebo", "run_smac_hpo"]
