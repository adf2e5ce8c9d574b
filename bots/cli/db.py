"""`digest-bot db`: the ledger database's upgrade, backup, schema status and pruning."""

from __future__ import annotations

import argparse
import asyncio
from pathlib import Path

from digest_core.settings import Settings

EXIT_OK = 0


def configure(p: argparse.ArgumentParser, common: argparse.ArgumentParser) -> None:
    """The actions of ``db`` (its line in ``--help`` is in :data:`bots.cli.COMMANDS`)."""
    dsub = p.add_subparsers(title="db commands", metavar="ACTION", required=True)
    a = dsub.add_parser(
        "upgrade",
        parents=[common],
        help="upgrade the ledger's schema to this release's (back it up first)",
    )
    a.set_defaults(handler=cmd_upgrade)
    a = dsub.add_parser(
        "backup",
        parents=[common],
        help="SQLite: copy the ledger to PATH while the bot runs; PostgreSQL: print the "
        "pg_dump command",
    )
    a.add_argument("path", type=Path, metavar="PATH", help="the backup file (must not exist)")
    a.set_defaults(handler=cmd_backup)
    a = dsub.add_parser("status", parents=[common], help="the ledger's schema version")
    a.set_defaults(handler=cmd_status)
    a = dsub.add_parser(
        "prune",
        parents=[common],
        help="prune the rows older than [ledger] keep_days now (the bot does it daily)",
    )
    a.set_defaults(handler=cmd_prune)


def _shown(settings: Settings) -> str:
    from sqlalchemy import make_url

    return make_url(settings.database_url).render_as_string(hide_password=True)


def cmd_upgrade(args: argparse.Namespace, settings: Settings) -> int:
    return asyncio.run(_upgrade(settings))


async def _upgrade(settings: Settings) -> int:
    from digest_core.delivery import Ledger
    from digest_core.delivery.ledger import SCHEMA_VERSION

    async with Ledger.open(settings.database_url, upgrade=True) as ledger:
        was = ledger.upgraded_from
    if was is None:
        print(f"ledger {_shown(settings)} is at schema version {SCHEMA_VERSION}: nothing to do")
    else:
        print(f"ledger {_shown(settings)}: {was.describe()} -> schema version {SCHEMA_VERSION}")
    return EXIT_OK


def cmd_status(args: argparse.Namespace, settings: Settings) -> int:
    return asyncio.run(_status(settings))


async def _status(settings: Settings) -> int:
    from digest_core.delivery.ledger import SCHEMA_VERSION
    from digest_core.delivery.ledger.engine import create_engine, open_error, sqlite_file
    from digest_core.delivery.ledger.migrate import UPGRADE_COMMAND, read_state

    database = sqlite_file(settings.database_url)
    if database is not None and not database.exists():
        print(f"no ledger at {database} yet: the bot creates it at start")
        return EXIT_OK
    engine = create_engine(settings.database_url, echo=False)
    try:
        async with engine.connect() as conn:
            state = await conn.run_sync(read_state)
    except Exception as exc:
        raise open_error(exc, _shown(settings), database) from exc
    finally:
        await engine.dispose()
    print(f"ledger {_shown(settings)}: {state.describe()}")
    if state.current:
        print("up to date")
    elif state.newer:
        print(f"newer than this release (schema version {SCHEMA_VERSION}): run the newer one")
    elif not state.empty:
        print(f"this release needs schema version {SCHEMA_VERSION}: run `{UPGRADE_COMMAND}`")
        return 1
    return EXIT_OK


def cmd_backup(args: argparse.Namespace, settings: Settings) -> int:
    from digest_core.delivery.ledger.backup import (
        backup_sqlite,
        pg_dump_command,
        shell,
        sqlite_source,
    )

    source = sqlite_source(settings.database_url)
    if source is None:
        from sqlalchemy import make_url

        dump, restore = pg_dump_command(settings.database_url, args.path)
        print("# the ledger is on a database server: back it up with pg_dump")
        if make_url(settings.database_url).password is not None:
            print("# (the password is not shown: pg_dump reads it from ~/.pgpass or PGPASSWORD)")
        print(shell(dump))
        print("# restore it (with the bot stopped) with:")
        print(f"# {shell(restore)}")
        return EXIT_OK
    done = backup_sqlite(source, args.path)
    print(
        f"backed up {source} to {done.path} ({done.size:,} bytes, ledger id {done.ledger_id}); "
        f"to restore: stop the bot, copy {done.path} to {source} and remove {source}-wal and "
        f"{source}-shm"
    )
    return EXIT_OK


def cmd_prune(args: argparse.Namespace, settings: Settings) -> int:
    return asyncio.run(_prune(settings))


async def _prune(settings: Settings) -> int:
    from digest_core.clock import SystemClock
    from digest_core.delivery import Ledger
    from digest_core.delivery.retention import RetentionPolicy, prune_once

    s = settings.ledger
    clock = SystemClock()
    async with Ledger.open(settings.database_url, clock=clock, upgrade=s.auto_upgrade) as ledger:
        report = await prune_once(
            ledger,
            RetentionPolicy(keep_days=s.keep_days, audit_keep_days=s.audit_keep_days),
            clock=clock,
            zone=settings.zone,
        )
    if report is None:
        print("another process is pruning the ledger now; nothing done")
        return 1
    print(
        f"pruned {report.parts} part rows of {len(report.days)} days into {report.summaries} "
        f"summaries, and {report.audit} audit rows"
    )
    return EXIT_OK
