"""Schema 3: the index behind records() and last_sent(), newest first without a sort.

The state ``unknown`` arrived with it and needs no DDL (state is free text).

Revision ID: 0003
Revises: 0002
"""

from __future__ import annotations

from alembic import op

from digest_core.delivery.ledger.migrations import set_schema_version

revision: str = "0003"
down_revision: str | None = "0002"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    op.create_index("ix_parts_updated", "parts", ["updated_at", "id"], if_not_exists=True)
    set_schema_version(3)
