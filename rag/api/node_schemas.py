"""Request bodies of the knowledge-management endpoints, and the one response the service has no
view for (an activity row). The other responses are the service's own views (rag/service/content/views.py),
whose `payload()` is what the endpoints return: the same JSON as the MCP tools.

The bodies are built from the operations' declarations (rag/service/arguments.py), as the MCP tools'
input schemas are: they state the service's bounds, and the service checks them.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import BaseModel, Field

from rag.api.arguments import request_body
from rag.service.arguments import (
    CREATE_DOCUMENT,
    CREATE_FOLDER,
    MOVE_NODE,
    RENAME_DOCUMENT,
    SET_METADATA,
    SET_SUMMARY,
    UPDATE_DOCUMENT,
)

NewFolder = request_body("NewFolder", CREATE_FOLDER, "create_folder's arguments.")
NewDocument = request_body("NewDocument", CREATE_DOCUMENT, "create_document's arguments.")
NameBody = request_body("NameBody", RENAME_DOCUMENT.only("name"), "The new name (rename_document, rename_folder).")
ContentBody = request_body("ContentBody", UPDATE_DOCUMENT.only("content"), "The new draft's body (update_document).")
SummaryBody = request_body("SummaryBody", SET_SUMMARY.only("summary"), "The new summary (set_summary).")
MetadataBody = request_body("MetadataBody", SET_METADATA.only("metadata"),
                            "The whole new metadata object: keys left out are removed (set_metadata).")
MoveBody = request_body("MoveBody", MOVE_NODE.only("parent_id"), "Where to move it (move_node).")


class ActivityEntry(BaseModel):
    id: int
    created_at: datetime
    actor: str = Field(description="`person:Name (p_…)`, `agent:Name (p_…)` or `local-cli`.")
    action: str = Field(description="The operation, e.g. `search`, `get_document`, `publish_document_version`.")
    target: str | None = Field(description="The node (or token) it was about, if any.")
    outcome: str = Field(description="`ok`, or the error's code (`not_found`, `permission_denied`, …).")
    detail: dict[str, Any] | None = Field(description="Counts and small arguments; never a secret, a query or a body.")
