"""The vector lane: Chroma, embedded (PersistentClient) by default, a server (HttpClient) by URL.

Chroma only ever sees our own vectors (no embedding function). Each vector carries its chunk's
knowledge base and document in metadata, so a scope is a `where` filter applied inside the ANN
search rather than after it.
"""

from __future__ import annotations

import logging
import re
from typing import Callable, Sequence, TypeVar
from urllib.parse import urlparse

import numpy as np
from chromadb.errors import NotFoundError

from rag.errors import Unavailable
from rag.retrieve.types import LaneHit, Scope
from rag.settings import Settings

log = logging.getLogger(__name__)
T = TypeVar("T")


def collection_name(model: str, dim: int) -> str:
    slug = re.sub(r"[^a-zA-Z0-9]+", "-", model).strip("-").lower()[:40]
    return f"rag-chunks-{slug}-{dim}"


def open_chroma_client(settings: Settings):
    import chromadb
    from chromadb.config import Settings as ChromaSettings

    chroma_settings = ChromaSettings(anonymized_telemetry=False)
    if settings.chroma_url:
        url = urlparse(settings.chroma_url)
        try:
            return chromadb.HttpClient(
                host=url.hostname or "127.0.0.1",
                port=url.port or (443 if url.scheme == "https" else 8000),
                ssl=url.scheme == "https",
                settings=chroma_settings,
            )
        except Exception as exc:  # noqa: BLE001
            log.exception("cannot reach the Chroma server")
            raise Unavailable("the vector store (Chroma server) is unreachable") from exc
    settings.chroma_path.mkdir(parents=True, exist_ok=True)
    return chromadb.PersistentClient(path=str(settings.chroma_path), settings=chroma_settings)


def _remote(call: Callable[[], T], what: str, remote: bool) -> T:
    """Run a Chroma call; against a server, retry transport failures briefly, then report Unavailable."""
    if not remote:
        return call()
    import httpx
    from tenacity import Retrying, retry_if_exception_type, stop_after_attempt, stop_after_delay, wait_exponential

    try:
        for attempt in Retrying(
            retry=retry_if_exception_type((httpx.TransportError, ConnectionError, TimeoutError)),
            wait=wait_exponential(multiplier=0.2, max=2),
            stop=stop_after_attempt(4) | stop_after_delay(15),
            reraise=True,
        ):
            with attempt:
                return call()
    except NotFoundError:  # an answer, not an outage
        raise
    except Exception as exc:  # noqa: BLE001 - the log has the detail, the caller a clear message
        log.exception("Chroma server call failed: %s", what)
        raise Unavailable("the vector store (Chroma server) is unreachable") from exc
    raise AssertionError("unreachable")  # pragma: no cover


