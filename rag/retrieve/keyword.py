"""The keyword lane, in the store's own database: BM25 over SQLite FTS5, or PostgreSQL full text.

Only chunks of published versions are ranked, and the scope (knowledge bases, and for a folder
scope the documents under it) is applied inside the query, so top-k fills with in-scope hits.
Both live in the store (`in_store`): their tables are written in the transaction that writes the
chunk rows.
"""

from __future__ import annotations

import itertools
import logging
import math
import time
from typing import Iterable, Sequence

import numpy as np
from sqlalchemy import bindparam, text
from sqlalchemy.orm import Session

from rag.retrieve.lanes import ChunkRef, ChunkSource
from rag.retrieve.published import held_in, widen_until_full
from rag.retrieve.text import porter_stem, query_terms
from rag.retrieve.types import IndexRow, LaneHit, Query, Scope
from rag.store.db import Database

log = logging.getLogger(__name__)


def match_expression(terms: Sequence[str]) -> str:
    # Each term is quoted, so no query text is ever read as FTS5 syntax.
    return " OR ".join('"' + t.replace('"', '""') + '"' for t in terms)


class _IndexTable:
    """A lane whose index is a table of the store keyed by chunk id (FTS5's chunk_fts, PostgreSQL's
    chunk_tsv), written in the caller's transaction."""

    name = "text"
    in_store = True
    uses_vectors = False
    table = ""
    id_column = ""  # the chunk id in the table
    insert_sql = ""
    delete_sql = ""

    def __init__(self, db: Database, max_df: float = 1.0) -> None:
        self.db = db
        self.max_df = max_df

    def add(self, session: Session | None, rows: Sequence[IndexRow], vectors: np.ndarray | None = None) -> None:
        if rows:
            assert session is not None, "a lane in the store writes in the chunk rows' transaction"
            session.execute(text(self.insert_sql), [{"id": row[0], "text": row[1]} for row in rows])

    def delete(self, session: Session | None, chunks: Sequence[ChunkRef]) -> None:
        ids = [chunk_id for chunk_id, _ in chunks]
        for i in range(0, len(ids), 500):
            assert session is not None, "a lane in the store writes in the chunk rows' transaction"
            session.execute(
                text(self.delete_sql).bindparams(bindparam("ids", expanding=True)), {"ids": ids[i:i + 500]}
            )

    def move(self, session: Session | None, rows: Sequence[IndexRow], from_kb: str) -> None:
        # PostgreSQL's postings carry the chunk's knowledge base, taken when the row is written.
        self.delete(session, [(row[0], from_kb) for row in rows])
        self.add(session, rows)

    def count(self, kb_id: str | None = None) -> int:
        with self.db.session() as session:
            if kb_id is None:
                return int(session.scalar(text(f"SELECT count(*) FROM {self.table}")) or 0)
            return int(session.scalar(text(
                f"SELECT count(*) FROM {self.table} AS i JOIN chunks AS c ON c.id = i.{self.id_column} "
                "WHERE c.kb_id = :kb"
            ), {"kb": kb_id}) or 0)

    def health(self) -> None:
        with self.db.session() as session:
            session.execute(text(f"SELECT {self.id_column} FROM {self.table} LIMIT 1")).all()

    def attach(self, source: ChunkSource) -> None:
        pass  # in the store's transactions: nothing to repair between reconciles

    def compact(self) -> int:
        return 0  # FTS5 merges its own segments

    def open(self) -> None:
        pass

    def close(self) -> None:
        pass


