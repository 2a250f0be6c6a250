"""tokens made by a workspace's admin act in that workspace only

Revision ID: 0006
Revises: 0005

An admin of one workspace may make a token for a member of it. Were that token to act in the
member's other workspaces too, the admin of one workspace could act there as the member. A token
made through the API by an admin who holds a token is therefore `home_only`; tokens made by the
local administrator (`rag token create`) act in every workspace of their principal, within the
principal's standing in each.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("tokens") as batch:
        batch.add_column(sa.Column("home_only", sa.Boolean(), nullable=False, server_default=sa.false()))


def downgrade() -> None:
    with op.batch_alter_table("tokens") as batch:
        batch.drop_column("home_only")
