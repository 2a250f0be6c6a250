"""keyword vocabulary: document frequencies of the FTS5 index (SQLite)

Revision ID: 0002
Revises: 0001
"""

from __future__ import annotations

from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    if op.get_bind().dialect.name == "sqlite":
        op.execute("CREATE VIRTUAL TABLE chunk_fts_vocab USING fts5vocab(chunk_fts, 'row')")


def downgrade() -> None:
    if op.get_bind().dialect.name == "sqlite":
        op.execute("DROP TABLE IF EXISTS chunk_fts_vocab")
