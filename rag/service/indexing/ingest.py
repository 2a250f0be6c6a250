"""Ingestion: bring a directory tree (or a corpus of records) into a knowledge base, then publish.

Run again, it changes only what changed: each file is compared with the hash of what it last
ingested. It touches only documents it created itself (origin `ingest`, same root): documents
written through the API or MCP are never deleted or overwritten, and an edit made to an ingested
document survives until its file changes (the file's content then becomes a new version, and the
edit stays in the history).

What a directory walk takes: regular files of a format `rag.ingest.formats` reads (Markdown, text,
PDF, HTML, Word), and links to such files that stay inside the ingested folder. Every file is read
as bytes and parsed by `parse_bytes`; a file that cannot be read (an encrypted or image-only PDF, a
damaged file, one whose extension lies) is a failure with the reason, and the rest goes on. A
file is unchanged while the hash of its bytes is. It never opens anything else, and says so in the
report: a link that leaves the folder (or is broken) is a failure; a hidden name, a link to a
directory (never followed, so no loop), a FIFO, socket or device, and any other suffix are
skipped with the reason.
"""

from __future__ import annotations

import logging
import os
import stat
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterable

from sqlalchemy import select

from rag.errors import InvalidArgument
from rag.ingest.formats import BINARY_PARSERS, UnreadableFile, supported_suffixes
from rag.ingest.parse import ParsedDocument, humanize, parse_record
from rag.ingest.read import parse_bytes
from rag.service.content import tree
from rag.service.checks import name_problem
from rag.service.indexing.originals import keep_original
from rag.service.identity.principal import Principal
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
)

if TYPE_CHECKING:
    from rag.service.identity.access import Access
    from rag.service.activity import ActivityLog
    from rag.service.content.catalog import Catalog
    from rag.service.content.edits import NodeEdits
    from rag.service.indexing.publish import Publisher
    from rag.settings import Settings
    from rag.store.db import Database

log = logging.getLogger(__name__)

# (stage, done, total): stages are "reading" (files) and "indexing" (chunks).
IngestProgress = Callable[[str, int, int], None]


@dataclass
class IngestReport:
    knowledge_base: str
    added: list[str] = field(default_factory=list)
    updated: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    failed: list[tuple[str, str]] = field(default_factory=list)
    skipped: list[tuple[str, str]] = field(default_factory=list)
    warnings: list[tuple[str, str]] = field(default_factory=list)
    chunks: int = 0
    seconds: float = 0.0

    def summary(self) -> dict[str, Any]:
        return {
            "knowledge_base": self.knowledge_base,
            "added": len(self.added),
            "updated": len(self.updated),
            "unchanged": len(self.unchanged),
            "removed": len(self.removed),
            "failed": len(self.failed),
            "skipped": len(self.skipped),
            "chunks": self.chunks,
            "seconds": round(self.seconds, 2),
        }


@dataclass
class _Item:
    source_id: str
    label: str  # the path or record id, as reported and used in the source label
    folders: tuple[str, ...]
    parsed: ParsedDocument
    raw_hash: str
    name_hint: str
    original: bytes | None = None  # the file's bytes, for a format that is not text (PDF, HTML, Word)


def _noop(stage: str, done: int, total: int) -> None:
    return None


