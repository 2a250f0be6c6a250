"""pages of paged originals (PDF): the version's page spans, each chunk's page range

Revision ID: 0008
Revises: 0007

A version extracted from a PDF keeps its pages as [start, end, page] character spans of its body
(`document_versions.pages`), and each of its chunks the pages its text lies on (`chunks.page_start`,
`chunks.page_end`), so that a citation can name the page. Both are null for every other version.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("document_versions") as batch:
        batch.add_column(sa.Column("pages", sa.JSON(), nullable=True))
    with op.batch_alter_table("chunks") as batch:
        batch.add_column(sa.Column("page_start", sa.Integer(), nullable=True))
        batch.add_column(sa.Column("page_end", sa.Integer(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("chunks") as batch:
        batch.drop_column("page_end")
        batch.drop_column("page_start")
    with op.batch_alter_table("document_versions") as batch:
        batch.drop_column("pages")
