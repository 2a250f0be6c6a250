"""The keyword lane of the embedded default: BM25 in a tantivy index under RAG_HOME.

Why not SQLite FTS5, which the store already has: FTS5 ranks every row that matches an OR query
before it can return the best ten, so at 100,000 chunks a nine-word question costs 30 to 60 ms.
tantivy keeps block-level score bounds and skips blocks that cannot reach the top k (block-max
WAND): `python -m benchmarks.search_latency --scale 100k --keyword-engine fts5` compares the two.

The index is derived data. Each chunk is a document with its id, knowledge base and node (raw
terms, for the scope filter inside the query) and its indexed text (English stemming). Chunks of
a version being published are in the index before they are searchable, so hits are checked by
primary key against published versions, as in the vector lane. When the index and the chunks
table disagree (a crash between the two commits, a deleted folder, a changed engine),
``reconcile`` rebuilds it from the chunks table: no embedding is needed, 100,000 chunks take
seconds.

A damaged index (a garbled meta.json, a truncated or missing segment file) is treated the same
way: whenever tantivy reports damage (a ValueError, an OSError, or a Rust panic), on opening, on
searching or on writing, the directory is moved aside to `keyword.broken` (replacing an earlier
one), an empty index takes its place and the lane is marked stale. A stale lane rebuilds itself
from the chunks before its next search (the publisher attaches the source of rows), and a
writer's start-up reconcile rebuilds it too. A search that finds damage and cannot rebuild
answers from the vector lane alone (no keyword hits) and logs a warning.

It lives outside the store (`in_store` False): a version's chunks are added after their rows are
committed, and removed again if the publish fails.
"""

from __future__ import annotations

import logging
import shutil
import threading
from pathlib import Path
from typing import Callable, Iterable, Sequence, TypeVar

import numpy as np
from sqlalchemy.orm import Session

from rag.retrieve.lanes import ChunkRef, ChunkSource
from rag.retrieve.published import widen_until_full
from rag.retrieve.text import query_terms
from rag.retrieve.types import IndexRow, LaneHit, Query, Scope

log = logging.getLogger(__name__)

_WRITER_HEAP = 64_000_000

T = TypeVar("T")


def is_damage(exc: BaseException) -> bool:
    """What tantivy raises for an index it cannot read: ValueError for most damage (bad JSON,
    a wrong footer, a missing file), OSError, and for some byte-level damage a panic in Rust that
    pyo3 raises as PanicException, a BaseException."""
    return isinstance(exc, (ValueError, OSError)) or type(exc).__name__ == "PanicException"


