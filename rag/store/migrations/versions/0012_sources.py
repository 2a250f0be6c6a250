"""sources kept in sync: the sources, the items they listed, and each document's URL back

Revision ID: 0012
Revises: 0011

A source (a website, a Git repository, a bucket, an export) fills a folder of a knowledge base
and is synced on a schedule (rag/service/sources/). Its settings never hold a secret: `secret`
names one that Settings supplies. `source_items` records, per item, the version last stored and
the document it became; `nodes.url` is where a document's original lives.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("nodes") as batch:
        batch.add_column(sa.Column("url", sa.String(length=2000), nullable=True))
    op.create_table(
        "sources",
        sa.Column("id", sa.String(length=40), primary_key=True),
        sa.Column("workspace_id", sa.String(length=64), sa.ForeignKey("workspaces.id", ondelete="CASCADE"),
                  nullable=False, index=True),
        sa.Column("name", sa.String(length=200), nullable=False),
        sa.Column("name_key", sa.String(length=200), nullable=False),
        sa.Column("kind", sa.String(length=32), nullable=False),
        sa.Column("config", sa.JSON(), nullable=False),
        sa.Column("secret", sa.String(length=200), nullable=True),
        sa.Column("kb_id", sa.String(length=40), sa.ForeignKey("knowledge_bases.id", ondelete="CASCADE"), nullable=False),
        sa.Column("folder", sa.String(length=2000), nullable=False),
        sa.Column("every_seconds", sa.Integer(), nullable=True),
        sa.Column("paused", sa.Boolean(), nullable=False, server_default=sa.false()),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("cursor", sa.JSON(), nullable=True),
        sa.Column("last_started_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("last_finished_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("last_outcome", sa.String(length=16), nullable=True),
        sa.Column("last_error", sa.Text(), nullable=True),
        sa.Column("last_counts", sa.JSON(), nullable=True),
        sa.Column("last_failures", sa.JSON(), nullable=True),
        sa.Column("progress", sa.JSON(), nullable=True),
        sa.Column("next_run_at", sa.DateTime(timezone=True), nullable=True, index=True),
        sa.Column("lease_owner", sa.String(length=100), nullable=True),
        sa.Column("lease_until", sa.DateTime(timezone=True), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.UniqueConstraint("workspace_id", "name_key", name="uq_source_name"),
    )
    op.create_table(
        "source_items",
        sa.Column("id", sa.Integer(), primary_key=True, autoincrement=True),
        sa.Column("source_pk", sa.String(length=40), sa.ForeignKey("sources.id", ondelete="CASCADE"), nullable=False),
        sa.Column("item_id", sa.String(length=1000), nullable=False),
        sa.Column("version", sa.String(length=200), nullable=False),
        sa.Column("node_id", sa.String(length=40), sa.ForeignKey("nodes.id", ondelete="SET NULL"), nullable=True,
                  index=True),
        sa.Column("state", sa.JSON(), nullable=True),
        sa.Column("seen_at", sa.DateTime(timezone=True), nullable=False),
        sa.UniqueConstraint("source_pk", "item_id", name="uq_source_item"),
    )


def downgrade() -> None:
    op.drop_table("source_items")
    op.drop_table("sources")
    with op.batch_alter_table("nodes") as batch:
        batch.drop_column("url")
