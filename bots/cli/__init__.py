"""The `digest-bot` command: validate, preview, archive, run, post, correct, status, db, ….

Only the chosen command's module is imported: :data:`COMMANDS` names each command's module
and help line, ``digest-bot --help`` lists them from the table alone, and a command's options
are added when it is chosen (:class:`_LazyCommands`), so ``--help`` imports no command and
``archive search`` none of the delivery side's.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

from bots.cli.common import EXIT_FAILED as EXIT_FAILED
from bots.cli.common import EXIT_OK as EXIT_OK
from bots.cli.common import EXIT_USAGE as EXIT_USAGE
from bots.cli.common import parse_date as parse_date
from bots.cli.common import run_async as run_async
from bots.cli.common import version as version
from bots.logs import FORMATS, LEVELS

if TYPE_CHECKING:
    from digest_core.settings import Settings

    _SubParsers = argparse._SubParsersAction[argparse.ArgumentParser]
else:
    _SubParsers = argparse._SubParsersAction


class Command(NamedTuple):
    """One ``digest-bot`` command: its name, the ``"module:function"`` that adds its options
    and handler to its parser (``function(parser, common)``; None: it has none) and its line in
    ``--help``."""

    name: str
    configure: str | None
    help: str


#: every command, in the order of ``--help``; the platforms' own commands (``discord``,
#: ``email``: :data:`PLATFORM_COMMANDS`) come between ``site`` and ``version``
COMMANDS = (
    Command("validate", "bots.cli.issues:configure_validate",
            "check issue files; print path:line: problem"),
    Command("preview", "bots.cli.issues:configure_preview", "show an issue as a platform gets it"),
    Command("archive", "bots.cli.editor:configure_archive",
            "list, add to or search the issue archive"),
    Command("run", "bots.cli.run:configure_run",
            "run the bot: daily post, catch-up, commands (Ctrl-C stops)"),
    Command("post", "bots.cli.run:configure_post", "deliver an issue once and exit"),
    Command("correct", "bots.cli.correct:configure",
            "edit the messages already posted for a day to show its corrected issue"),
    Command("reactivate", "bots.cli.run:configure_reactivate",
            "post again to a target deactivated as gone"),
    Command("status", "bots.cli.run:configure_status",
            "next post, last delivery per target, failures"),
    Command("db", "bots.cli.db:configure", "the ledger database: upgrade, backup, status, prune"),
    Command("new", "bots.cli.editor:configure_new",
            "write a commented template of an issue (YAML) to fill in"),
    Command("schema", "bots.cli.editor:configure_schema",
            "print the JSON schema of an issue file"),
    Command("doctor", "bots.cli.doctor:configure",
            "check config, archive, ledger, tokens, channel rights, webhook and clock; print a "
            "table with the fix for each failure (exit 1 if any fails)"),
    Command("site", "bots.cli.site:configure", "build or serve the web archive"),
)  # fmt: skip
VERSION = Command("version", None, "print the version (as --version, -V)")


class PlatformCommand(NamedTuple):
    """A platform's own ``digest-bot`` command (``digest-bot discord sync``)."""

    #: the command, and the platform it belongs to
    name: str
    #: ``"module:function"`` adding its options and actions to its parser,
    #: ``function(parser, common_parent)``
    configure: str
    #: its line in ``digest-bot --help``
    help: str
    #: the SDK's import name: the command is offered only when it is installed
    sdk_module: str


#: the platforms' own commands, in registry order, between ``site`` and ``version``: a table
#: here and not in the platforms' declarations, so that ``--help`` lists them importing no
#: platform (a declaration imports its settings model, and with it pydantic)
PLATFORM_COMMANDS = (
    PlatformCommand(
        "discord", "bots.discord.arguments:configure", "Discord set-up: sync, invite", "discord"
    ),
    PlatformCommand(
        "email",
        "bots.cli.email:configure",
        "email readers: export, forget, bounces, notify-correction",
        "aiosmtplib",
    ),
    PlatformCommand(
        "feishu", "bots.feishu.menu:configure", "Feishu app bot set-up: menu", "lark_oapi"
    ),
)