class SqliteKeywordLane(_IndexTable):
    engine = "sqlite fts5"
    table, id_column = "chunk_fts", "rowid"
    insert_sql = "INSERT INTO chunk_fts (rowid, text) VALUES (:id, :text)"
    delete_sql = "DELETE FROM chunk_fts WHERE rowid IN :ids"

    def __init__(self, db: Database, max_df: float = 1.0) -> None:
        super().__init__(db, max_df)
        self._total: tuple[float, int] = (0.0, 0)

    def fingerprint(self, session: Session) -> tuple[int, int]:
        """(rows, sum of chunk ids): a replaced chunk changes it even when the count stays."""
        count, total = session.execute(text("SELECT count(*), coalesce(sum(rowid), 0) FROM chunk_fts")).one()
        return int(count), int(total)

    def rebuild(self, session: Session, rows: Iterable[IndexRow]) -> int:
        """Refill the FTS5 table (after the tantivy engine was used on this store, say)."""
        session.execute(text("DELETE FROM chunk_fts"))
        batch: list[IndexRow] = []
        written = 0
        for row in rows:
            batch.append(row)
            if len(batch) >= 2000:
                self.add(session, batch)
                written, batch = written + len(batch), []
        self.add(session, batch)
        return written + len(batch)

    def reconcile(self, source: ChunkSource) -> int:
        """Empty after a switch from the tantivy engine (which leaves chunk_fts unwritten): refill
        it when it does not hold exactly the chunks. Needs no embedding."""
        with source.db.session() as session:
            if self.fingerprint(session) == source.fingerprint(session):
                return 0
            return self.rebuild(session, source.rows(session, None))

    def _chunk_count(self, session: Session) -> int:
        checked, total = self._total
        if time.monotonic() - checked > 10:
            total = int(session.scalar(text("SELECT count(*) FROM chunks")) or 0)
            self._total = (time.monotonic(), total)
        return total

    def prune(self, session: Session, terms: list[str]) -> list[str]:
        """Leave out words that occur in more than max_df of the chunks, keeping the two rarest.

        Such a word weighs little in BM25 (a low idf), yet its postings are most of what FTS5 walks.
        The cut is measured by `rag eval retrieval` and `python -m benchmarks.search_latency --keyword-engine fts5`."""
        if self.max_df >= 1.0 or len(terms) <= 2:
            return terms
        stems = {term: porter_stem(term) for term in terms}
        marks = ", ".join(f":s{i}" for i in range(len(stems)))
        df = dict(session.execute(
            text(f"SELECT term, doc FROM chunk_fts_vocab WHERE term IN ({marks})"),
            {f"s{i}": stem for i, stem in enumerate(stems.values())},
        ).all())
        limit = self.max_df * self._chunk_count(session)
        rarest = sorted(terms, key=lambda t: df.get(stems[t], 0))
        kept = [t for t in rarest if df.get(stems[t], 0) <= limit]
        if len(kept) < 2:
            kept = rarest[:2]
        return [t for t in terms if t in kept]

    def doc_freq(self, session: Session, words: Sequence[str]) -> tuple[dict[str, int], int]:
        """(how many chunks hold each word, as the lane stems it; how many chunks there are)."""
        stems = {word: porter_stem(word.lower()) for word in words}
        if not stems:
            return {}, self._chunk_count(session)
        marks = ", ".join(f":s{i}" for i in range(len(stems)))
        df = dict(session.execute(
            text(f"SELECT term, doc FROM chunk_fts_vocab WHERE term IN ({marks})"),
            {f"s{i}": stem for i, stem in enumerate(stems.values())},
        ).all())
        return {word: int(df.get(stem, 0)) for word, stem in stems.items()}, self._chunk_count(session)

    def search(self, session: Session, query: Query, scope: Scope, depth: int) -> list[LaneHit]:
        terms = query_terms(query.text)
        if not terms or scope.empty:
            return []
        match = match_expression(self.prune(session, terms))
        # Fast path: rank in FTS5 alone, then check the best few by primary key. Joining every
        # match to its chunk and version before ranking costs more than the ranking itself
        # (26 ms against 10 ms at 10,000 chunks). When the scope or unpublished chunks thin the
        # page out below depth, the exact query below fills it with in-scope hits.
        page = 2 * depth + 16
        ranked = session.execute(
            text("SELECT rowid AS id, rank FROM chunk_fts WHERE chunk_fts MATCH :match ORDER BY rank LIMIT :n"),
            {"match": match, "n": page},
        ).all()
        allowed = _in_scope(session, [row.id for row in ranked], scope)
        hits = [LaneHit(int(row.id), -float(row.rank)) for row in ranked if row.id in allowed]
        if len(hits) >= depth or len(ranked) < page:
            return hits[:depth]
        return self._search_in_scope(session, match, scope, depth)

    def _search_in_scope(self, session: Session, match: str, scope: Scope, k: int) -> list[LaneHit]:
        params: dict[str, object] = {"match": match, "k": k}
        scope_sql, binds = _scope_sql(scope, params)
        sql = text(
            f"""
            SELECT f.rowid AS id, bm25(chunk_fts) AS rank
            FROM chunk_fts AS f
            JOIN chunks AS c ON c.id = f.rowid
            JOIN document_versions AS v ON v.id = c.version_id
            WHERE chunk_fts MATCH :match AND +v.status = 'published' AND {scope_sql}
            ORDER BY rank
            LIMIT :k
            """
        ).bindparams(*binds)
        # `+v.status` keeps SQLite from planning off the status index (every published version);
        # bm25() is lower-is-better, the lane reports higher-is-better.
        return [LaneHit(int(row.id), -float(row.rank)) for row in session.execute(sql, params)]


