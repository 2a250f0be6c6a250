"""Reviewing (rag/service/content/review.py): the drafts awaiting review in a knowledge base, the difference
between two versions of a document, and one node's activity. The editor (rag/web/) reads the same
service calls; the service checks who may see what."""

from __future__ import annotations

from fastapi import APIRouter
from fastapi.responses import JSONResponse

from rag.api.arguments import path_param, query_param
from rag.api.auth import Caller, Service
from rag.api.errors import ERROR_RESPONSES
from rag.api.routes.nodes import DocumentId, view_response
from rag.service.arguments import DIFF_VERSIONS, DOCUMENT_ACTIVITY, LIST_DRAFTS
from rag.service.content.views import DocumentActivity, DraftInfo, VersionDiff

router = APIRouter(prefix="/v1", tags=["review"], responses=ERROR_RESPONSES)

Kb = query_param(LIST_DRAFTS["kb"])
DraftsLimit = query_param(LIST_DRAFTS["limit"])
FromVersion = query_param(DIFF_VERSIONS["from_version"])
ToVersion = query_param(DIFF_VERSIONS["to_version"])
ActivityNode = path_param(DOCUMENT_ACTIVITY["node_id"])
ActivityLimit = query_param(DOCUMENT_ACTIVITY["limit"])


@router.get("/drafts", response_model=list[DraftInfo], operation_id="list_drafts",
            summary="Drafts awaiting review in a knowledge base (editors and admins)")
def drafts(svc: Service, principal: Caller, kb: Kb = None,
           limit: DraftsLimit = LIST_DRAFTS["limit"].default) -> JSONResponse:
    """Newest first: each document's draft versions newer than its published one, with who wrote
    them (`author_is_agent`). A folder-scoped caller sees the drafts inside its folders only."""
    return view_response(svc.list_drafts(principal, kb, limit))


@router.get("/documents/{node_id}/diff", response_model=VersionDiff, operation_id="diff_versions",
            summary="The difference between two versions of a document")
def diff(node_id: DocumentId, svc: Service, principal: Caller, from_version: FromVersion = None,
         to_version: ToVersion = None) -> JSONResponse:
    """A unified difference (three lines of context), whatever the versions' status."""
    return view_response(svc.diff_versions(principal, node_id, from_version, to_version))


@router.get("/nodes/{node_id}/activity", response_model=DocumentActivity, operation_id="document_activity",
            summary="One document's (or folder's) history and citation count (editors and admins)")
def node_activity(node_id: ActivityNode, svc: Service, principal: Caller,
                  limit: ActivityLimit = DOCUMENT_ACTIVITY["limit"].default) -> JSONResponse:
    """Newest first; never a secret, a query text or a body."""
    return view_response(svc.document_activity(principal, node_id, limit))
