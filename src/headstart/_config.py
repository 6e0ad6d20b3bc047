r"""A study's configuration: one frozen, validated object, stored as JSON with the study.

:func:`headstart.create_study` builds a :class:`StudyConfig` from its keywords (every check runs
here, once, before anything is stored), the storage keeps :meth:`StudyConfig.to_json`, and a
reopened study rebuilds it with :meth:`StudyConfig.from_json`. The strategy reads it; nothing else
keeps its own list of settings.
"""

from __future__ import annotations

import dataclasses
import math
import numbers
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from headstart._engine import FIRST_RULES
from headstart._methods import ACQUISITIONS, MethodOptions, MethodSpec, get_method
from headstart._methods.registry import check_bool
from headstart.exceptions import InvalidSettingError
from headstart.pibo import DEFAULT_CANDIDATE_SHARE, check_candidate_share, check_prior_strength

DIRECTIONS = ("minimize", "maximize")


def to_max(values: Sequence[float], directions: Sequence[str]) -> np.ndarray:
    """Objective values with the minimized ones negated (everything maximized)."""
    signs = np.array([-1.0 if d == "minimize" else 1.0 for d in directions])
    return np.asarray(values, dtype=np.float64) * signs


# methods that model several objectives / constraints (transfer ones: one model per output, each
# from the sources' values of that output, headstart.sources._outputs)
MULTI_OUTPUT_METHODS = ("gp", "random", "scaml", "rgpe")
LEGACY_OPTIONS = ("kernel", "kernel_search")  # top-level settings of studies stored before options
# The heartbeat of worker processes (optimize(n_workers > 1), `headstart worker`) on a study that
# sets none: a killed worker's trial is failed a minute later instead of staying "running" (a
# pending point for every later ask) forever. Beats start at the reservation, so a slow
# suggestion is never mistaken for a dead worker.
WORKER_HEARTBEAT = {"heartbeat_interval": 10.0, "grace_period": 60.0}


def worker_heartbeat(settings: Mapping[str, Any]) -> dict[str, float]:
    """The heartbeat overrides of a worker process on a study with these stored ``settings``:
    none when the study sets a heartbeat, else :data:`WORKER_HEARTBEAT`."""
    stored = StudyConfig.from_json(settings).heartbeat_interval is not None
    return {} if stored else dict(WORKER_HEARTBEAT)


