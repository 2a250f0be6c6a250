"""One sync engine for every connector: what changed is fetched, parsed and stored; what vanished is
archived; what moved keeps its document.

A sync lists the source's items (rag/sources/base.py), compares each item's version with the one
its document was last stored from (`nodes.ingest_hash`), fetches the new and changed items from a
few threads, parses them with the format parsers (under their bounds: rag/ingest/read.py), and
stores them in batches: each batch is one transaction holding the documents, their new versions,
their publish requests and the items' records (`source_items`), so a sync killed at any point
loses at most one batch and, run again, finds what was stored unchanged and stores nothing twice.
Each batch is then published (embedded and indexed) before the next is stored.

The documents a sync owns are the ones it made (origin `ingest`, `nodes.ingest_root` = the sync's
root key). Documents written through the API or MCP are never touched. An item whose content is
the same as its live version (an ETag that changed, a re-exported page) only has its version noted:
no new version, no embedding. An item the listing no longer holds is archived (its published version
archived, the document and its history kept) once a listing has run to its end; a connector may
remove instead (the folder connector, as `rag ingest` always did). A renamed or moved item (the
connector says so with `Item.moved_from`, or a vanished item's version reappears under a new id)
keeps its node, so its versions and citations stay with it.
"""

from __future__ import annotations

import hashlib
import logging
import threading
import time
from collections import deque
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import PurePosixPath
from typing import TYPE_CHECKING, Any, Callable, Iterable, Iterator

from sqlalchemy import select, update
from tenacity import Retrying, retry_if_exception, stop_after_attempt, stop_after_delay, wait_exponential

from rag.ingest.formats import BINARY_PARSERS, UnreadableFile
from rag.ingest.layout import layout_json
from rag.ingest.parse import ParsedDocument, humanize
from rag.ingest.read import parse_bytes
from rag.service.checks import content_hash, name_key, name_problem
from rag.service.content import tree
from rag.service.indexing.originals import keep_original
from rag.sources.base import Connector, Fetched, Item, ItemFailed, NotModified, SourceUnavailable
from rag.store.models import (
    DOCUMENT,
    DRAFT,
    FOLDER,
    ORIGIN_INGEST,
    PUBLISHED,
    PUBLISHING,
    DocumentVersion,
    KnowledgeBase,
    Node,
    SourceItem,
)

if TYPE_CHECKING:
    from sqlalchemy.orm import Session

    from rag.service.content.edits import NodeEdits
    from rag.service.indexing.publish import Publisher
    from rag.store.db import Database

log = logging.getLogger(__name__)

# (stage, done, total): "listing" (items), "reading" (items fetched and parsed), "indexing" (chunks).
Progress = Callable[[str, int, int], None]
MAX_FAILURES_KEPT = 50  # the failures a source's state keeps (the report has all of them)


@dataclass
class SyncReport:
    """What one sync did; `rag ingest`'s report is the same (without moves)."""

    knowledge_base: str
    added: list[str] = field(default_factory=list)
    updated: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    moved: list[str] = field(default_factory=list)
    failed: list[tuple[str, str]] = field(default_factory=list)
    skipped: list[tuple[str, str]] = field(default_factory=list)
    warnings: list[tuple[str, str]] = field(default_factory=list)
    chunks: int = 0
    seconds: float = 0.0
    complete: bool = True  # the listing ran to its end (nothing was archived otherwise)
    kept: set[str] = field(default_factory=set, repr=False)  # source ids stored or found unchanged
    # Seconds spent per stage, summed over the fetch threads: listing, fetching, parsing, storing, indexing.
    timings: dict[str, float] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def timed(self, stage: str, seconds: float) -> None:
        with self._lock:
            self.timings[stage] = self.timings.get(stage, 0.0) + seconds
    error: str | None = None  # why the source could not be listed

    def summary(self) -> dict[str, Any]:
        counts = {
            "knowledge_base": self.knowledge_base, "added": len(self.added), "updated": len(self.updated),
            "unchanged": len(self.unchanged), "removed": len(self.removed), "failed": len(self.failed),
            "skipped": len(self.skipped), "chunks": self.chunks, "seconds": round(self.seconds, 2),
        }
        if self.moved:
            counts["moved"] = len(self.moved)
        return counts

    @property
    def outcome(self) -> str:
        if self.error is not None:
            return "failed"
        if not self.complete:
            return "stopped"
        return "partial" if self.failed else "ok"


