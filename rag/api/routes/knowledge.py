"""POST /v1/search and POST /v1/ask: search_knowledge and ask_knowledge over HTTP, through the same
service calls as the MCP tools and the CLI (so every bound and message is the service's)."""

from __future__ import annotations

from typing import Annotated, Iterator

from fastapi import APIRouter, Header
from fastapi.responses import JSONResponse, StreamingResponse
from starlette.concurrency import run_in_threadpool

from rag.api.concurrency import acquire_async, caller_key, stream_limiter
from rag.api.auth import Caller, Service
from rag.api.compute import compute
from rag.api.errors import ERROR_RESPONSES
from rag.api.schemas import AskRequest, AskResponse, SearchRequest, SearchResponse
from rag.api.sse import event_stream, json_data, ref, sse, stream_doc, wants_stream
from rag.render import answer_response, search_response, source_payload
from rag.service.arguments import SEARCH
from rag.synthesize.types import AnswerEvent

router = APIRouter(prefix="/v1", tags=["search and answers"], responses=ERROR_RESPONSES)

_SSE_DOC = (
    "With `stream: true` (or `Accept: text/event-stream`): `event: delta` (`{\"text\"}`) as the answer grows, "
    "`event: sources` (`{\"sources\"}`), then `event: done` with the whole response body; a failure after the "
    "first event is `event: error` (`{\"error\"}`), and the stream ends."
)
_EVENTS = {
    "delta": {"type": "object", "required": ["text"], "properties": {"text": {"type": "string"}}},
    "sources": {"type": "object", "required": ["sources"],
                "properties": {"sources": {"type": "array", "items": ref("AnswerSource")}}},
    "done": ref("AskResponse"),
    "error": ref("ErrorBody"),
}
_ASK_EVENT = {
    "type": "object", "required": ["event", "data"],
    "oneOf": [{"properties": {"event": {"const": name}, "data": json_data(schema)}} for name, schema in _EVENTS.items()],
}


@router.post("/search", response_model=SearchResponse, operation_id="search",
             summary="Hybrid search (search_knowledge)")
async def search(body: SearchRequest, svc: Service, principal: Caller) -> JSONResponse:
    """Ranked excerpts of published documents, best first, fused from the vector and full-text lanes."""
    limit = SEARCH["limit"].clamp(body.limit)  # search_knowledge's rule: clamped, never refused

    def run() -> JSONResponse:
        # `kb` as sent: the service resolves it (a missing base and one out of sight read alike)
        result = svc.search(principal, body.query, limit, kb_name=body.kb)
        payload, text = search_response(body.query, result.hits, svc.settings.retrieve.excerpt_chars)
        return JSONResponse(payload | {"text": text})

    return await compute(svc.settings.search_threads, run)  # on the compute threads (rag/api/compute.py)


@router.post(
    "/ask", response_model=AskResponse, operation_id="ask", summary="A cited answer (ask_knowledge)",
    responses={200: stream_doc(_ASK_EVENT, _SSE_DOC)},
)
async def ask(
    body: AskRequest, svc: Service, principal: Caller,
    accept: Annotated[str | None, Header()] = None,
) -> JSONResponse | StreamingResponse:
    """An answer from the published documents that cites them as [n], with its sources in citation order.
    When nothing relevant is found, the answer says so and cites nothing."""
    history = body.history  # as sent: the service checks each message
    kb = body.kb  # as sent: the service resolves it
    chars = svc.settings.retrieve.excerpt_chars
    if not wants_stream(body.stream, accept):
        def answer() -> JSONResponse:
            payload, text = answer_response(svc.ask(principal, body.query, kb_name=kb, history=history), chars)
            return JSONResponse(payload | {"text": text})

        if svc.chat_model is None:  # the extractive answer computes: on the compute threads
            return await compute(svc.settings.search_threads, answer)
        return await run_in_threadpool(answer)  # a model's answer mostly waits on the network
    # Bad input (or one stream too many) raises here, before the first event: an ordinary error response.
    release = await acquire_async(stream_limiter(svc), caller_key(principal))
    try:
        events = await run_in_threadpool(lambda: svc.ask_stream(principal, body.query, kb_name=kb, history=history))
    except BaseException:
        release()
        raise
    return event_stream(_ask_events(events, chars), lambda error: sse(error, "error"), svc.settings.http.ping_seconds,
                        on_end=release)


def _ask_events(events: Iterator[AnswerEvent], excerpt_chars: int) -> Iterator[str]:
    for event in events:
        if event.kind == "delta":
            yield sse({"text": event.text}, "delta")
        elif event.kind == "sources" and event.answer is not None:
            yield sse({"sources": [source_payload(s, excerpt_chars) for s in event.answer.sources]}, "sources")
        elif event.kind == "done" and event.answer is not None:
            payload, text = answer_response(event.answer, excerpt_chars)
            yield sse(payload | {"text": text}, "done")
