"""chunk locators: a slide, a sheet and its rows, OCR, beside a chunk's page

Revision ID: 0014
Revises: 0013

What a chunk's excerpt names in its original beyond the page (`chunks.locator`, a JSON object:
``{"slide": 3}``, ``{"sheet": "Revenue", "rows": [2, 14]}``, ``{"ocr": true}``; rag/ingest/layout.py);
null for a chunk of a version without such parts. A version's own layout stays in
`document_versions.pages`, which now also holds an object for slides and sheets.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0014"
down_revision = "0013"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("chunks") as batch:
        batch.add_column(sa.Column("locator", sa.JSON(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("chunks") as batch:
        batch.drop_column("locator")