@dataclass(frozen=True)
class Target:
    """Where a sync's documents go and how they are named."""

    kb: KnowledgeBase
    folder: tuple[str, ...]  # under the knowledge base's root
    root_key: str  # nodes.ingest_root of the documents this sync owns
    provider: str
    id_prefix: str  # "provider:org:resource:": an item's source id is this and its id
    source_pk: str | None = None  # the source's row; None for `rag ingest DIR`
    vanished: str = "archive"  # or "remove"
    moves: bool = True  # a vanished item's version reappearing under a new id is a move

    def source_id(self, item_id: str) -> str:
        return self.id_prefix + item_id

    @property
    def parse_caller(self) -> str:
        """Whose files a sync parses, for the parse workers' fair share (rag/ingest/sandbox.py)."""
        if self.source_pk is not None:
            return f"source:{self.kb.workspace_id}:{self.source_pk}"
        return f"ingest:{self.kb.workspace_id}:{self.root_key}"


@dataclass
class _Ready:
    """An item fetched and parsed, waiting for its batch."""

    item: Item
    version: str
    parsed: ParsedDocument | None  # None: not modified, only its version and state are noted
    original: bytes | None
    state: dict[str, Any]
    url: str | None


def version_key(version: str) -> str:
    """What `nodes.ingest_hash` keeps: the version itself when it fits, else its SHA-256."""
    return version if len(version) <= 64 else hashlib.sha256(version.encode("utf-8")).hexdigest()


