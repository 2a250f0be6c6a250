"""Ingestion: bring a directory tree (or a corpus of records) into a knowledge base, then publish.

Both run on the sync engine every source runs on (rag/service/sources/engine.py): a directory is the
folder connector (rag/sources/folder.py, which says what a walk takes and skips), a corpus of records
a connector over the records. Run again, a run changes only what changed: each file is compared with
the hash of what it last ingested. It touches only documents it created itself (origin `ingest`, same
root): documents written through the API or MCP are never deleted or overwritten, and an edit made
to an ingested document survives until its file changes (the file's content then becomes a new
version, and the edit stays in the history). A file deleted from the folder, or one that can no
longer be read, leaves the knowledge base.
"""

from __future__ import annotations

import os
import threading
import time
from typing import TYPE_CHECKING, Any, Callable, Iterable, Iterator, Mapping

from rag.errors import InvalidArgument
from rag.ingest.parse import ParsedDocument, parse_record
from rag.service.checks import content_hash
from rag.service.identity.principal import Principal
from rag.service.sources.engine import SyncEngine, SyncReport, Target
from rag.service.sources.local import LocalPaths
from rag.sources.base import Connector, Fetched, Item, SourceConfig, SourceUnavailable, SyncContext
from rag.sources.folder import FolderConfig, FolderConnector

if TYPE_CHECKING:
    from rag.service.activity import ActivityLog
    from rag.service.content.catalog import Catalog
    from rag.service.identity.access import Access
    from rag.settings import Settings
    from rag.store.models import KnowledgeBase

# (stage, done, total): stages are "reading" (files) and "indexing" (chunks).
IngestProgress = Callable[[str, int, int], None]
IngestReport = SyncReport


def _noop(stage: str, done: int, total: int) -> None:
    return None


class _Records(Connector):
    """A corpus of records (`{"_id", "title"?, "text"}`) as a source: each record one item of the
    knowledge base's root, its version the hash of its text."""

    kind = "records"
    Config = SourceConfig

    def __init__(self, records: Iterable[dict], provider: str, kb_name: str) -> None:
        super().__init__(SourceConfig(), SyncContext(source_name=kb_name, workspace=""))
        self.provider = provider  # type: ignore[misc]
        self.records = records
        self.parsed: dict[str, ParsedDocument] = {}

    def items(self) -> Iterator[Item]:
        for record in self.records:
            record_id = str(record.get("_id", "")).strip()
            text = record.get("text")
            if not record_id or not isinstance(text, str):
                yield Item(id=record_id or "?", version="", filename="", label=record_id or "?",
                           failed="a record needs an `_id` and a `text` string")
                continue
            title = record.get("title") if isinstance(record.get("title"), str) else None
            parsed = parse_record(title, text, record_id)
            self.parsed[record_id] = parsed
            yield Item(id=record_id, version=content_hash(parsed.body), filename=record_id, label=record_id)

    def fetch(self, item: Item, previous: Mapping[str, Any] | None) -> Fetched:
        return Fetched(data=b"", parsed=self.parsed.pop(item.id))


class Ingest:
    """The ingestion part of the service: what the runs need, given once."""

    def __init__(self, settings: Settings, access: Access, activity: ActivityLog, catalog: Catalog,
                 engine: SyncEngine) -> None:
        self.settings = settings
        self.access = access
        self.activity = activity
        self.catalog = catalog
        self.engine = engine

    def ingest_directory(self, principal: Principal, path: str | os.PathLike, kb_name: str | None = None,
                         progress: IngestProgress | None = None, stop: threading.Event | None = None) -> IngestReport:
        """`rag ingest PATH`, into the default knowledge base unless one is named: directories become
        folders, files of a format ingestion reads become documents. `stop`: once set, the ingest
        ends after the file at hand (its report then says it is not complete)."""
        started = time.perf_counter()
        if not principal.operator:  # `rag ingest` is the operator's; anyone else reads inside the roots only
            path = LocalPaths.of(self.settings).check(path)
        try:
            connector = FolderConnector(FolderConfig(path=os.fspath(path)), SyncContext(source_name="", workspace=""))
        except SourceUnavailable as exc:
            raise InvalidArgument(str(exc)) from None
        self.access.require_write(principal)
        kb = self.catalog.knowledge_base(principal, kb_name or self.settings.default_kb, create=True)
        connector.kb_name = kb.name
        report = self._run(kb, connector, str(connector.root), progress, stop)
        report.seconds = time.perf_counter() - started
        self.activity.record(principal, "ingest", kb.name, "ok" if not report.failed else "partial", report.summary())
        return report

    def ingest_records(self, principal: Principal, records: Iterable[dict], kb_name: str, provider: str = "corpus",
                       progress: IngestProgress | None = None) -> IngestReport:
        """Each record one document in the knowledge base's root, whose source_id ends with `:` and the
        record's `_id`."""
        started = time.perf_counter()
        self.access.require_write(principal)
        kb = self.catalog.knowledge_base(principal, kb_name, create=True)
        report = self._run(kb, _Records(records, provider, kb.name), f"{provider}:records", progress)
        report.seconds = time.perf_counter() - started
        self.activity.record(principal, "ingest_records", kb.name, "ok", report.summary())
        return report

    def _run(self, kb: KnowledgeBase, connector: Connector, root_key: str,
             progress: IngestProgress | None, stop: threading.Event | None = None) -> IngestReport:
        target = Target(kb=kb, folder=(), root_key=root_key, provider=connector.provider,
                        id_prefix=f"{connector.provider}:{kb.workspace_id}:{kb.name}:", vanished="remove", moves=False)
        step = progress or _noop
        # `rag ingest` reports reading and indexing, as it always has: its listing is the walk itself.
        report = self.engine.run(target, connector, lambda stage, done, total: stage != "listing" and step(stage, done, total),
                                 stop)
        if report.error is not None:
            raise InvalidArgument(report.error)
        return report
