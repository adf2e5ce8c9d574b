"""Schema 10: threads per issue. One row per (delivery, target) whose post opens a thread (a
forum post, or a thread on the issue's first message): the intent before the platform is asked,
the thread and the first message once open (``threads``, see
:mod:`digest_core.delivery.ledger.threads`), so a restart never opens a second thread for a post.

Revision ID: 0010
Revises: 0009
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from digest_core.delivery.ledger.migrations import set_schema_version

revision: str = "0010"
down_revision: str | None = "0009"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    op.create_table(
        "threads",
        sa.Column("delivery_id", sa.Integer, sa.ForeignKey("deliveries.id"), nullable=False),
        sa.Column("target", sa.String(128), nullable=False),
        sa.Column("title", sa.String(256), nullable=False),
        sa.Column("thread_id", sa.String(128)),
        sa.Column("message_id", sa.String(128)),
        sa.Column("opened_at", sa.DateTime, nullable=False),
        sa.Column("updated_at", sa.DateTime, nullable=False),
        sa.PrimaryKeyConstraint("delivery_id", "target"),
        if_not_exists=True,
    )
    set_schema_version(10)
