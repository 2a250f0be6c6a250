"""KnowledgeService: every operation, every access check, every activity record.

The surfaces (CLI, HTTP API, MCP tools, eval harness) are thin translators over this class.
"""

from __future__ import annotations

import hashlib
import logging
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, Any, Iterator

if TYPE_CHECKING:
    from rag.models.llm import ChatModel

from sqlalchemy import select
from sqlalchemy.orm import Session

from rag.errors import InvalidArgument, NotFound, PermissionDenied, RagError, Unavailable
from rag.ingest.chunk import Chunker
from rag.models.embed import Embedder, build_embedder
from rag.retrieve.keyword import keyword_lane
from rag.retrieve.retriever import LANES, Retriever
from rag.retrieve.types import Hit, Scope
from rag.retrieve.vector import ChromaVectorLane, open_chroma_client
from rag.service.principal import ACCESS_ALL, ACCESS_FOLDERS, Principal
from rag.service.publish import Progress, Publisher
from rag.settings import Settings
from rag.synthesize.conversation import standalone_question, validate_history
from rag.synthesize.relevance import relevant_hits
from rag.synthesize.types import Answer, AnswerEvent
from rag.store.db import Database
from rag.store.lock import HomeLock
from rag.store.models import (
    DOCUMENT,
    FOLDER,
    ORIGIN_API,
    PUBLISHED,
    PUBLISHING,
    Activity,
    DocumentVersion,
    KnowledgeBase,
    Node,
    Workspace,
)

log = logging.getLogger(__name__)

MAX_QUERY_CHARS = 4000
MAX_NAME_CHARS = 255
NOTHING_FOUND = "The knowledge base has nothing on this question."


def clamp_limit(value: object, default: int = 10, low: int = 1, high: int = 25) -> int:
    """search_knowledge's rule: out of range is clamped, a non-numeric value falls back to the default."""
    if isinstance(value, bool):
        return default
    try:
        number = int(float(value))  # type: ignore[arg-type]
    except (TypeError, ValueError, OverflowError):
        return default
    return max(low, min(high, number))


def content_hash(data: bytes | str) -> str:
    return hashlib.sha256(data.encode("utf-8") if isinstance(data, str) else data).hexdigest()


def name_key(name: str) -> str:
    return name.strip().casefold()


@dataclass
class SearchResult:
    query: str
    hits: list[Hit] = field(default_factory=list)


