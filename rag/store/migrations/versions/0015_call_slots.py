"""calls in progress shared by the processes of a PostgreSQL store

Revision ID: 0015
Revises: 0014

One row per call in progress that a per-caller cap counts (an answer streaming, an upload being
read; rag/service/slots.py): its caller's key and when its lease lapses, in seconds since the
epoch by the database's clock. The process holding a row renews it; a dead process's rows lapse.
The embedded store keeps these counts in memory.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0015"
down_revision = "0014"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "call_slots",
        sa.Column("id", sa.String(length=32), primary_key=True),
        sa.Column("key", sa.String(length=200), nullable=False),
        sa.Column("expires", sa.Float(precision=53), nullable=False),
    )
    op.create_index("ix_call_slots_key", "call_slots", ["key"])


def downgrade() -> None:
    op.drop_index("ix_call_slots_key", table_name="call_slots")
    op.drop_table("call_slots")
