"""KnowledgeService: every operation, every access check, every activity record.

The surfaces (CLI, HTTP API, MCP tools, eval harness) are thin translators over this class.
"""

from __future__ import annotations

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
from rag.service.activity import bounded_target
from rag.service.checks import int_arg, lookup_name_arg, name_arg, name_key
from rag.service.edits import NodeEdits
from rag.service.kb_search import KnowledgeBaseSearchMixin
from rag.service.nodes import NodeReads
from rag.service.principal import ACCESS_ALL, ACCESS_FOLDERS, Principal
from rag.service.publish import Progress, Publisher, PublishQueue, PublishWorker
from rag.service.tokens import TokenMixin
from rag.service.tree import NO_ACCESS
from rag.settings import Settings
from rag.synthesize.conversation import standalone_question, validate_history
from rag.synthesize.relevance import relevant_hits
from rag.synthesize.types import Answer, AnswerEvent
from rag.store.db import Database
from rag.store.lock import HomeLock
from rag.store.models import DOCUMENT, FOLDER, Activity, KnowledgeBase, Node, Workspace

log = logging.getLogger(__name__)

MAX_QUERY_CHARS = 4000
NOTHING_FOUND = "The knowledge base has nothing on this question."


SEARCH_LIMIT_DEFAULT, SEARCH_LIMIT_MAX = 10, 25  # search_knowledge's `limit` (the MCP schema states them too)


def clamp_limit(
    value: object, default: int = SEARCH_LIMIT_DEFAULT, low: int = 1, high: int = SEARCH_LIMIT_MAX
) -> int:
    """search_knowledge's rule: out of range is clamped, a non-numeric value falls back to the default."""
    if isinstance(value, bool):
        return default
    try:
        number = int(float(value))  # type: ignore[arg-type]
    except (TypeError, ValueError, OverflowError):
        return default
    return max(low, min(high, number))


@dataclass
class SearchResult:
    query: str
    hits: list[Hit] = field(default_factory=list)


