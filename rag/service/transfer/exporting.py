"""Export: the store, a workspace or some knowledge bases, as one consistent archive."""

from __future__ import annotations

import logging
import os
import tempfile
import time
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path
from typing import IO, Any, Iterable, Iterator

from sqlalchemy import false, func, select

from rag.errors import InvalidArgument, NotFound
from rag.service.checks import name_key
from rag.service.identity.principal import Principal
from rag.store.models import (
    KnowledgeBase,
    Source,
    Workspace,
)
from rag.service.transfer.sources import SecretGuard

from rag.service.transfer.rows import (
    BATCH,
    FORMAT,
    FORMAT_VERSION,
    TABLES,
    ExportReport,
    StageProgress,
    TransferParts,
    _current_revision,
    batch_of,
    _dump,
    _line,
)

log = logging.getLogger(__name__)

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
        if kb_keys:  # activity about the sources of these knowledge bases goes with them too
            self.kb_keys = kb_keys | {name_key(n) for n in session.scalars(select(Source.name).where(Source.kb_id.in_(kb_ids)))}

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
        if table == "document_originals":
            nodes, versions = TABLES["nodes"], TABLES["document_versions"]
            return (stmt.join(versions, versions.c.id == t.c.version_id).join(nodes, nodes.c.id == versions.c.node_id)
                    .where(nodes.c.kb_id.in_(self.kb_ids)))
        if table == "sources":
            return stmt.where(t.c.kb_id.in_(self.kb_ids))
        if table == "source_items":
            sources = TABLES["sources"]
            return stmt.join(sources, sources.c.id == t.c.source_pk).where(sources.c.kb_id.in_(self.kb_ids))
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
            stmt = self._statement(table).order_by(*t.primary_key.columns).execution_options(yield_per=batch_of(table))
            for row in self.session.execute(stmt):
                yield self._within(table, dict(row._mapping))

    def _within(self, table: str, row: dict[str, Any]) -> dict[str, Any]:
        """A source's item whose document was moved to a knowledge base left behind points at no
        document in the archive, as if that document were gone (the column's ON DELETE SET NULL)."""
        if table == "source_items" and self.kb_ids is not None and row["node_id"] not in self._node_set:
            row["node_id"] = None
        return row

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


def _resolve_scope(svc: TransferParts, session, kb_names: list[str], workspace: str | None) -> tuple[list[str] | None, str | None, set[str]]:
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
    svc: TransferParts,
    principal: Principal,
    target: Path | IO[bytes],
    kb_names: Iterable[str] = (),
    workspace: str | None = None,
    progress: StageProgress | None = None,
) -> ExportReport:
    """Write the store (or a workspace, or some of its knowledge bases) as an archive to `target`,
    a path or a binary stream. One read transaction: the archive is one consistent moment."""
    svc.access.require_local_admin(principal)
    started = time.monotonic()
    kb_names = [kb_names] if isinstance(kb_names, str) else list(kb_names or ())
    svc.activity.flush()  # the queued rows of searches belong to the moment (rag/service/activity.py)
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
        guard = SecretGuard(svc.settings)
        with _archive_file(target) as stream:
            stream.write(_line(header))
            for table in TABLES:
                for row in selection.rows(table):
                    row = guard.outgoing(table, row)
                    stream.write(_line({"table": table, "row": {k: _dump(v) for k, v in row.items()}}))
                    done += 1
                    if progress and done % BATCH == 0:
                        progress("exporting", done, total)
        if progress:
            progress("exporting", done, total)
    report = ExportReport(str(target) if isinstance(target, (str, Path)) else "-", scope, revision, counts,
                          time.monotonic() - started)
    for ws in ([workspace] if workspace else _workspaces(svc)):
        svc.activity.record(Principal.local_admin(ws), "export_archive", None, "ok",
                            {"nodes": counts["nodes"], "versions": counts["document_versions"], "whole_store": workspace is None})
    return report


def _workspaces(svc: TransferParts) -> list[str]:
    with svc.db.session() as session:
        return list(session.scalars(select(Workspace.id).order_by(Workspace.id)))


