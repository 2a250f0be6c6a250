"""/v1/sources: the sources that keep knowledge bases in sync (rag/service/sources/manage.py holds
who may do what). Admins with access all add, change, sync, pause and remove them; anyone who may
read lists the sources whose target lies inside what they see. A sync started here runs in the
background: its state (status, progress, last sync, failures) is the source's, read back with GET."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Query
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field

from rag.api.auth import Caller, Service
from rag.api.errors import ERROR_RESPONSES

router = APIRouter(prefix="/v1/sources", tags=["sources"], responses=ERROR_RESPONSES)


class NewSource(BaseModel):
    """A source to add. `config` is the kind's settings (docs/service.md lists them); `secret` is the
    name of a secret Settings supplies (RAG_SOURCE_SECRETS__<NAME>), never its value."""

    model_config = ConfigDict(extra="forbid")
    name: str = Field(description="Letters, digits, '.', '_' or '-'; unique in the workspace.")
    kind: str = Field(description="folder, website, git, s3, notion, confluence or imap.")
    config: dict[str, Any] = Field(default_factory=dict, description="The kind's settings.")
    knowledge_base: str | None = Field(None, description="The knowledge base it fills (made if missing; default: the default one).")
    folder: str = Field("", description="The folder it fills, as a path below the knowledge base's root.")
    every: str | None = Field(None, description="Sync every 30m, 6h, 1d…; none: on demand only.")
    secret: str | None = Field(None, description="The name of the secret it needs.")


class SourceChange(BaseModel):
    """What to change; a field left out stays as it is."""

    model_config = ConfigDict(extra="forbid")
    config: dict[str, Any] | None = Field(None, description="New settings, replacing the old ones whole.")
    every: str | None = Field(None, description="A new schedule ('manual': on demand only).")
    secret: str | None = Field(None, description="The name of another secret ('' for none).")
    paused: bool | None = Field(None, description="Pause or resume its schedule.")


class LastSync(BaseModel):
    started_at: str | None
    finished_at: str | None
    outcome: str | None = Field(description="ok, partial (some items failed), failed, stopped; none before the first.")
    counts: dict[str, Any]
    error: str | None = Field(description="Why the source could not be listed, when it could not.")
    failures: list[list[str]] = Field(description="[item, reason] of the first items that failed.")


class SourceState(BaseModel):
    name: str
    kind: str
    knowledge_base: str
    folder: str
    config: dict[str, Any] | None = Field(
        None, description="The kind's settings (shown to admins with access all only: they name paths, URLs, accounts).")
    every_seconds: int | None
    paused: bool
    status: str = Field(description="idle, running, or stale (marked running by a sync whose process is gone; the next sync takes it at once).")
    items: int = Field(description="Items the last syncs stored.")
    last_sync: LastSync
    next_run_at: str | None
    created_at: str | None
    progress: dict[str, Any] | None = Field(None, description="The running sync's stage and counts.")
    secret: str | None = Field(None, description="The secret's name (shown to admins only).")


@router.get("", response_model=list[SourceState], operation_id="list_sources", summary="The sources the caller sees")
def list_sources(svc: Service, principal: Caller) -> JSONResponse:
    return JSONResponse([info.payload() for info in svc.list_sources(principal)])


@router.post("", response_model=SourceState, status_code=201, operation_id="add_source", summary="Add a source")
def add_source(body: NewSource, svc: Service, principal: Caller) -> JSONResponse:
    info = svc.add_source(principal, body.name, body.kind, body.config, body.knowledge_base, body.folder,
                          body.every, body.secret)
    return JSONResponse(info.payload(), status_code=201)


@router.get("/{name}", response_model=SourceState, operation_id="show_source", summary="One source and its state")
def show_source(name: str, svc: Service, principal: Caller) -> JSONResponse:
    return JSONResponse(svc.show_source(principal, name).payload())


@router.patch("/{name}", response_model=SourceState, operation_id="change_source", summary="Change a source")
def change_source(name: str, body: SourceChange, svc: Service, principal: Caller) -> JSONResponse:
    changes: dict[str, Any] = {}
    given = body.model_fields_set
    if "config" in given and body.config is not None:
        changes["config"] = body.config
    if "every" in given:
        changes["every"] = body.every
    if "secret" in given:
        changes["secret"] = body.secret
    info = svc.change_source(principal, name, **changes) if changes else None
    if body.paused is not None:
        info = svc.set_source_paused(principal, name, body.paused)
    return JSONResponse((info or svc.show_source(principal, name)).payload())


@router.post("/{name}/sync", response_model=SourceState, status_code=202, operation_id="sync_source",
             summary="Sync a source now, in the background (409 while a sync of it runs)")
def sync_source(name: str, svc: Service, principal: Caller) -> JSONResponse:
    return JSONResponse(svc.start_source_sync(principal, name).payload(), status_code=202)


@router.delete("/{name}", operation_id="remove_source", summary="Remove a source (its documents stay unless asked)")
def remove_source(name: str, svc: Service, principal: Caller,
                  delete_documents: bool = Query(False, description="Delete the documents it brought too.")
                  ) -> JSONResponse:
    removed = svc.remove_source(principal, name, keep_documents=not delete_documents)
    return JSONResponse(removed)