def _in_scope(session: Session, chunk_ids: list[int], scope: Scope) -> set[int]:
    """Which of these chunks belong to published versions inside the scope (primary-key lookups)."""
    if not chunk_ids:
        return set()
    rows = session.execute(
        text(
            "SELECT c.id, c.kb_id, c.node_id, v.status FROM chunks AS c "
            "JOIN document_versions AS v ON v.id = c.version_id WHERE c.id IN :ids"
        ).bindparams(bindparam("ids", expanding=True)),
        {"ids": chunk_ids},
    )
    kbs = set(scope.kb_ids)
    return {
        row.id for row in rows
        if row.status == "published" and row.kb_id in kbs and (scope.node_ids is None or row.node_id in scope.node_ids)
    }


def _scope_sql(scope: Scope, params: dict[str, object]) -> tuple[str, list]:
    params["kbs"] = list(scope.kb_ids)
    sql = "c.kb_id IN :kbs"
    binds = [bindparam("kbs", expanding=True)]
    if scope.node_ids is not None:
        sql += " AND c.node_id IN :nodes"
        params["nodes"] = list(scope.node_ids)
        binds.append(bindparam("nodes", expanding=True))
    return sql, binds


class PostgresKeywordLane(_IndexTable):
    """PostgreSQL full text with the FTS5 lane's contract: published chunks only, the scope applied
    inside the query, higher score is better.

    English stemming (to_tsvector('english', ...)); the query's lexemes are OR-ed and scored with
    BM25 (k1 1.2, b 0.75). The postings live in `keyword_blocks` (migration 0018): per lexeme,
    knowledge base and batch, up to 4,096 postings packed as arrays (chunk ids, term frequencies,
    chunk lengths), written by a trigger on `chunk_tsv`; the document frequencies in `keyword_df`
    (migration 0005). A search reads its lexemes' blocks by index and sums them in numpy: 12 bytes
    a posting instead of a row of ~216, which is what keeps it fast at a million chunks. Deleted
    chunks leave tombstones (`keyword_dead`) applied before scoring; `compact` merges small batches
    and rewrites those with many tombstones. Lexemes in more than `max_df` of the chunks are left
    out (keeping the two rarest), as in the FTS5 lane. Hits are checked against published versions
    by primary key, as for the lanes outside the store, widening when too few pass.
    """

    engine = "postgresql"
    table, id_column = "chunk_tsv", "chunk_id"
    delete_sql = "DELETE FROM chunk_tsv WHERE chunk_id IN :ids"
    K1, B = 1.2, 0.75
    # Rows written by one statement. The triggers on chunk_tsv run once per statement: row by row,
    # each chunk upserted its ~100 lexemes' document frequencies on its own (100 row versions a chunk,
    # WAL and bloat of keyword_df); a statement of many chunks upserts each distinct lexeme once.
    # Above the Publisher's group (512 chunks); the cap bounds a statement's memory. A larger group
    # writes several statements, and concurrent publishers still cannot deadlock on keyword_df:
    # every statement upserts its row '' (the chunk count) first, which no lexeme sorts before, so
    # a second writer waits there, holding no lexeme, until the first commits.
    # Each statement is a batch of its own: its postings are appended as new blocks.
    ROWS_PER_STATEMENT = 1000
    add_sql = (
        "INSERT INTO chunk_tsv (chunk_id, tsv, batch) SELECT x.id, to_tsvector('english', x.body), :batch "
        "FROM unnest(CAST(:ids AS bigint[]), CAST(:texts AS text[])) AS x(id, body)"
    )
    # Merging batches (size-tiered): MERGE_FANOUT batches of about one size become one, up to
    # MERGE_MAX_CHUNKS (a merge joins the batches' blocks lexeme by lexeme, in a transaction of
    # its own after a publish group: 9.5 s for 65,536 chunks at a million). A batch whose
    # tombstones reach 1/DEAD_SHARE of its chunks is rewritten alone. At a million chunks the plan
    # leaves some 15 batches of the largest size and at most 7 of each smaller tier, so a lexeme is
    # a few dozen rows beside its full blocks.
    MERGE_FANOUT = 8
    MERGE_MAX_CHUNKS = 65536
    DEAD_SHARE = 8
    LOCK_KEY = 0x6B77626C6B73  # pg_advisory lock: one merge at a time across processes

    def add(self, session: Session | None, rows: Sequence[IndexRow], vectors: np.ndarray | None = None) -> None:
        for i in range(0, len(rows), self.ROWS_PER_STATEMENT):
            assert session is not None, "a lane in the store writes in the chunk rows' transaction"
            part = rows[i:i + self.ROWS_PER_STATEMENT]
            batch = int(session.scalar(text("SELECT nextval('keyword_batch_seq')")))
            session.execute(text(self.add_sql), {
                "ids": [row[0] for row in part], "texts": [row[1] for row in part], "batch": batch})

    def reconcile(self, source: ChunkSource) -> int:
        return 0  # the index lives in the store's own transactions: it cannot disagree with the chunks

    def compact(self, rounds: int = 4) -> int:
        """Merge small batches, or rewrite those with many tombstones: up to `rounds` merges, each
        in a transaction of its own, skipped while another process merges. Returns the batches
        merged (0: nothing was due)."""
        merged = 0
        for _ in range(rounds):
            done = self._merge_once()
            if not done:
                break
            merged += done
        return merged

    def _merge_once(self) -> int:
        with self.db.session() as session:
            if not session.scalar(text("SELECT pg_try_advisory_xact_lock(:key)"), {"key": self.LOCK_KEY}):
                return 0
            batches = session.execute(text(
                "SELECT b.batch, b.chunks, coalesce(d.n, 0) AS dead FROM keyword_batches AS b "
                "LEFT JOIN (SELECT batch, count(*) AS n FROM keyword_dead GROUP BY batch) AS d USING (batch)"
            )).all()
            chosen = self._merge_plan([(int(b), int(c), int(d)) for b, c, d in batches])
            if not chosen:
                return 0
            started = time.perf_counter()
            into = int(session.scalar(text("SELECT nextval('keyword_batch_seq')")))
            rows = session.execute(text(
                "SELECT chunk_id, batch FROM chunk_tsv WHERE batch = ANY(:old) ORDER BY chunk_id"), {"old": chosen}
            ).all()
            members = (np.array([r[0] for r in rows], dtype=np.int64), np.array([r[1] for r in rows], dtype=np.int64))
            params = {"old": chosen, "new": into, "ids": members[0].tolist()}
            # The new blocks are made first, from the old ones, without locking a chunk (the long
            # part). Then the members are relabelled: a chunk deleted meanwhile keeps its
            # tombstone, moved to the new batch; one deleted after this locks its row waits for the
            # commit and leaves a tombstone of the new batch. Postings of chunks deleted before the
            # members were read are left out, and their tombstones go with the old batches. Rows
            # are locked in chunk id order, the order deletes take them in, so neither deadlocks.
            built = started
            if rows:
                _write_merged(session, chosen, into, members)
                built = time.perf_counter()
                session.execute(text(
                    "UPDATE chunk_tsv SET batch = :new WHERE chunk_id IN (SELECT chunk_id FROM chunk_tsv "
                    "WHERE batch = ANY(:old) ORDER BY chunk_id FOR UPDATE)"), params)
                session.execute(text(
                    "UPDATE keyword_dead SET batch = :new WHERE batch = ANY(:old) AND chunk_id = ANY(:ids)"), params)
            for table in ("keyword_blocks", "keyword_dead", "keyword_batches"):
                session.execute(text(f"DELETE FROM {table} WHERE batch = ANY(:old)"), params)
            if rows:
                session.execute(text("INSERT INTO keyword_batches (batch, chunks) VALUES (:new, :n)"),
                                {"new": into, "n": len(rows)})
        log.info("keyword lane: batches %s merged into batch %d of %d chunks in %.1f s (%.1f s of it with their rows "
                 "locked)", chosen, into, len(rows), time.perf_counter() - started, time.perf_counter() - built)
        return len(chosen)

    def _merge_plan(self, batches: list[tuple[int, int, int]]) -> list[int]:
        """The batches to merge next, from (batch, chunks, tombstones): one with too many
        tombstones, else the smallest tier holding MERGE_FANOUT batches of about one size."""
        for batch, chunks, dead in batches:
            if dead and dead * self.DEAD_SHARE >= chunks:
                return [batch]
        tiers: dict[int, list[tuple[int, int]]] = {}
        for batch, chunks, dead in batches:
            live = max(1, chunks - dead)
            tier = (live.bit_length() - 1) // (self.MERGE_FANOUT.bit_length() - 1)  # log of live, base fanout
            tiers.setdefault(tier, []).append((live, batch))
        for tier in sorted(tiers):
            members = sorted(tiers[tier])[:self.MERGE_FANOUT]
            if len(members) >= self.MERGE_FANOUT and sum(n for n, _ in members) <= self.MERGE_MAX_CHUNKS:
                return [batch for _, batch in members]
        return []

    def _weights(self, session: Session, lexemes: list[str]) -> tuple[dict[str, float], float]:
        """(BM25 idf of the query's lexemes kept, average chunk length)."""
        counts = dict(session.execute(
            text("SELECT lexeme, df FROM keyword_df WHERE lexeme = ANY(:lexemes) AND df > 0"),
            {"lexemes": [*lexemes, "", " dl"]},
        ).all())
        total, length = int(counts.pop("", 0)), int(counts.pop(" dl", 0))
        if not total or not counts:
            return {}, 1.0
        ranked = sorted(counts.items(), key=lambda item: (item[1], item[0]))
        kept = [(lex, df) for i, (lex, df) in enumerate(ranked) if i < 2 or df <= self.max_df * total]
        idf = {lex: math.log(1 + (total - df + 0.5) / (df + 0.5)) for lex, df in kept}
        return idf, max(1.0, length / total)

    def doc_freq(self, session: Session, words: Sequence[str]) -> tuple[dict[str, int], int]:
        """(how many chunks hold each word, as the lane's dictionary normalises it; how many chunks)."""
        df: dict[str, int] = {}
        for word in words:
            lexemes = list(session.scalars(
                text("SELECT lexeme FROM unnest(to_tsvector('english', :word))"), {"word": word}))
            if lexemes:
                df[word] = int(session.scalar(
                    text("SELECT df FROM keyword_df WHERE lexeme = :lexeme"), {"lexeme": lexemes[0]}) or 0)
            else:
                df[word] = 0
        total = int(session.scalar(text("SELECT df FROM keyword_df WHERE lexeme = ''")) or 0)
        return df, total

    def search(self, session: Session, query: Query, scope: Scope, depth: int) -> list[LaneHit]:
        terms = query_terms(query.text)
        if not terms or scope.empty:
            return []
        lexemes = list(session.scalars(
            text("SELECT lexeme FROM unnest(to_tsvector('english', :terms))"), {"terms": " ".join(terms)}
        ))
        idf, avgdl = self._weights(session, lexemes)
        if not idf:
            return []
        postings = self._postings(session, idf, avgdl, sorted(scope.kb_ids))
        if scope.node_ids is not None and len(postings[0]):
            inside = np.fromiter(session.scalars(
                text("SELECT id FROM chunks WHERE node_id = ANY(:nodes)"), {"nodes": sorted(scope.node_ids)}
            ), dtype=np.int64)
            keep = np.isin(postings[0], inside)
            postings = (postings[0][keep], postings[1][keep])
        ids, scores = _summed(*postings)

        def fetch(n: int) -> list[LaneHit]:
            return [LaneHit(int(i), float(s)) for i, s in _best(ids, scores, n)]

        return widen_until_full(fetch, session, depth)

    def _postings(
        self, session: Session, idf: dict[str, float], avgdl: float, kb_ids: list[str]
    ) -> tuple[np.ndarray, np.ndarray]:
        """(chunk id, BM25 term score) of every live posting of these lexemes in these knowledge
        bases: their blocks read by index, each block's tombstones taken out."""
        blocks = _rows_binary(
            session,
            "SELECT lexeme, batch, n, ids, tfs, dls FROM keyword_blocks WHERE lexeme = ANY(%(lexemes)s) "
            "AND kb_id = ANY(%(kbs)s)",
            {"lexemes": list(idf), "kbs": kb_ids},
        )
        if not blocks:
            return np.zeros(0, dtype=np.int64), np.zeros(0)
        sizes = np.array([row[2] for row in blocks], dtype=np.int64)
        ids = np.frombuffer(b"".join(row[3] for row in blocks), dtype=">i8").astype(np.int64)
        tf = np.frombuffer(b"".join(row[4] for row in blocks), dtype=">i2").astype(np.float64)
        dl = np.frombuffer(b"".join(row[5] for row in blocks), dtype=">i2").astype(np.float64)
        weight = np.repeat(np.array([idf[row[0]] for row in blocks]), sizes)
        scores = weight * tf * (self.K1 + 1) / (tf + self.K1 * (1 - self.B + self.B * dl / avgdl))
        dead: dict[int, list[int]] = {}
        for batch, chunk_id in session.execute(
            text("SELECT batch, chunk_id FROM keyword_dead WHERE batch = ANY(:batches) ORDER BY batch, chunk_id"),
            {"batches": sorted({int(row[1]) for row in blocks})},
        ):
            dead.setdefault(int(batch), []).append(int(chunk_id))
        if dead:
            # Each block against its own batch's tombstones (sorted), so a posting is looked at
            # once, not once per batch that has any.
            gone = {batch: np.array(chunk_ids, dtype=np.int64) for batch, chunk_ids in dead.items()}
            live = np.ones(len(ids), dtype=bool)
            for row, end in zip(blocks, np.cumsum(sizes).tolist()):
                if (tombstones := gone.get(int(row[1]))) is not None:
                    start = end - int(row[2])
                    live[start:end] = ~held_in(tombstones, ids[start:end])
            ids, scores = ids[live], scores[live]
        return ids, scores


