"""Moving a knowledge store to another deployment: export its rows, import them elsewhere.

`export_archive` writes a JSON-lines archive: a header (format, format version, the store's alembic
revision, what it holds and how many rows of each table), then one `{"table", "row"}` line per row,
every column as stored, tables in the order the rows can be loaded (parents before children).
Chunks and vectors are left out: they are derived, and `import_archive` rebuilds them with the
target's own settings.

`import_archive` reads the archive twice: once to check it whole (JSON, columns, types, the counts
of its header, every reference inside it) and what the target already holds, then once to load
it, in one transaction, with the same ids, so that `kb:<ws>:<kb>:<node id>` knowledge ids,
citations, token ids and folder grants stay valid and bearer tokens keep working. Anything wrong
refuses the import before a row is written. Then the published versions are indexed again, through
the ordinary publisher (the embedding cache makes that fast), and get back their own timestamps.

What an archive holds:
- the whole store (no knowledge base or workspace named): every table;
- a workspace (`workspace`): its knowledge bases and its whole activity history;
- some knowledge bases of a workspace (`kb_names`): those, and the activity rows about them (a
  target that is one of their nodes or their name); the workspace's other rows stay behind, so
  that knowledge bases exported one by one do not bring the same row twice.
Principals, memberships and tokens travel only with the whole store.

Workspaces the target already has are kept (a knowledge base can join a workspace there); anything
else the target already holds (a knowledge base's id or name in its workspace, a node id or
knowledge id, a version id, a principal, a token) refuses the import. Activity rows are appended
after the target's own (their ids shift by the target's largest; an empty target keeps them as
they were).
"""

from __future__ import annotations

import json
import logging
import os
import tempfile
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timezone
from itertools import groupby
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, Callable, Iterable, Iterator

from sqlalchemy import DateTime, Integer, String, Table, false, func, insert, select, text, update
from sqlalchemy.exc import IntegrityError, SQLAlchemyError
from sqlalchemy.types import JSON

from rag.errors import AlreadyExists, InvalidArgument, NotFound, PermissionDenied, RagError
from rag.service.checks import name_key
from rag.service.principal import ACCESS_ALL, Principal
from rag.service.publish import request_publishes
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
    Workspace,
)

if TYPE_CHECKING:
    from rag.service.core import KnowledgeService

log = logging.getLogger(__name__)

FORMAT = "rag-archive"
FORMAT_VERSION = 1

# In load order: every reference points to a row of an earlier table (or an earlier node).
TABLES: dict[str, Table] = {
    model.__table__.name: model.__table__  # type: ignore[attr-defined]
    for model in (Workspace, KnowledgeBase, Node, DocumentVersion, PrincipalRecord, Membership, ApiToken, Activity)
}
BATCH = 500

StageProgress = Callable[[str, int, int], None]  # (stage, done, total), as ingestion reports it


@dataclass
class ExportReport:
    target: str  # the file written, or "-" for a stream
    scope: dict[str, Any]
    revision: str | None
    counts: dict[str, int]
    seconds: float = 0.0

    def summary(self) -> dict[str, Any]:
        return {"archive": self.target, "scope": self.scope, "revision": self.revision,
                "counts": self.counts, "seconds": round(self.seconds, 2)}


@dataclass
class ImportReport:
    counts: dict[str, int]
    workspaces_kept: list[str] = field(default_factory=list)  # already in the target: not loaded again
    activity_offset: int = 0
    versions_indexed: int = 0
    chunks: int = 0
    seconds: float = 0.0

    def summary(self) -> dict[str, Any]:
        return {"counts": self.counts, "workspaces_kept": self.workspaces_kept,
                "activity_offset": self.activity_offset, "versions_indexed": self.versions_indexed,
                "chunks": self.chunks, "seconds": round(self.seconds, 2)}


