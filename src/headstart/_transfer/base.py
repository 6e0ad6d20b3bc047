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
    is_cat: np.ndarray  # d mask of categorical columns
    deterministic: bool = False  # pin the test GP's noise

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
        from headstart._gp.fit_settings import SE_COORDS

        return {"target": self._target_params.to_raw(SE_COORDS).tolist()}

    def load_state(self, state: dict[str, Any]) -> None:
        raw = state.get("target")
        if raw is not None:
            from headstart._gp.fit_settings import SE_COORDS
            from headstart._gp.params import GPParams

            self._target_params = GPParams.from_raw(np.asarray(raw, dtype=np.float64), SE_COORDS)

    def _test_data(self, X_t: np.ndarray, y_t: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``(X_t as n x d float64, y_t as n float64)`` of ``condition``'s arguments, refused
        (:class:`~headstart.InvalidValueError`) if any entry is NaN or infinite."""
        from headstart._engine.numerics import check_training_data

        check_training_data(X_t, y_t)
        X_t = np.asarray(X_t, dtype=np.float64).reshape(-1, len(self.is_cat))
        return X_t, np.asarray(y_t, dtype=np.float64).reshape(-1)

    def _refit_target(
        self, X_t: np.ndarray, z: np.ndarray, rng: np.random.Generator, mean: float, std: float
    ) -> Any:
        """The test GP on standardized ``z`` (``y = mean + std z``), warm-started from the last fit:
        a one-GP :class:`~headstart._gp.batched.BatchedGP` (RGPE, StackGP)."""
        from headstart._gp.batched import BatchedGP
        from headstart._transfer._common import fit_se_gp

        self._target_params = fit_se_gp(
            X_t, z, self.is_cat, rng=rng, init=self._target_params, deterministic=self.deterministic
        )
        return BatchedGP.build(
            [X_t], [z], self.is_cat, self._target_params, y_mean=[mean], y_std=[std]
        )

    def diagnostics(self) -> dict[str, Any]:
        """``{"weights": report(), "residual_variance": ...}`` of the last ``condition``."""
        return {"weights": self.report(), "residual_variance": self.residual_variance()}
