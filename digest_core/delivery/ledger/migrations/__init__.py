"""The ledger's Alembic revisions (``versions/``), run by :mod:`..migrate`.

Each revision is one schema version (``v0005_…`` brings a ledger to version 5) and ends
with :func:`set_schema_version`, so the ``schema_version`` table older releases read keeps
telling them when a ledger is newer than they are. Revisions create only what is missing:
a ledger the hand-written migrations of releases before Alembic left at version 1-4 is
stamped with that revision and upgraded from there.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

__all__ = ["has_column", "set_schema_version"]


def set_schema_version(version: int) -> None:
    """Record ``version`` in the ``schema_version`` table (one row)."""
    table = sa.table("schema_version", sa.column("version", sa.Integer))
    op.execute(table.delete())
    op.execute(table.insert().values(version=version))


def has_column(table: str, column: str) -> bool:
    """Whether ``table`` has ``column`` now (revisions add only what is missing)."""
    return column in {c["name"] for c in sa.inspect(op.get_bind()).get_columns(table)}
