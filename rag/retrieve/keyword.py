"""The keyword lane, in the store's own database: BM25 over SQLite FTS5, or PostgreSQL full text.

Only chunks of published versions are ranked, and the scope (knowledge bases, and for a folder
scope the documents under it) is applied inside the query, so top-k fills with in-scope hits.
"""

from __future__ import annotations

import math
import re
import time
from functools import lru_cache
from typing import Iterable, Protocol, Sequence

from sqlalchemy import bindparam, text
from sqlalchemy.orm import Session

from rag.retrieve.published import widen_until_full
from rag.retrieve.types import LaneHit, Scope

# A short English stop list: these words only make the OR query slower and noisier.
STOPWORDS = frozenset(
    """a about above after again all also am an and any are as at be been before being below between both but by
    can could did do does doing down during each few for from further had has have having he her here hers him his
    how i if in into is it its itself just me more most my no nor not now of off on once only or other our ours out
    over own same she should so some such than that the their theirs them then there these they this those through
    to too under until up very was we were what when where which while who whom why will with would you your yours
    yourself""".split()
)
_WORD = re.compile(r"\w+", re.UNICODE)


def query_terms(query: str, max_terms: int = 32) -> list[str]:
    """Distinct lower-case terms of the query, stop words removed, in order of first appearance."""
    seen: dict[str, None] = {}
    for word in _WORD.findall(query.lower()):
        if word not in STOPWORDS and word not in seen:
            seen[word] = None
    return list(seen)[:max_terms]


def match_expression(terms: Sequence[str]) -> str:
    # Each term is quoted, so no query text is ever read as FTS5 syntax.
    return " OR ".join('"' + t.replace('"', '""') + '"' for t in terms)


class KeywordLane(Protocol):
    name: str

    def add(self, session: Session, rows: Sequence[tuple[int, str, str, str]]) -> None:
        """Rows of (chunk id, indexed text, knowledge base id, node id)."""

    def delete(self, session: Session, chunk_ids: Sequence[int]) -> None: ...

    def search(self, session: Session, query: str, scope: Scope, k: int) -> list[LaneHit]: ...


class _IndexTable:
    """Rows of the lane's own index table, keyed by chunk id."""

    name = "text"
    insert_sql = ""
    delete_sql = ""

    def add(self, session: Session, rows: Sequence[tuple[int, str, str, str]]) -> None:
        if rows:
            session.execute(text(self.insert_sql), [{"id": row[0], "text": row[1]} for row in rows])

    def delete(self, session: Session, chunk_ids: Sequence[int]) -> None:
        ids = list(chunk_ids)
        for i in range(0, len(ids), 500):
            session.execute(
                text(self.delete_sql).bindparams(bindparam("ids", expanding=True)), {"ids": ids[i:i + 500]}
            )


