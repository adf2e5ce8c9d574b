"""Schema 11: the editor's dashboard. Clicks on tracked links (``link_clicks``) and readers'
commands, section buttons and search hits (``usage_counts``), counted per day and never per
reader; indexes for the audit log's filters (who, what, day) and the audience per day.

Revision ID: 0011
Revises: 0010
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from digest_core.delivery.ledger.migrations import set_schema_version

revision: str = "0011"
down_revision: str | None = "0010"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    op.create_table(
        "link_clicks",
        sa.Column("issue_date", sa.Date, nullable=False),
        sa.Column("story", sa.String(16), nullable=False),
        sa.Column("link", sa.Integer, nullable=False),
        sa.Column("platform", sa.String(32), nullable=False),
        sa.Column("day", sa.Date, nullable=False),
        sa.Column("clicks", sa.Integer, nullable=False),
        sa.PrimaryKeyConstraint("issue_date", "story", "link", "platform", "day"),
        if_not_exists=True,
    )
    op.create_index("ix_link_clicks_day", "link_clicks", ["day"], if_not_exists=True)
    op.create_table(
        "usage_counts",
        sa.Column("day", sa.Date, nullable=False),
        sa.Column("platform", sa.String(32), nullable=False),
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("key", sa.String(64), nullable=False),
        sa.Column("n", sa.Integer, nullable=False),
        sa.PrimaryKeyConstraint("day", "platform", "kind", "key"),
        if_not_exists=True,
    )
    op.create_index("ix_usage_counts_key", "usage_counts", ["kind", "key"], if_not_exists=True)
    op.create_index("ix_audit_at", "audit", ["at"], if_not_exists=True)
    op.create_index(
        "ix_subscribers_since", "subscribers", ["platform", "since"], if_not_exists=True
    )
    op.create_index(
        "ix_subscribers_until", "subscribers", ["platform", "until"], if_not_exists=True
    )
    op.create_index("ix_audit_action", "audit", ["action", "id"], if_not_exists=True)
    op.create_index("ix_audit_user", "audit", ["user_id", "id"], if_not_exists=True)
    set_schema_version(11)
