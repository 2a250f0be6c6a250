"""PostgreSQL keyword lane: postings and document frequencies kept by triggers

Revision ID: 0005
Revises: 0004

Ranking with ts_rank read and parsed the tsvector of every chunk an OR query matched: ~200 ms a
question at 100,000 chunks. The lane now scores BM25 from postings instead:

- `keyword_postings` (lexeme, chunk, knowledge base, term frequency, chunk length), one row per
  lexeme of each chunk, read by an index-only scan of its primary key;
- `keyword_df` holds each lexeme's document frequency, the number of chunks (row '') and their
  total length (row ' dl'; lexemes hold no spaces).

Statement triggers on `chunk_tsv` keep both exact, cascades included. `keyword_df` rows are
upserted in lexeme order, so concurrent publishers lock them in one order.
"""

from __future__ import annotations

from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None

_COUNT = """
CREATE FUNCTION keyword_df_count() RETURNS trigger LANGUAGE plpgsql AS $$
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


def upgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    op.execute("CREATE TABLE keyword_df (lexeme TEXT PRIMARY KEY, df BIGINT NOT NULL)")
    op.execute(
        "CREATE TABLE keyword_postings (lexeme TEXT NOT NULL, "
        "chunk_id BIGINT NOT NULL REFERENCES chunk_tsv(chunk_id) ON DELETE CASCADE, kb_id VARCHAR(40) NOT NULL, "
        "tf INTEGER NOT NULL, dl INTEGER NOT NULL, PRIMARY KEY (lexeme, chunk_id) INCLUDE (kb_id, tf, dl))"
    )
    op.execute("CREATE INDEX ix_keyword_postings_chunk ON keyword_postings (chunk_id)")
    op.execute(_COUNT)
    op.execute(
        "CREATE TRIGGER chunk_tsv_df_insert AFTER INSERT ON chunk_tsv REFERENCING NEW TABLE AS new_rows "
        "FOR EACH STATEMENT EXECUTE FUNCTION keyword_df_count()"
    )
    op.execute(
        "CREATE TRIGGER chunk_tsv_df_delete AFTER DELETE ON chunk_tsv REFERENCING OLD TABLE AS old_rows "
        "FOR EACH STATEMENT EXECUTE FUNCTION keyword_df_count()"
    )
    op.execute(
        "INSERT INTO keyword_postings (lexeme, chunk_id, kb_id, tf, dl) "
        "SELECT (u).lexeme, n.chunk_id, c.kb_id, coalesce(array_length((u).positions, 1), 1), length(n.tsv) "
        "FROM (SELECT chunk_id, tsv, unnest(tsv) AS u FROM chunk_tsv) AS n JOIN chunks AS c ON c.id = n.chunk_id"
    )
    op.execute(
        "INSERT INTO keyword_df (lexeme, df) SELECT word, ndoc FROM ts_stat('SELECT tsv FROM chunk_tsv') "
        "UNION ALL SELECT '', count(*) FROM chunk_tsv "
        "UNION ALL SELECT ' dl', coalesce(sum(length(tsv)), 0) FROM chunk_tsv"
    )


def downgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    op.execute("DROP TRIGGER IF EXISTS chunk_tsv_df_delete ON chunk_tsv")
    op.execute("DROP TRIGGER IF EXISTS chunk_tsv_df_insert ON chunk_tsv")
    op.execute("DROP FUNCTION IF EXISTS keyword_df_count()")
    op.execute("DROP TABLE IF EXISTS keyword_postings")
    op.execute("DROP TABLE IF EXISTS keyword_df")
