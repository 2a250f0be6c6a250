"""GET /healthz: is each engine answering, and can the store still write? No token needed, and
nothing in the answer is a secret or an error message: a failing check says only which part failed
(the log says why). Each lane of the search index is a check under its own name ("vector", "text").
`parsing` says how busy the parse workers are (rag/ingest/sandbox.py): saturation is load, not
ill health, so it never turns the answer into a 503 (the image's HEALTHCHECK probes this)."""

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


@router.get("/healthz", response_model=Health, responses={503: {"model": Health, "description": "A part is down."}},
            summary="The store (and its writes), each lane of the search index, and the model")
def healthz(request: Request) -> JSONResponse:
    """200 with `status: ok` when the store answers and can write, every lane's engine answers
    and the embedding model has embedded; 503 with `status: degraded` otherwise. The language
    model (if any) is named, not called: a probe would cost a paid request."""
    svc = get_service(request)

    def store() -> None:
        with svc.db.engine.connect() as connection:
            connection.execute(text("SELECT 1"))

    model_ready = bool(getattr(request.app.state, "model_ready", False))
    if not model_ready:  # it did not answer at start-up: ask again, until it does
        model_ready = request.app.state.model_ready = _check("model", lambda: svc.embedder.embed_query("health"))
    lanes = svc.index.health()  # each lane's engine, by lane name (the log says why one failed)
    checks = {
        "store": Check(ok=_check("store", store), engine=svc.db.dialect),
        "writes": Check(ok=_check("store's writes", lambda: _writable(svc)), engine=svc.db.dialect),
        **{name: Check(ok=lanes[name], engine=lane.engine) for name, lane in svc.index.lanes.items()},
        "model": Check(ok=model_ready, engine=svc.embedder.name),
    }
    healthy = all(check.ok for check in checks.values())
    body = Health(status="ok" if healthy else "degraded", synthesizer=svc.synthesizer.name,
                  parsing=Parsing(**shared_stats()), **checks)
    return JSONResponse(body.model_dump(), status_code=200 if healthy else 503)
