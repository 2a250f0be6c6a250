"""Output shapes shared by the surfaces: search results and answers as JSON-ready dicts and as the
text blocks of knowledge_search_and_ask.txt (search results kept under 50,000 characters).

An excerpt of a paged original (a PDF, a scan) carries its 1-based page: `"page"` in the structured
shapes (absent for every other source, like `source`), and in the text blocks a `page: N` line of its
own after the document's lines, which stay exactly as the document gives them. A deck's excerpt
carries `"slide"` (a `slide: N` line), a workbook's `"sheet"` and `"rows"` ([first, last]; a
`sheet: NAME, rows A-B` line), and an excerpt of a page read by OCR `"ocr": true` (structured only)
(rag/ingest/layout.py)."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from rag.retrieve.types import Hit

if TYPE_CHECKING:
    from rag.service.query.kb_search import KnowledgeBaseSearch
    from rag.synthesize.types import Answer, Source

MAX_RESPONSE_CHARS = 50_000
NO_RESULTS = "No results found."


def hit_payload(hit: Hit, excerpt_chars: int = 2000) -> dict[str, Any]:
    payload: dict[str, Any] = {
        "source_id": hit.source_id,
        "document_id": hit.source_id,
        "title": hit.title,
        "score": round(hit.score, 6),
        "retrievers": list(hit.retrievers),
        "excerpt": hit.excerpt(excerpt_chars),
    }
    if hit.source:  # a label the connector never recorded is absent, not null
        payload["source"] = hit.source
    if hit.page is not None:  # only a paged original's excerpt has a page
        payload["page"] = hit.page
    payload.update(locator_fields(hit))
    if hit.url:  # a source's document: where its original lives (never a line of the text block)
        payload["url"] = hit.url
    return payload


def locator_fields(hit: Hit) -> dict[str, Any]:
    """What an excerpt names beyond its page, as the structured shapes carry it (slide; sheet, rows; ocr)."""
    locator = hit.locator or {}
    return {key: locator[key] for key in ("slide", "sheet", "rows", "ocr") if key in locator}


def locator_line(fields: dict[str, Any]) -> str:
    """The text blocks' line for an excerpt's page, slide or sheet ("" for none)."""
    if "page" in fields:
        return f"page: {fields['page']}\n"
    if "slide" in fields:
        return f"slide: {fields['slide']}\n"
    if "sheet" in fields:
        return f"sheet: {_sheet_words(fields)}\n"
    return ""


def _sheet_words(fields: dict[str, Any]) -> str:
    rows = fields.get("rows")
    if not rows:
        return str(fields["sheet"])
    first, last = rows
    return f"{fields['sheet']}, row{'s' if first != last else ''} {first}{f'-{last}' if first != last else ''}"


def hit_text(payload: dict[str, Any]) -> str:
    via = "+".join(payload["retrievers"])
    return (
        f"### {payload['title']} (score: {payload['score']:.4f}, via {via})\n"
        f"document_id: {payload['document_id']}\n{locator_line(payload)}\n{payload['excerpt']}"
    )


def _json_chars(value: object) -> int:
    """Its length as JSON at the widest (every non-ASCII character escaped), as a client may receive it."""
    return len(json.dumps(value, ensure_ascii=True))


def search_response(query: str, hits: list[Hit], excerpt_chars: int = 2000) -> tuple[dict[str, Any], str]:
    """The structured result and its text rendering, with results dropped so that each of the two
    stays under 50,000 characters (JSON escapes make the structured one the longer, often)."""
    results: list[dict[str, Any]] = []
    blocks: list[str] = []
    used = 0
    used_json = _json_chars({"query": query, "results": [], "truncated": True})
    for i, hit in enumerate(hits):
        payload = hit_payload(hit, excerpt_chars)
        block = hit_text(payload)
        trailer = len(f"\n\n[…{len(hits) - i} more results truncated]")
        if used + len(block) + 2 + trailer > MAX_RESPONSE_CHARS:
            break
        if used_json + _json_chars(payload) + 2 > MAX_RESPONSE_CHARS:
            break
        results.append(payload)
        blocks.append(block)
        used += len(block) + 2
        used_json += _json_chars(payload) + 2
    dropped = len(hits) - len(results)
    text = "\n\n".join(blocks) if blocks else NO_RESULTS
    if dropped:
        text += f"\n\n[…{dropped} more results truncated]"
    return {"query": query, "results": results, "truncated": dropped > 0}, text


def knowledge_base_search_payload(result: "KnowledgeBaseSearch", excerpt_chars: int = 2000) -> dict[str, Any]:
    """search_knowledge_base's output: query and merged results; `note` only when the workspace has
    no knowledge base, `failed_knowledge_bases` only when one failed."""
    payload: dict[str, Any] = {
        "query": result.query,
        "results": [hit_payload(h, excerpt_chars) | {"node_id": h.node_id, "kb_id": h.kb_id} for h in result.hits],
    }
    if result.note:
        payload["note"] = result.note
    if result.failed_knowledge_bases:
        payload["failed_knowledge_bases"] = [dict(kb) for kb in result.failed_knowledge_bases]
    return payload


def source_payload(source: "Source", excerpt_chars: int = 2000) -> dict[str, Any]:
    payload: dict[str, Any] = {
        "source_id": source.source_id,
        "document_id": source.document_id,
        "title": source.title,
        "score": round(source.score, 6),
    }
    if source.source:
        payload["source"] = source.source
    if source.first.page is not None:  # the page of the first cited excerpt; each excerpt has its own
        payload["page"] = source.first.page
    payload.update(locator_fields(source.first))  # its slide, or sheet and rows
    if source.first.url:
        payload["url"] = source.first.url
    payload["excerpt"] = source.first.excerpt(excerpt_chars)
    # Every cited excerpt, so a reader can find the quoted text in that version of the document.
    payload["excerpts"] = [_excerpt(hit, excerpt_chars) for hit in source.hits]
    return payload


def _excerpt(hit: Hit, excerpt_chars: int) -> dict[str, Any]:
    excerpt: dict[str, Any] = {
        "version": hit.version,
        "heading_path": list(hit.heading_path),
        "char_start": hit.char_start,
        "char_end": hit.char_end,
        "text": hit.excerpt(excerpt_chars),
    }
    if hit.page is not None:
        excerpt["page"] = hit.page
    excerpt.update(locator_fields(hit))
    return excerpt


def answer_response(answer: "Answer", excerpt_chars: int = 2000) -> tuple[dict[str, Any], str]:
    """ask_knowledge's result and its text block: the answer, then `Sources:` lines when it cites any."""
    payload = {
        "answer": answer.text,
        "sources": [source_payload(s, excerpt_chars) for s in answer.sources],
        "synthesizer": answer.synthesizer,
        "abstained": answer.abstained,
        "declined": answer.declined,  # why it abstained (rag/synthesize/declines.py), null when it answered
    }
    return payload, answer_text(answer)


