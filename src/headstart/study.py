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
import math
import time
import traceback
import warnings
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any, overload

import numpy as np

from headstart._config import DIRECTIONS, StudyConfig
from headstart._heartbeat import Heartbeat
from headstart._methods import get_method, transfer_method_names
from headstart._strategy import Strategy
from headstart._trial_cache import TrialCache, params_key
from headstart.exceptions import (
    DuplicatedStudyError,
    HeadstartWarning,
    InvalidParamsError,
    InvalidSettingError,
    InvalidValueError,
    NoCompletedTrialsError,
    SearchSpaceError,
    UnknownStudyError,
    UnknownTrialError,
)
from headstart.pibo import DEFAULT_CANDIDATE_SHARE, JointDensity, UserBelief, pibo_active
from headstart.sources import resolve_sources
from headstart.space import SearchSpace
from headstart.storage import DEFAULT_STORAGE_URL, TrialRecord, TrialState, get_storage
from headstart.storage.meta_data import load_meta_data, save_meta_data

if TYPE_CHECKING:
    from headstart.storage.sql import Storage

MAX_NAME_LENGTH = 512  # the studies.name column (storage/schema.py)
_DUPLICATE_RETRIES = 10  # re-suggestions when concurrent workers took the same configuration


@dataclass(frozen=True)
class Trial:
    """One evaluation of the objective: its configuration and, once told, its result."""

    number: int
    params: dict[str, Any]
    state: str = "running"
    value: float | None = None
    source: str = "ask"
    created_at: datetime | None = None
    finished_at: datetime | None = None
    user_attrs: dict[str, Any] = field(default_factory=dict)
    trial_id: int = -1

    @classmethod
    def _from_record(cls, r: TrialRecord) -> Trial:
        return cls(
            number=r.number,
            params=dict(r.params),
            state=TrialState(r.state).value,
            value=r.value,
            source=r.source,
            created_at=r.created_at,
            finished_at=r.finished_at,
            user_attrs=dict(r.user_attrs),
            trial_id=r.trial_id,
        )


def check_value(value: Any) -> float:
    """Validate an objective value: a finite real number (bools and strings are refused)."""
    if isinstance(value, np.ndarray) and value.size == 1:
        value = value.item()
    if hasattr(value, "item") and not isinstance(value, int | float):  # torch / numpy scalars
        value = value.item()
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise InvalidValueError(
            f"The objective value must be a real number; got {value!r} ({type(value).__name__}). "
            "Return a float, or tell the trial with failed=True."
        )
    value = float(value)
    if not math.isfinite(value):
        raise InvalidValueError(
            f"The objective value must be finite; got {value!r}. If the evaluation failed, use "
            "study.tell(trial, failed=True); if it diverged, return a large finite penalty."
        )
    return value


