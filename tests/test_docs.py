"""The guides under docs/ run as written: python blocks execute, py recipes compile."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

DOCS = Path(__file__).resolve().parents[1] / "docs"


def _blocks(path: Path, lang: str) -> list[str]:
    return re.findall(rf"```{lang}\n(.*?)```", path.read_text(), flags=re.S)


def test_distributed_guide_runs(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    [code] = _blocks(DOCS / "distributed.md", "python")
    namespace: dict = {}
    exec(compile(code, "distributed.md", "exec"), namespace)
    study = namespace["study"]
    assert len(study.trials) == 8
    assert all(t.state == "complete" for t in study.trials)
    assert len({tuple(t.params.values()) for t in study.trials}) == 8


@pytest.mark.parametrize("index", range(2))
def test_distributed_guide_cluster_recipes_compile(index):
    compile(_blocks(DOCS / "distributed.md", "py")[index], f"distributed.md[{index}]", "exec")