def platform_commands() -> list[PlatformCommand]:
    """The platforms' own commands whose SDK is installed (found without importing it)."""
    return [c for c in PLATFORM_COMMANDS if importlib.util.find_spec(c.sdk_module) is not None]


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the console script; returns the exit code."""
    parser = build_parser(lazy=True)
    args = parser.parse_args(argv)
    if not getattr(args, "handler", None):
        # a group (`digest-bot archive`) without its action: its help lists the actions
        group: argparse.ArgumentParser = getattr(args, "group", None) or parser
        group.print_help(sys.stderr if group is not parser else sys.stdout)
        return EXIT_USAGE
    if args.handler is cmd_version:  # needs no configuration
        print(f"digest-bot {version()}")
        return EXIT_OK
    return _configured(args)


def _configured(args: argparse.Namespace) -> int:
    """Run the chosen command's handler with the configuration and logging set up."""
    from bots.logs import setup_logging
    from bots.registry import load_core_settings, load_settings
    from digest_core.errors import ConfigError, DigestError, IssueFormatError
    from digest_core.settings import default_warning

    try:
        load = load_core_settings if getattr(args, "core_settings", False) else load_settings
        settings = load(args.config, overrides=_overrides(args))
        if (defaults := default_warning(settings)) is not None:
            print(f"digest-bot: WARNING: {defaults}", file=sys.stderr)
        asked = getattr(args, "log_level", None) is not None
        level = settings.log_level
        if getattr(args, "reports", False) and not asked and level == "INFO":
            level = "WARNING"  # the command prints its result; the INFO record would repeat it
        setup_logging(
            level,
            fmt=settings.log_format,
            zone=settings.zone,
            debug_libs=bool(getattr(args, "debug_libs", False)),
            asked=asked,
        )
        return int(args.handler(args, settings))
    except ConfigError as exc:
        print(f"digest-bot: configuration error: {exc}", file=sys.stderr)
        return EXIT_FAILED
    except DigestError as exc:
        print(f"digest-bot: {exc}", file=sys.stderr)
        if isinstance(exc.__cause__, IssueFormatError):  # the editor's detail behind it
            for line in exc.__cause__.lines():
                print(f"  because {line}", file=sys.stderr)
        return EXIT_FAILED
    except KeyboardInterrupt:
        return 130
    except Exception as exc:
        from bots.network import network_reason

        # a server that cannot be reached is the user's network, not a bug: one line
        reason = network_reason(exc)
        if reason is None:
            raise
        print(f"digest-bot: cannot reach the server: {reason}; check the network", file=sys.stderr)
        return EXIT_FAILED


#: below each command's help, instead of the global options repeated in every one
GLOBAL_NOTE = (
    "global options (--config, --archive, --log-level, --log-format, --debug-libs) may also "
    "come after the command: see digest-bot --help"
)


def _common_options(default: Any) -> argparse.ArgumentParser:
    """The global options; with ``default`` SUPPRESS (their copy after a command) they are
    accepted but not listed again in the command's help (:data:`GLOBAL_NOTE` says so)."""
    common = argparse.ArgumentParser(add_help=False)
    hidden = default is argparse.SUPPRESS
    options: list[tuple[str, dict[str, Any]]] = [
        (
            "--config",
            {
                "type": Path,
                "help": "TOML config file (default: config/digest-bot.toml when it exists)",
            },
        ),
        ("--archive", {"type": Path, "help": "folder of issue files (overrides archive_dir)"}),
        (
            "--log-level",
            {
                "type": str.upper,
                "choices": LEVELS,
                "help": "DEBUG, INFO, WARNING or ERROR (overrides log_level)",
            },
        ),
        (
            "--log-format",
            {
                "choices": FORMATS,
                "help": "human lines or one JSON object per line (overrides log_format)",
            },
        ),
        (
            "--debug-libs",
            {
                "action": "store_true",
                "help": "with --log-level debug, the libraries' debug records too (SQL, "
                "HTTP, gateway)",
            },
        ),
    ]
    for name, kwargs in options:
        if hidden:
            kwargs["help"] = argparse.SUPPRESS
        common.add_argument(name, default=default, **kwargs)
    return common


