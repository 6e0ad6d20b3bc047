r"""headstart's models as an Optuna sampler: change only the ``sampler=`` line of an Optuna script.

.. code-block:: python

    import optuna
    from headstart.integrations.optuna import HeadstartSampler

    study = optuna.create_study(sampler=HeadstartSampler(method="scaml", transfer_from=[old]))
    study.optimize(objective, n_trials=30, n_jobs=2)    # pruners, storages, dashboard as usual

How it fits Optuna (the same contract as Optuna's own ``GPSampler``):

* **Relative sampling** over the intersection of the parameters every completed trial used
  (single-valued distributions dropped). Before any trial completed, the space is the one of the
  sources (Optuna studies, or headstart studies, in ``transfer_from``) or ``search_space=``, so a
  transfer method uses the earlier runs from the first trial on. Sources that give no
  distributions (DataFrames, CSV files) make the first trial their best row; ``priors=`` make it
  start at the belief's mode, as the native API does. A name in ``priors=`` that is not a
  parameter fails when the sampler is built (if the space is known then) or after the first
  trial.
* **Parameters outside that space** (conditional ones) go to ``independent_sampler`` (default
  Optuna's ``RandomSampler``), with one warning per parameter.
* **Running trials are pending points**: their suggestions are kept in the trial's system
  attributes (``headstart:params``) so other threads and processes condition on them
  (``n_jobs=2`` or several workers on one storage).
* **Pruned trials** enter the model at their last reported value, no better than the median
  completed one (:func:`pruned_values`), so it learns to avoid their region; failed trials are
  ignored. Pruning itself is Optuna's (``trial.report`` / ``trial.should_prune``, any pruner).
* One model state per search space is kept between suggestions (warm starts), guarded by a
  lock, so ``n_jobs > 1`` threads share it safely.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import threading
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import optuna
from optuna.distributions import BaseDistribution
from optuna.samplers import BaseSampler, RandomSampler
from optuna.search_space import IntersectionSearchSpace
from optuna.trial import FrozenTrial, TrialState

from headstart._config import StudyConfig
from headstart._methods import check_source_arguments, default_method, merge_options
from headstart._objectives import check_reference
from headstart._strategy import Strategy, build_strategy
from headstart.exceptions import InvalidSettingError
from headstart.integrations.optuna_space import space_from_distributions, to_optuna_value
from headstart.pibo import UserBelief
from headstart.sources import OptunaSource, resolve_prior_model, resolve_sources
from headstart.sources._optuna import CONSTRAINTS_KEY, is_optuna_study, trial_constraints
from headstart.sources._outputs import resolve_output_sources
from headstart.space import SearchSpace
from headstart.storage import get_storage

_logger = logging.getLogger(__name__)
PARAMS_KEY = "headstart:params"  # a running trial's relative suggestion, for other workers


def _source_items(transfer_from: Any) -> list:
    if transfer_from is None or (isinstance(transfer_from, str) and transfer_from == "all"):
        return []
    return list(transfer_from) if isinstance(transfer_from, list | tuple) else [transfer_from]


def _source_distributions(transfer_from: Any, storage: Any) -> dict[str, BaseDistribution]:
    """The parameters every trial of the sources has, where the sources say their distributions:
    Optuna studies, and headstart studies named in ``storage`` (empty for other sources)."""
    from headstart.exceptions import UnknownStudyError
    from headstart.integrations.optuna_space import distributions_from_space

    parts: list[dict[str, BaseDistribution]] = []
    for item in _source_items(transfer_from):
        if isinstance(item, OptunaSource):
            studies = item.studies()
        elif is_optuna_study(item):
            studies = [item]
        elif isinstance(item, str) and not item.lower().endswith(".csv"):
            try:
                record = storage.get_study(item)
            except UnknownStudyError:
                continue  # resolve_sources says so, with the names it knows
            parts.append(distributions_from_space(SearchSpace.from_json(record.space)))
            continue
        else:
            continue
        for study in studies:
            parts.append(
                optuna.search_space.intersection_search_space(
                    study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))
                )
            )
    if not parts:
        return {}
    found = parts[0]
    for part in parts[1:]:
        found = {k: v for k, v in found.items() if part.get(k) == v}
    return {k: v for k, v in found.items() if not v.single()}


def _best_source_row(transfer_from: Any, minimize: bool) -> dict[str, Any]:
    """The best row of the DataFrame and CSV sources (``{column: value}``; ``params_`` prefixes
    dropped): what the first trial evaluates when the sources give no distributions."""
    import pandas as pd

    from headstart.sources._tables import is_complete_state

    frames = []
    for item in _source_items(transfer_from):
        if isinstance(item, str) and item.lower().endswith(".csv"):
            item = pd.read_csv(item)
        if hasattr(item, "columns") and "value" in item.columns:
            frames.append(item)
    best: dict[str, Any] = {}
    best_value = None
    for frame in frames:
        rows = frame
        if "state" in frame.columns:
            rows = frame[[is_complete_state(s) for s in frame["state"]]]
        values = pd.to_numeric(rows["value"], errors="coerce")
        values = values[np.isfinite(values)]
        if values.empty:
            continue
        index = values.idxmin() if minimize else values.idxmax()
        value = float(values[index])
        if best_value is None or (value < best_value if minimize else value > best_value):
            best_value = value
            row = rows.loc[index]
            best = {str(c).removeprefix("params_"): row[c] for c in rows.columns}
    return best


class HeadstartSampler(BaseSampler):
    r"""An Optuna sampler that suggests with any headstart method.

    Args:
        method: ``"gp"``, a transfer method (``"scaml"``, ``"rgpe"``, ``"abrac"``,
            ``"warmstart"``, ...) with ``transfer_from``, ``"mphd"`` with ``transfer_from`` or
            ``prior_model``, or ``"random"``. Default: ``"scaml"`` with ``transfer_from``,
            ``"mphd"`` with ``prior_model``, else ``"gp"`` (as ``create_study``).
        transfer_from: Earlier runs: Optuna studies (``optuna.Study`` objects or
            ``hs.sources.from_optuna(URL)``), DataFrames (an Optuna ``trials_dataframe()`` as
            is), CSV files, headstart study names (looked up in ``storage``) or MetaTasks.
        prior_model: ``method="mphd"``: a pre-trained prior (path, ``PriorModel`` or name).
        priors: Beliefs for piBO, per parameter: ``{"lr": hs.Normal(1e-3, 1.0)}``,
            ``{"optimizer": [0.8, 0.2]}`` (weights of a categorical's choices).
        search_space: Optuna distributions to model before any trial completed (by default the
            sources' parameters, else the intersection of the completed trials').
        seed: Seed of every suggestion (and of the independent sampler).
        n_startup_trials: Initial design size (default: the method's, as in ``create_study``).
        budget: Planned number of trials (sets the defaults of ``n_startup_trials`` and piBO).
        independent_sampler: Sampler of parameters outside the modelled space.
        warn_independent_sampling: Warn once per parameter that is sampled independently.
        deterministic_objective: The objective is noise-free (the GP interpolates).
        constraints_func: Optuna's ``constraints_func(trial) -> [c1, ...]``, called after each
            completed or pruned trial; ``c <= 0`` is feasible. Constraints an objective sets
            with Optuna 5's ``trial.set_constraint(name, value)`` are modelled without it. Each constraint gets its own GP
            and suggestions multiply the acquisition by the probability that all hold; the
            values are stored where Optuna's ``study.best_trials`` reads them. Multi-objective
            studies (``directions=[...]``) get one GP per objective and log EHVI, above
            ``reference_point=[...]`` when given (one value per objective, in the study's
            directions; its length is checked when the first trial starts, before it runs).
        storage: headstart storage where study names in ``transfer_from`` are looked up and
            fitted meta-models are cached (default: in memory, fitted once per sampler).
        **settings: Any other model setting of :func:`headstart.create_study`
            (``acquisition``, ``first_trial``, ``ucb_beta``, ``prior_strength``, ``use_priors``,
            ...) and the method's options (``options={...}`` or as keywords: ``kernel="auto"``,
            ``fit_factr=1e7``, ...).

    Raises:
        InvalidSettingError: an unknown method or setting (here, not at the first trial).
    """

    def __init__(
        self,
        method: str | None = None,
        *,
        transfer_from: Any = None,
        prior_model: Any = None,
        priors: Mapping[str, Any] | None = None,
        search_space: Mapping[str, BaseDistribution] | None = None,
        seed: int | None = None,
        n_startup_trials: int | None = None,
        budget: int | None = None,
        independent_sampler: BaseSampler | None = None,
        warn_independent_sampling: bool = True,
        deterministic_objective: bool = False,
        storage: Any = None,
        constraints_func: Any = None,
        **settings: Any,
    ) -> None:
        fields = {f.name for f in dataclasses.fields(StudyConfig)}
        internal = {"method", "seed", "n_initial", "budget", "deterministic", "transfer"}
        internal |= {"prior_model", "heartbeat_interval", "grace_period", "reenqueue_stale"}
        internal |= {"directions", "constrained"}  # the study's directions; constraints_func
        given = set(settings) & internal
        if given:
            raise InvalidSettingError(
                f"HeadstartSampler does not take {sorted(given)}; it takes the model settings "
                f"of create_study: {sorted(fields - internal)} and the method's options."
            )
        if method is None:
            method = default_method(transfer_from, prior_model)
        check_source_arguments(method, transfer_from, prior_model)
        general = {k: v for k, v in settings.items() if k in fields and k != "options"}
        # its form checked here; its length against the study's directions at the first trial
        self._reference_point = general.pop("reference_point", None)
        if self._reference_point is not None:
            self._reference_point = check_reference(self._reference_point)
        options = {k: v for k, v in settings.items() if k not in fields}
        self._seed = int(np.random.default_rng(seed).integers(2**31 - 1))
        self._config = StudyConfig(
            method=method,
            seed=self._seed,
            n_initial=n_startup_trials,
            budget=budget,
            deterministic=deterministic_objective,
            options=merge_options(
                method, settings.get("options"), options, settings=sorted(fields - internal)
            ),
            **general,
        )
        if constraints_func is not None and not callable(constraints_func):
            raise InvalidSettingError(
                f"constraints_func must be a function of the trial; got {constraints_func!r}."
            )
        self._constraints_func = constraints_func
        if constraints_func is not None:  # refuse a method without constraint models here
            dataclasses.replace(self._config, constrained=True)
        self._method = method
        self._transfer_from = transfer_from
        self._prior_model = prior_model
        self._priors = dict(priors or {})
        self._given_space = dict(search_space) if search_space is not None else None
        self._source_space: dict[str, BaseDistribution] | None = None
        self._first_row: dict[str, Any] | None = None
        self._storage = get_storage(storage)  # memory unless given: the meta-fit cache
        self._independent = independent_sampler or RandomSampler(seed=seed)
        self._warn = warn_independent_sampling
        self._warned: set[str] = set()
        self._intersection = IntersectionSearchSpace()
        self._strategies: dict[str, Strategy] = {}
        self._lock = threading.RLock()
        if self._priors:  # a misspelt name fails here when the space is known already
            known = self._given_space or self._sources_space()
            if known:
                space_from_distributions(known, self._priors)

    # --- Optuna's sampler protocol -------------------------------------------------------------
    def reseed_rng(self) -> None:
        self._independent.reseed_rng()

    def infer_relative_search_space(
        self, study: optuna.Study, trial: FrozenTrial
    ) -> dict[str, BaseDistribution]:
        """The completed trials' common parameters; before any, the sources' or the given ones."""
        if self._reference_point is not None:  # before the first trial runs, not after it
            self._check_reference(study)
        found = {k: v for k, v in self._intersection.calculate(study).items() if not v.single()}
        if found:
            return found
        if self._given_space is not None:
            return self._given_space
        return self._sources_space()

    def _check_reference(self, study: optuna.Study) -> None:
        """As ``create_study``: several objectives (the config refuses one), one value each."""
        if len(study.directions) == 1:
            StudyConfig(reference_point=self._reference_point)  # raises InvalidSettingError
        check_reference(self._reference_point, len(study.directions))

    def _sources_space(self) -> dict[str, BaseDistribution]:
        with self._lock:
            if self._source_space is None:
                self._source_space = _source_distributions(self._transfer_from, self._storage)
            return dict(self._source_space)

    def sample_relative(
        self, study: optuna.Study, trial: FrozenTrial, search_space: dict[str, BaseDistribution]
    ) -> dict[str, Any]:
        if not search_space:
            return {}
        with self._lock:  # threads (n_jobs) see each other's suggestions as pending
            return self._sample(study, trial, search_space)

    def _sample(
        self, study: optuna.Study, trial: FrozenTrial, search_space: dict[str, BaseDistribution]
    ) -> dict[str, Any]:
        names = sorted(search_space)
        wanted = set(names)
        trials = study._get_trials(
            deepcopy=False,
            states=(TrialState.COMPLETE, TrialState.PRUNED, TrialState.RUNNING),
            use_cache=False,
        )
        done = [t for t in trials if t.state == TrialState.COMPLETE and t.params.keys() >= wanted]
        constrained = self._constraints_func is not None or any(
            trial_constraints(t) is not None for t in done
        )
        strategy = self._strategy(search_space, study, constrained)
        if strategy.config.multi_output:  # several objectives and / or constraints
            completed, values = self._output_rows(study, done, names, constrained)
            pruned = []
        else:
            sign = 1.0 if study.direction == optuna.study.StudyDirection.MAXIMIZE else -1.0
            completed = [{n: t.params[n] for n in names} for t in done]
            values = [sign * t.value for t in done]
            pruned = [
                t for t in trials if t.state == TrialState.PRUNED and t.params.keys() >= wanted
            ]
        if pruned and values:
            completed += [{n: t.params[n] for n in names} for t in pruned]
            values += pruned_values(pruned, np.asarray(values), sign)
        pending = []
        for t in trials:
            if t.state == TrialState.RUNNING and t.number != trial.number:
                params = _running_params(t)
                if params.keys() >= wanted:
                    pending.append({n: params[n] for n in names})
        suggestion = strategy.suggest(
            completed,
            values,
            design_index=trial.number,
            trial_number=trial.number,
            pending=pending,
        )
        out = {n: to_optuna_value(suggestion[n], search_space[n]) for n in names}
        study._storage.set_trial_system_attr(trial._trial_id, PARAMS_KEY, json.dumps(out))
        return out

    def sample_independent(
        self,
        study: optuna.Study,
        trial: FrozenTrial,
        param_name: str,
        param_distribution: BaseDistribution,
    ) -> Any:
        if (
            self._warn
            and param_name not in self._warned
            and not param_distribution.single()
            and study._get_trials(deepcopy=False, states=(TrialState.COMPLETE,), use_cache=True)
        ):  # before the first completed trial every parameter is sampled independently
            self._warned.add(param_name)
            _logger.warning(
                "HeadstartSampler samples %r with %s: it is not used by every completed trial "
                "(a conditional parameter), so the model does not cover it.",
                param_name,
                type(self._independent).__name__,
            )
        first = self._first_trial_value(study, trial, param_name, param_distribution)
        if first is not None:
            return first
        return self._independent.sample_independent(study, trial, param_name, param_distribution)

    def _first_trial_value(
        self, study: optuna.Study, trial: FrozenTrial, name: str, distribution: BaseDistribution
    ) -> Any:
        """Before any trial completed, the first trial's value of a parameter the model does
        not cover yet: the best source row's (DataFrame and CSV sources), else the belief's mode
        (``priors=``), as the native API starts; ``None``: sample it independently."""
        if trial.number != 0 or distribution.single():
            return None
        if study._get_trials(deepcopy=False, states=(TrialState.COMPLETE,), use_cache=True):
            return None
        with self._lock:
            if self._first_row is None:
                minimize = study.directions[0] != optuna.study.StudyDirection.MAXIMIZE
                self._first_row = _best_source_row(self._transfer_from, minimize)
        value = self._first_row.get(name)
        if value is not None and not (isinstance(value, float) and np.isnan(value)):
            if hasattr(value, "item"):
                value = value.item()
            try:
                internal = distribution.to_internal_repr(value)
            except (ValueError, TypeError):
                internal = None
            if internal is not None and distribution._contains(internal):
                return value
        if name in self._priors:
            param_space = space_from_distributions({name: distribution}, {name: self._priors[name]})
            return to_optuna_value(param_space.prior_mode()[name], distribution)
        return None

    def before_trial(self, study: optuna.Study, trial: FrozenTrial) -> None:
        self._independent.before_trial(study, trial)

    def after_trial(
        self,
        study: optuna.Study,
        trial: FrozenTrial,
        state: TrialState,
        values: Sequence[float] | None,
    ) -> None:
        if self._constraints_func is not None and state in (
            TrialState.COMPLETE,
            TrialState.PRUNED,
        ):
            constraints = [float(c) for c in self._constraints_func(trial)]
            if not all(np.isfinite(constraints)):
                raise InvalidSettingError(
                    f"constraints_func returned {constraints} for trial {trial.number}; "
                    "constraint values must be finite numbers (feasible when <= 0)."
                )
            study._storage.set_trial_system_attr(trial._trial_id, CONSTRAINTS_KEY, constraints)
        self._independent.after_trial(study, trial, state, values)
        unknown = sorted(set(self._priors) - set(trial.params))
        if unknown and state == TrialState.COMPLETE and trial.params:
            raise InvalidSettingError(
                f"priors name parameter(s) {unknown} that the objective does not suggest (trial "
                f"{trial.number} suggested {sorted(trial.params)}); fix the names in priors=."
            )

    # --- internals -----------------------------------------------------------------------------
    def _output_rows(
        self,
        study: optuna.Study,
        done: Sequence[FrozenTrial],
        names: Sequence[str],
        constrained: bool,
    ) -> tuple[list[dict[str, Any]], np.ndarray]:
        """The completed trials' configurations and their ``n x (k + r)`` targets: every
        objective maximized, then the constraint values (trials without them are skipped)."""
        signs = np.array(
            [1.0 if d == optuna.study.StudyDirection.MAXIMIZE else -1.0 for d in study.directions]
        )
        completed, rows = [], []
        for t in done:
            constraints = trial_constraints(t) if constrained else ()
            if constraints is None:  # told before the function ran (or it failed)
                continue
            completed.append({n: t.params[n] for n in names})
            rows.append([*(signs * np.asarray(t.values, dtype=float)), *constraints])
        if len({len(r) for r in rows}) > 1:
            raise InvalidSettingError(
                "The completed trials carry different numbers of constraint values "
                f"({sorted({len(r) - len(signs) for r in rows})}); set the same constraints in "
                "every trial (trial.set_constraint or constraints_func)."
            )
        width = len(signs) + (len(rows[0]) - len(signs) if rows else 0)
        return completed, np.asarray(rows, dtype=np.float64).reshape(len(rows), width)

    def _strategy(
        self, search_space: dict[str, BaseDistribution], study: optuna.Study, constrained: bool
    ):
        """The strategy of this search space (built, and its sources fitted, on first use)."""
        key = repr((sorted(search_space.items()), constrained))
        if key in self._strategies:
            return self._strategies[key]
        space = space_from_distributions(search_space, self._priors)
        direction = "maximize" if study.directions[0].name == "MAXIMIZE" else "minimize"
        config = self._config
        tasks: list = []
        output_tasks = None
        multi_output = len(study.directions) > 1 or constrained
        if multi_output:
            directions = tuple(
                "maximize" if d.name == "MAXIMIZE" else "minimize" for d in study.directions
            )
            config = dataclasses.replace(
                config,
                directions=directions if len(directions) > 1 else None,
                constrained=constrained,
                reference_point=self._reference_point,
            )
        if config.spec.sources == "any-space":
            model_key = resolve_prior_model(  # one pre-training for every seed
                self._transfer_from, self._prior_model, self._storage, exclude=()
            )
            config = dataclasses.replace(config, prior_model=model_key)
        elif self._transfer_from is not None and multi_output:  # sources per output
            output_tasks, _ = resolve_output_sources(
                self._transfer_from,
                space,
                self._storage,
                n_objectives=len(study.directions),
                constrained=constrained,
                exclude=(study.study_name,),
            )
            tasks = output_tasks[0]
        elif self._transfer_from is not None:
            tasks = resolve_sources(
                self._transfer_from,
                space,
                self._storage,
                direction=direction,
                exclude=(study.study_name,),
            )
        belief = UserBelief(space) if config.use_priors else None
        strategy = build_strategy(
            space,
            config,
            storage=self._storage,
            belief=belief,
            meta_tasks=tasks,
            output_tasks=output_tasks,
        )
        self._strategies[key] = strategy
        return strategy

    @property
    def search_space(self) -> SearchSpace | None:
        """The headstart space of the latest model (``None`` before the first relative sample)."""
        if not self._strategies:
            return None
        return list(self._strategies.values())[-1].space


def pruned_values(pruned: Sequence[FrozenTrial], values: np.ndarray, sign: float) -> list[float]:
    """What a pruned trial tells the model (values in the *maximize* convention).

    A pruner stops a trial it expects not to beat the others, so the model must learn that its
    region is poor, or it suggests the same point again and again. Each pruned trial enters as
    its last reported value (Optuna's TPE reads pruned trials that way too) but no better than
    the median completed value (what the median pruner compares with); without a reported value,
    as the worst completed value. An imputed value is a guess, not an observation: the ``i``-th
    sits ``(i + 1) * 1e-9`` of the completed values' range below its level, so that copies of one
    value do not read as a plateau (``prior_mean="auto"`` takes a tie for one).
    """
    median, worst = float(np.median(values)), float(values.min())
    out = []
    for t in pruned:
        if t.intermediate_values:
            last = t.intermediate_values[max(t.intermediate_values)]
            out.append(min(sign * last, median) if np.isfinite(last) else worst)
        else:
            out.append(worst)
    step = 1e-9 * float(np.ptp(values))
    return [v - (i + 1) * step for i, v in enumerate(out)]


def _running_params(trial: FrozenTrial) -> dict[str, Any]:
    """A running trial's suggestion: what it asked so far and what this sampler suggested."""
    params = {}
    stored = trial.system_attrs.get(PARAMS_KEY)
    if stored:
        params.update(json.loads(stored))
    params.update(trial.params)
    return params


__all__ = ["HeadstartSampler"]