class TantivyKeywordLane:
    """BM25 over each chunk's indexed text (the `text` lane) or, as the `title` lane, over its
    heading path alone (a document's title and section headings), in an index of its own: a
    question that names a document's subject finds it there even when the body says it once."""

    engine = "tantivy"
    in_store = False
    uses_vectors = False

    def __init__(self, path: Path, name: str = "text", field: str = "text") -> None:
        import tantivy

        self._tantivy = tantivy
        self.path = path
        self.name = name
        self.field = field  # which part of a row is indexed: "text" (the indexed text) or "heading"
        builder = tantivy.SchemaBuilder()
        builder.add_integer_field("id", stored=True, indexed=True, fast=True)
        builder.add_text_field("kb", stored=False, tokenizer_name="raw")
        builder.add_text_field("node", stored=False, tokenizer_name="raw")
        builder.add_text_field("text", stored=False, tokenizer_name="en_stem")
        self.schema = builder.build()
        self._writer = None
        self._lock = threading.RLock()
        self._source: ChunkSource | None = None
        self.stale = False  # empty (new or set aside after damage) until rebuilt from the chunks
        self.generation = 0  # bumped by each reset, so concurrent searches repair once
        # No index here yet (a first start, a deleted or switched index) while the store may hold
        # chunks: stale, so that a reader rebuilds it too, not only a writer's start-up reconcile.
        self.stale = not (path / "meta.json").exists()
        try:
            self.index = self._open()
            self._probe()
        except BaseException as exc:
            if not is_damage(exc):
                raise
            self._reset(exc)

    # ----- opening, and recovering from damage -----

    def _open(self):
        self.path.mkdir(parents=True, exist_ok=True)
        return self._tantivy.Index(self.schema, path=str(self.path), reuse=True)

    def _probe(self) -> None:
        """Touch what a search touches (segment files, a term dictionary, the id fast field), so
        that damage shows on opening rather than in the middle of a search."""
        searcher = self.index.searcher()
        searcher.search(self.index.parse_query('"probe"', ["text"]), 1, count=False)
        self._fingerprint()

    def attach(self, source: ChunkSource) -> None:
        """Where the rows come from when the index must be rebuilt (the publisher's chunks)."""
        self._source = source

    def compact(self) -> int:
        return 0  # tantivy merges its own segments

    def _reset(self, exc: BaseException) -> None:
        """Set the damaged directory aside and start an empty index in its place (lock held or at start)."""
        with self._lock:
            log.warning(
                "the keyword index in %s is damaged (%s: %s); it is moved aside and rebuilt from the chunks",
                self.path, type(exc).__name__, str(exc)[:300],
            )
            self._writer = None
            self.index = None
            aside = self.path.with_name(self.path.name + ".broken")
            shutil.rmtree(aside, ignore_errors=True)  # keep only the latest damaged copy, for a post-mortem
            try:
                self.path.rename(aside)
            except FileNotFoundError:
                pass  # another reader moved it aside first
            except OSError:
                shutil.rmtree(self.path, ignore_errors=True)
            self.index = self._open()
            self.stale = True
            self.generation += 1

    def _guarded(self, action: Callable[[], T], session: Session | None) -> T:
        """Run a read of the index; on damage, reset the index, rebuild it when possible, retry once.
        Any error of tantivy's kinds counts as damage: a needless rebuild costs seconds, a missed
        one would fail every search."""
        generation = self.generation
        try:
            return action()
        except BaseException as exc:
            if not is_damage(exc):
                raise
            with self._lock:
                if self.generation == generation:  # not reset by a concurrent search meanwhile
                    self._reset(exc)
        self._repair(session)
        return action()

    def _repair(self, session: Session | None) -> None:
        """Rebuild a stale index from the chunks, if a source of rows is attached."""
        if not self.stale or self._source is None or session is None:
            return
        with self._lock:
            if not self.stale:
                return
            log.info("rebuilding the keyword index in %s from the chunks", self.path)
            self.rebuild(session, self._source.rows(session, None))

    # ----- writing (only the process that holds the store for writing gets here) -----

    def _write(self, change: Callable[[object], None]) -> None:
        with self._lock:
            try:
                self._apply(change)
            except BaseException as exc:
                if not is_damage(exc):
                    raise
                # A damaged index cannot take the change; an empty one can, and the next search
                # or start rebuilds it from the chunks (which then include this change's).
                self._reset(exc)
                self._apply(change)

    def _apply(self, change: Callable[[object], None]) -> None:
        if self._writer is None:
            self._writer = self.index.writer(heap_size=_WRITER_HEAP, num_threads=1)
        change(self._writer)
        self._writer.commit()
        self.index.reload()

    def _document(self, row: IndexRow):
        chunk_id, text, kb_id, node_id = row[:4]  # a plain (id, text, kb, node) tuple is a row too
        body = (row[4] if len(row) > 4 else "") if self.field == "heading" else text
        return self._tantivy.Document(id=chunk_id, text=body, kb=kb_id, node=node_id)

    def add(self, session: Session | None, rows: Sequence[IndexRow], vectors: np.ndarray | None = None) -> None:
        """Rows of (chunk id, indexed text, knowledge base id, node id), committed at once."""
        self._replace([], rows)

    def delete(self, session: Session | None, chunks: Sequence[ChunkRef]) -> None:
        self._replace([chunk_id for chunk_id, _ in chunks], [])

    def move(self, session: Session | None, rows: Sequence[IndexRow], from_kb: str) -> None:
        """The knowledge base is a term of each document: the moved chunks are indexed again."""
        self._replace([row[0] for row in rows], rows)

    def _replace(self, deleted: Sequence[int], added: Sequence[IndexRow]) -> None:
        """Delete documents, then add others, in one commit (a delete only reaches the documents
        added before it, so a chunk can be deleted and added again at once)."""
        if not deleted and not added:
            return
        documents = [self._document(row) for row in added]

        def change(writer) -> None:
            for chunk_id in deleted:
                writer.delete_documents_by_term("id", chunk_id)
            for document in documents:
                writer.add_document(document)

        self._write(change)

    def count(self, kb_id: str | None = None) -> int:
        def count() -> int:
            searcher = self.index.searcher()
            if kb_id is None:
                return searcher.num_docs
            query = self._tantivy.Query.term_query(self.schema, "kb", kb_id)
            return searcher.search(query, 1, count=True).count

        return self._guarded(count, None)

    def health(self) -> None:
        self.count()  # damage is set aside here, as in a search: the lane answers again

    def reconcile(self, source: ChunkSource) -> int:
        """Rebuild the index when it does not hold exactly the chunks (tantivy lives outside the
        store's transactions; it is empty after a switch from FTS5; a damaged index was set aside
        and reads as empty). Returns the chunks written (0 when it was whole). Needs no
        embedding: seconds at 100,000 chunks."""
        self.attach(source)
        with source.db.session() as session:
            expected = source.fingerprint(session)
            present = self.fingerprint(session)
            if present == expected:
                self.stale = False  # a new or reset index that holds exactly the chunks is whole
                return 0
            log.warning("keyword index holds %d documents for %d chunks; rebuilding it", present[0], expected[0])
            return self.rebuild(session, source.rows(session, None))

    def fingerprint(self, session: Session | None) -> tuple[int, int]:
        """(documents, sum of chunk ids): a replaced chunk changes it even when the count stays.
        Damage reads as an empty index, which reconcile then rebuilds."""
        return self._guarded(self._fingerprint, None)

    def _fingerprint(self) -> tuple[int, int]:
        searcher = self.index.searcher()
        if not searcher.num_docs:
            return 0, 0
        total = searcher.aggregate(self._tantivy.Query.all_query(), {"ids": {"sum": {"field": "id"}}})
        return searcher.num_docs, int(total["ids"]["value"])

    def rebuild(self, session: Session | None, rows: Iterable[IndexRow]) -> int:
        """Replace the whole index with these rows; returns how many were written."""
        written = [0]

        def change(writer) -> None:
            writer.delete_all_documents()
            for row in rows:
                writer.add_document(self._document(row))
                written[0] += 1

        self._write(change)
        self.stale = False
        return written[0]

    def open(self) -> None:
        pass  # opened when made: damage shows (and is set aside) before the first write

    def close(self) -> None:
        with self._lock:
            self._writer = None  # dropping the writer releases tantivy's lock file

    # ----- searching -----

    def _query(self, terms: list[str], scope: Scope, searcher):
        tantivy = self._tantivy
        # Each word is quoted, so no query text is ever read as query syntax; the parser applies
        # the index's own tokenizer and stemmer to it. The words are OR-ed, as BM25 expects.
        words = self.index.parse_query(" OR ".join('"' + t.replace('"', " ") + '"' for t in terms), ["text"])
        clauses = [(tantivy.Occur.Must, words)]
        # The scope filters are part of the query, so top-k fills with in-scope chunks; they add
        # nothing to the score. A filter that keeps every chunk is left out: the words alone are
        # an OR that tantivy ranks by its block-max scores, skipping what cannot reach the top k
        # (4x faster at 100,000 chunks, the same hits); joined to a filter, every chunk holding a
        # word is scored.
        if not self._holds_only(searcher, scope.kb_ids):
            kbs = tantivy.Query.term_set_query(self.schema, "kb", list(scope.kb_ids))
            clauses.append((tantivy.Occur.Must, tantivy.Query.const_score_query(kbs, 0.0)))
        if scope.node_ids is not None:
            nodes = tantivy.Query.term_set_query(self.schema, "node", sorted(scope.node_ids))
            clauses.append((tantivy.Occur.Must, tantivy.Query.const_score_query(nodes, 0.0)))
        return words if len(clauses) == 1 else tantivy.Query.boolean_query(clauses)

    @staticmethod
    def _holds_only(searcher, kb_ids: Sequence[str]) -> bool:
        """Whether every chunk this searcher sees is of these knowledge bases. Read from the kb
        field's term dictionary, which also keeps a knowledge base whose chunks were all deleted
        until its segments merge: then the answer is no, and the filter stays."""
        wanted = set(kb_ids)
        return all(kb in wanted for kb, _ in searcher.terms_with_prefix("kb", ""))

    def doc_freq(self, session: Session, words: Sequence[str]) -> tuple[dict[str, int], int]:
        """(how many chunks hold each word, as the index reads it; how many chunks there are)."""
        self._repair(session)
        searcher = self.index.searcher()
        df = {}
        for word in words:
            # Counted by a query, so that the index's own tokenizer and stemmer read the word.
            query = self.index.parse_query('"' + word.replace('"', " ") + '"', ["text"])
            df[word] = int(searcher.search(query, 1, count=True).count or 0)
        return df, int(searcher.num_docs)

    def search(self, session: Session, query: Query, scope: Scope, depth: int) -> list[LaneHit]:
        terms = query_terms(query.text, query.max_terms)
        if not terms or scope.empty:
            return []
        self._repair(session)
        if self.stale:  # damaged, and nothing to rebuild it from here: the vector lane answers alone
            log.warning("the keyword index is being rebuilt; this search has no keyword hits")
            return []
        return self._guarded(lambda: self._search(session, terms, scope, depth), session)

    def _search(self, session: Session, terms: list[str], scope: Scope, k: int) -> list[LaneHit]:
        searcher = self.index.searcher()
        compiled = self._query(terms, scope, searcher)

        def fetch(n: int) -> list[LaneHit]:
            hits = searcher.search(compiled, n, count=False).hits
            ids = searcher.fast_field_values("id", [address for _, address in hits])
            return [LaneHit(int(chunk_id), float(score)) for (score, _), chunk_id in zip(hits, ids)]

        return widen_until_full(fetch, session, k)
