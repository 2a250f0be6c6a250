"""KnowledgeService: the front every surface (CLI, HTTP API, MCP tools, eval harness) calls.

It holds no rules of its own. It opens the store and the engines once, builds the parts of the
service over them, each a class in its own module given what it needs, and forwards each
operation to the part that owns it:

    identity/   who calls and what they may do
      access     access.py      who may see and do what (every part asks it)
      tokens     tokens.py      bearer tokens and who a caller is
      sessions   sessions.py    the editor's sessions: signing in, the CSRF token, messages
    content/    the knowledge itself
      catalog    catalog.py     workspaces and knowledge bases
      reads      nodes.py       documents, versions, listings, the tree, names
      edits      edits.py       folders and documents: drafts, publishing, names, moves
      review     review.py      drafts awaiting review, differences between versions, a node's history
    indexing/   sources in, searchable chunks out
      ingest     ingest.py      directories and record corpora
    sources/    sources kept in sync (manage.py), their engine (engine.py) and schedule (schedule.py)
      originals  originals.py   documents made from uploaded files, and versions' original files
    query/      questions put to the knowledge
      searches   search.py      search_knowledge
      kb_search  kb_search.py   search_knowledge_base
      answers    answers.py     ask_knowledge
    transfer/   export and import (archives.py)
    activity     activity.py    the history: recorded by the parts, read by admins

(paths under rag/service/; the publisher, its queue and the engines are not parts but what they run on)
"""

from __future__ import annotations

import logging
from typing import Any

from rag.errors import InvalidArgument, Unavailable
from rag.ingest import sandbox
from rag.ingest.chunk import Chunker
from rag.service.identity.access import Access
from rag.service.activity import ActivityLog
from rag.service.query.answers import Answers
from rag.service.content.catalog import Catalog
from rag.service.content.edits import NodeEdits
from rag.service.engines import Engines
from rag.service.indexing.ingest import Ingest
from rag.service.query.kb_search import KnowledgeBaseSearches
from rag.service.content.nodes import NodeReads
from rag.service.indexing.originals import Originals
from rag.service.indexing.publish import Publisher
from rag.service.indexing.publish_queue import PublishQueue, PublishWorker
from rag.service.content.review import Review
from rag.service.query.search import Search
from rag.service.sources.engine import SyncEngine
from rag.service.sources.manage import Sources
from rag.service.identity.sessions import EditorSessions
from rag.service.identity.tokens import Tokens
from rag.service.transfer.archives import Transfer
from rag.settings import Settings
from rag.store.db import Database
from rag.store.lock import HomeLock

log = logging.getLogger(__name__)


class forward:
    """`name = forward("part")`: the front's `name` is that part's method (or engine) of the same name."""

    def __init__(self, part: str, method: str | None = None) -> None:
        self.part = part
        self.method = method  # the part's method, when its name is not the front's

    def __set_name__(self, _owner: type, name: str) -> None:
        self.method = self.method or name

    def __get__(self, service: Any, _owner: type | None = None) -> Any:
        if service is None:
            return self
        return getattr(getattr(service, self.part), self.method)


