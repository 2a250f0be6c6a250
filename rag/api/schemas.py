"""Request and response bodies of /v1/search and /v1/ask: the fields of the MCP tools
search_knowledge and ask_knowledge (knowledge_search_and_ask.txt), plus `kb`, and for ask a
conversation and streaming.

The bounds here document what the service enforces (its constants, not new numbers); the service
checks every argument again, so the two cannot disagree on what is accepted.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from rag.service.core import MAX_QUERY_CHARS
from rag.synthesize.conversation import MAX_HISTORY_MESSAGES

QUERY = Field(
    min_length=1, max_length=MAX_QUERY_CHARS,
    description=f"The search text or question: a non-blank string of at most {MAX_QUERY_CHARS} characters.",
)
KB = Field(
    None, min_length=1, max_length=255,
    description="One knowledge base by name (as GET /v1/models lists them; `default` is the default one). "
    "Default: every knowledge base the token can see.",
)


class Strict(BaseModel):
    """Unknown fields are refused (422), so a misspelt option never passes silently."""

    model_config = ConfigDict(extra="forbid")


class SearchRequest(Strict):
    query: str = QUERY
    # search_knowledge's own rule for odd values: out of range is clamped, non-numeric falls back
    # to 10. So any JSON value is accepted here, and rag.service.core.clamp_limit reads it.
    limit: Any = Field(
        10, description="Maximum results, 1 to 25. Values outside the range are clamped; a non-numeric value "
        "falls back to the default (10).", examples=[5],
    )
    kb: str | None = KB


class HistoryMessage(Strict):
    role: Literal["user", "assistant", "system"]
    content: str


class AskRequest(Strict):
    query: str = QUERY
    kb: str | None = KB
    history: list[HistoryMessage] | None = Field(
        None, max_length=MAX_HISTORY_MESSAGES,
        description="The earlier conversation, oldest first; the question is rewritten into a standalone one "
        "before retrieval. At most 50 messages and 40,000 characters; system messages are ignored.",
    )
    stream: bool = Field(
        False, description="Answer as Server-Sent Events: `delta` events with text, then `sources`, then `done` "
        "(or `error`). `Accept: text/event-stream` asks for the same.",
    )


class SearchHit(BaseModel):
    source_id: str = Field(description="The knowledge id (provider:org:resource:item). Not a node id.")
    document_id: str = Field(description="The same value as source_id, kept for callers that already read it.")
    title: str
    score: float = Field(description="The fused ranking score across the retrieval lanes.")
    retrievers: list[str] = Field(description='Which lanes found the excerpt, e.g. ["vector", "text"].')
    excerpt: str = Field(description="Up to 2,000 characters, then […truncated].")
    source: str | None = Field(None, description="Where it came from, in the connector's words; absent when none.")


class SearchResponse(BaseModel):
    query: str
    results: list[SearchHit]
    truncated: bool = Field(description="true when results were dropped to keep the response under 50,000 characters.")
    text: str = Field(description="The text block of search_knowledge: each result as `### <title> (score: …)`.")


class CitedExcerpt(BaseModel):
    version: int
    heading_path: list[str]
    char_start: int
    char_end: int
    text: str


class AnswerSource(BaseModel):
    source_id: str
    document_id: str
    title: str
    score: float
    source: str | None = None
    excerpt: str
    excerpts: list[CitedExcerpt] = Field(description="Every cited excerpt of this document, where it sits in which version.")


class AskResponse(BaseModel):
    answer: str = Field(description="The answer, citing its sources as [n].")
    sources: list[AnswerSource] = Field(description="The cited sources in citation order; empty when nothing was relevant.")
    synthesizer: str = Field(description="`extractive`, or `llm:<model>`.")
    abstained: bool = Field(description="true when the knowledge base had nothing on the question.")
    text: str = Field(description="The text block of ask_knowledge: the answer, then `Sources:` lines.")
