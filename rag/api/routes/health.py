"""The probes. No token needed, and nothing in an answer is a secret or an error message: a failing
check says only which part failed (the log says why).

- GET /livez: the process serves (an orchestrator restarts it when this stops answering). It checks
  nothing else on purpose: a database or Chroma outage is not cured by restarting every replica.
- GET /readyz: this process can answer searches now: the store answers with its schema at the
  newest migration, every lane of the search index answers, and the embedding model has embedded.
  503 also once the server is stopping (SIGTERM), so that a load balancer sends it nothing new.
  A store that cannot take writes (a full disk) still serves reads: /healthz says so, not this.
- GET /healthz: the detail: each engine, and whether the store can still write. Each lane of the
  search index is a check under its own name ("vector", "text"). `parsing` says how busy the parse
  workers are (rag/ingest/sandbox.py): saturation is load, not ill health, so it never turns the
  answer into a 503 (the image's HEALTHCHECK probes this)."""

from __future__ import annotations

import logging
import os
import resource
from collections.abc import Callable
from pathlib import Path

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict
from sqlalchemy import text

from rag.api.auth import get_service
from rag.errors import STORAGE_FULL, StorageFull
from rag.ingest.sandbox import shared_stats
from rag.service import KnowledgeService
from rag.store.db import at_head

log = logging.getLogger("rag.api")

router = APIRouter(tags=["health"])

# Less room than this to grow the store's files, and writes are about to fail (or already do).
MIN_ROOM = 1 << 20


class Check(BaseModel):
    ok: bool
    engine: str


class Parsing(BaseModel):
    busy: int  # files being parsed now
    capacity: int  # parse workers: files parsed at once
    queued: int  # files waiting for a worker


class Health(BaseModel):
    """The fixed checks, and one more per lane of the search index, named as the lane."""

    model_config = ConfigDict(extra="allow")
    __pydantic_extra__: dict[str, Check]

    status: str
    store: Check
    writes: Check
    model: Check
    synthesizer: str
    parsing: Parsing


def _check(name: str, probe: Callable[[], object]) -> bool:
    try:
        probe()
        return True
    except Exception:  # noqa: BLE001 - health reports, it never fails
        log.warning("health check of the %s failed", name, exc_info=True)
        return False


def _room(path: Path) -> int:
    """Bytes `path` (a file of the store, existing or not) can still grow by: the free space of its
    file system, and below the process's file-size limit (RLIMIT_FSIZE, `ulimit -f`)."""
    folder = path if path.is_dir() else path.parent
    stat = os.statvfs(folder)
    room = stat.f_bavail * stat.f_frsize
    limit = resource.getrlimit(resource.RLIMIT_FSIZE)[0]
    if limit != resource.RLIM_INFINITY:
        room = min(room, limit - (path.stat().st_size if path.is_file() else 0))
    return room


def _writable(svc: KnowledgeService) -> None:
    """Raises when the store could not take a write now. Nothing is written, so a health check
    that runs every few seconds neither fills a disk nor waits for the store's write lock.

    PostgreSQL: a transaction id is assigned, then rolled back (refused by a read-only server or a
    standby in recovery; a full disk there is PostgreSQL's own to report). SQLite: room for the
    database, its write-ahead log and the vector and keyword stores in home, and room below
    `max_page_count`."""
    engine = svc.db.engine
    if svc.db.dialect == "postgresql":
        with engine.connect() as connection:
            connection.execute(text("SELECT txid_current()"))
            connection.rollback()
    elif svc.db.dialect == "sqlite":
        with engine.connect() as connection:
            size, count, free, most = (connection.exec_driver_sql(f"PRAGMA {name}").scalar() for name in
                                       ("page_size", "page_count", "freelist_count", "max_page_count"))
        if (most - count + free) * size < MIN_ROOM:
            raise StorageFull(f"{STORAGE_FULL} (max_page_count)")
        files: list[Path] = []
        if engine.url.database and engine.url.database != ":memory:":
            database = Path(engine.url.database)
            files += [database, database.with_name(database.name + "-wal")]
        if svc.settings.embedded:
            files += [svc.settings.chroma_path / "chroma.sqlite3", svc.settings.keyword_path]
        short = [str(f) for f in files if f.parent.is_dir() and _room(f) < MIN_ROOM]
        if short:
            raise StorageFull(f"{STORAGE_FULL}: {', '.join(short)}")


