"""search_knowledge: ranked excerpts of the published documents a caller may read."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Sequence

from rag.errors import InvalidArgument
from rag.retrieve.types import Hit
from rag.service.activity import recorded
from rag.service.arguments import SEARCH_LIMIT_DEFAULT, SEARCH_LIMIT_MAX, check_query
from rag.service.checks import clamped_int
from rag.service.identity.principal import Principal

if TYPE_CHECKING:
    from rag.service.identity.access import Access
    from rag.service.activity import ActivityLog
    from rag.service.engines import Engines


def clamp_limit(value: object) -> int:
    """search_knowledge's rule for `limit`: out of range is clamped, a non-numeric value falls back
    to the default (rag/service/arguments.py declares both)."""
    return clamped_int(value, 1, SEARCH_LIMIT_MAX, SEARCH_LIMIT_DEFAULT)


@dataclass
class SearchResult:
    query: str
    hits: list[Hit] = field(default_factory=list)


def _searched(result: SearchResult) -> dict[str, int]:
    return {"results": len(result.hits), "query_chars": len(result.query)}


class Search:
    def __init__(self, access: Access, activity: ActivityLog, engines: Engines) -> None:
        self.access = access
        self.activity = activity
        self.engines = engines

    @recorded("search", target="kb_name", after=_searched)
    def search(
        self,
        principal: Principal,
        query: str,
        limit: int = SEARCH_LIMIT_DEFAULT,
        kb_name: str | None = None,
        lanes: Sequence[str] | None = None,
    ) -> SearchResult:
        """`lanes`: only these lanes of the search index (the evaluations compare them); all by default.
        Refusals are recorded too: who tried what, never the query."""
        check_query(query)
        if limit < 1:
            raise InvalidArgument("`limit` must be at least 1")
        self.access.take(principal, "search")
        retriever = self.engines.retriever
        chosen = None if lanes is None else tuple(lanes)
        question = retriever.start(query, chosen, search=True)  # the model runs while the scope is read
        scope = self.access.scope(principal, kb_name)
        hits = retriever.retrieve(question, scope, limit, lanes=chosen, diverse=True)
        return SearchResult(query=query, hits=self.access.shown_hits(principal, hits))