def sources_text(sources: "list[Source]") -> str:
    lines = []
    for s in sources:
        lines.append(f"[{s.number}] {s.title} ({s.document_id}, score {s.score:.4f})")
        pages = source_pages(s)
        if pages:  # a line of its own under the source's, which stays as the document gives it
            lines.append(f"    page{'s' if len(pages) > 1 else ''}: {', '.join(map(str, pages))}")
        slides = list(dict.fromkeys(hit.locator["slide"] for hit in s.hits if "slide" in (hit.locator or {})))
        if slides:
            lines.append(f"    slide{'s' if len(slides) > 1 else ''}: {', '.join(map(str, slides))}")
        sheets = list(dict.fromkeys(_sheet_words(locator_fields(hit)) for hit in s.hits if "sheet" in (hit.locator or {})))
        if sheets:
            lines.append(f"    sheet{'s' if len(sheets) > 1 else ''}: {'; '.join(sheets)}")
    return "Sources:\n" + "\n".join(lines)


def source_pages(source: "Source") -> list[int]:
    """The pages of a source's cited excerpts, in citation order, each once."""
    return list(dict.fromkeys(hit.page for hit in source.hits if hit.page is not None))


def answer_text(answer: "Answer") -> str:
    if not answer.sources:
        return answer.text
    return f"{answer.text}\n\n{sources_text(answer.sources)}"
