r"""The :class:`Study`: the ask/tell loop over a search space, persisted in a storage.

Create or open one with :func:`headstart.study.create_study` / :func:`~headstart.study.
load_study`. ``ask()`` reserves a trial row, then fills in the strategy's suggestion (see
``docs/ARCHITECTURE.md``, "Path of one suggestion"); ``tell()`` records the result in one
transaction; ``optimize()`` runs the loop, in this process or in worker processes
(:mod:`headstart._parallel`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import itertools
import json
import os
import time
import warnings
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, overload

import numpy as np

from headstart._config import StudyConfig, to_max, worker_heartbeat
from headstart._heartbeat import Heartbeat
from headstart._objectives import (
    check_constraints,
    check_values,
    hypervolume,
    pareto_indices,
)
from headstart._strategy import build_strategy
from headstart._trial import (
    USER_ATTRS_PREFIX,
    Trial,
    UserAttrs,
    check_attrs,
    failure_attrs,
    rows_from,
)
from headstart._trial_cache import TrialCache, params_key
from headstart.exceptions import (
    ConstraintValueError,
    HeadstartWarning,
    InvalidSettingError,
    InvalidValueError,
    MultiObjectiveError,
    NoCompletedTrialsError,
    ReferencePointError,
    SearchSpaceError,
    StorageError,
    TrialAlreadyFinishedError,
    UnknownTrialError,
)
from headstart.pibo import JointDensity, UserBelief
from headstart.space import SearchSpace
from headstart.storage import TrialRecord, TrialState, get_storage

if TYPE_CHECKING:
    from headstart.storage.base import BaseStorage

# Re-suggestions when concurrent workers took the same configuration, before a duplicate is
# accepted (a tiny space may hold no unseen point): this many, plus two per other unfinished
# trial (each may hold a point we collide with). After MODEL_RETRIES the re-suggestions are
# random draws, which cost nothing, so they are allowed many more.
_DUPLICATE_RETRIES = 10
_RANDOM_DRAWS = 200
_RESERVATIONS = 3  # reserved trials an ask may lose to stale-trial sweeps before it gives up


class _NoConstraints(ConstraintValueError):
    """A constrained study's ``optimize`` has no way to get constraint values."""


