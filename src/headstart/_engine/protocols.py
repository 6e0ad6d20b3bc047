r"""The seam between the BO engine and its models: ``Posterior``, ``Surrogate``, ``ModelCache``.

Every model of headstart -- the exact Matérn GP (:mod:`headstart._gp`), the searched-kernel GP
(:mod:`headstart.kernels.surrogate`), ScaML-GP, RGPE, StackGP and the multi-task GP
(:mod:`headstart._transfer`) -- implements :class:`Surrogate`; :class:`~headstart._engine.engine.
BOEngine` is written against these protocols only, so a new model (a neural surrogate, a GP with
learned hyperpriors) plugs in without touching the loop. ``headstart.testing.surrogates`` holds the
conformance suite every implementation passes.

Conventions (all arrays numpy ``float64``):

* inputs ``X`` are ``m x d`` points of the encoded unit cube ``[0, 1]^d``;
* targets are to be **maximized**; a posterior speaks in its own units (for example standardized
  ``y``), and :meth:`Surrogate.condition` returns the training targets in those units;
* variances are of the latent ``f`` unless :attr:`Posterior.includes_noise` says otherwise.
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

import numpy as np


@runtime_checkable
class Posterior(Protocol):
    r"""A model's predictive distribution of the latent objective ``f`` given the data.

    Attributes:
        outputscale: Prior variance scale of ``f`` (jitter and sample scales are relative to it).
        lengthscales: ``d`` characteristic lengthscales for preconditioning the acquisition
            search, or ``None`` when the model has none (the engine then uses a default).
        includes_noise: ``True`` when :meth:`posterior` returns the variance of a new
            *observation* ``y`` rather than of ``f``.
        screening_points: Optional. How many Sobol points the acquisition search screens
            (default :data:`headstart._engine.optimize.N_SOBOL`); a posterior that is costly per
            point may ask for fewer.
        search_starts: Optional. How many local searches the acquisition search runs from the
            screened points (default :data:`headstart._engine.optimize.N_STARTS`).
        min_separation: Optional. A candidate within this distance of an evaluated point in
            every column (unit cube) counts as a duplicate of it (default: only exact
            duplicates). A model on a small finite basis, whose predictive variance barely
            changes near an evaluated point, sets it so that it does not re-propose one spot.

    Optional method ``focus(X) -> Posterior``: a posterior that approximates in a way that is
    not smooth (ABRAC's past its exact block, :meth:`headstart._transfer.neural_residual.
    ResidualPosterior.focus`) may return a smooth one for the region around the starts ``X``
    of the local search, which then climbs it; the search's end points are scored with this
    posterior again.
    """

    outputscale: float
    lengthscales: np.ndarray | None
    includes_noise: bool

    def posterior(self, X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Marginal mean and variance at ``X`` (``m x d``): ``(m, m)``, variance ``>= 1e-12``;
        row ``i`` depends on ``X[i]`` only (the search asks for its screening in chunks)."""
        ...

    def posterior_and_grad(
        self, X: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """``(mean m, var m, dmean/dX m x d, dvar/dX m x d)``; row ``i`` depends on ``X[i]`` only.

        Categorical columns may have gradient 0 (the search treats them discretely).
        """
        ...

    def joint_posterior(self, X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Joint mean (``m``) and covariance (``m x m``, symmetric PSD up to rounding) at ``X``."""
        ...


@runtime_checkable
class Surrogate(Protocol):
    r"""A model the engine conditions on the data before every suggestion.

    Attributes:
        informative_prior: ``True`` when the model's prior already says where to look before any
            observation of this task (transfer models); without data the engine then maximizes
            UCB on the prior instead of drawing a uniform point.
    """

    informative_prior: bool

    def condition(
        self, train_X: np.ndarray, train_y: np.ndarray, rng: np.random.Generator
    ) -> tuple[Posterior, np.ndarray]:
        r"""Fit (or refit) to the data and return the posterior.

        Args:
            train_X: ``n x d`` points in ``[0, 1]`` (``n`` may be 0 for informative priors).
            train_y: ``n`` finite values to be maximized, in the user's units (sign-flipped for
                minimize studies).
            rng: The only source of randomness (for sampled quantities such as RGPE's weights).

        Returns:
            ``(posterior, y_model)``: the posterior and the ``n`` training targets in its units.
        """
        ...

    def state(self) -> dict[str, Any]:
        """JSON-serializable warm-start state (for example the last fitted hyperparameters)."""
        ...

    def load_state(self, state: dict[str, Any]) -> None:
        """Restore :meth:`state`'s output; unknown or stale state is ignored."""
        ...

    def diagnostics(self) -> dict[str, Any]:
        """What the last :meth:`condition` learned, for reports (weights, hyperparameters...)."""
        ...


@runtime_checkable
class FantasizingPosterior(Posterior, Protocol):
    r"""A posterior that can condition on more observations without a refit (optional).

    The engine conditions on pending points (other workers' running trials, earlier points of a
    batch) through :meth:`fantasize`; posteriors without it make the engine refit the surrogate
    on the data plus the pending points at the worst observed value (the constant liar).
    """

    def fantasize(self, X: np.ndarray, y: np.ndarray) -> Posterior:
        """This posterior after also observing ``y`` (in its own units) at ``X`` (``p x d``),
        at the same hyperparameters."""
        ...


@runtime_checkable
class ModelCache(Protocol):
    """Key / JSON-value store for fitted meta-models (a storage offers one; engines see only this)."""

    def get_cache(self, key: str) -> Any | None:
        """The JSON value stored under ``key``, or ``None``."""
        ...

    def put_cache(self, key: str, kind: str, value: Any) -> None:
        """Store ``value`` (JSON) under ``key``; ``kind`` labels it for humans."""
        ...


SEARCH_SETTINGS = ("screening_points", "search_starts")
"""The optional attributes of :class:`Posterior` that set the acquisition search's effort."""


def with_search(posterior: Any, settings: Any) -> Any:
    """``posterior`` with the search settings (:data:`SEARCH_SETTINGS`) that ``settings`` has (a
    posterior or a dict), so that a fantasy or a wrapper searches as the posterior it came from."""
    source = settings if isinstance(settings, dict) else vars(settings)
    for name in SEARCH_SETTINGS:
        if name in source:
            setattr(posterior, name, source[name])
    return posterior


def focus_of(posterior: Any, X: np.ndarray) -> Any:
    """``posterior``'s smooth stand-in around the local search's starts ``X`` (its optional
    ``focus``, :class:`Posterior`), or ``posterior`` itself when it has none."""
    focus = getattr(posterior, "focus", None)
    return posterior if focus is None else focus(X)


def cheapest_search(posterior: Any, parts: Any) -> Any:
    """``posterior`` (a combination of ``parts``: several outputs, a model average) with each
    search setting that some part sets, at the smallest value among them (the costliest part's
    budget), so the combination is searched no harder than any part asks."""
    for name in SEARCH_SETTINGS:
        asked = [getattr(p, name) for p in parts if hasattr(p, name)]
        if asked:
            setattr(posterior, name, min(asked))
    return posterior


__all__ = [
    "SEARCH_SETTINGS",
    "FantasizingPosterior",
    "ModelCache",
    "Posterior",
    "Surrogate",
    "cheapest_search",
    "focus_of",
    "with_search",
]
