"""PostgreSQL keyword lane: the postings and document frequencies stay exact through publishes written
many chunks to a statement and through deletions, without a foreign key or the unused GIN index
(migration 0017)."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy import text

from rag.retrieve.keyword import PostgresKeywordLane

POSTINGS_MADE_AGAIN = """
SELECT (u).lexeme, chunk_id, coalesce(array_length((u).positions, 1), 1), length(tsv)
FROM (SELECT chunk_id, tsv, unnest(tsv) AS u FROM chunk_tsv) AS n
"""


def differences(svc) -> dict[str, int]:
    """Rows that differ between what the triggers keep and a recount from the chunks' lexemes (only
    those that differ)."""
    kept = "SELECT lexeme, chunk_id, tf, dl FROM keyword_postings"
    df_kept = "SELECT lexeme, df FROM keyword_df WHERE df <> 0 AND lexeme NOT IN ('', ' dl')"
    df_made = "SELECT word, ndoc::bigint FROM ts_stat('SELECT tsv FROM chunk_tsv')"
    with svc.db.session() as session:
        one = lambda sql: int(session.scalar(text(sql)))  # noqa: E731
        counts = {
            "postings only kept": one(f"SELECT count(*) FROM ({kept} EXCEPT {POSTINGS_MADE_AGAIN}) AS d"),
            "postings missing": one(f"SELECT count(*) FROM ({POSTINGS_MADE_AGAIN} EXCEPT {kept}) AS d"),
            "df only kept": one(f"SELECT count(*) FROM ({df_kept} EXCEPT {df_made}) AS d"),
            "df missing": one(f"SELECT count(*) FROM ({df_made} EXCEPT {df_kept}) AS d"),
            "chunk count": one("SELECT df FROM keyword_df WHERE lexeme = ''") - one("SELECT count(*) FROM chunk_tsv"),
        }
    return {name: n for name, n in counts.items() if n}


@pytest.mark.parametrize("settings", ["postgresql"], indirect=True)
def test_postings_stay_exact_through_statements_of_many_chunks_and_deletes(
    svc, admin, small_tree: Path, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.setattr(PostgresKeywordLane, "ROWS_PER_STATEMENT", 3)  # several statements a publish
    report = svc.ingest_directory(admin, small_tree)
    assert len(report.added) == 5
    with svc.db.session() as session:
        chunks = int(session.scalar(text("SELECT count(*) FROM chunk_tsv")))
        postings = int(session.scalar(text("SELECT count(*) FROM keyword_postings")))
    assert chunks > 3 and postings > chunks
    assert differences(svc) == {}

    hits = svc.search(admin, "Microsoft Teams meetings", 5).hits
    teams = next(h for h in hits if h.source == "fs:tools/teams.md")
    with svc.db.session() as session:
        ids = [int(i) for i in session.scalars(
            text("SELECT id FROM chunks WHERE node_id = :node"), {"node": teams.node_id})]
    svc.delete_document(admin, teams.node_id)

    with svc.db.session() as session:
        left = session.scalar(text("SELECT count(*) FROM keyword_postings WHERE chunk_id = ANY(:ids)"), {"ids": ids})
        assert ids and left == 0, "a deleted chunk's postings go with it"
        foreign_keys = session.scalar(text(
            "SELECT count(*) FROM pg_constraint WHERE conrelid = 'keyword_postings'::regclass AND contype = 'f'"))
        assert foreign_keys == 0
        assert session.scalar(text("SELECT to_regclass('ix_chunk_tsv')")) is None
    assert differences(svc) == {}
    assert "fs:tools/teams.md" not in [h.source for h in svc.search(admin, "Microsoft Teams meetings", 10).hits]
