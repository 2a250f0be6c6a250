"""Import: check the archive whole, then load it in one transaction and index it again."""

from __future__ import annotations

import hashlib
import json
import logging
import time
from dataclasses import dataclass, field
from itertools import groupby
from pathlib import Path
from typing import Any, Callable, Iterator

from sqlalchemy import func, insert, select, text, update
from sqlalchemy.exc import IntegrityError, SQLAlchemyError

from rag.errors import AlreadyExists, InvalidArgument, NotFound, RagError
from rag.service.identity.principal import Principal
from rag.service.indexing.publish import request_publishes
from rag.store.api_tokens import make_api_tokens_home_only
from rag.store.models import (
    DRAFT,
    PUBLISHED,
    PUBLISHING,
    Activity,
    ApiToken,
    Chunk,
    DocumentVersion,
    KnowledgeBase,
    Membership,
    Node,
    PrincipalRecord,
    Source,
    SourceItem,
    Workspace,
)
from rag.service.transfer.sources import idle

from rag.service.transfer.rows import (
    BATCH,
    FORMAT,
    FORMAT_VERSION,
    TABLES,
    Damaged,
    ImportReport,
    StageProgress,
    TransferParts,
    _known_revisions,
    _load_row,
    batch_of,
)

log = logging.getLogger(__name__)

# ----- import: reading and checking the archive -----

@dataclass
class _Contents:
    """What the first reading learnt: enough to look for clashes without keeping any body."""

    header: dict[str, Any]
    counts: dict[str, int] = field(default_factory=lambda: dict.fromkeys(TABLES, 0))
    workspaces: set[str] = field(default_factory=set)
    kbs: dict[str, tuple[str, str, str]] = field(default_factory=dict)  # id -> (workspace, name key, name)
    nodes: set[str] = field(default_factory=set)
    source_ids: list[str] = field(default_factory=list)
    versions: list[int] = field(default_factory=list)
    version_set: set[int] = field(default_factory=set)
    principals: set[str] = field(default_factory=set)
    memberships: list[tuple[str, str]] = field(default_factory=list)
    tokens: list[str] = field(default_factory=list)
    secret_hashes: list[str] = field(default_factory=list)
    sources: dict[str, tuple[str, str, str]] = field(default_factory=dict)  # id -> (workspace, name key, name)
    source_names: set[tuple[str, str]] = field(default_factory=set)
    source_items: set[tuple[str, str]] = field(default_factory=set)  # (source id, item id)
    source_item_ids: set[int] = field(default_factory=set)


class _Archive:
    def __init__(self, path: Path) -> None:
        self.path = Path(path)

    def _lines(self) -> Iterator[tuple[int, Any]]:
        try:
            stream = open(self.path, "rb")
        except FileNotFoundError:
            raise NotFound(f"no such archive: {self.path}") from None
        except OSError as exc:
            raise InvalidArgument(f"cannot read the archive {self.path}: {exc.strerror}") from None
        with stream:
            number = 0
            for number, raw in enumerate(stream, 1):
                if not raw.endswith(b"\n"):
                    raise Damaged(f"line {number} is cut short: the archive is truncated")
                try:
                    record = json.loads(raw)
                except RecursionError:  # `[[[[…` thousands deep: no row of an archive nests like that
                    raise Damaged(f"line {number} is nested too deeply to be an archive row: the archive is damaged") from None
                except (ValueError, UnicodeDecodeError):
                    raise Damaged(f"line {number} is not valid JSON: the archive is truncated or damaged") from None
                yield number, record
            if number == 0:
                raise Damaged("the archive is empty")

    def rows(self) -> Iterator[tuple[str, dict[str, Any], str]]:
        """(table, column values ready to insert, where) of each row, after the header is checked."""
        lines = self._lines()
        _, header = next(lines)
        self.header = _check_header(header)
        order = list(TABLES)
        position = 0
        for number, record in lines:
            where = f"line {number}"
            if not isinstance(record, dict) or set(record) != {"table", "row"}:
                raise Damaged(f"{where}: a row must be {{\"table\": …, \"row\": {{…}}}}")
            table = record["table"]
            if table not in TABLES:
                raise Damaged(f"{where}: unknown table {table!r}")
            if order.index(table) < position:
                raise Damaged(f"{where}: {table} rows must come before {order[position]} rows")
            position = order.index(table)
            yield table, _load_row(table, record["row"], where), where

    def scan(self, progress: StageProgress | None = None) -> _Contents:
        """Read it all once: JSON, columns and types, the header's counts, every reference inside it."""
        contents: _Contents | None = None
        total = done = 0
        for table, row, where in self.rows():
            if contents is None:
                contents = _Contents(self.header)
                total = sum(self.header["counts"].values())
            _take(contents, table, row, where)
            done += 1
            if progress and done % BATCH == 0:
                progress("checking", done, total)
        contents = contents or _Contents(self.header)
        for table, expected in self.header["counts"].items():
            if contents.counts[table] != expected:
                raise Damaged(
                    f"the header announces {expected} {table} rows and the archive holds {contents.counts[table]}: "
                    "it is truncated or damaged"
                )
        if progress:
            progress("checking", done, total)
        return contents