@dataclass(frozen=True)
class StudyConfig:
    r"""How a study suggests configurations (all of ``create_study``'s model settings).

    Attributes:
        method: A registered method (:mod:`headstart._methods`).
        seed: Seed of every suggestion.
        n_initial: Size of the initial design (``None``: the default for the budget).
        budget: Planned number of trials.
        acquisition: ``"logei"``, ``"ei"``, ``"pi"``, ``"ucb"`` or ``"ts"`` (``None``: the
            method's default, resolved by :meth:`resolved`).
        deterministic: The objective is noise-free.
        plateau_rule: Exact ties between evaluated points exclude their neighbourhoods from
            the acquisition search (:func:`headstart._engine.optimize.tie_radii`); ``None``:
            the method's default (on for ``"scaml"``, off otherwise).
        stall_rule: When the latest trials all sit at the incumbent, the next one leaves its
            neighbourhood (:func:`headstart._engine.optimize.stalled_incumbent`); ``None``: the
            method's default.
        ucb_beta: UCB's ``beta`` (``None``: the method's default).
        pi_margin: ``acquisition="pi"`` only: PI's target is the incumbent plus this margin, in
            standard deviations of the model's (standardized) observations (``None``: 0).
        first_trial: Transfer methods' suggestion before any observation of the target:
            ``"candidates"`` (of the sources' own best configurations, one per source, the
            one the model expects best), ``"lcb"`` (the maximizer of the prior's
            ``mu - sigma``), ``"mean"`` (the maximizer of the prior mean) or ``"acquisition"``
            (UCB with ``ucb_beta`` on the prior, as in the ScaML-GP paper), ``"lcb-winner"``
            (``"lcb"``, then the source winner rated best after it); ``None``: the method's
            default.
        transfer: Where the frozen meta-data are stored (set by ``create_study``).
        prior_model: Model-cache key of an MPHD prior (``method="mphd"``; set by
            ``create_study``).
        prior_strength: piBO's ``beta`` (``None``: ``budget / 10``, or 10).
        use_priors: ``False`` ignores the space's priors.
        prior_density: A joint density was given (callables are not stored).
        prior_design: With priors, start at the belief's mode, then draws from it.
        prior_candidate_share: Share of screening candidates drawn from the belief.
        options: The method's options (its :class:`~headstart._methods.MethodOptions`), as
            JSON with every default filled in (``None``: the defaults).
        heartbeat_interval: Seconds between a running trial's heartbeats (``None``: off).
        grace_period: A running trial whose heartbeat is older than this is failed by the next
            ``ask`` of any worker (default twice the interval).
        reenqueue_stale: Enqueue a failed stale trial's configuration again, once.
        directions: A multi-objective study's direction per objective (``None``: one objective,
            the study's ``direction``).
        constrained: The study's trials carry constraint values (feasible when all are
            ``<= 0``, Optuna's convention), modelled by one GP each.
        reference_point: A multi-objective study's reference point, one value per objective in
            its own units and direction (BoTorch's ``ref_point``, Ax's objective thresholds):
            log EHVI then maximizes the hypervolume above it, the one the front will be judged
            by. ``None``: inferred from the observed and predicted fronts (their nadir minus
            10% of their range).
    """

    method: str = "gp"
    seed: int = 0
    n_initial: int | None = None
    budget: int | None = None
    acquisition: str | None = None
    deterministic: bool = False
    plateau_rule: bool | None = None
    stall_rule: bool | None = None
    ucb_beta: float | None = None
    pi_margin: float | None = None
    first_trial: str | None = None
    transfer: dict | None = None
    prior_model: str | None = None
    prior_strength: float | None = None
    use_priors: bool = True
    prior_density: bool = False
    prior_design: bool = True
    prior_candidate_share: float = DEFAULT_CANDIDATE_SHARE
    options: dict | None = None
    heartbeat_interval: float | None = None
    grace_period: float | None = None
    reenqueue_stale: bool = False
    directions: tuple[str, ...] | None = None
    constrained: bool = False
    reference_point: tuple[float, ...] | None = None

    def __post_init__(self) -> None:
        spec = get_method(self.method)
        self._check_outputs()
        seed = self.seed
        if (
            isinstance(seed, bool)
            or not isinstance(seed, int | np.integer)
            or not 0 <= seed < 2**63
        ):
            raise InvalidSettingError(
                f"seed must be an integer in [0, 2**63) (or None for a random one); got {seed!r}."
            )
        object.__setattr__(self, "seed", int(seed))
        check_bool("deterministic", self.deterministic)
        for name in ("plateau_rule", "stall_rule"):
            if getattr(self, name) is not None:
                check_bool(name, getattr(self, name))
        check_bool("use_priors", self.use_priors)
        check_bool("prior_design", self.prior_design)
        check_bool("reenqueue_stale", self.reenqueue_stale)
        for label in ("heartbeat_interval", "grace_period"):
            v = getattr(self, label)
            if v is not None and (
                isinstance(v, bool)
                or not isinstance(v, int | float)
                or not math.isfinite(v)
                or v <= 0
            ):
                raise InvalidSettingError(f"{label} must be a number of seconds > 0; got {v!r}.")
        if self.grace_period is not None and self.heartbeat_interval is None:
            raise InvalidSettingError("grace_period needs heartbeat_interval (seconds) as well.")
        if self.acquisition is not None and self.acquisition not in ACQUISITIONS:
            raise InvalidSettingError(
                f"acquisition must be one of {ACQUISITIONS}; got {self.acquisition!r}."
            )
        for label, v in (("n_initial", self.n_initial), ("budget", self.budget)):
            low = 0 if (label == "n_initial" and not spec.initial_design) else 1
            if v is not None and (isinstance(v, bool) or not isinstance(v, int) or v < low):
                raise InvalidSettingError(f"{label} must be a positive integer or None; got {v!r}.")
        if self.first_trial is not None and self.first_trial not in FIRST_RULES:
            raise InvalidSettingError(
                f"first_trial must be one of {FIRST_RULES}; got {self.first_trial!r}."
            )
        for label in ("ucb_beta", "pi_margin"):
            v = getattr(self, label)
            if v is None:
                continue
            if (
                isinstance(v, bool)
                or not isinstance(v, int | float)
                or not math.isfinite(v)
                or v < 0
            ):
                raise InvalidSettingError(f"{label} must be a finite number >= 0; got {v!r}.")
            object.__setattr__(self, label, float(v))
        if self.pi_margin is not None and self.acquisition != "pi":
            raise InvalidSettingError(
                f"pi_margin sets the target of acquisition='pi'; got acquisition="
                f"{self.acquisition!r}. Pass acquisition='pi' with it, or drop pi_margin."
            )
        if self.prior_strength is not None:
            object.__setattr__(self, "prior_strength", check_prior_strength(self.prior_strength))
        object.__setattr__(
            self, "prior_candidate_share", check_candidate_share(self.prior_candidate_share)
        )
        if self.options is not None and not isinstance(self.options, dict):
            raise InvalidSettingError(
                f"options must be a mapping of option names to values; got {self.options!r}."
            )
        parsed = spec.options.parse(self.options, method=self.method)
        object.__setattr__(self, "options", parsed.to_json())

    def _check_outputs(self) -> None:
        """Several objectives or constraints: checked directions, a method that models them."""
        check_bool("constrained", self.constrained)
        if self.directions is not None:
            directions = self.directions
            if isinstance(directions, str) or not all(d in DIRECTIONS for d in directions):
                raise InvalidSettingError(
                    "directions must be a list of 'minimize' / 'maximize', one per objective; "
                    f"got {directions!r}."
                )
            if len(directions) < 2:
                raise InvalidSettingError(
                    f"directions lists {len(directions)} objective(s); a multi-objective study "
                    "needs 2 or more (for one objective pass direction=...)."
                )
            object.__setattr__(self, "directions", tuple(directions))
        if self.reference_point is not None:
            object.__setattr__(self, "reference_point", self._checked_reference())
        if not self.multi_output:
            return
        if self.method not in MULTI_OUTPUT_METHODS:
            what = "several objectives" if self.directions else "constraints"
            raise InvalidSettingError(
                f"method={self.method!r} does not model {what} yet; use one of "
                f"{MULTI_OUTPUT_METHODS} (one GP per objective and per constraint)."
            )
        if self.acquisition not in (None, "logei"):
            raise InvalidSettingError(
                f"acquisition={self.acquisition!r} has no multi-objective or constrained form; "
                "these studies use log EHVI / log constrained EI (leave acquisition unset)."
            )
        options = self.options if isinstance(self.options, dict) else {}
        prior_mean = options.get("prior_mean")  # a number: a quantile (bad values and
        # methods without the option are refused with their own messages)
        number = isinstance(prior_mean, numbers.Real) and not isinstance(prior_mean, bool)
        if number and hasattr(self.spec.options, "prior_mean"):
            raise InvalidSettingError(
                f"prior_mean={prior_mean!r} applies to studies with one objective and no "
                "constraints, where it was measured; leave it unset or 'auto' here (every "
                "output's GP then uses the observed values' mean)."
            )

    def _checked_reference(self) -> tuple[float, ...]:
        """The reference point as a tuple; its values are checked by the callers that take it
        from a user (``create_study``, ``HeadstartSampler``: :func:`headstart._objectives.
        check_reference`, a layer above this one)."""
        if self.directions is None:
            raise InvalidSettingError(
                "reference_point applies to multi-objective studies (directions=[...]); this "
                "study has one objective."
            )
        return tuple(float(r) for r in self.reference_point)

    @property
    def n_objectives(self) -> int:
        return 1 if self.directions is None else len(self.directions)

    @property
    def multi_output(self) -> bool:
        """Several objectives, or constraints: one model per output, and the multi-output
        acquisitions (:mod:`headstart._engine.multi_output`)."""
        return self.directions is not None or self.constrained

    def check_heartbeat(self) -> StudyConfig:
        """Refuse a grace period no longer than the heartbeat interval (every trial would be
        failed between two beats). Checked when a study is created or a process overrides the
        settings, not when a stored study is read back."""
        if self.grace_period is not None and self.grace_period <= self.heartbeat_interval:
            raise InvalidSettingError(
                f"grace_period ({self.grace_period:g} s) must be longer than heartbeat_interval "
                f"({self.heartbeat_interval:g} s), or every trial is failed between two beats; "
                "use a few intervals (the default is 2 x heartbeat_interval)."
            )
        return self

    @property
    def stale_after(self) -> float | None:
        """Seconds without a heartbeat after which a running trial is failed (``None``: never)."""
        if self.heartbeat_interval is None:
            return None
        return self.grace_period if self.grace_period is not None else 2 * self.heartbeat_interval

    @property
    def spec(self) -> MethodSpec:
        """The method's registered spec."""
        return get_method(self.method)

    @property
    def method_options(self) -> MethodOptions:
        """The method's options as its typed :class:`~headstart._methods.MethodOptions`."""
        return self.spec.options.parse(self.options, method=self.method)

    def resolved(self, *, priors: bool) -> StudyConfig:
        """This configuration with the acquisition default filled in (piBO active or not)."""
        if self.acquisition is not None:
            return self
        if self.multi_output:  # log EHVI / log constrained EI (piBO multiplies them in log space)
            return dataclasses.replace(self, acquisition="logei")
        return dataclasses.replace(self, acquisition=self.spec.default_acquisition(priors))

    def with_options_checked(self, kinds: list[str]) -> StudyConfig:
        """The configuration with the method's options checked against the space's column kinds
        (and in canonical form: a kernel expression, for instance)."""
        checked = self.method_options.check_space(kinds).to_json()
        return self if checked == self.options else dataclasses.replace(self, options=checked)

    def to_json(self) -> dict[str, Any]:
        """The stored form (plain JSON types)."""
        data = dataclasses.asdict(self)
        for name in ("directions", "reference_point"):
            if getattr(self, name) is not None:
                data[name] = list(getattr(self, name))
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> StudyConfig:
        """Rebuild from :meth:`to_json` output; keys of older or newer versions are ignored.

        Studies stored before methods had options kept ``kernel`` and ``kernel_search`` at the
        top level (method ``"gp"`` / ``"warmstart"``): they become those methods' options. An
        option added later takes its ``STORED_DEFAULTS`` value (the behaviour the study ran with,
        e.g. ABRAC's ``output_warp="none"``), not the new default.
        """
        names = {f.name for f in dataclasses.fields(cls)}
        data = dict(data)
        legacy = {k: data.pop(k) for k in LEGACY_OPTIONS if k in data}
        if legacy and data.get("options") is None:
            spec = get_method(data.get("method", "gp"))
            kept = {k: v for k, v in legacy.items() if k in spec.options.names()}
            data["options"] = kept or None
        options = data.get("options")
        stored = getattr(get_method(data.get("method", "gp")).options, "STORED_DEFAULTS", {})
        if isinstance(options, dict) or (options is None and stored):  # options added since
            data["options"] = {**stored, **(options or {})}  # the study was stored: as it ran
        return cls(**{k: v for k, v in data.items() if k in names})


__all__ = [
    "DIRECTIONS",
    "WORKER_HEARTBEAT",
    "StudyConfig",
    "to_max",
    "worker_heartbeat",
]
