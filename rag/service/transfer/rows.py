"""What an archive is made of, shared by export and import (rag/service/transfer/archives.py tells the
whole story): the tables in load order, the reports, column values in and out of JSON, the
store's migration revision, and what of the service both are given (`TransferParts`)."""

from __future__ import annotations

import base64
import binascii
import json
import logging
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Protocol

from sqlalchemy import Boolean, DateTime, Integer, LargeBinary, String, Table
from sqlalchemy.types import JSON

from rag.errors import InvalidArgument
from rag.store.models import (
    Activity,
    ApiToken,
    DocumentOriginal,
    DocumentVersion,
    KnowledgeBase,
    Membership,
    Node,
    PrincipalRecord,
    Source,
    SourceItem,
    Workspace,
)

if TYPE_CHECKING:
    from rag.service.activity import ActivityLog
    from rag.service.engines import Engines
    from rag.service.identity.access import Access
    from rag.service.indexing.publish import Publisher
    from rag.settings import Settings
    from rag.store.db import Database

log = logging.getLogger(__name__)

FORMAT = "rag-archive"
FORMAT_VERSION = 1

# In load order: every reference points to a row of an earlier table (or an earlier node).
TABLES: dict[str, Table] = {
    model.__table__.name: model.__table__  # type: ignore[attr-defined]
    for model in (Workspace, KnowledgeBase, Node, DocumentVersion, DocumentOriginal, Source, SourceItem,
                  PrincipalRecord, Membership, ApiToken, Activity)
}
BATCH = 500
# Rows read or inserted at once, where a row can be large: an original file is up to
# RAG_UPLOAD_MAX_BYTES (an archive made before originals were kept has none, and loads as before).
TABLE_BATCH = {"document_originals": 4}


def batch_of(table: str | None) -> int:
    return TABLE_BATCH.get(table or "", BATCH)

StageProgress = Callable[[str, int, int], None]  # (stage, done, total), as ingestion reports it


class TransferParts(Protocol):
    """What export and import use of the service: the Transfer part (archives.py) is one."""

    db: Database
    settings: Settings
    access: Access
    activity: ActivityLog
    engines: Engines
    publisher: Publisher


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


# ----- column values in and out of JSON -----

def _utc(moment: datetime) -> datetime:
    """SQLite hands back naive datetimes; every one was written in UTC."""
    return moment.replace(tzinfo=timezone.utc) if moment.tzinfo is None else moment.astimezone(timezone.utc)


def _dump(value: Any) -> Any:
    if isinstance(value, datetime):
        return _utc(value).isoformat()
    if isinstance(value, (bytes, memoryview)):  # an original file: base64 in the JSON line
        return base64.b64encode(bytes(value)).decode("ascii")
    return value


class Damaged(InvalidArgument):
    """An archive this rag cannot load; the message says where and why."""


def _load_bytes(value: Any, what: str) -> bytes:
    try:
        return base64.b64decode(value, validate=True)
    except (TypeError, ValueError, binascii.Error):
        raise Damaged(f"{what} is not base64") from None


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
    if isinstance(kind, LargeBinary):
        return _load_bytes(value, what)
    return _load_scalar(kind, value, what)


def _load_scalar(kind, value: Any, what: str) -> Any:
    if isinstance(kind, Boolean):  # a source's `paused`
        if not isinstance(value, bool):
            raise Damaged(f"{what} is not true or false")
        return value
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


# ----- the store's revision, and archive lines -----

def _known_revisions() -> set[str]:
    from alembic.script import ScriptDirectory

    import rag.store.db as db_module

    scripts = ScriptDirectory(str(Path(db_module.__file__).with_name("migrations")))
    return {script.revision for script in scripts.walk_revisions()}


def _current_revision(connection) -> str | None:
    from alembic.runtime.migration import MigrationContext

    return MigrationContext.configure(connection).get_current_revision()


def _line(obj: dict[str, Any]) -> bytes:
    return (json.dumps(obj, ensure_ascii=False, separators=(",", ":")) + "\n").encode("utf-8")