class ChromaVectorLane:
    """One Chroma collection per knowledge base and embedding model.

    A knowledge-base scope is then a choice of collections, not a metadata filter: Chroma's
    `where` filter costs ~30 ms per query even at 10,000 vectors (measured, docs/benchmarks.md),
    an unfiltered query ~2 ms. Only a folder scope filters, on the documents it allows. Results of
    several knowledge bases merge by cosine similarity, which the one model makes comparable.
    """

    name = "vector"

    def __init__(self, client, model: str, dim: int, remote: bool = False) -> None:
        self.client = client
        self.remote = remote
        self.prefix = collection_name(model, dim)
        self._collections: dict[str, object] = {}
        self._max_batch = max(1, int(_remote(client.get_max_batch_size, "batch size", remote)))

    def _name(self, kb_id: str) -> str:
        return f"{self.prefix}-{kb_id}"

    def collection(self, kb_id: str, create: bool = False):
        """The knowledge base's collection; None when it has none yet and create is False."""
        if kb_id in self._collections:
            return self._collections[kb_id]
        if create:
            found = _remote(
                lambda: self.client.get_or_create_collection(
                    self._name(kb_id),
                    configuration={"hnsw": {"space": "cosine", "ef_construction": 200, "ef_search": 200}},
                    embedding_function=None,
                ),
                "open collection",
                self.remote,
            )
        else:
            try:
                found = _remote(
                    lambda: self.client.get_collection(self._name(kb_id), embedding_function=None), "open", self.remote
                )
            except NotFoundError:  # one direct lookup, not a listing of every collection
                return None
        self._collections[kb_id] = found
        return found

    def add(
        self, chunk_ids: Sequence[int], vectors: np.ndarray, kb_ids: Sequence[str], node_ids: Sequence[str]
    ) -> None:
        rows: dict[str, list[int]] = {}
        for i, kb in enumerate(kb_ids):
            rows.setdefault(kb, []).append(i)
        for kb, positions in rows.items():
            collection = self.collection(kb, create=True)
            for j in range(0, len(positions), self._max_batch):
                part = positions[j:j + self._max_batch]
                ids = [str(chunk_ids[p]) for p in part]
                metadatas = [{"kb_id": kb, "node_id": node_ids[p]} for p in part]
                _remote(
                    lambda: collection.upsert(ids=ids, embeddings=vectors[part], metadatas=metadatas),
                    "upsert",
                    self.remote,
                )

    def delete(self, chunks: Sequence[tuple[int, str]]) -> None:
        """Remove vectors, given (chunk id, knowledge base id) pairs."""
        by_kb: dict[str, list[str]] = {}
        for chunk_id, kb in chunks:
            by_kb.setdefault(kb, []).append(str(chunk_id))
        for kb, ids in by_kb.items():
            collection = self.collection(kb)
            if collection is None:
                continue
            for i in range(0, len(ids), self._max_batch):
                part = ids[i:i + self._max_batch]
                _remote(lambda: collection.delete(ids=part), "delete", self.remote)

    def move(self, chunks: Sequence[tuple[int, str]], from_kb: str, to_kb: str) -> None:
        """Carry vectors, given (chunk id, node id) pairs, into another knowledge base's collection:
        a node moved between knowledge bases keeps its vectors without embedding them again."""
        source = self.collection(from_kb)
        if source is None:
            return
        for i in range(0, len(chunks), self._max_batch):
            part = chunks[i:i + self._max_batch]
            ids = [str(chunk_id) for chunk_id, _ in part]
            found = _remote(lambda: source.get(ids=ids, include=["embeddings"]), "get", self.remote)
            if len(found["ids"]):
                node_of = {str(chunk_id): node_id for chunk_id, node_id in part}
                self.add([int(c) for c in found["ids"]], np.asarray(found["embeddings"], dtype=np.float32),
                         [to_kb] * len(found["ids"]), [node_of[c] for c in found["ids"]])
            _remote(lambda: source.delete(ids=ids), "delete", self.remote)

    def drop(self, kb_id: str) -> None:
        if self.collection(kb_id) is not None:
            _remote(lambda: self.client.delete_collection(self._name(kb_id)), "drop", self.remote)
        self._collections.pop(kb_id, None)

    def search(self, vector: np.ndarray, scope: Scope, k: int) -> list[LaneHit]:
        if not scope.kb_ids or (scope.node_ids is not None and not scope.node_ids):
            return []
        where = {"node_id": {"$in": sorted(scope.node_ids)}} if scope.node_ids is not None else None
        query = [np.asarray(vector, dtype=np.float32)]
        hits: list[LaneHit] = []
        for kb in scope.kb_ids:
            collection = self.collection(kb)
            if collection is None:
                continue
            result = _remote(
                lambda: collection.query(query_embeddings=query, n_results=k, where=where, include=["distances"]),
                "query",
                self.remote,
            )
            hits.extend(LaneHit(int(i), 1.0 - float(d)) for i, d in zip(result["ids"][0], result["distances"][0]))
        hits.sort(key=lambda h: -h.score)
        return hits[:k]

    def ids(self, kb_id: str) -> set[int]:
        collection = self.collection(kb_id)
        if collection is None:
            return set()
        found: set[int] = set()
        offset, page = 0, 10_000
        while True:
            batch = _remote(lambda: collection.get(include=[], limit=page, offset=offset), "list ids", self.remote)["ids"]
            found.update(int(i) for i in batch)
            if len(batch) < page:
                return found
            offset += page

    def count(self, kb_id: str | None = None) -> int:
        kbs = [kb_id] if kb_id else list(self._collections)
        total = 0
        for kb in kbs:
            collection = self.collection(kb)
            if collection is not None:
                total += int(_remote(collection.count, "count", self.remote))
        return total