def _require_local_admin(svc: "KnowledgeService", principal: Principal) -> None:
    """The local operator only: an archive holds every body and every token's hash."""
    if principal.token_id is not None or principal.is_agent or principal.access != ACCESS_ALL:
        raise PermissionDenied("export and import are for the local administrator (the `rag` command), never a token")
    svc._require_role(principal, "admin")


# ----- column values in and out of JSON -----

def _utc(moment: datetime) -> datetime:
    """SQLite hands back naive datetimes; every one was written in UTC."""
    return moment.replace(tzinfo=timezone.utc) if moment.tzinfo is None else moment.astimezone(timezone.utc)


def _dump(value: Any) -> Any:
    return _utc(value).isoformat() if isinstance(value, datetime) else value


class Damaged(InvalidArgument):
    """An archive this rag cannot load; the message says where and why."""


def _load_value(table: str, column, value: Any, where: str) -> Any:
    what = f"{where}: {table}.{column.name}"
    if value is None:
        if not column.nullable:
            raise Damaged(f"{what} is missing a value")
        return None
    kind = column.type
    if isinstance(kind, JSON):
        return value
    if isinstance(kind, DateTime):
        try:
            return _utc(datetime.fromisoformat(value))
        except (TypeError, ValueError):
            raise Damaged(f"{what} is not a date and time") from None
    if isinstance(kind, Integer):
        if not isinstance(value, int) or isinstance(value, bool):
            raise Damaged(f"{what} is not an integer")
        return value
    if isinstance(kind, String):  # Text too
        if not isinstance(value, str):
            raise Damaged(f"{what} is not a string")
        if kind.length is not None and len(value) > kind.length:
            raise Damaged(f"{what} is longer than {kind.length} characters")
        return value
    return value  # pragma: no cover - every column of these tables is one of the above


def _required(column) -> bool:
    return column.primary_key or not (column.nullable or column.default is not None or column.server_default is not None)


def _load_row(table: str, row: object, where: str) -> dict[str, Any]:
    if not isinstance(row, dict):
        raise Damaged(f"{where}: a {table} row must be a JSON object")
    columns = TABLES[table].columns
    unknown = sorted(set(row) - {c.name for c in columns})
    if unknown:
        raise Damaged(f"{where}: {table} has no column {unknown[0]!r} here (an archive of a newer rag?)")
    values = {}
    for column in columns:
        if column.name in row:
            values[column.name] = _load_value(table, column, row[column.name], where)
        elif _required(column):
            raise Damaged(f"{where}: {table}.{column.name} is missing")
    return values


# ----- export -----

def _known_revisions() -> set[str]:
    from alembic.script import ScriptDirectory

    import rag.store.db as db_module

    scripts = ScriptDirectory(str(Path(db_module.__file__).with_name("migrations")))
    return {script.revision for script in scripts.walk_revisions()}


def _current_revision(connection) -> str | None:
    from alembic.runtime.migration import MigrationContext

    return MigrationContext.configure(connection).get_current_revision()


