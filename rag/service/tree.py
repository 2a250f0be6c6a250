"""Access to the node tree, shared by the read and the write operations.

Every node operation finds its nodes through `_node`, which answers "not found" alike for a node
that does not exist, one in another workspace and one outside the caller's folders, so nothing
tells the three apart.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Iterable, NamedTuple

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from rag.errors import InvalidArgument, NotFound, PermissionDenied
from rag.retrieve.types import Hit
from rag.service.checks import id_arg, name_key
from rag.service.principal import ACCESS_ALL, ACCESS_FOLDERS, SCOPE_READ, Principal
from rag.service.views import NodeInfo
from rag.store.models import DRAFT, FOLDER, PUBLISHED, DocumentVersion, KnowledgeBase, Node

if TYPE_CHECKING:
    from rag.settings import Settings
    from rag.store.db import Database

NOT_FOUND = "not found"
NO_ACCESS = "no knowledge base access"
ROOT_FIXED = "the root folder of a knowledge base cannot be renamed, moved or deleted"
SCOPE_ROOT_FIXED = "a folder this token was given cannot be renamed, moved or deleted"


class TreeRow(NamedTuple):
    id: str
    parent_id: str | None
    kind: str
    name: str
    kb_id: str


class TreeAccess:
    """A mixin of KnowledgeService, which provides what is declared here."""

    if TYPE_CHECKING:
        db: Database
        settings: Settings

        def _require_role(self, principal: Principal, role: str) -> None: ...
        def _require_write(self, principal: Principal) -> None: ...

    # ----- who may do what -----

    def _reader(self, principal: Principal) -> None:
        """Reading nodes: any role, knowledge:read, and some knowledge-base access."""
        if principal.access not in (ACCESS_ALL, ACCESS_FOLDERS):
            raise PermissionDenied(NO_ACCESS)
        if SCOPE_READ not in principal.scopes:
            raise PermissionDenied("this needs the knowledge:read scope")
        self._require_role(principal, "viewer")

    def _writer(self, principal: Principal) -> None:
        """Writing nodes: editor or admin, knowledge:write, and some knowledge-base access."""
        if principal.access not in (ACCESS_ALL, ACCESS_FOLDERS):
            raise PermissionDenied(NO_ACCESS)
        self._require_write(principal)

    # ----- finding nodes -----

    def _node(self, session: Session, principal: Principal, node_id: object, arg: str = "node_id") -> Node:
        node_id = id_arg(node_id, arg, NOT_FOUND)  # an impossible id is "not found" before any look-up
        node = session.get(Node, node_id)
        if node is None or node.workspace_id != principal.workspace_id or not self._visible(session, principal, node):
            raise NotFound(NOT_FOUND)
        return node

    def _typed(self, session: Session, principal: Principal, node_id: object, kind: str, arg: str = "node_id") -> Node:
        """A node that must be a folder (or a document). The caller can see it, so saying what it
        is instead leaks nothing."""
        node = self._node(session, principal, node_id, arg)
        if node.kind != kind:
            raise InvalidArgument(f"`{arg}` is a {node.kind}, not a {kind}")
        return node

    def _visible(self, session: Session, principal: Principal, node: Node) -> bool:
        if principal.access == ACCESS_ALL:
            return True
        if principal.access != ACCESS_FOLDERS:
            return False
        allowed = set(principal.folder_ids)
        current: Node | None = node
        while current is not None:
            if current.id in allowed:
                return True
            current = session.get(Node, current.parent_id) if current.parent_id else None
        return False

    @staticmethod
    def _subtree(session: Session, root_ids: Iterable[str]) -> list[TreeRow]:
        """Every node below these (not the roots themselves), level by level."""
        found: list[TreeRow] = []
        frontier, seen = list(root_ids), set(root_ids)
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

    def _roots(self, session: Session, principal: Principal) -> list[Node]:
        """The top of what this principal sees: each knowledge base's root folder under All access,
        its own folders (those not inside another of them) under folder access, else nothing."""
        if principal.access == ACCESS_ALL:
            kbs = session.scalars(
                select(KnowledgeBase)
                .where(KnowledgeBase.workspace_id == principal.workspace_id)
                .order_by(KnowledgeBase.created_at, KnowledgeBase.name)
            )
            return [session.get(Node, kb.root_id) for kb in kbs if kb.root_id]
        if principal.access != ACCESS_FOLDERS:
            return []
        allowed = set(principal.folder_ids)
        roots = []
        for folder_id in dict.fromkeys(principal.folder_ids):
            node = session.get(Node, folder_id)
            if node is None or node.workspace_id != principal.workspace_id:
                continue  # deleted since the token was made, or of another workspace
            parent = session.get(Node, node.parent_id) if node.parent_id else None
            inside_another = False
            while parent is not None and not inside_another:
                inside_another = parent.id in allowed
                parent = session.get(Node, parent.parent_id) if parent.parent_id else None
            if not inside_another:
                roots.append(node)
        return roots

    def _visible_ids(self, session: Session, principal: Principal) -> set[str] | None:
        """Every node id a folder-scoped principal may see; None when it sees the whole workspace."""
        if principal.access == ACCESS_ALL:
            return None
        roots = self._roots(session, principal)
        return {node.id for node in roots} | {row.id for row in self._subtree(session, [n.id for n in roots])}

    # ----- what a caller is shown of a node's surroundings -----

    def _shown_parent(self, session: Session, principal: Principal, node: Node) -> str | None:
        """The parent's id, or None when the parent is outside the caller's folders: a folder-scoped
        caller's own folders are its roots, and what holds them does not exist for it."""
        if node.parent_id is None or principal.access == ACCESS_ALL:
            return node.parent_id
        parent = session.get(Node, node.parent_id)
        return node.parent_id if parent is not None and self._visible(session, principal, parent) else None

    def _shown_path(self, session: Session, principal: Principal, node: Node) -> str:
        """The node's path from the top of what the caller sees: the knowledge base's root under All
        access, the caller's own folder under folder access."""
        parts = []
        current: Node | None = node
        while current is not None:
            parts.append(current.name)
            parent_id = self._shown_parent(session, principal, current)
            current = session.get(Node, parent_id) if parent_id else None
        return "/".join(reversed(parts))

    def _shown_hits(self, principal: Principal, hits: list[Hit]) -> list[Hit]:
        """Search hits as a folder-scoped caller sees them. A source label (`fs:alpha/inner/x.md`,
        `kb:KB/alpha/inner/x`) and a file's knowledge id (`fs:ws:KB:alpha/inner/x.md`) spell the path
        from the knowledge base's root, through folders the caller cannot see: they are cut to start
        at the caller's folder. A label whose path is not the node's place in the tree (a file moved
        since it was ingested) is left out; the knowledge id then ends in the node's id."""
        if principal.access != ACCESS_FOLDERS or not hits:
            return hits
        shown: dict[str, tuple[str, str | None]] = {}
        with self.db.session() as session:
            for hit in hits:
                if hit.node_id not in shown:
                    shown[hit.node_id] = self._scoped_source(session, principal, hit)
        return [replace(hit, source_id=shown[hit.node_id][0], source=shown[hit.node_id][1]) for hit in hits]

    def _scoped_source(self, session: Session, principal: Principal, hit: Hit) -> tuple[str, str | None]:
        chain: list[Node] = []
        current = session.get(Node, hit.node_id)
        while current is not None:
            chain.append(current)
            current = session.get(Node, current.parent_id) if current.parent_id else None
        chain.reverse()  # the knowledge base's root first, the document last
        top = next((i for i, node in enumerate(chain) if self._visible(session, principal, node)), len(chain) - 1)
        hidden = [node.name_key for node in chain[1:top]]
        visible_names = [node.name for node in chain[top:]]

        def cut(path: str) -> str | None:
            """The path without the hidden folders, if it spells them (then the visible ones) exactly."""
            parts = path.split("/")
            names = [name_key(" ".join(part.split())) for part in parts[:-1]]
            expected = hidden + [name_key(n) for n in visible_names[:-1]]
            return "/".join(parts[len(hidden):]) if names == expected else None

        label = hit.source
        if label is not None:
            provider, _, path = label.partition(":")
            if provider == "kb":
                label = f"kb:{'/'.join(visible_names)}"
            else:
                rest = cut(path) if "/" in path else path
                label = f"{provider}:{rest}" if rest is not None else None
        source_id = hit.source_id
        head, sep, item = source_id.rpartition(":")
        if sep and "/" in item:
            rest = cut(item)
            source_id = f"{head}:{rest if rest is not None else hit.node_id}"
        return source_id, label

    def _node_info(self, session: Session, principal: Principal, node: Node) -> NodeInfo:
        """A node as the node operations return it: which versions are published and drafted, and
        the parent only where the caller can see it."""
        published, draft = self._version_marks(session, [node.id]).get(node.id, (None, None))
        info = NodeInfo.of(node, published, draft)
        info.parent_id = self._shown_parent(session, principal, node)
        return info

    def _require_movable(self, session: Session, principal: Principal, node: Node) -> None:
        """A knowledge base's root folder stays where it is, and so does each folder a scoped caller
        was given: renaming or moving one would meet (and so reveal) names outside its scope."""
        if node.parent_id is None:
            raise InvalidArgument(ROOT_FIXED)
        if self._shown_parent(session, principal, node) is None:
            raise InvalidArgument(SCOPE_ROOT_FIXED)

    # ----- details of nodes -----

    @staticmethod
    def _sibling_taken(session: Session, parent_id: str, name: str, exclude: str | None = None) -> bool:
        stmt = select(Node.id).where(Node.parent_id == parent_id, Node.name_key == name_key(name))
        if exclude:
            stmt = stmt.where(Node.id != exclude)
        return session.scalar(stmt) is not None

    def unique_name(self, session: Session, parent_id: str, name: str, hint: str | None = None) -> str:
        """A sibling name not taken yet: the name, else the name with a hint, else with a counter."""
        candidates = [name] + ([f"{name} ({hint})"] if hint else [])
        candidates += [f"{name} ({i})" for i in range(2, 1000)]
        for candidate in candidates:
            if not self._sibling_taken(session, parent_id, candidate):
                return candidate
        raise InvalidArgument(f"too many documents named {name!r} in one folder")

    @staticmethod
    def _path_label(session: Session, node: Node) -> str:
        parts = []
        current: Node | None = node
        while current is not None:
            parts.append(current.name)
            current = session.get(Node, current.parent_id) if current.parent_id else None
        return "/".join(reversed(parts))

    @staticmethod
    def _version_marks(session: Session, node_ids: list[str]) -> dict[str, tuple[int | None, int | None]]:
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

    @staticmethod
    def _version(session: Session, node: Node, number: int) -> DocumentVersion:
        version = session.scalar(
            select(DocumentVersion).where(DocumentVersion.node_id == node.id, DocumentVersion.number == number)
        )
        if version is None:
            raise NotFound(f"version {number} not found")
        return version
