"""What a lane is: one way of finding chunks, with both sides of it, the search and the index.

A lane answers a query with a ranking of chunk ids under a scope (`search`), and keeps its own
index of the store's chunks (`add`, `delete`, `move`, `reconcile`, `count`, `health`). The search
index (index.py) holds the lanes by name and is the only thing the rest of the code talks to:
the publisher writes a version's chunks through it, a move between knowledge bases and an import
go through it, `/healthz` asks it, and the retriever fuses what it returns. So adding a lane is a
module with a class that has these methods, and one entry in index.py's `LANE_BUILDERS`.

Two kinds of lanes, told apart by `in_store`:

- in the store (SQLite FTS5, PostgreSQL full text): the index is tables of the store, written in
  the transaction that writes the chunk rows, so it can never disagree with them;
- outside it (tantivy, Chroma): written after the chunk rows are committed, and checked against
  them by `reconcile` when a writer opens the store (a crash between the two commits, a lost
  directory, a changed engine). Either kind returns only chunks of published versions: a version
  being published is in the index before it is searchable.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Callable, Iterable, Iterator, Protocol, Sequence, TypeVar

import numpy as np
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from rag.retrieve.fusion import Fused
from rag.retrieve.types import IndexRow, LaneHit, Query, Scope
from rag.store.db import Database
from rag.store.models import PUBLISHED, Chunk, DocumentVersion

log = logging.getLogger(__name__)
T = TypeVar("T")

ChunkRef = tuple[int, str]  # (chunk id, knowledge base id): enough to find a chunk in any lane's index


@dataclass
class ChunkSource:
    """The store's chunks as the lanes index them: what a lane outside the store is reconciled
    against and rebuilt from, and what a moved chunk is indexed again with.

    The publisher provides it (it knows how a chunk's indexed text is made, and embeds as
    background work, behind waiting queries), and attaches it to the search index when it is built.
    """

    db: Database
    rows: Callable[[Session, Sequence[int] | None], Iterator[IndexRow]]  # every chunk (None) or these
    embed: Callable[[Sequence[str]], np.ndarray]  # chunk texts to vectors, as background work
    batch: int = 512  # chunks embedded and written at a time when a lane is repaired

    def rows_of(self, session: Session, chunk_ids: Sequence[int]) -> list[IndexRow]:
        """The rows of these chunks, read in parts (a statement's parameters are limited)."""
        ids = list(chunk_ids)
        return [row for i in range(0, len(ids), 500) for row in self.rows(session, ids[i:i + 500])]

    def fingerprint(self, session: Session) -> tuple[int, int]:
        """(chunk rows of any status, sum of their ids): what an index of every chunk must hold."""
        count, total = session.execute(select(func.count(), func.coalesce(func.sum(Chunk.id), 0))).one()
        return int(count), int(total)

    def published_counts(self, session: Session) -> dict[str, int]:
        """Chunks of published versions, per knowledge base."""
        return {kb: int(n) for kb, n in session.execute(
            select(Chunk.kb_id, func.count())
            .join(DocumentVersion, DocumentVersion.id == Chunk.version_id)
            .where(DocumentVersion.status == PUBLISHED)
            .group_by(Chunk.kb_id)
        ).all()}


class Lane(Protocol):
    """One retrieval lane. `name` is its key everywhere: in the fusion weights
    (`RAG_RETRIEVE__WEIGHTS__<NAME>`), in a hit's `retrievers` and `lane_ranks`, in `/healthz`."""

    name: str
    engine: str  # what /healthz names: "chroma embedded", "tantivy", "sqlite fts5", "postgresql"
    in_store: bool  # its index is tables of the store, written in the chunk rows' own transaction
    uses_vectors: bool  # add() needs the chunks' vectors (so the publisher embeds them)

    def search(self, session: Session, query: Query, scope: Scope, depth: int) -> list[LaneHit]:
        """The best `depth` chunks of published versions inside the scope, best first; the scope
        is applied inside the lane's query, so the ranking fills with in-scope hits."""
        ...

    def add(self, session: Session | None, rows: Sequence[IndexRow], vectors: np.ndarray | None) -> None:
        """Index these chunks (`vectors` in the order of `rows`, when the lane uses them). `session`
        is the chunk rows' transaction for a lane in the store, None for one outside it."""
        ...

    def delete(self, session: Session | None, chunks: Sequence[ChunkRef]) -> None:
        """Remove these chunks from the index (`session` as for add)."""
        ...

    def move(self, session: Session | None, rows: Sequence[IndexRow], from_kb: str) -> None:
        """These chunks moved from `from_kb` to the knowledge base their rows now name: a lane
        that filters on it indexes them under the new one (the vector lane without embedding)."""
        ...

    def reconcile(self, source: ChunkSource) -> int:
        """Make the index hold what the store says it should; returns the chunks repaired. Cheap
        when nothing is wrong (counts or a fingerprint are compared first)."""
        ...

    def compact(self) -> int:
        """Tidy the index after writes, in transactions of its own (PostgreSQL's keyword lane merges
        the small parts publishes append); returns the parts merged. Cheap when nothing is due."""
        ...

    def count(self, kb_id: str | None = None) -> int:
        """Chunks in the index, of one knowledge base or of all."""
        ...

    def health(self) -> None:
        """Raises when the lane's engine does not answer."""
        ...

    def attach(self, source: ChunkSource) -> None:
        """Where the store's chunks are read from: a lane that repairs itself between reconciles
        (tantivy rebuilds a damaged index before the next search) keeps it."""
        ...

    def open(self) -> None:
        """Open the engine now rather than in the first search (a server's connection)."""
        ...

    def close(self) -> None:
        """Release what the lane holds (a writer's lock)."""
        ...


class Reranker(Protocol):
    """A step after fusion: reorders (and may re-score) the fused candidates before the top k
    are kept. It sees the whole fused list, with each lane's rank and score of every candidate."""

    name: str

    def rerank(self, session: Session, query: Query, fused: list[Fused], k: int) -> list[Fused]: ...


class NoReranker:
    """The default: the fused order is the order."""

    name = "none"

    def rerank(self, session: Session, query: Query, fused: list[Fused], k: int) -> list[Fused]:
        return fused


def by_kb(chunks: Iterable[ChunkRef]) -> dict[str, list[int]]:
    """Chunk ids grouped by knowledge base, in the order given."""
    groups: dict[str, list[int]] = {}
    for chunk_id, kb_id in chunks:
        groups.setdefault(kb_id, []).append(chunk_id)
    return groups
