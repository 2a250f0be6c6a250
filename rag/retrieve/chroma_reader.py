"""Embedded Chroma, read only, without importing the `chromadb` package (issue 16's cold start).

`chromadb.PersistentClient` runs on Chroma's Rust engine (`chromadb_rust_bindings`, shipped in
the same wheel); the Python package around it takes about a second to import (pydantic models,
OpenTelemetry, the `overrides` checks of every class), a second that a one-shot `rag search` or
`rag ask` spends before its first result. A process that only reads the embedded store (it holds
the home's lock shared, so no writer runs beside it) opens the engine itself here, with the same
configuration PersistentClient gives it, and makes the few read calls the vector lane needs:
a collection by name, its count, its ids and vectors, and a nearest-neighbour query. The results
are the engine's own, the ones PersistentClient returns (tests/service/test_chroma_reader.py compares
them). Writes are refused: a reader never makes them.

The bindings are Chroma's internal interface: `open_reader` returns None (and the caller opens
PersistentClient) when they are not what this module expects, so an upgrade of chromadb costs
the cold start's second, never a wrong result.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any, Sequence

import numpy as np

log = logging.getLogger(__name__)

TENANT, DATABASE = "default_tenant", "default_database"  # chromadb's DEFAULT_TENANT / DEFAULT_DATABASE


class ReadOnlyStore(RuntimeError):
    """A write reached a read-only process's vector store (a programming error)."""


def _refuse(*_args: Any, **_kwargs: Any) -> None:
    raise ReadOnlyStore("this process opened the vector store read only")


class ReaderCollection:
    def __init__(self, bindings: Any, collection_id: str) -> None:
        self._bindings = bindings
        self.id = collection_id

    def count(self) -> int:
        return int(self._bindings.count(self.id, TENANT, DATABASE))

    def query(self, query_embeddings: Sequence[np.ndarray], n_results: int, where: dict | None = None,
              include: Sequence[str] = ("distances",)) -> dict[str, Any]:
        found = self._bindings.query(self.id, None, [np.asarray(v, dtype=np.float32) for v in query_embeddings],
                                     n_results, json.dumps(where) if where else None, None, list(include),
                                     TENANT, DATABASE)
        return {"ids": found.ids, "distances": found.distances}

    def get(self, ids: Sequence[str] | None = None, include: Sequence[str] = (), limit: int | None = None,
            offset: int | None = None) -> dict[str, Any]:
        found = self._bindings.get(self.id, list(ids) if ids is not None else None, None, limit, offset or 0, None,
                                   list(include), TENANT, DATABASE)
        return {"ids": found.ids, "embeddings": found.embeddings if "embeddings" in include else None}

    upsert = delete = staticmethod(_refuse)


class ChromaReader:
    """The client side the vector lane uses, read only (see the module's docstring)."""

    def __init__(self, bindings: Any) -> None:
        self._bindings = bindings
        # One listing: a missing collection is then an answer (None), not the engine's NotFoundError,
        # whose class lives in the chromadb package this module exists not to import.
        self._ids = {c.name: str(c.id) for c in bindings.list_collections(None, None, TENANT, DATABASE)}

    def get_max_batch_size(self) -> int:
        return int(self._bindings.get_max_batch_size())

    def heartbeat(self) -> int:
        return int(self._bindings.heartbeat())

    def collection(self, name: str) -> ReaderCollection | None:
        found = self._ids.get(name)
        return None if found is None else ReaderCollection(self._bindings, found)

    get_or_create_collection = delete_collection = staticmethod(_refuse)


class EmptyReader(ChromaReader):
    """A home whose vector store was never written: no collection, and nothing created on disk."""

    def __init__(self) -> None:
        self._ids = {}

    def get_max_batch_size(self) -> int:
        return 1

    def heartbeat(self) -> int:
        return 0


def open_reader(path: Path) -> ChromaReader | None:
    """The embedded store at `path`, read only; None when Chroma's engine cannot be opened this
    way (another chromadb version, a store that needs a migration): the caller then opens
    PersistentClient, which also applies migrations."""
    if not (path / "chroma.sqlite3").exists():
        return EmptyReader()
    try:
        import chromadb_rust_bindings as rust

        config = rust.SqliteDBConfig(hash_type=rust.MigrationHash.MD5, migration_mode=rust.MigrationMode.Validate,
                                     url=str(path / "chroma.sqlite3"))
        import resource

        # As chromadb's RustBindingsAPI sizes it: 5 files per HNSW index, within the descriptor limit.
        cache = resource.getrlimit(resource.RLIMIT_NOFILE)[0] // 5
        return ChromaReader(rust.Bindings(allow_reset=False, sqlite_db_config=config, persist_path=str(path),
                                          hnsw_cache_size=cache))
    except Exception:  # noqa: BLE001 - any mismatch: the full client instead, a second slower
        log.info("Chroma's engine could not be opened directly; opening chromadb.PersistentClient", exc_info=True)
        return None
