"""The editor's ask page: a cited answer, whole without script (`POST /ask`) or streamed in as
Server-Sent Events (`POST /ask/stream`), each `[n]` a link to the excerpt it cites."""

from __future__ import annotations

from typing import Any, Iterator

from fastapi import APIRouter, Form, Request
from fastapi.responses import HTMLResponse, JSONResponse, Response

from rag.api.errors import status_of
from rag.api.sse import event_stream, sse
from rag.errors import RagError
from rag.service.identity.sessions import SIGNED_OUT
from rag.synthesize import declines
from rag.synthesize.types import Answer, AnswerEvent
from rag.web.answers import render_answer
from rag.web.caller import CSRF_REFUSED, Caller, SignInNeeded, original_link, templates

router = APIRouter(include_in_schema=False)

# The answer's code blocks, lists and paragraphs as HTML, each `[n]` a link: rag/web/answers.py.
templates.env.filters["answer_html"] = render_answer


@router.get("/ask")
def ask_form(request: Request, kb: str | None = None) -> HTMLResponse:
    return Caller(request).show("ask.html", answer=None, query="", kb=kb or "")


@router.post("/ask")
def ask(request: Request, query: str = Form(""), kb: str = Form(""), csrf: str = Form("")) -> Response:
    """Without script: the whole answer at once, on the same page the script fills as it streams."""
    caller = Caller(request)
    try:
        caller.check_csrf(csrf)
        answer = caller.svc.ask(caller.principal, query, kb_name=kb or None)
    except RagError as exc:
        if exc.message == CSRF_REFUSED:
            return caller.show("error.html", 403, message=exc.message)
        caller.flash("error", exc.message)
        return caller.show("ask.html", answer=None, query=query, kb=kb)
    return caller.show("ask.html", answer=answer_payload(answer), query=query, kb=kb)


@router.post("/ask/stream")
async def ask_stream(request: Request) -> Response:
    """The answer as Server-Sent Events (delta, sources, done, or error), for the page's script."""
    import anyio.to_thread

    try:
        body = await request.json()
    except ValueError:
        body = None
    if not isinstance(body, dict):
        return JSONResponse({"error": {"message": "send a JSON object: {\"query\", \"kb\"}"}}, 400)

    def start() -> Iterator[AnswerEvent] | JSONResponse:
        try:
            caller = Caller(request)
            caller.check_csrf(request.headers.get("x-csrf-token"))
            kb = body.get("kb") or None
            return caller.svc.ask_stream(caller.principal, body.get("query"), kb_name=kb)
        except SignInNeeded:
            return JSONResponse({"error": {"message": SIGNED_OUT}}, 401)
        except RagError as exc:
            return JSONResponse({"error": {"message": exc.message}}, status_of(exc))

    events = await anyio.to_thread.run_sync(start)
    if isinstance(events, JSONResponse):
        return events
    ping = request.app.state.service.settings.http.ping_seconds
    return event_stream(_stream(events), lambda error: sse(error, "error"), ping, headers={"Cache-Control": "no-store"})


def _stream(events: Iterator[AnswerEvent]) -> Iterator[str]:
    for event in events:
        if event.kind == "delta":
            yield sse({"text": event.text}, "delta")
        elif event.kind == "done" and event.answer is not None:
            yield sse(answer_payload(event.answer), "done")


def answer_payload(answer: Answer) -> dict[str, Any]:
    """An answer as the page shows it: its text, and each source in citation order with its score,
    its lanes, a link to each cited excerpt inside its document version, and the original's URL."""
    return {
        "answer": answer.text, "abstained": answer.abstained,
        "declined": answer.declined, "declined_reason": declines.describe(answer.declined),
        "sources": [
            {
                "number": source.number, "title": source.title, "node_id": source.first.node_id,
                "source": source.source, "score": round(source.score, 4),
                "lanes": sorted({lane for hit in source.hits for lane in hit.retrievers}),
                "link": _excerpt_link(source.hits[0]),
                # A source's document: where its original lives, and `original` only when it may be a link.
                "url": source.first.url, "original": original_link(source.first.url),
                "excerpts": [{"version": hit.version, "char_start": hit.char_start, "char_end": hit.char_end,
                              "heading": " › ".join(hit.heading_path), "link": _excerpt_link(hit)}
                             for hit in source.hits],
            }
            for source in answer.sources
        ],
    }


def _excerpt_link(hit: Any) -> str:
    return f"/documents/{hit.node_id}?version={hit.version}&hl={hit.char_start}-{hit.char_end}#hl"