class SyncEngine:
    def __init__(self, db: Database, edits: NodeEdits, publisher: Publisher, *, concurrency: int = 4,
                 batch: int = 32, attempts: int = 3, backoff_seconds: float = 0.5,
                 item_timeout_seconds: float = 120.0) -> None:
        self.db = db
        self.edits = edits
        self.publisher = publisher
        self.concurrency = concurrency
        self.batch = batch
        self.attempts = attempts
        self.backoff_seconds = backoff_seconds
        self.item_timeout_seconds = item_timeout_seconds

    # ----- the run -----

    def run(self, target: Target, connector: Connector, progress: Progress,
            stop: threading.Event | None = None, heartbeat: Callable[[dict[str, Any]], None] | None = None
            ) -> SyncReport:
        started = time.perf_counter()
        stop = stop or threading.Event()
        report = SyncReport(knowledge_base=target.kb.name)
        try:
            items = self._listing(connector, report, progress)
            report.timed("listing", time.perf_counter() - started)
        except SourceUnavailable as exc:
            report.error, report.complete = str(exc), False
            report.seconds = time.perf_counter() - started
            return report
        stored = self._stored(target)
        to_fetch, moves = self._plan(target, items, stored, report)
        self._apply_moves(target, moves, report)
        for batch in self._fetched_batches(connector, target, to_fetch, report, progress, stop):
            report.chunks += self._store_batch(target, batch, report, progress)
            if heartbeat is not None:
                heartbeat(self._counts(report) | {"stage": "reading"})
        if stop.is_set():
            report.complete = False
        else:  # what the folder connector could not read leaves, as `rag ingest` always did; elsewhere it stays
            listed = {target.source_id(item.id) for item in items}
            self._vanished(target, report.kept if target.vanished == "remove" else listed, report)
        report.seconds = time.perf_counter() - started
        return report

    @staticmethod
    def _counts(report: SyncReport) -> dict[str, Any]:
        return {k: v for k, v in report.summary().items() if k != "knowledge_base"}

    def _listing(self, connector: Connector, report: SyncReport, progress: Progress) -> list[Item]:
        items: list[Item] = []
        ids: set[str] = set()
        for item in connector.items():
            if item.id in ids and not item.failed:
                report.failed.append((item.label or item.id, "the source lists this item twice; the first is kept"))
                continue
            ids.add(item.id)
            items.append(item)
            if len(items) % 100 == 0:
                progress("listing", len(items), 0)
        progress("listing", len(items), len(items))
        report.warnings.extend(connector.listing_warnings())
        return items

    def _stored(self, target: Target) -> dict[str, tuple[str, str | None, bool, str, str | None, str | None]]:
        """source id -> (node id, its stored version, whether a version is live, its origin, its label,
        its url) of every document this sync owns."""
        with self.db.session() as session:
            nodes = session.scalars(select(Node).where(
                Node.kb_id == target.kb.id, Node.kind == DOCUMENT, Node.ingest_root == target.root_key))
            found = {node.source_id: node for node in nodes if node.source_id}
            live = set(session.scalars(
                select(DocumentVersion.node_id).join(Node, Node.id == DocumentVersion.node_id).where(
                    Node.kb_id == target.kb.id, Node.ingest_root == target.root_key,
                    DocumentVersion.status.in_((PUBLISHED, PUBLISHING)))))
            return {sid: (n.id, n.ingest_hash, n.id in live, n.origin, n.source_label, n.url)
                    for sid, n in found.items()}

    def _plan(self, target: Target, items: list[Item], stored: dict, report: SyncReport
              ) -> tuple[list[Item], list[tuple[str, Item]]]:
        """The items to fetch, and the moves: (old source id, item) of each item whose document
        exists under the id it had before."""
        to_fetch: list[Item] = []
        moves: list[tuple[str, Item]] = []
        relinks: list[tuple[str, str | None]] = []
        listed = {target.source_id(item.id) for item in items}
        vanished_by_version: dict[str, str] = {}
        if target.moves:
            for sid, (_node, version, *_rest) in stored.items():
                if sid not in listed and version:
                    vanished_by_version.setdefault(version, sid)
        for item in items:
            label = self._label(item)
            if item.skip:
                report.skipped.append((label, item.skip))
                continue
            if item.failed:
                report.failed.append((label, item.failed))
                continue
            sid = target.source_id(item.id)
            known = stored.get(sid)
            if known is None:
                old = self._moved_from(target, item, stored, listed, vanished_by_version)
                if old is not None:
                    moves.append((old, item))
                    known = stored[old]
            elif known[4] != f"{target.provider}:{label}":
                moves.append((sid, item))  # the same item elsewhere in the source's hierarchy, or renamed
            elif known[5] != item.url:
                relinks.append((known[0], item.url))  # only its link moved (a commit's URL)
            if known is not None and known[1] == version_key(item.version) and known[2]:
                report.unchanged.append(label)
                report.kept.add(sid)
                continue
            to_fetch.append(item)
        self._relink(relinks)
        return to_fetch, moves

    def _relink(self, relinks: list[tuple[str, str | None]]) -> None:
        with self.db.session() as session:
            for node_id, url in relinks:
                session.execute(update(Node).where(Node.id == node_id).values(url=url)
                                .execution_options(synchronize_session=False))

    @staticmethod
    def _moved_from(target: Target, item: Item, stored: dict, listed: set[str],
                    vanished_by_version: dict[str, str]) -> str | None:
        if item.moved_from is not None:
            old = target.source_id(item.moved_from)
            if old in stored and old not in listed:
                return old
        old = vanished_by_version.pop(version_key(item.version), None)
        return old

    @staticmethod
    def _label(item: Item) -> str:
        if item.label:
            return item.label
        return "/".join((*item.path, item.title or item.filename))

    # ----- fetching and parsing, a few at a time -----

    def _fetched_batches(self, connector: Connector, target: Target, items: list[Item], report: SyncReport,
                         progress: Progress, stop: threading.Event) -> Iterator[list[_Ready]]:
        """Batches of fetched and parsed items in the listing's order (so names given to two items
        of one title do not depend on which fetch finished first), fetched by `concurrency` threads
        with at most twice that many waiting: memory stays bounded whatever the source holds."""
        if not items:
            progress("reading", 0, 0)
            return
        previous = self._previous_states(target)
        batch: list[_Ready] = []
        pending: deque[tuple[Item, Future]] = deque()
        queue = iter(items)
        done = 0
        with ThreadPoolExecutor(self.concurrency, thread_name_prefix="rag-sync") as pool:
            while True:
                while not stop.is_set() and len(pending) < self.concurrency * 2:
                    item = next(queue, None)
                    if item is None:
                        break
                    pending.append((item, pool.submit(self._read, connector, item, previous.get(item.id), report,
                                                             target.parse_caller)))
                if not pending:
                    break
                item, future = pending.popleft()
                ready = self._outcome(future, item, report)
                if ready is not None:
                    batch.append(ready)
                done += 1
                progress("reading", done, len(items))
                if len(batch) >= self.batch:
                    yield batch
                    batch = []
        if batch:
            yield batch

    def _previous_states(self, target: Target) -> dict[str, dict]:
        if target.source_pk is None:
            return {}
        with self.db.session() as session:
            return {row.item_id: dict(row.state or {}) for row in session.scalars(
                select(SourceItem).where(SourceItem.source_pk == target.source_pk))}

    def _outcome(self, future: Future, item: Item, report: SyncReport) -> _Ready | None:
        label = self._label(item)
        try:
            ready = future.result()
        except (ItemFailed, UnreadableFile, SourceUnavailable) as exc:
            report.failed.append((label, str(exc)))
            return None
        except Exception:  # noqa: BLE001 - one item's surprise must not stop the others
            log.exception("syncing %s failed", label)
            report.failed.append((label, "the item could not be read (see the server's log)"))
            return None
        if ready.parsed is not None:
            report.warnings.extend((label, w) for w in ready.parsed.warnings)
        return ready

    def _read(self, connector: Connector, item: Item, previous: dict | None, report: SyncReport,
              caller: str = "") -> _Ready:
        began = time.perf_counter()
        try:
            fetched = self._fetch(connector, item, previous)
        except NotModified:
            return _Ready(item, item.version, None, None, dict(previous or {}), None)
        finally:
            report.timed("fetching", time.perf_counter() - began)
        filename = fetched.filename or item.filename
        began = time.perf_counter()
        try:
            parsed = fetched.parsed or _parse(fetched.data, filename, item.title, caller)
        finally:
            report.timed("parsing", time.perf_counter() - began)
        if fetched.warnings:  # what the connector saw (a page's links cut), reported with the parse's
            parsed.warnings = [*parsed.warnings, *fetched.warnings]
        if item.title:
            parsed.title = item.title
        problem = name_problem(" ".join(parsed.title.split()), separators=False) or next(
            (p for p in map(name_problem, item.path) if p), None)
        if problem:
            raise ItemFailed(f"its title or a folder name {problem}")
        original = fetched.data if PurePosixPath(filename).suffix.lower() in BINARY_PARSERS and fetched.parsed is None \
            else None
        return _Ready(item, fetched.version or item.version, parsed, original, dict(fetched.state),
                      fetched.url or item.url)

    def _fetch(self, connector: Connector, item: Item, previous: dict | None) -> Fetched:
        """The connector's fetch, a transient failure retried with backoff within the item's time."""
        retrying = Retrying(
            stop=stop_after_attempt(self.attempts) | stop_after_delay(self.item_timeout_seconds),
            wait=wait_exponential(multiplier=self.backoff_seconds, max=max(self.backoff_seconds * 8, 0.01)),
            retry=retry_if_exception(lambda e: isinstance(e, SourceUnavailable) and e.transient),
            reraise=True,
        )
        for attempt in retrying:
            with attempt:
                return connector.fetch(item, previous)
        raise AssertionError("unreachable")  # pragma: no cover

    # ----- storing -----

    def _store_batch(self, target: Target, batch: list[_Ready], report: SyncReport, progress: Progress) -> int:
        from rag.service.indexing.publish import request_publish

        to_publish: list[int] = []
        began = time.perf_counter()
        with self.db.session() as session:
            folders: dict[tuple[str, ...], str] = {(): target.kb.root_id}
            for ready in batch:
                label = self._label(ready.item)
                node = session.scalar(select(Node).where(Node.source_id == target.source_id(ready.item.id)))
                if node is not None and (node.origin != ORIGIN_INGEST or node.kb_id != target.kb.id):
                    report.failed.append((label, "a document written another way has this source id; left alone"))
                    continue
                if ready.parsed is None:  # not modified: only what the fetch keeps is new
                    if node is not None:
                        node.ingest_hash = version_key(ready.version)
                    self._record_item(session, target, ready, node)
                    report.unchanged.append(label)
                    report.kept.add(target.source_id(ready.item.id))
                    continue
                version, outcome = self._write(session, target, ready, node, folders)
                report.kept.add(target.source_id(ready.item.id))
                if version is not None:
                    request_publish(session, version)
                    to_publish.append(version.id)
                getattr(report, outcome).append(label)
        report.timed("storing", time.perf_counter() - began)
        if not to_publish:
            return 0
        before = report.chunks  # one indexing count across the batches
        began = time.perf_counter()
        try:
            return self.publisher.publish(
                to_publish, lambda done, total: progress("indexing", before + done, before + total))
        finally:
            report.timed("indexing", time.perf_counter() - began)

    def _write(self, session: Session, target: Target, ready: _Ready, node: Node | None,
               folders: dict) -> tuple[DocumentVersion | None, str]:
        item, parsed = ready.item, ready.parsed
        assert parsed is not None
        body_hash = content_hash(parsed.body)
        if node is None:
            parent_id = self._folder(session, target, target.folder + item.path, folders)
            name = tree.unique_name(session, parent_id, parsed.title, hint=item.filename)
            node = Node(
                workspace_id=target.kb.workspace_id, kb_id=target.kb.id, parent_id=parent_id, kind=DOCUMENT,
                name=name, name_key=name_key(name), meta=parsed.metadata or None,
                source_id=target.source_id(item.id), source_label=f"{target.provider}:{self._label(item)}",
                origin=ORIGIN_INGEST, ingest_root=target.root_key, ingest_hash=version_key(ready.version),
                url=ready.url,
            )
            session.add(node)
            session.flush()
            version = self._new_version(session, node, parsed, body_hash, None, ready)
            self._record_item(session, target, ready, node)
            return version, "added"
        versions = list(session.scalars(
            select(DocumentVersion).where(DocumentVersion.node_id == node.id).order_by(DocumentVersion.number)))
        node.ingest_root = target.root_key
        node.url = ready.url
        node.source_label = f"{target.provider}:{self._label(item)}"
        self._record_item(session, target, ready, node)
        live = next((v for v in versions if v.status in (PUBLISHED, PUBLISHING)), None)
        if live is not None and live.content_hash == body_hash:
            node.ingest_hash = version_key(ready.version)  # same text under a new version: nothing to index
            return None, "unchanged"
        newest = versions[-1] if versions else None
        if newest is not None and newest.status == DRAFT and newest.content_hash == body_hash:
            version = newest  # an earlier publish of this content failed: try again
            self._keep_original(session, version, ready)
        else:
            version = self._new_version(session, node, parsed, body_hash, newest, ready)
        node.ingest_hash = version_key(ready.version)
        node.meta = parsed.metadata or None
        return version, "updated"

    def _new_version(self, session: Session, node: Node, parsed: ParsedDocument, body_hash: str,
                     newest: DocumentVersion | None, ready: _Ready) -> DocumentVersion:
        version = DocumentVersion(
            node_id=node.id, number=(newest.number + 1) if newest else 1, body=parsed.body,
            content_hash=body_hash, origin=ORIGIN_INGEST, pages=layout_json(parsed),
        )
        session.add(version)
        session.flush()
        self._keep_original(session, version, ready)
        return version

    @staticmethod
    def _keep_original(session: Session, version: DocumentVersion, ready: _Ready) -> None:
        """A parsed file (PDF, HTML, Word) stays beside its version (rag/service/indexing/originals.py)."""
        if ready.original is not None:
            keep_original(session, version.id, PurePosixPath(ready.item.filename).name, ready.original)

    @staticmethod
    def _record_item(session: Session, target: Target, ready: _Ready, node: Node | None) -> None:
        if target.source_pk is None:
            return
        row = session.scalar(select(SourceItem).where(
            SourceItem.source_pk == target.source_pk, SourceItem.item_id == ready.item.id))
        if row is None:
            row = SourceItem(source_pk=target.source_pk, item_id=ready.item.id)
            session.add(row)
        row.version = version_key(ready.version)
        row.node_id = node.id if node is not None else None
        row.state = ready.state or None

    def _folder(self, session: Session, target: Target, parts: tuple[str, ...], cache: dict) -> str:
        if parts in cache:
            return cache[parts]
        parent_id = self._folder(session, target, parts[:-1], cache)
        name = parts[-1]
        folder = session.scalar(select(Node).where(Node.parent_id == parent_id, Node.name_key == name_key(name)))
        if folder is None or folder.kind != FOLDER:
            if folder is not None:  # a document already has this name: keep both, visibly
                name = tree.unique_name(session, parent_id, name, hint="folder")
            folder = Node(
                workspace_id=target.kb.workspace_id, kb_id=target.kb.id, parent_id=parent_id, kind=FOLDER,
                name=name, name_key=name_key(name), source_label=f"{target.provider}:{'/'.join(parts)}",
                origin=ORIGIN_INGEST, ingest_root=target.root_key,
            )
            session.add(folder)
            session.flush()
        cache[parts] = folder.id
        return folder.id

    # ----- moves and what vanished -----

    def _apply_moves(self, target: Target, moves: list[tuple[str, Item]], report: SyncReport) -> None:
        """A moved item's node takes its new id, folder and label; its content is compared as any other's."""
        if not moves:
            return
        with self.db.session() as session:
            folders: dict[tuple[str, ...], str] = {(): target.kb.root_id}
            for old, item in moves:
                node = session.scalar(select(Node).where(Node.source_id == old))
                if node is None:
                    continue
                node.source_id = target.source_id(item.id)
                node.source_label = f"{target.provider}:{self._label(item)}"
                node.url = item.url
                parent_id = self._folder(session, target, target.folder + item.path, folders)
                name = " ".join(item.title.split()) if item.title else node.name
                if parent_id != node.parent_id or not node.name.startswith(name):
                    node.parent_id = parent_id
                    session.flush()  # the node's own old name no longer takes the new place
                    node.name = tree.unique_name(session, parent_id, name, hint=item.filename)
                    node.name_key = name_key(node.name)
                if target.source_pk is not None:
                    session.query(SourceItem).filter(
                        SourceItem.source_pk == target.source_pk, SourceItem.item_id == old.removeprefix(target.id_prefix)
                    ).update({"item_id": item.id}, synchronize_session=False)
                report.moved.append(self._label(item))

    def _vanished(self, target: Target, seen: set[str], report: SyncReport) -> None:
        """What the listing no longer holds leaves search; an archived document stays owned by the
        sync (so removing the source with its documents takes it too) but is not archived twice."""
        with self.db.session() as session:
            owned = select(Node).where(Node.kb_id == target.kb.id, Node.kind == DOCUMENT,
                                       Node.ingest_root == target.root_key, Node.origin == ORIGIN_INGEST)
            if target.vanished != "remove":
                owned = owned.where(Node.id.in_(select(DocumentVersion.node_id).where(
                    DocumentVersion.status.in_((PUBLISHED, PUBLISHING)))))
            gone = [(node.id, node.source_label or node.source_id or node.id, node.source_id)
                    for node in session.scalars(owned) if node.source_id not in seen]
            if target.source_pk is not None and gone:
                item_ids = [sid.removeprefix(target.id_prefix) for _, _, sid in gone if sid]
                for i in range(0, len(item_ids), 500):
                    session.query(SourceItem).filter(
                        SourceItem.source_pk == target.source_pk, SourceItem.item_id.in_(item_ids[i:i + 500])
                    ).delete(synchronize_session=False)
        node_ids = [node_id for node_id, _, _ in gone]
        report.removed.extend(label.split(":", 1)[-1] for _, label, _ in gone)
        if target.vanished == "remove":
            self.edits.remove_nodes(node_ids)
        else:  # an item that comes back is stored again (it has no live version), even with the same content
            self.publisher.unpublish_nodes(node_ids)
        self._drop_empty_folders(target, seen)

    def _drop_empty_folders(self, target: Target, seen: set[str]) -> None:
        """Folders this sync made that hold nothing any more."""
        while True:
            with self.db.session() as session:
                folders = session.scalars(select(Node).where(
                    Node.kb_id == target.kb.id, Node.kind == FOLDER, Node.origin == ORIGIN_INGEST,
                    Node.ingest_root == target.root_key)).all()
                empty = [f for f in folders
                         if session.scalar(select(Node.id).where(Node.parent_id == f.id).limit(1)) is None]
                for folder in empty:
                    session.delete(folder)
            if not empty:
                return


def _parse(data: bytes, filename: str, title: str | None, caller: str = "") -> ParsedDocument:
    """The bytes parsed by their format, as `caller`'s; UnreadableFile says why they cannot be."""
    try:
        return parse_bytes(data, filename, title or humanize(PurePosixPath(filename).stem), caller=caller)
    except UnreadableFile:
        raise
    except Exception:  # a parser's own failure on a strange file must not stop the rest of the sync
        log.exception("parsing %s failed", filename)
        raise UnreadableFile("the file could not be read (damaged, or not what its extension says)") from None


def iter_limited(items: Iterable[Item], limit: int) -> Iterator[Item]:
    """A listing cut at `limit` items, refused past it (a source of a million files is said, not half-synced)."""
    for count, item in enumerate(items, start=1):
        if count > limit:
            raise SourceUnavailable(f"the source lists more than {limit} items (RAG_SOURCES__MAX_ITEMS)")
        yield item
