"""The editor's Sources page: each source the signed-in person sees (kind, target, schedule, state,
the last sync's outcome, counts, error and first failures), and for those who manage sources the
"Sync now", "Pause" and "Resume" buttons.

As everywhere in the editor, the service decides: `list_sources` returns only the sources whose
target lies inside the caller's scope, and `start_source_sync` and `set_source_paused` refuse whoever
may not manage them (the refusal, or `Busy` while a sync runs, is the flash message on the page).
Whether the buttons are shown follows what the service said too: it names a source's secret only to
those who manage sources. A sync started here runs in the service's background thread; the page
shows its progress when reloaded.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Form, Request
from fastapi.responses import HTMLResponse, Response

from rag.errors import RagError
from rag.web.caller import Caller

router = APIRouter(include_in_schema=False)

FAILURES_SHOWN = 5  # the first failures of the last sync; the CLI and /v1/sources give them all
_UNITS = (("d", 86_400), ("h", 3600), ("m", 60), ("s", 1))


@router.get("/sources")
def sources(request: Request) -> HTMLResponse:
    caller = Caller(request)
    try:
        found = [info.payload() for info in caller.svc.list_sources(caller.principal)]
    except RagError as exc:
        return caller.refused(exc)
    return caller.show("sources.html", sources=[_shown(p) for p in found], failures_shown=FAILURES_SHOWN,
                       manages=any("secret" in p for p in found))


@router.post("/sources/{name}/sync")
def sync_now(request: Request, name: str, csrf: str = Form("")) -> Response:
    caller = Caller(request)
    return caller.act(csrf, "/sources", lambda: caller.svc.start_source_sync(caller.principal, name),
                      lambda info: f"syncing {info.row.name}: reload this page to follow it")


@router.post("/sources/{name}/{verb}")
def pause_or_resume(request: Request, name: str, verb: str, csrf: str = Form("")) -> Response:
    caller = Caller(request)
    if verb not in ("pause", "resume"):
        return caller.show("error.html", 404, message="not found")
    paused = verb == "pause"
    return caller.act(csrf, "/sources", lambda: caller.svc.set_source_paused(caller.principal, name, paused),
                      lambda info: f"{info.row.name} {'paused' if paused else 'resumed'}")


def _shown(payload: dict[str, Any]) -> dict[str, Any]:
    """A source's payload with what the page adds: its target and schedule in words, and
    whether it may be managed from here (the service named its secret: only to managers)."""
    folder = payload["folder"]
    return {**payload, "target": f"{payload['knowledge_base']}:/{folder}",
            "schedule": every(payload["every_seconds"]), "manages": "secret" in payload}


def every(seconds: int | None) -> str:
    """90 -> "every 90s", 1800 -> "every 30m", None -> "on demand only"."""
    if not seconds:
        return "on demand only"
    for unit, size in _UNITS:
        if seconds % size == 0:
            return f"every {seconds // size}{unit}"
    return f"every {seconds}s"
