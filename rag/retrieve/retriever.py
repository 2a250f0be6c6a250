"""The retriever stage: every lane of the search index under one scope, fused, hydrated into excerpts.

`Retriever.retrieve(query, scope, k) -> list[Hit]`. Each lane is filtered by the scope before
fusion, and only chunks of published versions survive, so k is filled with in-scope hits. The
query is a `Query`: its embedding is computed once, by the first lane that needs it, and a caller
that made the `Query` keeps it for later stages.
"""

from __future__ import annotations

import logging
from typing import Callable, Sequence, TypeVar

from sqlalchemy import bindparam, select
from sqlalchemy.orm import Session

from rag import telemetry
from rag.turns import give_way
from rag.errors import InvalidArgument
from rag.models.embed import Embedder, embed_search_query
from rag.retrieve.fusion import Fused, diversify
from rag.retrieve.index import BRIDGE, SearchIndex
from rag.retrieve.published import remember_statuses
from rag.retrieve.types import Hit, LaneHit, Query, Scope
from rag.settings import RetrieveSettings
from rag.store.db import Database
from rag.store.models import Chunk, DocumentVersion, Node

log = logging.getLogger(__name__)

# An excerpt's columns by chunk id. Columns, not ORM entities: building and tracking entities was most
# of a hydration's cost; and one statement, made once (building it took a tenth of a hydration).
_HYDRATE = (
    select(Chunk.id, Chunk.kb_id, Chunk.heading_path, Chunk.text, Chunk.char_start, Chunk.char_end,
           Chunk.page_start, Chunk.locator, DocumentVersion.number, Node.id.label("node_id"), Node.source_id, Node.name,
           Node.source_label, Node.url)
    .join(DocumentVersion, DocumentVersion.id == Chunk.version_id)
    .join(Node, Node.id == Chunk.node_id)
    .where(Chunk.id.in_(bindparam("ids", expanding=True)))
)


T = TypeVar("T")


def _embedding(embed: Callable[[str], T]) -> Callable[[str], T]:
    """A query's embedding, timed as the stage `embed` and counted as a batch of one."""
    def run(text: str) -> T:
        telemetry.count(telemetry.EMBED_BATCHES, "query")
        telemetry.count(telemetry.EMBED_TEXTS, "query")
        with telemetry.stage("embed"):
            return embed(text)
    return run


class Retriever:
    def __init__(self, db: Database, embedder: Embedder, index: SearchIndex, settings: RetrieveSettings) -> None:
        self.db = db
        self.embedder = embedder
        self.index = index
        self.settings = settings

    def query(self, query: str | Query, search: bool = False) -> Query:
        """A `Query` whose vector this retriever's embedder computes on first use; `search`: a
        query whose vector only ranks chunks (no answer reads it), for the embedder's cheaper
        encoder (`embed_search_query`)."""
        if isinstance(query, Query):
            return query
        if search:
            return Query(query, _embedding(lambda text: embed_search_query(self.embedder, text)))
        return Query(query, _embedding(self.embedder.embed_query))

    def start(self, query: str | Query, lanes: Sequence[str] | None = None, search: bool = False) -> Query:
        """The `Query` of a search about to be made with these lanes, its vector already being
        computed on another thread when that search would do so anyway: a caller that has other
        work before the search (reading the caller's scope) overlaps the two."""
        query = self.query(query, search)
        try:
            ahead = self.index.embeds_ahead(lanes)
        except InvalidArgument:
            return query  # an unknown lane: the search refuses it, after the caller's access is checked
        if ahead:
            query.embed_ahead()
        return query

    def lane_hits(
        self, session: Session, query: str | Query, scope: Scope, depth: int, lanes: Sequence[str] | None = None
    ) -> dict[str, list[LaneHit]]:
        """Each lane's own ranking (all lanes, or these), before fusion; with all lanes, the
        bridge's ranking too (`SearchIndex.follow`), as a search fuses them."""
        query = self.query(query)
        found = self.index.search(session, query, scope, depth, lanes)
        return found if lanes is not None else self.index.follow(session, query, scope, found, depth)

    def retrieve(
        self, query: str | Query, scope: Scope, k: int, lanes: Sequence[str] | None = None, depth: int | None = None,
        diverse: bool = False,
    ) -> list[Hit]:
        """The best k excerpts: `depth` (default `candidates`) from each lane, fused, reranked; with
        `diverse` (a search's result list), at most `per_document` of one document in the first
        `diversity_window`. An answer's excerpts are not capped: several excerpts of the right page
        are what an answer quotes (capping them costs answers: `python -m evals.handbook_ask`)."""
        query = self.query(query)
        depth = max(depth or self.settings.candidates, k)
        with telemetry.stage("retrieve"), self.db.session() as session:
            remember_statuses(session)  # the lanes check each chunk's status once
            found = self.lane_hits(session, query, scope, depth, lanes)
            give_way()  # to a lighter caller's search, here and before the excerpts are read (rag/turns.py)
            with telemetry.stage("fuse"):
                ranked = self.index.rank(session, query, found, k if not diverse or self.settings.per_document <= 0
                                         else None)
            give_way()
            if not diverse or self.settings.per_document <= 0:
                return self._hydrate(session, ranked)
            return self._diverse(session, ranked, k)

    def _diverse(self, session: Session, ranked: Sequence[Fused], k: int) -> list[Hit]:
        """The first k of the ranking with the per-document cap applied. Only the first k are read
        from the store unless the cap holds some back; then more, until the window fills or the
        candidates run out. Scores are handed out again by place, so they still fall in order."""
        window = min(self.settings.diversity_window, k)
        n = k
        while True:
            hits = self._hydrate(session, ranked[:n])
            order, settled = diversify([h.node_id for h in hits], self.settings.per_document, window)
            if settled or n >= len(ranked):
                break
            n = min(len(ranked), 2 * n + self.settings.diversity_window)
        chosen = [hits[i] for i in order[:k]]
        places = sorted((h.score for h in chosen), reverse=True)
        for hit, score in zip(chosen, places):
            hit.score = score
        return chosen

    def doc_freq(self, words: Sequence[str]) -> tuple[dict[str, int], int] | None:
        """How many chunks of the store hold each word, and how many chunks there are (None: no
        lane counts words). The synthesizer judges which of a question's words are rare with it."""
        with self.db.session() as session:
            return self.index.doc_freq(session, words)

    def _hydrate(self, session: Session, fused: Sequence[Fused]) -> list[Hit]:
        if not fused:
            return []
        # On the session's connection: a read of committed rows, without the ORM's execution steps
        # (a third of the statement's cost).
        rows = {row.id: row for row in session.connection().execute(_HYDRATE, {"ids": [f.chunk_id for f in fused]})}
        hits: list[Hit] = []
        for f in fused:
            row = rows.get(f.chunk_id)
            if row is None:
                continue  # deleted between the lane query and now
            hits.append(
                Hit(
                    chunk_id=row.id,
                    score=f.score,
                    retrievers=[lane for lane in self.index.lanes if lane in f.lanes] or [n for n in f.lanes if n == BRIDGE],
                    node_id=row.node_id,
                    kb_id=row.kb_id,
                    source_id=row.source_id or row.node_id,
                    title=row.name,
                    source=row.source_label,
                    version=row.number,
                    heading_path=list(row.heading_path or []),
                    text=row.text,
                    char_start=row.char_start,
                    char_end=row.char_end,
                    lane_ranks=dict(f.lanes),
                    lane_scores=dict(f.lane_scores),
                    page=row.page_start,
                    locator=row.locator,
                    url=row.url,
                )
            )
        return hits