class Live(BaseModel):
    status: str


class Ready(BaseModel):
    status: str  # "ready" or "not ready"
    failing: list[str]  # the parts that are not: store, migrations, a lane's name, model, stopping


def _store(svc: KnowledgeService) -> None:
    with svc.db.engine.connect() as connection:
        connection.execute(text("SELECT 1"))


def _model_ready(request: Request, svc: KnowledgeService) -> bool:
    """Whether the embedding model has embedded: at start-up (the lifespan's warm-up) or, when it
    did not then, now; once it has, it is not asked again."""
    if not getattr(request.app.state, "model_ready", False):
        request.app.state.model_ready = _check("model", lambda: svc.embedder.embed_query("health"))
    return bool(request.app.state.model_ready)


@router.get("/livez", response_model=Live, summary="The process serves")
async def livez() -> Live:
    """200 whenever the process answers HTTP. Async on purpose: it needs no thread of the pool that
    a burst of requests may have taken, so a busy server is not mistaken for a hung one."""
    return Live(status="ok")


@router.get("/readyz", response_model=Ready,
            responses={503: {"model": Ready, "description": "Not ready: the parts that are not, by name."}},
            summary="Ready for searches: the store and its migrations, every lane, the model")
def readyz(request: Request) -> JSONResponse:
    svc = getattr(request.app.state, "service", None)
    if svc is None or getattr(request.app.state, "stopping", False):
        failing = ["stopping"] if svc is not None else ["starting"]
    else:
        lanes = svc.index.health()
        parts = {
            "store": _check("store", lambda: _store(svc)),
            "migrations": _check("migrations", lambda: _current(svc)),
            **lanes,
            "model": _model_ready(request, svc),
        }
        failing = [name for name, ok in parts.items() if not ok]
    body = Ready(status="not ready" if failing else "ready", failing=failing)
    return JSONResponse(body.model_dump(), status_code=503 if failing else 200)


def _current(svc: KnowledgeService) -> None:
    if not at_head(svc.db.engine):
        raise RuntimeError("the store's schema is not at the newest migration")


@router.get("/healthz", response_model=Health, responses={503: {"model": Health, "description": "A part is down."}},
            summary="The store (and its writes), each lane of the search index, and the model")
def healthz(request: Request) -> JSONResponse:
    """200 with `status: ok` when the store answers and can write, every lane's engine answers
    and the embedding model has embedded; 503 with `status: degraded` otherwise. The language
    model (if any) is named, not called: a probe would cost a paid request."""
    svc = get_service(request)
    model_ready = _model_ready(request, svc)
    lanes = svc.index.health()  # each lane's engine, by lane name (the log says why one failed)
    checks = {
        "store": Check(ok=_check("store", lambda: _store(svc)), engine=svc.db.dialect),
        "writes": Check(ok=_check("store's writes", lambda: _writable(svc)), engine=svc.db.dialect),
        **{name: Check(ok=lanes[name], engine=lane.engine) for name, lane in svc.index.lanes.items()},
        "model": Check(ok=model_ready, engine=svc.embedder.name),
    }
    healthy = all(check.ok for check in checks.values())
    body = Health(status="ok" if healthy else "degraded", synthesizer=svc.synthesizer.name,
                  parsing=Parsing(**shared_stats()), **checks)
    return JSONResponse(body.model_dump(), status_code=200 if healthy else 503)
