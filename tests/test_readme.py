"""Every command in README.md runs as written (python blocks in order, then the CLI lines)."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from headstart.cli import app

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()
HEADSTART = str(Path(sys.executable).with_name("headstart"))


def blocks(lang: str) -> list[str]:
    return re.findall(rf"```{lang}\n(.*?)```", README, flags=re.S)


def test_python_blocks_then_cli_lines_run_as_written(tmp_path, monkeypatch):
    """The python blocks in order, then every CLI line, in one directory and storage: the
    studies, the Optuna storage and train.py the CLI lines use are the ones the README creates."""
    monkeypatch.chdir(tmp_path)
    namespace: dict = {}
    for code in blocks("python"):
        exec(compile(code, "README.md", "exec"), namespace)
    study = namespace["study"]
    assert len(study.trials) == 30 + 5 + 1 + 1
    assert len(namespace["copy"].trials) == 36 and study.user_attrs == {"dataset": "iris"}
    new = namespace["new"]
    assert len(new.trials) == 10 and set(new.transfer_report().weights) == {"model-v1", "model-v2"}
    assert len(namespace["fresh"].trials) == 8 and namespace["elsewhere"].ask().params
    assert {s["name"].split("+")[0] for s in namespace["prior"].trained_on["spaces"]} >= {
        "svm-v1",
        "tree-v1",
    }
    deep = namespace["deep"]
    head = deep.transfer_report().head  # ABRAC's default: one precision on all 20, the residual
    assert len(deep.trials) == 6 and head["active_basis"] == 20 and "residual" in head
    guided = namespace["guided"]
    assert len(guided.trials) == 20 and 0 < guided.prior_weight() < 2.0
    assert guided.trials[0].params["optimizer"] == "adam"  # the design starts at the prior's mode
    assert len(namespace["both"].trials) == 1 and namespace["both"].belief is not None
    result = namespace["result"]
    assert len(result.history) == 10 and "[0]" in result.expression
    assert namespace["auto"].kernel_expression is not None
    tuned, warm = namespace["tuned"], namespace["warm"]
    assert len(tuned.trials) == 20 and len(warm.trials) == 5
    assert {t.state.name for t in tuned.trials} <= {"COMPLETE", "PRUNED"}
    assert "headstart:params" in warm.trials[0].system_attrs  # modelled from the first trial
    assert (tmp_path / "headstart.db").exists() and (tmp_path / "report.html").exists()
    pareto, limited = namespace["pareto"], namespace["limited"]
    assert len(pareto.trials) == 8 and namespace["front"] and namespace["volume"] > 0
    assert len(limited.trials) == 8 and namespace["best_feasible"].feasible

    storage = {"HEADSTART_STORAGE": f"sqlite:///{tmp_path / 'headstart.db'}"}
    lines = [
        line.split("#")[0].strip()
        for block in blocks("bash")
        for line in block.splitlines()
        if line.startswith("headstart ")
    ]
    assert len(lines) >= 15
    # The first line through the installed console script; the others in this process (the
    # same Typer app the script calls, without a fresh interpreter and torch import each).
    first = subprocess.run(
        [HEADSTART, *shlex.split(lines[0])[1:]],
        cwd=tmp_path,
        env={**os.environ, **storage},
        capture_output=True,
        text=True,
    )
    assert first.returncode == 0, f"{lines[0]}\n{first.stdout}\n{first.stderr}"
    runner = CliRunner()
    monkeypatch.setattr(sys, "path", list(sys.path))  # `headstart worker` puts the cwd first
    monkeypatch.setitem(sys.modules, "train", None)  # ...and imports train.py from it
    del sys.modules["train"]
    for line in lines[1:]:
        result = runner.invoke(app, shlex.split(line)[1:], env=storage)
        assert result.exit_code == 0, f"{line}\n{result.output}\n{result.exception!r}"
        assert "no results for" not in result.output, line
    assert (tmp_path / "airline.csv").read_text().startswith("year,passengers\n1949.0000,112")


@pytest.mark.parametrize("target", ["demo", "test", "test-avx2"])
def test_make_targets_exist(target):
    result = subprocess.run(["make", "-n", target], cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
