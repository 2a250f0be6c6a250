"""The knowledge store's tables (SQLAlchemy 2.x). SQLite by default, PostgreSQL by URL.

Workspace -> knowledge bases -> a tree of nodes (folders and documents). A document has 1-based
versions (draft, publishing, published, archived); a chunk belongs to one version and is what
the lanes index and what a citation points to.
"""

from __future__ import annotations

import secrets
from datetime import datetime, timezone
from typing import Any

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    DateTime,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
    String,
    Text,
    UniqueConstraint,
    false,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column, relationship

FOLDER = "folder"
DOCUMENT = "document"

DRAFT = "draft"
PUBLISHING = "publishing"
PUBLISHED = "published"
ARCHIVED = "archived"

ORIGIN_INGEST = "ingest"
ORIGIN_API = "api"


def utcnow() -> datetime:
    return datetime.now(timezone.utc)


def new_id(prefix: str) -> str:
    return f"{prefix}_{secrets.token_hex(8)}"


class Base(DeclarativeBase):
    type_annotation_map = {dict[str, Any]: JSON}


class Workspace(Base):
    __tablename__ = "workspaces"

    id: Mapped[str] = mapped_column(String(64), primary_key=True)
    name: Mapped[str] = mapped_column(String(200))
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class KnowledgeBase(Base):
    __tablename__ = "knowledge_bases"
    __table_args__ = (UniqueConstraint("workspace_id", "name_key", name="uq_kb_name"),)

    id: Mapped[str] = mapped_column(String(40), primary_key=True, default=lambda: new_id("kb"))
    workspace_id: Mapped[str] = mapped_column(ForeignKey("workspaces.id", ondelete="CASCADE"), index=True)
    name: Mapped[str] = mapped_column(String(200))
    name_key: Mapped[str] = mapped_column(String(200))
    root_id: Mapped[str | None] = mapped_column(String(40), nullable=True)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class Node(Base):
    """A folder or a document. Name, summary and metadata are never indexed."""

    __tablename__ = "nodes"
    __table_args__ = (
        UniqueConstraint("parent_id", "name_key", name="uq_sibling_name"),
        Index("ix_nodes_kb_kind", "kb_id", "kind"),
    )

    id: Mapped[str] = mapped_column(String(40), primary_key=True, default=lambda: new_id("n"))
    workspace_id: Mapped[str] = mapped_column(ForeignKey("workspaces.id", ondelete="CASCADE"), index=True)
    kb_id: Mapped[str] = mapped_column(ForeignKey("knowledge_bases.id", ondelete="CASCADE"))
    parent_id: Mapped[str | None] = mapped_column(ForeignKey("nodes.id", ondelete="CASCADE"), index=True)
    kind: Mapped[str] = mapped_column(String(16))
    name: Mapped[str] = mapped_column(String(500))
    name_key: Mapped[str] = mapped_column(String(500))
    summary: Mapped[str | None] = mapped_column(Text, nullable=True)
    meta: Mapped[dict[str, Any] | None] = mapped_column("metadata", JSON, nullable=True)
    # Documents only: the knowledge id (provider:org:resource:item) and its label in words.
    source_id: Mapped[str | None] = mapped_column(String(1000), unique=True, nullable=True)
    source_label: Mapped[str | None] = mapped_column(String(1000), nullable=True)
    origin: Mapped[str] = mapped_column(String(16), default=ORIGIN_API)
    # Ingested documents: the root directory they came from and the hash of the file last ingested.
    ingest_root: Mapped[str | None] = mapped_column(String(2000), nullable=True, index=True)
    ingest_hash: Mapped[str | None] = mapped_column(String(64), nullable=True)
    # Where the original lives (a page, a file in a repository, an object), for a document a source brought.
    url: Mapped[str | None] = mapped_column(String(2000), nullable=True)
    citation_count: Mapped[int] = mapped_column(Integer, default=0)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow, onupdate=utcnow)

    versions: Mapped[list["DocumentVersion"]] = relationship(
        back_populates="node", cascade="all, delete-orphan", passive_deletes=True, order_by="DocumentVersion.number"
    )


