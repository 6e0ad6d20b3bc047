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


def write_rows(path: str | Path, fields: Sequence[str], rows: Sequence[Mapping[str, Any]]) -> None:
    """Write ``rows`` under a header of ``fields`` to ``path``, replacing the file."""
    with open(path, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(fields))
        writer.writeheader()
        writer.writerows(rows)


def unpack(csv_path: Path) -> bool:
    """Decompress ``<csv_path>.gz`` to ``csv_path`` when only the former exists (committed
    results are gzipped: 1.3 MB instead of 7.7 for the real-objective suite); whether it did."""
    import gzip
    import shutil

    packed = csv_path.with_name(csv_path.name + ".gz")
    if csv_path.exists() or not packed.exists():
        return False
    with gzip.open(packed, "rb") as src, open(csv_path, "wb") as dst:
        shutil.copyfileobj(src, dst)
    return True


def pack(csv_path: Path) -> Path:
    """Write ``<csv_path>.gz`` (byte-reproducible: no name or time in the header)."""
    import gzip

    packed = csv_path.with_name(csv_path.name + ".gz")
    data = csv_path.read_bytes()  # first: a missing file must not truncate an existing archive
    with open(packed, "wb") as raw, gzip.GzipFile("", "wb", 9, raw, mtime=0) as dst:
        dst.write(data)
    return packed


__all__ = ["append_row", "pack", "read_rows", "unpack"]