class _Sync:
    provider = "fs"

    def __init__(self, service: Ingest, principal: Principal) -> None:
        self.service = service
        self.principal = principal

    def apply(
        self, kb: KnowledgeBase, root_key: str, items: list[_Item], report: IngestReport, progress: IngestProgress
    ) -> None:
        from rag.service.checks import content_hash, name_key
        from rag.service.indexing.publish import request_publish

        service = self.service
        self.root_key = root_key
        to_publish: list[int] = []
        with service.db.session() as session:
            existing = {
                node.source_id: node
                for node in session.scalars(
                    select(Node).where(Node.kb_id == kb.id, Node.origin == ORIGIN_INGEST, Node.kind == DOCUMENT)
                )
            }
            folder_cache: dict[tuple[str, ...], str] = {(): kb.root_id}
            for item in items:
                node = existing.get(item.source_id)
                if node is None:
                    node = session.scalar(select(Node).where(Node.source_id == item.source_id))
                body_hash = content_hash(item.parsed.body)
                if node is None:
                    parent_id = self._folder(session, kb, item.folders, folder_cache)
                    name = tree.unique_name(session, parent_id, item.parsed.title, hint=item.name_hint)
                    node = Node(
                        workspace_id=kb.workspace_id, kb_id=kb.id, parent_id=parent_id, kind=DOCUMENT, name=name,
                        name_key=name_key(name), meta=item.parsed.metadata or None, source_id=item.source_id,
                        source_label=f"{self.provider}:{item.label}", origin=ORIGIN_INGEST, ingest_root=root_key,
                        ingest_hash=item.raw_hash,
                    )
                    session.add(node)
                    session.flush()
                    version = DocumentVersion(
                        node_id=node.id, number=1, body=item.parsed.body, content_hash=body_hash, origin=ORIGIN_INGEST,
                        pages=_pages(item.parsed),
                    )
                    session.add(version)
                    session.flush()
                    self._keep_original(session, version, item)
                    request_publish(session, version)
                    to_publish.append(version.id)
                    report.added.append(item.label)
                    continue
                node.ingest_root = root_key
                versions = list(
                    session.scalars(select(DocumentVersion).where(DocumentVersion.node_id == node.id).order_by(DocumentVersion.number))
                )
                live = any(v.status in (PUBLISHED, PUBLISHING) for v in versions)
                if node.ingest_hash == item.raw_hash and live:
                    report.unchanged.append(item.label)
                    continue
                newest = versions[-1] if versions else None
                if newest is not None and newest.status == DRAFT and newest.content_hash == body_hash:
                    version = newest  # an earlier publish of this content failed: try again
                else:
                    version = DocumentVersion(
                        node_id=node.id, number=(newest.number + 1) if newest else 1,
                        body=item.parsed.body, content_hash=body_hash, origin=ORIGIN_INGEST, pages=_pages(item.parsed),
                    )
                    session.add(version)
                    session.flush()
                self._keep_original(session, version, item)
                request_publish(session, version)
                node.ingest_hash = item.raw_hash
                node.meta = item.parsed.metadata or None
                to_publish.append(version.id)
                report.updated.append(item.label)
            seen = {item.source_id for item in items}
            gone = [
                node for sid, node in existing.items() if sid not in seen and node.ingest_root == root_key
            ]
            removed_ids = [node.id for node in gone]
            report.removed.extend(node.source_label.split(":", 1)[-1] for node in gone)
        service.edits.remove_nodes(removed_ids)
        self._drop_empty_folders(kb, root_key, {item.folders[:i] for item in items for i in range(1, len(item.folders) + 1)})
        report.chunks = service.publisher.publish(to_publish, lambda done, total: progress("indexing", done, total))

    @staticmethod
    def _keep_original(session, version: DocumentVersion, item: _Item) -> None:
        """A parsed file (PDF, HTML, Word) stays beside its version (rag/service/indexing/originals.py)."""
        if item.original is not None:
            keep_original(session, version.id, Path(item.label).name, item.original)

    def _drop_empty_folders(self, kb: KnowledgeBase, root_key: str, current: set[tuple[str, ...]]) -> None:
        """Folders this import made for directories that are gone, once nothing is left in them."""
        while True:
            with self.service.db.session() as session:
                folders = session.scalars(
                    select(Node).where(
                        Node.kb_id == kb.id, Node.kind == FOLDER, Node.origin == ORIGIN_INGEST, Node.ingest_root == root_key
                    )
                ).all()
                empty = [
                    f for f in folders
                    if tuple(f.source_label.split(":", 1)[1].split("/")) not in current
                    and session.scalar(select(Node.id).where(Node.parent_id == f.id).limit(1)) is None
                ]
                for folder in empty:
                    session.delete(folder)
            if not empty:
                return

    def _folder(self, session, kb: KnowledgeBase, parts: tuple[str, ...], cache: dict) -> str:
        from rag.service.checks import name_key

        if parts in cache:
            return cache[parts]
        parent_id = self._folder(session, kb, parts[:-1], cache)
        name = parts[-1]
        folder = session.scalar(select(Node).where(Node.parent_id == parent_id, Node.name_key == name_key(name)))
        if folder is None or folder.kind != FOLDER:
            if folder is not None:  # a document already has this name: keep both, visibly
                name = tree.unique_name(session, parent_id, name, hint="folder")
            folder = Node(
                workspace_id=kb.workspace_id, kb_id=kb.id, parent_id=parent_id, kind=FOLDER, name=name,
                name_key=name_key(name), source_label=f"{self.provider}:{'/'.join(parts)}", origin=ORIGIN_INGEST,
                ingest_root=self.root_key,
            )
            session.add(folder)
            session.flush()
        cache[parts] = folder.id
        return folder.id


