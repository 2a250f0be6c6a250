"""search generation: a counter every change of what is published moves (SQLite)

Revision ID: 0010
Revises: 0009

A search keeps only chunks of published versions. On SQLite, a process holds the ids of every
published chunk in memory (rag/retrieve/published.py) and checks a search's candidates there
instead of reading each one's status; the table's one row tells it when that set is out of date.
Triggers move the counter in the transaction that makes the change, whoever makes it (this
process, another worker, another command): a version that becomes published or stops being
published, one inserted published, one deleted while published (a deleted document's versions
go by cascade, which fires them too). SQLite runs one writer at a time, so the row is never
contended; PostgreSQL keeps the check by primary key and gets no triggers (concurrent publishes
would queue on the row).
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None

_BUMP = "UPDATE search_generation SET value = value + 1 WHERE id = 1;"
TRIGGERS = {
    "search_generation_status": "AFTER UPDATE OF status ON document_versions "
    "WHEN (OLD.status = 'published') <> (NEW.status = 'published')",
    "search_generation_insert": "AFTER INSERT ON document_versions WHEN NEW.status = 'published'",
    "search_generation_delete": "AFTER DELETE ON document_versions WHEN OLD.status = 'published'",
}


def upgrade() -> None:
    table = op.create_table(
        "search_generation",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("value", sa.BigInteger, nullable=False),
    )
    op.bulk_insert(table, [{"id": 1, "value": 0}])
    if op.get_bind().dialect.name == "sqlite":
        for name, when in TRIGGERS.items():
            op.execute(f"CREATE TRIGGER {name} {when} BEGIN {_BUMP} END")


def downgrade() -> None:
    if op.get_bind().dialect.name == "sqlite":
        for name in TRIGGERS:
            op.execute(f"DROP TRIGGER IF EXISTS {name}")
    op.drop_table("search_generation")
