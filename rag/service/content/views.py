"""What the node and version operations return: typed views, each with `payload()`, the JSON-ready
shape that the HTTP API and the MCP tools both return, so the two surfaces cannot drift apart."""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from datetime import datetime, timezone
from typing import Any

from rag.store.models import DocumentVersion, Node


def _json(value: Any) -> Any:
    if isinstance(value, datetime):
        if value.tzinfo is None:  # SQLite hands back naive datetimes; they were written in UTC
            value = value.replace(tzinfo=timezone.utc)
        return value.isoformat()
    if isinstance(value, View):
        return value.payload()
    if isinstance(value, list):
        return [_json(v) for v in value]
    return value


class View:
    def payload(self) -> dict[str, Any]:
        return {f.name: _json(getattr(self, f.name)) for f in fields(self)}  # type: ignore[arg-type]


@dataclass
class NodeInfo(View):
    """A folder or a document as listings show it: no body. For a document, which of its versions
    is published and which is a draft, so a caller can tell what search sees."""

    node_id: str
    name: str
    kind: str
    parent_id: str | None
    kb_id: str
    summary: str | None
    metadata: dict[str, Any] | None
    created_at: datetime
    updated_at: datetime
    published_version: int | None = None
    draft_version: int | None = None
    url: str | None = None  # where the original lives, for a document a source brought; absent otherwise

    @classmethod
    def of(cls, node: Node, published: int | None = None, draft: int | None = None) -> "NodeInfo":
        return cls(
            node.id, node.name, node.kind, node.parent_id, node.kb_id, node.summary, node.meta,
            node.created_at, node.updated_at, published, draft, node.url,
        )

    def payload(self) -> dict[str, Any]:
        data = super().payload()
        if data["url"] is None:
            del data["url"]  # as in search results: only a source's document has one, so other outputs stay as they were
        return data


@dataclass
class VersionInfo(View):
    """One version of a document, without its body."""

    node_id: str
    version_number: int
    status: str
    created_at: datetime
    updated_at: datetime
    published_at: datetime | None
    archived_at: datetime | None

    @classmethod
    def of(cls, version: DocumentVersion) -> "VersionInfo":
        return cls(
            version.node_id, version.number, version.status, version.created_at, version.updated_at,
            version.published_at, version.archived_at,
        )


@dataclass
class VersionView(VersionInfo):
    """One version of a document with its Markdown body."""

    name: str = ""
    content: str = ""

    @classmethod
    def of_body(cls, node: Node, version: DocumentVersion) -> "VersionView":
        info = VersionInfo.of(version)
        return cls(**{f.name: getattr(info, f.name) for f in fields(VersionInfo)}, name=node.name, content=version.body)


@dataclass
class DocumentView(View):
    """get_document: the published version's body, and how often agents have read it."""

    node_id: str
    name: str
    parent_id: str | None
    kb_id: str
    summary: str | None
    metadata: dict[str, Any] | None
    version_number: int
    content: str
    published_at: datetime | None
    updated_at: datetime
    citation_count: int


@dataclass
class CreatedDocument(View):
    """create_document: the new document and its first (draft) version."""

    node_id: str
    name: str
    parent_id: str | None
    kb_id: str
    version_number: int
    status: str


@dataclass
class DocumentHit(View):
    """search_documents: one excerpt of a published document, addressed by its node id."""

    node_id: str
    name: str
    kb_id: str
    version_number: int
    score: float
    retrievers: list[str]
    heading_path: list[str]
    excerpt: str
    page: int | None = None  # a PDF's 1-based physical page the excerpt lies on; absent otherwise
    # a deck's slide, a workbook's sheet and rows ([first, last]), a page read by OCR; absent otherwise
    slide: int | None = None
    sheet: str | None = None
    rows: list[int] | None = None
    ocr: bool | None = None

    def payload(self) -> dict[str, Any]:
        data = super().payload()
        for key in ("page", "slide", "sheet", "rows", "ocr"):
            if data[key] is None:
                del data[key]  # as in search_knowledge: only a PDF excerpt has a page, a deck's a slide…
        return data


@dataclass
class NamedNode(View):
    """search_nodes_by_name: a match, with its path from the knowledge base's root."""

    node_id: str
    name: str
    kind: str
    parent_id: str | None
    kb_id: str
    path: str


@dataclass
class TreeNode(View):
    """get_folder_tree: names and structure only. Documents carry no `children`."""

    node_id: str
    name: str
    kind: str
    children: list["TreeNode"] | None = None

    def payload(self) -> dict[str, Any]:
        out: dict[str, Any] = {"node_id": self.node_id, "name": self.name, "kind": self.kind}
        if self.children is not None:
            out["children"] = [child.payload() for child in self.children]
        return out


@dataclass
class FolderTree(View):
    roots: list[TreeNode] = field(default_factory=list)
    truncated: bool = False  # true when the tree was cut at MAX_TREE_NODES nodes


@dataclass
class CurrentNode(View):
    node_id: str | None


@dataclass
class Deleted(View):
    node_id: str
    kind: str
    documents: int  # documents removed (a folder's whole subtree)
    folders: int


@dataclass
class DraftInfo(View):
    """list_drafts: a draft awaiting review, and who wrote it (an agent or a person)."""

    node_id: str
    name: str
    kb_id: str
    path: str
    version_number: int
    published_version: int | None
    created_at: datetime
    author: str | None  # as the activity history names the caller; None for a version made by ingestion
    author_is_agent: bool


@dataclass
class VersionDiff(View):
    """diff_versions: a unified difference (`---`/`+++` header, `@@` hunks, lines starting with
    ` `, `-` or `+`) from one version to another."""

    node_id: str
    from_version: int
    from_status: str
    to_version: int
    to_status: str
    added: int
    removed: int
    lines: list[str]
    truncated: bool = False


@dataclass
class NodeActivityEntry(View):
    id: int
    created_at: datetime
    actor: str
    actor_is_agent: bool
    action: str
    outcome: str
    detail: dict[str, Any] | None


@dataclass
class DocumentActivity(View):
    """document_activity: a node's history, newest first, and its citation count."""

    node_id: str
    name: str
    kind: str
    citation_count: int
    entries: list[NodeActivityEntry]
