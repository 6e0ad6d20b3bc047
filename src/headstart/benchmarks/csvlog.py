r"""Resumable result logs of the benchmark scripts: one CSV row appended per finished run."""

from __future__ import annotations

import csv
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any


def read_rows(path: str | Path) -> list[dict[str, str]]:
    """The rows logged so far (an empty list when the file does not exist yet)."""
    path = Path(path)
    if not path.exists():
        return []
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def append_row(path: str | Path, fields: Sequence[str], row: Mapping[str, Any]) -> dict[str, str]:
    """Append ``row`` (writing the header first for a new file); returns it as read back."""
    path = Path(path)
    new = not path.exists()
    with open(path, "a", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(fields))
        if new:
            writer.writeheader()
        writer.writerow(row)
    return {k: str(v) for k, v in row.items()}


__all__ = ["append_row", "read_rows"]
