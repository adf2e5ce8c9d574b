"""The `digest-bot` command: validate, preview, archive, run, post, correct, status, db."""

from __future__ import annotations

import argparse
import datetime as dt
import json
import logging
import os
import sys
from collections.abc import Coroutine, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from bots import cli_correct, cli_db, cli_editor, cli_publishing, cli_site, registry
from bots.logs import FORMATS, LEVELS, setup_logging
from bots.network import network_reason
from bots.registry import load_settings
from bots.renderers import Flavor
from digest_core.archive import Archive
from digest_core.archive import files as archive_files
from digest_core.errors import ConfigError, DigestError, IssueFormatError
from digest_core.loading import Hint, date_from_name, load_issue
from digest_core.models import Issue
from digest_core.platform import Target, TargetKind
from digest_core.rendering import Part, Renderer, RenderOptions, preview, render
from digest_core.settings import Settings, default_warning

if TYPE_CHECKING:  # the delivery side is imported by the commands that deliver, so that
    # validate, preview and archive start quickly
    from digest_core.delivery import PartOutcome

log = logging.getLogger(__name__)

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2

_T = TypeVar("_T")


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the console script; returns the exit code."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "handler", None):
        # a group (`digest-bot archive`) without its action: its help lists the actions
        group: argparse.ArgumentParser = getattr(args, "group", None) or parser
        group.print_help(sys.stderr if group is not parser else sys.stdout)
        return EXIT_USAGE
    if args.handler is cmd_version:  # needs no configuration
        print(f"digest-bot {version()}")
        return EXIT_OK
    try:
        settings = load_settings(args.config, overrides=_overrides(args))
        if (defaults := default_warning(settings)) is not None:
            print(f"digest-bot: WARNING: {defaults}", file=sys.stderr)
        asked = getattr(args, "log_level", None) is not None
        level = settings.log_level
        if args.handler in _reporting() and not asked and level == "INFO":
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


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="digest-bot",
        description="Posts the daily AI 技术日报 digest to Telegram, Discord and work chats.",
        parents=[_common_options(None)],
    )
    parser.add_argument("-V", "--version", action="version", version=f"digest-bot {version()}")
    # the options again after the command (`digest-bot run --config x`); SUPPRESS keeps a
    # value given before the command from being reset by the subcommand's default
    common = _common_options(argparse.SUPPRESS)
    sub = parser.add_subparsers(title="commands", metavar="COMMAND")

    p = sub.add_parser(
        "validate", parents=[common], help="check issue files; print path:line: problem"
    )
    p.add_argument(
        "paths",
        nargs="*",
        type=Path,
        metavar="PATH",
        help="issue files or folders (default: the configured archive folder)",
    )
    p.add_argument("--date", type=_date, help="date of files whose name carries none (YYYY-MM-DD)")
    p.set_defaults(handler=cmd_validate)

    p = sub.add_parser("preview", parents=[common], help="show an issue as a platform gets it")
    p.add_argument(
        "--date",
        type=_date,
        help="issue date YYYY-MM-DD (default: the latest); with --file, the date of a file "
        "whose name carries none",
    )
    p.add_argument("--file", type=Path, help="an issue file outside the archive")
    p.add_argument(
        "--platform",
        choices=[*registry.names(), "plain"],
        default="telegram",
        help="render as this platform does (plain: no markup, as the console)",
    )
    p.add_argument(
        "--section",
        choices=["all", "headline", "briefs", "classic", "toc"],
        default="all",
        help="which part of the issue",
    )
    p.add_argument("--brief", type=int, metavar="N", help="only brief N (from 1)")
    p.add_argument("--buttons", action="store_true", help="include the section buttons")
    p.add_argument("--no-embeds", action="store_true", help="Discord: plain-markdown fallback")
    p.add_argument(
        "--json", action="store_true", help="print the exact API payloads, one per message"
    )
    cli_publishing.add_options(p)
    p.set_defaults(handler=cmd_preview)

    p = sub.add_parser("archive", parents=[common], help="list, add to or search the issue archive")
    asub = p.add_subparsers(title="archive commands", metavar="ACTION", required=True)
    cli_editor.register_archive(asub, common)
    a = asub.add_parser("search", parents=[common], help="find a word in titles and bodies")
    a.add_argument("word", help="word to look for (substring match)")
    a.add_argument("--limit", type=int, default=20, help="at most this many hits (default 20)")
    a.set_defaults(handler=cmd_archive_search)

    p = sub.add_parser(
        "run", parents=[common], help="run the bot: daily post, catch-up, commands (Ctrl-C stops)"
    )
    p.add_argument("--only", choices=registry.names(), help="run just this platform")
    p.add_argument(
        "--new-ledger",
        action="store_true",
        help="accept an empty (or another) ledger where the marker beside it records the one "
        "the bot had; without it such a start is refused (restore the backup instead)",
    )
    p.set_defaults(handler=cmd_run)

    p = sub.add_parser("post", parents=[common], help="deliver an issue once and exit")
    p.add_argument("--date", type=_date, help="issue date YYYY-MM-DD (default: today)")
    p.add_argument("--platform", choices=registry.names(), help="only this one")
    p.add_argument("--target", metavar="ID", help="only this chat/channel id")
    p.add_argument("--force", action="store_true", help="send everything again, as a new delivery")
    p.set_defaults(handler=cmd_post)

    cli_correct.register(sub, common, date=_date)

    p = sub.add_parser(
        "reactivate", parents=[common], help="post again to a target deactivated as gone"
    )
    p.add_argument("target", metavar="PLATFORM:ID", help="e.g. telegram:-1001234567890")
    p.set_defaults(handler=cmd_reactivate)

    p = sub.add_parser(
        "status", parents=[common], help="next post, last delivery per target, failures"
    )
    p.set_defaults(handler=cmd_status)
    cli_db.register(sub, common)
    cli_editor.register(sub, common)

    from bots.cli_doctor import register as register_doctor

    register_doctor(sub, common)
    cli_site.register(sub, common)
    for register in registry.command_registrars():
        register(sub, common)
    p = sub.add_parser("version", help="print the version (as --version, -V)")
    p.set_defaults(handler=cmd_version)
    _finish(sub)
    return parser


