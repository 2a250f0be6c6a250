"""Reading the tree: search, documents, versions, listings, the folder tree, names, roots.

Only published content is searchable or readable through get_document; the version tools also
show drafts. Everything is seen through the caller's scope, where out of scope reads as missing.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from sqlalchemy import func, select, update

from rag.errors import InvalidArgument, NotFound
from rag.service.activity import recorded
from rag.service.checks import MAX_NAME_CHARS, int_arg, is_id, text_arg
from rag.render import locator_fields
from rag.service.content import tree
from rag.service.identity.access import NOT_FOUND
from rag.service.arguments import DOCUMENTS_LIMIT_DEFAULT, DOCUMENTS_LIMIT_MAX, NAMES_LIMIT_DEFAULT, NAMES_LIMIT_MAX
from rag.service.identity.principal import Principal
from rag.service.arguments import check_query
from rag.service.content.views import (
    CurrentNode,
    DocumentHit,
    DocumentView,
    FolderTree,
    NamedNode,
    NodeInfo,
    TreeNode,
    VersionInfo,
    VersionView,
)
from rag.store.models import DOCUMENT, FOLDER, PUBLISHED, DocumentVersion, Node

if TYPE_CHECKING:
    from rag.service.identity.access import Access
    from rag.service.activity import ActivityLog
    from rag.service.engines import Engines
    from rag.settings import Settings
    from rag.store.db import Database

log = logging.getLogger(__name__)

MAX_TREE_NODES = 10_000  # a larger tree is cut, breadth first, and says so with `truncated`


class NodeReads:
    def __init__(self, db: Database, settings: Settings, access: Access, activity: ActivityLog,
                 engines: Engines) -> None:
        self.db = db
        self.settings = settings
        self.access = access
        self.activity = activity
        self.engines = engines

    @recorded("search_documents", detail=("limit",), after=lambda hits: {"results": len(hits)})
    def search_documents(
        self, principal: Principal, query: str, limit: int = DOCUMENTS_LIMIT_DEFAULT
    ) -> list[DocumentHit]:
        """Hybrid search over published documents; each hit names the node get_document reads."""
        self.access.reader(principal)
        query = check_query(query)
        limit = int_arg(limit, "limit", 1, DOCUMENTS_LIMIT_MAX, default=DOCUMENTS_LIMIT_DEFAULT)
        retriever = self.engines.retriever
        hits = retriever.retrieve(retriever.query(query, search=True), self.access.scope(principal), limit)
        chars = self.settings.retrieve.excerpt_chars
        return [
            DocumentHit(h.node_id, h.title, h.kb_id, h.version, round(h.score, 6), list(h.retrievers),
                        list(h.heading_path), h.excerpt(chars), h.page, **locator_fields(h))
            for h in hits
        ]

    @recorded("get_document", target="node_id", after=lambda doc: {"citation_count": doc.citation_count})
    def get_document(self, principal: Principal, node_id: str) -> DocumentView:
        """The published version of a document, whole; a draft-only document reads as not found.
        Each read counts one citation on the document."""
        self.access.reader(principal)
        with self.db.session() as session:
            node = self.access.typed(session, principal, node_id, DOCUMENT)
            version = session.scalar(
                select(DocumentVersion).where(DocumentVersion.node_id == node.id, DocumentVersion.status == PUBLISHED)
            )
            if version is None:
                raise NotFound(NOT_FOUND)
            # In SQL, so concurrent reads all count; updated_at is kept, a read is not an edit.
            session.execute(
                update(Node).where(Node.id == node.id)
                .values(citation_count=Node.citation_count + 1, updated_at=Node.updated_at)
                .execution_options(synchronize_session=False)
            )
            count = session.scalar(select(Node.citation_count).where(Node.id == node.id))
            parent_id = self.access.shown_parent(session, principal, node)
        return DocumentView(
            node.id, node.name, parent_id, node.kb_id, node.summary, node.meta, version.number, version.body,
            version.published_at, node.updated_at, int(count or 0),
        )

    def versions(self, principal: Principal, node_id: str) -> list[DocumentVersion]:
        """Every version of a document (rows with bodies), newest first."""
        self.access.reader(principal)
        with self.db.session() as session:
            node = self.access.typed(session, principal, node_id, DOCUMENT)
            return list(
                session.scalars(
                    select(DocumentVersion).where(DocumentVersion.node_id == node.id).order_by(DocumentVersion.number.desc())
                )
            )

    @recorded("get_document_versions", target="node_id")
    def get_document_versions(self, principal: Principal, node_id: str) -> list[VersionInfo]:
        """The whole history, newest first, drafts included, without bodies."""
        return [VersionInfo.of(v) for v in self.versions(principal, node_id)]

    @recorded("get_document_version", target="node_id", detail=("version_number",))
    def get_document_version(self, principal: Principal, node_id: str, version_number: int) -> VersionView:
        """One version by its 1-based number, with its body, whatever its status."""
        self.access.reader(principal)
        with self.db.session() as session:
            node = self.access.typed(session, principal, node_id, DOCUMENT)
            version = tree.version(session, node, int_arg(version_number, "version_number", 1))
            return VersionView.of_body(node, version)

    @recorded("list_children", target="parent_id")
    def list_children(self, principal: Principal, parent_id: str) -> list[NodeInfo]:
        """A folder's immediate contents, folders first, then by name."""
        self.access.reader(principal)
        with self.db.session() as session:
            parent = self.access.typed(session, principal, parent_id, FOLDER, "parent_id")
            children = list(
                session.scalars(select(Node).where(Node.parent_id == parent.id).order_by(Node.kind.desc(), Node.name_key))
            )
            marks = tree.version_marks(session, [c.id for c in children if c.kind == DOCUMENT])
        return [NodeInfo.of(c, *marks.get(c.id, (None, None))) for c in children]

    @recorded("get_folder_tree", target="root_id")
    def get_folder_tree(self, principal: Principal, root_id: str | None = None) -> FolderTree:
        """Names and structure only, from one folder or from every root the caller sees."""
        self.access.reader(principal)
        with self.db.session() as session:
            if root_id is None:
                roots = self.access.roots(session, principal)
            else:
                roots = [self.access.typed(session, principal, root_id, FOLDER, "root_id")]
            rows = tree.subtree(session, [r.id for r in roots])
        room = max(0, MAX_TREE_NODES - len(roots))
        folders = FolderTree([TreeNode(r.id, r.name, FOLDER, []) for r in roots], truncated=len(rows) > room)
        placed = {t.node_id: t for t in folders.roots}
        for row in rows[:room]:  # breadth first: a cut keeps the upper levels whole
            item = TreeNode(row.id, row.name, row.kind, [] if row.kind == FOLDER else None)
            placed[row.id] = item
            placed[row.parent_id].children.append(item)  # type: ignore[index, union-attr]
        return folders

    @recorded("search_nodes_by_name", detail=("limit",), after=lambda found: {"results": len(found)})
    def search_nodes_by_name(
        self, principal: Principal, query: str, limit: int = NAMES_LIMIT_DEFAULT
    ) -> list[NamedNode]:
        """Folders and documents whose name contains the query, ignoring case; shortest names first."""
        self.access.reader(principal)
        needle = " ".join(text_arg(query, "query").split()).casefold()
        if len(needle) > MAX_NAME_CHARS:
            raise InvalidArgument(f"`query` must be at most {MAX_NAME_CHARS} characters")
        limit = int_arg(limit, "limit", 1, NAMES_LIMIT_MAX, default=NAMES_LIMIT_DEFAULT)
        pattern = "%" + needle.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"
        with self.db.session() as session:
            visible = self.access.visible_ids(session, principal)
            stmt = (
                select(Node)
                .where(Node.workspace_id == principal.workspace_id, Node.name_key.like(pattern, escape="\\"))
                .order_by(func.length(Node.name_key), Node.name_key, Node.id)
            )
            if visible is not None and len(visible) <= 5000:  # else filtered below, row by row
                stmt = stmt.where(Node.id.in_(visible))
            found: list[NamedNode] = []
            for node in session.scalars(stmt):
                if visible is not None and node.id not in visible:
                    continue
                found.append(NamedNode(node.id, node.name, node.kind, self.access.shown_parent(session, principal, node),
                                       node.kb_id, self.access.shown_path(session, principal, node)))
                if len(found) == limit:
                    break
        return found

    @recorded("get_root_nodes")
    def get_root_nodes(self, principal: Principal) -> list[NodeInfo]:
        """The caller's top-level nodes: each knowledge base's root folder under All access, its own
        folders under folder access, an empty list without access (this one never refuses)."""
        with self.db.session() as session:
            return [self.access.node_info(session, principal, node) for node in self.access.roots(session, principal)]

    @recorded("get_current_node")
    def get_current_node(self, principal: Principal, node_id: object = None) -> CurrentNode:
        """The node the person is viewing, as the surface read it from the request, or null when
        there is none. knowledge_base_mcp_server.md: conversation context, not an access-scoped
        lookup; it never fails and never enforces scope, so the id may be one the caller cannot
        read (reading it then says "not found", as for any id)."""
        if not isinstance(node_id, str) or not is_id(node_id.strip()):  # bounded, printable: else none
            return CurrentNode(None)
        return CurrentNode(node_id.strip())
