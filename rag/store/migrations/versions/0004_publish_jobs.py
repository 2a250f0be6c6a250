"""publishing as a database-backed job: request order and the status a failed publish returns to

Revision ID: 0004
Revises: 0003

A version in status `publishing` is a job. Any worker claims it with a row lock (PostgreSQL:
`FOR UPDATE SKIP LOCKED`) held until it is published or put back; a worker that dies releases the
lock with its connection and another one takes the job over. `publish_seq` orders the publish
requests of one document (the latest request wins, whichever finishes first); `publish_from` is
the status a failed publish returns to (draft, or archived for a rollback).
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("document_versions") as batch:
        batch.add_column(sa.Column("publish_seq", sa.Integer(), nullable=False, server_default="0"))
        batch.add_column(sa.Column("publish_from", sa.String(length=16), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("document_versions") as batch:
        batch.drop_column("publish_from")
        batch.drop_column("publish_seq")
