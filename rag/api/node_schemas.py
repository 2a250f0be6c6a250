"""Request bodies of the knowledge-management endpoints, and the one response the service has no
view for (an activity row). The other responses are the service's own views (rag/service/views.py),
whose `payload()` is what the endpoints return: the same JSON as the MCP tools.

The bounds document rag.service.checks; the service checks every argument again.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import BaseModel, Field

from rag.api.schemas import Strict
from rag.service.checks import MAX_CONTENT_CHARS, MAX_ID_CHARS, MAX_NAME_CHARS, MAX_SUMMARY_CHARS

NAME = Field(min_length=1, max_length=MAX_NAME_CHARS, description="Unique among its siblings, ignoring case.")
SUMMARY = Field(None, max_length=MAX_SUMMARY_CHARS, description="Descriptive, never indexed; null or blank clears it.")
METADATA = Field(
    None, description="A JSON object of at most 64 KiB, stored whole (a full replacement, never a merge); null removes it."
)
CONTENT = Field(max_length=MAX_CONTENT_CHARS, description="The Markdown body.")
PARENT = Field(
    None, min_length=1, max_length=MAX_ID_CHARS,
    description="The folder to create it in. Default: the default knowledge base for a person, `Assistant "
    "Documents` for an agent; a folder-scoped token must name one of its folders.",
)


class NewFolder(Strict):
    parent_id: str | None = PARENT
    name: str = NAME
    summary: str | None = SUMMARY
    metadata: dict[str, Any] | None = METADATA


class NewDocument(Strict):
    parent_id: str | None = PARENT
    name: str = NAME
    content: str = CONTENT
    summary: str | None = SUMMARY
    metadata: dict[str, Any] | None = METADATA


class NameBody(Strict):
    name: str = NAME


class ContentBody(Strict):
    content: str = CONTENT


class SummaryBody(Strict):
    summary: str | None = Field(max_length=MAX_SUMMARY_CHARS, description="The new summary; null or blank clears it.")


class MetadataBody(Strict):
    metadata: dict[str, Any] | None = Field(
        description="The whole new metadata object (keys left out are removed); null removes it all."
    )


class MoveBody(Strict):
    parent_id: str = Field(min_length=1, max_length=MAX_ID_CHARS, description="The folder to move it into.")


class ActivityEntry(BaseModel):
    id: int
    created_at: datetime
    actor: str = Field(description="`person:Name (p_…)`, `agent:Name (p_…)` or `local-cli`.")
    action: str = Field(description="The operation, e.g. `search`, `get_document`, `publish_document_version`.")
    target: str | None = Field(description="The node (or token) it was about, if any.")
    outcome: str = Field(description="`ok`, or the error's code (`not_found`, `permission_denied`, …).")
    detail: dict[str, Any] | None = Field(description="Counts and small arguments; never a secret, a query or a body.")