def _check_header(header: Any) -> dict[str, Any]:
    if not isinstance(header, dict) or header.get("format") != FORMAT:
        raise Damaged(f"not a rag archive: its first line must be the {FORMAT!r} header")
    version = header.get("version")
    if version != FORMAT_VERSION:
        raise Damaged(f"unknown archive format version {version!r}: this rag reads version {FORMAT_VERSION}")
    revision = header.get("revision")
    if revision is not None and revision not in _known_revisions():
        raise Damaged(f"the archive comes from a newer rag (schema revision {revision!r}); upgrade this one first")
    counts = header.get("counts")
    if (not isinstance(counts, dict) or set(counts) - set(TABLES)
            or not all(isinstance(n, int) and not isinstance(n, bool) and n >= 0 for n in counts.values())):
        raise Damaged("the archive's header has no valid row counts")
    return {**header, "counts": {table: counts.get(table, 0) for table in TABLES}}


class _Rows:
    """The checks of one archive row: its references and its keys."""

    def __init__(self, c: _Contents, table: str, row: dict[str, Any], where: str) -> None:
        self.c, self.table, self.row, self.where = c, table, row, where

    def refer(self, column: str, known: set | dict, what: str) -> None:
        value = self.row[column]
        if value not in known:
            raise Damaged(f"{self.where}: {self.table} row refers to {what} {value!r}, which is not in the archive")

    def unique(self, seen: set | dict | list, what: str) -> Any:
        value = self.row["id"]
        if value in seen:
            raise Damaged(f"{self.where}: {what} {value!r} appears twice")
        return value

    def workspaces(self) -> None:
        self.c.workspaces.add(self.unique(self.c.workspaces, "workspace"))

    def knowledge_bases(self) -> None:
        self.refer("workspace_id", self.c.workspaces, "workspace")
        kb_id = self.unique(self.c.kbs, "knowledge base")
        self.c.kbs[kb_id] = (self.row["workspace_id"], self.row["name_key"], self.row["name"])

    def nodes(self) -> None:
        self.refer("kb_id", self.c.kbs, "knowledge base")
        self.refer("workspace_id", self.c.workspaces, "workspace")
        if self.row.get("parent_id") is not None:
            self.refer("parent_id", self.c.nodes, "parent node")  # parents come first
        self.c.nodes.add(self.unique(self.c.nodes, "node"))
        if self.row.get("source_id") is not None:
            self.c.source_ids.append(self.row["source_id"])

    def document_versions(self) -> None:
        self.refer("node_id", self.c.nodes, "node")
        self.c.versions.append(self.row["id"])
        self.c.version_set.add(self.row["id"])

    def document_originals(self) -> None:
        """A version's original file: its version is in the archive, and its bytes are the ones
        its size and SHA-256 describe (a damaged file would otherwise be served as the original)."""
        self.refer("version_id", self.c.version_set, "document version")
        data = self.row["data"]
        if len(data) != self.row["size"] or hashlib.sha256(data).hexdigest() != self.row["sha256"]:
            raise Damaged(f"{self.where}: the original file of version id {self.row['version_id']} does not match "
                          "its size and SHA-256: the archive is damaged")

    def sources(self) -> None:
        """A source fills a knowledge base of its own workspace, under a name no other source of
        that workspace has."""
        self.refer("workspace_id", self.c.workspaces, "workspace")
        self.refer("kb_id", self.c.kbs, "knowledge base")
        workspace, key, name = self.row["workspace_id"], self.row["name_key"], self.row["name"]
        if self.c.kbs[self.row["kb_id"]][0] != workspace:
            raise Damaged(f"{self.where}: source {name!r} of workspace {workspace!r} fills a knowledge base of "
                          "another workspace")
        source_id = self.unique(self.c.sources, "source")
        if (workspace, key) in self.c.source_names:
            raise Damaged(f"{self.where}: two sources are named {name!r} in workspace {workspace!r}")
        self.c.sources[source_id] = (workspace, key, name)
        self.c.source_names.add((workspace, key))

    def source_items(self) -> None:
        self.refer("source_pk", self.c.sources, "source")
        if self.row.get("node_id") is not None:
            self.refer("node_id", self.c.nodes, "node")
        self.c.source_item_ids.add(self.unique(self.c.source_item_ids, "source item"))
        item = (self.row["source_pk"], self.row["item_id"])
        if item in self.c.source_items:
            raise Damaged(f"{self.where}: item {item[1]!r} of source {self.c.sources[item[0]][2]!r} appears twice")
        self.c.source_items.add(item)

    def principals(self) -> None:
        self.c.principals.add(self.unique(self.c.principals, "principal"))

    def memberships(self) -> None:
        self.refer("principal_id", self.c.principals, "principal")
        self.refer("workspace_id", self.c.workspaces, "workspace")
        self.c.memberships.append((self.row["principal_id"], self.row["workspace_id"]))

    def tokens(self) -> None:
        self.refer("principal_id", self.c.principals, "principal")
        self.refer("workspace_id", self.c.workspaces, "workspace")
        self.c.tokens.append(self.row["id"])
        self.c.secret_hashes.append(self.row["secret_hash"])

    def activity(self) -> None:
        """Activity rows refer to nothing the import checks: a target may be long gone."""


