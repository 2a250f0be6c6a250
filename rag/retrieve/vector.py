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
    except Exception as exc:  # noqa: BLE001 - the log has the detail, the caller a clear message
        log.exception("Chroma server call failed: %s", what)
        raise Unavailable("the vector store (Chroma server) is unreachable") from exc
    raise AssertionError("unreachable")  # pragma: no cover


class ChromaVectorLane:
    name = "vector"

    def __init__(self, client, model: str, dim: int, remote: bool = False) -> None:
        self.client = client
        self.remote = remote
        self.collection = _remote(
            lambda: client.get_or_create_collection(
                collection_name(model, dim),
                configuration={"hnsw": {"space": "cosine", "ef_construction": 200, "ef_search": 200}},
                embedding_function=None,
            ),
            "open collection",
            remote,
        )
        self._max_batch = max(1, int(_remote(client.get_max_batch_size, "batch size", remote)))

    def add(
        self, chunk_ids: Sequence[int], vectors: np.ndarray, kb_ids: Sequence[str], node_ids: Sequence[str]
    ) -> None:
        for i in range(0, len(chunk_ids), self._max_batch):
            sl = slice(i, i + self._max_batch)
            ids = [str(c) for c in chunk_ids[sl]]
            metadatas = [{"kb_id": kb, "node_id": node} for kb, node in zip(kb_ids[sl], node_ids[sl])]
            _remote(
                lambda: self.collection.upsert(ids=ids, embeddings=vectors[sl], metadatas=metadatas),
                "upsert",
                self.remote,
            )

    def delete(self, chunk_ids: Sequence[int]) -> None:
        ids = [str(c) for c in chunk_ids]
        for i in range(0, len(ids), self._max_batch):
            part = ids[i:i + self._max_batch]
            _remote(lambda: self.collection.delete(ids=part), "delete", self.remote)

    def search(self, vector: np.ndarray, scope: Scope, k: int) -> list[LaneHit]:
        if not scope.kb_ids or (scope.node_ids is not None and not scope.node_ids):
            return []
        clauses: list[dict] = [{"kb_id": {"$in": list(scope.kb_ids)}}]
        if scope.node_ids is not None:
            clauses.append({"node_id": {"$in": sorted(scope.node_ids)}})
        where = clauses[0] if len(clauses) == 1 else {"$and": clauses}
        result = _remote(
            lambda: self.collection.query(
                query_embeddings=[np.asarray(vector, dtype=np.float32)], n_results=k, where=where, include=["distances"]
            ),
            "query",
            self.remote,
        )
        ids, distances = result["ids"][0], result["distances"][0]
        return [LaneHit(int(i), 1.0 - float(d)) for i, d in zip(ids, distances)]

    def count(self) -> int:
        return int(_remote(self.collection.count, "count", self.remote))
