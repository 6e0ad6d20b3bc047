r"""Studies: the ask/tell loop over a search space, persisted in a storage.

A :class:`Study` is a named optimisation run. ``ask()`` returns a :class:`Trial` whose ``params``
the user evaluates; ``tell(trial, value)`` records the result in one transaction. Everything is in
the storage, so a study can be resumed from another process with :func:`load_study`.

Example:
    >>> import headstart as hs
    >>> space = hs.SearchSpace({"x": hs.Float(-2.0, 2.0)})
    >>> study = hs.create_study("doc", space, storage=None, method="random", seed=0)
    >>> for _ in range(5):
    ...     trial = study.ask()
    ...     _ = study.tell(trial, trial.params["x"] ** 2)
    >>> len(study.trials)
    5
"""

from __future__ import annotations

import contextlib
import dataclasses
import warnings
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from headstart._config import DIRECTIONS, StudyConfig
from headstart._methods import MethodOptions, check_source_arguments, default_method, merge_options
from headstart._objectives import check_reference
from headstart._study import Study
from headstart._trial import Trial, check_value
from headstart.exceptions import (
    DuplicatedStudyError,
    EmptySourceError,
    HeadstartWarning,
    InvalidSettingError,
    UnknownStudyError,
)
from headstart.pibo import DEFAULT_CANDIDATE_SHARE, JointDensity, UserBelief, pibo_active
from headstart.sources import resolve_prior_model, resolve_sources
from headstart.space import SearchSpace, check_text, describe_difference, widening_problem
from headstart.storage import DEFAULT_STORAGE_URL, get_storage
from headstart.storage.meta_data import save_meta_data

if TYPE_CHECKING:
    from headstart.storage.base import BaseStorage

MAX_NAME_LENGTH = 512  # the studies.name column (storage/schema.py)
_SETTINGS = (  # create_study's own keywords: a misspelt one is named in the error
    "direction",
    "storage",
    "method",
    "seed",
    "n_initial",
    "budget",
    "acquisition",
    "deterministic",
    "plateau_rule",
    "stall_rule",
    "transfer_from",
    "prior_model",
    "ucb_beta",
    "pi_margin",
    "first_trial",
    "prior_strength",
    "use_priors",
    "prior_density",
    "prior_design",
    "prior_candidate_share",
    "heartbeat_interval",
    "grace_period",
    "reenqueue_stale",
    "load_if_exists",
    "options",
)


def _check_same_outputs(record, config: StudyConfig) -> None:
    """A stored study's objectives and constraints are part of what it is: a resume with others
    (even with ``load_if_exists=True``) would read its values wrongly."""
    stored = StudyConfig.from_json(record.settings)
    if stored.directions != config.directions or stored.constrained != config.constrained:

        def describe(c: StudyConfig) -> str:
            objectives = list(c.directions) if c.directions else [record.direction]
            return f"directions {objectives}, {'with' if c.constrained else 'no'} constraints"

        raise DuplicatedStudyError(
            f"Study {record.name!r} already exists with {describe(stored)}; you asked for "
            f"{describe(config)}. Choose another name, or resume it with its own."
        )


def _check_resumable(
    record, store: BaseStorage, space: SearchSpace, direction: str, method: str, widen: bool = False
) -> bool:
    """Raise :class:`DuplicatedStudyError` unless ``create_study`` may resume ``record``.

    Returns whether ``space`` widens the stored space (allowed with ``widen``, i.e.
    ``load_if_exists=True``: bounds moved outward, choices added; :func:`widening_problem`).
    """
    name = record.name
    old_space = SearchSpace.from_json(record.space)
    widens = False
    if old_space != space:
        difference = describe_difference(old_space, space, "the stored study", "this call")
        problem = widening_problem(old_space, space)
        if problem is None and record.settings.get("transfer"):
            problem = "its sources' meta-data were frozen in the stored space's encoding"
        if problem is None and widen:
            widens = True
        elif problem is None:
            raise DuplicatedStudyError(
                f"Study {name!r} already exists in {store.url} with a narrower search space: "
                f"{difference}. To widen the stored space (every trial stays valid), resume it "
                "with load_if_exists=True; or choose another name."
            )
        else:
            raise DuplicatedStudyError(
                f"Study {name!r} already exists in {store.url} with a different search space: "
                f"{difference}. A resumed study may only widen its space (move bounds outward, "
                f"add choices), and here {problem}. Choose another name, or delete the old "
                f"study (headstart studies delete {name})."
            )
    if record.direction != direction:
        raise DuplicatedStudyError(
            f"Study {name!r} already exists with direction={record.direction!r}; you asked for "
            f"{direction!r}. Choose another name or use the stored direction."
        )
    stored = record.settings.get("method", "gp")
    if stored != method:
        raise DuplicatedStudyError(
            f"Study {name!r} already exists with method={stored!r}; you asked for {method!r}. "
            f"Resume it with method={stored!r} (or load_study), or choose another name."
        )
    return widens