class Study:
    """A named optimisation run. Create one with :func:`create_study` or :func:`load_study`."""

    def __init__(
        self,
        storage: Storage,
        study_id: int,
        prior_density: JointDensity | None = None,
        *,
        heartbeat_interval: float | None = None,
        grace_period: float | None = None,
    ) -> None:
        self._storage = storage
        record = storage.get_study_by_id(study_id)
        self._id = record.study_id
        self.name: str = record.name
        self.direction: str = record.direction
        self.space = SearchSpace.from_json(record.space)
        self.config = StudyConfig.from_json(record.settings)
        if heartbeat_interval is not None or grace_period is not None:  # this process only
            self.config = dataclasses.replace(
                self.config,
                heartbeat_interval=heartbeat_interval or self.config.heartbeat_interval,
                grace_period=grace_period or self.config.grace_period,
            )
        self._heartbeats: dict[int, Heartbeat] = {}
        self._trial_cache = TrialCache(storage, self._id)
        transfer = self.config.transfer
        if self.config.prior_density and prior_density is None:
            warnings.warn(
                f"Study {self.name!r} was created with a prior_density, which is not stored; "
                "pass prior_density=... to load_study to keep using it.",
                HeadstartWarning,
                stacklevel=3,
            )
        self._belief = UserBelief(self.space, prior_density) if self.config.use_priors else None
        self._strategy = Strategy(
            self.space,
            self.config,
            belief=self._belief,
            meta_tasks=load_meta_data(storage, transfer["data_key"]) if transfer else (),
            cache=storage,
            # the creation time tells apart a study that reuses a deleted one's id
            state_key=f"surrogate-state/{self._id}/{record.created_at.isoformat()}",
        )

    def __repr__(self) -> str:
        return f"Study(name={self.name!r}, direction={self.direction!r}, storage={self._storage.url!r})"

    @property
    def storage(self) -> Storage:
        return self._storage

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
        if current is not None or self.config.kernel == "matern":
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
                return self._started(Trial._from_record(claimed))
        reserved = self._storage.create_trial(
            self._id, state=TrialState.RUNNING, params={}, source="ask", heartbeat=beats
        )
        try:
            return self._started(self._fill(reserved, t0))
        except BaseException:
            self._storage.finish_trial(reserved.trial_id, state=TrialState.FAILED, value=None)
            raise

    def _started(self, trial: Trial) -> Trial:
        if self.config.heartbeat_interval is not None:
            self._heartbeats[trial.trial_id] = Heartbeat(
                self._storage, trial.trial_id, self.config.heartbeat_interval
            )
        return trial

    def _fill(self, reserved: TrialRecord, t0: float) -> Trial:
        refused: list[dict[str, Any]] = []  # taken by concurrent workers in the meantime
        for attempt in range(_DUPLICATE_RETRIES + 1):
            finished, unfinished = self._trial_cache.refresh()
            done = [] if not self._strategy.spec.model_based else finished  # random needs none
            done = [r for r in done if r.state == TrialState.COMPLETE and r.params]
            running = [r.params for r in unfinished if r.state == TrialState.RUNNING and r.params]
            design_index = 0
            if len(done) < self._strategy.n_initial:  # the Sobol index of this trial
                design_index = sum(
                    1
                    for r in (*finished, *unfinished)
                    if r.params and r.source == "ask" and r.number < reserved.number
                )
            params = self._strategy.suggest(
                [r.params for r in done],
                [self._to_max(r.value) for r in done],
                design_index=design_index,
                trial_number=reserved.number,
                pending=running + refused,
                retry=attempt,
            )
            params = self.space.validate(params)
            attrs: dict[str, Any] = {"seconds_suggest": time.perf_counter() - t0}
            if self._strategy.kernel_expression is not None:
                attrs["kernel"] = self._strategy.kernel_expression
            unique = attempt < _DUPLICATE_RETRIES  # a tiny space may hold no unseen point
            key = params_key(params)
            seen = key in self._trial_cache.finished_keys or key in map(params_key, running)
            if not (unique and seen) and self._storage.set_trial_params(
                reserved.trial_id,
                params,
                user_attrs=attrs,
                unique=unique,
                after_number=self._trial_cache.max_number,
                recheck_ids=[r.trial_id for r in unfinished],  # may have got params since
            ):
                return Trial._from_record(self._storage.get_trial(reserved.trial_id))
            refused.append(params)
        raise AssertionError("unreachable")  # pragma: no cover

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

    def tell(self, trial: Trial | int, value: Any = None, *, failed: bool = False) -> Trial:
        """Record the result of a trial (one transaction).

        Args:
            trial: The trial returned by :meth:`ask`, or its number.
            value: The objective value, a finite real number (omit it with ``failed=True``).
            failed: Mark the evaluation as failed; the model ignores failed trials.

        Raises:
            InvalidValueError: NaN, inf or a non-number (the trial stays running, nothing written).
            UnknownTrialError: the trial does not belong to this study.
            TrialAlreadyFinishedError: the trial was told before.
        """
        return self._tell(trial, value, failed=failed)

    def _tell(
        self,
        trial: Trial | int,
        value: Any = None,
        *,
        failed: bool = False,
        user_attrs: dict[str, Any] | None = None,
    ) -> Trial:
        record = self._record_for(trial)
        if failed and value is not None:
            raise InvalidValueError("Pass either a value or failed=True, not both.")
        state = TrialState.FAILED if failed else TrialState.COMPLETE
        checked = None if failed else check_value(value)  # a bad value changes nothing
        heartbeat = self._heartbeats.pop(record.trial_id, None)
        if heartbeat is not None:
            heartbeat.stop()
        finished = self._storage.finish_trial(
            record.trial_id, state=state, value=checked, user_attrs=user_attrs
        )
        return Trial._from_record(finished)

    def optimize(
        self,
        func: Callable[[dict[str, Any]], float],
        n_trials: int,
        *,
        timeout: float | None = None,
        callbacks: Sequence[Callable[[Study, Trial], None]] = (),
        n_workers: int | Any = 1,
        show_progress: bool = True,
        catch: tuple[type[BaseException], ...] = (Exception,),
    ) -> Study:
        """Run ``n_trials`` evaluations of ``func(params) -> value``.

        An evaluation that raises one of ``catch`` (or returns NaN, inf or a non-number) is
        recorded as a failed trial with a warning, and the study carries on. Completed trials are
        committed one by one, so an interrupted run loses at most the trial in flight.

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
            catch: Exceptions recorded as failed trials instead of stopping the run.
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
                worker=_optimize_worker,
            )
            return self
        from headstart._progress import TrialProgress

        deadline = None if timeout is None else time.monotonic() + timeout
        with TrialProgress(n_trials, self, enabled=show_progress) as progress:
            for _ in range(n_trials):
                if deadline is not None and time.monotonic() >= deadline:
                    break
                trial = self._evaluate(func, catch)
                for callback in callbacks:
                    callback(self, trial)
                progress.advance(trial.value, trial.user_attrs.get("seconds_suggest"))
        return self

    def _evaluate(
        self, func: Callable[[dict[str, Any]], float], catch: tuple[type[BaseException], ...]
    ) -> Trial:
        trial = self.ask()
        try:
            value = check_value(func(trial.params))
        except catch as e:
            warnings.warn(f"Trial {trial.number} failed: {e!r}", HeadstartWarning, stacklevel=3)
            return self._tell(trial, failed=True, user_attrs=_failure(e))
        except BaseException as e:
            self._tell(trial, failed=True, user_attrs=_failure(e))
            raise
        return self.tell(trial, value)

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
                    return Trial._from_record(record)
        record = self._storage.create_trial(
            self._id, state=TrialState.WAITING, params=params, source="enqueue"
        )
        return Trial._from_record(record)

    def add_trials(self, trials: Iterable[Any]) -> list[Trial]:
        """Import finished evaluations; they count toward the initial design, not on top of it.

        Args:
            trials: ``(params, value)`` pairs, dicts ``{"params": ..., "value": ...}``, or a pandas
                DataFrame with a ``value`` column and one column per parameter (``x`` or
                ``params_x``, so a :meth:`trials_dataframe` export, headstart's or Optuna's,
                imports as it is: rows whose ``state`` is not complete are skipped). Columns
                that are neither parameters nor export metadata are refused.

        All rows are validated before anything is written; the import is one transaction.
        """
        rows = _rows_from(trials, list(self.space))
        prepared = []
        for i, (params, value) in enumerate(rows):
            try:
                prepared.append(
                    {
                        "state": TrialState.COMPLETE,
                        "params": self.space.validate(params),
                        "value": check_value(value),
                        "source": "import",
                    }
                )
            except (InvalidValueError, SearchSpaceError, ValueError) as e:
                raise type(e)(f"Row {i} of add_trials: {e}") from e
        records = self._storage.create_trials(self._id, prepared)
        return [Trial._from_record(r) for r in records]

    # --- results -----------------------------------------------------------------------------------
    @property
    def trials(self) -> list[Trial]:
        """All trials, ordered by number."""
        return [Trial._from_record(r) for r in self._storage.get_trials(self._id)]

    @property
    def best_trial(self) -> Trial:
        """The completed trial with the best value (in the study's direction)."""
        done = self._storage.get_trials(self._id, states=[TrialState.COMPLETE])
        if not done:
            raise NoCompletedTrialsError(
                f"Study {self.name!r} has no completed trial yet; tell a value first."
            )
        best = max(done, key=lambda r: self._to_max(r.value))
        return Trial._from_record(best)

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
        """Each source's learned weight given the completed trials (transfer methods only).

        Returns:
            A :class:`headstart.transfer.TransferReport`.

        Raises:
            InvalidSettingError: the study does not use a transfer method.
        """
        from headstart.transfer import TransferReport

        if not self.config.spec.uses_sources:
            raise InvalidSettingError(
                f"Study {self.name!r} uses method={self.config.method!r}, which learns "
                "nothing from earlier tasks; create it with method='scaml' and transfer_from=... ."
            )
        done = self._storage.get_trials(self._id, states=[TrialState.COMPLETE])
        surrogate = self._strategy.conditioned_surrogate(
            [r.params for r in done], [self._to_max(r.value) for r in done]
        )
        diagnostics = surrogate.diagnostics()
        return TransferReport(
            study=self.name,
            method=self.config.method,
            n_trials=len(done),
            weights=diagnostics["weights"],
            residual_variance=diagnostics.get("residual_variance"),
        )

    def trials_dataframe(self):
        """A pandas DataFrame with one row per trial and one ``params_<name>`` column per parameter."""
        import pandas as pd

        rows = []
        for t in self.trials:
            row = {"number": t.number, "state": t.state, "value": t.value, "source": t.source}
            row.update({f"params_{k}": v for k, v in t.params.items()})
            row["datetime_start"] = t.created_at
            row["datetime_complete"] = t.finished_at
            row["seconds_suggest"] = t.user_attrs.get("seconds_suggest")
            rows.append(row)
        columns = ["number", "state", "value", "source"]
        columns += [f"params_{k}" for k in self.space]
        columns += ["datetime_start", "datetime_complete", "seconds_suggest"]
        return pd.DataFrame(rows, columns=columns)


def _failure(error: BaseException) -> dict[str, str]:
    """What a failed evaluation stores: the error and its traceback (as text)."""
    trace = "".join(traceback.format_exception(type(error), error, error.__traceback__))
    return {"fail_reason": "exception", "error": repr(error), "traceback": trace[-8000:]}


def _optimize_worker(
    url: str,
    name: str,
    func: Callable,
    n_trials: int,
    timeout: float | None,
    catch: tuple,
    callbacks: Sequence[Callable],
) -> int:
    """One worker process of ``optimize(n_workers=k)``: load the study, run its share."""
    load_study(name, url).optimize(
        func, n_trials, timeout=timeout, callbacks=callbacks, catch=catch, show_progress=False
    )
    return n_trials


def _rows_from(trials: Any, names: list[str]) -> list[tuple[Mapping, Any]]:
    if hasattr(trials, "to_dict") and hasattr(trials, "columns"):  # a DataFrame
        return _rows_from_frame(trials, names)
    rows = []
    for item in trials:
        if isinstance(item, Mapping) and "params" in item:
            rows.append((item["params"], item.get("value")))
        elif isinstance(item, tuple | list) and len(item) == 2:
            rows.append((item[0], item[1]))
        else:
            raise InvalidValueError(
                "add_trials expects (params, value) pairs, {'params': ..., 'value': ...} dicts or "
                f"a DataFrame; got {item!r}."
            )
    return rows


# Columns of a trials_dataframe() export (headstart's or Optuna's) that are not parameters.
_EXPORT_COLUMNS = {"number", "source", "datetime_start", "datetime_complete", "duration"}
_EXPORT_PREFIXES = ("user_attrs_", "system_attrs_", "seconds_")


def _rows_from_frame(frame: Any, names: list[str]) -> list[tuple[Mapping, Any]]:
    """Rows of a DataFrame with a ``value`` column and one column per parameter.

    Parameters may be named ``x`` or ``params_x`` (a ``trials_dataframe()`` export, headstart's
    or Optuna's); with a ``state`` column only complete rows are imported. Any other column is
    refused: a misspelt parameter must not vanish silently.
    """
    columns = [str(c) for c in frame.columns]
    if "value" not in columns:
        raise InvalidValueError(f"add_trials DataFrame needs a 'value' column; it has {columns}.")
    source = {}
    for name in names:
        found = [c for c in (name, f"params_{name}") if c in columns]
        if len(found) == 2:
            raise InvalidParamsError(
                f"add_trials DataFrame has both {name!r} and 'params_{name}'; keep one of them."
            )
        if found:
            source[name] = found[0]
    known = set(source.values()) | _EXPORT_COLUMNS | {"value", "state"}
    unknown = [c for c in columns if c not in known and not c.startswith(_EXPORT_PREFIXES)]
    if unknown:
        raise InvalidParamsError(
            f"add_trials DataFrame has column(s) {unknown} that are not parameters of this study "
            f"({names}); rename them to a parameter (or 'params_<name>') or drop them."
        )
    rows = []
    for r in frame.to_dict("records"):
        if "state" in r and str(r["state"]).lower() not in ("complete", "trialstate.complete"):
            continue  # failed / running / pruned rows of an export carry no value to import
        rows.append(({name: r[col] for name, col in source.items()}, r["value"]))
    return rows


def _describe_space_difference(old: SearchSpace, new: SearchSpace) -> str:
    old_j, new_j = old.to_json()["params"], new.to_json()["params"]
    diffs = [f"{n!r} is new" for n in new_j if n not in old_j]
    diffs += [f"{n!r} is missing" for n in old_j if n not in new_j]
    diffs += [
        f"{n!r} was {old_j[n]} and is now {new_j[n]}"
        for n in new_j
        if n in old_j and old_j[n] != new_j[n]
    ]
    return "; ".join(diffs) or "parameter order differs"


def _check_resumable(
    record, store: Storage, space: SearchSpace, direction: str, method: str
) -> None:
    """Raise :class:`DuplicatedStudyError` unless ``create_study`` may resume ``record``."""
    name = record.name
    old_space = SearchSpace.from_json(record.space)
    if old_space != space:
        raise DuplicatedStudyError(
            f"Study {name!r} already exists in {store.url} with a different search space: "
            f"{_describe_space_difference(old_space, space)}. Choose another name, or delete "
            f"the old study (headstart studies delete {name})."
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


def create_study(
    name: str,
    space: SearchSpace,
    *,
    direction: str = "minimize",
    storage: str | Storage | None = DEFAULT_STORAGE_URL,
    method: str = "gp",
    seed: int | None = None,
    n_initial: int | None = None,
    budget: int | None = None,
    acquisition: str | None = None,
    deterministic: bool = False,
    transfer_from: Any = None,
    ucb_beta: float | None = None,
    prior_strength: float | None = None,
    use_priors: bool = True,
    prior_density: JointDensity | None = None,
    prior_design: bool = True,
    prior_candidate_share: float = DEFAULT_CANDIDATE_SHARE,
    kernel: str = "matern",
    kernel_search: dict | None = None,
    heartbeat_interval: float | None = None,
    grace_period: float | None = None,
    reenqueue_stale: bool = False,
) -> Study:
    r"""Create a study, or resume the one with this name if its space and direction match.

    Args:
        name: Unique name of the study in the storage.
        space: The :class:`~headstart.space.SearchSpace` to optimise over.
        direction: ``"minimize"`` or ``"maximize"``.
        storage: A SQLAlchemy URL (default ``sqlite:///headstart.db``), a Storage, or ``None`` for
            an in-memory study.
        method: ``"gp"`` (GP-BO), ``"random"``, or a transfer method that also learns from
            ``transfer_from``: ``"scaml"`` (ScaML-GP, Tighineanu et al. 2024), ``"rgpe"``,
            ``"stackgp"`` or ``"mtgp"`` (baselines).
        seed: Seed of every suggestion (drawn at random and stored when ``None``).
        n_initial: Size of the Sobol initial design (default ``min(2d + 1, budget / 5)``).
        budget: Planned number of trials (sets the default ``n_initial``).
        acquisition: ``"logei"``, ``"ei"``, ``"pi"``, ``"ucb"`` or ``"ts"``; default ``"logei"``,
            ``"ei"`` when priors are active (piBO; measured to recover faster from a wrong prior),
            and ``"ucb"`` for transfer methods (as in the ScaML-GP paper).
        deterministic: Set ``True`` when evaluating the same configuration twice gives the same
            value (simulations, test functions): the GP then interpolates instead of fitting a
            noise level, which converges faster on such objectives.
        transfer_from: Earlier tasks on the same search space for a transfer method: study
            names, ``"all"`` (every study in the storage with this space), MetaTasks, pandas
            DataFrames or CSV paths (see :func:`headstart.sources.resolve_sources`). The
            meta-data are copied into the storage when the study is created.
        ucb_beta: UCB's ``beta`` in ``mu + sqrt(beta) sigma``; default 2, and 9 for transfer
            methods (ScaML-GP's ``beta^(1/2) = 3``).
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
        kernel: The GP's kernel (``method="gp"``, numeric parameters): ``"matern"`` (default),
            ``"auto"`` (BOSOT kernel search on the study's data, re-run every
            ``kernel_search["every"]`` observations; see :mod:`headstart.kernels`) or a fixed
            expression such as ``"SE[0] * SE[1] + LIN[0]"``, ``[i]`` being the i-th parameter.
        kernel_search: Options of ``kernel="auto"``: ``every`` (10), ``budget`` (kernels scored
            per search, 20), ``space`` (``"se-rq"`` or ``"full"``), ``restarts`` (3),
            ``ea_steps`` (6).
        heartbeat_interval: Seconds between heartbeats of each running trial (``None``: no
            heartbeats). A trial whose worker stopped beating (``kill -9``, a lost machine) is
            failed by the next ``ask`` of any worker once ``grace_period`` passed.
        grace_period: Seconds without a heartbeat before that (default ``2 x interval``).
        reenqueue_stale: Enqueue such a trial's configuration again, once.

    Raises:
        DuplicatedStudyError: a study with this name exists with another space or direction.
    """
    if not isinstance(name, str) or not name.strip():
        raise InvalidSettingError(f"Study name must be a non-empty string; got {name!r}.")
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
    drawn_seed = int(np.random.default_rng().integers(2**31 - 1)) if seed is None else seed
    config = StudyConfig(
        method=method,
        seed=drawn_seed,
        n_initial=n_initial,
        budget=budget,
        acquisition=acquisition,
        deterministic=deterministic,
        ucb_beta=ucb_beta,
        prior_strength=prior_strength,
        use_priors=use_priors,
        prior_density=prior_density is not None,
        prior_design=prior_design,
        prior_candidate_share=prior_candidate_share,
        kernel=kernel,
        kernel_search=kernel_search,
        heartbeat_interval=heartbeat_interval,
        grace_period=grace_period,
        reenqueue_stale=reenqueue_stale,
    )
    belief = UserBelief(space, prior_density) if use_priors else None
    config = config.resolved(priors=pibo_active(belief, config.prior_strength))
    config = config.with_kernel_checked([c.kind for c in space.columns])  # fail here, not at ask()
    if belief is not None:
        belief.validate()  # a broken density fails here, not mid-run
    spec = get_method(method)
    store = get_storage(storage)
    with contextlib.suppress(UnknownStudyError):  # refuse a bad resume before storing anything
        _check_resumable(store.get_study(name), store, space, direction, method)
    if transfer_from is not None:
        if not spec.uses_sources:
            raise InvalidSettingError(
                f"transfer_from needs a transfer method; method={method!r} ignores earlier tasks. "
                f"Use method='scaml' (or one of {transfer_method_names()})."
            )
        tasks = resolve_sources(transfer_from, space, store, direction=direction, exclude=(name,))
        config = dataclasses.replace(config, transfer=save_meta_data(store, tasks))
    elif spec.uses_sources:
        raise InvalidSettingError(
            f"method={method!r} learns from earlier tasks; pass transfer_from=... (study names, "
            "'all', a DataFrame or MetaTasks), or use method='gp'."
        )
    settings = config.to_json()
    try:
        record = store.create_study(
            name, direction=direction, space=space.to_json(), settings=settings
        )
    except DuplicatedStudyError:  # it exists (or another process created it just now): resume
        record = store.get_study(name)
        _check_resumable(record, store, space, direction, method)
        if seed is None:  # resuming without an explicit seed keeps the stored one
            settings["seed"] = record.settings.get("seed", drawn_seed)
        store.update_study_settings(record.study_id, settings)
    return Study(store, record.study_id, prior_density)


def load_study(
    name: str,
    storage: str | Storage | None = DEFAULT_STORAGE_URL,
    *,
    prior_density: JointDensity | None = None,
    heartbeat_interval: float | None = None,
    grace_period: float | None = None,
) -> Study:
    """Open an existing study by name (raises :class:`UnknownStudyError` if there is none).

    Args:
        name: The study's name.
        storage: As in :func:`create_study`.
        prior_density: The joint belief the study was created with, if any (callables are not
            stored).
        heartbeat_interval, grace_period: Override the stored heartbeat settings in this
            process (see :func:`create_study`).
    """
    store = get_storage(storage)
    return Study(
        store,
        store.get_study(name).study_id,
        prior_density,
        heartbeat_interval=heartbeat_interval,
        grace_period=grace_period,
    )


def delete_study(name: str, storage: str | Storage | None = DEFAULT_STORAGE_URL) -> None:
    """Delete a study and all its trials."""
    get_storage(storage).delete_study(name)
