"""Server-Sent Events: the framing, and the guard that turns a failure in the middle of a stream
into one last event instead of a cut connection (the headers and status are long gone by then)."""

from __future__ import annotations

import json
import logging
from typing import Any, Callable, Iterator

from fastapi.responses import StreamingResponse

from rag.api.errors import UNEXPECTED, error_payload, rag_error_payload
from rag.errors import RagError

log = logging.getLogger("rag.api")

EVENT_STREAM = "text/event-stream"
# No proxy buffering and no caching: each event must reach the client as it is made.
_HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}


def json_data(schema: dict[str, Any]) -> dict[str, Any]:
    """The schema of an event's `data`: a JSON text whose value matches `schema`."""
    return {"type": "string", "contentMediaType": "application/json", "contentSchema": schema}


def stream_doc(event_schema: dict[str, Any], description: str) -> dict[str, Any]:
    """An OpenAPI response entry for an event stream: `itemSchema` (OpenAPI 3.2's word for it)
    describes each event, as `{"event", "data"}`."""
    return {"content": {EVENT_STREAM: {"itemSchema": event_schema}}, "description": description}


def ref(name: str) -> dict[str, str]:
    return {"$ref": f"#/components/schemas/{name}"}


def sse(data: Any, event: str | None = None) -> str:
    """One event. JSON escapes newlines, so `data` is always a single line."""
    head = f"event: {event}\n" if event else ""
    return f"{head}data: {json.dumps(data, ensure_ascii=False, separators=(',', ':'))}\n\n"


def guarded(events: Iterator[str], on_error: Callable[[dict[str, Any]], str]) -> Iterator[str]:
    """The events, then, if producing them fails, `on_error(error payload)` and the end."""
    try:
        yield from events
    except RagError as exc:
        log.warning("stream ended by %s: %s", exc.code, exc.message)
        yield on_error(rag_error_payload(exc))
    except Exception:  # noqa: BLE001 - a stream must end with an event, never with a stack trace
        log.exception("unexpected error in a stream")
        yield on_error(error_payload(500, UNEXPECTED, "error"))


def event_stream(events: Iterator[str]) -> StreamingResponse:
    """A sync iterator: Starlette pulls each event in its threadpool, so the service's blocking
    calls (the model, the embedder) never block the event loop."""
    return StreamingResponse(events, media_type=EVENT_STREAM, headers=_HEADERS)


def wants_stream(flag: bool, accept: str | None) -> bool:
    return flag or EVENT_STREAM in (accept or "")
