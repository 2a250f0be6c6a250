"""Server-Sent Events: the framing, the guard that turns a failure in the middle of a stream into
one last event instead of a cut connection (the headers and status are long gone by then), and the
pump that sends a stream's events (`live`):

- its events are made on a thread (the service's calls block: the model, the embedder), one at a
  time, and sent as they come;
- while none comes for `HttpSettings.ping_seconds`, a comment line `: ping` keeps the connection
  from looking dead to a proxy or a client;
- a client that goes away stops the work done for it: the events' iterator is closed as soon as
  the event being made is there, which closes the model's stream (rag/models/llm.py), so no model
  call goes on for a closed stream;
- once the server is stopping (SIGTERM, `STOPPING`), the stream ends with a last event saying so
  (503 `unavailable`, "the server is stopping"), and its iterator is closed the same way."""

from __future__ import annotations

import asyncio
import json
import logging
import threading
from typing import Any, AsyncIterator, Callable, Iterator

import anyio.to_thread

from fastapi.responses import StreamingResponse

from rag.api.errors import UNEXPECTED, error_payload, rag_error_payload
from rag.errors import RagError
from rag.shutdown import STOPPING

log = logging.getLogger("rag.api")

STOPPED = "the server is stopping; ask again in a moment"
_END = object()
_STOP_CHECK_SECONDS = 0.25

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


class _Pull:
    """One event at a time from a blocking iterator, on whatever thread asks; `close` (any thread)
    waits for an event being made, then closes the iterator: a generator cannot be closed while it
    runs."""

    def __init__(self, events: Iterator[str]) -> None:
        self.events = events
        self.lock = threading.Lock()
        self.closed = False

    def next(self) -> Any:
        with self.lock:
            return _END if self.closed else next(self.events, _END)

    def close(self) -> None:
        with self.lock:
            if not self.closed:
                self.closed = True
                close = getattr(self.events, "close", None)
                if callable(close):
                    close()

    def close_soon(self) -> None:
        """Close from a thread of its own, so that neither the event loop nor the caller waits."""
        threading.Thread(target=self._close_quietly, name="rag-stream-close", daemon=True).start()

    def _close_quietly(self) -> None:
        try:
            self.close()
        except Exception:  # noqa: BLE001 - the stream is gone; what closing it raised is only logged
            log.warning("closing an abandoned stream failed", exc_info=True)


async def live(events: Iterator[str], on_error: Callable[[dict[str, Any]], str],
               ping_seconds: float, on_end: Callable[[], None] | None = None) -> AsyncIterator[str]:
    """The events of `guarded(events, on_error)` as they come, with pings while none does, ended by
    a last event when the server stops, and closed when the client goes away (see above)."""
    pull = _Pull(guarded(events, on_error))
    waiting: asyncio.Future | None = None
    try:
        while True:
            if STOPPING.is_set():  # checked before each event too: a model that streams fast never waits
                yield on_error(error_payload(503, STOPPED, "unavailable"))
                return
            if waiting is None:
                waiting = asyncio.ensure_future(anyio.to_thread.run_sync(pull.next))
            quiet = 0.0
            while not waiting.done():
                if STOPPING.is_set():
                    break
                done, _ = await asyncio.wait({waiting}, timeout=_STOP_CHECK_SECONDS)
                if not done:
                    quiet += _STOP_CHECK_SECONDS
                    if quiet >= ping_seconds:
                        quiet = 0.0
                        yield ": ping\n\n"
            if not waiting.done():
                continue  # stopping: said at the top of the loop
            event, waiting = waiting.result(), None
            if event is _END:
                pull.closed = True  # run to its end: nothing to close
                return
            yield event
    finally:  # the end, a disconnect (cancelled) or the stop: what is being made is let go
        if waiting is not None or not pull.closed:
            pull.close_soon()
        if on_end is not None:
            on_end()


def event_stream(events: Iterator[str], on_error: Callable[[dict[str, Any]], str], ping_seconds: float,
                 headers: dict[str, str] | None = None, on_end: Callable[[], None] | None = None) -> StreamingResponse:
    """The response of an event stream: `live` (a blocking iterator's events, made on threads so
    they never block the event loop); `on_end` runs once it ended, however it did."""
    return StreamingResponse(live(events, on_error, ping_seconds, on_end), media_type=EVENT_STREAM,
                             headers=headers or _HEADERS)


def wants_stream(flag: bool, accept: str | None) -> bool:
    return flag or EVENT_STREAM in (accept or "")
