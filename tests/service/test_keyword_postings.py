"""PostgreSQL keyword lane: the postings packed in blocks (migration 0018) and the document
frequencies stay exact through publishes written many chunks to a statement, deletions, moves to
another knowledge base and back, and merges; and the lane ranks exactly as BM25 summed in SQL over
postings made again from the chunks' lexemes."""

from __future__ import annotations

import math
import threading
from pathlib import Path

import pytest
from sqlalchemy import text

from rag.retrieve.keyword import PostgresKeywordLane
from rag.retrieve.types import Query, Scope
from tests.support.keyword_blocks import POSTINGS_MADE_AGAIN, differences
from tests.support.processes import wait_until
from tests.support.store import alembic_config

QUESTIONS = ["Microsoft Teams meetings", "How much annual leave do I earn?", "expenses receipts travel",
             "security password laptop", "the of and"]


def lane_and_scope(svc, kb_name: str | None = None) -> tuple[PostgresKeywordLane, Scope]:
    lane = svc.engines.index.lanes["text"]
    assert isinstance(lane, PostgresKeywordLane)
    with svc.db.session() as session:
        kbs = session.execute(text("SELECT id, name FROM knowledge_bases")).all()
    kb_ids = tuple(sorted(kb for kb, name in kbs if kb_name is None or name == kb_name))
    return lane, Scope("ws", kb_ids)


def ranked(svc, question: str, kb_name: str | None = None, depth: int = 20) -> list[tuple[int, float]]:
    lane, scope = lane_and_scope(svc, kb_name)
    with svc.db.session() as session:
        return [(hit.chunk_id, hit.score) for hit in lane.search(session, Query(question), scope, depth)]


def ranked_in_sql(svc, question: str, kb_name: str | None = None, depth: int = 20) -> list[tuple[int, float]]:
    """BM25 summed in SQL over the postings made again, published chunks only, with the lane's own
    weights (idf, lexemes kept): the reference the blocks must reproduce."""
    lane, scope = lane_and_scope(svc, kb_name)
    with svc.db.session() as session:
        lexemes = list(session.scalars(text("SELECT lexeme FROM unnest(to_tsvector('english', :q))"), {"q": question}))
        idf, avgdl = lane._weights(session, lexemes)
        if not idf:
            return []
        rows = session.execute(text(
            f"""SELECT p.chunk_id, sum(q.w * p.tf * 2.2 / (p.tf + 1.2 * (0.25 + 0.75 * p.dl / :avgdl))) AS s
            FROM unnest(CAST(:lex AS text[]), CAST(:w AS float8[])) AS q(lexeme, w)
            JOIN ({POSTINGS_MADE_AGAIN}) AS p ON p.lexeme = q.lexeme
            JOIN chunks AS c ON c.id = p.chunk_id JOIN document_versions AS v ON v.id = c.version_id
            WHERE p.kb_id = ANY(:kbs) AND v.status = 'published'
            GROUP BY p.chunk_id ORDER BY s DESC, p.chunk_id LIMIT :n"""),
            {"lex": list(idf), "w": list(idf.values()), "avgdl": avgdl, "kbs": list(scope.kb_ids), "n": depth},
        ).all()
    return [(int(chunk_id), float(score)) for chunk_id, score in rows]


def assert_same_ranking(svc, kb_name: str | None = None) -> None:
    for question in QUESTIONS:
        got, want = ranked(svc, question, kb_name), ranked_in_sql(svc, question, kb_name)
        assert [i for i, _ in got] == [i for i, _ in want], question
        assert all(math.isclose(a, b, rel_tol=1e-9) for (_, a), (_, b) in zip(got, want)), question


def waits_for_a_lock(svc, what: str, pid: int | None = None) -> None:
    """Until a backend (`pid`, or any) waits for a row lock, for at most 30 s."""
    sql = "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'" + (" AND pid = :pid" if pid else "")
    with svc.db.engine.connect() as watch:
        wait_until(lambda: watch.execute(text(sql), {"pid": pid}).scalar(), 30, what)


def batches(svc) -> int:
    with svc.db.session() as session:
        return int(session.scalar(text("SELECT count(*) FROM keyword_batches")))


