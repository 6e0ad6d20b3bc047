"""The name -> object registries of the benchmark harness (tasks, methods): add and look up."""

from __future__ import annotations

from typing import TypeVar

from headstart.exceptions import InvalidSettingError

T = TypeVar("T")


def add(registry: dict[str, T], kind: str, name: str, value: T, *, overwrite: bool) -> None:
    """``registry[name] = value``; a taken name raises unless ``overwrite``."""
    if name in registry and not overwrite:
        raise InvalidSettingError(
            f"A {kind} named {name!r} is already registered; pick another name or pass "
            "overwrite=True."
        )
    registry[name] = value


def look_up(registry: dict[str, T], kind: str, name: str) -> T:
    """``registry[name]``; an unknown name raises, listing the valid ones."""
    try:
        return registry[name]
    except (KeyError, TypeError):
        raise InvalidSettingError(
            f"Unknown benchmark {kind} {name!r}; choose one of {', '.join(sorted(registry))} "
            f"(or add one with headstart.benchmarks.register_{kind})."
        ) from None
