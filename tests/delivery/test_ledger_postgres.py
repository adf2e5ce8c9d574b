"""The ledger's PostgreSQL connections: settings that keep planning linear at scale."""

from __future__ import annotations

from sqlalchemy import text

from digest_core.delivery import Ledger


async def test_statements_are_planned_with_their_values(pg_url: str) -> None:
    """asyncpg prepares statements; PostgreSQL's generic plan of a prepared
    ``target IN (…500 values…)`` scans all of parts, which made planning 100k subscribers
    quadratic (benchmarks/scale.py): every ledger connection asks for custom plans."""
    async with Ledger.open(pg_url) as ledger, ledger._tx() as conn:
        mode = (await conn.execute(text("SHOW plan_cache_mode"))).scalar()
    assert mode == "force_custom_plan"
