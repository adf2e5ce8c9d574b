"""`digest-bot site build OUT/` and `digest-bot site serve`: the web archive from the CLI."""

from __future__ import annotations

import argparse
import datetime as dt
import logging
import sys
from pathlib import Path

from pydantic import ValidationError

from digest_core.archive import Archive
from digest_core.clock import Clock, SystemClock
from digest_core.publishing.embargo import Embargo
from digest_core.settings import Settings
from digest_core.site.published import FixedClock, PublishRule

log = logging.getLogger(__name__)

EXIT_OK, EXIT_FAILED = 0, 1
_NEEDS_EXTRA = (
    "digest-bot: the web archive needs the site extra (Jinja2, feedgen, aiohttp): "
    "pip install 'digest-bot[site]'"
)


def configure(p: argparse.ArgumentParser, common: argparse.ArgumentParser) -> None:
    """``site build`` and ``site serve`` under ``site`` (its line in ``--help`` is in
    :data:`bots.cli.COMMANDS`)."""
    ssub = p.add_subparsers(title="site commands", metavar="ACTION", required=True)
    b = ssub.add_parser(
        "build",
        parents=[common],
        help="write the web archive (pages, search index, feed.xml) into a folder",
    )
    b.add_argument("out", type=Path, metavar="OUT", help="folder to write (created if missing)")
    b.add_argument("--base-url", help="the site's public address (overrides [site] base_url)")
    b.add_argument(
        "--now",
        type=_moment,
        help="build as if it were this moment (ISO 8601 with offset; default: now): issues "
        "after it stay hidden",
    )
    b.add_argument(
        "--for-server",
        action="store_true",
        help="links to folders (2026/11/27/) and a fetched search index, for a web server "
        "only; by default the site works both served and opened from disk",
    )
    b.set_defaults(handler=cmd_site_build, reports=True)
    s = ssub.add_parser(
        "serve", parents=[common], help="serve the web archive on this machine (Ctrl-C stops)"
    )
    s.add_argument(
        "--listen",
        default="127.0.0.1:8080",
        metavar="HOST:PORT",
        help="address to listen on (default 127.0.0.1:8080)",
    )
    s.set_defaults(handler=cmd_site_serve)


def _moment(text: str) -> dt.datetime:
    try:
        moment = dt.datetime.fromisoformat(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an ISO 8601 moment") from None
    if moment.tzinfo is None:
        raise argparse.ArgumentTypeError(f"{text!r} needs an offset, e.g. 2026-11-27T08:00+08:00")
    return moment


def _base_url(args: argparse.Namespace, settings: Settings) -> str | None:
    from digest_core.settings import SiteSettings

    given = getattr(args, "base_url", None)
    if given is None:
        return settings.site.base_url
    try:
        return SiteSettings(base_url=given).base_url
    except ValidationError as exc:
        why = exc.errors()[0]["msg"].removeprefix("Value error, ")
        raise SystemExit(f"digest-bot: --base-url: {why}") from None


def _rule(settings: Settings, clock: Clock) -> PublishRule:
    """The embargo as the settings and the ledger make it: each issue from its post time on,
    or since an admin published it early."""
    from bots.cli.editor import early_publishes_of

    return Embargo(
        zone=settings.zone,
        post_time=settings.schedule.time,
        clock=clock,
        early=early_publishes_of(settings),
    )


def cmd_site_build(args: argparse.Namespace, settings: Settings) -> int:
    """Build the site of the archive's published issues into ``args.out``."""
    try:
        from digest_core.site.build import SiteConfig, build_site, write_site
        from digest_core.site.live import published_issues
    except ImportError:
        print(_NEEDS_EXTRA, file=sys.stderr)
        return EXIT_FAILED
    archive = Archive(settings.archive_dir, index=False)
    rule = _rule(settings, FixedClock(args.now) if args.now else SystemClock())
    issues = published_issues(archive, rule)
    hidden = len(archive.dates()) - len(issues)
    config = SiteConfig(
        rule=rule, base_url=_base_url(args, settings), for_files=not args.for_server
    )
    files = build_site(issues, config)
    try:
        written, removed = write_site(files, args.out)
    except OSError as exc:
        print(f"digest-bot: cannot write {args.out}: {exc.strerror or exc}", file=sys.stderr)
        return EXIT_FAILED
    later = f"; {hidden} not published yet (hidden)" if hidden else ""
    print(
        f"{args.out}: {len(issues)} issues{later}; {len(files)} files, "
        f"{written} written, {removed} removed"
    )
    if config.for_files:
        print(f"open {(args.out / 'index.html').resolve().as_uri()} or serve the folder")
    for problem in archive.known_problems():
        print(f"warning: {problem}", file=sys.stderr)
    return EXIT_OK


def cmd_site_serve(args: argparse.Namespace, settings: Settings) -> int:
    """Serve the live site of the archive until Ctrl-C."""
    try:
        from aiohttp import web

        from bots.site_http import mount_site
    except ImportError:
        print(_NEEDS_EXTRA, file=sys.stderr)
        return EXIT_FAILED
    host, _, port = args.listen.rpartition(":")
    if not host or not port.isdigit():
        print(f"digest-bot: --listen {args.listen!r}: expected HOST:PORT", file=sys.stderr)
        return EXIT_FAILED
    clock = SystemClock()
    app = web.Application()
    try:
        mount_site(
            app,
            Archive(settings.archive_dir),
            rule=_rule(settings, clock),
            clock=clock,
            base_url=settings.site.base_url,
        )
    except ImportError:
        print(_NEEDS_EXTRA, file=sys.stderr)
        return EXIT_FAILED
    print(f"serving the web archive on http://{host}:{port}/ (Ctrl-C stops)", file=sys.stderr)
    try:
        web.run_app(app, host=host, port=int(port), print=None)
    except OSError as exc:
        print(f"digest-bot: cannot listen on {args.listen}: {exc.strerror}", file=sys.stderr)
        return EXIT_FAILED
    return EXIT_OK