class _Selection:
    """Which rows of each table an export takes, counted and read in one snapshot."""

    def __init__(self, session, kb_ids: list[str] | None, workspace: str | None, kb_keys: set[str]) -> None:
        self.session = session
        self.kb_ids = kb_ids  # None: every knowledge base
        self.workspace = workspace  # None: every workspace
        self.kb_keys = kb_keys  # name keys of the exported knowledge bases (activity targets)
        nodes = TABLES["nodes"]
        stmt = select(nodes.c.id, nodes.c.parent_id)
        if kb_ids is not None:
            stmt = stmt.where(nodes.c.kb_id.in_(kb_ids))
        self.node_order = _parents_first(session.execute(stmt).all())
        self._node_set = set(self.node_order)
        self._activity_ids: list[int] | None = None

    def _filtered_activity(self) -> list[int]:
        """Knowledge bases alone: the activity rows about them (their nodes or their names)."""
        if self._activity_ids is None:
            t = TABLES["activity"]
            rows = self.session.execute(
                select(t.c.id, t.c.target).where(t.c.workspace_id == self.workspace).order_by(t.c.id)
            )
            self._activity_ids = [
                i for i, target in rows if target is not None and (target in self._node_set or name_key(target) in self.kb_keys)
            ]
        return self._activity_ids

    def _statement(self, table: str):
        t = TABLES[table]
        stmt = select(t)
        if self.workspace is None:
            return stmt
        if table == "workspaces":
            return stmt.where(t.c.id == self.workspace)
        if table == "knowledge_bases":
            return stmt.where(t.c.id.in_(self.kb_ids))
        if table == "document_versions":
            nodes = TABLES["nodes"]
            return stmt.join(nodes, nodes.c.id == t.c.node_id).where(nodes.c.kb_id.in_(self.kb_ids))
        if table == "activity":
            return stmt.where(t.c.workspace_id == self.workspace)
        return stmt.where(false())  # identities travel with the whole store only

    def count(self, table: str) -> int:
        if table == "nodes":
            return len(self.node_order)
        if table == "activity" and self.kb_keys:
            return len(self._filtered_activity())
        return int(self.session.scalar(select(func.count()).select_from(self._statement(table).subquery())))

    def rows(self, table: str) -> Iterator[dict[str, Any]]:
        if table == "nodes":
            yield from self._by_ids(table, self.node_order)
        elif table == "activity" and self.kb_keys:
            yield from self._by_ids(table, self._filtered_activity())
        else:
            t = TABLES[table]
            stmt = self._statement(table).order_by(*t.primary_key.columns).execution_options(yield_per=BATCH)
            for row in self.session.execute(stmt):
                yield dict(row._mapping)

    def _by_ids(self, table: str, ids: list) -> Iterator[dict[str, Any]]:
        t = TABLES[table]
        for i in range(0, len(ids), BATCH):
            part = ids[i:i + BATCH]
            found = {row.id: dict(row._mapping) for row in self.session.execute(select(t).where(t.c.id.in_(part)))}
            yield from (found[k] for k in part if k in found)


def _parents_first(pairs: Iterable[tuple[str, str | None]]) -> list[str]:
    """Node ids with every parent before its children (breadth first from the roots)."""
    children: dict[str | None, list[str]] = {}
    ids = set()
    for node_id, parent_id in pairs:
        children.setdefault(parent_id, []).append(node_id)
        ids.add(node_id)
    order: list[str] = []
    level = sorted(n for parent, kids in children.items() if parent is None or parent not in ids for n in kids)
    while level:
        order.extend(level)
        level = sorted(kid for n in level for kid in children.get(n, ()))
    if len(order) != len(ids):  # pragma: no cover - a cycle cannot be written through the service
        log.error("%d nodes are not reachable from a root; they are left out of the archive", len(ids) - len(order))
    return order


def _resolve_scope(svc, session, kb_names: list[str], workspace: str | None) -> tuple[list[str] | None, str | None, set[str]]:
    if not kb_names and workspace is None:
        return None, None, set()
    workspace = workspace or svc.settings.default_workspace
    if session.get(Workspace, workspace) is None:
        raise NotFound(f"workspace {workspace!r} not found")
    kbs = {kb.name_key: kb for kb in session.scalars(select(KnowledgeBase).where(KnowledgeBase.workspace_id == workspace))}
    if not kb_names:
        return [kb.id for kb in kbs.values()], workspace, set()
    chosen = []
    for name in kb_names:
        kb = kbs.get(name_key(name))
        if kb is None:
            raise NotFound(f"knowledge base {name!r} not found in workspace {workspace!r}")
        if kb.id not in chosen:
            chosen.append(kb.id)
    return chosen, workspace, {key for key, kb in kbs.items() if kb.id in chosen}