def _finish(sub: Any) -> None:
    """Under every command and action: :data:`GLOBAL_NOTE`; a group (``archive``, ``db``,
    ``site``, a platform's) without its action prints its help, listing the actions, instead
    of argparse's "the following arguments are required: ACTION"."""
    for command in sub.choices.values():
        command.epilog = command.epilog or GLOBAL_NOTE
        for action in command._actions:
            if isinstance(action, argparse._SubParsersAction):
                action.required = False
                command.set_defaults(group=command)
                _finish(action)


def _reporting() -> frozenset[object]:
    """The one-shot commands that print their own result (``stored …``, a table, a site's
    summary): their INFO log records would say it a second time, so they log from WARNING
    unless ``--log-level`` asks otherwise."""
    return frozenset(
        {
            cmd_validate,
            cmd_preview,
            cmd_archive_search,
            cmd_status,
            cli_editor.cmd_archive_list,
            cli_editor.cmd_archive_add,
            cli_editor.cmd_new,
            cli_editor.cmd_schema,
            cli_site.cmd_site_build,
        }
    )


def cmd_version(args: argparse.Namespace, settings: Settings) -> int:
    """``digest-bot version`` (:func:`main` answers it before reading the configuration)."""
    print(f"digest-bot {version()}")
    return EXIT_OK


def version() -> str:
    """The installed distribution's version (the package's own when not installed)."""
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as dist_version

    try:
        return dist_version("digest-bot")
    except PackageNotFoundError:
        from digest_core import __version__

        return __version__


