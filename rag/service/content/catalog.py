"""Workspaces and knowledge bases: made on first use, listed, found by name.

`ensure_workspace` and `workspace_kbs` are plain store facts (the access policy lists through
them); `Catalog` is the service part callers use, and it asks the access policy first.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from sqlalchemy import select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from rag.errors import InvalidArgument, NotFound
from rag.service.activity import recorded
from rag.service.checks import name_arg, name_key
from rag.service.identity.principal import Principal
from rag.store.models import FOLDER, KnowledgeBase, Node, Workspace

if TYPE_CHECKING:
    from rag.service.identity.access import Access
    from rag.service.activity import ActivityLog
    from rag.settings import Settings
    from rag.store.db import Database


def workspace_kbs(session: Session, workspace_id: str) -> list[KnowledgeBase]:
    """Every knowledge base of a workspace, oldest first."""
    return list(session.scalars(
        select(KnowledgeBase)
        .where(KnowledgeBase.workspace_id == workspace_id)
        .order_by(KnowledgeBase.created_at, KnowledgeBase.name)
    ))


def ensure_workspace(db: Database, settings: Settings, workspace_id: str) -> Workspace:
    """The workspace, made on first use with its default knowledge base."""
    workspace_id = workspace_id.strip()
    if not workspace_id or len(workspace_id) > 64 or ":" in workspace_id:
        raise InvalidArgument("a workspace name must be 1 to 64 characters, without ':'")
    with db.session() as session:
        workspace = session.get(Workspace, workspace_id)
        if workspace is None:
            workspace = Workspace(id=workspace_id, name=workspace_id)
            session.add(workspace)
            session.flush()
            create_kb(session, workspace_id, settings.default_kb)
        return workspace


def create_kb(session: Session, workspace_id: str, name: str) -> KnowledgeBase:
    """A new knowledge base with its root folder (named as the base)."""
    name = name_arg(name, "knowledge base")
    if ":" in name:
        raise InvalidArgument("a knowledge base name cannot contain ':'")
    if session.scalar(
        select(KnowledgeBase).where(KnowledgeBase.workspace_id == workspace_id, KnowledgeBase.name_key == name_key(name))
    ):
        raise InvalidArgument(f"a knowledge base named {name!r} already exists in this workspace")
    kb = KnowledgeBase(workspace_id=workspace_id, name=name, name_key=name_key(name))
    session.add(kb)
    session.flush()
    root = Node(
        workspace_id=workspace_id, kb_id=kb.id, parent_id=None, kind=FOLDER, name=name, name_key=name_key(name),
        source_label=f"kb:{name}",
    )
    session.add(root)
    session.flush()
    kb.root_id = root.id
    return kb


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
