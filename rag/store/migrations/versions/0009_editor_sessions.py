"""editor sessions: people signed in to the knowledge base editor

Revision ID: 0009
Revises: 0008

The editor (rag/web/) keeps its sessions in the store, so that every worker and replica of
`rag serve` knows them: the SHA-256 of the cookie's random id, the token the session was opened
with, its CSRF token and the messages to show on the next page.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "editor_sessions",
        sa.Column("id_hash", sa.String(64), primary_key=True),
        sa.Column("token_id", sa.String(40), sa.ForeignKey("tokens.id", ondelete="CASCADE"), nullable=False),
        sa.Column("csrf", sa.String(64), nullable=False),
        sa.Column("flashes", sa.JSON(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("seen_at", sa.DateTime(timezone=True), nullable=False),
    )
    op.create_index("ix_editor_sessions_token_id", "editor_sessions", ["token_id"])
    op.create_index("ix_editor_sessions_seen_at", "editor_sessions", ["seen_at"])


def downgrade() -> None:
    op.drop_index("ix_editor_sessions_seen_at", "editor_sessions")
    op.drop_index("ix_editor_sessions_token_id", "editor_sessions")
    op.drop_table("editor_sessions")
