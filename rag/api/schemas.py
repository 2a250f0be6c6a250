"""Request and response bodies of /v1/search and /v1/ask: the fields of the MCP tools
search_knowledge and ask_knowledge (knowledge_search_and_ask.txt), plus `kb`, and for ask a
conversation and streaming.

The request bodies are built from the operations' declarations (rag/service/arguments.py), as the
MCP tools' input schemas are; they state the service's bounds and leave the checking to it.
"""

from __future__ import annotations

from pydantic import BaseModel, Field

from rag.api.arguments import request_body
from rag.service.arguments import ASK, SEARCH

SearchRequest = request_body("SearchRequest", SEARCH, "search_knowledge's arguments, and `kb`.")
AskRequest = request_body(
    "AskRequest", ASK, "ask_knowledge's arguments, `kb`, a conversation, and streaming.",
    stream=(bool, Field(False, description="Answer as Server-Sent Events: `delta` events with text, then `sources`, "
                        "then `done` (or `error`). `Accept: text/event-stream` asks for the same.")),
)


_URL = ("Where the original lives (a website's page, a file in its repository, an object in its bucket), for a "
        "document a source brought; absent for every other document.")
_PAGE = ("For a PDF: the 1-based physical page the excerpt lies on (its index in the file, not the printed "
         "number). Absent for every other source.")


_SLIDE = "For a PowerPoint deck: the 1-based slide the excerpt lies on. Absent otherwise."
_SHEET = "For a spreadsheet or CSV file: the sheet the excerpt lies on. Absent otherwise."
_ROWS = "For a spreadsheet: [first, last], the sheet's own numbers of the rows the excerpt covers. Absent otherwise."
_OCR = "true when the excerpt's page was read by OCR (a scan or an image). Absent otherwise."


class SearchHit(BaseModel):
    source_id: str = Field(description="The knowledge id (provider:org:resource:item). Not a node id.")
    document_id: str = Field(description="The same value as source_id, kept for callers that already read it.")
    title: str
    score: float = Field(description="The fused ranking score across the retrieval lanes.")
    retrievers: list[str] = Field(description='Which lanes found the excerpt, e.g. ["vector", "text"].')
    excerpt: str = Field(description="Up to 2,000 characters, then […truncated].")
    source: str | None = Field(None, description="Where it came from, in the connector's words; absent when none.")
    page: int | None = Field(None, ge=1, description=_PAGE)
    slide: int | None = Field(None, ge=1, description=_SLIDE)
    sheet: str | None = Field(None, description=_SHEET)
    rows: list[int] | None = Field(None, min_length=2, max_length=2, description=_ROWS)
    ocr: bool | None = Field(None, description=_OCR)
    url: str | None = Field(None, description=_URL)


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
    page: int | None = Field(None, ge=1, description=_PAGE)
    slide: int | None = Field(None, ge=1, description=_SLIDE)
    sheet: str | None = Field(None, description=_SHEET)
    rows: list[int] | None = Field(None, min_length=2, max_length=2, description=_ROWS)
    ocr: bool | None = Field(None, description=_OCR)


class AnswerSource(BaseModel):
    source_id: str
    document_id: str
    title: str
    score: float
    source: str | None = None
    page: int | None = Field(None, ge=1, description="For a PDF: the page of the first cited excerpt; absent otherwise.")
    slide: int | None = Field(None, ge=1, description=_SLIDE)
    sheet: str | None = Field(None, description=_SHEET)
    rows: list[int] | None = Field(None, min_length=2, max_length=2, description=_ROWS)
    ocr: bool | None = Field(None, description=_OCR)
    url: str | None = Field(None, description=_URL)
    excerpt: str
    excerpts: list[CitedExcerpt] = Field(description="Every cited excerpt of this document, where it sits in which version.")


class AskResponse(BaseModel):
    answer: str = Field(description="The answer, citing its sources as [n].")
    sources: list[AnswerSource] = Field(description="The cited sources in citation order; empty when nothing was relevant.")
    synthesizer: str = Field(description="`extractive`, or `llm:<model>`.")
    abstained: bool = Field(description="true when the knowledge base had nothing on the question.")
    declined: str | None = Field(None, description=(
        "Why it abstained, by name: off_topic, no_sentences, no_sentence_answers, subject_not_covered, "
        "other_period, model_declined (docs/architecture.md); null when it answered."))
    text: str = Field(description="The text block of ask_knowledge: the answer, then `Sources:` lines.")
