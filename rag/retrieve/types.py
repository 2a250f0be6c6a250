"""What the retriever stage passes around."""

from __future__ import annotations

from dataclasses import dataclass, field

TRUNCATION_MARK = "[…truncated]"


@dataclass(frozen=True)
class Scope:
    """Where a search may look: knowledge bases, and optionally only these documents (folder scope)."""

    workspace_id: str
    kb_ids: tuple[str, ...]
    node_ids: frozenset[str] | None = None


@dataclass(frozen=True)
class LaneHit:
    chunk_id: int
    score: float  # the lane's own score, higher is better (cosine similarity, negated bm25)


@dataclass
class Hit:
    """One ranked excerpt: a chunk of a published document version."""

    chunk_id: int
    score: float  # the fused ranking score (reciprocal rank fusion)
    retrievers: list[str]
    node_id: str
    kb_id: str
    source_id: str
    title: str
    source: str | None
    version: int
    heading_path: list[str]
    text: str
    char_start: int
    char_end: int
    vector_similarity: float | None = None
    text_score: float | None = None
    lane_ranks: dict[str, int] = field(default_factory=dict)

    @property
    def document_id(self) -> str:
        return self.source_id

    def excerpt(self, limit: int = 2000) -> str:
        if len(self.text) <= limit:
            return self.text
        return self.text[:limit] + TRUNCATION_MARK
