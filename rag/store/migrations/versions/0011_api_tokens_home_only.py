"""tokens made over the API before 0006 act in their home workspace only

Revision ID: 0011
Revises: 0010

Migration 0006 added `home_only` with a server default of false, so a token a workspace's admin
made over the API before it kept acting in every workspace of its principal (issue 27). Stores
already past 0006 never run it again, so this one sets `home_only` on each token whose
`create_token` activity row was written by an actor other than the local command line
(rag/store/api_tokens.py). Tokens the CLI made keep what they have. A token whose activity row
was lost (a write that failed) cannot be told apart and keeps what it has.
"""

from __future__ import annotations

import logging

from alembic import op

from rag.store.api_tokens import make_api_tokens_home_only

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None

log = logging.getLogger("rag.store.migrations")


def upgrade() -> None:
    changed = make_api_tokens_home_only(op.get_bind())
    if changed:
        log.warning("%d tokens made over the API now act in their home workspace only (migration 0011)", changed)


def downgrade() -> None:
    pass  # which of them were acting everywhere before is not kept; acting in fewer places is safe
