r"""Search spaces: parameters, their priors, and the unit-cube encoding every model works in.

Each non-fixed parameter is one column ``u in [0, 1]`` of the encoded space:

* ``Float(low, high)``: ``u = (x - low) / (high - low)``; with ``log=True`` the same in ``ln x``.
* ``Int(low, high)``: the padded range ``[low - 0.5, high + 0.5]`` is scaled to ``[0, 1]`` (in log
  space with ``log=True``) and decoding rounds to the nearest integer, so a uniform ``u`` gives
  (for linear integers exactly) uniform integers.
* ``Categorical(choices)``: choice ``i`` of ``k`` is encoded as ``(i + 0.5) / k``; decoding takes
  ``floor(u * k)``.
* ``Fixed(value)`` (or a bare constant): no column; the value is filled in on decode.

Decoding then encoding returns every valid point exactly for integer and categorical columns, and
to float precision (a few ulps of the range) for float columns.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from headstart.exceptions import InvalidParamsError, SearchSpaceError
from headstart.priors import (
    Beta,
    Normal,
    Prior,
    Uniform,
    _check_finite,
    _UnitDensity,
    prior_from_json,
)

Scalar = str | int | float | bool | None

MAX_INTEGER_GRID = 1 << 16  # Int columns with more values are searched as continuous


#: Column names of a trials export besides the parameters: a parameter may not take one, or an
#: export read back (``add_trials``, ``headstart import``) could not tell it from the metadata.
RESERVED_NAMES = frozenset(
    {"value", "number", "state", "source", "datetime_start", "datetime_complete", "duration"}
)
#: Integers beyond this are not all representable as float64, which the unit-cube encoding uses.
MAX_INT_BOUND = 2**53


def check_text(label: str, text: Any, error: type[Exception], *, empty: bool = False) -> str:
    """``text`` if it is a non-empty string every storage can hold; ``error`` otherwise.

    Refused: a NUL character (PostgreSQL text cannot store it, SQLite can: a study would work on
    one and fail on the other) and lone surrogates (not encodable as UTF-8; they come from
    decoding bytes with ``errors="surrogateescape"``).
    """
    if not isinstance(text, str) or not (empty or text.strip()):
        raise error(f"{label} must be a non-empty string; got {text!r}.")
    if "\x00" in text:
        raise error(
            f"{label} {text!r} contains a NUL character, which PostgreSQL cannot store; remove it."
        )
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise error(
            f"{label} {text!r} is not valid Unicode (a lone surrogate, as decoding bytes with "
            "errors='surrogateescape' leaves); decode it properly or replace those characters."
        ) from None
    return text


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float | np.integer | np.floating) and not isinstance(value, bool)


class _Numeric:
    """Shared logic of Float and Int: a (possibly log-warped) interval mapped to [0, 1]."""

    kind: str
    low: float
    high: float
    log: bool
    prior: Prior

    def _lo_hi(self) -> tuple[float, float]:
        raise NotImplementedError

    def _warp(self, x: np.ndarray) -> np.ndarray:
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.log(x) if self.log else x

    def to_unit(self, x: Any) -> np.ndarray:
        lo, hi = self._lo_hi()
        return (self._warp(np.asarray(x, dtype=np.float64)) - lo) / (hi - lo)

    def _from_unit_raw(self, u: np.ndarray) -> np.ndarray:
        lo, hi = self._lo_hi()
        t = lo + np.clip(u, 0.0, 1.0) * (hi - lo)
        return np.exp(t) if self.log else t

    def _bind_prior(self, name: str) -> _UnitDensity:
        lo, hi = self._lo_hi()
        return self.prior.bind(lambda v: float(self.to_unit(v)), hi - lo, name)

    def _check_bounds(self) -> None:
        if not self.low < self.high:
            raise SearchSpaceError(
                f"{self.kind}(low={self.low!r}, high={self.high!r}): low must be < high. "
                "Swap the bounds, or use hs.Fixed(value) for a constant."
            )
        if not math.isfinite(self.high - self.low):
            raise SearchSpaceError(
                f"{self.kind}(low={self.low!r}, high={self.high!r}): the range is wider than a "
                "float can hold, so every value would encode to the same point. Narrow the bounds "
                "or use log=True with positive bounds."
            )
        if self.log and self.low <= 0:
            raise SearchSpaceError(
                f"{self.kind}(low={self.low!r}, high={self.high!r}, log=True): both bounds must be "
                "> 0 on a log scale. Use a positive lower bound or log=False."
            )
        if not isinstance(self.prior, Uniform | Normal | Beta):
            raise SearchSpaceError(
                f"prior must be hs.Uniform(), hs.Normal(mean, std) or hs.Beta(a, b); got {self.prior!r}."
            )


@dataclass(frozen=True)
class Float(_Numeric):
    r"""A real parameter on ``[low, high]``, optionally log-scaled.

    Args:
        low: Lower bound (inclusive), finite; > 0 when ``log=True``.
        high: Upper bound (inclusive), finite, > ``low``.
        log: Search in ``ln x`` instead of ``x`` (for learning rates, regularisation weights ...).
        prior: A belief about good values (``hs.Normal``, ``hs.Beta``); default uniform.

    Example:
        >>> import headstart as hs
        >>> hs.Float(1e-5, 1e-1, log=True).to_unit(1e-3).round(3)
        np.float64(0.5)
    """

    low: float
    high: float
    log: bool = False
    prior: Prior = field(default_factory=Uniform)
    kind = "Float"

    def __post_init__(self) -> None:
        object.__setattr__(self, "low", _check_finite("Float low", self.low))
        object.__setattr__(self, "high", _check_finite("Float high", self.high))
        self._check_bounds()

    def _lo_hi(self) -> tuple[float, float]:
        return (math.log(self.low), math.log(self.high)) if self.log else (self.low, self.high)

    def from_unit(self, u: np.ndarray) -> np.ndarray:
        return np.clip(self._from_unit_raw(u), self.low, self.high)

    def cast(self, name: str, value: Any) -> float:
        if not _is_number(value):
            raise InvalidParamsError(f"Parameter {name!r} must be a number; got {value!r}.")
        v = float(value)
        if not (self.low <= v <= self.high):
            raise InvalidParamsError(
                f"Parameter {name!r} = {v!r} is outside its bounds [{self.low!r}, {self.high!r}]."
            )
        return v

    def to_json(self) -> dict:
        return {
            "type": "float",
            "low": self.low,
            "high": self.high,
            "log": self.log,
            "prior": self.prior.to_json(),
        }


@dataclass(frozen=True)
class Int(_Numeric):
    r"""An integer parameter on ``{low, ..., high}``, optionally log-scaled.

    Args:
        low: Lower bound (inclusive), an integer; >= 1 when ``log=True``.
        high: Upper bound (inclusive), an integer > ``low``.
        log: Search in ``ln x`` (for batch sizes, layer widths ...).
        prior: A belief about good values (``hs.Normal``, ``hs.Beta``); default uniform.
    """

    low: int
    high: int
    log: bool = False
    prior: Prior = field(default_factory=Uniform)
    kind = "Int"

    def __post_init__(self) -> None:
        for label in ("low", "high"):
            v = getattr(self, label)
            if not _is_number(v) or not math.isfinite(v) or float(v) != int(v):
                raise SearchSpaceError(f"Int {label} must be an integer; got {v!r}.")
            if abs(int(v)) > MAX_INT_BOUND:
                raise SearchSpaceError(
                    f"Int {label} = {int(v)} is beyond +-2**53, where float64 (the encoding "
                    "every model uses) no longer holds every integer; use hs.Float(..., log=True) "
                    "for so wide a range and round in the objective."
                )
            object.__setattr__(self, label, int(v))
        self._check_bounds()

    def _lo_hi(self) -> tuple[float, float]:
        lo, hi = self.low - 0.5, self.high + 0.5
        return (math.log(lo), math.log(hi)) if self.log else (lo, hi)

    def from_unit(self, u: np.ndarray) -> np.ndarray:
        return np.clip(np.floor(self._from_unit_raw(u) + 0.5), self.low, self.high).astype(np.int64)

    def grid(self) -> np.ndarray:
        """Encoded values of every integer in the range, sorted."""
        return self.to_unit(np.arange(self.low, self.high + 1, dtype=np.float64))

    def cast(self, name: str, value: Any) -> int:
        if not _is_number(value) or not float(value).is_integer():
            raise InvalidParamsError(f"Parameter {name!r} must be an integer; got {value!r}.")
        v = int(value)
        if not (self.low <= v <= self.high):
            raise InvalidParamsError(
                f"Parameter {name!r} = {v!r} is outside its bounds [{self.low}, {self.high}]."
            )
        return v

    def to_json(self) -> dict:
        return {
            "type": "int",
            "low": self.low,
            "high": self.high,
            "log": self.log,
            "prior": self.prior.to_json(),
        }


def _choice_key(value: Any) -> tuple[str, Any]:
    """Distinguish True from 1 and 1 from 1.0 when checking categorical choices."""
    return (type(value).__name__, value)


@dataclass(frozen=True)
class Categorical:
    r"""An unordered choice among ``choices`` (str, int, float, bool or None), optionally weighted.

    Args:
        choices: The distinct options, at least two.
        weights: Prior probabilities of the choices (non-negative, not all zero; normalised here).

    Example:
        >>> import headstart as hs
        >>> hs.Categorical(["adam", "sgd"], weights=[3, 1]).probabilities
        (0.75, 0.25)
    """

    choices: Sequence[Scalar]
    weights: Sequence[float] | None = None
    kind = "Categorical"

    def __post_init__(self) -> None:
        if isinstance(self.choices, str | bytes) or not isinstance(self.choices, Iterable):
            raise SearchSpaceError(f"Categorical choices must be a list; got {self.choices!r}.")
        choices = tuple(self.choices)
        if len(choices) < 2:
            raise SearchSpaceError(
                f"Categorical needs at least two choices; got {list(choices)!r}. "
                "Use hs.Fixed(value) for a constant."
            )
        for c in choices:
            if c is not None and not isinstance(c, str | int | float | bool):
                raise SearchSpaceError(
                    f"Categorical choices must be str, int, float, bool or None; got {c!r}."
                )
            if isinstance(c, float) and not math.isfinite(c):
                raise SearchSpaceError(f"Categorical choices must be finite; got {c!r}.")
            if isinstance(c, str):
                check_text("A categorical choice", c, SearchSpaceError, empty=True)
        keys = [_choice_key(c) for c in choices]
        dupes = sorted({repr(c) for c, k in zip(choices, keys, strict=True) if keys.count(k) > 1})
        if dupes:
            raise SearchSpaceError(
                f"Categorical choices must be distinct; duplicated: {', '.join(dupes)}."
            )
        object.__setattr__(self, "choices", choices)
        if self.weights is not None:
            w = tuple(_check_finite("Categorical weight", x) for x in self.weights)
            if len(w) != len(choices):
                raise SearchSpaceError(
                    f"Categorical weights must match the choices: {len(choices)} choices, "
                    f"{len(w)} weights."
                )
            if min(w) < 0 or sum(w) <= 0:
                raise SearchSpaceError(
                    f"Categorical weights must be >= 0 and not all zero; got {list(w)!r}."
                )
            object.__setattr__(self, "weights", w)

    @property
    def probabilities(self) -> tuple[float, ...]:
        if self.weights is None:
            return tuple(1.0 / len(self.choices) for _ in self.choices)
        total = sum(self.weights)
        return tuple(w / total for w in self.weights)

    def index(self, value: Any) -> int:
        key = _choice_key(value)
        for i, c in enumerate(self.choices):
            if _choice_key(c) == key:
                return i
        if isinstance(value, np.generic):  # numpy scalars from DataFrames
            return self.index(value.item())
        if _is_number(value):  # a table column made 0 a 0.0 (pandas): the one equal number
            equal = [i for i, c in enumerate(self.choices) if _is_number(c) and c == value]
            if len(equal) == 1:
                return equal[0]
        return -1

    def to_unit(self, value: Any) -> float:
        return (self.index(value) + 0.5) / len(self.choices)

    def from_unit_index(self, u: np.ndarray) -> np.ndarray:
        k = len(self.choices)
        return np.clip(np.floor(np.asarray(u) * k), 0, k - 1).astype(np.int64)

    def grid(self) -> np.ndarray:
        k = len(self.choices)
        return (np.arange(k, dtype=np.float64) + 0.5) / k

    def cast(self, name: str, value: Any) -> Scalar:
        i = self.index(value)
        if i < 0:
            raise InvalidParamsError(
                f"Parameter {name!r} = {value!r} is not one of its choices {list(self.choices)!r}."
            )
        return self.choices[i]

    def to_json(self) -> dict:
        return {
            "type": "categorical",
            "choices": list(self.choices),
            "weights": None if self.weights is None else list(self.weights),
        }


@dataclass(frozen=True)
class Fixed:
    """A parameter held at one value (str, int, float, bool or None); it has no encoded column."""

    value: Scalar
    kind = "Fixed"

    def __post_init__(self) -> None:
        v = self.value
        if v is not None and not isinstance(v, str | int | float | bool):
            raise SearchSpaceError(f"Fixed value must be str, int, float, bool or None; got {v!r}.")
        if isinstance(v, float) and not math.isfinite(v):
            raise SearchSpaceError(
                f"Fixed value must be finite; got {v!r} (JSON, and so the storage, has no NaN)."
            )
        if isinstance(v, str):
            check_text("A fixed value", v, SearchSpaceError, empty=True)

    def cast(self, name: str, value: Any) -> Scalar:
        if _choice_key(value) != _choice_key(self.value) and not (
            _is_number(value) and _is_number(self.value) and value == self.value
        ):
            raise InvalidParamsError(
                f"Parameter {name!r} is fixed at {self.value!r}; got {value!r}. Omit it or pass "
                "the fixed value."
            )
        return self.value

    def to_json(self) -> dict:
        return {"type": "fixed", "value": self.value}


Param = Float | Int | Categorical | Fixed


def _param_from_json(data: dict) -> Param:
    kind = data.get("type")
    if kind == "float":
        return Float(
            data["low"], data["high"], log=data["log"], prior=prior_from_json(data.get("prior"))
        )
    if kind == "int":
        return Int(
            data["low"], data["high"], log=data["log"], prior=prior_from_json(data.get("prior"))
        )
    if kind == "categorical":
        return Categorical(data["choices"], weights=data.get("weights"))
    if kind == "fixed":
        return Fixed(data["value"])
    raise SearchSpaceError(f"Unknown parameter type {kind!r} in a serialised search space.")


@dataclass(frozen=True)
class Column:
    """What a model needs to know about one encoded column."""

    name: str
    kind: str  # "continuous" | "integer" | "categorical"
    grid: np.ndarray | None


class SearchSpace(Mapping[str, Param]):
    r"""An ordered set of named parameters with an exact unit-cube encoding.

    Args:
        params: ``{name: parameter}``; a bare constant is taken as ``hs.Fixed(constant)``.

    Example:
        >>> import headstart as hs
        >>> space = hs.SearchSpace({"lr": hs.Float(1e-4, 1e-1, log=True), "opt": hs.Categorical(["adam", "sgd"])})
        >>> space.decode(space.encode([{"lr": 1e-2, "opt": "sgd"}]))[0]["opt"]
        'sgd'
    """

    def __init__(self, params: Mapping[str, Param | Scalar], *, _stored: bool = False) -> None:
        if not isinstance(params, Mapping) or not params:
            raise SearchSpaceError(
                "SearchSpace needs a non-empty dict of {name: hs.Float/Int/Categorical/Fixed}; "
                f"got {params!r}."
            )
        self._params: dict[str, Param] = {}
        for name, p in params.items():
            check_text("A parameter name", name, SearchSpaceError)
            if name in RESERVED_NAMES and not _stored:  # studies stored before the rule load
                raise SearchSpaceError(
                    f"Parameter name {name!r} is reserved: trials exports have a {name!r} column "
                    f"besides the parameters ({sorted(RESERVED_NAMES)}); rename the parameter."
                )
            if not isinstance(p, Float | Int | Categorical | Fixed):
                if p is None or isinstance(p, str | int | float | bool):
                    p = Fixed(p)
                else:
                    raise SearchSpaceError(
                        f"Parameter {name!r} must be hs.Float, hs.Int, hs.Categorical or hs.Fixed; "
                        f"got {p!r}."
                    )
            self._params[name] = p
        self._free = [n for n, p in self._params.items() if not isinstance(p, Fixed)]
        if not self._free:
            raise SearchSpaceError("SearchSpace needs at least one parameter that is not fixed.")
        self._densities = {
            n: p._bind_prior(n) for n, p in self._params.items() if isinstance(p, Float | Int)
        }

    # --- Mapping protocol ------------------------------------------------------------------------
    def __getitem__(self, name: str) -> Param:
        return self._params[name]

    def __iter__(self):
        return iter(self._params)

    def __len__(self) -> int:
        return len(self._params)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, SearchSpace) and self.to_json() == other.to_json()

    def __hash__(self) -> int:
        return hash(repr(self.to_json()))

    def __repr__(self) -> str:
        return f"SearchSpace({self._params!r})"

    # --- encoding ----------------------------------------------------------------------------------
    @property
    def dim(self) -> int:
        """Number of encoded columns (parameters that are not fixed)."""
        return len(self._free)

    @property
    def columns(self) -> list[Column]:
        cols = []
        for n in self._free:
            p = self._params[n]
            if isinstance(p, Float):
                cols.append(Column(n, "continuous", None))
            elif isinstance(p, Int) and p.high - p.low + 1 > MAX_INTEGER_GRID:
                # too many values to enumerate (Int(0, 10**9) would take gigabytes): searched as
                # a continuous column; decoding rounds to the nearest integer
                cols.append(Column(n, "continuous", None))
            elif isinstance(p, Int):
                cols.append(Column(n, "integer", p.grid()))
            else:
                cols.append(Column(n, "categorical", p.grid()))
        return cols

    def validate(self, params: Mapping[str, Any]) -> dict[str, Scalar]:
        """Check a configuration and return it with canonical types (fixed values filled in).

        Raises:
            InvalidParamsError: unknown or missing names, wrong types, values out of bounds.
        """
        if not isinstance(params, Mapping):
            raise InvalidParamsError(
                f"A configuration must be a dict of parameter values; got {params!r}."
            )
        unknown = sorted(set(params) - set(self._params))
        if unknown:
            raise InvalidParamsError(
                f"Unknown parameter(s) {unknown}; the search space has {list(self._params)}."
            )
        missing = [n for n in self._free if n not in params]
        if missing:
            raise InvalidParamsError(f"Missing value(s) for parameter(s) {missing}.")
        out: dict[str, Scalar] = {}
        for n, p in self._params.items():
            out[n] = p.value if (isinstance(p, Fixed) and n not in params) else p.cast(n, params[n])
        return out

    def encode(self, configs: Sequence[Mapping[str, Any]]) -> np.ndarray:
        """Encode validated configurations to an ``n x dim`` array in the unit cube."""
        U = np.empty((len(configs), self.dim), dtype=np.float64)
        for j, n in enumerate(self._free):
            p = self._params[n]
            if isinstance(p, Float | Int):  # one vectorized call per column (the same arithmetic)
                U[:, j] = p.to_unit(np.array([c[n] for c in configs], dtype=np.float64))
            else:
                U[:, j] = [p.to_unit(c[n]) for c in configs]
        return U

    def decode(self, U: np.ndarray) -> list[dict[str, Scalar]]:
        """Decode an ``n x dim`` (or ``dim``) array in the unit cube to configurations."""
        U = np.atleast_2d(np.asarray(U, dtype=np.float64))
        if U.shape[1] != self.dim:
            raise InvalidParamsError(
                f"Expected encoded points with {self.dim} columns; got shape {U.shape}."
            )
        columns: dict[str, list] = {}
        for j, n in enumerate(self._free):
            p = self._params[n]
            if isinstance(p, Float):
                columns[n] = [float(v) for v in p.from_unit(U[:, j])]
            elif isinstance(p, Int):
                columns[n] = [int(v) for v in p.from_unit(U[:, j])]
            else:
                columns[n] = [p.choices[i] for i in p.from_unit_index(U[:, j])]
        return [
            {
                n: (p.value if isinstance(p, Fixed) else columns[n][i])
                for n, p in self._params.items()
            }
            for i in range(U.shape[0])
        ]

    def snap(self, U: np.ndarray) -> np.ndarray:
        """Move encoded points onto valid values (integer and categorical grids)."""
        return self.encode(self.decode(U))

    # --- sampling and priors -----------------------------------------------------------------------
    @property
    def has_priors(self) -> bool:
        """Whether any parameter carries a non-uniform belief."""
        return any(not d.is_uniform for d in self._densities.values()) or any(
            isinstance(p, Categorical) and p.weights is not None for p in self._params.values()
        )

    def sample(self, n: int, *, rng: np.random.Generator, from_prior: bool = False) -> list[dict]:
        """Draw ``n`` configurations uniformly (encoded cube) or from the priors."""
        U = self.sample_prior_encoded(n, rng) if from_prior else rng.random((n, self.dim))
        return self.decode(U)

    def sample_prior_encoded(self, n: int, rng: np.random.Generator) -> np.ndarray:
        """``n x dim`` encoded draws from the per-parameter priors (uniform where there is none).

        Draws of a truncated prior always lie within the bounds (piBO truncates the prior only
        when sampling, Hvarfner et al. 2022, Sec. 3); categorical draws are category centres.
        """
        U = rng.random((n, self.dim))
        for j, name in enumerate(self._free):
            p = self._params[name]
            if isinstance(p, Categorical):
                idx = rng.choice(len(p.choices), size=n, p=p.probabilities)
                U[:, j] = (idx + 0.5) / len(p.choices)
            elif not self._densities[name].is_uniform:
                U[:, j] = self._densities[name].sample(n, rng)
        return U

    def prior_log_pdf(self, U: np.ndarray) -> np.ndarray:
        r"""``log max(pi(u), 1e-12)``, ``pi(u) = prod_j pi_j(u_j)``, at encoded points (``... x dim`` → ``...``).

        Each factor is a density on ``[0, 1]``; a categorical column contributes ``log(k * p_i)``
        so that uniform weights give 0. The floor applies to the joint density, as piBO adds
        ``1e-12`` to ``pi`` (Hvarfner et al. 2022, App. D), so a far-off prior keeps a bounded pull.
        """
        U = np.asarray(U, dtype=np.float64)
        out = np.zeros(U.shape[:-1])
        with np.errstate(divide="ignore"):
            for j, name in enumerate(self._free):
                p = self._params[name]
                if isinstance(p, Categorical):
                    k = len(p.choices)
                    probs = np.log(np.asarray(p.probabilities) * k)
                    out = out + probs[p.from_unit_index(U[..., j])]
                else:
                    out = out + self._densities[name].log_pdf(U[..., j])
        return np.maximum(out, math.log(1e-12))

    def prior_mode(self) -> dict[str, Scalar]:
        """The configuration of highest prior density (per-parameter modes)."""
        u = np.empty(self.dim)
        for j, name in enumerate(self._free):
            p = self._params[name]
            if isinstance(p, Categorical):
                u[j] = (int(np.argmax(p.probabilities)) + 0.5) / len(p.choices)
            else:
                u[j] = self._densities[name].mode()
        return self.decode(u)[0]

    # --- serialisation -----------------------------------------------------------------------------
    def to_json(self) -> dict:
        """A JSON-ready dict; :meth:`from_json` rebuilds an equal space."""
        return {"params": {n: p.to_json() for n, p in self._params.items()}}

    @classmethod
    def from_json(cls, data: Mapping) -> SearchSpace:
        try:
            return cls({n: _param_from_json(d) for n, d in data["params"].items()}, _stored=True)
        except (KeyError, TypeError, AttributeError, ValueError) as e:
            if isinstance(e, SearchSpaceError):
                raise
            raise SearchSpaceError(f"Not a serialised headstart search space: {e!r}.") from e


def _param_text(p: dict, beliefs: bool) -> str:
    """A parameter's JSON form in words: ``float in [0.0, 1.0] (log)``, ``categorical [...]``."""
    kind = p["type"]
    if kind in ("float", "int"):
        text = f"{kind} in [{p['low']!r}, {p['high']!r}]" + (" (log)" if p["log"] else "")
    elif kind == "categorical":
        text = f"categorical {p['choices']!r}"
    else:
        text = f"fixed at {p['value']!r}"
    prior = p.get("prior") or {"type": "uniform"}
    if beliefs and prior["type"] != "uniform":
        args = ", ".join(f"{k}={v!r}" for k, v in prior.items() if k != "type")
        text += f", prior {prior['type']}({args})"
    if beliefs and p.get("weights"):
        text += f", weights {p['weights']!r}"
    return text