def create_study(
    name: str,
    space: SearchSpace,
    *,
    direction: str | None = None,
    directions: Sequence[str] | None = None,
    constraints: bool | Callable[[dict[str, Any]], Sequence[float]] = False,
    reference_point: Sequence[float] | None = None,
    storage: str | BaseStorage | None = DEFAULT_STORAGE_URL,
    method: str | None = None,
    seed: int | None = None,
    n_initial: int | None = None,
    budget: int | None = None,
    acquisition: str | None = None,
    deterministic: bool = False,
    plateau_rule: bool | None = None,
    stall_rule: bool | None = None,
    transfer_from: Any = None,
    prior_model: Any = None,
    ucb_beta: float | None = None,
    pi_margin: float | None = None,
    first_trial: str | None = None,
    prior_strength: float | None = None,
    use_priors: bool = True,
    prior_density: JointDensity | None = None,
    prior_design: bool = True,
    prior_candidate_share: float = DEFAULT_CANDIDATE_SHARE,
    heartbeat_interval: float | None = None,
    grace_period: float | None = None,
    reenqueue_stale: bool = False,
    load_if_exists: bool | None = None,
    options: Mapping[str, Any] | MethodOptions | None = None,
    **method_options: Any,
) -> Study:
    r"""Create a study, or resume the one with this name if its space and direction match.

    Args:
        name: Unique name of the study in the storage.
        space: The :class:`~headstart.space.SearchSpace` to optimise over.
        direction: ``"minimize"`` (default) or ``"maximize"``.
        directions: Several objectives, one direction each (``["minimize", "maximize"]``);
            instead of ``direction``. Trials are told a list of values; ``study.best_trials``
            is the Pareto front and ``study.hypervolume(reference)`` its hypervolume; each
            objective gets its own GP and suggestions maximize log EHVI (methods ``"gp"`` and
            ``"random"``).
        constraints: ``True`` when trials are told constraint values
            (``study.tell(trial, value, constraints=[c1, ...])``, feasible when every
            ``c <= 0``, Optuna's convention), or a function ``params -> [c1, ...]`` that
            ``optimize`` calls after each evaluation (not stored: pass it to
            :func:`load_study` again). Each constraint gets its own GP; suggestions multiply
            the acquisition by the probability that all constraints hold, and ``best_trial``
            / ``best_trials`` count feasible trials only.
        reference_point: With ``directions``, the point the front will be judged against, one
            value per objective in its own units (BoTorch's ``ref_point``; Ax's objective
            thresholds): log EHVI maximizes the hypervolume above it, and
            ``study.hypervolume()`` uses it. ``None``: inferred at each suggestion from the
            observed and predicted fronts (their nadir minus 10% of their range), which
            values a front's extremes little when the judging reference lies far beyond it.
        storage: A SQLAlchemy URL (default ``sqlite:///headstart.db``), a Storage, or ``None`` for
            an in-memory study.
        method: ``"gp"`` (GP-BO), ``"random"``, or a transfer method that also learns from
            ``transfer_from``: ``"scaml"`` (ScaML-GP, Tighineanu et al. 2024), ``"rgpe"``,
            ``"stackgp"`` or ``"mtgp"`` (baselines); or ``"mphd"``: a GP whose hyperparameter
            priors were pre-trained on earlier studies of *any* search space (Fan et al. 2024).
            Default: ``"scaml"`` when ``transfer_from`` is given, ``"mphd"`` with
            ``prior_model``, else ``"gp"``.
        seed: Seed of every suggestion (drawn at random and stored when ``None``).
        n_initial: Size of the Sobol initial design (default ``min(2d + 1, 10, budget / 5)``;
            ``min(10, budget / 5)`` with several objectives or constraints).
        budget: Planned number of trials (sets the default ``n_initial``).
        acquisition: ``"logei"``, ``"ei"``, ``"pi"``, ``"ucb"`` or ``"ts"``; default ``"logei"``,
            ``"ei"`` when priors are active (piBO; measured to recover faster from a wrong prior);
            the ScaML-GP paper's setting is ``"ucb"`` with ``first_trial="acquisition"``.
        deterministic: Set ``True`` when evaluating the same configuration twice gives the same
            value (simulations, test functions): the GP then interpolates instead of fitting a
            noise level, which converges faster on such objectives.
        plateau_rule: Whether two trials with exactly the same value keep the search away from
            both, up to their distance (at most 0.25 of the unit cube), so that it stops
            re-evaluating one flat patch (a table or a pool of configurations scored at its
            nearest entry). ``None``: the method's default, on for ``"scaml"`` (chosen on issue
            31's selection families and confirmed on held-out HPO-B tasks: final regret 1.20 ->
            1.01 x plain GP-BO's, geometric mean over 14 families, 10 seeds) and off otherwise
            (on the cross-validation scores of ``benchmarks/real_objectives.py``, whose best
            values often tie, it cost GP-BO 0.553 -> 0.528 in mean normalized score at 50
            trials). ``docs/benchmarks/transfer_protocol.md`` has the numbers.
        stall_rule: Whether the search leaves the incumbent's neighbourhood for one trial when
            the latest three trials all sat within 0.1 lengthscales of it (refinement that
            stalled, e.g. on a local minimum at the box's edge). ``None``: the method's default.
        transfer_from: Earlier tasks on the same search space for a transfer method: study
            names, ``"all"`` (every study in the storage with this space), MetaTasks, pandas
            DataFrames or CSV paths (see :func:`headstart.sources.resolve_sources`). The
            meta-data are copied into the storage when the study is created. For
            ``method="mphd"``: study names or ``"all"`` on any search spaces (or
            :class:`headstart.mphd.Domain` objects); a prior is pre-trained on them once and
            cached in the storage under the data's hash.
        prior_model: ``method="mphd"`` only, instead of ``transfer_from``: a pre-trained
            :class:`headstart.mphd.PriorModel`, the path of its JSON file, or the name it was
            saved under in this storage (:func:`headstart.sources.save_prior_model`).
        ucb_beta: UCB's ``beta`` in ``mu + sqrt(beta) sigma``; default 2, and 9 for transfer
            methods (ScaML-GP's ``beta^(1/2) = 3``).
        pi_margin: With ``acquisition="pi"``: the probability of improving on the incumbent by
            at least this margin, in standard deviations of the observed values (default 0;
            MPHD's paper uses PI with a margin, Fan et al. 2024, Sec. 5).
        first_trial: Transfer methods, before the first observation of this task:
            ``"candidates"`` (of the sources' own best configurations, one per source, the one
            the model expects best), ``"lcb"`` (the maximizer of the prior's ``mu - sigma``),
            ``"mean"`` (the maximizer of the sources' prior mean) or ``"acquisition"`` (UCB
            with ``ucb_beta`` on the sources' prior, as in the ScaML-GP paper); ``"lcb-winner"``
            (``"lcb"``, then the source winner the model rates best after that observation).
            Default: the method's (see ``docs/benchmarks/transfer_defaults.md`` and
            ``docs/benchmarks/transfer_protocol.md`` for the measurements).
        prior_strength: piBO's ``beta`` (Hvarfner et al. 2022): when parameters carry priors
            (``hs.Normal``, ``hs.Beta``, categorical weights) or ``prior_density`` is given, every
            model-based suggestion maximizes ``acquisition(x) * pi(x)^(beta / n)``, ``n = 1, 2,
            ...`` counting steps after the initial design. Default ``budget / 10``, or 10
            without a budget; larger trusts the belief longer; 0 ignores the priors.
        use_priors: ``False`` ignores the priors (plain BO on the same space).
        prior_density: Optional joint belief ``p(config) -> float >= 0`` on decoded
            configurations (a dict), multiplied with the per-parameter priors; for correlated
            beliefs. Not stored: pass it again to :func:`load_study`.
        prior_design: With priors, the initial design is the belief's mode followed by draws
            from the belief (``False``: Sobol points).
        prior_candidate_share: Share of the acquisition search's screening candidates drawn
            from the belief (default 0.5), so a narrow prior is not missed.
        heartbeat_interval: Seconds between heartbeats of each running trial (``None``: no
            heartbeats). A trial whose worker stopped beating (``kill -9``, a lost machine) is
            failed by the next ``ask`` of any worker once ``grace_period`` passed.
        grace_period: Seconds without a heartbeat before that (default ``2 x interval``).
        reenqueue_stale: Enqueue such a trial's configuration again, once.
        load_if_exists: What to do when a study of this name exists. ``None`` (default):
            resume it if its space, direction and settings are the ones given (a script run
            again), else raise. ``True`` (Optuna's): resume it with its *stored* settings; the
            settings given that differ are named in a warning and not stored. ``True`` also
            lets ``space`` *widen* the stored space (numeric bounds moved outward, choices
            added; same parameters, types and log scaling; not for a study with transfer
            sources): the new space is stored and the old one kept in
            ``study.space_history``. ``False``: raise.
        options: The method's options, a mapping or its options object
            (``headstart.extend``); each may also be passed as a keyword. ``method="gp"``:
            ``kernel`` (``"matern"``, ``"auto"`` for BOSOT kernel search -- numeric
            parameters -- or an expression such as ``"SE[0] * SE[1] + LIN[0]"``, ``[i]`` the
            i-th parameter), ``kernel_search`` (``every``, ``budget``, ``space``, ``restarts``,
            ``ea_steps``) and ``hyperprior`` (``"optuna"`` or ``"lognormal"``); ``"scaml"``:
            ``fit_factr``, ``restart_every``, ``restart_growth``, ``prune_threshold``,
            ``screening_points``; ``"rgpe"``: ``n_samples``; ``"stackgp"``: ``alpha``;
            ``"abrac"``: ``active``, ``truncation``. ``headstart methods`` lists them all.
        **method_options: The same options as keywords (``kernel="auto"``).

    Raises:
        DuplicatedStudyError: a study with this name exists with another space, direction,
            method or (unless ``load_if_exists=True``) settings; or at all, with
            ``load_if_exists=False``. A stored study's settings are never rewritten.
    """
    direction, directions = _check_directions(direction, directions)
    _check_call(name, space, direction, load_if_exists)
    if reference_point is not None and directions is not None:
        reference_point = check_reference(reference_point, len(directions))
    if not (isinstance(constraints, bool) or callable(constraints)):
        raise InvalidSettingError(
            f"constraints must be True / False or a function of the parameters; got "
            f"{constraints!r}."
        )
    if method is None:
        method = default_method(transfer_from, prior_model)
    config = StudyConfig(
        method=method,
        seed=int(np.random.default_rng().integers(2**31 - 1)) if seed is None else seed,
        n_initial=n_initial,
        budget=budget,
        acquisition=acquisition,
        deterministic=deterministic,
        plateau_rule=plateau_rule,
        stall_rule=stall_rule,
        ucb_beta=ucb_beta,
        pi_margin=pi_margin,
        first_trial=first_trial,
        prior_strength=prior_strength,
        use_priors=use_priors,
        prior_density=prior_density is not None,
        prior_design=prior_design,
        prior_candidate_share=prior_candidate_share,
        options=merge_options(method, options, method_options, settings=_SETTINGS),
        heartbeat_interval=heartbeat_interval,
        grace_period=grace_period,
        reenqueue_stale=reenqueue_stale,
        directions=directions,
        constrained=bool(constraints),
        reference_point=reference_point,
    ).check_heartbeat()
    belief = UserBelief(space, prior_density) if use_priors else None
    config = config.resolved(priors=pibo_active(belief, config.prior_strength))
    config = config.with_options_checked([c.kind for c in space.columns])  # fail here, not at ask
    if belief is not None:
        belief.validate()  # a broken density fails here, not mid-run
    spec = check_source_arguments(method, transfer_from, prior_model)
    store = get_storage(storage)
    with contextlib.suppress(UnknownStudyError):  # refuse a bad resume before storing anything
        existing = store.get_study(name)
        if load_if_exists is False:
            raise DuplicatedStudyError(
                f"Study {name!r} already exists in {store.url}. Open it with load_study({name!r}) "
                "(or load_if_exists=True), or choose another name."
            )
        _check_resumable(existing, store, space, direction, method, widen=load_if_exists is True)
        _check_same_outputs(existing, config)
    config = _with_sources(config, spec, space, store, name, direction, transfer_from, prior_model)
    record = _store_or_resume(store, name, space, direction, config, seed, load_if_exists)
    func = constraints if callable(constraints) else None
    study = Study(store, record.study_id, prior_density, constraints_func=func)
    if spec.prefit_at_creation:  # train now (cached in the storage), not inside a later ask
        study._strategy.prefit()
    return study


