"""Schema 9: follows considered once. One row per (platform, issue date) whose follow messages
were all sent (``follow_checks``, see :mod:`digest_core.delivery.ledger.preferences`), so every
issue that becomes public is considered once for follows, across restarts.

Revision ID: 0009
Revises: 0008
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from digest_core.delivery.ledger.migrations import set_schema_version

revision: str = "0009"
down_revision: str | None = "0008"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    op.create_table(
        "follow_checks",
        sa.Column("platform", sa.String(32), nullable=False),
        sa.Column("issue_date", sa.Date, nullable=False),
        sa.Column("revision", sa.String(64), nullable=False),
        sa.Column("checked_at", sa.DateTime, nullable=False),
        sa.PrimaryKeyConstraint("platform", "issue_date"),
        if_not_exists=True,
    )
    set_schema_version(9)
