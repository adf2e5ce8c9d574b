"""Schema 2: leases (one delivery per platform across processes).

Revision ID: 0002
Revises: 0001
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from digest_core.delivery.ledger.migrations import set_schema_version

revision: str = "0002"
down_revision: str | None = "0001"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    op.create_table(
        "leases",
        sa.Column("name", sa.String(128), primary_key=True),
        sa.Column("owner", sa.String(255), nullable=False),
        sa.Column("expires_at", sa.DateTime, nullable=False),
        if_not_exists=True,
    )
    set_schema_version(2)
