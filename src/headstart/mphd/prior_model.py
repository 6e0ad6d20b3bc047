r"""A pre-trained MPHD prior: the lengthscale network, the shared Gammas, and what it was trained on.

The file is JSON (never pickle): ``{"format": "headstart.mphd-prior", "version": 1, "sha256": ...,
"model": {...}}``. ``sha256`` is the hash of the canonical JSON of ``"model"``, so a file edited
by hand or cut short is rejected with :class:`~headstart.exceptions.PriorModelError` instead of
producing a silently different prior. Reading needs only numpy (the network is evaluated in
numpy: 4 -> 16 -> 16 -> 2, tanh hidden layers, a linear output and ``softplus + 1e-6`` for the
Gamma shape ``a`` and rate ``b``; Fan et al. 2024 Sec. 2.3, with the output layer of the paper's
code -- tanh then softplus, which caps ``a`` and ``b`` near ``(0.31, 1.31)`` -- replaced as the
issue asked).
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from headstart.exceptions import PriorModelError
from headstart.mphd.context import FEATURES, dimension_context

FORMAT = "headstart.mphd-prior"
VERSION = 1
LENGTHSCALE_MODES = ("network", "shared")
GAMMA_FLOOR = 1e-6  # added to softplus outputs: shapes and rates stay positive
# What a usable prior holds: gamma shapes and rates within GAMMA_RANGE (a rate of 1e300 pins a
# lengthscale at 0 and every GP fit fails), network weights within MAX_WEIGHT. A file that
# passes its checksum but not these (edited, then re-hashed) is refused when it is read.
GAMMA_RANGE = (1e-100, 1e100)
MAX_WEIGHT = 1e4


def softplus(x: np.ndarray) -> np.ndarray:
    return np.logaddexp(0.0, x)


def network_gammas(layers, feature_mean, feature_std, contexts) -> tuple[np.ndarray, np.ndarray]:
    r"""Gamma ``(a, b)`` per row of ``contexts`` (``n x 4``) from the network ``layers``: the
    standardized contexts through tanh hidden layers, a linear output, ``softplus + 1e-6``."""
    h = (np.asarray(contexts) - np.asarray(feature_mean)) / np.asarray(feature_std)
    for i, (W, bias) in enumerate(layers):
        h = h @ np.asarray(W, dtype=np.float64).T + np.asarray(bias, dtype=np.float64)
        if i < len(layers) - 1:
            h = np.tanh(h)
    ab = softplus(h) + GAMMA_FLOOR
    return ab[:, 0], ab[:, 1]


@dataclass(frozen=True)
class PriorModel:
    r"""MPHD's pre-trained hierarchical-GP prior for any search space.

    Attributes:
        lengthscale_mode: ``"network"`` (MPHD: a Gamma per dimension from its context) or
            ``"shared"`` (the paper's "Non-NN" ablation: one Gamma for every lengthscale).
        layers: The network's ``[(W, b), ...]`` (``W`` is ``out x in``), empty for ``"shared"``.
        feature_mean, feature_std: Standardization of the :data:`FEATURES` contexts.
        shared_lengthscale: ``(a, b)`` of the pooled lengthscale Gamma (always fitted).
        outputscale, noise: ``(a, b)`` Gammas of the signal and noise variances (standardized
            values, shared by every space).
        trained_on: Provenance: spaces (name, kinds, sub-dataset count), points per
            sub-dataset, headstart version, losses, seed.

    Example:
        >>> model = PriorModel("shared", [], [0.0] * 4, [1.0] * 4, (2.0, 4.0), (2.0, 2.0),
        ...                    (1.1, 30.0))
        >>> a, b = model.lengthscale_gammas(["continuous", "integer"])
        >>> a.tolist(), b.tolist()
        ([2.0, 2.0], [4.0, 4.0])
        >>> PriorModel.from_json(model.to_json()) == model
        True
    """

    lengthscale_mode: str
    layers: list
    feature_mean: list
    feature_std: list
    shared_lengthscale: tuple[float, float]
    outputscale: tuple[float, float]
    noise: tuple[float, float]
    trained_on: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.lengthscale_mode not in LENGTHSCALE_MODES:
            raise PriorModelError(
                f"lengthscale_mode must be one of {LENGTHSCALE_MODES}; got "
                f"{self.lengthscale_mode!r}."
            )
        for name in ("shared_lengthscale", "outputscale", "noise"):
            pair = tuple(float(v) for v in getattr(self, name))
            low, high = GAMMA_RANGE
            if len(pair) != 2 or not all(math.isfinite(v) and low <= v <= high for v in pair):
                raise PriorModelError(
                    f"{name} must be two numbers (a, b) in [{low:g}, {high:g}]; got {pair}."
                )
            object.__setattr__(self, name, pair)
        for name in ("feature_mean", "feature_std"):
            values = [float(v) for v in getattr(self, name)]
            if len(values) != len(FEATURES) or not all(math.isfinite(v) for v in values):
                raise PriorModelError(f"{name} must be {len(FEATURES)} finite numbers.")
            object.__setattr__(self, name, values)
        if min(self.feature_std) <= 0:
            raise PriorModelError("feature_std must be positive.")
        if self.lengthscale_mode == "network":
            self._check_layers()

    def _check_layers(self) -> None:
        width = len(FEATURES)
        if not self.layers:
            raise PriorModelError("A network prior needs its layers.")
        for i, layer in enumerate(self.layers):
            try:
                W, b = (np.asarray(part, dtype=np.float64) for part in layer)
            except (TypeError, ValueError) as e:
                raise PriorModelError(f"Layer {i} is not a pair of numeric arrays ({e}).") from e
            if W.ndim != 2 or W.shape[1] != width or b.shape != (W.shape[0],):
                raise PriorModelError(f"Layer {i} has shape {W.shape} / {b.shape}.")
            if not (np.isfinite(W).all() and np.isfinite(b).all()):
                raise PriorModelError(f"Layer {i} holds NaN or infinite weights.")
            if max(np.abs(W).max(initial=0.0), np.abs(b).max(initial=0.0)) > MAX_WEIGHT:
                raise PriorModelError(
                    f"Layer {i} holds weights beyond +-{MAX_WEIGHT:g}: not a trained prior "
                    "(pre-training keeps them small). Use the original file or pre-train again."
                )
            width = W.shape[0]
        if width != 2:
            raise PriorModelError(f"The network must output 2 numbers (a, b); it outputs {width}.")
        for kinds in (["continuous"], ["integer", "categorical"] * 4, ["continuous"] * 32):
            a, b = self.lengthscale_gammas(kinds)
            low, high = GAMMA_RANGE
            if not all(
                np.isfinite(v).all() and (v >= low).all() and (v <= high).all() for v in (a, b)
            ):
                raise PriorModelError(
                    f"The network gives lengthscale gammas outside [{low:g}, {high:g}] (for a "
                    f"space of {len(kinds)} columns): not a usable prior. Pre-train it again."
                )

    # --- use -----------------------------------------------------------------------------------
    @classmethod
    def shared(
        cls,
        lengthscale: tuple[float, float],
        outputscale: tuple[float, float],
        noise: tuple[float, float],
        trained_on: Mapping[str, Any] | None = None,
    ) -> PriorModel:
        """A given (not pre-trained) prior: one ``(a, b)`` Gamma for every lengthscale, and those
        of the signal and noise variances; ``trained_on`` says where the numbers come from."""
        width = len(FEATURES)
        return cls(
            "shared", [], [0.0] * width, [1.0] * width, lengthscale, outputscale, noise,
            dict(trained_on or {}),
        )  # fmt: skip

    def lengthscale_gammas(self, kinds: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
        r"""Gamma shape ``a`` and rate ``b`` of each dimension's lengthscale (``d`` each)."""
        context = dimension_context(kinds)
        if self.lengthscale_mode == "shared":
            a, b = self.shared_lengthscale
            return np.full(len(context), a), np.full(len(context), b)
        return network_gammas(self.layers, self.feature_mean, self.feature_std, context)

    def hyperprior(self, kinds: Sequence[str]):
        r"""The Gamma hyperprior (:func:`headstart._gp.hyperprior.gamma_hyperprior`) of a space with
        these column kinds."""
        from headstart._gp.hyperprior import gamma_hyperprior

        a, b = self.lengthscale_gammas(kinds)
        return gamma_hyperprior((tuple(a), tuple(b)), self.outputscale, self.noise)

    # --- files ---------------------------------------------------------------------------------
    def _model_json(self) -> dict[str, Any]:
        return {
            "lengthscale_mode": self.lengthscale_mode,
            "layers": [[np.asarray(W).tolist(), np.asarray(b).tolist()] for W, b in self.layers],
            "feature_mean": list(self.feature_mean),
            "feature_std": list(self.feature_std),
            "shared_lengthscale": list(self.shared_lengthscale),
            "outputscale": list(self.outputscale),
            "noise": list(self.noise),
            "trained_on": self.trained_on,
        }

    def to_json(self) -> dict[str, Any]:
        """``{"format", "version", "sha256", "model"}`` (see the module docstring)."""
        model = self._model_json()
        return {"format": FORMAT, "version": VERSION, "sha256": _digest(model), "model": model}

    @classmethod
    def from_json(cls, data: Any) -> PriorModel:
        """Rebuild a prior from :meth:`to_json`'s output, checking format, version and hash."""
        if not isinstance(data, Mapping) or data.get("format") != FORMAT:
            raise PriorModelError(
                f"Not a headstart MPHD prior (expected format {FORMAT!r}); create one with "
                "headstart.mphd.pretrain(...).save(path)."
            )
        if data.get("version") != VERSION:
            raise PriorModelError(
                f"This MPHD prior has version {data.get('version')!r}; this headstart reads "
                f"version {VERSION}. Pre-train it again with this headstart."
            )
        model = data.get("model")
        if not isinstance(model, Mapping) or data.get("sha256") != _digest(model):
            raise PriorModelError(
                "The MPHD prior's checksum does not match its content: the file was modified or "
                "truncated. Use the original file or pre-train again."
            )
        try:
            return cls(
                model["lengthscale_mode"],
                [tuple(layer) for layer in model["layers"]],
                model["feature_mean"],
                model["feature_std"],
                tuple(model["shared_lengthscale"]),
                tuple(model["outputscale"]),
                tuple(model["noise"]),
                dict(model.get("trained_on", {})),
            )
        except (KeyError, TypeError, ValueError) as e:
            raise PriorModelError(f"The MPHD prior is incomplete ({e!r}).") from e

    def save(self, path: str | Path) -> Path:
        """Write the prior as JSON to ``path`` (returned)."""
        path = Path(path)
        path.write_text(json.dumps(self.to_json(), indent=1))
        return path

    @classmethod
    def load(cls, path: str | Path) -> PriorModel:
        """Read a prior written by :meth:`save`."""
        try:
            data = json.loads(Path(path).read_text())
        except FileNotFoundError:
            raise PriorModelError(f"No MPHD prior file at {str(path)!r}.") from None
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
            raise PriorModelError(f"{str(path)!r} is not a readable MPHD prior file ({e}).") from e
        return cls.from_json(data)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, PriorModel) and self.to_json() == other.to_json()

    __hash__ = None  # type: ignore[assignment]


def _digest(model: Any) -> str:
    """SHA-256 of the canonical JSON of ``model`` ("" if it is not strict JSON, e.g. has NaN)."""
    try:
        canonical = json.dumps(model, sort_keys=True, separators=(",", ":"), allow_nan=False)
    except (TypeError, ValueError):
        return ""
    return hashlib.sha256(canonical.encode()).hexdigest()


__all__ = ["FORMAT", "LENGTHSCALE_MODES", "VERSION", "PriorModel", "network_gammas"]
