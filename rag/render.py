"""Output shapes shared by the surfaces: search results as JSON-ready dicts and as the text block
of knowledge_search_and_ask.txt, kept under 50,000 characters."""

from __future__ import annotations

from typing import Any

from rag.retrieve.types import Hit

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
    return payload


def hit_text(payload: dict[str, Any]) -> str:
    via = "+".join(payload["retrievers"])
    return (
        f"### {payload['title']} (score: {payload['score']:.4f}, via {via})\n"
        f"document_id: {payload['document_id']}\n\n{payload['excerpt']}"
    )


def search_response(query: str, hits: list[Hit], excerpt_chars: int = 2000) -> tuple[dict[str, Any], str]:
    """The structured result and its text rendering, with results dropped past 50,000 characters."""
    results: list[dict[str, Any]] = []
    blocks: list[str] = []
    used = 0
    for i, hit in enumerate(hits):
        payload = hit_payload(hit, excerpt_chars)
        block = hit_text(payload)
        trailer = len(f"\n\n[…{len(hits) - i} more results truncated]")
        if used + len(block) + 2 + trailer > MAX_RESPONSE_CHARS:
            break
        results.append(payload)
        blocks.append(block)
        used += len(block) + 2
    dropped = len(hits) - len(results)
    text = "\n\n".join(blocks) if blocks else NO_RESULTS
    if dropped:
        text += f"\n\n[…{dropped} more results truncated]"
    return {"query": query, "results": results, "truncated": dropped > 0}, text
