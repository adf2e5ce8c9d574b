"""Schema 1: deliveries, parts, targets, subscribers, audit (the first release's ledger).

Revision ID: 0001
Revises:
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from digest_core.delivery.ledger.migrations import set_schema_version

revision: str = "0001"
down_revision: str | None = None
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    op.create_table(
        "schema_version",
        sa.Column("version", sa.Integer, primary_key=True),
        if_not_exists=True,
    )
    _create_deliveries_and_parts()
    _create_targets_and_subscribers()
    _create_audit()
    set_schema_version(1)


def _create_deliveries_and_parts() -> None:
    """What was sent where: a delivery per issue, platform and generation, a row per part."""
    op.create_table(
        "deliveries",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("issue_date", sa.Date, nullable=False),
        sa.Column("revision", sa.String(32), nullable=False),
        sa.Column("platform", sa.String(32), nullable=False),
        sa.Column("generation", sa.Integer, nullable=False),
        sa.Column("forced", sa.Boolean, nullable=False),
        sa.Column("parts", sa.Integer, nullable=False),
        sa.Column("created_at", sa.DateTime, nullable=False),
        sa.UniqueConstraint("issue_date", "revision", "platform", "generation"),
        if_not_exists=True,
    )
    op.create_table(
        "parts",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("delivery_id", sa.Integer, sa.ForeignKey("deliveries.id"), nullable=False),
        sa.Column("target", sa.String(128), nullable=False),
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("part", sa.Integer, nullable=False),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("message_id", sa.String(128)),
        sa.Column("attempts", sa.Integer, nullable=False),
        sa.Column("last_error", sa.Text),
        sa.Column("created_at", sa.DateTime, nullable=False),
        sa.Column("updated_at", sa.DateTime, nullable=False),
        sa.UniqueConstraint("delivery_id", "target", "part"),
        if_not_exists=True,
    )
    op.create_index("ix_parts_state", "parts", ["state"], if_not_exists=True)
    op.create_index("ix_parts_target", "parts", ["target"], if_not_exists=True)


def _create_targets_and_subscribers() -> None:
    """Targets found gone or moved, and the private chats subscribed."""
    op.create_table(
        "targets",
        sa.Column("platform", sa.String(32), primary_key=True),
        sa.Column("target_id", sa.String(128), primary_key=True),
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("active", sa.Boolean, nullable=False),
        sa.Column("moved_to", sa.String(128)),
        sa.Column("reason", sa.Text),
        sa.Column("updated_at", sa.DateTime, nullable=False),
        if_not_exists=True,
    )
    op.create_table(
        "subscribers",
        sa.Column("platform", sa.String(32), primary_key=True),
        sa.Column("chat_id", sa.String(128), primary_key=True),
        sa.Column("active", sa.Boolean, nullable=False),
        sa.Column("since", sa.DateTime, nullable=False),
        sa.Column("until", sa.DateTime),
        if_not_exists=True,
    )


def _create_audit() -> None:
    """The audit log of commands."""
    op.create_table(
        "audit",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("at", sa.DateTime, nullable=False),
        sa.Column("platform", sa.String(32), nullable=False),
        sa.Column("user_id", sa.String(128), nullable=False),
        sa.Column("action", sa.String(64), nullable=False),
        sa.Column("args", sa.Text, nullable=False),
        sa.Column("allowed", sa.Boolean, nullable=False),
        sa.Column("outcome", sa.Text, nullable=False),
        if_not_exists=True,
    )