def _check_directions(direction: Any, directions: Any) -> tuple[str, tuple[str, ...] | None]:
    """``(direction, directions)``: one objective's direction, or several objectives' (the
    stored ``direction`` is then the first one's)."""
    if directions is None:
        return ("minimize" if direction is None else direction), None
    if direction is not None:
        raise InvalidSettingError(
            "Pass direction= (one objective) or directions= (several), not both."
        )
    if isinstance(directions, str) or not isinstance(directions, Sequence):
        raise InvalidSettingError(
            f"directions must be a list such as ['minimize', 'maximize']; got {directions!r}."
        )
    if len(directions) == 1:  # Optuna's directions=[d] is a single-objective study
        return directions[0], None
    config_check = StudyConfig(directions=tuple(directions))  # the same checks as stored ones
    return config_check.directions[0], config_check.directions


def _check_call(name: Any, space: Any, direction: Any, load_if_exists: Any) -> None:
    """Refuse a bad name, space, direction or ``load_if_exists`` (nothing is stored yet)."""
    check_text("Study name", name, InvalidSettingError)
    if not isinstance(load_if_exists, bool) and load_if_exists is not None:
        raise InvalidSettingError(
            f"load_if_exists must be True, False or None; got {load_if_exists!r}."
        )
    if not isinstance(space, SearchSpace):
        raise InvalidSettingError(
            f"space must be a hs.SearchSpace; got {type(space).__name__}. Wrap your dict: "
            "hs.SearchSpace({...})."
        )
    if direction not in DIRECTIONS:
        raise InvalidSettingError(f"direction must be 'minimize' or 'maximize'; got {direction!r}.")
    if len(name) > MAX_NAME_LENGTH:
        raise InvalidSettingError(
            f"Study names hold at most {MAX_NAME_LENGTH} characters (the storage's column); "
            f"this one has {len(name)}. Choose a shorter name."
        )


