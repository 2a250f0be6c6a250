"""sources record whether the operator added them: only those read local paths outside the roots

Revision ID: 0019
Revises: 0018

A folder, export or local Git source reads the server's disk. A workspace's admin may add one only
on a path inside RAG_SOURCES__LOCAL_ROOTS; the operator (`rag source add` on the command line) on
any path. `sources.added_by_operator` records which, so that an operator's source keeps syncing
until an admin changes its settings. Sources made before this revision are not marked: who added
them is not known, so their local paths are held to the roots until the operator adds them again.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0019"
down_revision = "0018"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("sources") as batch:
        batch.add_column(sa.Column("added_by_operator", sa.Boolean(), nullable=False, server_default=sa.false()))


def downgrade() -> None:
    with op.batch_alter_table("sources") as batch:
        batch.drop_column("added_by_operator")