@contextmanager
def _archive_file(target: Path | IO[bytes]) -> Iterator[IO[bytes]]:
    """A stream is written as it is; a file appears whole or not at all (a temp file renamed at the
    end), readable by its owner only: it holds every body and every token's hash."""
    if not isinstance(target, (str, Path)):
        yield target
        return
    target = Path(target)
    if target.is_dir():
        raise InvalidArgument(f"{target} is a directory")
    if not target.parent.is_dir():
        raise NotFound(f"no such directory: {target.parent}")
    fd, temp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".part", dir=target.parent)
    try:
        with os.fdopen(fd, "wb") as stream:
            yield stream
            stream.flush()
            os.fsync(stream.fileno())
        os.replace(temp, target)
    except BaseException:
        Path(temp).unlink(missing_ok=True)
        raise


def export_archive(
    svc: "KnowledgeService",
    principal: Principal,
    target: Path | IO[bytes],
    kb_names: Iterable[str] = (),
    workspace: str | None = None,
    progress: StageProgress | None = None,
) -> ExportReport:
    """Write the store (or a workspace, or some of its knowledge bases) as an archive to `target`,
    a path or a binary stream. One read transaction: the archive is one consistent moment."""
    _require_local_admin(svc, principal)
    started = time.monotonic()
    kb_names = [kb_names] if isinstance(kb_names, str) else list(kb_names or ())
    with svc.db.session() as session:
        # One snapshot for the counts and every row, though readers may record activity meanwhile.
        if svc.db.dialect == "postgresql":
            session.connection(execution_options={"isolation_level": "REPEATABLE READ"})
        else:  # the SQLite driver begins no transaction for reads by itself
            session.connection().exec_driver_sql("BEGIN")
        kb_ids, workspace, kb_keys = _resolve_scope(svc, session, kb_names, workspace)
        selection = _Selection(session, kb_ids, workspace, kb_keys)
        counts = {table: selection.count(table) for table in TABLES}
        scope = {"workspace": workspace, "knowledge_bases": kb_names or None}
        revision = _current_revision(session.connection())
        header = {"format": FORMAT, "version": FORMAT_VERSION, "revision": revision,
                  "created_at": _dump(datetime.now(timezone.utc)), "scope": scope, "counts": counts}
        total, done = sum(counts.values()), 0
        if progress:
            progress("exporting", 0, total)
        with _archive_file(target) as stream:
            stream.write(_line(header))
            for table in TABLES:
                for row in selection.rows(table):
                    stream.write(_line({"table": table, "row": {k: _dump(v) for k, v in row.items()}}))
                    done += 1
                    if progress and done % BATCH == 0:
                        progress("exporting", done, total)
        if progress:
            progress("exporting", done, total)
    report = ExportReport(str(target) if isinstance(target, (str, Path)) else "-", scope, revision, counts,
                          time.monotonic() - started)
    for ws in ([workspace] if workspace else _workspaces(svc)):
        svc.record(Principal.local_admin(ws), "export_archive", None, "ok",
                   {"nodes": counts["nodes"], "versions": counts["document_versions"], "whole_store": workspace is None})
    return report


def _workspaces(svc) -> list[str]:
    with svc.db.session() as session:
        return list(session.scalars(select(Workspace.id).order_by(Workspace.id)))


def _line(obj: dict[str, Any]) -> bytes:
    return (json.dumps(obj, ensure_ascii=False, separators=(",", ":")) + "\n").encode("utf-8")


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
    principals: set[str] = field(default_factory=set)
    memberships: list[tuple[str, str]] = field(default_factory=list)
    tokens: list[str] = field(default_factory=list)
    secret_hashes: list[str] = field(default_factory=list)


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