def _take(c: _Contents, table: str, row: dict[str, Any], where: str) -> None:
    """Note a row's keys, and refuse a duplicate or a reference to something the archive lacks."""
    c.counts[table] += 1
    getattr(_Rows(c, table, row, where), table)()


# ----- import: what the target already holds -----

def _present(session, column, values: list) -> list:
    found: list = []
    for i in range(0, len(values), BATCH):
        found += session.scalars(select(column).where(column.in_(values[i:i + BATCH]))).all()
    return found


def _clashes(svc: TransferParts, c: _Contents) -> list[str]:
    """What the archive would add that the target already has, in words (empty: nothing)."""
    said: list[str] = []

    def say(found: list, one: str, many: str, example: Callable[[Any], str] = repr) -> None:
        if len(found) == 1:
            said.append(f"{one} {example(found[0])}")
        elif found:
            said.append(f"{len(found)} {many}, e.g. {example(found[0])}")

    with svc.db.session() as session:
        kb_rows = session.execute(
            select(KnowledgeBase.id, KnowledgeBase.workspace_id, KnowledgeBase.name_key)
            .where(KnowledgeBase.workspace_id.in_(sorted({ws for ws, _, _ in c.kbs.values()})))
        ).all()
        taken_ids = {row.id for row in kb_rows}
        taken_names = {(row.workspace_id, row.name_key) for row in kb_rows}
        taken_ids |= set(_present(session, KnowledgeBase.id, list(c.kbs)))
        kbs = [kb_id for kb_id, (ws, key, _) in c.kbs.items() if kb_id in taken_ids or (ws, key) in taken_names]
        say(kbs, "knowledge base", "knowledge bases", lambda kb_id: f"{c.kbs[kb_id][2]!r} of workspace {c.kbs[kb_id][0]!r}")
        say(_present(session, Node.id, sorted(c.nodes)), "node", "nodes")
        say(_present(session, Node.source_id, c.source_ids), "document", "documents")
        say(_present(session, DocumentVersion.id, c.versions), "document version", "document versions",
            lambda version_id: f"id {version_id}")
        say(_source_clashes(session, c), "source", "sources",
            lambda source_id: f"{c.sources[source_id][2]!r} of workspace {c.sources[source_id][0]!r}")
        principals = _present(session, PrincipalRecord.id, sorted(c.principals))
        say(principals, "principal", "principals")
        tokens = _present(session, ApiToken.id, c.tokens)
        say(tokens, "token", "tokens")
        if not tokens:  # the same secret under another id
            say(_present(session, ApiToken.secret_hash, c.secret_hashes), "token secret", "token secrets",
                lambda _: "(by its hash)")
        if not principals:
            members = [m for m in c.memberships if session.get(Membership, m) is not None]
            say(members, "membership", "memberships", lambda m: f"of {m[0]} in {m[1]!r}")
    if c.kbs and not said:
        # Lanes outside the store: an index that holds one of these knowledge bases means another
        # store shares its engine (a Chroma server), or an earlier import got that far.
        for lane in svc.engines.index.lanes.values():
            filled = [] if lane.in_store else [kb_id for kb_id in c.kbs if lane.count(kb_id)]
            say(filled, f"{lane.name} lane's entries of knowledge base", f"knowledge bases' entries in the {lane.name} lane",
                lambda kb_id, engine=lane.engine: f"{c.kbs[kb_id][2]!r} ({kb_id}) in its {engine}")
    return said


