"""Issue 20, item 9: finding one's way in the CLI: a group lists its actions, ``-V`` and
``version`` print the version, and the global options are shown once, not in every command."""

from __future__ import annotations

import argparse

import pytest

from bots.cli import GLOBAL_NOTE, build_parser, main, version

GLOBAL = ("--config", "--archive", "--log-level", "--log-format", "--debug-libs")


def _groups() -> dict[str, list[str]]:
    """Each command that has actions, with them (``archive``: list, add, search; …)."""
    parser = build_parser()
    [commands] = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    out = {}
    for name, command in commands.choices.items():
        for action in command._actions:
            if isinstance(action, argparse._SubParsersAction):
                out[name] = list(action.choices)
    return out


def test_the_groups_are_found() -> None:
    groups = _groups()
    assert {"archive", "db", "site", "discord"} <= set(groups)
    assert groups["archive"] == ["list", "add", "search"]


@pytest.mark.parametrize("group", sorted(_groups()))
def test_a_group_without_its_action_lists_the_actions(
    group: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main([group]) == 2
    err = capsys.readouterr().err
    assert "the following arguments are required" not in err
    for action in _groups()[group]:
        assert f"\n    {action} " in err or f"\n    {action}\n" in err, (action, err)


@pytest.mark.parametrize("argv", [["-V"], ["--version"], ["version"]])
def test_the_version_three_ways(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    try:
        status = main(argv)
    except SystemExit as exc:  # argparse's version action exits
        status = int(exc.code or 0)
    assert status == 0
    assert capsys.readouterr().out.strip() == f"digest-bot {version()}"


@pytest.mark.parametrize("argv", [["run"], ["archive", "add"], ["site", "build"], ["post"]])
def test_a_commands_help_shows_its_own_options_and_names_the_global_ones_once(
    argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit):
        main([*argv, "--help"])
    text = capsys.readouterr().out
    own = text.split("global options")[0]
    assert not any(option in own for option in GLOBAL), text
    assert " ".join(text.split()).endswith(GLOBAL_NOTE)


def test_global_options_still_work_after_the_command() -> None:
    args = build_parser().parse_args(
        ["archive", "list", "--config", "x.toml", "--log-level", "debug"]
    )
    assert (str(args.config), args.log_level) == ("x.toml", "DEBUG")
    top = build_parser().format_help()
    assert all(option in top for option in GLOBAL)