class _LazyCommands(_SubParsers):
    """Subcommands whose options are added only when one is chosen: ``pending`` maps a
    command's name to what adds them (and imports the command's module)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.pending: dict[str, Callable[[], None]] = {}

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: Any,
        option_string: str | None = None,
    ) -> None:
        if (configure := self.pending.pop(values[0], None)) is not None:
            configure()
        super().__call__(parser, namespace, values, option_string)


class _Version(argparse.Action):
    """``-V``/``--version``: the installed version, looked up only when asked (reading the
    distribution's metadata costs every start otherwise)."""

    def __init__(self, option_strings: Sequence[str], dest: str, **kwargs: Any) -> None:
        kwargs.setdefault("help", "show program's version number and exit")
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, **kwargs)

    def __call__(self, parser: argparse.ArgumentParser, *_: Any) -> None:
        print(f"digest-bot {version()}")  # on standard output, as argparse's own
        parser.exit()


def build_parser(*, lazy: bool = False) -> argparse.ArgumentParser:
    """The ``digest-bot`` parser with every command; ``lazy``: each command's options are
    added (its module imported) only when the command is chosen, as :func:`main` does."""
    parser = argparse.ArgumentParser(
        prog="digest-bot",
        description="Posts the daily AI 技术日报 digest to Telegram, Discord and work chats.",
        parents=[_common_options(None)],
    )
    parser.add_argument("-V", "--version", action=_Version)
    # the options again after the command (`digest-bot run --config x`); SUPPRESS keeps a
    # value given before the command from being reset by the subcommand's default
    common = _common_options(argparse.SUPPRESS)
    sub = parser.add_subparsers(title="commands", metavar="COMMAND", action=_LazyCommands)
    assert isinstance(sub, _LazyCommands)
    platforms = [Command(c.name, c.configure, c.help) for c in platform_commands()]
    for command in (*COMMANDS, *platforms, VERSION):
        p = sub.add_parser(command.name, parents=[common], help=command.help)
        p.epilog = GLOBAL_NOTE
        configure = _configurer(command, p, common)
        if lazy:
            sub.pending[command.name] = configure
        else:
            configure()
    return parser


def _configurer(
    command: Command, parser: argparse.ArgumentParser, common: argparse.ArgumentParser
) -> Callable[[], None]:
    """What adds ``command``'s options and handler to its ``parser``."""

    def configure() -> None:
        if command.configure is None:  # `version`
            parser.set_defaults(handler=cmd_version)
            return
        module, _, function = command.configure.partition(":")
        getattr(importlib.import_module(module), function)(parser, common)
        _finish(parser)

    return configure


def _finish(command: argparse.ArgumentParser) -> None:
    """Under every action of a group (``archive``, ``db``, ``site``, a platform's):
    :data:`GLOBAL_NOTE`; a group without its action prints its help, listing the actions,
    instead of argparse's "the following arguments are required: ACTION"."""
    command.epilog = command.epilog or GLOBAL_NOTE
    for action in command._actions:
        if isinstance(action, argparse._SubParsersAction):
            action.required = False
            command.set_defaults(group=command)
            for each in action.choices.values():
                _finish(each)


def cmd_version(args: argparse.Namespace, settings: Settings) -> int:
    """``digest-bot version`` (:func:`main` answers it before reading the configuration)."""
    print(f"digest-bot {version()}")
    return EXIT_OK


def _overrides(args: argparse.Namespace) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if getattr(args, "archive", None) is not None:
        out["archive_dir"] = args.archive
    if getattr(args, "log_level", None) is not None:
        out["log_level"] = args.log_level
    if getattr(args, "log_format", None) is not None:
        out["log_format"] = args.log_format
    return out
