"""Every command in README.md runs as written (python blocks in order, then the CLI lines)."""

from __future__ import annotations

import math
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()
HEADSTART = str(Path(sys.executable).with_name("headstart"))


def blocks(lang: str) -> list[str]:
    return re.findall(rf"```{lang}\n(.*?)```", README, flags=re.S)


def test_python_blocks_run_in_order(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    namespace: dict = {}
    for code in blocks("python"):
        exec(compile(code, "README.md", "exec"), namespace)
    study = namespace["study"]
    assert len(study.trials) == 30 + 5 + 1 + 1
    new = namespace["new"]
    assert len(new.trials) == 10 and set(new.transfer_report().weights) == {"model-v1", "model-v2"}
    assert len(namespace["fresh"].trials) == 8 and namespace["elsewhere"].ask().params
    assert {s["name"].split("+")[0] for s in namespace["prior"].trained_on["spaces"]} >= {
        "svm-v1",
        "tree-v1",
    }
    deep = namespace["deep"]
    assert len(deep.trials) == 6 and deep.transfer_report().head["active_basis"] == 6
    guided = namespace["guided"]
    assert len(guided.trials) == 20 and 0 < guided.prior_weight() < 2.0
    assert guided.trials[0].params["optimizer"] == "adam"  # the design starts at the prior's mode
    assert len(namespace["both"].trials) == 1 and namespace["both"].belief is not None
    result = namespace["result"]
    assert len(result.history) == 10 and "[0]" in result.expression
    assert namespace["auto"].kernel_expression is not None
    assert (tmp_path / "headstart.db").exists()


def test_cli_lines_run(tmp_path):
    env = {**os.environ, "HEADSTART_STORAGE": f"sqlite:///{tmp_path / 'cli.db'}"}
    seed = "import headstart as hs; hs.create_study('my-model', hs.SearchSpace({'x': hs.Float(0, 1)}), storage=None)"
    subprocess.run([sys.executable, "-c", seed], check=True, cwd=tmp_path, env=env)
    lines = [
        line.split("#")[0].strip()
        for block in blocks("bash")
        for line in block.splitlines()
        if line.startswith("headstart ")
    ]
    assert len(lines) >= 7
    # The studies commands need a study called my-model in the storage: the demo makes one.
    subprocess.run(
        [HEADSTART, "demo", "--trials", "6", "--name", "my-model", "--plot", "x.png"],
        check=True,
        cwd=tmp_path,
        env=env,
        capture_output=True,
    )
    transfer = (
        "import headstart as hs; space = hs.SearchSpace({'x': hs.Float(0, 1)}); "
        "old = hs.create_study('model-v1', space, method='random'); "
        "[old.tell(old.ask(), 0.1 * i) for i in range(5)]; "
        "new = hs.create_study('model-v3', space, method='scaml', transfer_from='all'); "
        "new.tell(new.ask(), 1.0)"
    )
    subprocess.run([sys.executable, "-c", transfer], check=True, cwd=tmp_path, env=env)
    (tmp_path / "train.py").write_text(  # the worker line's objective (module:function)
        "def objective(params):\n    return sum(v * v for v in params.values())\n"
    )
    years = [1949 + i / 12 for i in range(48)]
    rows = [f"{t},{100 + 20 * (t - 1949) + 25 * math.sin(2 * math.pi * t)}" for t in years]
    (tmp_path / "airline.csv").write_text("year,passengers\n" + "\n".join(rows) + "\n")
    for line in lines:
        args = shlex.split(line)
        result = subprocess.run(
            [HEADSTART, *args[1:]], cwd=tmp_path, env=env, capture_output=True, text=True
        )
        assert result.returncode == 0, f"{line}\n{result.stdout}\n{result.stderr}"


@pytest.mark.parametrize("target", ["demo", "test"])
def test_make_targets_exist(target):
    result = subprocess.run(["make", "-n", target], cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
