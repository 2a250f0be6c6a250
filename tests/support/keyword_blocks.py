"""The PostgreSQL keyword lane's postings recounted from the chunks' lexemes, to check what its
triggers and merges keep (tests/service/test_keyword_postings.py, tests/e2e/test_scale_out.py)."""

from __future__ import annotations

from sqlalchemy import text

# Every posting a chunk's lexemes make, in the knowledge base the chunk is in now.
POSTINGS_MADE_AGAIN = """
SELECT (u).lexeme, c.kb_id, n.chunk_id, least(coalesce(array_length((u).positions, 1), 1), 32767) AS tf,
       least(length(n.tsv), 32767) AS dl
FROM (SELECT chunk_id, tsv, unnest(tsv) AS u FROM chunk_tsv) AS n JOIN chunks AS c ON c.id = n.chunk_id
"""

# What the blocks hold, unpacked in SQL (not with the lane's own numpy code), tombstones taken out.
POSTINGS_KEPT = """
SELECT lexeme, kb_id, chunk_id, tf, dl FROM (
    SELECT b.lexeme, b.kb_id, b.batch,
           ('x' || encode(substring(b.ids FROM i * 8 + 1 FOR 8), 'hex'))::bit(64)::bigint AS chunk_id,
           ('x' || encode(substring(b.tfs FROM i * 2 + 1 FOR 2), 'hex'))::bit(16)::int AS tf,
           ('x' || encode(substring(b.dls FROM i * 2 + 1 FOR 2), 'hex'))::bit(16)::int AS dl
    FROM keyword_blocks AS b, generate_series(0, b.n - 1) AS i
) AS p WHERE NOT EXISTS (SELECT 1 FROM keyword_dead AS d WHERE d.batch = p.batch AND d.chunk_id = p.chunk_id)
"""

def differences(db) -> dict[str, int]:
    """Rows that differ between what the triggers keep and a recount from the chunks' lexemes (only
    those that differ). EXCEPT ALL: a posting kept twice counts."""
    df_kept = "SELECT lexeme, df FROM keyword_df WHERE df <> 0 AND lexeme NOT IN ('', ' dl')"
    df_made = "SELECT word, ndoc::bigint FROM ts_stat('SELECT tsv FROM chunk_tsv')"
    with db.session() as session:
        one = lambda sql: int(session.scalar(text(sql)))  # noqa: E731
        counts = {
            "postings only kept": one(f"SELECT count(*) FROM ({POSTINGS_KEPT} EXCEPT ALL {POSTINGS_MADE_AGAIN}) AS d"),
            "postings missing": one(f"SELECT count(*) FROM ({POSTINGS_MADE_AGAIN} EXCEPT ALL {POSTINGS_KEPT}) AS d"),
            "df only kept": one(f"SELECT count(*) FROM ({df_kept} EXCEPT {df_made}) AS d"),
            "df missing": one(f"SELECT count(*) FROM ({df_made} EXCEPT {df_kept}) AS d"),
            "chunk count": one("SELECT df FROM keyword_df WHERE lexeme = ''") - one("SELECT count(*) FROM chunk_tsv"),
            "batch sizes": one(
                "SELECT count(*) FROM keyword_batches AS b FULL JOIN ("
                "SELECT batch, count(*) AS n FROM (SELECT batch FROM chunk_tsv UNION ALL SELECT batch FROM keyword_dead) "
                "AS x GROUP BY batch) AS t USING (batch) WHERE b.chunks IS DISTINCT FROM t.n"),
        }
    return {name: n for name, n in counts.items() if n}
