"""Schema 7: readers' own terms. A reader's delivery time, zone and format (``preferences``)
and the words they follow (``follows``), see :mod:`digest_core.delivery.ledger.preferences`.

Revision ID: 0007
Revises: 0006
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from digest_core.delivery.ledger.migrations import set_schema_version

revision: str = "0007"
down_revision: str | None = "0006"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    op.create_table(
        "preferences",
        sa.Column("platform", sa.String(32), primary_key=True),
        sa.Column("chat_id", sa.String(128), primary_key=True),
        sa.Column("at", sa.String(5)),
        sa.Column("zone", sa.String(64)),
        sa.Column("format", sa.String(16), nullable=False),
        sa.Column("updated_at", sa.DateTime, nullable=False),
        if_not_exists=True,
    )
    op.create_table(
        "follows",
        sa.Column("platform", sa.String(32), nullable=False),
        sa.Column("chat_id", sa.String(128), nullable=False),
        sa.Column("word", sa.String(64), nullable=False),
        sa.Column("created_at", sa.DateTime, nullable=False),
        sa.PrimaryKeyConstraint("platform", "chat_id", "word"),
        if_not_exists=True,
    )
    set_schema_version(7)