class KnowledgeService:
    def __init__(self, settings: Settings, *, writer: bool = True) -> None:
        self.settings = settings
        self._lock: HomeLock | None = None
        if settings.embedded:
            self._lock = HomeLock(settings.home)
            self._lock.acquire(exclusive=writer)
        try:
            self.db = Database(settings.sqlalchemy_url)
            if self.db.dialect not in ("sqlite", "postgresql"):
                raise InvalidArgument("the store must be SQLite or PostgreSQL")
            self.keyword = keyword_lane(self.db.dialect, settings.retrieve.keyword_max_df)
            self.chunker = Chunker(settings.index.chunk_size, settings.index.chunk_overlap)
            self.publisher = Publisher(
                self.db,
                self.chunker,
                lambda: self.embedder,
                lambda: self.vector,
                self.keyword,
                contextual_headings=settings.index.contextual_headings,
            )
            if writer:
                try:
                    self.publisher.resume()
                    self.publisher.reconcile_vectors()
                except Unavailable:  # a backend that is down: searches and publishes will say so themselves
                    log.warning("a backend is unreachable; resuming publishes and reconciling vectors is skipped")
        except BaseException:
            self.close()
            raise

    # ----- engines, built on first use (loading the model takes a few seconds) -----

    @cached_property
    def embedder(self) -> Embedder:
        return build_embedder(self.settings)

    @cached_property
    def vector(self) -> ChromaVectorLane:
        return ChromaVectorLane(
            open_chroma_client(self.settings), self.embedder.name, self.embedder.dim, remote=bool(self.settings.chroma_url)
        )

    @cached_property
    def retriever(self) -> Retriever:
        return Retriever(self.db, self.embedder, self.vector, self.keyword, self.settings.retrieve)

    @cached_property
    def chat_model(self) -> "ChatModel | None":
        from rag.models.llm import build_chat_model

        return build_chat_model(self.settings)

    @cached_property
    def synthesizer(self):
        if self.chat_model is not None:
            from rag.synthesize.generative import LLMSynthesizer

            return LLMSynthesizer(self.chat_model, self.settings.retrieve.excerpt_chars)
        from rag.synthesize.extractive import ExtractiveSynthesizer

        return ExtractiveSynthesizer(self.embedder, self.settings.answer)

    def close(self) -> None:
        db = self.__dict__.get("db")
        if db is not None:
            db.close()
        if self._lock is not None:
            self._lock.release()
            self._lock = None

    def __enter__(self) -> "KnowledgeService":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ----- activity -----

    def record(
        self,
        principal: Principal,
        action: str,
        target: str | None,
        outcome: str = "ok",
        detail: dict[str, Any] | None = None,
    ) -> None:
        try:
            with self.db.session() as session:
                session.add(
                    Activity(
                        workspace_id=principal.workspace_id,
                        actor=principal.actor,
                        action=action,
                        target=target,
                        outcome=outcome,
                        detail=detail,
                    )
                )
        except Exception:  # noqa: BLE001 - losing an activity row must not fail the call itself
            log.exception("could not record activity %s", action)

    def activity(self, principal: Principal, limit: int = 100) -> list[Activity]:
        self._require_role(principal, "admin")
        with self.db.session() as session:
            return list(
                session.scalars(
                    select(Activity)
                    .where(Activity.workspace_id == principal.workspace_id)
                    .order_by(Activity.id.desc())
                    .limit(limit)
                )
            )

    # ----- workspaces and knowledge bases -----

    def ensure_workspace(self, workspace_id: str) -> Workspace:
        workspace_id = workspace_id.strip()
        if not workspace_id or len(workspace_id) > 64 or ":" in workspace_id:
            raise InvalidArgument("a workspace name must be 1 to 64 characters, without ':'")
        with self.db.session() as session:
            workspace = session.get(Workspace, workspace_id)
            if workspace is None:
                workspace = Workspace(id=workspace_id, name=workspace_id)
                session.add(workspace)
                session.flush()
                self._create_kb(session, workspace_id, self.settings.default_kb)
            return workspace

    def _create_kb(self, session: Session, workspace_id: str, name: str) -> KnowledgeBase:
        name = self._check_name(name, "knowledge base")
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

    def knowledge_bases(self, principal: Principal) -> list[KnowledgeBase]:
        self.ensure_workspace(principal.workspace_id)
        with self.db.session() as session:
            return list(
                session.scalars(
                    select(KnowledgeBase)
                    .where(KnowledgeBase.workspace_id == principal.workspace_id)
                    .order_by(KnowledgeBase.created_at, KnowledgeBase.name)
                )
            )

    def knowledge_base(self, principal: Principal, name: str, *, create: bool = False) -> KnowledgeBase:
        self.ensure_workspace(principal.workspace_id)
        with self.db.session() as session:
            kb = session.scalar(
                select(KnowledgeBase).where(
                    KnowledgeBase.workspace_id == principal.workspace_id, KnowledgeBase.name_key == name_key(name)
                )
            )
            if kb is None:
                if not create:
                    raise NotFound(f"knowledge base {name!r} not found")
                self._require_write(principal)
                kb = self._create_kb(session, principal.workspace_id, name)
            return kb

    # ----- access -----

    def _require_role(self, principal: Principal, role: str) -> None:
        order = {"viewer": 0, "editor": 1, "admin": 2}
        if order.get(principal.role, -1) < order[role]:
            raise PermissionDenied(f"this needs the {role} role")

    def _require_write(self, principal: Principal) -> None:
        self._require_role(principal, "editor")
        if "knowledge:write" not in principal.scopes:
            raise PermissionDenied("this needs the knowledge:write scope")

    def scope(self, principal: Principal, kb_name: str | None = None) -> Scope:
        """What this principal may search: its workspace, optionally one knowledge base, its folders."""
        if "knowledge:read" not in principal.scopes:
            raise PermissionDenied("this needs the knowledge:read scope")
        if kb_name is not None:
            kb_ids: tuple[str, ...] = (self.knowledge_base(principal, kb_name).id,)
        else:
            kb_ids = tuple(kb.id for kb in self.knowledge_bases(principal))
        if principal.access == ACCESS_ALL:
            return Scope(principal.workspace_id, kb_ids)
        if principal.access == ACCESS_FOLDERS:
            with self.db.session() as session:
                docs = frozenset(self._documents_under(session, principal.folder_ids))
            return Scope(principal.workspace_id, kb_ids, docs)
        return Scope(principal.workspace_id, (), frozenset())

    @staticmethod
    def _documents_under(session: Session, folder_ids: tuple[str, ...] | list[str]) -> Iterator[str]:
        frontier = list(folder_ids)
        seen: set[str] = set()
        while frontier:
            rows = session.execute(select(Node.id, Node.kind).where(Node.parent_id.in_(frontier))).all()
            frontier = []
            for node_id, kind in rows:
                if node_id in seen:
                    continue
                seen.add(node_id)
                if kind == DOCUMENT:
                    yield node_id
                else:
                    frontier.append(node_id)

    # ----- search -----

    @staticmethod
    def _check_query(query: object) -> str:
        if not isinstance(query, str) or not query.strip():
            raise InvalidArgument("`query` must be a non-empty string")
        if len(query) > MAX_QUERY_CHARS:
            raise InvalidArgument(f"`query` must be at most {MAX_QUERY_CHARS} characters")
        return query

    def search(
        self,
        principal: Principal,
        query: str,
        limit: int = 10,
        kb_name: str | None = None,
        lanes: tuple[str, ...] = LANES,
    ) -> SearchResult:
        self._check_query(query)
        if limit < 1:
            raise InvalidArgument("`limit` must be at least 1")
        scope = self.scope(principal, kb_name)
        try:
            hits = self.retriever.retrieve(query, scope, limit, lanes=lanes)
        except RagError:
            self.record(principal, "search", kb_name, "error")
            raise
        self.record(principal, "search", kb_name, "ok", {"results": len(hits), "query_chars": len(query)})
        return SearchResult(query=query, hits=hits)

    # ----- answers -----

    def _prepare_answer(
        self, principal: Principal, query: str, kb_name: str | None, history: Any
    ) -> tuple[str, list[Hit]]:
        """The standalone question and the retrieved excerpts that are about it (none: abstain)."""
        self._check_query(query)
        messages = validate_history(history)
        scope = self.scope(principal, kb_name)
        try:
            question = standalone_question(query, messages, self.chat_model)
            hits = self.retriever.retrieve(question, scope, self.settings.answer.excerpts)
        except RagError:
            self.record(principal, "ask", kb_name, "error")
            raise
        return question, relevant_hits(question, hits, self.settings.answer)

    def _abstain(self, question: str) -> Answer:
        return Answer(NOTHING_FOUND, [], synthesizer=self.synthesizer.name, abstained=True, question=question)

    def _record_answer(self, principal: Principal, kb_name: str | None, query: str, answer: Answer) -> None:
        self.record(principal, "ask", kb_name, "ok", {
            "sources": len(answer.sources), "synthesizer": answer.synthesizer,
            "abstained": answer.abstained, "query_chars": len(query),
        })

    def ask(self, principal: Principal, query: str, kb_name: str | None = None, history: Any = None) -> Answer:
        """A cited answer. Nothing relevant retrieved: the answer says so and no model is called."""
        question, hits = self._prepare_answer(principal, query, kb_name, history)
        try:
            answer = self.synthesizer.answer(question, hits) if hits else self._abstain(question)
        except RagError:
            self.record(principal, "ask", kb_name, "error")
            raise
        self._record_answer(principal, kb_name, query, answer)
        return answer

    def ask_stream(
        self, principal: Principal, query: str, kb_name: str | None = None, history: Any = None
    ) -> Iterator[AnswerEvent]:
        """The same answer as ask(), as events: deltas, then sources, then done. Bad input raises
        here, before the first event; a failure of the model raises from the iterator."""
        question, hits = self._prepare_answer(principal, query, kb_name, history)

        def events() -> Iterator[AnswerEvent]:
            if not hits:
                answer = self._abstain(question)
                yield AnswerEvent("delta", text=answer.text)
                yield AnswerEvent("sources", answer=answer)
                yield AnswerEvent("done", answer=answer)
                self._record_answer(principal, kb_name, query, answer)
                return
            try:
                for event in self.synthesizer.stream(question, hits):
                    if event.kind == "done" and event.answer is not None:
                        self._record_answer(principal, kb_name, query, event.answer)
                    yield event
            except RagError:
                self.record(principal, "ask", kb_name, "error")
                raise

        return events()

    # ----- nodes, documents and versions -----

    @staticmethod
    def _check_name(name: str, what: str) -> str:
        if not isinstance(name, str) or not name.strip():
            raise InvalidArgument(f"a {what} name must be a non-empty string")
        name = " ".join(name.split())
        if len(name) > MAX_NAME_CHARS:
            raise InvalidArgument(f"a {what} name must be at most {MAX_NAME_CHARS} characters")
        return name

    def _sibling_taken(self, session: Session, parent_id: str, name: str, exclude: str | None = None) -> bool:
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

    def _node(self, session: Session, principal: Principal, node_id: str) -> Node:
        node = session.get(Node, node_id) if isinstance(node_id, str) else None
        if node is None or node.workspace_id != principal.workspace_id or not self._visible(session, principal, node):
            raise NotFound("not found")
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

    def _path_label(self, session: Session, node: Node) -> str:
        parts = []
        current: Node | None = node
        while current is not None:
            parts.append(current.name)
            current = session.get(Node, current.parent_id) if current.parent_id else None
        return "/".join(reversed(parts))

    def _new_child_parent(self, session: Session, principal: Principal, parent_id: str, name: str) -> Node:
        """The folder a new node goes into, once the name is known to be free there."""
        parent = self._node(session, principal, parent_id)
        if parent.kind != FOLDER:
            raise InvalidArgument("the parent must be a folder")
        if self._sibling_taken(session, parent.id, name):
            raise InvalidArgument(f"a node named {name!r} already exists in this folder")
        return parent

    def create_folder(self, principal: Principal, parent_id: str, name: str) -> Node:
        self._require_write(principal)
        name = self._check_name(name, "folder")
        with self.db.session() as session:
            parent = self._new_child_parent(session, principal, parent_id, name)
            folder = Node(
                workspace_id=principal.workspace_id, kb_id=parent.kb_id, parent_id=parent.id, kind=FOLDER,
                name=name, name_key=name_key(name),
            )
            session.add(folder)
            session.flush()
            folder.source_label = f"kb:{self._path_label(session, folder)}"
        self.record(principal, "create_folder", folder.id)
        return folder

    def create_document(
        self,
        principal: Principal,
        parent_id: str,
        name: str,
        body: str,
        summary: str | None = None,
        metadata: dict[str, Any] | None = None,
    ) -> tuple[Node, DocumentVersion]:
        """A new document whose content is a draft (version 1): not searchable until published."""
        self._require_write(principal)
        name = self._check_name(name, "document")
        if not isinstance(body, str):
            raise InvalidArgument("`content` must be a string")
        with self.db.session() as session:
            parent = self._new_child_parent(session, principal, parent_id, name)
            kb = session.get(KnowledgeBase, parent.kb_id)
            node = Node(
                workspace_id=principal.workspace_id, kb_id=parent.kb_id, parent_id=parent.id, kind=DOCUMENT,
                name=name, name_key=name_key(name), summary=summary, meta=metadata, origin=ORIGIN_API,
            )
            session.add(node)
            session.flush()
            node.source_id = f"kb:{principal.workspace_id}:{kb.name}:{node.id}"
            node.source_label = f"kb:{self._path_label(session, node)}"
            version = DocumentVersion(node_id=node.id, number=1, body=body, content_hash=content_hash(body))
            session.add(version)
        self.record(principal, "create_document", node.id)
        return node, version

    def update_document(self, principal: Principal, node_id: str, body: str) -> DocumentVersion:
        """Replace the body as a draft: the newest draft is rewritten, else a new draft version is made."""
        self._require_write(principal)
        if not isinstance(body, str):
            raise InvalidArgument("`content` must be a string")
        with self.db.session() as session:
            node = self._node(session, principal, node_id)
            if node.kind != DOCUMENT:
                raise NotFound("not found")
            newest = session.scalar(
                select(DocumentVersion).where(DocumentVersion.node_id == node.id).order_by(DocumentVersion.number.desc())
            )
            if newest is not None and newest.status == "draft":
                newest.body, newest.content_hash = body, content_hash(body)
                version = newest
            else:
                version = DocumentVersion(
                    node_id=node.id, number=(newest.number + 1) if newest else 1, body=body, content_hash=content_hash(body)
                )
                session.add(version)
        self.record(principal, "update_document", node_id)
        return version

    def publish_version(self, principal: Principal, node_id: str, number: int) -> DocumentVersion:
        """Publish a draft. Already publishing or published: a no-op. Archived: refused."""
        self._require_write(principal)
        with self.db.session() as session:
            node = self._node(session, principal, node_id)
            version = session.scalar(
                select(DocumentVersion).where(DocumentVersion.node_id == node.id, DocumentVersion.number == number)
            )
            if version is None:
                raise NotFound(f"version {number} not found")
            if version.status in (PUBLISHING, PUBLISHED):
                return version
            if version.status != "draft":
                raise InvalidArgument(f"version {number} is {version.status}; only draft versions can be published")
            version.status = PUBLISHING
            version_id = version.id
        try:
            self.publisher.publish([version_id])
        except Exception:
            self.record(principal, "publish_document_version", node_id, "error", {"version": number})
            raise
        self.record(principal, "publish_document_version", node_id, "ok", {"version": number})
        with self.db.session() as session:
            return session.get(DocumentVersion, version_id)

    def get_document(self, principal: Principal, node_id: str) -> tuple[Node, DocumentVersion]:
        """The published version of a document; anything else reads as not found."""
        with self.db.session() as session:
            node = self._node(session, principal, node_id)
            version = session.scalar(
                select(DocumentVersion).where(DocumentVersion.node_id == node.id, DocumentVersion.status == PUBLISHED)
            )
            if node.kind != DOCUMENT or version is None:
                raise NotFound("not found")
            node.citation_count += 1
        self.record(principal, "get_document", node_id)
        return node, version

    def versions(self, principal: Principal, node_id: str) -> list[DocumentVersion]:
        with self.db.session() as session:
            node = self._node(session, principal, node_id)
            if node.kind != DOCUMENT:
                raise NotFound("not found")
            return list(
                session.scalars(
                    select(DocumentVersion).where(DocumentVersion.node_id == node.id).order_by(DocumentVersion.number.desc())
                )
            )

    def delete_document(self, principal: Principal, node_id: str) -> None:
        self._require_write(principal)
        with self.db.session() as session:
            node = self._node(session, principal, node_id)
            if node.kind != DOCUMENT:
                raise NotFound("not found")
        self._delete_nodes([node_id])
        self.record(principal, "delete_document", node_id)

    def _delete_nodes(self, node_ids: list[str]) -> None:
        """Remove documents: their chunks leave both lanes first, then the rows go."""
        if not node_ids:
            return
        self.publisher.drop_chunks_of_nodes(node_ids)
        with self.db.session() as session:
            for i in range(0, len(node_ids), 500):
                session.query(Node).filter(Node.id.in_(node_ids[i:i + 500])).delete(synchronize_session=False)

    # ----- ingestion (rag/service/ingest.py) -----

    def ingest_directory(self, principal: Principal, path, kb_name: str | None = None, progress=None):
        from rag.service.ingest import DirectoryIngest

        return DirectoryIngest(self, principal).run(path, kb_name or self.settings.default_kb, progress)

    def ingest_records(self, principal: Principal, records, kb_name: str, provider: str = "corpus", progress=None):
        from rag.service.ingest import RecordIngest

        return RecordIngest(self, principal).run(records, kb_name, provider, progress)

    def publish_pending(self, version_ids: list[int], progress: Progress | None = None) -> int:
        return self.publisher.publish(version_ids, progress)