class DocumentVersion(Base):
    __tablename__ = "document_versions"
    __table_args__ = (
        UniqueConstraint("node_id", "number", name="uq_version_number"),
        Index("ix_versions_status", "status"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    node_id: Mapped[str] = mapped_column(ForeignKey("nodes.id", ondelete="CASCADE"))
    number: Mapped[int] = mapped_column(Integer)
    status: Mapped[str] = mapped_column(String(16), default=DRAFT)
    body: Mapped[str] = mapped_column(Text)
    content_hash: Mapped[str] = mapped_column(String(64))
    origin: Mapped[str] = mapped_column(String(16), default=ORIGIN_API)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow, onupdate=utcnow)
    published_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
    archived_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
    # Publishing is a job (rag/service/indexing/publish.py): the order of this document's publish requests
    # (the latest wins) and the status a failed publish returns to (draft; archived for a rollback).
    publish_seq: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    publish_from: Mapped[str | None] = mapped_column(String(16), nullable=True)
    # A paged original's (PDF's) pages: [start, end, page] character spans of `body`, pages 1-based
    # physical indexes; None for every other version. Chunking reads it to give chunks their pages.
    pages: Mapped[list[list[int]] | None] = mapped_column(JSON, nullable=True)

    node: Mapped[Node] = relationship(back_populates="versions")


class DocumentOriginal(Base):
    """The file a document version was made from (an upload, or an ingested PDF, HTML or Word file),
    byte for byte, with its name and media type: what the version's Markdown body was extracted from."""

    __tablename__ = "document_originals"

    version_id: Mapped[int] = mapped_column(ForeignKey("document_versions.id", ondelete="CASCADE"), primary_key=True)
    filename: Mapped[str] = mapped_column(String(255))
    media_type: Mapped[str] = mapped_column(String(100))
    size: Mapped[int] = mapped_column(BigInteger)
    sha256: Mapped[str] = mapped_column(String(64))
    data: Mapped[bytes] = mapped_column(LargeBinary)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class Chunk(Base):
    """A piece of one document version's body; the unit both lanes index and citations point to."""

    __tablename__ = "chunks"
    __table_args__ = (Index("ix_chunks_version", "version_id"), Index("ix_chunks_node", "node_id"))

    id: Mapped[int] = mapped_column(BigInteger().with_variant(Integer, "sqlite"), primary_key=True, autoincrement=True)
    version_id: Mapped[int] = mapped_column(ForeignKey("document_versions.id", ondelete="CASCADE"))
    node_id: Mapped[str] = mapped_column(ForeignKey("nodes.id", ondelete="CASCADE"))
    kb_id: Mapped[str] = mapped_column(String(40), index=True)
    ordinal: Mapped[int] = mapped_column(Integer)
    text: Mapped[str] = mapped_column(Text)
    heading_path: Mapped[list[str]] = mapped_column(JSON, default=list)
    char_start: Mapped[int] = mapped_column(Integer)
    char_end: Mapped[int] = mapped_column(Integer)
    # The pages of a paged original the chunk's text lies on (1-based; None when the version has none).
    page_start: Mapped[int | None] = mapped_column(Integer, nullable=True)
    page_end: Mapped[int | None] = mapped_column(Integer, nullable=True)
    # What its excerpt names beyond the page: a slide, a sheet and rows, OCR (rag/ingest/layout.py).
    locator: Mapped[dict[str, Any] | None] = mapped_column(JSON, nullable=True)


class Activity(Base):
    """Who did what, when, and how it ended. Never secrets, never document bodies."""

    __tablename__ = "activity"
    __table_args__ = (Index("ix_activity_ws_time", "workspace_id", "created_at"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    workspace_id: Mapped[str] = mapped_column(String(64))
    actor: Mapped[str] = mapped_column(String(200))
    action: Mapped[str] = mapped_column(String(100))
    target: Mapped[str | None] = mapped_column(String(1000), nullable=True)
    outcome: Mapped[str] = mapped_column(String(32))
    detail: Mapped[dict[str, Any] | None] = mapped_column(JSON, nullable=True)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


# ----- identities: principals, their workspace memberships, their bearer tokens -----

PERSON = "person"
AGENT = "agent"


class PrincipalRecord(Base):
    """A person or an agent: whom a token speaks for."""

    __tablename__ = "principals"

    id: Mapped[str] = mapped_column(String(40), primary_key=True, default=lambda: new_id("p"))
    name: Mapped[str] = mapped_column(String(200))
    kind: Mapped[str] = mapped_column(String(16))  # person | agent
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class Membership(Base):
    """A principal's role in one workspace: viewer, editor or admin."""

    __tablename__ = "memberships"

    principal_id: Mapped[str] = mapped_column(ForeignKey("principals.id", ondelete="CASCADE"), primary_key=True)
    workspace_id: Mapped[str] = mapped_column(ForeignKey("workspaces.id", ondelete="CASCADE"), primary_key=True)
    role: Mapped[str] = mapped_column(String(16))
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class ApiToken(Base):
    """A bearer token. Only the SHA-256 of its secret is kept: a leaked table grants nothing."""

    __tablename__ = "tokens"

    id: Mapped[str] = mapped_column(String(40), primary_key=True, default=lambda: new_id("tok"))
    principal_id: Mapped[str] = mapped_column(ForeignKey("principals.id", ondelete="CASCADE"), index=True)
    workspace_id: Mapped[str] = mapped_column(ForeignKey("workspaces.id", ondelete="CASCADE"), index=True)
    secret_hash: Mapped[str] = mapped_column(String(64), unique=True)
    scopes: Mapped[list[str]] = mapped_column(JSON, default=list)
    access: Mapped[str] = mapped_column(String(16))  # none | all | folders
    folder_ids: Mapped[list[str]] = mapped_column(JSON, default=list)
    # Made by a workspace's admin over the API: acts in its home workspace only (migration 0006).
    home_only: Mapped[bool] = mapped_column(Boolean, default=False, server_default=false())
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    expires_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
    revoked_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
    last_used_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)


class EditorSession(Base):
    """A person signed in to the editor (rag/web/, rag/service/identity/sessions.py): kept in the store, so
    every worker and replica knows it. The cookie holds a random id; only its SHA-256 is kept here,
    with the token it was opened with (never the token's secret)."""

    __tablename__ = "editor_sessions"

    id_hash: Mapped[str] = mapped_column(String(64), primary_key=True)
    token_id: Mapped[str] = mapped_column(ForeignKey("tokens.id", ondelete="CASCADE"), index=True)
    csrf: Mapped[str] = mapped_column(String(64))
    flashes: Mapped[list[list[str]] | None] = mapped_column(JSON, nullable=True)  # [kind, message] to show next
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    seen_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow, index=True)


class SearchGeneration(Base):
    """One row whose value moves whenever a version becomes or stops being published (SQLite
    triggers, migration 0010): a process that holds the published chunks' ids in memory knows
    from it when they are out of date (rag/retrieve/published.py)."""

    __tablename__ = "search_generation"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    value: Mapped[int] = mapped_column(BigInteger)


# ----- sources: where knowledge comes from, kept in sync (rag/service/sources/) -----

SOURCE_IDLE = "idle"
SOURCE_RUNNING = "running"


class Source(Base):
    """A place knowledge is synced from: a kind (rag/sources/registry.py), its settings (never a
    secret: `secret` names one that Settings supplies), the knowledge base and folder it fills, a
    schedule, and the state of its syncs. `lease_*`: the sync running now (at most one per source,
    across processes and workers) and until when its holder promised to renew the lease."""

    __tablename__ = "sources"
    __table_args__ = (UniqueConstraint("workspace_id", "name_key", name="uq_source_name"),)

    id: Mapped[str] = mapped_column(String(40), primary_key=True, default=lambda: new_id("src"))
    workspace_id: Mapped[str] = mapped_column(ForeignKey("workspaces.id", ondelete="CASCADE"), index=True)
    name: Mapped[str] = mapped_column(String(200))
    name_key: Mapped[str] = mapped_column(String(200))
    kind: Mapped[str] = mapped_column(String(32))
    config: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    secret: Mapped[str | None] = mapped_column(String(200), nullable=True)
    # Added (or last given settings) by the operator on the command line: its local paths are not
    # held to RAG_SOURCES__LOCAL_ROOTS (rag/service/sources/local.py); a workspace admin's change clears it.
    added_by_operator: Mapped[bool] = mapped_column(Boolean, default=False, server_default=false())
    kb_id: Mapped[str] = mapped_column(ForeignKey("knowledge_bases.id", ondelete="CASCADE"))
    folder: Mapped[str] = mapped_column(String(2000), default="")  # "a/b" under the knowledge base's root
    every_seconds: Mapped[int | None] = mapped_column(Integer, nullable=True)  # None: synced on demand only
    paused: Mapped[bool] = mapped_column(Boolean, default=False, server_default=false())
    status: Mapped[str] = mapped_column(String(16), default=SOURCE_IDLE)
    cursor: Mapped[dict[str, Any] | None] = mapped_column(JSON, nullable=True)
    last_started_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
    last_finished_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
    last_outcome: Mapped[str | None] = mapped_column(String(16), nullable=True)  # ok | partial | failed | stopped
    last_error: Mapped[str | None] = mapped_column(Text, nullable=True)
    last_counts: Mapped[dict[str, Any] | None] = mapped_column(JSON, nullable=True)
    last_failures: Mapped[list[list[str]] | None] = mapped_column(JSON, nullable=True)  # [item, reason], the first few
    progress: Mapped[dict[str, Any] | None] = mapped_column(JSON, nullable=True)  # the running sync's stage and counts
    next_run_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True, index=True)
    lease_owner: Mapped[str | None] = mapped_column(String(100), nullable=True)
    lease_until: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow, onupdate=utcnow)


class SourceItem(Base):
    """One item a source listed: the version last stored, the document it became, and what its
    connector keeps for the next fetch (an ETag). Written in the transaction that stores the
    document, so a sync killed at any point resumes without duplicates."""

    __tablename__ = "source_items"
    __table_args__ = (UniqueConstraint("source_pk", "item_id", name="uq_source_item"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    source_pk: Mapped[str] = mapped_column(ForeignKey("sources.id", ondelete="CASCADE"))
    item_id: Mapped[str] = mapped_column(String(1000))
    version: Mapped[str] = mapped_column(String(200))
    node_id: Mapped[str | None] = mapped_column(ForeignKey("nodes.id", ondelete="SET NULL"), nullable=True, index=True)
    state: Mapped[dict[str, Any] | None] = mapped_column(JSON, nullable=True)
    seen_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