def describe_difference(
    a: SearchSpace, b: SearchSpace, a_is: str, b_is: str, *, beliefs: bool = True
) -> str | None:
    """How space ``a`` differs from ``b``, parameter by parameter, or ``None`` if it does not.

    ``a_is`` and ``b_is`` name the two in the sentence (``"the source"``, ``"the study"``).
    ``beliefs=False`` compares only what fixes the encoding (names, types, bounds, log scaling,
    choices, fixed values), not priors or categorical weights.

    Example:
        >>> a = SearchSpace({"x": Float(0.0, 1.0)})
        >>> b = SearchSpace({"x": Float(0.0, 2.0), "n": Int(1, 3)})
        >>> describe_difference(a, b, "the source", "the study")
        "parameter 'n' is missing from the source; parameter 'x' is float in [0.0, 1.0] in the source but float in [0.0, 2.0] in the study"
    """
    drop = () if beliefs else ("prior", "weights")
    pa, pb = (
        {n: {k: v for k, v in p.items() if k not in drop} for n, p in s.to_json()["params"].items()}
        for s in (a, b)
    )
    if pa == pb:
        return None
    diffs = [f"parameter {n!r} is missing from {a_is}" for n in pb if n not in pa]
    diffs += [f"{a_is} has an extra parameter {n!r}" for n in pa if n not in pb]
    diffs += [
        f"parameter {n!r} is {_param_text(pa[n], beliefs)} in {a_is} but "
        f"{_param_text(pb[n], beliefs)} in {b_is}"
        for n in pb
        if n in pa and pa[n] != pb[n]
    ]
    return "; ".join(diffs) or "the parameters are in another order"


