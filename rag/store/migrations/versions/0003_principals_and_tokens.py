"""principals, workspace memberships and hashed bearer tokens

Revision ID: 0003
Revises: 0002
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def _when(name: str, nullable: bool = False) -> sa.Column:
    return sa.Column(name, sa.DateTime(timezone=True), nullable=nullable)


def upgrade() -> None:
    op.create_table(
        "principals",
        sa.Column("id", sa.String(length=40), nullable=False),
        sa.Column("name", sa.String(length=200), nullable=False),
        sa.Column("kind", sa.String(length=16), nullable=False),
        _when("created_at"),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_table(
        "memberships",
        sa.Column("principal_id", sa.String(length=40), nullable=False),
        sa.Column("workspace_id", sa.String(length=64), nullable=False),
        sa.Column("role", sa.String(length=16), nullable=False),
        _when("created_at"),
        sa.ForeignKeyConstraint(["principal_id"], ["principals.id"], ondelete="CASCADE"),
        sa.ForeignKeyConstraint(["workspace_id"], ["workspaces.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("principal_id", "workspace_id"),
    )
    op.create_table(
        "tokens",
        sa.Column("id", sa.String(length=40), nullable=False),
        sa.Column("principal_id", sa.String(length=40), nullable=False),
        sa.Column("workspace_id", sa.String(length=64), nullable=False),
        sa.Column("secret_hash", sa.String(length=64), nullable=False),
        sa.Column("scopes", sa.JSON(), nullable=False),
        sa.Column("access", sa.String(length=16), nullable=False),
        sa.Column("folder_ids", sa.JSON(), nullable=False),
        _when("created_at"),
        _when("expires_at", nullable=True),
        _when("revoked_at", nullable=True),
        _when("last_used_at", nullable=True),
        sa.ForeignKeyConstraint(["principal_id"], ["principals.id"], ondelete="CASCADE"),
        sa.ForeignKeyConstraint(["workspace_id"], ["workspaces.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("secret_hash"),
    )
    with op.batch_alter_table("tokens", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_tokens_principal_id"), ["principal_id"], unique=False)
        batch_op.create_index(batch_op.f("ix_tokens_workspace_id"), ["workspace_id"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("tokens", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_tokens_workspace_id"))
        batch_op.drop_index(batch_op.f("ix_tokens_principal_id"))
    op.drop_table("tokens")
    op.drop_table("memberships")
    op.drop_table("principals")
