"""A folder ingested into a fresh SQLite home: the service, the local admin and the ingest report."""

from __future__ import annotations

from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

from rag.service import KnowledgeService, Principal
from rag.settings import Settings


@contextmanager
def ingested_folder(home: Path, files: Path) -> Iterator[tuple[KnowledgeService, Principal, Any]]:
    with KnowledgeService(Settings(home=home)) as svc:
        svc.ensure_workspace("default")
        admin = Principal.local_admin("default")
        yield svc, admin, svc.ingest_directory(admin, files)
