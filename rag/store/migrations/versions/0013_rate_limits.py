"""rate limits shared by the processes of a PostgreSQL store

Revision ID: 0013
Revises: 0012

One row per (token or principal, kind of call): its GCRA "theoretical arrival time" in seconds
since the epoch (rag/service/quotas.py). The embedded store keeps these counts in memory.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "rate_limits",
        sa.Column("key", sa.String(length=200), primary_key=True),
        sa.Column("tat", sa.Float(precision=53), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("rate_limits")
