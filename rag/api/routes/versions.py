"""A document's versions: the history, one version, the draft, publishing, and rollback.

Content goes through drafts: PUT …/draft writes one, POST …/publish makes it searchable (in the
background: the answer says `publishing` at once). Rollback makes an earlier published version the
published one again; the service allows it to admins who are people, never to agents.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path
from fastapi.responses import JSONResponse

from rag.api.auth import Caller, Service
from rag.api.errors import ERROR_RESPONSES
from rag.api.node_schemas import ContentBody
from rag.api.routes.nodes import NodeId, view_response
from rag.service.checks import MAX_INT
from rag.service.views import VersionInfo, VersionView

router = APIRouter(prefix="/v1/documents/{node_id}", tags=["versions"], responses=ERROR_RESPONSES)

# The service's bound on every integer (MAX_INT): a larger number is a 422 here, never a store error.
VersionNumber = Annotated[int, Path(ge=1, le=MAX_INT, description="1-based, as GET …/versions lists them.")]


@router.get("/versions", response_model=list[VersionInfo], summary="Every version, newest first")
def versions(node_id: NodeId, svc: Service, principal: Caller) -> JSONResponse:
    """Drafts, publishing, published and archived versions, without their bodies."""
    return view_response(svc.get_document_versions(principal, node_id))


@router.get("/versions/{version_number}", response_model=VersionView, summary="One version, with its body")
def version(node_id: NodeId, version_number: VersionNumber, svc: Service, principal: Caller) -> JSONResponse:
    return view_response(svc.get_document_version(principal, node_id, version_number))


@router.put("/draft", response_model=VersionInfo, summary="Write the draft (update_document)")
def write_draft(node_id: NodeId, body: ContentBody, svc: Service, principal: Caller) -> JSONResponse:
    """Replaces the whole body as a new draft version (every edit is kept, numbered after the
    newest). The published version stays live until a draft is published."""
    return view_response(svc.update_document(principal, node_id, body.content))


@router.post("/versions/{version_number}/publish", response_model=VersionInfo,
             summary="Publish a draft (publish_document_version)")
def publish(node_id: NodeId, version_number: VersionNumber, svc: Service, principal: Caller) -> JSONResponse:
    """Returns at once with `publishing`; the version becomes `published` once indexed. A version
    publishing or published already is returned unchanged; an archived one is refused."""
    return view_response(svc.publish_document_version(principal, node_id, version_number))


@router.post("/versions/{version_number}/rollback", response_model=VersionInfo,
             summary="Roll back to an earlier published version (admins who are people)")
def rollback(node_id: NodeId, version_number: VersionNumber, svc: Service, principal: Caller) -> JSONResponse:
    """Makes an archived (earlier published) version the published one again, in the background."""
    return view_response(svc.rollback_document_version(principal, node_id, version_number))