def _source_clashes(session, c: _Contents) -> list[str]:
    """The archive's sources whose id, or name in their workspace, the target has already."""
    if not c.sources:
        return []
    taken = session.execute(select(Source.id, Source.workspace_id, Source.name_key).where(
        Source.workspace_id.in_(sorted({ws for ws, _, _ in c.sources.values()})))).all()
    ids = {row.id for row in taken} | set(_present(session, Source.id, list(c.sources)))
    names = {(row.workspace_id, row.name_key) for row in taken}
    return [sid for sid, (ws, key, _) in c.sources.items() if sid in ids or (ws, key) in names]


# ----- import: loading and indexing -----

def import_archive(svc: TransferParts, principal: Principal, path: Path,
                   progress: StageProgress | None = None) -> ImportReport:
    """Load an archive into this store with its ids, then index its published versions again.
    Refused (InvalidArgument, nothing written) when the archive is damaged or of an unknown format,
    or when the store already holds any of its knowledge bases, nodes, versions, sources or identities."""
    svc.access.require_local_admin(principal)
    started = time.monotonic()
    archive = _Archive(path)
    contents = archive.scan(progress)
    clashes = _clashes(svc, contents)
    if clashes:
        raise AlreadyExists("this store already holds " + "; ".join(clashes)
                            + ": nothing was imported (import into an empty store, or export other knowledge bases)")
    report = ImportReport(counts=dict(contents.counts))
    svc.activity.flush()  # this store's queued rows of searches first: the archive's ids follow them
    published, pending = _load(svc, archive, contents, report, progress)
    _index(svc, published, pending, report, progress)
    report.seconds = time.monotonic() - started
    for ws in sorted(contents.workspaces):
        svc.activity.record(Principal.local_admin(ws), "import_archive", None, "ok",
                            {"nodes": report.counts["nodes"], "versions": report.counts["document_versions"],
                             "chunks": report.chunks})
    return report


