"""Writing the tree: folders and documents, drafts and publishing, names, summaries, metadata, moves.

Content goes through drafts (knowledge_base_mcp_server.md): a document's body is only searchable
once a version is published. Names, summaries, metadata and moves are never indexed, so they apply
at once.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from sqlalchemy import func, select, update
from sqlalchemy.orm import Session

from rag.errors import AlreadyExists, InvalidArgument, PermissionDenied
from rag.service.activity import recorded
from rag.service.checks import content_arg, content_hash, int_arg, metadata_arg, name_arg, name_key, summary_arg
from rag.service.content import tree
from rag.service.identity.principal import Principal
from rag.service.indexing.publish import lock_nodes, request_publish
from rag.service.content.views import CreatedDocument, Deleted, NodeInfo, VersionInfo
from rag.store.models import (
    ARCHIVED,
    DOCUMENT,
    DRAFT,
    FOLDER,
    ORIGIN_API,
    PUBLISHED,
    PUBLISHING,
    Chunk,
    DocumentVersion,
    KnowledgeBase,
    Node,
)

if TYPE_CHECKING:
    from rag.service.identity.access import Access
    from rag.service.activity import ActivityLog
    from rag.service.content.catalog import Catalog
    from rag.service.engines import Engines
    from rag.service.indexing.publish import Publisher, PublishQueue
    from rag.settings import Settings
    from rag.store.db import Database

log = logging.getLogger(__name__)

ASSISTANT_KB = "Assistant Documents"  # where an agent's writes without a parent land


class NodeEdits:
    def __init__(self, db: Database, settings: Settings, access: Access, activity: ActivityLog, catalog: Catalog,
                 engines: Engines, publisher: Publisher, publish_queue: PublishQueue) -> None:
        self.db = db
        self.settings = settings
        self.access = access
        self.activity = activity
        self.catalog = catalog
        self.engines = engines
        self.publisher = publisher
        self.publish_queue = publish_queue

    # ----- creating -----

    def _parent_for_new(self, session: Session, principal: Principal, parent_id: object, name: str) -> Node:
        """The folder a new node goes into, once its name is known to be free there. Without a
        parent: an agent's node lands in `Assistant Documents` (made on first use), a person's in the
        default knowledge base; a folder-scoped caller must say where, inside its folders."""
        if parent_id is None:
            if not self.access.sees_all(principal):
                raise InvalidArgument("`parent_id` is required: this token may only write inside its folders")
            parent = self._kb_root(session, principal, ASSISTANT_KB if principal.is_agent else self.settings.default_kb)
        else:
            parent = self.access.typed(session, principal, parent_id, FOLDER, "parent_id")
        if tree.sibling_taken(session, parent.id, name):
            raise AlreadyExists(f"a node named {name!r} already exists in this folder")
        return parent

    def _kb_root(self, session: Session, principal: Principal, kb_name: str) -> Node:
        kb = self.catalog.knowledge_base(principal, kb_name, create=True)
        return session.get(Node, kb.root_id)

    def _add_node(self, session: Session, principal: Principal, parent: Node, kind: str, name: str,
                  summary: str | None, metadata: dict[str, Any] | None) -> Node:
        node = Node(
            workspace_id=principal.workspace_id, kb_id=parent.kb_id, parent_id=parent.id, kind=kind, name=name,
            name_key=name_key(name), summary=summary, meta=metadata, origin=ORIGIN_API,
        )
        session.add(node)
        session.flush()
        node.source_label = f"kb:{tree.path_label(session, node)}"
        return node

    @recorded("create_folder", detail=("parent_id",))
    def create_folder(self, principal: Principal, parent_id: str | None, name: str,
                      summary: str | None = None, metadata: dict[str, Any] | None = None) -> NodeInfo:
        """A new folder, live at once (folders have no drafts)."""
        self.access.writer(principal)
        name, summary, metadata = name_arg(name, "folder"), summary_arg(summary), metadata_arg(metadata)
        with self.db.session() as session:
            parent = self._parent_for_new(session, principal, parent_id, name)
            folder = self._add_node(session, principal, parent, FOLDER, name, summary, metadata)
        return NodeInfo.of(folder)

    @recorded("create_document", detail=("parent_id",), after=lambda made: {"version_number": made.version_number})
    def create_document(self, principal: Principal, parent_id: str | None, name: str, content: str,
                        summary: str | None = None, metadata: dict[str, Any] | None = None) -> CreatedDocument:
        """A new document whose content is a draft (version 1), not searchable until published; its
        name, summary and metadata apply at once."""
        self.access.writer(principal)
        name, content = name_arg(name, "document"), content_arg(content)
        summary, metadata = summary_arg(summary), metadata_arg(metadata)
        with self.db.session() as session:
            parent = self._parent_for_new(session, principal, parent_id, name)
            node = self._add_node(session, principal, parent, DOCUMENT, name, summary, metadata)
            kb = session.get(KnowledgeBase, parent.kb_id)
            node.source_id = f"kb:{principal.workspace_id}:{kb.name}:{node.id}"
            session.add(DocumentVersion(node_id=node.id, number=1, body=content, content_hash=content_hash(content)))
        return CreatedDocument(node.id, node.name, node.parent_id, node.kb_id, 1, DRAFT)

    # ----- versions -----

    @recorded("update_document", target="node_id", after=lambda made: {"version_number": made.version_number})
    def update_document(self, principal: Principal, node_id: str, content: str) -> VersionInfo:
        """Replace the body as a new draft version (numbered after the newest). The published
        version stays live until a draft is published. Every edit is kept: concurrent edits, from
        any number of workers, become consecutive versions (the document is locked meanwhile)."""
        self.access.writer(principal)
        content = content_arg(content)
        with self.db.session() as session:
            node = self.access.typed(session, principal, node_id, DOCUMENT)
            lock_nodes(session, [node.id])
            newest = session.scalar(select(func.max(DocumentVersion.number)).where(DocumentVersion.node_id == node.id))
            version = DocumentVersion(
                node_id=node.id, number=int(newest or 0) + 1, body=content, content_hash=content_hash(content)
            )
            session.add(version)
        return VersionInfo.of(version)

    def _mark_publishing(self, principal: Principal, node_id: object, version_number: object,
                         from_status: str = DRAFT) -> tuple[VersionInfo, int | None]:
        """Mark a version `publishing`; (its view, its id when there is work to do). Publishing or
        published already: nothing to do. Any status but `from_status`: refused."""
        with self.db.session() as session:
            node = self.access.typed(session, principal, node_id, DOCUMENT)
            number = int_arg(version_number, "version_number", 1)
            # The document's lock before its version is read: two requests for one draft would
            # otherwise both see a draft, and the second would wait, holding the document, on the
            # version a worker has claimed, while that worker waits for the document (a deadlock).
            lock_nodes(session, [node.id])
            version = tree.version(session, node, number)
            start = version.status not in (PUBLISHING, PUBLISHED)
            if start and version.status != from_status:
                if from_status == DRAFT:
                    raise InvalidArgument(f"version {number} is {version.status}; only draft versions can be published")
                raise InvalidArgument(
                    f"version {number} is a {version.status}; rollback returns to an archived (earlier published) "
                    "version, a draft is published with publish_document_version"
                )
            if start:
                request_publish(session, version, from_status)
        return VersionInfo.of(version), (version.id if start else None)

    @recorded("publish_version", target="node_id", detail=("version_number",))
    def publish_version(self, principal: Principal, node_id: str, version_number: int) -> DocumentVersion:
        """Publish a draft and wait until it is searchable (the CLI, ingestion-like callers, tests).
        An indexing error is raised here, and the version is back in draft."""
        self.access.writer(principal)
        info, version_id = self._mark_publishing(principal, node_id, version_number)
        if version_id is not None:
            self.publisher.publish([version_id])
        with self.db.session() as session:
            return session.scalars(
                select(DocumentVersion).where(DocumentVersion.node_id == info.node_id,
                                              DocumentVersion.number == info.version_number)
            ).one()

    @recorded("publish_document_version", target="node_id", detail=("version_number",))
    def publish_document_version(self, principal: Principal, node_id: str, version_number: int) -> VersionInfo:
        """Publish a draft; returns at once with `publishing` (or `published` when it already was).
        Publishing a publishing or published version is a no-op; an archived one is refused."""
        self.access.writer(principal)
        info, version_id = self._mark_publishing(principal, node_id, version_number)
        if version_id is not None:
            self._publish_later(principal, info, version_id)
        return info

    @recorded("rollback_document_version", target="node_id", detail=("version_number",))
    def rollback_document_version(self, principal: Principal, node_id: str, version_number: int) -> VersionInfo:
        """Make an earlier published (now archived) version the published one again. People who
        are admins only, never agents; returns at once like publish_document_version."""
        self.access.writer(principal)
        self.access.require_role(principal, "admin")
        if principal.is_agent:
            raise PermissionDenied("rollback is for people who are admins, never for agents")
        info, version_id = self._mark_publishing(principal, node_id, version_number, from_status=ARCHIVED)
        if version_id is not None:
            self._publish_later(principal, info, version_id)
        return info

    def _publish_later(self, principal: Principal, info: VersionInfo, version_id: int) -> None:
        """Queue the job; any worker may end up doing it (the publisher puts a failed one back in
        the status it was requested from, which the version's job row keeps: draft, or archived
        for a rollback)."""
        info.status = PUBLISHING

        def done(ok: bool) -> None:
            self.activity.record(principal, "publish_completed", info.node_id, "ok" if ok else "error",
                                 {"version_number": info.version_number})

        self.publish_queue.submit(version_id, done)

    def wait_for_publishing(self, timeout: float | None = None) -> bool:
        """Block until every queued publish has finished; True when none is left."""
        return self.publish_queue.wait(timeout)

    # ----- names, summaries, metadata -----

    def _rename(self, principal: Principal, node_id: object, name: object, kind: str) -> NodeInfo:
        self.access.writer(principal)
        new_name = name_arg(name, kind)
        with self.db.session() as session:
            node = self.access.typed(session, principal, node_id, kind)
            self.access.require_movable(session, principal, node)
            if tree.sibling_taken(session, node.parent_id, new_name, exclude=node.id):
                raise AlreadyExists(f"a node named {new_name!r} already exists in this folder")
            node.name, node.name_key = new_name, name_key(new_name)
            self._relabel(session, node)
            return self.access.node_info(session, principal, node)

    @recorded("rename_document", target="node_id")
    def rename_document(self, principal: Principal, node_id: str, name: str) -> NodeInfo:
        return self._rename(principal, node_id, name, DOCUMENT)

    @recorded("rename_folder", target="node_id")
    def rename_folder(self, principal: Principal, node_id: str, name: str) -> NodeInfo:
        return self._rename(principal, node_id, name, FOLDER)

    @recorded("set_summary", target="node_id")
    def set_summary(self, principal: Principal, node_id: str, summary: str | None) -> NodeInfo:
        """Set the summary, or clear it with null (or a blank string)."""
        self.access.writer(principal)
        return self._annotate(principal, node_id, summary=summary_arg(summary))

    @recorded("set_metadata", target="node_id")
    def set_metadata(self, principal: Principal, node_id: str, metadata: dict[str, Any] | None) -> NodeInfo:
        """Replace the whole metadata object (keys left out are gone); null removes it all."""
        self.access.writer(principal)
        return self._annotate(principal, node_id, meta=metadata_arg(metadata))

    def _annotate(self, principal: Principal, node_id: object, **fields: Any) -> NodeInfo:
        """Set descriptive fields of a folder or document: never indexed, so live at once."""
        with self.db.session() as session:
            node = self.access.node(session, principal, node_id)
            for name, value in fields.items():
                setattr(node, name, value)
            return self.access.node_info(session, principal, node)

    def _relabel(self, session: Session, node: Node) -> None:
        """Nodes made through the API are labelled by their path (`kb:KB/folder/name`); a rename or a
        move changes that path for the node and everything below it. Ingested labels name files."""
        paths = {node.id: tree.path_label(session, node)}
        todo = [node]
        while todo:
            current = todo.pop()
            if current.source_label is None or current.source_label.startswith("kb:"):
                current.source_label = f"kb:{paths[current.id]}"
            if current.kind == FOLDER:
                for child in session.scalars(select(Node).where(Node.parent_id == current.id)):
                    paths[child.id] = f"{paths[current.id]}/{child.name}"
                    todo.append(child)

    # ----- deleting and moving -----

    def _delete(self, principal: Principal, node_id: object, kind: str) -> Deleted:
        self.access.writer(principal)
        with self.db.session() as session:
            node = self.access.typed(session, principal, node_id, kind)
            self.access.require_movable(session, principal, node)
            below = tree.subtree(session, [node.id]) if kind == FOLDER else []
        documents = [r.id for r in below if r.kind == DOCUMENT] + ([node.id] if kind == DOCUMENT else [])
        folders = [r.id for r in below if r.kind == FOLDER] + ([node.id] if kind == FOLDER else [])
        self.remove_nodes(documents + folders[::-1])  # documents first, then folders deepest first
        return Deleted(node.id, kind, len(documents), len(folders))

    @recorded("delete_document", target="node_id")
    def delete_document(self, principal: Principal, node_id: str) -> Deleted:
        """Delete a document, every version, and its chunks in both lanes."""
        return self._delete(principal, node_id, DOCUMENT)

    @recorded("delete_folder", target="node_id")
    def delete_folder(self, principal: Principal, node_id: str) -> Deleted:
        """Delete a folder and everything inside it, sub-folders and documents, from both lanes."""
        return self._delete(principal, node_id, FOLDER)

    def remove_nodes(self, node_ids: list[str]) -> None:
        """Remove nodes, no questions asked (the callers checked): their chunks leave the search
        index first, then the rows go."""
        if not node_ids:
            return
        self.publisher.drop_chunks_of_nodes(node_ids)
        with self.db.session() as session:
            for i in range(0, len(node_ids), 500):
                session.query(Node).filter(Node.id.in_(node_ids[i:i + 500])).delete(synchronize_session=False)

    @recorded("move_node", target="node_id", detail=("parent_id",))
    def move_node(self, principal: Principal, node_id: str, parent_id: str) -> NodeInfo:
        """Move a document or folder (with everything inside) into another folder. Both must be
        visible to the caller; no cycles; sibling names stay unique (ignoring case)."""
        self.access.writer(principal)
        with self.db.session() as session:
            node = self.access.node(session, principal, node_id)
            target = self.access.typed(session, principal, parent_id, FOLDER, "parent_id")
            self.access.require_movable(session, principal, node)
            if target.id == node.parent_id:
                return self.access.node_info(session, principal, node)
            ancestor: Node | None = target
            while ancestor is not None:
                if ancestor.id == node.id:
                    raise InvalidArgument("a folder cannot be moved into itself or into one of its sub-folders")
                ancestor = session.get(Node, ancestor.parent_id) if ancestor.parent_id else None
            if tree.sibling_taken(session, target.id, node.name, exclude=node.id):
                raise AlreadyExists(f"a node named {node.name!r} already exists in the target folder")
            old_kb, new_kb = node.kb_id, target.kb_id
            node.parent_id = target.id
            moved_chunks = self._change_kb(session, node, new_kb) if old_kb != new_kb else []
            self._relabel(session, node)
            info = self.access.node_info(session, principal, node)
        if moved_chunks:
            self._carry_chunks(moved_chunks, old_kb)
        return info

    def _carry_chunks(self, chunks: list[tuple[int, str]], old_kb: str) -> None:
        """Lanes filter on each chunk's knowledge base, and may keep it outside the store (tantivy,
        Chroma): every lane of the search index follows the moved chunks (a lane that fails is
        logged and repaired by the next start's reconcile; the move itself stands)."""
        self.engines.index.move([chunk_id for chunk_id, _ in chunks], old_kb)

    def _change_kb(self, session: Session, node: Node, kb_id: str) -> list[tuple[int, str]]:
        """A move into another knowledge base: the nodes and their chunks change knowledge base
        (the keyword lane filters on the chunk's); returns the (chunk id, node id) pairs whose
        vectors must follow into that knowledge base's collection."""
        ids = [node.id] + [row.id for row in tree.subtree(session, [node.id])]
        chunks: list[tuple[int, str]] = []
        for i in range(0, len(ids), 500):
            part = ids[i:i + 500]
            session.execute(update(Node).where(Node.id.in_(part)).values(kb_id=kb_id))
            chunks += [tuple(r) for r in session.execute(select(Chunk.id, Chunk.node_id).where(Chunk.node_id.in_(part)))]
            session.execute(update(Chunk).where(Chunk.node_id.in_(part)).values(kb_id=kb_id))
        node.kb_id = kb_id
        return chunks