def _with_sources(
    config: StudyConfig,
    spec,
    space: SearchSpace,
    store: BaseStorage,
    name: str,
    direction: str,
    transfer_from: Any,
    prior_model: Any,
) -> StudyConfig:
    """``config`` with where the sources' frozen meta-data (or the MPHD prior) are stored."""
    if spec.sources == "any-space":
        # the prior depends on the sources' data, not on the study's seed: one pre-training
        # serves every seed (resolve_prior_model's fixed pre-training seed)
        key = resolve_prior_model(transfer_from, prior_model, store, exclude=(name,))
        return dataclasses.replace(config, prior_model=key)
    if transfer_from is None:
        return config
    if config.multi_output:  # one list of sources' meta-tasks per objective and constraint
        return dataclasses.replace(
            config, transfer=_save_output_sources(config, spec, space, store, name, transfer_from)
        )
    tasks = resolve_sources(transfer_from, space, store, direction=direction, exclude=(name,))
    if spec.check_sources is not None:
        spec.check_sources(tasks)
    return dataclasses.replace(config, transfer=save_meta_data(store, tasks))


def _save_output_sources(config, spec, space, store, name: str, transfer_from: Any) -> dict:
    """Freeze a multi-output study's sources, one meta-data entry per output (``None`` for an
    output no source covers, which then gets a plain GP)."""
    from headstart.sources._outputs import resolve_output_sources

    per_output, n_constraints = resolve_output_sources(
        transfer_from,
        space,
        store,
        n_objectives=config.n_objectives,
        constrained=config.constrained,
        exclude=(name,),
    )
    if not per_output[0]:
        raise EmptySourceError(
            f"transfer_from={transfer_from!r} gave no source with completed trials; pass earlier "
            "studies with the same objectives, or leave transfer_from out."
        )
    entries = []
    for tasks in per_output:
        if tasks and spec.check_sources is not None:
            spec.check_sources(tasks)
        entries.append(save_meta_data(store, tasks) if tasks else None)
    return {**entries[0], "outputs": entries, "n_constraints": n_constraints}


