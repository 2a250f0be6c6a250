"""PostgreSQL keyword lane: no unused full-text index, no per-posting foreign key check

Revision ID: 0017
Revises: 0016

Two costs every published chunk paid on PostgreSQL for nothing a search reads:

- `ix_chunk_tsv`, the GIN index of migration 0001, served ts_rank's `@@` match; since migration
  0005 the lane reads `keyword_postings` and no query uses it;
- `keyword_postings.chunk_id`'s foreign key checked each of a chunk's ~100 postings against
  `chunk_tsv` one by one, only to delete them by cascade later. The statement trigger that already
  keeps `keyword_df` deletes a deleted chunk's postings instead (deletes by cascade from `chunks`
  fire it too).

The lexemes stay in `chunk_tsv` (the postings are made from them).
"""

from __future__ import annotations

from alembic import op

revision = "0017"
down_revision = "0016"
branch_labels = None
depends_on = None

_COUNT = """
CREATE OR REPLACE FUNCTION keyword_df_count() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        INSERT INTO keyword_postings (lexeme, chunk_id, kb_id, tf, dl)
        SELECT (u).lexeme, n.chunk_id, c.kb_id, coalesce(array_length((u).positions, 1), 1), length(n.tsv)
        FROM (SELECT chunk_id, tsv, unnest(tsv) AS u FROM new_rows) AS n JOIN chunks AS c ON c.id = n.chunk_id;
        INSERT INTO keyword_df (lexeme, df)
        SELECT lexeme, n FROM (
            SELECT (unnest(tsv)).lexeme AS lexeme, count(*) AS n FROM new_rows GROUP BY 1
            UNION ALL SELECT '', count(*) FROM new_rows
            UNION ALL SELECT ' dl', coalesce(sum(length(tsv)), 0) FROM new_rows
        ) AS counted WHERE n > 0 ORDER BY lexeme
        ON CONFLICT (lexeme) DO UPDATE SET df = keyword_df.df + EXCLUDED.df;
    ELSE
        DELETE FROM keyword_postings WHERE chunk_id IN (SELECT chunk_id FROM old_rows);
        INSERT INTO keyword_df (lexeme, df)
        SELECT lexeme, -n FROM (
            SELECT (unnest(tsv)).lexeme AS lexeme, count(*) AS n FROM old_rows GROUP BY 1
            UNION ALL SELECT '', count(*) FROM old_rows
            UNION ALL SELECT ' dl', coalesce(sum(length(tsv)), 0) FROM old_rows
        ) AS counted WHERE n > 0 ORDER BY lexeme
        ON CONFLICT (lexeme) DO UPDATE SET df = keyword_df.df + EXCLUDED.df;
    END IF;
    RETURN NULL;
END $$;
"""

_COUNT_0005 = _COUNT.replace(
    "        DELETE FROM keyword_postings WHERE chunk_id IN (SELECT chunk_id FROM old_rows);\n", ""
)


def upgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    op.execute("DROP INDEX IF EXISTS ix_chunk_tsv")
    op.execute(_COUNT)
    op.execute("ALTER TABLE keyword_postings DROP CONSTRAINT IF EXISTS keyword_postings_chunk_id_fkey")


def downgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    op.execute("DELETE FROM keyword_postings WHERE chunk_id NOT IN (SELECT chunk_id FROM chunk_tsv)")
    op.execute(
        "ALTER TABLE keyword_postings ADD CONSTRAINT keyword_postings_chunk_id_fkey "
        "FOREIGN KEY (chunk_id) REFERENCES chunk_tsv(chunk_id) ON DELETE CASCADE"
    )
    op.execute(_COUNT_0005)
    op.execute("CREATE INDEX ix_chunk_tsv ON chunk_tsv USING GIN (tsv)")