class SqliteKeywordLane(_IndexTable):
    insert_sql = "INSERT INTO chunk_fts (rowid, text) VALUES (:id, :text)"
    delete_sql = "DELETE FROM chunk_fts WHERE rowid IN :ids"

    def count(self, session: Session) -> int:
        return int(session.scalar(text("SELECT count(*) FROM chunk_fts")) or 0)

    def fingerprint(self, session: Session) -> tuple[int, int]:
        """(rows, sum of chunk ids): a replaced chunk changes it even when the count stays."""
        count, total = session.execute(text("SELECT count(*), coalesce(sum(rowid), 0) FROM chunk_fts")).one()
        return int(count), int(total)

    def rebuild(self, session: Session, rows: Iterable[tuple[int, str, str, str]]) -> int:
        """Refill the FTS5 table (after the tantivy engine was used on this store, say)."""
        session.execute(text("DELETE FROM chunk_fts"))
        batch: list[tuple[int, str, str, str]] = []
        written = 0
        for row in rows:
            batch.append(row)
            if len(batch) >= 2000:
                self.add(session, batch)
                written, batch = written + len(batch), []
        self.add(session, batch)
        return written + len(batch)

    def __init__(self, max_df: float = 1.0) -> None:
        self.max_df = max_df
        self._total: tuple[float, int] = (0.0, 0)

    def _chunk_count(self, session: Session) -> int:
        checked, total = self._total
        if time.monotonic() - checked > 10:
            total = int(session.scalar(text("SELECT count(*) FROM chunks")) or 0)
            self._total = (time.monotonic(), total)
        return total

    def prune(self, session: Session, terms: list[str]) -> list[str]:
        """Leave out words that occur in more than max_df of the chunks, keeping the two rarest.

        A word in a fifth of the chunks has a BM25 idf of about 1.4, against 9 to 11 for the rare
        words that decide a ranking, yet its postings are most of what FTS5 walks. At 100,000
        chunks a 0.2 cut takes the bare FTS5 query's median from 46 ms to 30 ms, and on SciFact it
        does not cost quality (docs/benchmarks.md); 0.05 was faster but lost 0.03 nDCG@10."""
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

    def search(self, session: Session, query: str, scope: Scope, k: int) -> list[LaneHit]:
        terms = query_terms(query)
        if not terms or not scope.kb_ids or (scope.node_ids is not None and not scope.node_ids):
            return []
        match = match_expression(self.prune(session, terms))
        # Fast path: rank in FTS5 alone, then check the best few by primary key. Joining every
        # match to its chunk and version before ranking costs more than the ranking itself
        # (26 ms against 10 ms at 10,000 chunks). When the scope or unpublished chunks thin the
        # page out below k, the exact query below fills k with in-scope hits.
        page = 2 * k + 16
        ranked = session.execute(
            text("SELECT rowid AS id, rank FROM chunk_fts WHERE chunk_fts MATCH :match ORDER BY rank LIMIT :n"),
            {"match": match, "n": page},
        ).all()
        allowed = _in_scope(session, [row.id for row in ranked], scope)
        hits = [LaneHit(int(row.id), -float(row.rank)) for row in ranked if row.id in allowed]
        if len(hits) >= k or len(ranked) < page:
            return hits[:k]
        return self._search_in_scope(session, match, scope, k)

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
    BM25 (k1 1.2, b 0.75) from `keyword_postings`, one row per lexeme of each chunk with its term
    frequency and the chunk's length, kept with the document frequencies in `keyword_df` by
    triggers on `chunk_tsv` (migration 0005). Summing postings read from an index is what makes it
    fast: ranking with ts_rank parsed the tsvector of every matching chunk (~200 ms a question at
    100,000 chunks). Lexemes in more than `max_df` of the chunks are left out (keeping the two
    rarest), as in the FTS5 lane. Hits are checked against published versions by primary key, as
    for the lanes outside the store, widening when too few pass.
    """

    insert_sql = "INSERT INTO chunk_tsv (chunk_id, tsv) VALUES (:id, to_tsvector('english', :text))"
    delete_sql = "DELETE FROM chunk_tsv WHERE chunk_id IN :ids"
    K1, B = 1.2, 0.75

    def __init__(self, max_df: float = 1.0) -> None:
        self.max_df = max_df

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

    def search(self, session: Session, query: str, scope: Scope, k: int) -> list[LaneHit]:
        terms = query_terms(query)
        if not terms or not scope.kb_ids or (scope.node_ids is not None and not scope.node_ids):
            return []
        lexemes = list(session.scalars(
            text("SELECT lexeme FROM unnest(to_tsvector('english', :terms))"), {"terms": " ".join(terms)}
        ))
        idf, avgdl = self._weights(session, lexemes)
        if not idf:
            return []
        params: dict[str, object] = {
            "lexemes": list(idf), "weights": list(idf.values()), "kbs": sorted(scope.kb_ids),
            "k1": self.K1, "b": self.B, "avgdl": avgdl,
        }
        nodes = ""
        if scope.node_ids is not None:
            params["nodes"] = sorted(scope.node_ids)
            nodes = "AND p.chunk_id IN (SELECT id FROM chunks WHERE node_id = ANY(:nodes))"
        sql = text(
            f"""
            SELECT p.chunk_id AS id,
                   sum(q.w * p.tf * (:k1 + 1) / (p.tf + :k1 * (1 - :b + :b * p.dl / :avgdl))) AS rank
            FROM unnest(CAST(:lexemes AS text[]), CAST(:weights AS float8[])) AS q(lexeme, w)
            JOIN keyword_postings AS p ON p.lexeme = q.lexeme
            WHERE p.kb_id = ANY(:kbs) {nodes}
            GROUP BY p.chunk_id
            ORDER BY rank DESC, p.chunk_id
            LIMIT :n
            """
        )

        def fetch(n: int) -> list[LaneHit]:
            return [LaneHit(int(row.id), float(row.rank)) for row in session.execute(sql, {**params, "n": n})]

        return widen_until_full(fetch, session, k)


@lru_cache(maxsize=1)
def _stemmer():
    from nltk.stem.porter import PorterStemmer

    return PorterStemmer(mode=PorterStemmer.ORIGINAL_ALGORITHM)  # the algorithm FTS5's porter tokenizer uses


@lru_cache(maxsize=65536)
def porter_stem(word: str) -> str:
    return _stemmer().stem(word)


def keyword_lane(dialect: str, engine: str = "fts5", path=None, max_df: float = 1.0):
    """PostgreSQL's own full text on PostgreSQL; on SQLite, tantivy (default) or FTS5."""
    if dialect == "sqlite" and engine == "tantivy":
        from rag.retrieve.tantivy_lane import TantivyKeywordLane

        return TantivyKeywordLane(path)
    if dialect == "sqlite":
        return SqliteKeywordLane(max_df)
    if dialect == "postgresql":
        return PostgresKeywordLane(max_df)
    raise ValueError(f"no keyword lane for the {dialect} database")
