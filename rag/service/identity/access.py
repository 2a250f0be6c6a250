"""The access policy: who may see and do what. Every surface and every part of the service asks it.

One place owns the rules, so no surface can apply a different one:
- roles and scopes (`reader`, `writer`, `require_role`);
- the knowledge bases a caller sees (`knowledge_bases`, `model_ids`) and `resolve_kb`, which
  answers a missing knowledge base and one the caller cannot see with the same "not found";
- what a search may look at (`scope`);
- the nodes a caller sees (`node`, `typed`, `roots`, `visible_ids`), which answer "not found" alike
  for a node that does not exist, one in another workspace and one outside the caller's folders;
- what a folder-scoped caller is shown of a node's surroundings (`shown_parent`, `shown_path`,
  `shown_hits`): nothing above its own folders.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from sqlalchemy.orm import Session

from rag.service.quotas import MemoryCounts, Quotas, StoreCounts
from rag.service.slots import MemorySlots, StoreSlots
from rag.errors import InvalidArgument, NotFound, PermissionDenied
from rag.retrieve.types import Hit, Scope
from rag.service.checks import id_arg, lookup_name_arg, name_key
from rag.service.identity.principal import ACCESS_ALL, ACCESS_FOLDERS, ROLES, SCOPE_READ, SCOPE_WRITE, Principal
from rag.service.content.tree import ROOT_FIXED, SCOPE_ROOT_FIXED, ensure_workspace, subtree, version_marks, workspace_kbs
from rag.service.content.views import NodeInfo
from rag.store.models import DOCUMENT, KnowledgeBase, Node

if TYPE_CHECKING:
    from rag.settings import Settings
    from rag.store.db import Database

NOT_FOUND = "not found"
KB_NOT_FOUND = "knowledge base not found"
NO_ACCESS = "no knowledge base access"
DEFAULT_MODEL = "default"  # the default knowledge base's model id on the OpenAI-compatible endpoints


class Access:
    def __init__(self, db: Database, settings: Settings) -> None:
        self.db = db
        self.settings = settings
        embedded = db.dialect == "sqlite"
        self.quotas = Quotas(settings.quota, MemoryCounts() if embedded else StoreCounts(db))
        # Calls in progress per caller (streams, uploads), shared by processes where the rates are.
        self.slots = MemorySlots() if embedded else StoreSlots(db)

    def take(self, principal: Principal, kind: str) -> None:
        """Count a call of `kind` (search, ask, upload, write) against the caller's quotas, or raise
        RateLimited (rag/service/quotas.py)."""
        self.quotas.take(principal, kind)

    # ----- roles and scopes -----

    @staticmethod
    def require_role(principal: Principal, role: str) -> None:
        if principal.role not in ROLES or ROLES.index(principal.role) < ROLES.index(role):
            raise PermissionDenied(f"this needs the {role} role")

    def require_write(self, principal: Principal) -> None:
        """Changing content: editor or admin, with the knowledge:write scope."""
        self.require_role(principal, "editor")
        if SCOPE_WRITE not in principal.scopes:
            raise PermissionDenied("this needs the knowledge:write scope")

    def reader(self, principal: Principal) -> None:
        """Reading nodes or searching: any role, knowledge:read, and some knowledge-base access.
        Without access every read fails: an empty result would not tell "no access" from "no match"."""
        if principal.access not in (ACCESS_ALL, ACCESS_FOLDERS):
            raise PermissionDenied(NO_ACCESS)
        if SCOPE_READ not in principal.scopes:
            raise PermissionDenied("this needs the knowledge:read scope")
        self.require_role(principal, "viewer")

    @staticmethod
    def sees_all(principal: Principal) -> bool:
        """Knowledge-base access to the whole workspace (not only some folders)."""
        return principal.access == ACCESS_ALL

    def require_all(self, principal: Principal, doing: str) -> None:
        """What a folder-scoped caller may not do: it would reach (or make) what it cannot see."""
        if not self.sees_all(principal):
            raise PermissionDenied(f"{doing} needs knowledge-base access all")

    def require_local_admin(self, principal: Principal) -> None:
        """The local operator only (whoever can open RAG_HOME runs `rag`): export and import,
        whose archives hold every body and every token's hash."""
        if principal.token_id is not None or principal.is_agent or not self.sees_all(principal):
            raise PermissionDenied("export and import are for the local administrator (the `rag` command), never a token")
        self.require_role(principal, "admin")

    def writer(self, principal: Principal) -> None:
        """Writing nodes: editor or admin, knowledge:write, and some knowledge-base access."""
        if principal.access not in (ACCESS_ALL, ACCESS_FOLDERS):
            raise PermissionDenied(NO_ACCESS)
        self.require_write(principal)
        self.take(principal, "write")

    # ----- knowledge bases -----

    def knowledge_bases(self, principal: Principal) -> list[KnowledgeBase]:
        """The knowledge bases the caller sees, oldest first: all of its workspace under access all,
        those holding its folders under folder access, none without access."""
        return self._workspace_and_visible_kbs(principal)[1]

    def _workspace_and_visible_kbs(self, principal: Principal) -> tuple[list[KnowledgeBase], list[KnowledgeBase]]:
        """Every knowledge base of the caller's workspace, and those the caller sees, in one read.
        A workspace always has its default knowledge base, so none means one not made yet: it is
        made then (each search reads once, rather than checking for the workspace first)."""
        with self.db.session() as session:
            every = workspace_kbs(session, principal.workspace_id)
            if every:
                return every, self.visible_among(session, principal, every)
        ensure_workspace(self.db, self.settings, principal.workspace_id)
        with self.db.session() as session:
            every = workspace_kbs(session, principal.workspace_id)
            return every, self.visible_among(session, principal, every)

    def visible_among(self, session: Session, principal: Principal, kbs: list[KnowledgeBase]) -> list[KnowledgeBase]:
        """Those of these knowledge bases (of the caller's workspace) the caller sees."""
        if principal.access == ACCESS_ALL:
            return kbs
        if principal.access != ACCESS_FOLDERS:
            return []
        holding = {root.kb_id for root in self.roots(session, principal)}
        return [kb for kb in kbs if kb.id in holding]

    def model_ids(self, principal: Principal) -> dict[str, KnowledgeBase]:
        """Model id (`default`, else the knowledge base's name) to knowledge base, default first.
        The default knowledge base is always listed: every workspace has one, so listing it tells
        nothing; a base named `default` that is not the default is shadowed."""
        every, visible = self._workspace_and_visible_kbs(principal)
        default_key = name_key(self.settings.default_kb)
        found = {DEFAULT_MODEL: kb for kb in every if kb.name_key == default_key}
        for kb in visible:
            if kb.name_key not in (default_key, DEFAULT_MODEL):
                found[kb.name] = kb
        return found

    def resolve_kb(self, principal: Principal, name: object) -> KnowledgeBase:
        """The knowledge base a name (any case) or model id picks among those the caller sees. A
        missing one and one the caller cannot see answer alike, so a name never tells it exists."""
        name = lookup_name_arg(name, KB_NOT_FOUND)  # a name no base can have is never looked up
        visible = self.model_ids(principal)
        if name in visible:
            return visible[name]
        key = name_key(name)
        found = next((kb for kb in visible.values() if kb.name_key == key), None)
        if found is None:
            raise NotFound(KB_NOT_FOUND)
        return found

    def scope(self, principal: Principal, kb_name: str | None = None) -> Scope:
        """What this principal may search: its workspace, one knowledge base or every one it sees,
        and under folder access only the documents inside its folders."""
        self.reader(principal)
        if kb_name is not None:
            kb_ids: tuple[str, ...] = (self.resolve_kb(principal, kb_name).id,)
        else:
            kb_ids = tuple(kb.id for kb in self.knowledge_bases(principal))
        if principal.access == ACCESS_ALL:
            return Scope(principal.workspace_id, kb_ids)
        with self.db.session() as session:
            return Scope(principal.workspace_id, kb_ids, self.visible_documents(session, principal))

    def visible_documents(self, session: Session, principal: Principal) -> frozenset[str] | None:
        """The documents a folder-scoped caller may read; None when it sees the whole workspace."""
        if principal.access == ACCESS_ALL:
            return None
        roots = self.roots(session, principal)
        return frozenset(row.id for row in subtree(session, [r.id for r in roots]) if row.kind == DOCUMENT)

    # ----- nodes -----

    def node(self, session: Session, principal: Principal, node_id: object, arg: str = "node_id") -> Node:
        node_id = id_arg(node_id, arg, NOT_FOUND)  # an impossible id is "not found" before any look-up
        node = session.get(Node, node_id)
        if node is None or node.workspace_id != principal.workspace_id or not self.visible(session, principal, node):
            raise NotFound(NOT_FOUND)
        return node

    def typed(self, session: Session, principal: Principal, node_id: object, kind: str, arg: str = "node_id") -> Node:
        """A node that must be a folder (or a document). The caller can see it, so saying what it
        is instead leaks nothing."""
        node = self.node(session, principal, node_id, arg)
        if node.kind != kind:
            raise InvalidArgument(f"`{arg}` is a {node.kind}, not a {kind}")
        return node

    @staticmethod
    def visible(session: Session, principal: Principal, node: Node) -> bool:
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
    def roots(session: Session, principal: Principal) -> list[Node]:
        """The top of what this principal sees: each knowledge base's root folder under All access,
        its own folders (those not inside another of them) under folder access, else nothing."""
        if principal.access == ACCESS_ALL:
            return [session.get(Node, kb.root_id) for kb in workspace_kbs(session, principal.workspace_id)
                    if kb.root_id]
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

    def visible_ids(self, session: Session, principal: Principal) -> set[str] | None:
        """Every node id a folder-scoped principal may see; None when it sees the whole workspace."""
        if principal.access == ACCESS_ALL:
            return None
        roots = self.roots(session, principal)
        return {node.id for node in roots} | {row.id for row in subtree(session, [n.id for n in roots])}

    # ----- what a caller is shown of a node's surroundings -----

    def shown_parent(self, session: Session, principal: Principal, node: Node) -> str | None:
        """The parent's id, or None when the parent is outside the caller's folders: a folder-scoped
        caller's own folders are its roots, and what holds them does not exist for it."""
        if node.parent_id is None or principal.access == ACCESS_ALL:
            return node.parent_id
        parent = session.get(Node, node.parent_id)
        return node.parent_id if parent is not None and self.visible(session, principal, parent) else None

    def shown_path(self, session: Session, principal: Principal, node: Node) -> str:
        """The node's path from the top of what the caller sees: the knowledge base's root under All
        access, the caller's own folder under folder access."""
        parts = []
        current: Node | None = node
        while current is not None:
            parts.append(current.name)
            parent_id = self.shown_parent(session, principal, current)
            current = session.get(Node, parent_id) if parent_id else None
        return "/".join(reversed(parts))

    def node_info(self, session: Session, principal: Principal, node: Node) -> NodeInfo:
        """A node as the node operations return it: which versions are published and drafted, and
        the parent only where the caller can see it."""
        published, draft = version_marks(session, [node.id]).get(node.id, (None, None))
        info = NodeInfo.of(node, published, draft)
        info.parent_id = self.shown_parent(session, principal, node)
        return info

    def require_movable(self, session: Session, principal: Principal, node: Node) -> None:
        """A knowledge base's root folder stays where it is, and so does each folder a scoped caller
        was given: renaming or moving one would meet (and so reveal) names outside its scope."""
        if node.parent_id is None:
            raise InvalidArgument(ROOT_FIXED)
        if self.shown_parent(session, principal, node) is None:
            raise InvalidArgument(SCOPE_ROOT_FIXED)

    def shown_hits(self, principal: Principal, hits: list[Hit]) -> list[Hit]:
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
        top = next((i for i, node in enumerate(chain) if self.visible(session, principal, node)), len(chain) - 1)
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
