"""The headstart CLI, run as a user would: a subprocess on a temporary SQLite file."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import headstart as hs

HEADSTART = str(Path(sys.executable).with_name("headstart"))


def run(
    *args: str, storage: str, cwd: Path, input: str | None = None
) -> subprocess.CompletedProcess:
    env = {**os.environ, "HEADSTART_STORAGE": storage}
    return subprocess.run(
        [HEADSTART, *args], cwd=cwd, env=env, capture_output=True, text=True, input=input
    )


@pytest.fixture
def storage(tmp_path) -> str:
    url = f"sqlite:///{tmp_path / 'cli.db'}"
    space = hs.SearchSpace({"x": hs.Float(0, 1), "c": hs.Categorical(["a", "b"])})
    study = hs.create_study("s1", space, storage=url, method="random", seed=0)
    study.optimize(lambda p: p["x"] + (p["c"] == "b"), 4, show_progress=False)
    return url


def test_help_explains_every_command(tmp_path, storage):
    out = run("--help", storage=storage, cwd=tmp_path).stdout
    for command in ("demo", "studies", "bench"):
        assert command in out
    for sub in ("studies", "demo"):
        text = run(sub, "--help", storage=storage, cwd=tmp_path).stdout
        assert "--storage" in text or "list" in text


def test_demo_writes_plot_and_reports_storage(tmp_path, storage):
    result = run("demo", "--trials", "8", "--plot", "conv.png", storage=storage, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "conv.png").stat().st_size > 1000
    assert "cli.db" in result.stderr and "demo-branin-1" in result.stderr
    again = run("demo", "--trials", "2", "--plot", "c2.png", storage=storage, cwd=tmp_path)
    assert "demo-branin-2" in again.stderr  # a fresh study each time


def test_studies_list_show_export_delete(tmp_path, storage):
    listing = run("studies", "list", storage=storage, cwd=tmp_path)
    assert listing.returncode == 0 and "s1" in listing.stdout
    show = run("studies", "show", "s1", "--plot", "s1.png", storage=storage, cwd=tmp_path)
    assert show.returncode == 0 and "best" in show.stdout and (tmp_path / "s1.png").exists()
    csv = run("studies", "export", "s1", "--csv", "-", storage=storage, cwd=tmp_path)
    assert csv.stdout.splitlines()[0].startswith("number,state,value,source,params_x,params_c")
    assert len(csv.stdout.splitlines()) == 5
    as_json = json.loads(
        run("studies", "export", "s1", "--json", storage=storage, cwd=tmp_path).stdout
    )
    assert len(as_json) == 4
    run("studies", "export", "s1", "--csv", "out.csv", storage=storage, cwd=tmp_path)
    assert (tmp_path / "out.csv").exists()
    refused = run("studies", "delete", "s1", storage=storage, cwd=tmp_path, input="n\n")
    assert (
        refused.returncode == 1
        and "s1" in run("studies", "list", storage=storage, cwd=tmp_path).stdout
    )
    deleted = run("studies", "delete", "s1", "--yes", storage=storage, cwd=tmp_path)
    assert (
        deleted.returncode == 0
        and "s1" not in run("studies", "list", storage=storage, cwd=tmp_path).stdout
    )


def test_errors_are_one_line_with_exit_code_1(tmp_path, storage):
    result = run("studies", "show", "nope", storage=storage, cwd=tmp_path)
    assert result.returncode == 1
    assert (
        "error:" in result.stderr and "nope" in result.stderr and "Traceback" not in result.stderr
    )
    bad = run("studies", "list", storage="notadb://x", cwd=tmp_path)
    assert bad.returncode == 1 and "error:" in bad.stderr
    usage = run("demo", "--trials", "0", storage=storage, cwd=tmp_path)
    assert usage.returncode == 2


def test_studies_list_on_a_missing_file_says_so_and_creates_nothing(tmp_path, storage):
    typo = tmp_path / "typo.db"
    result = run("studies", "list", "--storage", f"sqlite:///{typo}", storage=storage, cwd=tmp_path)
    assert result.returncode == 1
    assert "no database" in result.stderr.lower() and "typo.db" in result.stderr
    assert not typo.exists()
