"""The CLI's commands as operations on a service, so `rag search`, `rag ask`, `rag token …` and
`rag ingest` print the same thing whether they run in their own process or a running `rag serve`
runs them (POST /local/<operation>, rag/api/routes/local.py, called by rag/client.py).

Each operation yields JSON-ready events; the CLI renders them. Nothing here prints, and nothing
here is heavy to import: the service is imported by whoever opens it.
"""

from __future__ import annotations

import codecs
import queue
import threading
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, Callable, Generator, Iterator, TypeVar

from rag.errors import Unavailable
from rag.shutdown import STOPPING

if TYPE_CHECKING:
    from rag.service import KnowledgeService

INGEST_STOPPED = ("the server stopped before the ingest ended; run the command again: the files already stored "
                  "are kept, and it goes on with the rest")

Events = Iterator[dict[str, Any]]
Progress = Callable[[str, int, int], None]
T = TypeVar("T")


def _principal(svc: "KnowledgeService", workspace: str):
    from rag.service import Principal

    svc.ensure_workspace(workspace)
    return Principal.local_admin(workspace)


def search(svc: "KnowledgeService", query: str, limit: str, kb: str | None, workspace: str) -> Events:
    from rag.render import search_response
    from rag.service.query.search import clamp_limit

    result = svc.search(_principal(svc, workspace), query, clamp_limit(limit), kb_name=kb)
    payload, text = search_response(query, result.hits, svc.settings.retrieve.excerpt_chars)
    yield {"payload": payload, "text": text}


def ask(svc: "KnowledgeService", question: str, kb: str | None, workspace: str, history: Any,
        json_out: bool) -> Events:
    """`{"payload"}` for --json; else the answer's `{"delta"}`s as they come, then `{"tail"}`
    (the sources block, when it cites any)."""
    from rag.render import answer_response, sources_text

    principal = _principal(svc, workspace)
    if json_out:
        answer = svc.ask(principal, question, kb_name=kb, history=history)
        yield {"payload": answer_response(answer, svc.settings.retrieve.excerpt_chars)[0]}
        return
    for event in svc.ask_stream(principal, question, kb_name=kb, history=history):
        if event.kind == "delta":
            yield {"delta": event.text}
        elif event.kind == "done" and event.answer is not None:
            yield {"tail": f"\n\n{sources_text(event.answer.sources)}" if event.answer.sources else ""}


def token_create(svc: "KnowledgeService", workspace: str, role: str, scopes: list[str], access: str | None,
                 folders: list[str], agent: bool, expires: int | None, name: str | None,
                 principal: str | None) -> Events:
    secret, info = svc.create_token(workspace, role, scopes, access, folders, agent, expires,
                                    name=name, principal_id=principal)
    yield {"secret": secret, "token": info.payload()}


def token_list(svc: "KnowledgeService", workspace: str | None) -> Events:
    yield {"tokens": [t.payload() | {"active": t.active} for t in svc.list_tokens(workspace)]}


def token_revoke(svc: "KnowledgeService", token_id: str) -> Events:
    yield {"token_id": svc.revoke_token(token_id).token_id}


def ingest(svc: "KnowledgeService", path: str, workspace: str, kb: str, progress: Progress | None = None) -> Events:
    """The report, after `{"progress"}` events when a server runs it (see `_working`)."""
    principal = _principal(svc, workspace)
    # Run by a server (no `progress` here): it ends between files once the server is told to stop.
    stop = STOPPING if progress is None else None
    report = yield from _working(progress, lambda step, emit: svc.ingest_directory(principal, Path(path), kb, step,
                                                                                    stop))
    if not report.complete:
        raise Unavailable(INGEST_STOPPED)
    yield {"summary": report.summary(), "failed": report.failed, "skipped": report.skipped,
           "warnings": report.warnings}


def source_add(svc: "KnowledgeService", workspace: str, name: str, kind: str, config: dict, kb: str | None,
               folder: str, every: str | None, secret: str | None) -> Events:
    info = svc.add_source(_principal(svc, workspace), name, kind, config, kb, folder, every, secret)
    yield {"source": info.payload()}


def source_list(svc: "KnowledgeService", workspace: str) -> Events:
    yield {"sources": [info.payload() for info in svc.list_sources(_principal(svc, workspace))]}


def source_show(svc: "KnowledgeService", workspace: str, name: str) -> Events:
    yield {"source": svc.show_source(_principal(svc, workspace), name).payload()}


def source_pause(svc: "KnowledgeService", workspace: str, name: str, paused: bool) -> Events:
    yield {"source": svc.set_source_paused(_principal(svc, workspace), name, paused).payload()}


def source_remove(svc: "KnowledgeService", workspace: str, name: str, keep_documents: bool) -> Events:
    yield {"removed": svc.remove_source(_principal(svc, workspace), name, keep_documents)}


