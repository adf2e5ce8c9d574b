"""Schema 4: the ledger's id, also kept in a marker file beside an SQLite ledger.

Revision ID: 0004
Revises: 0003
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from digest_core.delivery.ledger.migrations import set_schema_version

revision: str = "0004"
down_revision: str | None = "0003"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    op.create_table(
        "ledger_identity",
        sa.Column("key", sa.Integer, primary_key=True),
        sa.Column("id", sa.String(64), nullable=False),
        sa.Column("created_at", sa.DateTime, nullable=False),
        if_not_exists=True,
    )
    set_schema_version(4)