def _load(svc: TransferParts, archive: _Archive, contents: _Contents, report: ImportReport,
          progress: StageProgress | None) -> tuple[dict[int, dict[str, Any]], list[int]]:
    """Every row in one transaction. Returns the published versions (with the columns publishing
    rewrites) and the versions the archive holds as `publishing` (an unfinished publish)."""
    loading = _Loading(contents.counts, progress)
    try:
        with svc.db.session() as session:
            kept = set(_present(session, Workspace.id, sorted(contents.workspaces)))
            report.workspaces_kept = sorted(kept)
            report.activity_offset = int(session.scalar(select(func.coalesce(func.max(Activity.id), 0))))
            # Source items are numbered like activity rows: after the target's own.
            offsets = {"activity": report.activity_offset,
                       "source_items": int(session.scalar(select(func.coalesce(func.max(SourceItem.id), 0))))}
            loading.rows(session, archive, kept, offsets)
            # An archive from before migration 0006 (or 0011) holds API-made tokens acting everywhere.
            make_api_tokens_home_only(session.connection(), contents.tokens)
            _request_jobs(session, loading.published, loading.pending)
            if svc.db.dialect == "postgresql":  # explicit ids: later inserts must start above them
                for table in ("document_versions", "activity", "source_items"):
                    session.execute(text(
                        f"SELECT setval(pg_get_serial_sequence('{table}', 'id'), "
                        f"COALESCE(MAX(id), 1), MAX(id) IS NOT NULL) FROM {table}"
                    ))
    except RagError:
        raise
    except SQLAlchemyError as exc:
        log.exception("loading the archive %s failed", archive.path)
        what = ("two of its rows clash, or one refers to a row that is missing" if isinstance(exc, IntegrityError)
                else "a value does not fit its column")
        raise Damaged(f"the archive does not fit this store ({what}; the log has the detail): nothing was imported") from None
    if progress:
        progress("loading", loading.done, loading.total)
    return loading.published, [version_id for version_id, _ in loading.pending]


class _Loading:
    """The rows going in, in batches per table, and what publishing must do with their versions."""

    def __init__(self, counts: dict[str, int], progress: StageProgress | None) -> None:
        self.total, self.done, self.progress = sum(counts.values()), 0, progress
        self.published: dict[int, dict[str, Any]] = {}
        self.pending: list[tuple[int, str]] = []  # (version id, the status a failed publish returns to)

    def rows(self, session, archive: _Archive, kept: set[str], offsets: dict[str, int]) -> None:
        batch: list[dict[str, Any]] = []
        batch_table = None
        for table, row, _ in archive.rows():
            self.done += 1
            if self.progress and self.done % BATCH == 0:
                self.progress("loading", self.done, self.total)
            if table == "workspaces" and row["id"] in kept:
                continue
            if table in offsets:
                row["id"] += offsets[table]
            if table == "sources":  # idle, whatever the archive says (rag/service/transfer/sources.py)
                row = {**idle(row), "lease_owner": None, "lease_until": None, "progress": None}
            if table == "document_versions":
                self._note_version(row)
            if table != batch_table or len(batch) >= batch_of(table):
                _insert(session, batch_table, batch)
                batch, batch_table = [], table
            batch.append(row)
        _insert(session, batch_table, batch)
        if self.done != self.total:  # the file changed since it was checked
            raise Damaged("the archive changed while it was being imported: nothing was imported")

    def _note_version(self, row: dict[str, Any]) -> None:
        if row["status"] == PUBLISHED:
            self.published[row["id"]] = {k: row.get(k) for k in _REWRITTEN_BY_PUBLISHING if k in row}
        elif row["status"] == PUBLISHING:
            self.pending.append((row["id"], row.get("publish_from") or DRAFT))