class KnowledgeService(NodeReads, NodeEdits, KnowledgeBaseSearchMixin, TokenMixin):
    """The node operations live in mixins (rag/service/nodes.py, edits.py, kb_search.py, tokens.py)."""

    def __init__(self, settings: Settings, *, writer: bool = True, publish_worker: bool = True) -> None:
        """`publish_worker`: on a PostgreSQL store, a writer also takes over publish jobs no worker
        holds (a killed worker's), in the background; one-shot commands leave that to the servers."""
        self.settings = settings
        self._lock: HomeLock | None = None
        if settings.embedded:
            self._lock = HomeLock(settings.home)
            self._lock.acquire(exclusive=writer)
        try:
            self.db = Database(settings.sqlalchemy_url)
            if self.db.dialect not in ("sqlite", "postgresql"):
                raise InvalidArgument("the store must be SQLite or PostgreSQL")
            self.keyword = keyword_lane(
                self.db.dialect, settings.retrieve.keyword_engine, settings.keyword_path,
                settings.retrieve.keyword_max_df,
            )
            self.chunker = Chunker(settings.index.chunk_size, settings.index.chunk_overlap)
            self.publisher = Publisher(
                self.db,
                self.chunker,
                lambda: self.embedder,
                lambda: self.vector,
                self.keyword,
                contextual_headings=settings.index.contextual_headings,
            )
            self.publish_queue = PublishQueue(self.publisher)
            self.publish_worker: PublishWorker | None = None
            if writer:
                try:
                    # Several workers may share a PostgreSQL store: jobs a live worker holds are its own.
                    self.publisher.resume(wait=self.db.dialect == "sqlite")
                    self.publisher.reconcile_keyword()
                    self.publisher.reconcile_vectors()
                except Unavailable:  # a backend that is down: searches and publishes will say so themselves
                    log.warning("a backend is unreachable; resuming publishes and reconciling vectors is skipped")
                if self.db.dialect == "postgresql" and publish_worker:
                    self.publish_worker = PublishWorker(self.publisher, settings.publish_poll_seconds).start()
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
        worker = self.__dict__.get("publish_worker")
        if worker is not None:
            worker.close()
        queue = self.__dict__.get("publish_queue")
        if queue is not None:  # queued publishes finish first; they need the store
            queue.close()
        keyword = self.__dict__.get("keyword")
        if keyword is not None and hasattr(keyword, "close"):
            keyword.close()  # releases the keyword index's writer lock
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
        if principal.token_id is not None:  # which token, so an admin can revoke the one misused
            detail = {**(detail or {}), "token_id": principal.token_id}
        try:
            with self.db.session() as session:
                session.add(
                    Activity(
                        workspace_id=principal.workspace_id,
                        actor=principal.actor,
                        action=action,
                        target=bounded_target(target),  # whatever a caller sent, the row stays small
                        outcome=outcome,
                        detail=detail,
                    )
                )
        except Exception:  # noqa: BLE001 - losing an activity row must not fail the call itself
            log.exception("could not record activity %s", action)

    def activity(self, principal: Principal, limit: int = 100) -> list[Activity]:
        """The workspace's history, newest first, for admins. A folder-scoped admin sees only the
        rows about nodes inside its folders: a row about anything else would tell it exists."""
        self._require_role(principal, "admin")
        limit = int_arg(limit, "limit", 1, 1000, default=100)
        stmt = select(Activity).where(Activity.workspace_id == principal.workspace_id).order_by(Activity.id.desc())
        with self.db.session() as session:
            if principal.access == ACCESS_ALL:
                return list(session.scalars(stmt.limit(limit)))
            visible = self._visible_ids(session, principal) or set()
            rows = (row for row in session.scalars(stmt.execution_options(yield_per=500)) if row.target in visible)
            shown = [row for _, row in zip(range(limit), rows)]
        # A row's detail may name another node (the folder something was made in): out of scope, none.
        return [
            Activity(id=row.id, workspace_id=row.workspace_id, actor=row.actor, action=row.action, target=row.target,
                     outcome=row.outcome, created_at=row.created_at, detail=None if row.detail is None else {
                         key: None if isinstance(value, str) and value.startswith("n_") and value not in visible
                         else value for key, value in row.detail.items()})
            for row in shown
        ]

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
        # A name no knowledge base can have is not looked up (PostgreSQL refuses a NUL in a parameter).
        name = name_arg(name, "knowledge base") if create else lookup_name_arg(name, "knowledge base not found")
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
        """What this principal may search: its workspace, optionally one knowledge base, its folders.
        Without knowledge-base access every search fails, as every node tool does: an empty result
        would not tell "no access" from "no match"."""
        if principal.access not in (ACCESS_ALL, ACCESS_FOLDERS):
            raise PermissionDenied(NO_ACCESS)
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
                docs = frozenset(row.id for row in self._subtree(session, principal.folder_ids) if row.kind == DOCUMENT)
            return Scope(principal.workspace_id, kb_ids, docs)
        raise PermissionDenied(NO_ACCESS)

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
        try:
            self._check_query(query)
            if limit < 1:
                raise InvalidArgument("`limit` must be at least 1")
            scope = self.scope(principal, kb_name)
            hits = self._shown_hits(principal, self.retriever.retrieve(query, scope, limit, lanes=lanes))
        except RagError as exc:  # refusals are recorded too: who tried what, never the query
            self.record(principal, "search", kb_name, exc.code)
            raise
        self.record(principal, "search", kb_name, "ok", {"results": len(hits), "query_chars": len(query)})
        return SearchResult(query=query, hits=hits)

    # ----- answers -----

    def _prepare_answer(
        self, principal: Principal, query: str, kb_name: str | None, history: Any
    ) -> tuple[str, list[Hit]]:
        """The standalone question and the retrieved excerpts that are about it (none: abstain)."""
        try:
            self._check_query(query)
            messages = validate_history(history)
            scope = self.scope(principal, kb_name)
            question = standalone_question(query, messages, self.chat_model)
            hits = self._shown_hits(principal, self.retriever.retrieve(question, scope, self.settings.answer.excerpts))
        except RagError as exc:
            self.record(principal, "ask", kb_name, exc.code)
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
        except RagError as exc:
            self.record(principal, "ask", kb_name, exc.code)
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
            except RagError as exc:
                self.record(principal, "ask", kb_name, exc.code)
                raise

        return events()

    # ----- ingestion (rag/service/ingest.py) -----

    def ingest_directory(self, principal: Principal, path, kb_name: str | None = None, progress=None):
        from rag.service.ingest import DirectoryIngest

        return DirectoryIngest(self, principal).run(path, kb_name or self.settings.default_kb, progress)

    def ingest_records(self, principal: Principal, records, kb_name: str, provider: str = "corpus", progress=None):
        from rag.service.ingest import RecordIngest

        return RecordIngest(self, principal).run(records, kb_name, provider, progress)

    def publish_pending(self, version_ids: list[int], progress: Progress | None = None) -> int:
        return self.publisher.publish(version_ids, progress)