def _take(c: _Contents, table: str, row: dict[str, Any], where: str) -> None:
    """Note a row's keys, and refuse a duplicate or a reference to something the archive lacks."""
    c.counts[table] += 1

    def refer(value: Any, known: set | dict, what: str) -> None:
        if value not in known:
            raise Damaged(f"{where}: {table} row refers to {what} {value!r}, which is not in the archive")

    def unique(value: Any, seen: set | dict | list, what: str) -> None:
        if value in seen:
            raise Damaged(f"{where}: {what} {value!r} appears twice")

    if table == "workspaces":
        unique(row["id"], c.workspaces, "workspace")
        c.workspaces.add(row["id"])
    elif table == "knowledge_bases":
        refer(row["workspace_id"], c.workspaces, "workspace")
        unique(row["id"], c.kbs, "knowledge base")
        c.kbs[row["id"]] = (row["workspace_id"], row["name_key"], row["name"])
    elif table == "nodes":
        refer(row["kb_id"], c.kbs, "knowledge base")
        refer(row["workspace_id"], c.workspaces, "workspace")
        if row.get("parent_id") is not None:
            refer(row["parent_id"], c.nodes, "parent node")  # parents come first
        unique(row["id"], c.nodes, "node")
        c.nodes.add(row["id"])
        if row.get("source_id") is not None:
            c.source_ids.append(row["source_id"])
    elif table == "document_versions":
        refer(row["node_id"], c.nodes, "node")
        c.versions.append(row["id"])
    elif table == "principals":
        unique(row["id"], c.principals, "principal")
        c.principals.add(row["id"])
    elif table == "memberships":
        refer(row["principal_id"], c.principals, "principal")
        refer(row["workspace_id"], c.workspaces, "workspace")
        c.memberships.append((row["principal_id"], row["workspace_id"]))
    elif table == "tokens":
        refer(row["principal_id"], c.principals, "principal")
        refer(row["workspace_id"], c.workspaces, "workspace")
        c.tokens.append(row["id"])
        c.secret_hashes.append(row["secret_hash"])


# ----- import: what the target already holds -----

def _present(session, column, values: list) -> list:
    found: list = []
    for i in range(0, len(values), BATCH):
        found += session.scalars(select(column).where(column.in_(values[i:i + BATCH]))).all()
    return found


def _clashes(svc, c: _Contents) -> list[str]:
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
        # Vectors outside the store: a collection of one of these knowledge bases means another
        # store shares this Chroma server, or an earlier import got that far.
        vector = svc.vector
        filled = [kb_id for kb_id in c.kbs if vector.count(kb_id)]
        say(filled, "vectors of knowledge base", "knowledge bases' vectors",
            lambda kb_id: f"{c.kbs[kb_id][2]!r} ({kb_id}) in its vector store")
    return said


# ----- import: loading and indexing -----

def import_archive(svc: "KnowledgeService", principal: Principal, path: Path,
                   progress: StageProgress | None = None) -> ImportReport:
    """Load an archive into this store with its ids, then index its published versions again.
    Refused (InvalidArgument, nothing written) when the archive is damaged or of an unknown format,
    or when the store already holds any of its knowledge bases, nodes, versions or identities."""
    _require_local_admin(svc, principal)
    started = time.monotonic()
    archive = _Archive(path)
    contents = archive.scan(progress)
    clashes = _clashes(svc, contents)
    if clashes:
        raise AlreadyExists("this store already holds " + "; ".join(clashes)
                            + ": nothing was imported (import into an empty store, or export other knowledge bases)")
    report = ImportReport(counts=dict(contents.counts))
    published, pending = _load(svc, archive, contents, report, progress)
    _index(svc, published, pending, report, progress)
    report.seconds = time.monotonic() - started
    for ws in sorted(contents.workspaces):
        svc.record(Principal.local_admin(ws), "import_archive", None, "ok",
                   {"nodes": report.counts["nodes"], "versions": report.counts["document_versions"],
                    "chunks": report.chunks})
    return report


