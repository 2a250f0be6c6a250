"""Workspaces and knowledge bases: made on first use, listed, found by name.

`Catalog` is the service part callers use, and it asks the access policy first; the plain store
facts below it (`ensure_workspace`, `workspace_kbs`, `create_kb`) are tree.py's, which the access
policy lists through too.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from sqlalchemy.exc import IntegrityError

from rag.errors import NotFound
from rag.service.activity import recorded
from rag.service.content.tree import create_kb, ensure_workspace
from rag.service.identity.principal import Principal
from rag.store.models import KnowledgeBase, Workspace

if TYPE_CHECKING:
    from rag.service.identity.access import Access
    from rag.service.activity import ActivityLog
    from rag.settings import Settings
    from rag.store.db import Database


class Catalog:
    def __init__(self, db: Database, settings: Settings, access: Access, activity: ActivityLog) -> None:
        self.db = db
        self.settings = settings
        self.access = access
        self.activity = activity

    def ensure_workspace(self, workspace_id: str) -> Workspace:
        return ensure_workspace(self.db, self.settings, workspace_id)

    def knowledge_bases(self, principal: Principal) -> list[KnowledgeBase]:
        """The knowledge bases the caller sees (rag/service/identity/access.py)."""
        return self.access.knowledge_bases(principal)

    @recorded("list_models", after=lambda found: {"results": len(found)})
    def list_models(self, principal: Principal) -> dict[str, KnowledgeBase]:
        """The knowledge bases as the OpenAI-compatible endpoints name them: model id (`default`,
        else the name) to knowledge base, default first (rag/service/identity/access.py, model_ids)."""
        return self.access.model_ids(principal)

    def resolve_kb(self, principal: Principal, name: object) -> KnowledgeBase:
        """A knowledge base by name or model id; missing and not visible answer the same."""
        return self.access.resolve_kb(principal, name)

    def knowledge_base(self, principal: Principal, name: str, *, create: bool = False) -> KnowledgeBase:
        """The knowledge base of that name the caller sees; with `create`, made when there is none,
        by an editor with access to the whole workspace (a folder-scoped caller would not see it)."""
        try:
            return self.access.resolve_kb(principal, name)
        except NotFound:
            if not create:
                raise
        self.access.require_write(principal)
        self.access.require_all(principal, "creating a knowledge base")
        try:
            with self.db.session() as session:
                return create_kb(session, principal.workspace_id, name)
        except IntegrityError:  # a concurrent first use made it meanwhile
            return self.access.resolve_kb(principal, name)
