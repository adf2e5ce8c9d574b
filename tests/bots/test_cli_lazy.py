"""Issue 24, item 3: the CLI imports only the chosen command's module.

``digest-bot --help`` lists every command from :data:`bots.cli.COMMANDS` alone; a command's
options (and its module) are added when it is chosen. Each check runs in a fresh interpreter,
whose ``sys.modules`` says what was imported.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from bots.cli import COMMANDS, PLATFORM_COMMANDS, build_parser
from tests.samples import SAMPLE_ARCHIVE

ROOT = Path(__file__).resolve().parents[2]
#: every command's module, by the tables the CLI is built from
COMMAND_MODULES = sorted(
    {c.configure.partition(":")[0] for c in (*COMMANDS, *PLATFORM_COMMANDS) if c.configure}
)
#: what no command should pay for before it runs
HEAVY = ("sqlalchemy", "apscheduler", "pydantic", "yaml", "asyncio")

_PROBE = """
import json, sys
{run}
print("MODULES " + json.dumps(sorted(sys.modules)))
"""


def _modules_after(run: str, cwd: Path) -> tuple[set[str], str]:
    """The modules imported by a fresh interpreter after ``run``, and what it printed."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("DIGEST_BOT_")}
    env["PYTHONPATH"] = str(ROOT)
    env["COLUMNS"] = "400"  # argparse wraps at the width, even at a hyphen inside a word
    done = subprocess.run(
        [sys.executable, "-c", _PROBE.format(run=run)],
        cwd=cwd, env=env, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    head, _, listed = done.stdout.rpartition("MODULES ")
    return set(json.loads(listed)), head


def test_the_tables_name_the_command_modules() -> None:
    assert {"bots.cli.correct", "bots.cli.editor", "bots.cli.run", "bots.cli.db"} <= set(
        COMMAND_MODULES
    )
    for module in COMMAND_MODULES:  # each one exists: the check below cannot pass by a typo
        assert (ROOT / (module.replace(".", "/") + ".py")).is_file(), module


def test_importing_the_cli_imports_no_command(tmp_path: Path) -> None:
    modules, _ = _modules_after("import bots.cli", tmp_path)
    assert "bots.cli" in modules
    assert modules.isdisjoint(COMMAND_MODULES), modules & set(COMMAND_MODULES)


def test_help_lists_every_command_and_imports_none_of_them(tmp_path: Path) -> None:
    run = "from bots.cli import main\ntry:\n    main(['--help'])\nexcept SystemExit:\n    pass"
    modules, text = _modules_after(run, tmp_path)
    flat = " ".join(text.split())
    for command in (*COMMANDS, *PLATFORM_COMMANDS):
        assert f" {command.name} {' '.join(command.help.split())}" in flat, command.name
    assert modules.isdisjoint(COMMAND_MODULES), modules & set(COMMAND_MODULES)
    assert not {m.split(".")[0] for m in modules} & set(HEAVY), sorted(modules)


@pytest.mark.slow  # over 0.25 s: left out of make check
def test_archive_search_imports_its_own_module_only(tmp_path: Path) -> None:
    run = (
        "from bots.cli import main\n"
        f"assert main(['--archive', {str(SAMPLE_ARCHIVE)!r}, 'archive', 'search', '模型']) == 0"
    )
    modules, text = _modules_after(run, tmp_path)
    assert "2026-" in text  # it found the issues that mention it
    assert set(COMMAND_MODULES) & modules == {"bots.cli.editor"}
    assert "sqlalchemy" not in modules and "apscheduler" not in modules  # no ledger, no schedule
    # the core's settings alone: no platform's settings model is imported or built
    assert not {m for m in modules if m.endswith(".settings") and m.startswith("bots.")}


def _config(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "digest-bot.toml"
    path.write_text(text, encoding="utf-8")
    return path


def test_archive_search_is_not_stopped_by_a_platforms_bad_value(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from bots.cli import main

    cfg = _config(tmp_path, '[telegram]\nchannels = "not a list"\n[discord]\ntoken = "x"\n')
    argv = ["--config", str(cfg), "--archive", str(SAMPLE_ARCHIVE)]
    assert main([*argv, "archive", "search", "模型"]) == 0
    assert "2026-" in capsys.readouterr().out
    # the other commands check every platform's table, an editor's as the bot's
    assert main([*argv, "validate"]) == 1
    assert "discord.token: tokens must not be written" in capsys.readouterr().err
    # a table that is no platform's is still an unknown key, and the bot's own commands
    # still check every platform's table
    cfg = _config(tmp_path, "[nosuch]\nx = 1\n")
    assert main(["--config", str(cfg), "archive", "search", "模型"]) == 1
    assert "nosuch: unknown key" in capsys.readouterr().err
    cfg = _config(tmp_path, '[telegram]\nchannels = "not a list"\n')
    assert main(["--config", str(cfg), "--archive", str(SAMPLE_ARCHIVE), "status"]) == 1
    assert "telegram.channels" in capsys.readouterr().err


def test_archive_search_still_checks_the_cores_own_keys(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from bots.cli import main

    cfg = _config(tmp_path, '[schedule]\npost_time = "25:00"\n')
    assert main(["--config", str(cfg), "archive", "search", "模型"]) == 1
    err = capsys.readouterr().err
    assert "configuration error" in err and "schedule.post_time" in err


@pytest.mark.parametrize("command", [c.name for c in COMMANDS] + ["version"])
def test_a_command_chosen_gets_the_options_the_whole_parser_has(
    command: str, capsys: pytest.CaptureFixture[str]
) -> None:
    [full] = [a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction)]
    with pytest.raises(SystemExit):
        build_parser(lazy=True).parse_args([command, "--help"])
    assert capsys.readouterr().out == full.choices[command].format_help()
