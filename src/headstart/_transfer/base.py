r"""What every transfer surrogate shares as a :class:`~headstart._engine.protocols.Surrogate`.

Transfer surrogates fit their meta part once (at construction) and re-learn the test part on every
``condition``; their prior is informative before the first observation. Subclasses define
``condition`` and ``report`` (each source's weight); ``diagnostics`` adds what else they learned.
"""

from __future__ import annotations

from typing import Any

import numpy as np


class TransferSurrogate:
    """Base class: informative prior, no warm-start state, diagnostics from :meth:`report`."""

    informative_prior = True

    def report(self) -> dict[str, float]:  # pragma: no cover - every subclass overrides it
        raise NotImplementedError

    def residual_variance(self) -> float | None:
        """Signal variance of the part not explained by the sources (``None``: not modelled)."""
        return None

    _target_params: Any = None  # the test GP's last MAP fit (RGPE, StackGP): the warm start

    def state(self) -> dict[str, Any]:
        """The test GP's last hyperparameters (raw form), so a resumed study warm-starts alike."""
        if self._target_params is None:
            return {}
        return {"target": self._target_params.to_raw().tolist()}

    def load_state(self, state: dict[str, Any]) -> None:
        raw = state.get("target")
        if raw is not None:
            from headstart._transfer.metafit import MetaGPParams

            self._target_params = MetaGPParams.from_raw(np.asarray(raw, dtype=np.float64))

    def diagnostics(self) -> dict[str, Any]:
        """``{"weights": report(), "residual_variance": ...}`` of the last ``condition``."""
        return {"weights": self.report(), "residual_variance": self.residual_variance()}
