"""A document's versions: the history, one version, the draft, publishing, and rollback.

Content goes through drafts: PUT …/draft writes one, POST …/publish makes it searchable (in the
background: the answer says `publishing` at once). Rollback makes an earlier published version the
published one again; the service allows it to admins who are people, never to agents.
"""

from __future__ import annotations

from fastapi import APIRouter
from fastapi.responses import JSONResponse

from rag.api.arguments import path_param
from rag.api.auth import Caller, Service
from rag.api.errors import ERROR_RESPONSES
from rag.api.node_schemas import ContentBody
from rag.api.routes.nodes import DocumentId, view_response
from rag.service.arguments import GET_DOCUMENT_VERSION, PUBLISH_DOCUMENT_VERSION, ROLLBACK_DOCUMENT_VERSION
from rag.service.content.views import VersionInfo, VersionView

router = APIRouter(prefix="/v1/documents/{node_id}", tags=["versions"], responses=ERROR_RESPONSES)

# A number out of bounds (0, or past 2^31 - 1) gets the service's message, as over MCP; one that is
# no integer at all is a 422.
ReadNumber = path_param(GET_DOCUMENT_VERSION["version_number"])
PublishNumber = path_param(PUBLISH_DOCUMENT_VERSION["version_number"])
RollbackNumber = path_param(ROLLBACK_DOCUMENT_VERSION["version_number"])


@router.get("/versions", response_model=list[VersionInfo], operation_id="get_document_versions",
            summary="Every version, newest first")
def versions(node_id: DocumentId, svc: Service, principal: Caller) -> JSONResponse:
    """Drafts, publishing, published and archived versions, without their bodies."""
    return view_response(svc.get_document_versions(principal, node_id))


@router.get("/versions/{version_number}", response_model=VersionView, operation_id="get_document_version",
            summary="One version, with its body")
def version(node_id: DocumentId, version_number: ReadNumber, svc: Service, principal: Caller) -> JSONResponse:
    return view_response(svc.get_document_version(principal, node_id, version_number))


@router.put("/draft", response_model=VersionInfo, operation_id="update_document",
            summary="Write the draft (update_document)")
def write_draft(node_id: DocumentId, body: ContentBody, svc: Service, principal: Caller) -> JSONResponse:
    """Replaces the whole body as a new draft version (every edit is kept, numbered after the
    newest). The published version stays live until a draft is published."""
    return view_response(svc.update_document(principal, node_id, body.content))


@router.post("/versions/{version_number}/publish", response_model=VersionInfo,
             operation_id="publish_document_version", summary="Publish a draft (publish_document_version)")
def publish(node_id: DocumentId, version_number: PublishNumber, svc: Service, principal: Caller) -> JSONResponse:
    """Returns at once with `publishing`; the version becomes `published` once indexed. A version
    publishing or published already is returned unchanged; an archived one is refused."""
    return view_response(svc.publish_document_version(principal, node_id, version_number))


@router.post("/versions/{version_number}/rollback", response_model=VersionInfo,
             operation_id="rollback_document_version",
             summary="Roll back to an earlier published version (admins who are people)")
def rollback(node_id: DocumentId, version_number: RollbackNumber, svc: Service, principal: Caller) -> JSONResponse:
    """Makes an archived (earlier published) version the published one again, in the background."""
    return view_response(svc.rollback_document_version(principal, node_id, version_number))