def _date(text: str) -> dt.date:
    try:
        return dt.date.fromisoformat(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a date (YYYY-MM-DD)") from None


def _overrides(args: argparse.Namespace) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if getattr(args, "archive", None) is not None:
        out["archive_dir"] = args.archive
    if getattr(args, "log_level", None) is not None:
        out["log_level"] = args.log_level
    if getattr(args, "log_format", None) is not None:
        out["log_format"] = args.log_format
    return out


# ---------------------------------------------------------------- validate


def cmd_validate(args: argparse.Namespace, settings: Settings) -> int:
    """Check files and folders with the archive's own rule (archive_files) and the loader.

    In a folder, only what the archive would look at is checked, and anything it would not
    serve as named (misnamed, a second file for a date, a link out of the folder, a FIFO) is an
    error. A file named on the command line may be an undated draft; it is checked as if dated
    ``--date`` (default today). Nothing outside a folder (or a file's own folder) is read.
    With no path, the configured archive folder is checked. Warnings (a body line that looks
    like a link without https://) are printed as ``path:line: warning: …`` and do not fail.
    """
    checked = failed = missing = 0
    for path in args.paths or [settings.archive_dir]:
        if not os.path.lexists(path):
            print(f"no such file or folder: {path}", file=sys.stderr)
            failed += 1
            missing += 1
            continue
        if path.is_dir():  # (a link to a folder too: its entries must stay inside its target)
            try:
                dated, misnamed = archive_files.scan(path)
            except OSError as exc:
                print(f"{path}: cannot list the folder: {exc.strerror or exc}", file=sys.stderr)
                failed += 1
                continue
            results = [_validate_entry(entry) for entry in (*dated, *misnamed)]
        else:
            results = [_validate_file(path, args.date, settings)]
        checked += len(results)
        failed += results.count(False)
    if not checked and not failed:
        print("no issue files given", file=sys.stderr)
        return EXIT_FAILED
    if failed and checked:
        print(f"{failed} of {checked + missing} files failed", file=sys.stderr)
    return EXIT_FAILED if failed else EXIT_OK


def _validate_entry(entry: archive_files.FileEntry) -> bool:
    """One entry of a folder: the rule's verdict, then (when it passes) the loader's."""
    if entry.problem is not None:
        print(entry.problem)
        return False
    return _load_and_print(entry.path, entry.date, undated=False)


def _validate_file(path: Path, date: dt.date | None, settings: Settings) -> bool:
    """One file named on the command line (it may be an undated draft)."""
    _, file_problem = archive_files.check_file(archive_files.real_root(path.parent), path)
    if file_problem is not None:
        print(IssueFormatError(path, None, file_problem))
        return False
    name_date, name_problem = archive_files.check_name(path)
    undated = name_problem == archive_files.NO_DATE
    if name_problem is not None and not undated:
        print(IssueFormatError(path, None, name_problem))
        return False
    # an undated draft is checked as if dated today (the content is what is validated), unless
    # it is data that carries its own date (`digest-bot new -o draft.yaml` writes one)
    if undated and date is None and path.suffix.lower() in (".json", ".yaml", ".yml"):
        return _load_and_print(path, None, undated=False)
    return _load_and_print(path, date or name_date or _today(settings), undated=undated)


def _load_and_print(path: Path, date: dt.date | None, *, undated: bool) -> bool:
    hints: list[Hint] = []
    try:
        issue = load_issue(path, date=date, hints=hints)
    except IssueFormatError as exc:
        print("\n".join(exc.lines()))
        return False
    for hint in hints:
        print(hint)
    when = "undated (name it YYYY-MM-DD.txt to publish it)" if undated else str(issue.date)
    briefs = len(issue.briefs)
    links = sum(len(item.links) for _, item in issue.items())
    print(
        f"{path}: ok — {when}, 1 headline, {briefs} brief{'' if briefs == 1 else 's'}, "
        f"{'1 classic review' if issue.classic else 'no classic review'}, "
        f"{links} link{'' if links == 1 else 's'}"
    )
    return True


# ---------------------------------------------------------------- preview


def cmd_preview(args: argparse.Namespace, settings: Settings) -> int:
    if args.to_admins:
        return cli_publishing.cmd_preview_to_admins(args, settings)
    issue = _pick_issue(args, settings)
    part = Part(args.section)
    if args.brief is not None:
        part = Part.BRIEF
    options = RenderOptions(
        buttons=args.buttons, embeds=not args.no_embeds, site_url=settings.site.base_url
    )
    if args.platform == "plain":
        renderer: Renderer = Flavor.PLAIN
    else:
        renderer = registry.spec(args.platform).renderer()
    try:
        messages = render(issue, renderer, part, brief=args.brief, options=options)
    except IndexError as exc:
        print(f"digest-bot: {exc}", file=sys.stderr)
        return EXIT_FAILED
    if args.json:
        json.dump([m.payload for m in messages], sys.stdout, ensure_ascii=False, indent=2)
        print()
        return EXIT_OK
    for n, message in enumerate(messages, 1):
        print(f"──── {args.platform} message {n}/{len(messages)} ────")
        print(preview(message, renderer))
    return EXIT_OK


def _today(settings: Settings) -> dt.date:
    return dt.datetime.now(settings.zone).date()


def _pick_issue(args: argparse.Namespace, settings: Settings) -> Issue:
    if args.file is not None:
        date = args.date
        if date is None and date_from_name(args.file) is None:
            date = _today(settings)
            print(f"{args.file}: no date in the name; previewing it as {date}", file=sys.stderr)
        return load_issue(args.file, date=date)
    archive = Archive(settings.archive_dir, index=False)
    return archive.on(args.date) if args.date else archive.latest()


# ---------------------------------------------------------------- archive


def cmd_archive_search(args: argparse.Namespace, settings: Settings) -> int:
    # one search in a fresh process: no index to build, the raw text narrows what is parsed
    if not args.word.strip():
        print("digest-bot: archive search: give a word to look for, e.g. 模型", file=sys.stderr)
        return EXIT_USAGE
    archive = Archive(settings.archive_dir, index=False)
    hits = archive.search(args.word, limit=args.limit)
    for hit in hits:
        print(hit.describe())
    for problem in archive.known_problems():
        print(f"skipped: {problem}", file=sys.stderr)
    if not hits:
        print(f"no issue mentions {args.word!r}", file=sys.stderr)
        return EXIT_FAILED
    return EXIT_OK


# ---------------------------------------------------------------- run / post / status


def cmd_run(args: argparse.Namespace, settings: Settings) -> int:
    from bots.runtime import run

    _run_async(run(settings, only=args.only, new_ledger=args.new_ledger))
    return EXIT_OK


def cmd_post(args: argparse.Namespace, settings: Settings) -> int:
    return _run_async(_post(args, settings))


async def _post(args: argparse.Namespace, settings: Settings) -> int:
    from bots.runtime import open_service
    from bots.starting import all_running

    async with open_service(settings, only=args.platform, option="--platform") as service:
        day = args.date or service.poster.today()
        issue = service.archive.on(day)
        async with all_running(service.platforms.values(), service, receive=False):
            progress = _Progress(enabled=sys.stderr.isatty())
            reports = await service.post(
                issue.date,
                only_target=args.target,
                force=args.force,
                progress=progress.update,
            )
            progress.close()
            # "sent 0" says why: already delivered at …, and that --force sends it again
            lines = [await service.describe(r, force="--force") for r in reports]
    if not reports:
        print("nothing to post: no targets configured", file=sys.stderr)
        return EXIT_FAILED
    for line in lines:
        print(line)
    return EXIT_OK if all(r.ok for r in reports) else EXIT_FAILED


class _Progress:
    """A one-line progress counter on a terminal; silent otherwise."""

    def __init__(self, *, enabled: bool):
        self.enabled = enabled
        self.done = 0
        self.failed = 0
        self.unknown = 0

    def update(self, outcome: PartOutcome) -> None:
        from digest_core.delivery import PartState

        self.done += 1
        if outcome.state is PartState.UNKNOWN:
            self.unknown += 1  # it may have arrived: not "not sent"
        elif outcome.state is not PartState.SENT:
            self.failed += 1
        if self.enabled:
            unknown = f", {self.unknown} outcome unknown" if self.unknown else ""
            sys.stderr.write(f"\r{self.done} parts done, {self.failed} not sent{unknown}")
            sys.stderr.flush()

    def close(self) -> None:
        if self.enabled and self.done:
            sys.stderr.write("\n")


def cmd_reactivate(args: argparse.Namespace, settings: Settings) -> int:
    platform, _, target_id = args.target.rpartition(":")
    if not platform or not target_id:
        print("digest-bot: give the target as PLATFORM:ID, e.g. telegram:-100123", file=sys.stderr)
        return EXIT_USAGE
    return _run_async(_reactivate(settings, platform, target_id))


async def _reactivate(settings: Settings, platform: str, target_id: str) -> int:
    from bots.runtime import open_service

    async with open_service(settings) as service:
        target = Target(platform, target_id, TargetKind.CHANNEL)
        changed = await service.ledger.reactivate(target)
    outcome = "active again" if changed else "was not deactivated"
    print(f"{platform}:{target_id}: {outcome}")
    return EXIT_OK if changed else EXIT_FAILED


def cmd_status(args: argparse.Namespace, settings: Settings) -> int:
    return _run_async(_status(settings))


async def _status(settings: Settings) -> int:
    from bots.runtime import open_service
    from digest_core.service.leadership import describe_leader

    async with open_service(settings) as service:
        print(await service.status())
        print(await describe_leader(service.ledger))
    return EXIT_OK


def _run_async(coro: Coroutine[Any, Any, _T]) -> _T:
    import asyncio  # only the commands that run the bot pay for importing it

    return asyncio.run(coro)


if __name__ == "__main__":
    raise SystemExit(main())
