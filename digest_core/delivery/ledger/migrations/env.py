"""Alembic's entry point for developers (``alembic revision``, ``upgrade``; see alembic.ini).

The bot itself does not use this file: :mod:`digest_core.delivery.ledger.migrate` runs the
revisions on the ledger's own connection.
"""

from __future__ import annotations

import asyncio

from alembic import context
from sqlalchemy.engine import Connection
from sqlalchemy.ext.asyncio import create_async_engine

from digest_core.delivery.ledger.schema import metadata


def _run(connection: Connection) -> None:
    context.configure(connection=connection, target_metadata=metadata, render_as_batch=True)
    with context.begin_transaction():
        context.run_migrations()


async def _online(url: str) -> None:
    engine = create_async_engine(url)
    try:
        async with engine.connect() as conn:
            await conn.run_sync(_run)
            await conn.commit()
    finally:
        await engine.dispose()


if context.is_offline_mode():
    url = context.config.get_main_option("sqlalchemy.url")
    context.configure(url=url, target_metadata=metadata)
    with context.begin_transaction():
        context.run_migrations()
else:
    asyncio.run(_online(context.config.get_main_option("sqlalchemy.url") or ""))
