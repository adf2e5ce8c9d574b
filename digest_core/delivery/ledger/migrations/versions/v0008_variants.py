"""Schema 8: variants. A delivery's targets may get different formats of the issue (the
channels the full one, private subscribers a compact one or the headline alone): each part row
names the variant it shows (NULL: full), and the digests of what a delivery showed are kept
per variant, so a correction compares and edits each message in its own format.

Existing rows are all full (before this, a delivery recorded the digests of its first run,
the channels' full issue): they stay correctable as they were.

Revision ID: 0008
Revises: 0007
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from digest_core.delivery.ledger.migrations import has_column, set_schema_version

revision: str = "0008"
down_revision: str | None = "0007"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    # nullable without a default: no table rewrite on SQLite or PostgreSQL (the rows stay NULL)
    if not has_column("parts", "variant"):
        op.add_column("parts", sa.Column("variant", sa.String(16), nullable=True))
    if not has_column("part_digests", "variant"):
        _digests_per_variant()
    set_schema_version(8)


def _digests_per_variant() -> None:
    """``part_digests`` keyed by (delivery, variant, part), its rows ``full`` (a few rows a
    delivery: rebuilding the table on SQLite, which cannot change a primary key, is cheap)."""
    if op.get_bind().dialect.name != "sqlite":
        op.add_column(
            "part_digests",
            sa.Column("variant", sa.String(16), nullable=False, server_default="full"),
        )
        op.drop_constraint("part_digests_pkey", "part_digests", type_="primary")
        op.create_primary_key(
            "part_digests_pkey", "part_digests", ["delivery_id", "variant", "part"]
        )
        return
    op.create_table(
        "part_digests_v8",
        sa.Column("delivery_id", sa.Integer, sa.ForeignKey("deliveries.id"), primary_key=True),
        sa.Column("variant", sa.String(16), primary_key=True, server_default="full"),
        sa.Column("part", sa.Integer, primary_key=True),
        sa.Column("digest", sa.String(32), nullable=False),
    )
    op.execute(
        "INSERT INTO part_digests_v8 (delivery_id, variant, part, digest) "
        "SELECT delivery_id, 'full', part, digest FROM part_digests"
    )
    op.drop_table("part_digests")
    op.rename_table("part_digests_v8", "part_digests")
