"""The retriever stage: both lanes under one scope, fused, hydrated into excerpts.

`Retriever.retrieve(query, scope, k) -> list[Hit]`. Each lane is filtered by the scope before
fusion, and only chunks of published versions survive, so k is filled with in-scope hits.
"""

from __future__ import annotations

import logging
from typing import Sequence

from sqlalchemy import bindparam, select
from sqlalchemy.orm import Session

from rag.models.embed import Embedder
from rag.retrieve.fusion import reciprocal_rank_fusion
from rag.retrieve.keyword import KeywordLane
from rag.retrieve.published import widen_until_full
from rag.retrieve.types import Hit, LaneHit, Scope
from rag.retrieve.vector import ChromaVectorLane
from rag.settings import RetrieveSettings
from rag.store.db import Database
from rag.store.models import Chunk, DocumentVersion, Node

log = logging.getLogger(__name__)

LANES = ("vector", "text")


class Retriever:
    def __init__(
        self,
        db: Database,
        embedder: Embedder,
        vector: ChromaVectorLane,
        keyword: KeywordLane,
        settings: RetrieveSettings,
    ) -> None:
        self.db = db
        self.embedder = embedder
        self.vector = vector
        self.keyword = keyword
        self.settings = settings

    @property
    def weights(self) -> dict[str, float]:
        return {"vector": self.settings.vector_weight, "text": self.settings.text_weight}

    def lane_hits(
        self, session: Session, query: str, scope: Scope, depth: int, lanes: Sequence[str] = LANES
    ) -> dict[str, list[LaneHit]]:
        found: dict[str, list[LaneHit]] = {}
        if "vector" in lanes:
            found["vector"] = self._vector(session, query, scope, depth)
        if "text" in lanes:
            found["text"] = self.keyword.search(session, query, scope, depth)
        return found

    def retrieve(
        self, query: str, scope: Scope, k: int, lanes: Sequence[str] = LANES, depth: int | None = None
    ) -> list[Hit]:
        depth = max(depth or self.settings.candidates, k)
        with self.db.session() as session:
            found = self.lane_hits(session, query, scope, depth, lanes)
            fused = reciprocal_rank_fusion(found, self.weights, self.settings.rrf_k)[:k]
            return self._hydrate(session, fused)

    def _vector(self, session: Session, query: str, scope: Scope, depth: int) -> list[LaneHit]:
        vector = self.embedder.embed_query(query)
        return widen_until_full(lambda n: self.vector.search(vector, scope, n), session, depth)

    @staticmethod
    def _hydrate(session: Session, fused) -> list[Hit]:
        if not fused:
            return []
        stmt = (
            select(Chunk, DocumentVersion.number, Node)
            .join(DocumentVersion, DocumentVersion.id == Chunk.version_id)
            .join(Node, Node.id == Chunk.node_id)
            .where(Chunk.id.in_(bindparam("ids", expanding=True)))
        )
        rows = {chunk.id: (chunk, number, node) for chunk, number, node in session.execute(
            stmt, {"ids": [f.chunk_id for f in fused]}
        )}
        hits: list[Hit] = []
        for f in fused:
            if f.chunk_id not in rows:
                continue  # deleted between the lane query and now
            chunk, number, node = rows[f.chunk_id]
            hits.append(
                Hit(
                    chunk_id=chunk.id,
                    score=f.score,
                    retrievers=[lane for lane in LANES if lane in f.lanes],
                    node_id=node.id,
                    kb_id=chunk.kb_id,
                    source_id=node.source_id or node.id,
                    title=node.name,
                    source=node.source_label,
                    version=number,
                    heading_path=list(chunk.heading_path or []),
                    text=chunk.text,
                    char_start=chunk.char_start,
                    char_end=chunk.char_end,
                    vector_similarity=f.lane_scores.get("vector"),
                    text_score=f.lane_scores.get("text"),
                    lane_ranks=dict(f.lanes),
                )
            )
        return hits