def _request_jobs(session, published: dict[int, dict[str, Any]], pending: list[tuple[int, str]]) -> None:
    """Their publish jobs go in with the rows: a crash before they are indexed leaves them
    `publishing`, and the next writer to open the store finishes them. The publishes the source
    had not finished are requested after them, so they still win."""
    jobs = [(version_id, DRAFT) for version_id in published] + pending
    for i in range(0, len(jobs), BATCH):
        part = dict(jobs[i:i + BATCH])  # in request order (dicts keep it)
        found = {v.id: v for v in session.scalars(select(DocumentVersion).where(DocumentVersion.id.in_(list(part))))}
        for from_status, run in groupby(part.items(), key=lambda item: item[1]):
            request_publishes(session, [found[version_id] for version_id, _ in run], from_status)
        session.flush()
        session.expunge_all()


_REWRITTEN_BY_PUBLISHING = ("published_at", "updated_at", "archived_at", "publish_seq", "publish_from")


def _insert(session, table: str | None, rows: list[dict[str, Any]]) -> None:
    """Rows of one table; those leaving out a column (an older archive) take its default."""
    by_columns: dict[frozenset, list[dict[str, Any]]] = {}
    for row in rows:
        by_columns.setdefault(frozenset(row), []).append(row)
    for same in by_columns.values():
        session.execute(insert(TABLES[table]), same)  # type: ignore[index]


def _index(svc: TransferParts, published: dict[int, dict[str, Any]], pending: list[int], report: ImportReport,
           progress: StageProgress | None) -> None:
    """Chunk, embed and index the published versions (and finish the publishes the source had not
    finished), then give the published ones back their own timestamps. Indexing that fails leaves
    the versions not yet indexed `publishing`, for the next writer to finish."""

    def step(done: int, total: int) -> None:
        if progress:
            progress("indexing", done, total)

    ids = list(published) + pending
    try:
        # One call: a document's versions flip in the order they were requested. On PostgreSQL a
        # publish worker of this process may take some of the jobs; publish() waits for those.
        svc.publisher.publish(ids, step)
    except BaseException as exc:
        left = _requeue(svc, ids)
        _restore(svc, published)
        if not isinstance(exc, Exception):
            raise
        log.exception("indexing the imported versions failed")
        reason = exc.message if isinstance(exc, RagError) else "see the log"
        raise RagError(
            f"the rows are imported, but indexing stopped ({reason}): {left} versions are left publishing, "
            "and the next writer to open this store (any `rag` command that writes, or `rag serve`) indexes them"
        ) from None
    _restore(svc, published)
    report.versions_indexed = len(ids)
    with svc.db.session() as session:
        report.chunks = sum(
            int(session.scalar(select(func.count()).select_from(Chunk).where(Chunk.version_id.in_(ids[i:i + BATCH]))))
            for i in range(0, len(ids), BATCH)
        )


def _restore(svc: TransferParts, published: dict[int, dict[str, Any]]) -> None:
    """Publishing stamps the time it finished; an imported version keeps the archive's."""
    ids = list(published)
    with svc.db.session() as session:
        for i in range(0, len(ids), BATCH):
            done = set(session.scalars(select(DocumentVersion.id).where(
                DocumentVersion.id.in_(ids[i:i + BATCH]), DocumentVersion.status == PUBLISHED
            )))
            if done:  # one executemany: an UPDATE by primary key for each
                session.execute(update(DocumentVersion), [{"id": version_id, **published[version_id]} for version_id in done])


def _requeue(svc: TransferParts, ids: list[int]) -> int:
    """Versions a failed indexing put back in draft are publish jobs again; returns how many are
    left to index."""
    left = 0
    with svc.db.session() as session:
        for i in range(0, len(ids), BATCH):
            part = ids[i:i + BATCH]
            session.execute(update(DocumentVersion).where(DocumentVersion.id.in_(part), DocumentVersion.status == DRAFT)
                            .values(status=PUBLISHING, archived_at=None))
            left += int(session.scalar(select(func.count()).where(
                DocumentVersion.id.in_(part), DocumentVersion.status == PUBLISHING)))
    return left

