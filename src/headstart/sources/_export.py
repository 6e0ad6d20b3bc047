r"""A study as one JSON document (``headstart studies export NAME --json FILE``), and back.

The document is self-describing, so ``add_trials``, ``transfer_from`` and ``headstart import``
need nothing else::

    {"format": "headstart-study/1", "name": ..., "direction": "minimize" | "maximize",
     "space": SearchSpace.to_json(), "user_attrs": {...},
     "trials": [{"number", "state", "params", "value", "source", "user_attrs"}, ...]}

Only complete trials carry a value that is read back; failed, running and waiting ones are kept
in the document for the record.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import numpy as np

from headstart._meta import MetaTask, _check_direction
from headstart.exceptions import EmptySourceError, InvalidParamsError, SourceFileError
from headstart.sources._task import _check_space
from headstart.space import SearchSpace

FORMAT = "headstart-study/1"


def export_document(
    name: str, direction: str, space: SearchSpace, trials: list, user_attrs: dict | None = None
) -> dict[str, Any]:
    """The JSON document of a study (``trials``: :class:`~headstart.study.Trial` objects)."""
    return {
        "format": FORMAT,
        "name": name,
        "direction": direction,
        "space": space.to_json(),
        "user_attrs": dict(user_attrs or {}),
        "trials": [
            {
                "number": t.number,
                "state": t.state,
                "params": t.params,
                "value": t.value,
                "source": t.source,
                "user_attrs": dict(t.user_attrs),
            }
            for t in trials
        ],
    }


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    keys = [k for k, _ in pairs]
    twice = sorted({k for k in keys if keys.count(k) > 1})
    if twice:
        raise ValueError(f"key(s) {twice} appear twice in one object; which one is meant?")
    return dict(pairs)


def read_json_file(path: str | os.PathLike) -> Any:
    """A JSON file's content; an object with a key given twice is refused (JSON parsers keep
    one of them silently).

    Raises:
        SourceFileError: the file is missing, not UTF-8 JSON, or repeats a key.
    """
    path = Path(path)
    try:
        return json.loads(path.read_text(encoding="utf-8"), object_pairs_hook=_unique_keys)
    except FileNotFoundError as e:
        raise SourceFileError(f"No file {str(path)!r}; check the path.") from e
    except (ValueError, UnicodeDecodeError, OSError) as e:  # JSONDecodeError is a ValueError
        raise SourceFileError(f"{str(path)!r} is not a valid JSON file ({e}).") from e


_EXPORT_KEYS = {"name": str, "direction": str, "space": dict, "trials": list}


def read_export(path: str | os.PathLike) -> dict[str, Any]:
    """Read and check an exported study document.

    Raises:
        SourceFileError: the file is missing, not JSON, or not a headstart study export (its
            keys and each trial's ``params`` are checked).
    """
    doc = read_json_file(path)
    path = Path(path)
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise SourceFileError(
            f"{str(path)!r} is not a headstart study export (format {FORMAT!r}); write one with "
            "`headstart studies export NAME --json FILE`."
        )
    wrong = [k for k, kind in _EXPORT_KEYS.items() if not isinstance(doc.get(k), kind)]
    if wrong:
        raise SourceFileError(
            f"{str(path)!r} is a damaged study export: {wrong} missing or of the wrong type "
            f"(expected {', '.join(f'{k}: {_EXPORT_KEYS[k].__name__}' for k in wrong)}). "
            "Export the study again."
        )
    for i, trial in enumerate(doc["trials"]):
        if not isinstance(trial, dict) or not isinstance(trial.get("params"), dict):
            raise SourceFileError(
                f"{str(path)!r} is a damaged study export: trial {i} has no 'params' object."
            )
    _check_direction(doc["direction"])
    return doc


def completed_pairs(doc: dict[str, Any]) -> list[tuple[dict, float]]:
    """``(params, value)`` of the document's complete trials."""
    return [(t["params"], t["value"]) for t in doc["trials"] if t.get("state") == "complete"]


def from_export(path: str | os.PathLike, space: SearchSpace) -> MetaTask:
    """One meta-task from an exported study (its own direction is kept).

    Raises:
        SourceFileError: see :func:`read_export`.
        SourceSpaceMismatchError: the export's space is not the target's.
        EmptySourceError: no complete trial.
    """
    doc = read_export(path)
    if doc.get("directions"):
        raise SourceFileError(
            f"Export {str(path)!r} holds a study with several objectives; transfer models take "
            "one value per configuration, so it cannot be a source yet."
        )
    _check_space(SearchSpace.from_json(doc["space"]), space, f"export {doc['name']!r}")
    pairs = completed_pairs(doc)
    if not pairs:
        raise EmptySourceError(f"Export {str(path)!r} has no complete trial to transfer from.")
    try:
        configs = [space.validate(params) for params, _ in pairs]
    except InvalidParamsError as e:
        raise SourceFileError(f"Export {str(path)!r} holds an invalid trial: {e}") from e
    values = np.asarray([value for _, value in pairs], dtype=np.float64)
    return MetaTask(doc["name"], space.encode(configs), values, doc["direction"])


__all__ = [
    "FORMAT",
    "completed_pairs",
    "export_document",
    "from_export",
    "read_export",
    "read_json_file",
]
