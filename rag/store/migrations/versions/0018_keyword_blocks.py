"""PostgreSQL keyword lane: postings packed in blocks, a few rows per lexeme instead of one per posting

Revision ID: 0018
Revises: 0017

`keyword_postings` (migration 0005) held one row per posting: about 216 bytes each with its index,
21.7 GB at a million chunks, and a question's search read every posting of its lexemes row by row
(649 ms p50 there). The postings now live in `keyword_blocks`: per lexeme, knowledge base and
batch, up to 4,096 postings packed as three arrays (`ids` big-endian int8 chunk ids in ascending
order, `tfs` and `dls` int2 term frequencies and chunk lengths): 12 bytes a posting, read with one
index lookup per lexeme and scored in numpy by the lane.

- A batch is a set of chunks whose postings are written together: each statement that inserts into
  `chunk_tsv` brings its own (`chunk_tsv.batch`, set by the lane), so a publish only appends rows;
  `keyword_batches` holds each batch's chunk count.
- A deleted chunk leaves its postings in place and a tombstone (`keyword_dead`: batch, chunk), which
  the lane applies before scoring, so a chunk moved to another knowledge base and back is counted
  once, in the knowledge base it is in.
- The lane merges small batches into larger ones and rewrites batches with many tombstones
  (`PostgresKeywordLane.compact`, after publishes), joining their blocks lexeme by lexeme.

`keyword_df` (document frequencies) is kept as before, by 0005's statement triggers, now without the
postings' insert (and 0017's postings delete goes with the table).
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

from alembic import op

revision = "0018"
down_revision = "0017"
branch_labels = None
depends_on = None

# Postings per block; the lane reads blocks whole. 4,096 keeps a block's arrays a few tens of kB.
# The lane's merges cut blocks at the same size (rag/retrieve/keyword.py, BLOCK).
BLOCK = 4096

# Blocks of the chunks of these batches, made from their lexemes (used by the insert trigger and by
# this migration; the lane's merges join blocks instead). The knowledge base is the chunk's at the
# time of writing.
_BUILD = f"""
CREATE FUNCTION keyword_blocks_build(batches BIGINT[]) RETURNS void LANGUAGE sql AS $$
INSERT INTO keyword_blocks (lexeme, kb_id, batch, part, n, ids, tfs, dls)
SELECT lexeme, kb_id, batch, part, count(*),
       string_agg(int8send(chunk_id), ''::bytea ORDER BY chunk_id),
       string_agg(int2send(tf), ''::bytea ORDER BY chunk_id),
       string_agg(int2send(dl), ''::bytea ORDER BY chunk_id)
FROM (
    SELECT p.*, (row_number() OVER (PARTITION BY lexeme, kb_id, batch ORDER BY chunk_id) - 1) / {BLOCK} AS part
    FROM (
        SELECT (t.u).lexeme AS lexeme, c.kb_id, t.batch, t.chunk_id,
               least(coalesce(array_length((t.u).positions, 1), 1), 32767)::int2 AS tf,
               least(length(t.tsv), 32767)::int2 AS dl
        FROM (SELECT chunk_id, batch, tsv, unnest(tsv) AS u FROM chunk_tsv WHERE batch = ANY(batches)) AS t
        JOIN chunks AS c ON c.id = t.chunk_id
    ) AS p
) AS q
GROUP BY lexeme, kb_id, batch, part
$$;
"""

_WRITE = """
CREATE FUNCTION keyword_blocks_write() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM keyword_blocks_build(ARRAY(SELECT DISTINCT batch FROM new_rows));
    INSERT INTO keyword_batches (batch, chunks) SELECT batch, count(*) FROM new_rows GROUP BY batch
    ON CONFLICT (batch) DO UPDATE SET chunks = keyword_batches.chunks + EXCLUDED.chunks;
    RETURN NULL;
END $$;
"""

_FORGET = """
CREATE FUNCTION keyword_blocks_forget() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO keyword_dead (batch, chunk_id) SELECT batch, chunk_id FROM old_rows ON CONFLICT DO NOTHING;
    RETURN NULL;
END $$;
"""

# The lines of 0005's keyword_df_count() that write the postings' rows; the rest of it (the document
# frequencies) stays as 0005 wrote it, read from that migration's file.
_POSTINGS_INSERT = """        INSERT INTO keyword_postings (lexeme, chunk_id, kb_id, tf, dl)
        SELECT (u).lexeme, n.chunk_id, c.kb_id, coalesce(array_length((u).positions, 1), 1), length(n.tsv)
        FROM (SELECT chunk_id, tsv, unnest(tsv) AS u FROM new_rows) AS n JOIN chunks AS c ON c.id = n.chunk_id;
"""


def _count_of_0005() -> str:
    """0005's `CREATE FUNCTION keyword_df_count()`, as a CREATE OR REPLACE."""
    spec = importlib.util.spec_from_file_location("migration_0005", Path(__file__).with_name("0005_keyword_df.py"))
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    body = module._COUNT
    assert _POSTINGS_INSERT in body, "0005's function is not as this migration expects"
    return body.replace("CREATE FUNCTION", "CREATE OR REPLACE FUNCTION", 1)


# Chunks already indexed are put in batches of this many, in chunk id order, by the upgrade.
_UPGRADE_BATCH = 32768


def upgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    op.execute("CREATE SEQUENCE keyword_batch_seq")
    op.execute("ALTER TABLE chunk_tsv ADD COLUMN batch BIGINT")
    op.execute(
        "UPDATE chunk_tsv AS t SET batch = b.batch FROM (SELECT chunk_id, "
        f"(row_number() OVER (ORDER BY chunk_id) - 1) / {_UPGRADE_BATCH} + 1 AS batch FROM chunk_tsv) AS b "
        "WHERE b.chunk_id = t.chunk_id"
    )
    op.execute("SELECT setval('keyword_batch_seq', coalesce((SELECT max(batch) FROM chunk_tsv), 0) + 1, false)")
    op.execute("ALTER TABLE chunk_tsv ALTER COLUMN batch SET NOT NULL")
    op.execute("CREATE INDEX ix_chunk_tsv_batch ON chunk_tsv (batch)")
    op.execute("CREATE TABLE keyword_batches (batch BIGINT PRIMARY KEY, chunks INTEGER NOT NULL)")
    op.execute(
        "CREATE TABLE keyword_blocks (lexeme TEXT NOT NULL, kb_id VARCHAR(40) NOT NULL, batch BIGINT NOT NULL, "
        "part INTEGER NOT NULL, n INTEGER NOT NULL, ids BYTEA NOT NULL, tfs BYTEA NOT NULL, dls BYTEA NOT NULL, "
        "PRIMARY KEY (lexeme, kb_id, batch, part))"
    )
    op.execute("CREATE INDEX ix_keyword_blocks_batch ON keyword_blocks (batch)")
    op.execute("CREATE TABLE keyword_dead (batch BIGINT NOT NULL, chunk_id BIGINT NOT NULL, PRIMARY KEY (batch, chunk_id))")
    op.execute(_BUILD)
    op.execute(_WRITE)
    op.execute(_FORGET)
    # One batch a statement: each sorts ~3 million postings rather than the whole store's at once.
    bind = op.get_bind()
    for (batch,) in bind.exec_driver_sql("SELECT DISTINCT batch FROM chunk_tsv ORDER BY 1").all():
        bind.exec_driver_sql(f"SELECT keyword_blocks_build(ARRAY[{int(batch)}::bigint])")
    op.execute("INSERT INTO keyword_batches (batch, chunks) SELECT batch, count(*) FROM chunk_tsv GROUP BY batch")
    op.execute(
        "CREATE TRIGGER chunk_tsv_blocks_insert AFTER INSERT ON chunk_tsv REFERENCING NEW TABLE AS new_rows "
        "FOR EACH STATEMENT EXECUTE FUNCTION keyword_blocks_write()"
    )
    op.execute(
        "CREATE TRIGGER chunk_tsv_blocks_delete AFTER DELETE ON chunk_tsv REFERENCING OLD TABLE AS old_rows "
        "FOR EACH STATEMENT EXECUTE FUNCTION keyword_blocks_forget()"
    )
    op.execute(_count_of_0005().replace(_POSTINGS_INSERT, ""))
    op.execute("DROP TRIGGER IF EXISTS chunk_tsv_delete_postings ON chunk_tsv")
    op.execute("DROP FUNCTION IF EXISTS keyword_postings_delete()")
    op.execute("DROP TABLE IF EXISTS keyword_postings")


def downgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    # Back to 0017's form: a postings row per lexeme of each chunk, written by keyword_df_count() again.
    op.execute(
        "CREATE TABLE keyword_postings (lexeme TEXT NOT NULL, chunk_id BIGINT NOT NULL, kb_id VARCHAR(40) NOT NULL, "
        "tf INTEGER NOT NULL, dl INTEGER NOT NULL, PRIMARY KEY (lexeme, chunk_id) INCLUDE (kb_id, tf, dl))"
    )
    op.execute("CREATE INDEX ix_keyword_postings_chunk ON keyword_postings (chunk_id)")
    op.execute(
        "INSERT INTO keyword_postings (lexeme, chunk_id, kb_id, tf, dl) "
        "SELECT (u).lexeme, n.chunk_id, c.kb_id, coalesce(array_length((u).positions, 1), 1), length(n.tsv) "
        "FROM (SELECT chunk_id, tsv, unnest(tsv) AS u FROM chunk_tsv) AS n JOIN chunks AS c ON c.id = n.chunk_id"
    )
    op.execute(_count_of_0005())
    op.execute(
        "CREATE FUNCTION keyword_postings_delete() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
        "DELETE FROM keyword_postings WHERE chunk_id IN (SELECT chunk_id FROM old_rows); RETURN NULL; END $$"
    )
    op.execute(
        "CREATE TRIGGER chunk_tsv_delete_postings AFTER DELETE ON chunk_tsv REFERENCING OLD TABLE AS old_rows "
        "FOR EACH STATEMENT EXECUTE FUNCTION keyword_postings_delete()"
    )
    op.execute("DROP TRIGGER IF EXISTS chunk_tsv_blocks_delete ON chunk_tsv")
    op.execute("DROP TRIGGER IF EXISTS chunk_tsv_blocks_insert ON chunk_tsv")
    op.execute("DROP FUNCTION IF EXISTS keyword_blocks_forget()")
    op.execute("DROP FUNCTION IF EXISTS keyword_blocks_write()")
    op.execute("DROP FUNCTION IF EXISTS keyword_blocks_build(BIGINT[])")
    op.execute("DROP TABLE IF EXISTS keyword_dead")
    op.execute("DROP TABLE IF EXISTS keyword_blocks")
    op.execute("DROP TABLE IF EXISTS keyword_batches")
    op.execute("DROP INDEX IF EXISTS ix_chunk_tsv_batch")
    op.execute("ALTER TABLE chunk_tsv DROP COLUMN batch")
    op.execute("DROP SEQUENCE IF EXISTS keyword_batch_seq")
