"""GET /v1/activity: the workspace's history, for admins (the service checks the role, and shows a
folder-scoped admin only the rows about nodes inside its folders)."""

from __future__ import annotations

from datetime import timezone

from fastapi import APIRouter
from fastapi.encoders import jsonable_encoder
from fastapi.responses import JSONResponse

from rag.api.arguments import query_param
from rag.api.auth import Caller, Service
from rag.api.errors import ERROR_RESPONSES
from rag.api.node_schemas import ActivityEntry
from rag.service.arguments import ACTIVITY

router = APIRouter(prefix="/v1", tags=["activity"], responses=ERROR_RESPONSES)

Limit = query_param(ACTIVITY["limit"])


@router.get("/activity", response_model=list[ActivityEntry], operation_id="activity",
            summary="Who did what, when, and how it ended")
def activity(svc: Service, principal: Caller, limit: Limit = ACTIVITY["limit"].default) -> JSONResponse:
    """Newest first. Never a secret, a query text or a body."""
    rows = svc.activity(principal, limit)
    return JSONResponse(jsonable_encoder([
        {
            "id": row.id,
            # SQLite hands back naive datetimes; every one was written in UTC.
            "created_at": row.created_at if row.created_at.tzinfo else row.created_at.replace(tzinfo=timezone.utc),
            "actor": row.actor, "action": row.action, "target": row.target, "outcome": row.outcome,
            "detail": row.detail,
        }
        for row in rows
    ]))