def _rows_binary(session: Session, sql: str, params: dict[str, object]) -> list[tuple]:
    """Rows read in PostgreSQL's binary format on the session's own psycopg connection (in its
    transaction): a block's arrays come as raw bytes, not hex text to decode (half the time of
    reading them). psycopg 3 is the PostgreSQL driver the project installs (`postgresql+psycopg://`)."""
    raw = session.connection().connection.driver_connection
    with raw.cursor(binary=True) as cursor:
        return list(cursor.execute(sql, params).fetchall())


# Postings a block holds (migration 0018's BLOCK): merges cut their blocks at the same size.
BLOCK = 4096
# New block rows a merge writes at a time (one COPY), between reads of the old ones.
MERGE_COPY_ROWS = 2000


def _write_merged(session: Session, old: list[int], label: int, members: tuple[np.ndarray, np.ndarray]) -> None:
    """Write the blocks of batch `label`: the old batches' blocks, lexeme by lexeme, joined, with
    only the postings of `members` (chunk ids ascending, and the batch each chunk is in: a chunk
    deleted, or moved to another knowledge base and back, has a dead posting in another batch),
    sorted by chunk id and cut in blocks again. The old blocks are read through a server-side
    cursor and the new ones written by COPY a few thousand rows at a time, so memory holds one
    lexeme's postings and a buffer."""
    raw = session.connection().connection.driver_connection
    written: list[tuple] = []

    def flush() -> None:
        with raw.cursor() as cursor, cursor.copy(
            "COPY keyword_blocks (lexeme, kb_id, batch, part, n, ids, tfs, dls) FROM STDIN"
        ) as copy:
            for row in written:
                copy.write_row(row)
        written.clear()

    with raw.cursor(name="keyword_merge", binary=True) as cursor:
        cursor.itersize = MERGE_COPY_ROWS
        cursor.execute(
            "SELECT lexeme, kb_id, batch, n, ids, tfs, dls FROM keyword_blocks WHERE batch = ANY(%(old)s) "
            "ORDER BY lexeme, kb_id", {"old": old})
        for (lexeme, kb_id), group in itertools.groupby(cursor, key=lambda row: (row[0], row[1])):
            written.extend(_merged_blocks(lexeme, kb_id, label, list(group), members))
            if len(written) >= MERGE_COPY_ROWS:
                flush()  # between the cursor's fetches: the connection is free
    if written:
        flush()


