"""Reviewing what was written: the drafts awaiting review in a knowledge base, the difference between
two versions of a document, one document's activity, and who wrote each version.

knowledge_base_mcp_server.md: agents write drafts that a person reviews and publishes in the
editor (rag/web/). These are the reads the editor needs beyond the node operations; the HTTP API
offers each one too (rag/api/routes/review.py), with the access rules written here once:

- drafts awaiting review: editors and admins (people or agents), among the documents they may see;
- the difference between two versions: anyone who may read the document (both versions are its own);
- a document's activity: editors and admins who may see the document (the workspace's whole history
  stays admin-only: rag/service/activity.py).

Who wrote a version is read from the history: the `create_document`, `update_document` and
`upload_document` rows record the version they made (`version_number`); a version with no such row
(ingested from files) has no author.
"""

from __future__ import annotations

import difflib
from typing import TYPE_CHECKING

from sqlalchemy import select
from sqlalchemy.orm import Session

from rag.service.activity import recorded, shown_detail
from rag.service.arguments import ACTIVITY_LIMIT_DEFAULT, ACTIVITY_LIMIT_MAX, DRAFTS_LIMIT_DEFAULT, DRAFTS_LIMIT_MAX
from rag.service.checks import int_arg
from rag.service.content import tree
from rag.service.identity.principal import Principal
from rag.service.identity.tokens import is_agent_actor
from rag.service.content.views import DocumentActivity, DraftInfo, NodeActivityEntry, NodeInfo, VersionDiff
from rag.store.models import DOCUMENT, DRAFT, Activity, DocumentVersion, Node

if TYPE_CHECKING:
    from rag.service.identity.access import Access
    from rag.service.activity import ActivityLog
    from rag.store.db import Database

WRITES = ("create_document", "update_document", "upload_document")
# What a node's history leaves out: reads that only list or show it (the editor makes several per
# page). Writes, publishes, refusals and citations (get_document) stay.
QUIET = ("document_activity", "diff_versions", "get_document_versions", "get_document_version", "list_children",
         "get_folder_tree")
MAX_DIFF_LINES = 20_000  # a longer difference is cut, and says so with `truncated`


def version_authors(session: Session, node_ids: list[str]) -> dict[tuple[str, int], str]:
    """(node id, version number) -> the actor who wrote that version, from the history's rows."""
    found: dict[tuple[str, int], str] = {}
    for i in range(0, len(node_ids), 500):
        rows = session.execute(
            select(Activity.target, Activity.actor, Activity.detail, Activity.action)
            .where(Activity.action.in_(WRITES), Activity.outcome == "ok", Activity.target.in_(node_ids[i:i + 500]))
            .order_by(Activity.id)
        )
        for target, actor, detail, action in rows:
            number = (detail or {}).get("version_number")
            if not isinstance(number, int) and action == "create_document":
                number = 1  # rows written before the number was recorded: a new document is version 1
            if isinstance(number, int):
                found[(target, number)] = actor
    return found


