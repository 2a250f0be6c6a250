"""The keyword lane of the embedded default: BM25 in a tantivy index under RAG_HOME.

Why not SQLite FTS5, which the store already has: FTS5 ranks every row that matches an OR query
before it can return the best ten, so at 100,000 chunks a nine-word question costs 30 to 60 ms.
tantivy keeps block-level score bounds and skips blocks that cannot reach the top k (block-max
WAND): the same queries take about a millisecond (docs/benchmarks.md).

The index is derived data. Each chunk is a document with its id, knowledge base and node (raw
terms, for the scope filter inside the query) and its indexed text (English stemming). Chunks of
a version being published are in the index before they are searchable, so hits are checked by
primary key against published versions, as in the vector lane. When the index and the chunks
table disagree (a crash between the two commits, a deleted folder, a changed engine),
``reconcile`` rebuilds it from the chunks table: no embedding is needed, 100,000 chunks take
seconds.
"""

from __future__ import annotations

import logging
import threading
from pathlib import Path
from typing import Callable, Iterable, Sequence

from sqlalchemy.orm import Session

from rag.retrieve.keyword import query_terms
from rag.retrieve.published import widen_until_full
from rag.retrieve.types import LaneHit, Scope

log = logging.getLogger(__name__)

_WRITER_HEAP = 64_000_000


class TantivyKeywordLane:
    name = "text"

    def __init__(self, path: Path) -> None:
        import tantivy

        self._tantivy = tantivy
        self.path = path
        builder = tantivy.SchemaBuilder()
        builder.add_integer_field("id", stored=True, indexed=True, fast=True)
        builder.add_text_field("kb", stored=False, tokenizer_name="raw")
        builder.add_text_field("node", stored=False, tokenizer_name="raw")
        builder.add_text_field("text", stored=False, tokenizer_name="en_stem")
        self.schema = builder.build()
        path.mkdir(parents=True, exist_ok=True)
        self.index = tantivy.Index(self.schema, path=str(path), reuse=True)
        self._writer = None
        self._lock = threading.Lock()

    # ----- writing (only the process that holds the store for writing gets here) -----

    def _write(self, change: Callable[[object], None]) -> None:
        with self._lock:
            if self._writer is None:
                self._writer = self.index.writer(heap_size=_WRITER_HEAP, num_threads=1)
            change(self._writer)
            self._writer.commit()
            self.index.reload()

    def _document(self, row: tuple[int, str, str, str]):
        chunk_id, body, kb_id, node_id = row
        return self._tantivy.Document(id=chunk_id, text=body, kb=kb_id, node=node_id)

    def add(self, session: Session, rows: Sequence[tuple[int, str, str, str]]) -> None:
        """Rows of (chunk id, indexed text, knowledge base id, node id), committed at once."""
        if not rows:
            return
        documents = [self._document(row) for row in rows]

        def change(writer) -> None:
            for document in documents:
                writer.add_document(document)

        self._write(change)

    def delete(self, session: Session, chunk_ids: Sequence[int]) -> None:
        ids = list(chunk_ids)
        if not ids:
            return

        def change(writer) -> None:
            for chunk_id in ids:
                writer.delete_documents_by_term("id", chunk_id)

        self._write(change)

    def count(self, session: Session) -> int:
        return self.index.searcher().num_docs

    def fingerprint(self, session: Session) -> tuple[int, int]:
        """(documents, sum of chunk ids): a replaced chunk changes it even when the count stays."""
        searcher = self.index.searcher()
        if not searcher.num_docs:
            return 0, 0
        total = searcher.aggregate(self._tantivy.Query.all_query(), {"ids": {"sum": {"field": "id"}}})
        return searcher.num_docs, int(total["ids"]["value"])

    def rebuild(self, session: Session, rows: Iterable[tuple[int, str, str, str]]) -> int:
        """Replace the whole index with these rows; returns how many were written."""
        written = [0]

        def change(writer) -> None:
            writer.delete_all_documents()
            for row in rows:
                writer.add_document(self._document(row))
                written[0] += 1

        self._write(change)
        return written[0]

    def close(self) -> None:
        with self._lock:
            self._writer = None  # dropping the writer releases tantivy's lock file

    # ----- searching -----

    def _query(self, terms: list[str], scope: Scope):
        tantivy = self._tantivy
        # Each word is quoted, so no query text is ever read as query syntax; the parser applies
        # the index's own tokenizer and stemmer to it. The words are OR-ed, as BM25 expects.
        words = self.index.parse_query(" OR ".join('"' + t.replace('"', " ") + '"' for t in terms), ["text"])
        clauses = [(tantivy.Occur.Must, words)]
        # The scope filters are part of the query, so top-k fills with in-scope chunks; they add
        # nothing to the score.
        kbs = tantivy.Query.term_set_query(self.schema, "kb", list(scope.kb_ids))
        clauses.append((tantivy.Occur.Must, tantivy.Query.const_score_query(kbs, 0.0)))
        if scope.node_ids is not None:
            nodes = tantivy.Query.term_set_query(self.schema, "node", sorted(scope.node_ids))
            clauses.append((tantivy.Occur.Must, tantivy.Query.const_score_query(nodes, 0.0)))
        return tantivy.Query.boolean_query(clauses)

    def search(self, session: Session, query: str, scope: Scope, k: int) -> list[LaneHit]:
        terms = query_terms(query)
        if not terms or not scope.kb_ids or (scope.node_ids is not None and not scope.node_ids):
            return []
        searcher = self.index.searcher()
        compiled = self._query(terms, scope)

        def fetch(n: int) -> list[LaneHit]:
            hits = searcher.search(compiled, n, count=False).hits
            ids = searcher.fast_field_values("id", [address for _, address in hits])
            return [LaneHit(int(chunk_id), float(score)) for (score, _), chunk_id in zip(hits, ids)]

        return widen_until_full(fetch, session, k)