def _store_or_resume(
    store: BaseStorage,
    name: str,
    space: SearchSpace,
    direction: str,
    config: StudyConfig,
    seed: int | None,
    load_if_exists: bool | None,
):
    """The stored record of the new study, or of the existing one it may resume."""
    settings = config.to_json()
    try:
        return store.create_study(
            name, direction=direction, space=space.to_json(), settings=settings
        )
    except DuplicatedStudyError:  # it exists (or another process created it just now): resume
        if load_if_exists is False:
            raise
    record = store.get_study(name)
    if _check_resumable(
        record, store, space, direction, config.method, widen=load_if_exists is True
    ):
        record = store.widen_study_space(record.study_id, space.to_json())
    if seed is None:  # resuming without an explicit seed keeps the stored one
        settings["seed"] = record.settings.get("seed", settings["seed"])
    _check_settings(record, settings, keep_stored=bool(load_if_exists))
    return record


def _check_settings(record, settings: dict, *, keep_stored: bool) -> None:
    """Refuse (or, with ``keep_stored``, warn about) settings that differ from the stored ones."""
    stored = StudyConfig.from_json(record.settings).to_json()  # older formats, as stored now
    diffs = [
        f"{k}={stored.get(k)!r} stored, {settings.get(k)!r} given"
        for k in sorted(set(stored) | set(settings))
        if stored.get(k) != settings.get(k)
    ]
    if not diffs:
        return
    if keep_stored:
        warnings.warn(
            f"Study {record.name!r} resumes with its stored settings; these given ones are "
            f"ignored: {'; '.join(diffs)}.",
            HeadstartWarning,
            stacklevel=3,
        )
        return
    raise DuplicatedStudyError(
        f"Study {record.name!r} already exists with other settings ({'; '.join(diffs)}). Pass "
        "the stored settings, resume it as stored with load_if_exists=True (or load_study), or "
        "choose another name."
    )


