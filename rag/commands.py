"""The CLI's commands as operations on a service, so `rag search`, `rag ask`, `rag token …` and
`rag ingest` print the same thing whether they run in their own process or a running `rag serve`
runs them (POST /local/<operation>, rag/api/routes/local.py, called by rag/client.py).

Each operation yields JSON-ready events; the CLI renders them. Nothing here prints, and nothing
here is heavy to import: the service is imported by whoever opens it.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterator

if TYPE_CHECKING:
    from rag.service import KnowledgeService

Events = Iterator[dict[str, Any]]


def _principal(svc: "KnowledgeService", workspace: str):
    from rag.service import Principal

    svc.ensure_workspace(workspace)
    return Principal.local_admin(workspace)


def search(svc: "KnowledgeService", query: str, limit: str, kb: str | None, workspace: str) -> Events:
    from rag.render import search_response
    from rag.service.search import clamp_limit

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


def ingest(svc: "KnowledgeService", path: str, workspace: str, kb: str,
           progress: Callable[[str, int, int], None] | None = None) -> Events:
    """The report; `progress` only in the CLI's own process (a server's caller sees no bar)."""
    report = svc.ingest_directory(_principal(svc, workspace), Path(path), kb, progress or _no_progress)
    yield {"summary": report.summary(), "failed": report.failed, "skipped": report.skipped,
           "warnings": report.warnings}


def _no_progress(stage: str, done: int, total: int) -> None:
    return None


OPERATIONS: dict[str, Callable[..., Events]] = {
    "search": search, "ask": ask, "token_create": token_create, "token_list": token_list,
    "token_revoke": token_revoke, "ingest": ingest,
}


def exit_code(exc: Exception) -> int:
    """The CLI's exit code for a RagError: 3 when another process holds the store, 2 for a bad
    argument or something missing, 1 otherwise."""
    from rag.errors import InvalidArgument, NotFound, StoreLocked

    return 3 if isinstance(exc, StoreLocked) else 2 if isinstance(exc, (InvalidArgument, NotFound)) else 1