class Study:
    """A named optimisation run. Create one with :func:`create_study` or :func:`load_study`."""

    def __init__(
        self,
        storage: BaseStorage,
        study_id: int,
        prior_density: JointDensity | None = None,
        *,
        heartbeat_interval: float | None = None,
        grace_period: float | None = None,
        constraints_func: Callable[[dict[str, Any]], Sequence[float]] | None = None,
    ) -> None:
        self._storage = storage
        record = storage.get_study_by_id(study_id)
        self._id = record.study_id
        self.name: str = record.name
        self.direction: str = record.direction
        self.space = SearchSpace.from_json(record.space)
        self.config = StudyConfig.from_json(record.settings)
        self.directions: tuple[str, ...] = self.config.directions or (self.direction,)
        """One direction per objective (``(direction,)`` for a single-objective study)."""
        if constraints_func is not None and not self.config.constrained:
            raise InvalidSettingError(
                f"Study {self.name!r} declared no constraints; a constraints function has "
                "nothing to record (create the study with constraints=...)."
            )
        if constraints_func is not None and not callable(constraints_func):
            raise InvalidSettingError(
                f"constraints must be True or a function of the parameters; got "
                f"{constraints_func!r}."
            )
        self._constraints_func = constraints_func
        if heartbeat_interval is not None or grace_period is not None:  # this process only
            self.config = dataclasses.replace(
                self.config,
                heartbeat_interval=heartbeat_interval or self.config.heartbeat_interval,
                grace_period=grace_period or self.config.grace_period,
            ).check_heartbeat()
        self._heartbeats: dict[int, Heartbeat] = {}
        self._stop_requested = False
        self._check_transfer = True  # optimize() warns once when the sources mislead
        self._trial_cache = TrialCache(storage, self._id)
        if self.config.prior_density and prior_density is None:
            warnings.warn(
                f"Study {self.name!r} was created with a prior_density, which is not stored; "
                "pass prior_density=... to load_study to keep using it.",
                HeadstartWarning,
                stacklevel=3,
            )
        self._belief = UserBelief(self.space, prior_density) if self.config.use_priors else None
        self._strategy = build_strategy(
            self.space,
            self.config,
            storage=storage,
            belief=self._belief,
            # the creation time tells apart a study that reuses a deleted one's id
            state_key=f"surrogate-state/{self._id}/{record.created_at.isoformat()}",
        )

    def _trial(self, record: TrialRecord) -> Trial:
        return Trial._from_record(record, self._storage)

    def __repr__(self) -> str:
        return f"Study(name={self.name!r}, direction={self.direction!r}, storage={self._storage.url!r})"

    @property
    def storage(self) -> BaseStorage:
        return self._storage

    @property
    def space_history(self) -> list[dict[str, Any]]:
        """The study's earlier search spaces, oldest first (``{"space": SearchSpace,
        "replaced_at": ISO time}``): each one a later ``create_study(..., load_if_exists=True)``
        widened."""
        record = self._storage.get_study_by_id(self._id)
        return [
            {"space": SearchSpace.from_json(h["space"]), "replaced_at": h["replaced_at"]}
            for h in record.space_history
        ]

    @property
    def settings(self) -> dict[str, Any]:
        """The study's configuration as stored (:meth:`StudyConfig.to_json`)."""
        return self.config.to_json()

    @property
    def kernel_expression(self) -> str | None:
        """The searched or given GP kernel (``kernel="auto"`` or an expression), else ``None``.

        Before this session's first suggestion it is the kernel of the latest asked trial.
        """
        current = self._strategy.kernel_expression
        if current is not None or (self.config.options or {}).get("kernel") != "auto":
            return current
        for record in reversed(self._storage.get_trials(self._id)):
            if "kernel" in record.user_attrs:
                return record.user_attrs["kernel"]
        return None

    @property
    def n_initial(self) -> int:
        """Size of the initial (Sobol) design; imported trials count toward it."""
        return self._strategy.n_initial

    # --- ask / tell ------------------------------------------------------------------------------
    def _to_max(self, value: float) -> float:
        return -value if self.direction == "minimize" else value

    @overload
    def ask(self) -> Trial: ...

    @overload
    def ask(self, n: int) -> list[Trial]: ...

    def ask(self, n: int | None = None) -> Trial | list[Trial]:
        """Create a running trial with the next configuration to evaluate (``n`` of them).

        Enqueued configurations come first (oldest first); then the initial design; then the
        model's suggestion. The trial's row is *reserved* first (its number assigned by the
        storage in one transaction), and the suggestion is seeded by that number and sees every
        other running trial, so workers asking at the same moment get different design points
        and random draws. Filling in the configuration refuses an exact duplicate of another
        trial's (one transaction); the suggestion is then redone with that trial as pending.

        Args:
            n: Return a batch of ``n`` distinct configurations to evaluate at once (a list).
                They are chosen greedily on one model fit: each sees the ones before it (and
                other workers' running trials) as pending fantasies at the posterior mean
                (Kriging believer, Ginsbourger et al. 2010), with every method, transfer and
                piBO included.
        """
        if n is None:
            return self._ask_one()
        if isinstance(n, bool) or not isinstance(n, int) or n < 1:
            raise InvalidSettingError(f"n must be an integer >= 1 (a batch size); got {n!r}.")
        with self._strategy.batch():
            return [self._ask_one() for _ in range(n)]

    def _ask_one(self) -> Trial:
        t0 = time.perf_counter()
        beats = self.config.heartbeat_interval is not None
        if beats:  # fail the trials of workers that stopped beating (their configs free again)
            self._storage.fail_stale_trials(
                self._id, self.config.stale_after, reenqueue=self.config.reenqueue_stale
            )
        _, unfinished = self._trial_cache.refresh()
        if any(r.state == TrialState.WAITING for r in unfinished):
            claimed = self._storage.claim_waiting_trial(self._id, heartbeat=beats)
            if claimed is not None:  # atomic: one worker gets it
                self._start_heartbeat(claimed.trial_id)
                return self._trial(claimed)
        for _ in range(_RESERVATIONS):
            reserved = self._storage.create_trial(
                self._id, state=TrialState.RUNNING, params={}, source="ask", heartbeat=beats
            )
            self._start_heartbeat(reserved.trial_id)  # beats while the suggestion is computed
            try:
                return self._fill(reserved, t0)
            except TrialAlreadyFinishedError:
                # failed by another worker's stale-trial sweep while we computed (a beat held up
                # longer than the grace period): never hand it out; reserve a new trial
                self._stop_heartbeat(reserved.trial_id)
            except BaseException:
                self._stop_heartbeat(reserved.trial_id)
                with contextlib.suppress(TrialAlreadyFinishedError):  # swept meanwhile
                    self._storage.finish_trial(
                        reserved.trial_id, state=TrialState.FAILED, value=None
                    )
                raise
        raise StorageError(
            f"Study {self.name!r}: {_RESERVATIONS} reserved trials in a row were failed as stale "
            "while their suggestions were computed. Raise grace_period (now "
            f"{self.config.stale_after:g} s) well above heartbeat_interval."
        )

    def _start_heartbeat(self, trial_id: int) -> None:
        if self.config.heartbeat_interval is not None:
            self._heartbeats[trial_id] = Heartbeat(
                self._storage, trial_id, self.config.heartbeat_interval
            )

    def _stop_heartbeat(self, trial_id: int) -> None:
        heartbeat = self._heartbeats.pop(trial_id, None)
        if heartbeat is not None:
            heartbeat.stop()

    def _fill(self, reserved: TrialRecord, t0: float) -> Trial:
        refused: list[dict[str, Any]] = []  # taken by concurrent workers in the meantime
        for attempt in itertools.count():
            finished, unfinished = self._trial_cache.refresh()
            done = [] if not self._strategy.spec.model_based else finished  # random needs none
            done = [r for r in done if r.state == TrialState.COMPLETE and r.params]
            running = [r.params for r in unfinished if r.state == TrialState.RUNNING and r.params]
            others = sum(  # other workers' trials, reserved ones included
                r.state == TrialState.RUNNING and r.trial_id != reserved.trial_id
                for r in unfinished
            )
            design_index = 0
            if len(done) < self._strategy.n_initial:  # the Sobol index of this trial
                design_index = sum(
                    1
                    for r in (*finished, *unfinished)
                    if r.params and r.source == "ask" and r.number < reserved.number
                )
            if self.config.multi_output:
                done = [r for r in done if not self.config.constrained or r.constraints]
            params = self._strategy.suggest(
                [r.params for r in done],
                self._model_values(done),
                design_index=design_index,
                trial_number=reserved.number,
                pending=running + refused,
                retry=attempt,
                diversify=others > 0,
            )
            params = self.space.validate(params)
            attrs: dict[str, Any] = {"seconds_suggest": time.perf_counter() - t0}
            kernel = self._strategy.kernel_expression
            if kernel is not None:
                attrs["kernel"] = kernel
            draws = _RANDOM_DRAWS if others else 0  # random re-draws only run concurrently
            unique = attempt < _DUPLICATE_RETRIES + 2 * others + draws
            key = params_key(params)
            seen = key in self._trial_cache.finished_keys or key in map(params_key, running)
            if not (unique and seen) and self._storage.set_trial_params(
                reserved.trial_id,
                params,
                user_attrs=attrs,
                unique=unique,
                after_number=self._trial_cache.max_number,
                recheck_ids=[r.trial_id for r in unfinished],  # may have got params since
            ):  # the stored row, without reading it back (JSON-parsed as a read would be)
                filled = dataclasses.replace(
                    reserved, params=json.loads(key), user_attrs=json.loads(params_key(attrs))
                )
                return self._trial(filled)
            refused.append(params)
        raise AssertionError("unreachable")  # pragma: no cover - itertools.count never ends

    def _model_values(self, records: Sequence[TrialRecord]) -> list[float] | np.ndarray:
        """The strategy's targets: the maximized value per trial, or (several objectives or
        constraints) an ``n x (k + r)`` array of the maximized objectives, then the constraint
        values."""
        if not self.config.multi_output:
            return [self._to_max(r.value) for r in records]
        k = len(self.directions)
        rows = [
            [*to_max(r.values or (r.value,), self.directions), *(r.constraints or ())]
            for r in records
        ]
        width = k + (len(rows[0]) - k if rows else 0)
        return np.asarray(rows, dtype=np.float64).reshape(len(rows), width)

    def _record_for(self, trial: Trial | int) -> TrialRecord:
        if isinstance(trial, Trial):
            try:
                record = self._storage.get_trial(trial.trial_id)
            except UnknownTrialError:
                record = None
            if record is None or record.study_id != self._id:
                raise UnknownTrialError(
                    f"Trial {trial.number} does not belong to study {self.name!r}; tell each trial "
                    "to the study that asked it."
                )
            return record
        if isinstance(trial, bool) or not isinstance(trial, int):
            raise UnknownTrialError(f"Expected a Trial or a trial number; got {trial!r}.")
        for record in self._storage.get_trials(self._id):
            if record.number == trial:
                return record
        raise UnknownTrialError(f"Study {self.name!r} has no trial number {trial}.")

    def tell(
        self,
        trial: Trial | int,
        value: Any = None,
        *,
        failed: bool = False,
        constraints: Sequence[float] | None = None,
    ) -> Trial:
        """Record the result of a trial (one transaction).

        Args:
            trial: The trial returned by :meth:`ask`, or its number.
            value: The objective value, a finite real number; for a multi-objective study a
                list of them, one per objective in the order of ``directions`` (omit it with
                ``failed=True``).
            failed: Mark the evaluation as failed; the model ignores failed trials.
            constraints: A constrained study's constraint values, each satisfied when ``<= 0``
                (Optuna's convention); an infeasible trial is complete, and the model learns
                where the constraints bite.

        Raises:
            InvalidValueError: NaN, inf or a non-number (the trial stays running, nothing written).
            ObjectiveCountError: another number of values than the study's objectives.
            ConstraintValueError: constraints for a study that declared none, none (or another
                count than before, or a NaN) for one that did.
            UnknownTrialError: the trial does not belong to this study.
            TrialAlreadyFinishedError: the trial was told before.
        """
        return self._tell(trial, value, failed=failed, constraints=constraints)

    def _tell(
        self,
        trial: Trial | int,
        value: Any = None,
        *,
        failed: bool = False,
        user_attrs: dict[str, Any] | None = None,
        constraints: Sequence[float] | None = None,
    ) -> Trial:
        record = self._record_for(trial)
        if failed and value is not None:
            raise InvalidValueError("Pass either a value or failed=True, not both.")
        state = TrialState.FAILED if failed else TrialState.COMPLETE
        values, checked_constraints = None, None
        if not failed:  # a bad value changes nothing
            values = check_values(value, self.directions)
            checked_constraints = check_constraints(
                constraints, self.config.constrained, self._constraint_count()
            )
        elif constraints is not None:
            raise ConstraintValueError("A failed trial has no constraint values; drop them.")
        from headstart._parallel import stop_signal_held

        with stop_signal_held():  # a worker told to stop finishes this write first
            self._stop_heartbeat(record.trial_id)
            finished = self._storage.finish_trial(
                record.trial_id,
                state=state,
                value=None if values is None else values[0],
                user_attrs=user_attrs,
                values=values if values is not None and len(values) > 1 else None,
                constraints=checked_constraints,
            )
        return self._trial(finished)

    def _constraint_count(self) -> int | None:
        """How many constraint values the study's trials carry (``None``: none told yet)."""
        if not self.config.constrained:
            return None
        finished, _ = self._trial_cache.refresh()
        counts = {len(r.constraints) for r in finished if r.constraints}
        if counts:
            return next(iter(counts))
        from_sources = (self.config.transfer or {}).get("n_constraints")  # the sources' count
        return from_sources or None

    def optimize(
        self,
        func: Callable[[dict[str, Any]], float],
        n_trials: int,
        *,
        timeout: float | None = None,
        callbacks: Sequence[Callable[[Study, Trial], None]] = (),
        n_workers: int | Any = 1,
        show_progress: bool = True,
        catch: tuple[type[BaseException], ...] = (),
    ) -> Study:
        """Run ``n_trials`` evaluations of ``func(params) -> value``.

        An evaluation that raises is recorded as a failed trial (with its traceback) and the
        exception is re-raised, as in Optuna, unless it is one of ``catch``: then a warning is
        issued and the study carries on. A NaN, inf or non-number value is a failed trial with a
        warning. Completed trials are committed one by one, so an interrupted run loses at most
        the trial in flight. A callback may call :meth:`stop` to end the run early.

        Args:
            func: The objective; receives the configuration dict.
            n_trials: Number of evaluations to run now.
            timeout: Start no new trial after this many seconds (trials in flight finish).
            callbacks: Called as ``callback(study, trial)`` after each finished trial (in the
                worker processes when ``n_workers > 1``).
            n_workers: Local worker processes evaluating at once (forked from a preloaded fork
                server), or a ``dask.distributed.Client`` / scheduler address to run one worker
                loop per Dask worker. Workers share the study through its storage, which must be
                a file or a server reachable from them, and ``func`` must be a module-level
                function.
            show_progress: Show a rich progress bar (trials, best value) on stderr.
            catch: Exception types recorded as failed trials (with a warning) instead of
                stopping the run, e.g. ``catch=(ValueError,)``; default none: every exception
                of ``func`` is re-raised after its trial is recorded as failed.
        """
        if isinstance(n_trials, bool) or not isinstance(n_trials, int) or n_trials < 0:
            raise InvalidSettingError(f"n_trials must be a non-negative integer; got {n_trials!r}.")
        if timeout is not None and (
            isinstance(timeout, bool) or not isinstance(timeout, int | float) or not timeout > 0
        ):
            raise InvalidSettingError(f"timeout must be a number of seconds > 0; got {timeout!r}.")
        local = isinstance(n_workers, int) and not isinstance(n_workers, bool)
        if (local and n_workers < 1) or isinstance(n_workers, bool | float):
            raise InvalidSettingError(f"n_workers must be an integer >= 1; got {n_workers!r}.")
        if (not local or n_workers > 1) and self._constraints_func is not None:
            raise InvalidSettingError(
                "optimize(n_workers > 1) runs the objective in other processes, which do not get "
                "this study's constraints function; return {'value': ..., 'constraints': [...]} "
                "from the objective instead."
            )
        if not local or n_workers > 1:
            from headstart._parallel import optimize_in_processes

            optimize_in_processes(
                self,
                func,
                n_trials,
                n_workers=n_workers,
                timeout=timeout,
                catch=catch,
                callbacks=callbacks,
                show_progress=show_progress,
                worker=optimize_worker,
                prefit=self._strategy.prefit,
            )
            self._warn_if_transfer_hurts()
            return self
        from headstart._progress import TrialProgress

        deadline = None if timeout is None else time.monotonic() + timeout
        self._stop_requested = False
        with TrialProgress(n_trials, self, enabled=show_progress) as progress:
            for _ in range(n_trials):
                if deadline is not None and time.monotonic() >= deadline:
                    break
                if self._stop_requested:
                    break
                trial = self._evaluate(func, catch)
                for callback in callbacks:
                    callback(self, trial)
                progress.advance(
                    trial.value if trial.feasible else None, trial.user_attrs.get("seconds_suggest")
                )
        self._stop_requested = False
        self._warn_if_transfer_hurts()
        return self

    def _warn_if_transfer_hurts(self) -> None:
        """After ``optimize``: warn (once per Study object) when the sources predict the
        study's own later trials worse than no sources (:meth:`transfer_check`)."""
        if not self._check_transfer:
            return
        check = self.transfer_check()
        if check is not None and check["hurting"]:
            self._check_transfer = False
            warnings.warn(
                f"The sources seem to mislead study {self.name!r}: predicting its trials "
                f"{check['n_fit'] + 1}-{check['n_fit'] + check['n_held_out']} from the first "
                f"{check['n_fit']}, the transfer model scores {check['with_sources']:.2f} nats "
                f"per trial and the same model without sources {check['without_sources']:.2f}. "
                "Consider method='gp' (or fewer, closer sources); study.transfer_report() "
                "shows the weights.",
                HeadstartWarning,
                stacklevel=3,
            )

    def stop(self) -> None:
        """End the running :meth:`optimize` after the current trial (call it from a callback).

        With ``n_workers > 1`` callbacks run in the worker processes, so ``stop()`` ends the
        worker whose callback called it.
        """
        self._stop_requested = True

    def _evaluate(
        self, func: Callable[[dict[str, Any]], float], catch: tuple[type[BaseException], ...]
    ) -> Trial:
        trial = self.ask()
        try:
            raw = func(trial.params)
        except catch as e:
            warnings.warn(f"Trial {trial.number} failed: {e!r}", HeadstartWarning, stacklevel=3)
            return self._tell(trial, failed=True, user_attrs=failure_attrs(e))
        except BaseException as e:
            self._tell(trial, failed=True, user_attrs=failure_attrs(e))
            raise
        try:
            value, constraints = self._split_result(raw, trial.params)
        except _NoConstraints as e:  # a setup error, not a bad evaluation: stop the run
            self._tell(trial, failed=True, user_attrs=failure_attrs(e))
            raise ConstraintValueError(str(e)) from None
        except BaseException as e:  # the constraints function raised
            self._tell(trial, failed=True, user_attrs=failure_attrs(e))
            raise
        try:  # tell checks values and constraints before it writes anything
            return self._tell(trial, value, constraints=constraints)
        except InvalidValueError as e:  # as Optuna: a NaN / non-number is a failed trial
            warnings.warn(f"Trial {trial.number} failed: {e}", HeadstartWarning, stacklevel=3)
            return self._tell(trial, failed=True, user_attrs=failure_attrs(e))

    def _split_result(self, raw: Any, params: dict[str, Any]) -> tuple[Any, Any]:
        """``(value(s), constraints)`` of what the objective returned: a constrained study's
        objective may return ``{"value": ..., "constraints": [...]}`` (``"values"`` for several
        objectives); else its constraints come from the study's constraints function."""
        if isinstance(raw, Mapping) and ("constraints" in raw or "values" in raw or "value" in raw):
            value = raw.get("values", raw.get("value"))
            constraints = raw.get("constraints")
        else:
            value, constraints = raw, None
        if constraints is None and self._constraints_func is not None:
            constraints = self._constraints_func(params)
        if constraints is None and self.config.constrained:
            raise _NoConstraints(
                f"Study {self.name!r} is constrained, and neither the objective nor a "
                "constraints function gave constraint values: return {'value': ..., "
                "'constraints': [...]} from the objective, or pass constraints=fn(params) to "
                "create_study / load_study."
            )
        return value, constraints

    # --- user attributes ---------------------------------------------------------------------------
    @property
    def user_attrs(self) -> dict[str, Any]:
        """The study's user attributes as stored (read-only; see :meth:`set_user_attr`)."""
        return UserAttrs(self._storage.get_study_by_id(self._id).user_attrs)

    def set_user_attr(self, key: str, value: Any) -> None:
        """Store a study attribute (any JSON value), e.g. the dataset or code version tuned."""
        self._storage.set_user_attr(key, value, study_id=self._id)

    # --- user-provided configurations ------------------------------------------------------------
    def enqueue(self, params: Mapping[str, Any], *, skip_if_exists: bool = False) -> Trial:
        """Schedule a configuration of your choice; the next :meth:`ask` returns it.

        With ``skip_if_exists``, a configuration some trial already has (enqueued, running,
        complete or failed) is not enqueued again; that trial is returned instead.
        """
        params = self.space.validate(params)
        if skip_if_exists:
            for record in self._storage.get_trials(self._id):
                if record.params == params:
                    return self._trial(record)
        record = self._storage.create_trial(
            self._id, state=TrialState.WAITING, params=params, source="enqueue"
        )
        return self._trial(record)

    def add_trials(self, trials: Iterable[Any] | str | os.PathLike) -> list[Trial]:
        """Import finished evaluations; they count toward the initial design, not on top of it.

        Args:
            trials: ``(params, value)`` pairs; dicts ``{"params": ..., "value": ...}`` (optionally
                ``"state"``: ``"complete"`` or ``"failed"``, and ``"user_attrs"``); a pandas
                DataFrame with a ``value`` column and one column per parameter (``x`` or
                ``params_x``, so a :meth:`trials_dataframe` export, headstart's or Optuna's,
                imports as it is, with its ``state`` and ``user_attrs_<key>`` columns); or the
                path of a ``.csv`` file of such rows or of a ``.json`` study export
                (``headstart studies export NAME --json FILE``, :meth:`export`). Columns that
                are neither parameters nor export metadata are refused.

        Complete and failed trials are imported with their user attributes (a failed one keeps
        its configuration, which the model then ignores). Running, waiting and pruned rows carry
        no result: they are skipped, with a :class:`~headstart.HeadstartWarning` that counts
        them. All rows are validated before anything is written; the import is one transaction.

        Raises:
            InvalidSettingError: a JSON export of a study with the other direction.
            ObjectiveCountError, ConstraintValueError: a row without one value per objective,
                or without the study's constraint values (several objectives: dicts with
                ``"values"`` and ``"constraints"``, or ``values_<i>`` / ``constraints_<i>``
                columns, as :meth:`export` and :meth:`trials_dataframe` write them).
        """
        if isinstance(trials, str | os.PathLike):
            trials = self._read_trials_file(trials)
        read = rows_from(trials, list(self.space))
        prepared = []
        expected = self._constraint_count()
        for i, row in enumerate(read.rows):
            try:
                values = None if row.failed else check_values(row.value, self.directions)
                constraints = None
                if not row.failed:
                    constraints = check_constraints(
                        row.constraints, self.config.constrained, expected
                    )
                    expected = None if constraints is None else len(constraints)
                prepared.append(
                    {
                        "state": TrialState.FAILED if row.failed else TrialState.COMPLETE,
                        "params": self.space.validate(row.params),
                        "value": None if values is None else values[0],
                        "values": values if values is not None and len(values) > 1 else None,
                        "constraints": constraints,
                        "source": "import",
                        "user_attrs": check_attrs(row.user_attrs),
                    }
                )
            except (InvalidValueError, SearchSpaceError, ValueError) as e:
                raise type(e)(f"Row {i} of add_trials: {e}") from e
        if read.skipped:
            warnings.warn(
                f"add_trials skipped {read.skipped_text()} of {len(read.rows) + sum(read.skipped.values())}"
                ": only finished trials (complete or failed) are imported.",
                HeadstartWarning,
                stacklevel=2,
            )
        records = self._storage.create_trials(self._id, prepared)
        return [self._trial(r) for r in records]

    def _read_trials_file(self, path: str | os.PathLike) -> Any:
        from headstart.sources._export import read_export

        suffix = str(path).lower().rsplit(".", 1)[-1]
        if suffix == "json":
            doc = read_export(path)
            if doc["direction"] != self.direction:
                raise InvalidSettingError(
                    f"{str(path)!r} holds a {doc['direction']} study and {self.name!r} is "
                    f"{self.direction}d: its values would be read backwards. Use it as a "
                    "transfer source (transfer_from=[path]) instead, which flips them."
                )
            if list(doc.get("directions") or [doc["direction"]]) != list(self.directions):
                raise InvalidSettingError(
                    f"{str(path)!r} holds a study with directions "
                    f"{doc.get('directions') or [doc['direction']]} and {self.name!r} has "
                    f"{list(self.directions)}: its values would be misread."
                )
            return doc["trials"]
        if suffix == "csv":
            from headstart.sources._tables import read_csv_file

            return read_csv_file(path)
        raise InvalidSettingError(
            f"add_trials reads .csv and .json files; got {str(path)!r}. Pass pairs, dicts or a "
            "DataFrame for anything else."
        )

    def export(self, path: str | os.PathLike | None = None) -> dict[str, Any]:
        """The study as one JSON document (and written to ``path`` when given): what
        ``add_trials``, ``transfer_from`` and ``headstart import`` read back
        (:mod:`headstart.sources._export`)."""
        import json

        from headstart.sources._export import export_document

        trials = self.trials  # read once: workers may add trials meanwhile
        doc = export_document(self.name, self.direction, self.space, trials, self.user_attrs)
        if self.config.multi_output:  # every objective's value and the constraints too
            if len(self.directions) > 1:
                doc["directions"] = list(self.directions)
            for row, trial in zip(doc["trials"], trials, strict=True):
                row["values"] = None if trial.values is None else list(trial.values)
                row["constraints"] = None if trial.constraints is None else list(trial.constraints)
        if path is not None:
            with open(path, "w", encoding="utf-8") as f:
                json.dump(doc, f, indent=1, default=str)
        return doc

    # --- results -----------------------------------------------------------------------------------
    @property
    def trials(self) -> list[Trial]:
        """All trials, ordered by number."""
        return [self._trial(r) for r in self._storage.get_trials(self._id)]

    @property
    def best_trial(self) -> Trial:
        """The completed trial with the best value (in the study's direction); in a constrained
        study, the best *feasible* one.

        Raises:
            MultiObjectiveError: the study has several objectives (see :attr:`best_trials`).
            NoCompletedTrialsError: no completed (feasible) trial yet.
        """
        if len(self.directions) > 1:
            raise MultiObjectiveError(
                f"Study {self.name!r} has {len(self.directions)} objectives, so no single best "
                "trial; study.best_trials is its Pareto front."
            )
        done = self._feasible_complete()
        best = max(done, key=lambda r: self._to_max(r.value))
        return self._trial(best)

    def _feasible_complete(self) -> list[TrialRecord]:
        """The completed trials whose constraints all hold (all of them when unconstrained)."""
        done = self._storage.get_trials(self._id, states=[TrialState.COMPLETE])
        if not done:
            raise NoCompletedTrialsError(
                f"Study {self.name!r} has no completed trial yet; tell a value first."
            )
        feasible = [r for r in done if self._trial(r).feasible]
        if not feasible:
            raise NoCompletedTrialsError(
                f"Study {self.name!r} has {len(done)} completed trial(s), none feasible (every "
                "constraint <= 0) yet; keep optimizing, or loosen the constraints."
            )
        return feasible

    @property
    def best_trials(self) -> list[Trial]:
        """The Pareto front: the completed, feasible trials no other one dominates (at least
        as good in every objective and better in one), ordered by number. Trials with equal
        values are all kept; infeasible and failed trials never are (Optuna's rules). Empty
        when nothing is complete and feasible yet. A single-objective study's front is every
        trial tied at the best value.
        """
        try:
            done = self._feasible_complete()
        except NoCompletedTrialsError:
            return []
        Y = np.array([to_max(self._trial(r).values, self.directions) for r in done])
        return [self._trial(done[i]) for i in pareto_indices(Y)]

    def hypervolume(self, reference: Sequence[float] | None = None) -> float:
        """Hypervolume of the Pareto front (:attr:`best_trials`) against ``reference``: the
        volume of the objective space that the front dominates and that is better than
        ``reference`` in every objective (in each objective's direction). 0 when no feasible
        trial is strictly better than the reference.

        Args:
            reference: One value per objective; ``None``: the study's ``reference_point``.

        Raises:
            ReferencePointError: ``reference`` has another length than the objectives, or is
                ``None`` in a study created without ``reference_point``.
        """
        if len(self.directions) == 1:
            raise MultiObjectiveError(
                f"Study {self.name!r} has one objective; its best is study.best_value, not a "
                "hypervolume."
            )
        if reference is None:
            reference = self.config.reference_point
            if reference is None:
                raise ReferencePointError(
                    f"Study {self.name!r} has no reference_point: pass one, "
                    "study.hypervolume([r1, r2, ...]) (one value per objective)."
                )
        front = [t.values for t in self.best_trials]
        return hypervolume(
            np.array(front).reshape(-1, len(self.directions)), reference, self.directions
        )

    @property
    def best_value(self) -> float:
        return self.best_trial.value

    @property
    def best_params(self) -> dict[str, Any]:
        return self.best_trial.params

    def prior_weight(self) -> float:
        r"""piBO's current exponent ``beta / n``: how strongly the next suggestion follows the priors.

        ``n`` counts BO steps after the initial design (``n = 1`` at the first), so the weight
        decays as ``beta, beta / 2, beta / 3, ...``; 0 when the study has no priors, was created
        with ``use_priors=False`` or ``prior_strength=0``.
        """
        records = self._storage.get_trials(self._id)
        n = sum(1 for r in records if r.state in (TrialState.COMPLETE, TrialState.RUNNING))
        return self._strategy.prior_exponent(n)

    def _single_output(self, what: str) -> None:
        """Refuse a single-model view of a study with several objectives or constraints."""
        if self.config.multi_output:
            raise InvalidSettingError(
                f"{what} shows one model's acquisition; study {self.name!r} has several "
                "objectives or constraints (one model each). Use plots.plot_pareto_front, "
                "plot_hypervolume or plot_slice."
            )

    def acquisition_slice(
        self, param: str, param2: str | None = None, *, points: int = 101
    ) -> dict[str, Any]:
        r"""The prior, the plain acquisition and the piBO acquisition on a 1-D or 2-D slice.

        The slice varies ``param`` (and ``param2``) over its range with every other parameter at
        the best trial's value; the model is the one the next suggestion would use.

        Returns:
            A dict with ``"params"`` (the varied names), ``"grid"`` (a list of value arrays, one
            per varied parameter), ``"prior"`` (``log pi``), ``"acquisition"``, ``"pibo"`` (both in
            the criterion's units: log for LogEI and shifted UCB; ``None`` when piBO is off),
            ``"kind"`` and ``"exponent"`` (``beta / n``); 2-D slices hold ``points x points``
            arrays.

        Raises:
            NoCompletedTrialsError: nothing to fit yet.
            InvalidSettingError: an unknown or fixed parameter, or ``method="random"``.
        """
        self._single_output("acquisition_slice")
        names = [param] if param2 is None else [param, param2]
        free = [c.name for c in self.space.columns]
        for name in names:
            if name not in free:
                raise InvalidSettingError(
                    f"Cannot slice along {name!r}: choose one of the free parameters {free}."
                )
        if len(set(names)) != len(names):
            raise InvalidSettingError("param and param2 must differ.")
        done = [t for t in self.trials if t.state == "complete"]
        if not done:
            raise NoCompletedTrialsError(
                f"Study {self.name!r} has no completed trial; the acquisition needs data."
            )
        plain, pibo = self._strategy.criteria(
            [t.params for t in done], [self._to_max(t.value) for t in done]
        )
        base = self.space.encode([self.best_params])[0]
        axes = []
        for name in names:
            column = self.space.columns[free.index(name)]
            axes.append(column.grid if column.grid is not None else np.linspace(0, 1, points))
        mesh = np.meshgrid(*axes, indexing="ij")
        U = np.repeat(base[None, :], mesh[0].size, axis=0)
        for name, values in zip(names, mesh, strict=True):
            U[:, free.index(name)] = values.ravel()
        decoded = self.space.decode(U)
        shape = mesh[0].shape
        belief = self._strategy.belief
        log_prior = belief.log_pdf(U) if belief is not None else self.space.prior_log_pdf(U)
        return {
            "params": names,
            "grid": [np.array([c[n] for c in decoded], dtype=object).reshape(shape) for n in names],
            "prior": log_prior.reshape(shape),
            "acquisition": plain.value(U).reshape(shape),
            "pibo": None if pibo is None else pibo.value(U).reshape(shape),
            "kind": plain.kind,
            "exponent": 0.0 if pibo is None or pibo.prior is None else pibo.prior.exponent,
        }

    @property
    def belief(self) -> UserBelief | None:
        """The user's belief piBO uses (``None`` when piBO is off)."""
        return self._strategy.belief

    def transfer_report(self):
        """What the study took from its sources, given the completed trials (transfer methods).

        Each source's learned weight (ScaML-GP, RGPE, StackGP, multi-task GP), the shared basis
        and head (ABLR / ABRAC), the pre-trained lengthscale priors beside the fitted
        lengthscales (MPHD), or the configurations evaluated first (warm start): what the
        method's own report hook (:class:`headstart._methods.MethodSpec`) says.

        Returns:
            A :class:`headstart.transfer.TransferReport`.

        Raises:
            InvalidSettingError: the study does not use earlier tasks (``method="gp"`` /
                ``"random"``).
        """
        from headstart.transfer import TransferReport

        self._single_output("transfer_report")
        if not self.config.spec.uses_sources:
            raise InvalidSettingError(
                f"Study {self.name!r} uses method={self.config.method!r}, which learns nothing "
                "from earlier tasks; create it with transfer_from=... and a transfer method "
                "(method='scaml', 'mphd', ...)."
            )
        done = self._storage.get_trials(self._id, states=[TrialState.COMPLETE])
        fields = self._strategy.report(
            [r.params for r in done], [self._to_max(r.value) for r in done]
        )
        return TransferReport(
            study=self.name,
            method=self.config.method,
            n_trials=len(done),
            check=self.transfer_check(),
            **fields,
        )

    def transfer_check(self) -> dict[str, Any] | None:
        """Are the sources helping? The transfer model against the same study without sources,
        each conditioned on the first half of the completed trials, scoring the second half by
        predictive log-likelihood (:mod:`headstart._transfer_check`); ``None`` for studies
        without sources, a warm start, or fewer than 8 completed trials."""
        from headstart._transfer_check import transfer_check

        spec = self.config.spec
        if not spec.uses_sources or spec.warm_start or self.config.multi_output:
            return None  # (several outputs: one model each; not checked yet)
        done = self._storage.get_trials(self._id, states=[TrialState.COMPLETE])
        X = self.space.encode([r.params for r in done])
        y = np.array([self._to_max(r.value) for r in done], dtype=np.float64)
        strategy = self._strategy
        return transfer_check(self.space, self.config, strategy.meta_tasks, self._storage, X, y)

    def trials_dataframe(self):
        """A pandas DataFrame with one row per trial: ``number``, ``state``, ``value``,
        ``source``, one ``params_<name>`` column per parameter, ``datetime_start``,
        ``datetime_complete`` and one ``user_attrs_<key>`` column per user attribute (Optuna's
        layout, so :meth:`add_trials` and Optuna tools read it back). Several objectives:
        ``values_0``, ``values_1``, ... instead of ``value`` (Optuna's names); constraints: one
        ``constraints_<i>`` column each."""
        import pandas as pd

        trials = self.trials
        keys = sorted({k for t in trials for k in t.user_attrs})
        rows = []
        n_obj = len(self.directions)
        value_columns = ["value"] if n_obj == 1 else [f"values_{i}" for i in range(n_obj)]
        n_constraints = max((len(t.constraints or ()) for t in trials), default=0)
        constraint_columns = [f"constraints_{i}" for i in range(n_constraints)]
        for t in trials:
            row = {"number": t.number, "state": t.state, "value": t.value, "source": t.source}
            if n_obj > 1:
                del row["value"]
                row.update(zip(value_columns, t.values or [None] * n_obj, strict=True))
            row.update(zip(constraint_columns, t.constraints or (), strict=False))
            row.update({f"params_{k}": v for k, v in t.params.items()})
            row["datetime_start"] = t.created_at
            row["datetime_complete"] = t.finished_at
            row.update({f"{USER_ATTRS_PREFIX}{k}": t.user_attrs.get(k) for k in keys})
            rows.append(row)
        columns = ["number", "state", *value_columns, *constraint_columns, "source"]
        columns += [f"params_{k}" for k in self.space]
        columns += ["datetime_start", "datetime_complete"]
        columns += [f"{USER_ATTRS_PREFIX}{k}" for k in keys]
        frame = pd.DataFrame(rows, columns=columns)
        for k in keys:  # as stored: an int stays an int beside a trial without the attribute
            frame[f"{USER_ATTRS_PREFIX}{k}"] = pd.Series(
                [t.user_attrs.get(k) for t in trials], dtype=object
            )
        return frame


def optimize_worker(
    url: str,
    name: str,
    func: Callable,
    n_trials: int,
    timeout: float | None,
    catch: tuple,
    callbacks: Sequence[Callable],
) -> int:
    """One worker process of ``optimize(n_workers=k)``: load the study, run its share (with
    :data:`~headstart._config.WORKER_HEARTBEAT` when the study sets no heartbeat)."""
    store = get_storage(url)
    record = store.get_study(name)
    study = Study(store, record.study_id, **worker_heartbeat(record.settings))
    study._check_transfer = False  # the parent checks once the workers are done
    study.optimize(
        func, n_trials, timeout=timeout, callbacks=callbacks, catch=catch, show_progress=False
    )
    return n_trials


__all__ = ["Study", "optimize_worker"]
