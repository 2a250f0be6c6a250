"""Moving a knowledge store to another deployment: export its rows, import them elsewhere.

`export_archive` writes a JSON-lines archive: a header (format, format version, the store's alembic
revision, what it holds and how many rows of each table), then one `{"table", "row"}` line per row,
every column as stored, tables in the order the rows can be loaded (parents before children).
Chunks and vectors are left out: they are derived, and `import_archive` rebuilds them with the
target's own settings. The original files of versions (`document_originals`: an upload's or an
ingested PDF's, HTML's or Word file's bytes) travel as base64 in their rows, checked against their
size and SHA-256 on import; an archive made before originals were kept has no such rows and
imports as it always did. Sources and their items travel idle and without their secrets
(rag/service/transfer/sources.py); an archive made before sources has none and imports as before.

`import_archive` reads the archive twice: once to check it whole (JSON, columns, types, the counts
of its header, every reference inside it) and what the target already holds, then once to load
it, in one transaction, with the same ids, so that `kb:<ws>:<kb>:<node id>` knowledge ids,
citations, token ids and folder grants stay valid and bearer tokens keep working. Anything wrong
refuses the import before a row is written. Then the published versions are indexed again, through
the ordinary publisher (the embedding cache makes that fast), and get back their own timestamps.

What an archive holds:
- the whole store (no knowledge base or workspace named): every table;
- a workspace (`workspace`): its knowledge bases and its whole activity history;
- some knowledge bases of a workspace (`kb_names`): those with their sources, and the activity rows
  about them (a target that is one of their nodes, their name or their sources' names); the workspace's other rows stay behind, so
  that knowledge bases exported one by one do not bring the same row twice.
Principals, memberships and tokens travel only with the whole store.

Workspaces the target already has are kept (a knowledge base can join a workspace there); anything
else the target already holds (a knowledge base's id or name in its workspace, a node id or
knowledge id, a version id, a source's id or name in its workspace, a principal, a token) refuses
the import. Activity rows and source items are appended after the target's own (their ids shift by
the target's largest; an empty target keeps them as they were).
"""

from __future__ import annotations

from pathlib import Path
from typing import IO, TYPE_CHECKING, Iterable

from rag.service.identity.principal import Principal
from rag.service.transfer.exporting import export_archive
from rag.service.transfer.importing import import_archive
from rag.service.transfer.rows import ExportReport, ImportReport, StageProgress

if TYPE_CHECKING:
    from rag.service.identity.access import Access
    from rag.service.activity import ActivityLog
    from rag.service.engines import Engines
    from rag.service.indexing.publish import Publisher
    from rag.settings import Settings
    from rag.store.db import Database


class Transfer:
    """Export and import, for the local administrator only."""

    def __init__(self, db: Database, settings: Settings, access: Access, activity: ActivityLog, engines: Engines,
                 publisher: Publisher) -> None:
        self.db = db
        self.settings = settings
        self.access = access
        self.activity = activity
        self.engines = engines
        self.publisher = publisher

    def export_archive(self, principal: Principal, target: Path | IO[bytes], kb_names: Iterable[str] = (),
                       workspace: str | None = None, progress: StageProgress | None = None) -> ExportReport:
        """Write the store (or a workspace, or some of its knowledge bases) as an archive to `target`,
        a path or a binary stream."""
        return export_archive(self, principal, target, kb_names, workspace, progress)

    def import_archive(self, principal: Principal, path: Path, progress: StageProgress | None = None) -> ImportReport:
        """Load an archive into this store, whole or not at all, and index its published versions."""
        return import_archive(self, principal, path, progress)
