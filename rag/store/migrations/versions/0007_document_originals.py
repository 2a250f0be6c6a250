"""the original file of a document version: an upload, or an ingested PDF, HTML or Word file

Revision ID: 0007
Revises: 0006

A version made from a file keeps the file itself beside its extracted Markdown body: its bytes,
its name, its media type, its size and its SHA-256. One row per version at most; deleting the
version (or its document) deletes it.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "document_originals",
        sa.Column("version_id", sa.Integer(), sa.ForeignKey("document_versions.id", ondelete="CASCADE"),
                  primary_key=True),
        sa.Column("filename", sa.String(length=255), nullable=False),
        sa.Column("media_type", sa.String(length=100), nullable=False),
        sa.Column("size", sa.BigInteger(), nullable=False),
        sa.Column("sha256", sa.String(length=64), nullable=False),
        sa.Column("data", sa.LargeBinary(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("document_originals")
