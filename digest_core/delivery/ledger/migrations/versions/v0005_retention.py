"""Schema 5: retention. Per-day summaries per target outlive the part rows pruned after
``[ledger] keep_days``; a delivery whose rows were pruned records when.

Revision ID: 0005
Revises: 0004
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from digest_core.delivery.ledger.migrations import has_column, set_schema_version

revision: str = "0005"
down_revision: str | None = "0004"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    if not has_column("deliveries", "pruned_at"):
        op.add_column("deliveries", sa.Column("pruned_at", sa.DateTime, nullable=True))
    op.create_table(
        "day_summaries",
        sa.Column("issue_date", sa.Date, primary_key=True),
        sa.Column("platform", sa.String(32), primary_key=True),
        sa.Column("target", sa.String(128), primary_key=True),
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("sent", sa.Integer, nullable=False),
        sa.Column("failed", sa.Integer, nullable=False),
        sa.Column("gone", sa.Integer, nullable=False),
        sa.Column("unsent", sa.Integer, nullable=False),
        sa.Column("attempts", sa.Integer, nullable=False),
        sa.Column("last_sent_at", sa.DateTime),
        if_not_exists=True,
    )
    op.create_index(
        "ix_day_summaries_target", "day_summaries", ["platform", "target"], if_not_exists=True
    )
    set_schema_version(5)