@pytest.mark.parametrize("settings", ["postgresql"], indirect=True)
def test_blocks_stay_exact_through_publishes_deletes_moves_and_merges(
    svc, admin, small_tree: Path, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.setattr(PostgresKeywordLane, "ROWS_PER_STATEMENT", 3)  # a batch every 3 chunks
    monkeypatch.setattr(PostgresKeywordLane, "MERGE_FANOUT", 4)
    monkeypatch.setattr(PostgresKeywordLane, "MERGE_MAX_CHUNKS", 24)  # merges of 4 batches, up to 24 chunks
    report = svc.ingest_directory(admin, small_tree)
    assert len(report.added) == 5
    with svc.db.session() as session:
        chunks = int(session.scalar(text("SELECT count(*) FROM chunk_tsv")))
        merged = int(session.scalar(text("SELECT max(chunks) FROM keyword_batches")))
    assert chunks > 12 and merged > 3, "publishes wrote batches of 3 chunks, and merges made larger ones"
    assert differences(svc.db) == {}
    assert ranked(svc, "Microsoft Teams meetings"), "the lane finds the chunks"
    assert_same_ranking(svc)

    hits = svc.search(admin, "Microsoft Teams meetings", 5).hits
    teams = next(h for h in hits if h.source == "fs:tools/teams.md")
    svc.delete_document(admin, teams.node_id)
    assert differences(svc.db) == {}, "a deleted chunk's postings are tombstoned"
    assert "fs:tools/teams.md" not in [h.source for h in svc.search(admin, "Microsoft Teams meetings", 10).hits]
    assert_same_ranking(svc)

    # A document moved to another knowledge base and back: its chunks keep their ids, and each is
    # counted once, in the knowledge base it is in.
    leave = svc.search(admin, "How much annual leave do I earn?", 3, lanes=("text",)).hits[0]
    assert leave.source == "fs:travel-and-leave/leave.md"
    other = svc.knowledge_base(admin, "other", create=True)
    with svc.db.session() as session:
        home_root = session.scalar(text(
            "SELECT parent_id FROM nodes WHERE id = (SELECT parent_id FROM nodes WHERE id = :n)"), {"n": leave.node_id})
        home_folder = session.scalar(text("SELECT parent_id FROM nodes WHERE id = :n"), {"n": leave.node_id})
    assert home_root is not None
    svc.move_node(admin, leave.node_id, other.root_id)
    assert differences(svc.db) == {}
    assert_same_ranking(svc, "other")
    assert leave.chunk_id in [i for i, _ in ranked(svc, "annual leave earn", "other")]
    svc.move_node(admin, leave.node_id, home_folder)
    assert differences(svc.db) == {}
    assert_same_ranking(svc)
    assert leave.chunk_id not in [i for i, _ in ranked(svc, "annual leave earn", "other")]

    # Merging until nothing is due rewrites the tombstoned batches and changes no ranking.
    before = {q: ranked(svc, q) for q in QUESTIONS}
    lane, _ = lane_and_scope(svc)
    had = batches(svc)
    for _ in range(50):
        if not lane.compact():
            break
    with svc.db.session() as session:
        dead = int(session.scalar(text("SELECT count(*) FROM keyword_dead")))
        live = int(session.scalar(text("SELECT count(*) FROM chunk_tsv")))
    assert batches(svc) < had and dead * lane.DEAD_SHARE < live
    assert differences(svc.db) == {}
    assert {q: ranked(svc, q) for q in QUESTIONS} == before


@pytest.mark.parametrize("settings", ["postgresql"], indirect=True)
def test_a_folder_scope_ranks_inside_the_folder(svc, admin, small_tree: Path):
    svc.ingest_directory(admin, small_tree)
    lane, scope = lane_and_scope(svc)
    with svc.db.session() as session:
        folder = session.execute(text(
            "SELECT n.parent_id, c.id FROM chunks AS c JOIN nodes AS n ON n.id = c.node_id "
            "WHERE c.node_id IN (SELECT node_id FROM chunks) ORDER BY c.id LIMIT 1")).one()
        inside = {node for node, in session.execute(
            text("SELECT id FROM nodes WHERE parent_id = :p"), {"p": folder.parent_id})}
        in_folder = {int(i) for i in session.scalars(
            text("SELECT id FROM chunks WHERE node_id = ANY(:n)"), {"n": sorted(inside)})}
        whole = [h.chunk_id for h in lane.search(session, Query("leave expenses meetings"), scope, 500)]
        scoped = [h.chunk_id for h in lane.search(
            session, Query("leave expenses meetings"), Scope("ws", scope.kb_ids, frozenset(inside)), 50)]
    assert scoped and set(scoped) <= in_folder
    assert scoped == [i for i in whole if i in in_folder][:len(scoped)]


@pytest.mark.parametrize("settings", ["postgresql"], indirect=True)
def test_a_store_of_postings_rows_is_migrated_to_blocks_and_back(svc, admin, small_tree: Path):
    """A store written before migration 0018 (a postings row per lexeme of each chunk) gets its blocks
    built from the chunks' lexemes, ranking as before; the downgrade makes the rows again."""
    from alembic import command

    svc.ingest_directory(admin, small_tree)
    before = {q: ranked(svc, q) for q in QUESTIONS}
    config = alembic_config()
    with svc.db.engine.begin() as conn:
        config.attributes["connection"] = conn
        command.downgrade(config, "0017")
    with svc.db.session() as session:
        rows = int(session.scalar(text("SELECT count(*) FROM keyword_postings")))
        made = int(session.scalar(text(f"SELECT count(*) FROM ({POSTINGS_MADE_AGAIN}) AS p")))
        assert session.scalar(text("SELECT to_regclass('keyword_blocks')")) is None
    assert rows == made > 0
    with svc.db.engine.begin() as conn:
        config.attributes["connection"] = conn
        command.upgrade(config, "head")
    with svc.db.session() as session:
        assert session.scalar(text("SELECT to_regclass('keyword_postings')")) is None
    assert differences(svc.db) == {}
    assert {q: ranked(svc, q) for q in QUESTIONS} == before


@pytest.mark.parametrize("settings", ["postgresql"], indirect=True)
def test_a_chunk_deleted_while_its_batch_is_merged_stays_deleted(
    svc, admin, small_tree: Path, monkeypatch: pytest.MonkeyPatch
):
    """A merge builds its blocks before it relabels the chunks: a chunk deleted by another
    transaction in between is in the new blocks, and its tombstone must follow it there."""
    monkeypatch.setattr(PostgresKeywordLane, "ROWS_PER_STATEMENT", 3)
    monkeypatch.setattr(PostgresKeywordLane, "MERGE_FANOUT", 1000)  # no merge but the one below
    svc.ingest_directory(admin, small_tree)
    lane, _ = lane_and_scope(svc)
    with svc.db.session() as session:
        first, second = [int(b) for b in session.scalars(text("SELECT batch FROM keyword_batches ORDER BY batch LIMIT 2"))]
        victim = int(session.scalar(text("SELECT min(chunk_id) FROM chunk_tsv WHERE batch = :b"), {"b": first}))
    monkeypatch.setattr(lane, "_merge_plan", lambda batches: [first, second])

    deleting = svc.db.engine.connect()
    deleting.begin()
    deleting.execute(text("DELETE FROM chunk_tsv WHERE chunk_id = :c"), {"c": victim})  # holds the row
    merged: list[int] = []
    merge = threading.Thread(target=lambda: merged.append(lane.compact(rounds=1)))
    merge.start()
    waits_for_a_lock(svc, "the merge waiting for the deleting transaction")  # it reached the victim's row
    deleting.commit()
    deleting.close()
    merge.join(timeout=60)
    assert merged == [2]
    with svc.db.session() as session:
        batch = session.scalar(text("SELECT batch FROM keyword_dead WHERE chunk_id = :c"), {"c": victim})
        newest = session.scalar(text("SELECT max(batch) FROM keyword_batches"))
    assert batch == newest, "the tombstone moved with the merged postings"
    assert differences(svc.db) == {}


@pytest.mark.parametrize("settings", ["postgresql"], indirect=True)
def test_publishes_of_several_statements_each_do_not_deadlock(svc, admin, small_tree: Path):
    """A publish group over `ROWS_PER_STATEMENT` chunks writes its lexemes in several statements,
    each locking its `keyword_df` rows in lexeme order. Two such transactions whose statements
    cross (A: zebra, then kiwi; B: kiwi and zebra, then yak) would deadlock if each took only
    its own lexemes: every statement takes the row '' (the chunk count) first, which no lexeme
    sorts before, so the second transaction waits there, holding none, until the first commits."""
    svc.ingest_directory(admin, small_tree)
    lane, _ = lane_and_scope(svc)
    with svc.db.session() as session:
        ids = [int(i) for i in session.scalars(text("SELECT chunk_id FROM chunk_tsv ORDER BY chunk_id LIMIT 4"))]
        session.execute(text("DELETE FROM chunk_tsv WHERE chunk_id = ANY(:ids)"), {"ids": ids})
        before = dict(session.execute(text(
            "SELECT lexeme, df FROM keyword_df WHERE lexeme IN ('', 'kiwi', 'zebra', 'yak')")).all())

    def write(connection, chunk_id: int, body: str) -> None:
        batch = int(connection.execute(text("SELECT nextval('keyword_batch_seq')")).scalar())
        connection.execute(text(lane.add_sql), {"ids": [chunk_id], "texts": [body], "batch": batch})

    failed: list[BaseException] = []
    b_pid: list[int] = []

    def second() -> None:
        try:
            with svc.db.engine.connect() as b:
                b_pid.append(int(b.execute(text("SELECT pg_backend_pid()")).scalar()))
                write(b, ids[1], "kiwi zebra")
                write(b, ids[3], "yak")
                b.commit()
        except BaseException as exc:  # noqa: BLE001 - reported by the assertion below
            failed.append(exc)

    with svc.db.engine.connect() as a:
        write(a, ids[0], "zebra")
        b_thread = threading.Thread(target=second)
        b_thread.start()
        wait_until(lambda: b_pid, 30, "the second transaction to start")
        waits_for_a_lock(svc, "the second transaction waiting for the first", b_pid[0])  # at ''
        write(a, ids[2], "kiwi")  # would wait for B's 'kiwi' if B had taken it: a deadlock
        a.commit()
    b_thread.join(timeout=60)
    assert not b_thread.is_alive() and failed == []
    with svc.db.session() as session:
        after = dict(session.execute(text(
            "SELECT lexeme, df FROM keyword_df WHERE lexeme IN ('', 'kiwi', 'zebra', 'yak')")).all())
    assert after[""] == before[""] + 4
    assert {w: after[w] - before.get(w, 0) for w in ("kiwi", "zebra", "yak")} == {"kiwi": 2, "zebra": 2, "yak": 1}
    assert differences(svc.db) == {}
