r"""The ``kernel=`` and ``kernel_search=`` settings of a study, checked without loading torch."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from headstart.exceptions import InvalidSettingError
from headstart.kernels.grammar import SPACES, parse


@dataclass(frozen=True)
class KernelSearchSettings:
    """How often and how hard ``kernel="auto"`` searches.

    Attributes:
        every: Re-run the search after this many new observations (default 10).
        budget: Kernels scored per search (default 20).
        space: ``"se-rq"`` (default; smooth objectives) or ``"full"`` (adds LIN and PER).
        restarts: MAP restarts per scored kernel and per refit (default 3).
        ea_steps: BOSOT's EA generations (default 6).
    """

    every: int = 10
    budget: int = 20
    space: str = "se-rq"
    restarts: int = 3
    ea_steps: int = 6

    @classmethod
    def from_mapping(cls, options: Mapping | None) -> KernelSearchSettings:
        options = dict(options or {})
        unknown = sorted(set(options) - set(cls.__dataclass_fields__))
        if unknown:
            raise InvalidSettingError(
                f"Unknown kernel_search option(s) {unknown}; use {sorted(cls.__dataclass_fields__)}."
            )
        settings = cls(**options)
        for name in ("every", "budget", "restarts", "ea_steps"):
            v = getattr(settings, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise InvalidSettingError(
                    f"kernel_search[{name!r}] must be an integer >= 1; got {v!r}."
                )
        if settings.space not in SPACES:
            raise InvalidSettingError(
                f"kernel_search['space'] must be one of {sorted(SPACES)}; got {settings.space!r}."
            )
        return settings

    def to_json(self) -> dict:
        return dict(self.__dict__)


def check_kernel(kernel: str, kinds: Sequence[str]) -> str:
    """Validate ``kernel`` for columns of these ``kinds``; returns its canonical text.

    ``"matern"`` suits any space; ``"auto"`` and expressions (over ``len(kinds)`` inputs) need
    numeric columns only.
    """
    if not isinstance(kernel, str):
        raise InvalidSettingError(
            f"kernel must be 'matern', 'auto' or an expression like 'SE[0] * SE[1]'; got {kernel!r}."
        )
    if kernel == "matern":
        return kernel
    if "categorical" in kinds:
        raise InvalidSettingError(
            f"kernel={kernel!r} supports numeric parameters only; this space has categorical "
            "ones. Use kernel='matern' (the default)."
        )
    return kernel if kernel == "auto" else str(parse(kernel, len(kinds)))


__all__ = ["KernelSearchSettings", "check_kernel"]