class KnowledgeService:
    def __init__(self, settings: Settings, *, writer: bool = True, publish_worker: bool = True,
                 defer_start: bool = False) -> None:
        """`publish_worker`: on a PostgreSQL store, a writer also takes over publish jobs no worker
        holds (a killed worker's), in the background; one-shot commands leave that to the servers.
        `defer_start`: a writer's start-up (resuming interrupted publishes, reconciling the lanes, which
        opens Chroma) waits for `start_writer()`, which its caller runs before anything else but
        reading tokens: `rag mcp` answers its first messages meanwhile."""
        self.settings = settings
        sandbox.configure_from(settings.parsing)  # the process's parse workers take its bounds
        self._pending_start: bool | None = None
        self._lock: HomeLock | None = None
        if settings.embedded:
            self._lock = HomeLock(settings.home)
            self._lock.acquire(exclusive=writer)
        try:
            self.db = Database(settings.sqlalchemy_url)
            if self.db.dialect not in ("sqlite", "postgresql"):
                raise InvalidArgument("the store must be SQLite or PostgreSQL")
            # A reader of the embedded store holds its lock shared: no writer runs beside it.
            self.engines = Engines(settings, self.db, read_only=settings.embedded and not writer)
            self.publisher = Publisher(
                self.db,
                Chunker(settings.index.chunk_size, settings.index.chunk_overlap),
                lambda: self.engines.embedder,
                self.engines.index,
                contextual_headings=settings.index.contextual_headings,
                sentences=self.engines.synthesizer_class.publish_sentences,  # what its answers embed
            )
            self.publish_queue = PublishQueue(self.publisher)
            self.publish_worker: PublishWorker | None = None
            self._build_parts()
            if writer and defer_start:
                self._pending_start = publish_worker
            elif writer:
                self._start_writer(publish_worker)
        except BaseException:
            self.close()
            raise

    def _build_parts(self) -> None:
        db, settings, engines = self.db, self.settings, self.engines
        self.access = Access(db, settings)
        self.activity_log = ActivityLog(db, self.access)
        self.catalog = Catalog(db, settings, self.access, self.activity_log)
        self.reads = NodeReads(db, settings, self.access, self.activity_log, engines)
        self.edits = NodeEdits(db, settings, self.access, self.activity_log, self.catalog, engines,
                               self.publisher, self.publish_queue)
        self.searches = Search(self.access, self.activity_log, engines)
        self.kb_search = KnowledgeBaseSearches(db, self.access, self.activity_log, engines)
        self.answers = Answers(settings, self.access, self.activity_log, engines)
        self.tokens = Tokens(db, settings, self.access, self.activity_log)
        s = settings.sources  # one sync engine: `rag ingest` runs the folder connector on it, sources theirs
        self.sync_engine = SyncEngine(db, self.edits, self.publisher, concurrency=s.concurrency, batch=s.batch,
                                      attempts=s.attempts, backoff_seconds=s.backoff_seconds,
                                      item_timeout_seconds=s.item_timeout_seconds)
        self.ingest = Ingest(settings, self.access, self.activity_log, self.catalog, self.sync_engine)
        self.sources = Sources(db, settings, self.access, self.activity_log, self.catalog, self.sync_engine)
        self.transfer = Transfer(db, settings, self.access, self.activity_log, engines, self.publisher)
        self.originals = Originals(db, settings, self.access, self.activity_log, self.edits)
        self.review = Review(db, self.access, self.activity_log)
        self.sessions = EditorSessions(db, self.tokens, self.activity_log)

    def start_writer(self) -> None:
        """The start-up `defer_start` put off (nothing when there is none, or it ran)."""
        if self._pending_start is not None:
            self._start_writer(self._pending_start)
            self._pending_start = None

    def _start_writer(self, publish_worker: bool) -> None:
        try:
            # Several workers may share a PostgreSQL store: jobs a live worker holds are its own.
            self.publisher.resume(wait=self.db.dialect == "sqlite")
            self.publisher.reconcile()  # every lane of the search index against the chunks
        except Unavailable:  # a backend that is down: searches and publishes will say so themselves
            log.warning("a backend is unreachable; resuming publishes and reconciling its lane is skipped")
        if self.db.dialect == "postgresql" and publish_worker:
            self.publish_worker = PublishWorker(self.publisher, self.settings.publish_poll_seconds).start()

    # ----- the engines, as the surfaces and the evaluations reach them -----

    embedder = forward("engines")
    index = forward("engines")
    vector = forward("engines")
    keyword = forward("engines")
    retriever = forward("engines")
    chat_model = forward("engines")
    synthesizer = forward("engines")

    # ----- the operations, each owned by one part -----

    record = forward("activity_log")
    activity = forward("activity_log", "history")

    ensure_workspace = forward("catalog")
    knowledge_bases = forward("catalog")
    knowledge_base = forward("catalog")
    list_models = forward("catalog")
    resolve_kb = forward("catalog")
    scope = forward("access")

    search_documents = forward("reads")
    get_document = forward("reads")
    versions = forward("reads")
    get_document_versions = forward("reads")
    get_document_version = forward("reads")
    list_children = forward("reads")
    get_folder_tree = forward("reads")
    search_nodes_by_name = forward("reads")
    get_root_nodes = forward("reads")
    get_current_node = forward("reads")

    create_folder = forward("edits")
    create_document = forward("edits")
    update_document = forward("edits")
    publish_version = forward("edits")
    publish_document_version = forward("edits")
    rollback_document_version = forward("edits")
    wait_for_publishing = forward("edits")
    rename_document = forward("edits")
    rename_folder = forward("edits")
    set_summary = forward("edits")
    set_metadata = forward("edits")
    delete_document = forward("edits")
    delete_folder = forward("edits")
    move_node = forward("edits")

    search = forward("searches")
    search_knowledge_base = forward("kb_search")
    ask = forward("answers")
    ask_stream = forward("answers")

    create_token = forward("tokens")
    list_tokens = forward("tokens")
    revoke_token = forward("tokens")
    authenticate = forward("tokens")

    ingest_directory = forward("ingest")
    ingest_records = forward("ingest")
    add_source = forward("sources", "add")
    list_sources = forward("sources", "list")
    show_source = forward("sources", "show")
    change_source = forward("sources", "change")
    sync_source = forward("sources", "sync")
    start_source_sync = forward("sources", "start_sync")
    set_source_paused = forward("sources", "set_paused")
    remove_source = forward("sources", "remove")
    export_archive = forward("transfer")
    import_archive = forward("transfer")

    upload_document = forward("originals")
    get_document_original = forward("originals")

    list_drafts = forward("review")
    diff_versions = forward("review")
    document_activity = forward("review")
    version_authors = forward("review")
    node_info = forward("review")

    open_session = forward("sessions")
    editor_session = forward("sessions", "session")
    flash = forward("sessions")
    take_flashes = forward("sessions")
    close_session = forward("sessions")

    def start_scheduler(self):
        """`rag serve`'s thread that syncs the sources when they are due (rag/service/sources/schedule.py);
        stopped by close()."""
        from rag.service.sources.schedule import Scheduler

        if self.__dict__.get("scheduler") is None:
            self.scheduler = Scheduler(self.sources, self.settings.sources.poll_seconds).start()
        return self.scheduler

    # ----- lifetime -----

    def close(self) -> None:
        scheduler = self.__dict__.get("scheduler")
        if scheduler is not None:  # a sync in progress ends after the item at hand
            scheduler.stop()
        sources = self.__dict__.get("sources")
        if sources is not None:  # syncs started over HTTP end after their item, before the store closes
            sources.close()
        worker = self.__dict__.get("publish_worker")
        if worker is not None:
            worker.close()
        queue = self.__dict__.get("publish_queue")
        if queue is not None:  # queued publishes finish first; they need the store
            queue.close()
        engines = self.__dict__.get("engines")
        if engines is not None:
            engines.close()
        activity_log = self.__dict__.get("activity_log")
        if activity_log is not None:  # the queued rows of searches (rag/service/activity.py)
            activity_log.close()
        db = self.__dict__.get("db")
        if db is not None:
            db.close()
        if self._lock is not None:
            self._lock.release()
            self._lock = None

    def __enter__(self) -> KnowledgeService:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
