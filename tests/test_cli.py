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
        run("studies", "export", "s1", "--json", "-", storage=storage, cwd=tmp_path).stdout
    )
    assert as_json["format"] == "headstart-study/1" and len(as_json["trials"]) == 4
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


def test_export_import_and_report_round_trip(tmp_path, storage):
    assert (
        run(
            "studies",
            "export",
            "s1",
            "--json",
            "s1.json",
            "--csv",
            "s1.csv",
            storage=storage,
            cwd=tmp_path,
        ).returncode
        == 0
    )
    other = f"sqlite:///{tmp_path / 'other.db'}"
    imported = run("import", "json", "s1.json", "--storage", other, storage=storage, cwd=tmp_path)
    assert imported.returncode == 0 and "Imported 4 complete and 0 failed trials" in imported.stderr
    space = tmp_path / "space.json"
    space.write_text(json.dumps(hs.load_study("s1", storage).space.to_json()))
    from_csv = run(
        "import",
        "csv",
        "s1.csv",
        "--space",
        "space.json",
        "--name",
        "again",
        "--storage",
        other,
        storage=storage,
        cwd=tmp_path,
    )
    assert from_csv.returncode == 0
    again = hs.load_study("again", other)
    assert [t.params for t in again.trials] == [t.params for t in hs.load_study("s1", other).trials]
    twice = run("import", "json", "s1.json", "--storage", other, storage=storage, cwd=tmp_path)
    assert twice.returncode == 1 and "already exists" in twice.stderr
    # the exports are what add_trials and transfer_from take
    fresh = hs.create_study("fresh", again.space, storage=None)
    assert len(fresh.add_trials(str(tmp_path / "s1.json"))) == 4
    assert len(fresh.add_trials(tmp_path / "s1.csv")) == 4
    scaml = hs.create_study(
        "t",
        again.space,
        storage=None,
        method="scaml",
        transfer_from=[tmp_path / "s1.json", str(tmp_path / "s1.csv")],
    )
    assert scaml.settings["transfer"]["n_points"] == [4, 4]
    html = run("report", "s1", "-o", "r.html", storage=storage, cwd=tmp_path)
    assert html.returncode == 0 and (tmp_path / "r.html").read_text().count("<img") >= 4


def test_import_optuna_reads_without_writing_and_refuses_it_as_a_storage(tmp_path, storage):
    optuna = pytest.importorskip("optuna")
    url = f"sqlite:///{tmp_path / 'optuna.db'}"
    old = optuna.create_study(study_name="svm", storage=url, direction="maximize")
    old.optimize(lambda t: t.suggest_float("c", 1e-3, 1e3, log=True) ** 0.1, n_trials=5)
    as_storage = run("studies", "list", "--storage", url, storage=storage, cwd=tmp_path)
    assert as_storage.returncode == 1 and "Optuna storage" in as_storage.stderr
    done = run("import", "optuna", "--from", url, storage=storage, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    study = hs.load_study("svm", storage)
    assert study.direction == "maximize" and len(study.trials) == 5
    assert study.space["c"].log and study.best_value == pytest.approx(old.best_value)


def test_import_optuna_keeps_every_objective_and_the_constraints(tmp_path, storage):
    optuna = pytest.importorskip("optuna")
    url = f"sqlite:///{tmp_path / 'optuna.db'}"
    sampler = optuna.samplers.TPESampler(  # stores the constraints as Optuna does
        seed=0, constraints_func=lambda t: [t.params["x"] - 0.5]
    )
    old = optuna.create_study(
        study_name="mo", storage=url, directions=["minimize", "maximize"], sampler=sampler
    )
    old.optimize(lambda t: (t.suggest_float("x", 0, 1), 1 - t.params["x"] ** 2), n_trials=6)
    done = run("import", "optuna", "--from", url, storage=storage, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    study = hs.load_study("mo", storage)
    assert study.directions == ("minimize", "maximize") and study.config.constrained
    assert [t.values for t in study.trials] == [tuple(t.values) for t in old.trials]
    assert [t.constraints for t in study.trials] == [(t.params["x"] - 0.5,) for t in old.trials]
    assert {t.number for t in study.best_trials} == {
        t.number for t in old.best_trials if t.params["x"] <= 0.5
    }


@pytest.mark.parametrize("name", ["[/]", "[bold]x[/bold", "esc\x1b[2Jname\x07", "$a"])
def test_study_names_with_markup_or_control_characters_are_printed_as_text(
    tmp_path, monkeypatch, capsys, name
):
    """A study named ``[/]`` made `studies list` fail for everyone sharing the storage (rich
    markup); control characters could clear or recolour the terminal."""
    from headstart.cli import main

    url = f"sqlite:///{tmp_path / 'm.db'}"
    study = hs.create_study(name, hs.SearchSpace({"x": hs.Float(0, 1)}), storage=url)
    study.optimize(lambda p: p["x"], 2, show_progress=False)

    def run(*args: str) -> tuple[int, str]:
        monkeypatch.setattr(sys, "argv", ["headstart", *args])
        with pytest.raises(SystemExit) as stop:
            main()
        captured = capsys.readouterr()
        return stop.value.code or 0, captured.out + captured.err

    for args in (
        ("studies", "list"),
        ("studies", "show", name),
        ("studies", "export", name, "--csv", str(tmp_path / "e.csv")),
    ):
        code, out = run(*args, "--storage", url)
        assert code == 0, out
        assert name[:3] in out or args[1] == "export"  # as text (a table may wrap it)
        assert "\x1b[2J" not in out and "\x07" not in out
    code, out = run("studies", "show", name + "?", "--storage", url)  # the error printer
    assert code == 1 and out.startswith("error: ") and "\x1b[2J" not in out
    code, out = run("studies", "delete", name, "--yes", "--storage", url)
    assert code == 0, out


def test_import_csv_refuses_an_empty_or_binary_file_with_nothing_stored(
    tmp_path, monkeypatch, capsys
):
    from headstart.cli import main

    url = f"sqlite:///{tmp_path / 'i.db'}"
    space = tmp_path / "space.json"
    space.write_text(json.dumps(hs.SearchSpace({"x": hs.Float(0, 1)}).to_json()))
    (tmp_path / "empty.csv").write_text("")
    (tmp_path / "binary.csv").write_bytes(bytes(range(256)) * 4)
    for name in ("empty.csv", "binary.csv", "missing.csv"):
        monkeypatch.setattr(sys, "argv", ["headstart", "import", "csv", str(tmp_path / name),
                                          "--space", str(space), "--storage", url])  # fmt: skip
        with pytest.raises(SystemExit) as stop:
            main()
        out = capsys.readouterr().err
        assert stop.value.code == 1 and out.startswith("error: ") and "Traceback" not in out
    assert hs.storage.get_storage(url).list_studies() == []
