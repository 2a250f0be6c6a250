"""GET /healthz: is each engine answering? No token needed, and nothing in the answer is a secret
or an error message: a failing check says only which part failed (the log says why)."""

from __future__ import annotations

import logging
from typing import Callable

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel
from sqlalchemy import text

from rag.api.auth import get_service

log = logging.getLogger("rag.api")

router = APIRouter(tags=["health"])


class Check(BaseModel):
    ok: bool
    engine: str


class Health(BaseModel):
    status: str
    store: Check
    vector: Check
    model: Check
    synthesizer: str


def _check(name: str, probe: Callable[[], object]) -> bool:
    try:
        probe()
        return True
    except Exception:  # noqa: BLE001 - health reports, it never fails
        log.warning("health check of the %s failed", name, exc_info=True)
        return False


@router.get("/healthz", response_model=Health, responses={503: {"model": Health, "description": "A part is down."}},
            summary="The store, the vector lane and the model")
def healthz(request: Request) -> JSONResponse:
    """200 with `status: ok` when the store and the vector lane answer and the embedding model has
    embedded; 503 with `status: degraded` otherwise. The language model (if any) is named, not called:
    a probe would cost a paid request."""
    svc = get_service(request)

    def store() -> None:
        with svc.db.engine.connect() as connection:
            connection.execute(text("SELECT 1"))

    model_ready = bool(getattr(request.app.state, "model_ready", False))
    if not model_ready:  # it did not answer at start-up: ask again, until it does
        model_ready = request.app.state.model_ready = _check("model", lambda: svc.embedder.embed_query("health"))
    settings = svc.settings
    checks = {
        "store": Check(ok=_check("store", store), engine=svc.db.dialect),
        "vector": Check(ok=_check("vector lane", lambda: svc.vector.client.heartbeat()),
                        engine="chroma server" if settings.chroma_url else "chroma embedded"),
        "model": Check(ok=model_ready, engine=svc.embedder.name),
    }
    healthy = all(check.ok for check in checks.values())
    body = Health(status="ok" if healthy else "degraded", synthesizer=svc.synthesizer.name, **checks)
    return JSONResponse(body.model_dump(), status_code=200 if healthy else 503)
