"""published changes: the chunks each change to what is published adds or withdraws (SQLite)

Revision ID: 0016
Revises: 0015

Migration 0010's triggers move the search generation with every change to what is published; a
process holding the published chunks' ids (rag/retrieve/published.py) then read every id again,
time in proportion to the store (0.38 s at a million chunks) for one document published. Triggers
now also log the chunks concerned, in order (`seq`): a version that becomes published (its chunks,
1) or stops being published (0), every chunk deleted (0: a deleted document's chunks go by cascade,
which fires the trigger too), and a version inserted already published (one row of chunk -1: read
everything again). The holder applies the rows after the last one it applied instead of reading
every id. The log keeps its last `KEEP` rows (the triggers delete older ones; a holder further
behind reads everything). PostgreSQL has no published set and gets no triggers; the table is made
on both, as 0010's is.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0016"
down_revision = "0015"
branch_labels = None
depends_on = None

KEEP = 500_000  # rows of the log kept: a holder that applied none of them reads every id instead
_BUMP = "UPDATE search_generation SET value = value + 1 WHERE id = 1;"
_PRUNE = f"DELETE FROM published_changes WHERE seq <= (SELECT max(seq) FROM published_changes) - {KEEP};"
_INSERT = "INSERT INTO published_changes (chunk_id, published)"

TRIGGERS = {  # name: (when, what)
    "search_generation_status": (
        "AFTER UPDATE OF status ON document_versions WHEN (OLD.status = 'published') <> (NEW.status = 'published')",
        f"{_BUMP} {_INSERT} SELECT id, NEW.status = 'published' FROM chunks WHERE version_id = NEW.id; {_PRUNE}"),
    "search_generation_insert": (
        "AFTER INSERT ON document_versions WHEN NEW.status = 'published'",
        f"{_BUMP} {_INSERT} VALUES (-1, 1); {_PRUNE}"),
    # (0010's search_generation_delete stays: it moves the generation when a published version goes.)
    "published_changes_chunk_delete": (
        "AFTER DELETE ON chunks", f"{_INSERT} VALUES (OLD.id, 0); {_PRUNE}"),
}
_BEFORE = {  # migration 0010's, for the downgrade
    "search_generation_status": "AFTER UPDATE OF status ON document_versions "
    "WHEN (OLD.status = 'published') <> (NEW.status = 'published')",
    "search_generation_insert": "AFTER INSERT ON document_versions WHEN NEW.status = 'published'",
}


def upgrade() -> None:
    op.create_table(
        "published_changes",
        sa.Column("seq", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("chunk_id", sa.BigInteger, nullable=False),
        sa.Column("published", sa.Boolean, nullable=False),
        sqlite_autoincrement=True,  # never a number used before, even once older rows are deleted
    )
    if op.get_bind().dialect.name == "sqlite":
        for name, (when, body) in TRIGGERS.items():
            op.execute(f"DROP TRIGGER IF EXISTS {name}")
            op.execute(f"CREATE TRIGGER {name} {when} BEGIN {body} END")


def downgrade() -> None:
    if op.get_bind().dialect.name == "sqlite":
        op.execute("DROP TRIGGER IF EXISTS published_changes_chunk_delete")
        for name, when in _BEFORE.items():
            op.execute(f"DROP TRIGGER IF EXISTS {name}")
            op.execute(f"CREATE TRIGGER {name} {when} BEGIN {_BUMP} END")
    op.drop_table("published_changes")