def _merged_blocks(
    lexeme: str, kb_id: str, label: int, group: list[tuple], members: tuple[np.ndarray, np.ndarray]
) -> list[tuple]:
    """One lexeme's postings from several blocks (rows of lexeme, kb, batch, n, ids, tfs, dls), as
    new block rows of `label`: the postings of members in the batch they are in, by chunk id,
    BLOCK at most a row."""
    chunk_ids, batches = members
    ids = np.frombuffer(b"".join(row[4] for row in group), dtype=">i8")
    tfs = np.frombuffer(b"".join(row[5] for row in group), dtype=">i2")
    dls = np.frombuffer(b"".join(row[6] for row in group), dtype=">i2")
    batch_of = np.repeat(np.array([row[2] for row in group], dtype=np.int64), [row[3] for row in group])
    at = np.minimum(np.searchsorted(chunk_ids, ids), len(chunk_ids) - 1)
    keep = np.flatnonzero((chunk_ids[at] == ids) & (batches[at] == batch_of))
    order = keep[np.argsort(ids[keep], kind="stable")]
    ids, tfs, dls = ids[order], tfs[order], dls[order]
    return [
        (lexeme, kb_id, label, part, len(ids[start:start + BLOCK]), ids[start:start + BLOCK].tobytes(),
         tfs[start:start + BLOCK].tobytes(), dls[start:start + BLOCK].tobytes())
        for part, start in enumerate(range(0, len(ids), BLOCK))
    ]


