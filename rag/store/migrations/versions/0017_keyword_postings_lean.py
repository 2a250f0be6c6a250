"""PostgreSQL keyword lane: no unused full-text index, no per-posting foreign key check

Revision ID: 0017
Revises: 0016

Two costs every published chunk paid on PostgreSQL for nothing a search reads:

- `ix_chunk_tsv`, the GIN index of migration 0001, served ts_rank's `@@` match; since migration
  0005 the lane reads `keyword_postings` and no query uses it;
- `keyword_postings.chunk_id`'s foreign key checked each of a chunk's ~100 postings against
  `chunk_tsv` one by one, only to delete them by cascade later. A statement trigger on deletes from
  `chunk_tsv`, beside 0005's, deletes a deleted chunk's postings instead (deletes by cascade from
  `chunks` fire it too).

The lexemes stay in `chunk_tsv` (the postings are made from them).
"""

from __future__ import annotations

from alembic import op

revision = "0017"
down_revision = "0016"
branch_labels = None
depends_on = None

# Beside 0005's `chunk_tsv_df_delete`, in either order: neither reads what the other writes.
_DELETE_POSTINGS = """
CREATE FUNCTION keyword_postings_delete() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM keyword_postings WHERE chunk_id IN (SELECT chunk_id FROM old_rows);
    RETURN NULL;
END $$;
"""


def upgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    op.execute("DROP INDEX IF EXISTS ix_chunk_tsv")
    op.execute(_DELETE_POSTINGS)
    op.execute(
        "CREATE TRIGGER chunk_tsv_delete_postings AFTER DELETE ON chunk_tsv REFERENCING OLD TABLE AS old_rows "
        "FOR EACH STATEMENT EXECUTE FUNCTION keyword_postings_delete()"
    )
    op.execute("ALTER TABLE keyword_postings DROP CONSTRAINT IF EXISTS keyword_postings_chunk_id_fkey")


def downgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    op.execute("DELETE FROM keyword_postings WHERE chunk_id NOT IN (SELECT chunk_id FROM chunk_tsv)")
    op.execute(
        "ALTER TABLE keyword_postings ADD CONSTRAINT keyword_postings_chunk_id_fkey "
        "FOREIGN KEY (chunk_id) REFERENCES chunk_tsv(chunk_id) ON DELETE CASCADE"
    )
    op.execute("DROP TRIGGER IF EXISTS chunk_tsv_delete_postings ON chunk_tsv")
    op.execute("DROP FUNCTION IF EXISTS keyword_postings_delete()")
    op.execute("CREATE INDEX ix_chunk_tsv ON chunk_tsv USING GIN (tsv)")