def _load(svc, archive: _Archive, contents: _Contents, report: ImportReport,
          progress: StageProgress | None) -> tuple[dict[int, dict[str, Any]], list[int]]:
    """Every row in one transaction. Returns the published versions (with the columns publishing
    rewrites) and the versions the archive holds as `publishing` (an unfinished publish)."""
    published: dict[int, dict[str, Any]] = {}
    pending: list[tuple[int, str]] = []  # (version id, the status a failed publish returns to)
    total, done = sum(contents.counts.values()), 0
    try:
        with svc.db.session() as session:
            kept = set(_present(session, Workspace.id, sorted(contents.workspaces)))
            report.workspaces_kept = sorted(kept)
            offset = int(session.scalar(select(func.coalesce(func.max(Activity.id), 0))))
            report.activity_offset = offset
            batch: list[dict[str, Any]] = []
            batch_table = None
            for table, row, _ in archive.rows():
                done += 1
                if progress and done % BATCH == 0:
                    progress("loading", done, total)
                if table == "workspaces" and row["id"] in kept:
                    continue
                if table == "activity":
                    row["id"] += offset
                if table == "document_versions":
                    if row["status"] == PUBLISHED:
                        published[row["id"]] = {k: row.get(k) for k in _REWRITTEN_BY_PUBLISHING if k in row}
                    elif row["status"] == PUBLISHING:
                        pending.append((row["id"], row.get("publish_from") or DRAFT))
                if table != batch_table or len(batch) >= BATCH:
                    _insert(session, batch_table, batch)
                    batch, batch_table = [], table
                batch.append(row)
            _insert(session, batch_table, batch)
            if done != total:  # the file changed since it was checked
                raise Damaged("the archive changed while it was being imported: nothing was imported")
            # Their publish jobs go in with the rows: a crash before they are indexed leaves them
            # `publishing`, and the next writer to open the store finishes them. The publishes the
            # source had not finished are requested after them, so they still win.
            jobs = [(version_id, DRAFT) for version_id in published] + pending
            for i in range(0, len(jobs), BATCH):
                part = dict(jobs[i:i + BATCH])  # in request order (dicts keep it)
                found = {v.id: v for v in session.scalars(select(DocumentVersion).where(DocumentVersion.id.in_(list(part))))}
                for from_status, run in groupby(part.items(), key=lambda item: item[1]):
                    request_publishes(session, [found[version_id] for version_id, _ in run], from_status)
                session.flush()
                session.expunge_all()
            if svc.db.dialect == "postgresql":  # explicit ids: later inserts must start above them
                for table in ("document_versions", "activity"):
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
        progress("loading", done, total)
    return published, [version_id for version_id, _ in pending]


_REWRITTEN_BY_PUBLISHING = ("published_at", "updated_at", "archived_at", "publish_seq", "publish_from")


def _insert(session, table: str | None, rows: list[dict[str, Any]]) -> None:
    """Rows of one table; those leaving out a column (an older archive) take its default."""
    by_columns: dict[frozenset, list[dict[str, Any]]] = {}
    for row in rows:
        by_columns.setdefault(frozenset(row), []).append(row)
    for same in by_columns.values():
        session.execute(insert(TABLES[table]), same)  # type: ignore[index]


def _index(svc, published: dict[int, dict[str, Any]], pending: list[int], report: ImportReport,
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


def _restore(svc, published: dict[int, dict[str, Any]]) -> None:
    """Publishing stamps the time it finished; an imported version keeps the archive's."""
    ids = list(published)
    with svc.db.session() as session:
        for i in range(0, len(ids), BATCH):
            done = set(session.scalars(select(DocumentVersion.id).where(
                DocumentVersion.id.in_(ids[i:i + BATCH]), DocumentVersion.status == PUBLISHED
            )))
            if done:  # one executemany: an UPDATE by primary key for each
                session.execute(update(DocumentVersion), [{"id": version_id, **published[version_id]} for version_id in done])


def _requeue(svc, ids: list[int]) -> int:
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