def source_sync(svc: "KnowledgeService", workspace: str, name: str, progress: Progress | None = None) -> Events:
    """The source synced now; its report, after `{"progress"}` events when a server runs it."""
    principal = _principal(svc, workspace)
    info, report = yield from _working(progress, lambda step, emit: svc.sync_source(principal, name, step))
    yield {"source": info.payload(), "summary": report.summary(), "failed": report.failed,
           "skipped": report.skipped, "warnings": report.warnings, "error": report.error,
           "timings": {stage: round(seconds, 3) for stage, seconds in report.timings.items()}}


def export(svc: "KnowledgeService", file: str, kb: list[str], workspace: str | None,
           progress: Progress | None = None, stream: IO[bytes] | None = None) -> Events:
    """`rag export`: the archive written to `file`, or for "-" to `stream` (the CLI's standard
    output) or, run by a server, as `{"data"}` events of its text; then `{"report"}`."""
    from rag.service import Principal

    principal = Principal.local_admin(workspace or svc.settings.default_workspace)

    def work(step: Progress, emit: Callable[[dict[str, Any]], None]):
        if file != "-" or stream is not None:
            return svc.export_archive(principal, stream or Path(file), kb, workspace, step)
        events = _EventStream(emit)
        report = svc.export_archive(principal, events, kb, workspace, step)
        events.flush()
        return report

    report = yield from _working(progress, work)
    yield {"report": report.summary()}


def import_(svc: "KnowledgeService", file: str, progress: Progress | None = None) -> Events:
    """`rag import`: the archive at `file` loaded into the store; then `{"report"}`."""
    from rag.service import Principal

    principal = Principal.local_admin(svc.settings.default_workspace)
    report = yield from _working(progress, lambda step, emit: svc.import_archive(principal, Path(file), step))
    yield {"report": report.summary()}


def _working(progress: Progress | None, work: Callable[[Progress, Callable[[dict[str, Any]], None]], T]
             ) -> Generator[dict[str, Any], None, T]:
    """work(progress, emit) and its result. In the CLI's own process `progress` draws the bars and
    nothing is emitted. Run by a server for a CLI (no `progress`), the work runs in a thread and
    this yields what it reports as it comes: `{"progress": [stage, done, total]}` (the latest of
    each stage when several wait) and the events it emits, for the CLI to draw and print."""
    if progress is not None:
        return work(progress, _no_events)
    events: queue.Queue = queue.Queue()
    outcome: dict[str, Any] = {}

    def run() -> None:
        try:
            outcome["result"] = work(lambda stage, done, total: events.put({"progress": [stage, done, total]}),
                                     events.put)
        except BaseException as exc:  # noqa: BLE001 - raised again below, in the caller's thread
            outcome["error"] = exc
        finally:
            events.put(None)

    thread = threading.Thread(target=run, name="rag-local-command", daemon=True)
    thread.start()
    finished = False
    while not finished:
        waiting = [events.get()]
        while not events.empty():
            waiting.append(events.get_nowait())
        finished = waiting[-1] is None
        yield from _coalesced([e for e in waiting if e is not None])
    thread.join()
    if "error" in outcome:
        raise outcome["error"]
    return outcome["result"]


def _coalesced(events: list[dict[str, Any]]) -> Events:
    """The events in order, a stage's progress only where its last report is (the bar jumps there)."""
    last = {e["progress"][0]: i for i, e in enumerate(events) if "progress" in e}
    for i, event in enumerate(events):
        if "progress" not in event or last[event["progress"][0]] == i:
            yield event


def _no_events(event: dict[str, Any]) -> None:
    raise AssertionError("only work run for a server emits events")


class _EventStream:
    """A binary stream whose writes become `{"data": text}` events of about 64 KB (the archive is
    UTF-8 text; a character split between two writes waits for its last byte)."""

    SIZE = 65536

    def __init__(self, emit: Callable[[dict[str, Any]], None]) -> None:
        self._emit = emit
        self._decoder = codecs.getincrementaldecoder("utf-8")()
        self._buffer = bytearray()

    def write(self, data: bytes) -> int:
        self._buffer += data
        if len(self._buffer) >= self.SIZE:
            self._send(final=False)
        return len(data)

    def flush(self) -> None:
        self._send(final=True)

    def _send(self, final: bool) -> None:
        text = self._decoder.decode(bytes(self._buffer), final=final)
        self._buffer.clear()
        if text:
            self._emit({"data": text})


# Parameters the CLI passes only to an operation it runs in its own process.
IN_PROCESS = frozenset({"svc", "progress", "stream"})

OPERATIONS: dict[str, Callable[..., Events]] = {
    "search": search, "ask": ask, "token_create": token_create, "token_list": token_list,
    "token_revoke": token_revoke, "ingest": ingest, "export": export, "import": import_,
    "source_add": source_add, "source_list": source_list, "source_show": source_show, "source_pause": source_pause,
    "source_remove": source_remove, "source_sync": source_sync,
}


def exit_code(exc: Exception) -> int:
    """The CLI's exit code for a RagError: 3 when another process holds the store, 2 for a bad
    argument or something missing, 1 otherwise."""
    from rag.errors import InvalidArgument, NotFound, StoreLocked

    return 3 if isinstance(exc, StoreLocked) else 2 if isinstance(exc, (InvalidArgument, NotFound)) else 1