def widening_problem(old: SearchSpace, new: SearchSpace) -> str | None:
    """``None`` when ``new`` only widens ``old``, else why not.

    A widening keeps every parameter, in order, with its type and log scaling, and only moves
    numeric bounds outward or adds categorical choices (priors and weights may change): every
    configuration of ``old`` is then one of ``new``, so a study's trials stay valid.

    Example:
        >>> old = SearchSpace({"x": Float(0.0, 1.0), "c": Categorical(["a", "b"])})
        >>> widening_problem(old, SearchSpace({"x": Float(-1.0, 2.0), "c": Categorical(["a", "b", "z"])}))
        >>> widening_problem(old, SearchSpace({"x": Float(0.5, 1.0), "c": Categorical(["a", "b"])}))
        "parameter 'x' narrows [0.0, 1.0] to [0.5, 1.0]"
    """
    if list(old) != list(new):
        return f"the parameters change from {list(old)} to {list(new)}"
    for name in old:
        a, b = old[name], new[name]
        if type(a) is not type(b):
            return f"parameter {name!r} changes type ({type(a).__name__} to {type(b).__name__})"
        if isinstance(a, Fixed) and a.value != b.value:
            return f"parameter {name!r} changes its fixed value ({a.value!r} to {b.value!r})"
        if isinstance(a, Categorical):
            lost = [c for c in a.choices if c not in b.choices]
            if lost:
                return f"parameter {name!r} loses choice(s) {lost}"
        if isinstance(a, Float | Int):
            if a.log != b.log:
                return f"parameter {name!r} changes log={a.log} to log={b.log}"
            if b.low > a.low or b.high < a.high:
                return (
                    f"parameter {name!r} narrows [{a.low!r}, {a.high!r}] to [{b.low!r}, {b.high!r}]"
                )
    return None