class DirectoryIngest(_Sync):
    """`rag ingest PATH`: directories become folders, Markdown and text files become documents."""

    def run(self, path: str | os.PathLike, kb_name: str, progress: IngestProgress | None = None) -> IngestReport:
        from rag.service.checks import content_hash

        progress = progress or _noop
        started = time.perf_counter()
        root = Path(path).expanduser()
        if not root.exists():
            raise InvalidArgument(f"{path}: no such directory")
        if not root.is_dir():
            raise InvalidArgument(f"{path}: not a directory (rag ingest imports a directory tree)")
        root = root.resolve()
        self.service.access.require_write(self.principal)
        kb = self.service.catalog.knowledge_base(self.principal, kb_name, create=True)
        report = IngestReport(knowledge_base=kb.name)
        files = _discover(root, report)
        items: list[_Item] = []
        for i, found in enumerate(files, start=1):
            file, rel = found.path, found.rel
            try:
                data = found.read()
                parsed = _parse(data, file)
                # A name no API call could give (control or bidi characters, `..`) is not given here either.
                problem = name_problem(" ".join(parsed.title.split()), separators=False) or next(
                    (p for p in map(name_problem, Path(rel).parent.parts) if p), None)
                if problem:
                    raise ValueError(f"its title or a folder name {problem}")
            except _NotRegular as exc:  # it became a FIFO or the like after the walk saw it
                report.skipped.append((rel, str(exc)))
            except (OSError, ValueError) as exc:
                message = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
                report.failed.append((rel, message))
            else:
                report.warnings.extend((rel, w) for w in parsed.warnings)
                items.append(
                    _Item(
                        source_id=f"fs:{kb.workspace_id}:{kb.name}:{rel}", label=rel,
                        folders=tuple(Path(rel).parent.parts), parsed=parsed, raw_hash=content_hash(data),
                        name_hint=file.name, original=data if file.suffix.lower() in BINARY_PARSERS else None,
                    )
                )
            progress("reading", i, len(files))
        self.apply(kb, str(root), items, report, progress)
        report.seconds = time.perf_counter() - started
        self.service.activity.record(self.principal, "ingest", kb.name, "ok" if not report.failed else "partial", report.summary())
        return report


def _pages(parsed: ParsedDocument) -> list[list[int]] | None:
    return [list(span) for span in parsed.pages] or None


def _parse(data: bytes, file: Path) -> ParsedDocument:
    """The file parsed by its format; ValueError (UnreadableFile) says why it cannot be."""
    try:
        return parse_bytes(data, file.name, humanize(file.stem))
    except UnreadableFile:
        raise
    except Exception:  # a parser's own failure on a strange file must not stop the rest of the ingest
        log.exception("parsing %s failed", file.name)
        raise UnreadableFile("the file could not be read (damaged, or not what its extension says)") from None


class _NotRegular(Exception):
    """Not a regular file (a FIFO, a socket, a device): skipped, never opened for reading."""


class _Refused(Exception):
    """A link that cannot be followed (it leaves the ingested folder, is broken or loops): a failure."""


def _kind(mode: int) -> str:
    for test, name in (
        (stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISSOCK, "a socket"), (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"), (stat.S_ISDIR, "a directory"),
    ):
        if test(mode):
            return f"{name}, not a regular file"
    return "not a regular file"


@dataclass
class _Found:
    """A file the walk will read: `target` is the regular file itself, or a link's target inside the root."""

    path: Path
    rel: str
    target: Path
    identity: tuple[int, int]  # (device, inode) when found: what is read must still be that file

    @classmethod
    def check(cls, root: Path, path: Path) -> _Found:
        """Raises _Refused for a link that cannot be followed, _NotRegular for what is never opened."""
        info = os.lstat(path)
        target = path
        if stat.S_ISLNK(info.st_mode):
            try:
                target = Path(os.path.realpath(path, strict=True))
            except FileNotFoundError:
                raise _Refused("a broken link (its target does not exist)") from None
            except (OSError, RuntimeError):
                raise _Refused("a link that cannot be resolved (a loop of links)") from None
            if not target.is_relative_to(root):
                raise _Refused("a link to a file outside the ingested folder; refused")
            info = os.stat(target)
        if not stat.S_ISREG(info.st_mode):
            raise _NotRegular(_kind(info.st_mode))
        return cls(path, path.relative_to(root).as_posix(), target, (info.st_dev, info.st_ino))

    def read(self) -> bytes:
        """The file's bytes. Opened without blocking and without following a link, then checked
        again: a file swapped for a FIFO, a device or another file since the walk is not read."""
        fd = os.open(self.target, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC)
        with os.fdopen(fd, "rb") as stream:
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode):
                raise _NotRegular(_kind(info.st_mode))
            if (info.st_dev, info.st_ino) != self.identity:
                raise ValueError("it was replaced while the folder was read; run the ingest again")
            return stream.read()


