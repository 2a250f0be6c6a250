"""The MCP outputs of knowledge_search_and_ask.txt's tools, built on the shared renderings in
rag/render.py (the same text blocks `rag search` and `rag ask` print).

The document fixes the structured output as `{"results", "truncated"}` and `{"answer",
"sources"}`, each source with source_id, document_id, title, score and source (and `page` for a
PDF's excerpt: issue 18's page-level citations; `slide`, `sheet` and `rows`, `ocr` for a deck's, a
workbook's, a scan's, issue 32; `url` for a document a source brought, issue 29;
each absent otherwise; `declined`, the reason an answer declined, issue 30, absent when it
answers); the shared payloads carry more for the CLI and the HTTP API (the query,
cited spans, the synthesizer), which is left out here so the tool says exactly what its document says.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rag.mcp.spec import Output
from rag.render import answer_response, search_response

if TYPE_CHECKING:
    from rag.retrieve.types import Hit
    from rag.synthesize.types import Answer

SOURCE_FIELDS = ("source_id", "document_id", "title", "score", "source", "page", "slide", "sheet", "rows", "ocr", "url")


def search_knowledge_output(query: str, hits: list[Hit], excerpt_chars: int) -> Output:
    payload, text = search_response(query, hits, excerpt_chars)
    return Output({"results": payload["results"], "truncated": payload["truncated"]}, text)


def ask_knowledge_output(answer: Answer, excerpt_chars: int) -> Output:
    payload, text = answer_response(answer, excerpt_chars)
    sources: list[dict[str, Any]] = [
        {key: source[key] for key in SOURCE_FIELDS if key in source} for source in payload["sources"]
    ]
    structured: dict[str, Any] = {"answer": payload["answer"], "sources": sources}
    if answer.declined:
        structured["declined"] = answer.declined  # an added field, like `url`; the text block is the seed's
    return Output(structured, text)
