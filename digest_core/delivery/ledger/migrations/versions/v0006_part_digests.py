"""Schema 6: corrections. What each part of a delivery showed (a digest of its payload), so a
correction edits only the messages whose content changed.

Revision ID: 0006
Revises: 0005
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from digest_core.delivery.ledger.migrations import set_schema_version

revision: str = "0006"
down_revision: str | None = "0005"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    op.create_table(
        "part_digests",
        sa.Column("delivery_id", sa.Integer, sa.ForeignKey("deliveries.id"), primary_key=True),
        sa.Column("part", sa.Integer, primary_key=True),
        sa.Column("digest", sa.String(32), nullable=False),
        if_not_exists=True,
    )
    set_schema_version(6)