# Chunk ids are summed into a dense array when their span is at most this many (8 bytes each), or
# four times the postings: bincount over the span is ~3x faster than sorting the ids (np.unique).
DENSE_SPAN = 1 << 21


def _summed(ids: np.ndarray, scores: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each chunk's total of its postings' scores (chunk ids ascending). Every posting's score is
    above zero (idf > 0, tf >= 1), so a chunk with postings has a total above zero."""
    if not len(ids):
        return ids, scores
    low = int(ids.min())
    span = int(ids.max()) - low + 1
    if span <= max(DENSE_SPAN, 4 * len(ids)):
        totals = np.bincount(ids - low, weights=scores, minlength=span)
        chunks = np.flatnonzero(totals)
        return chunks + low, totals[chunks]
    chunks, where = np.unique(ids, return_inverse=True)
    return chunks, np.bincount(where, weights=scores, minlength=len(chunks))


def _best(ids: np.ndarray, scores: np.ndarray, n: int) -> list[tuple[int, float]]:
    """The n best (chunk id, score), by score, ties by chunk id, as the SQL lanes order them."""
    if not len(ids) or n <= 0:
        return []
    if len(ids) > n:
        floor = np.partition(scores, len(scores) - n)[len(scores) - n]
        within = np.nonzero(scores >= floor)[0]  # every tie at the n-th score, so ties go by id
        ids, scores = ids[within], scores[within]
    order = np.lexsort((ids, -scores))[:n]
    return list(zip(ids[order].tolist(), scores[order].tolist()))