HIDDEN = "a hidden name (it starts with a dot)"


def _discover(root: Path, report: IngestReport) -> list[_Found]:
    """Walk the tree (links to directories are listed, never entered: os.walk's default), recording
    what is skipped and why."""
    found: list[_Found] = []
    suffixes = supported_suffixes()

    def on_error(exc: OSError) -> None:
        rel = Path(exc.filename).relative_to(root).as_posix() if exc.filename else "?"
        report.failed.append((rel, exc.strerror or "cannot be read"))

    for dirpath, dirnames, filenames in os.walk(root, onerror=on_error):
        here = Path(dirpath)
        entered = []
        for name in sorted(dirnames):
            rel = (here / name).relative_to(root).as_posix() + "/"
            if name.startswith("."):
                report.skipped.append((rel, HIDDEN))
            elif (here / name).is_symlink():
                report.skipped.append((rel, "a link to a directory (links to directories are not followed)"))
            else:
                entered.append(name)
        dirnames[:] = entered
        for name in sorted(filenames):
            path = here / name
            rel = path.relative_to(root).as_posix()
            if name.startswith("."):
                report.skipped.append((rel, HIDDEN))
            elif path.suffix.lower() not in suffixes:
                report.skipped.append((rel, "not a file type ingest reads (Markdown, text, PDF, HTML, Word)"))
            else:
                try:
                    found.append(_Found.check(root, path))
                except _NotRegular as exc:
                    report.skipped.append((rel, str(exc)))
                except _Refused as exc:
                    report.failed.append((rel, str(exc)))
                except OSError as exc:  # gone since the walk listed it, or unreadable metadata
                    report.failed.append((rel, exc.strerror or "cannot be read"))
    return found


class RecordIngest(_Sync):
    """A corpus of records (`{"_id", "title"?, "text"}`): each becomes one document in the knowledge
    base's root, whose source_id ends with `:` and the record's `_id`."""

    def run(
        self, records: Iterable[dict], kb_name: str, provider: str = "corpus", progress: IngestProgress | None = None
    ) -> IngestReport:
        from rag.service.checks import content_hash

        self.provider = provider
        progress = progress or _noop
        started = time.perf_counter()
        self.service.access.require_write(self.principal)
        kb = self.service.catalog.knowledge_base(self.principal, kb_name, create=True)
        report = IngestReport(knowledge_base=kb.name)
        items: list[_Item] = []
        for record in records:
            record_id = str(record.get("_id", "")).strip()
            text = record.get("text")
            if not record_id or not isinstance(text, str):
                report.failed.append((record_id or "?", "a record needs an `_id` and a `text` string"))
                continue
            title = record.get("title") if isinstance(record.get("title"), str) else None
            parsed = parse_record(title, text, record_id)
            items.append(
                _Item(
                    source_id=f"{provider}:{kb.workspace_id}:{kb.name}:{record_id}", label=record_id, folders=(),
                    parsed=parsed, raw_hash=content_hash(parsed.body), name_hint=record_id,
                )
            )
        self.apply(kb, f"{provider}:records", items, report, progress)
        report.seconds = time.perf_counter() - started
        self.service.activity.record(self.principal, "ingest_records", kb.name, "ok", report.summary())
        return report


class Ingest:
    """The ingestion part of the service: what the runs above need, given once."""

    def __init__(self, db: Database, settings: Settings, access: Access, activity: ActivityLog, catalog: Catalog,
                 edits: NodeEdits, publisher: Publisher) -> None:
        self.db = db
        self.settings = settings
        self.access = access
        self.activity = activity
        self.catalog = catalog
        self.edits = edits
        self.publisher = publisher

    def ingest_directory(self, principal: Principal, path: str | os.PathLike, kb_name: str | None = None,
                         progress: IngestProgress | None = None) -> IngestReport:
        """Into the default knowledge base unless one is named."""
        return DirectoryIngest(self, principal).run(path, kb_name or self.settings.default_kb, progress)

    def ingest_records(self, principal: Principal, records: Iterable[dict], kb_name: str, provider: str = "corpus",
                       progress: IngestProgress | None = None) -> IngestReport:
        return RecordIngest(self, principal).run(records, kb_name, provider, progress)
