"""The node tree's plain facts, shared by the parts of the service: a workspace's knowledge bases
(made on first use, each with its root folder), what is below a node, whether a sibling name is taken,
a node's path, which versions a document has. Nothing here checks access:
that is rag/service/identity/access.py's, which the callers ask first.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Iterable, NamedTuple

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from rag.errors import InvalidArgument, NotFound
from rag.service.checks import name_arg, name_key
from rag.store.models import DRAFT, FOLDER, PUBLISHED, DocumentVersion, KnowledgeBase, Node, Workspace

if TYPE_CHECKING:
    from rag.settings import Settings
    from rag.store.db import Database


ROOT_FIXED = "the root folder of a knowledge base cannot be renamed, moved or deleted"
SCOPE_ROOT_FIXED = "a folder this token was given cannot be renamed, moved or deleted"


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



class TreeRow(NamedTuple):
    id: str
    parent_id: str | None
    kind: str
    name: str
    kb_id: str


def subtree(session: Session, root_ids: Iterable[str]) -> list[TreeRow]:
    """Every node below these (not the roots themselves), level by level."""
    found: list[TreeRow] = []
    frontier = list(root_ids)
    seen = set(frontier)
    while frontier:
        level: list[TreeRow] = []
        for i in range(0, len(frontier), 500):
            level += [
                TreeRow(*row)
                for row in session.execute(
                    select(Node.id, Node.parent_id, Node.kind, Node.name, Node.kb_id)
                    .where(Node.parent_id.in_(frontier[i:i + 500]))
                    .order_by(Node.kind.desc(), Node.name_key)  # folders before documents, then by name
                )
                if row[0] not in seen
            ]
        seen.update(row.id for row in level)
        found += level
        frontier = [row.id for row in level if row.kind == FOLDER]
    return found


def sibling_taken(session: Session, parent_id: str, name: str, exclude: str | None = None) -> bool:
    stmt = select(Node.id).where(Node.parent_id == parent_id, Node.name_key == name_key(name))
    if exclude:
        stmt = stmt.where(Node.id != exclude)
    return session.scalar(stmt) is not None


def unique_name(session: Session, parent_id: str, name: str, hint: str | None = None) -> str:
    """A sibling name not taken yet: the name, else the name with a hint, else with a counter."""
    candidates = [name] + ([f"{name} ({hint})"] if hint else [])
    candidates += [f"{name} ({i})" for i in range(2, 1000)]
    for candidate in candidates:
        if not sibling_taken(session, parent_id, candidate):
            return candidate
    raise InvalidArgument(f"too many documents named {name!r} in one folder")


def path_label(session: Session, node: Node) -> str:
    """The node's path from its knowledge base's root, root name first."""
    parts = []
    current: Node | None = node
    while current is not None:
        parts.append(current.name)
        current = session.get(Node, current.parent_id) if current.parent_id else None
    return "/".join(reversed(parts))


def version_marks(session: Session, node_ids: list[str]) -> dict[str, tuple[int | None, int | None]]:
    """(published version, draft version) of each document."""
    marks: dict[str, list[int | None]] = {}
    for i in range(0, len(node_ids), 500):
        rows = session.execute(
            select(DocumentVersion.node_id, DocumentVersion.status, func.max(DocumentVersion.number))
            .where(DocumentVersion.node_id.in_(node_ids[i:i + 500]), DocumentVersion.status.in_([PUBLISHED, DRAFT]))
            .group_by(DocumentVersion.node_id, DocumentVersion.status)
        )
        for node_id, status, number in rows:
            marks.setdefault(node_id, [None, None])[0 if status == PUBLISHED else 1] = number
    return {node_id: (pair[0], pair[1]) for node_id, pair in marks.items()}


def version(session: Session, node: Node, number: int) -> DocumentVersion:
    found = session.scalar(
        select(DocumentVersion).where(DocumentVersion.node_id == node.id, DocumentVersion.number == number)
    )
    if found is None:
        raise NotFound(f"version {number} not found")
    return found