class Review:
    def __init__(self, db: Database, access: Access, activity: ActivityLog) -> None:
        self.db = db
        self.access = access
        self.activity = activity

    @recorded("list_drafts", target="kb", after=lambda found: {"results": len(found)})
    def list_drafts(self, principal: Principal, kb: str | None = None,
                    limit: int = DRAFTS_LIMIT_DEFAULT) -> list[DraftInfo]:
        """The drafts awaiting review in one knowledge base (default: the default one), newest first:
        each document's draft versions newer than its published one, with who wrote them. Editors and
        admins; a folder-scoped caller sees the drafts inside its folders only."""
        self.access.reader(principal)
        self.access.require_role(principal, "editor")
        limit = int_arg(limit, "limit", 1, DRAFTS_LIMIT_MAX, default=DRAFTS_LIMIT_DEFAULT)
        base = self.access.resolve_kb(principal, "default" if kb is None else kb)
        with self.db.session() as session:
            visible = self.access.visible_ids(session, principal)
            rows = session.execute(
                select(DocumentVersion, Node)
                .join(Node, Node.id == DocumentVersion.node_id)
                .where(Node.kb_id == base.id, Node.kind == DOCUMENT, DocumentVersion.status == DRAFT)
                .order_by(DocumentVersion.created_at.desc(), DocumentVersion.id.desc())
            ).all()
            rows = [(v, n) for v, n in rows if visible is None or n.id in visible]
            published = tree.version_marks(session, list({n.id for _, n in rows}))
            rows = [(v, n) for v, n in rows if v.number > (published.get(n.id, (None, None))[0] or 0)][:limit]
            authors = version_authors(session, list({n.id for _, n in rows}))
            return [
                DraftInfo(n.id, n.name, n.kb_id, self.access.shown_path(session, principal, n), v.number,
                          published.get(n.id, (None, None))[0], v.created_at, authors.get((n.id, v.number)),
                          is_agent_actor(authors.get((n.id, v.number))))
                for v, n in rows
            ]

    @recorded("diff_versions", target="node_id", detail=("from_version", "to_version"))
    def diff_versions(self, principal: Principal, node_id: str, from_version: int, to_version: int) -> VersionDiff:
        """The line-by-line difference between two versions of a document (unified, three lines of
        context), whatever their status: whoever may read the document may read both."""
        self.access.reader(principal)
        with self.db.session() as session:
            node = self.access.typed(session, principal, node_id, DOCUMENT)
            old = tree.version(session, node, int_arg(from_version, "from_version", 1))
            new = tree.version(session, node, int_arg(to_version, "to_version", 1))
            lines = list(difflib.unified_diff(
                old.body.splitlines(), new.body.splitlines(), f"version {old.number}", f"version {new.number}",
                lineterm="", n=3))
            added = sum(1 for line in lines if line.startswith("+") and not line.startswith("+++"))
            removed = sum(1 for line in lines if line.startswith("-") and not line.startswith("---"))
            return VersionDiff(node.id, old.number, old.status, new.number, new.status, added, removed,
                               lines[:MAX_DIFF_LINES], len(lines) > MAX_DIFF_LINES)

    @recorded("document_activity", target="node_id", detail=("limit",))
    def document_activity(self, principal: Principal, node_id: str,
                          limit: int = ACTIVITY_LIMIT_DEFAULT) -> DocumentActivity:
        """One document's (or folder's) history, newest first, without the reads that only list or show
        it (QUIET), and how often it was cited (read with get_document). Editors and admins who may
        see the node."""
        self.access.reader(principal)
        self.access.require_role(principal, "editor")
        limit = int_arg(limit, "limit", 1, ACTIVITY_LIMIT_MAX, default=ACTIVITY_LIMIT_DEFAULT)
        self.activity.flush()
        with self.db.session() as session:
            node = self.access.node(session, principal, node_id)
            visible = self.access.visible_ids(session, principal)
            rows = session.scalars(
                select(Activity).where(Activity.workspace_id == principal.workspace_id, Activity.target == node.id,
                                       Activity.action.not_in(QUIET))
                .order_by(Activity.id.desc()).limit(limit)
            )
            entries = [NodeActivityEntry(row.id, row.created_at, row.actor, is_agent_actor(row.actor), row.action,
                                     row.outcome, shown_detail(row.detail, visible)) for row in rows]
            return DocumentActivity(node.id, node.name, node.kind, node.citation_count, entries)

    def node_info(self, principal: Principal, node_id: str) -> NodeInfo:
        """A folder or document as listings show it (name, summary, metadata, versions marked), by id."""
        self.access.reader(principal)
        with self.db.session() as session:
            return self.access.node_info(session, principal, self.access.node(session, principal, node_id))

    def version_authors(self, principal: Principal, node_id: str) -> dict[int, str]:
        """Version number -> who wrote it, for a document the caller may read (the editor's versions table)."""
        self.access.reader(principal)
        with self.db.session() as session:
            node = self.access.typed(session, principal, node_id, DOCUMENT)
            return {number: actor for (_, number), actor in version_authors(session, [node.id]).items()}