def load_study(
    name: str,
    storage: str | BaseStorage | None = DEFAULT_STORAGE_URL,
    *,
    prior_density: JointDensity | None = None,
    heartbeat_interval: float | None = None,
    grace_period: float | None = None,
    constraints: Callable[[dict[str, Any]], Sequence[float]] | None = None,
) -> Study:
    """Open an existing study by name (raises :class:`UnknownStudyError` if there is none).

    Args:
        name: The study's name.
        storage: As in :func:`create_study`.
        prior_density: The joint belief the study was created with, if any (callables are not
            stored).
        heartbeat_interval, grace_period: Override the stored heartbeat settings in this
            process (see :func:`create_study`).
        constraints: The constraints function the study was created with, if any (functions
            are not stored).
    """
    store = get_storage(storage, create=False)
    return Study(
        store,
        store.get_study(name).study_id,
        prior_density,
        heartbeat_interval=heartbeat_interval,
        grace_period=grace_period,
        constraints_func=constraints,
    )


def delete_study(name: str, storage: str | BaseStorage | None = DEFAULT_STORAGE_URL) -> None:
    """Delete a study and all its trials."""
    get_storage(storage, create=False).delete_study(name)


__all__ = ["Study", "Trial", "check_value", "create_study", "delete_study", "load_study"]
