"""No output path shows a database password: help defaults, messages, reprs and errors are
checked for a sentinel password (the README promises masked URLs everywhere)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from typer.testing import CliRunner

import headstart as hs
from headstart.cli import app
from headstart.sources import from_optuna
from headstart.storage import Storage
from headstart.storage.sql import mask_password

SENTINEL = "Hunter2Sentinel"
UNREACHABLE = f"postgresql+psycopg://u:{SENTINEL}@127.0.0.1:1/db"  # nothing listens on port 1


@pytest.fixture(autouse=True)
def _no_long_retries(monkeypatch):
    monkeypatch.setenv("HEADSTART_STORAGE_RETRY_SECONDS", "0")


def _every_command() -> list[list[str]]:
    import typer.main

    def walk(group, prefix):
        for name, command in group.commands.items():
            yield [*prefix, name]
            if hasattr(command, "commands"):
                yield from walk(command, [*prefix, name])

    return [[], *list(walk(typer.main.get_command(app), []))]


def test_no_help_page_shows_the_password_of_headstart_storage():
    """The help default comes from $HEADSTART_STORAGE, read when the CLI is imported: a fresh
    interpreter with the variable set renders every command's --help."""
    script = (
        "from typer.testing import CliRunner\n"
        "from headstart.cli import app\n"
        "import sys, json\n"
        "out = []\n"
        "for args in json.loads(sys.argv[1]):\n"
        "    r = CliRunner().invoke(app, [*args, '--help'], terminal_width=200)\n"
        "    assert r.exit_code == 0, (args, r.output)\n"
        "    out.append(r.output)\n"
        "print('\\n'.join(out))\n"
    )
    import json

    commands = _every_command()
    env = {**os.environ, "HEADSTART_STORAGE": UNREACHABLE}
    result = subprocess.run(
        [sys.executable, "-c", script, json.dumps(commands)],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    assert len(commands) > 15
    assert "u:***@127.0.0.1" in result.stdout  # the default is shown, masked
    assert SENTINEL not in result.stdout + result.stderr


@pytest.mark.parametrize(
    "url",
    [
        f"postgresql://u:{SENTINEL}@h:abc/db",  # a port SQLAlchemy cannot parse
        f"postgresql://u:{SENTINEL}@x@h/db",  # an unescaped "@" in the password
        f"mysql+pymysql://u:{SENTINEL}@h:3306/db?charset=utf8",
        f"postgresql+psycopg://u:{SENTINEL}%21@h/db",
    ],
)
def test_mask_password_masks_urls_it_cannot_parse(url):
    masked = mask_password(url)
    assert SENTINEL not in masked and "***" in masked


def _run_cli(monkeypatch, capsys, args: list[str]) -> tuple[int, str]:
    """``headstart ARGS`` in this process, as the script runs it (errors printed by ``main``)."""
    from headstart.cli import main

    monkeypatch.setattr(sys, "argv", ["headstart", *args])
    with pytest.raises(SystemExit) as stop:
        main()
    captured = capsys.readouterr()
    return stop.value.code, captured.out + captured.err


def test_messages_reprs_and_errors_never_show_the_password(tmp_path, monkeypatch, capsys):
    seen = []
    source = from_optuna(UNREACHABLE, "nope")
    seen.append(repr(source))
    with pytest.raises(hs.StorageError) as error:
        source.studies()
    seen.append(str(error.value))
    with pytest.raises(hs.StorageError) as error:
        Storage(UNREACHABLE)
    seen.append(str(error.value))
    store = f"sqlite:///{tmp_path / 'h.db'}"
    for args in (
        ["import", "optuna", "--from", UNREACHABLE, "--study", "nope", "--storage", store],
        ["studies", "list", "--storage", UNREACHABLE],
        ["studies", "show", "x", "--storage", UNREACHABLE],
    ):
        code, output = _run_cli(monkeypatch, capsys, args)
        assert code == 1 and output.startswith("error: "), output  # one message, no traceback
        seen.append(output)
    for text in seen:
        assert SENTINEL not in text
        assert "u:***@127.0.0.1" in text


def test_the_list_of_an_empty_server_storage_masks_its_url():
    import uuid

    from sqlalchemy import create_engine, text

    url = os.environ.get("HEADSTART_TEST_POSTGRES_URL") or pytest.skip("no PostgreSQL")
    # the CI server trusts local connections, so a password in the URL is accepted and ignored
    if "://headstart@" not in url:
        pytest.skip("the PostgreSQL URL has no plain headstart@ part")
    database = f"empty_{uuid.uuid4().hex[:8]}"
    admin = create_engine(url, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f"CREATE DATABASE {database}"))
    try:
        empty = url.replace("://headstart@", f"://headstart:{SENTINEL}@").rsplit("/", 1)[0]
        empty = f"{empty}/{database}"
        Storage(empty).close()  # its tables: `studies list` refuses a database without them
        result = CliRunner().invoke(app, ["studies", "list", "--storage", empty])
        assert result.exit_code == 0 and "No studies in" in result.output
        assert "headstart:***@" in result.output and SENTINEL not in result.output
    finally:
        with admin.connect() as conn:
            conn.execute(text(f"DROP DATABASE {database} WITH (FORCE)"))
        admin.dispose()


def test_a_storage_that_cannot_be_opened_masks_its_password():
    with pytest.raises(hs.StorageError) as e:
        hs.create_study("x", hs.SearchSpace({"x": hs.Float(0, 1)}), storage=UNREACHABLE)
    assert SENTINEL not in str(e.value) and "***" in str(e.value)


def test_short_and_common_passwords_do_not_mangle_other_text():
    from headstart._display import redact, remember_url

    remember_url(UNREACHABLE)  # SENTINEL is known here whichever tests this worker ran before

    masked = mask_password("postgresql://postgres:postgres@localhost/db")
    assert masked.startswith("postgresql://") and "postgres@" not in masked
    assert (
        redact("connect to postgresql://a:b@h/db failed")
        == "connect to postgresql://a:***@h/db failed"
    )
    assert redact("dsn: host=h password=abc123 user=u") == "dsn: host=h password=*** user=u"
    assert "secret123" not in mask_password("postgresql://u@h/db?password=secret123")
    assert redact(f"quoted {SENTINEL}%21 and plain {SENTINEL}!").count(SENTINEL) == 0
