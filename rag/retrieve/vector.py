"""The vector lane: Chroma, embedded (PersistentClient) by default, a server (HttpClient) by URL.

Chroma only ever sees our own vectors (no embedding function). Each vector carries its chunk's
knowledge base and document in metadata, so a scope is a `where` filter applied inside the ANN
search rather than after it.
"""

from __future__ import annotations

import logging
import re
import threading
from typing import Any, Callable, Sequence, TypeVar
from urllib.parse import urlparse

import numpy as np
from sqlalchemy import select
from sqlalchemy.orm import Session

from rag.errors import Unavailable
from rag.models.embed import Embedder
from rag.retrieve.chroma_reader import ChromaReader, open_reader
from rag.retrieve.lanes import ChunkRef, ChunkSource, by_kb
from rag.retrieve.published import first_ask, widen_until_full
from rag.retrieve.types import IndexRow, LaneHit, Query, Scope
from rag.settings import Settings
from rag.store.models import PUBLISHED, Chunk, DocumentVersion

log = logging.getLogger(__name__)
T = TypeVar("T")


def collection_name(model: str, dim: int) -> str:
    slug = re.sub(r"[^a-zA-Z0-9]+", "-", model).strip("-").lower()[:40]
    return f"rag-chunks-{slug}-{dim}"


def open_chroma_client(settings: Settings, read_only: bool = False):
    """A Chroma client: a server's by URL, else the embedded store's; a process that only reads
    the embedded store opens Chroma's engine without the chromadb package when it can
    (rag/retrieve/chroma_reader.py)."""
    if read_only and not settings.chroma_url:
        reader = open_reader(settings.chroma_path)
        if reader is not None:
            return reader
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


def _not_found(exc: BaseException) -> bool:
    """Whether Chroma answered that a collection does not exist (imported here: chromadb takes
    a good part of a second to import, and a command that never searches need not)."""
    from chromadb.errors import NotFoundError

    return isinstance(exc, NotFoundError)


def _damaged(exc: BaseException) -> bool:
    """Whether embedded Chroma failed to read a collection's HNSW files (`Error constructing hnsw
    segment reader: … Error deserializing pickle file: … EOF while parsing`): they were cut short."""
    from chromadb.errors import InternalError

    return isinstance(exc, InternalError) and "hnsw segment reader" in str(exc).lower()


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
        if _not_found(exc):  # an answer, not an outage
            raise
        log.exception("Chroma server call failed: %s", what)
        raise Unavailable("the vector store (Chroma server) is unreachable") from exc
    raise AssertionError("unreachable")  # pragma: no cover


class ChromaVectorLane:
    """One Chroma collection per knowledge base and embedding model.

    A knowledge-base scope is then a choice of collections, not a metadata filter: Chroma's
    `where` filter costs far more than an unfiltered query (`python -m benchmarks.search_latency
    --profile` times both). Only a folder scope filters, on the documents it allows. Results of
    several knowledge bases merge by cosine similarity, which the one model makes comparable.

    Chroma and the model are opened on first use (`open`), not when the lane is made: the model
    takes seconds to load, and most commands that open the store never search.
    """

    name = "vector"
    in_store = False
    uses_vectors = True

    def __init__(self, open_client: Callable[[], Any], embedder: Callable[[], Embedder], remote: bool = False) -> None:
        self._open_client = open_client
        self._embedder = embedder
        self.remote = remote
        self.engine = "chroma server" if remote else "chroma embedded"
        self._lock = threading.Lock()
        self._client: Any = None
        self._prefix = ""
        self._max_batch = 0
        self._collections: dict[str, Any] = {}

    # ----- opening -----

    def open(self) -> None:
        """Connect to Chroma and learn the model's name and dimension (which name the collections).
        A failure is not kept: the next call tries again (a Chroma server that is back)."""
        if self._client is not None:
            return
        with self._lock:
            if self._client is not None:
                return
            embedder = self._embedder()
            client = self._open_client()
            self._max_batch = max(1, int(_remote(client.get_max_batch_size, "batch size", self.remote)))
            self._prefix = collection_name(embedder.name, embedder.dim)
            self._client = client

    @property
    def client(self) -> Any:
        self.open()
        return self._client

    @property
    def prefix(self) -> str:
        self.open()
        return self._prefix

    def _name(self, kb_id: str) -> str:
        return f"{self.prefix}-{kb_id}"

    def collection(self, kb_id: str, create: bool = False) -> Any:
        """The knowledge base's collection; None when it has none yet and create is False."""
        if kb_id in self._collections:
            return self._collections[kb_id]
        client = self.client
        if isinstance(client, ChromaReader):  # read only: a missing collection is None, never created
            found = client.collection(self._name(kb_id))
            if found is None:
                return None
        elif create:
            found = _remote(
                lambda: client.get_or_create_collection(
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
                    lambda: client.get_collection(self._name(kb_id), embedding_function=None), "open", self.remote
                )
            except Exception as exc:
                if not _not_found(exc):
                    raise
                return None  # one direct lookup, not a listing of every collection
        self._collections[kb_id] = found
        return found

    # ----- the index side -----

    def attach(self, source: ChunkSource) -> None:
        pass  # repaired by reconcile(), at a writer's start

    def compact(self) -> int:
        return 0  # Chroma compacts its own segments

    def add(self, session: Session | None, rows: Sequence[IndexRow], vectors: np.ndarray | None) -> None:
        """Upsert the rows' vectors, each into its knowledge base's collection."""
        if not rows:
            return
        if vectors is None or len(vectors) != len(rows):
            raise ValueError("the vector lane needs one vector per chunk")
        self.open()
        positions: dict[str, list[int]] = {}
        for i, row in enumerate(rows):
            positions.setdefault(row[2], []).append(i)
        for kb, part_of_kb in positions.items():
            collection = self.collection(kb, create=True)
            for j in range(0, len(part_of_kb), self._max_batch):
                part = part_of_kb[j:j + self._max_batch]
                ids = [str(rows[p][0]) for p in part]
                metadatas = [{"kb_id": kb, "node_id": rows[p][3]} for p in part]
                _remote(
                    lambda: collection.upsert(ids=ids, embeddings=vectors[part], metadatas=metadatas),
                    "upsert",
                    self.remote,
                )

    def delete(self, session: Session | None, chunks: Sequence[ChunkRef]) -> None:
        """Remove vectors, given (chunk id, knowledge base id) pairs."""
        for kb, chunk_ids in by_kb(chunks).items():
            collection = self.collection(kb)
            if collection is None:
                continue
            ids = [str(chunk_id) for chunk_id in chunk_ids]
            for i in range(0, len(ids), self._max_batch):
                part = ids[i:i + self._max_batch]
                _remote(lambda: collection.delete(ids=part), "delete", self.remote)

    def move(self, session: Session | None, rows: Sequence[IndexRow], from_kb: str) -> None:
        """Carry vectors into the collection of the knowledge base the rows now name: a node moved
        between knowledge bases keeps its vectors without embedding them again."""
        source = self.collection(from_kb)
        if source is None:
            return
        for i in range(0, len(rows), self._max_batch):
            part = rows[i:i + self._max_batch]
            ids = [str(row[0]) for row in part]
            found = _remote(lambda: source.get(ids=ids, include=["embeddings"]), "get", self.remote)
            if len(found["ids"]):
                row_of = {str(row[0]): row for row in part}
                self.add(None, [row_of[c] for c in found["ids"]], np.asarray(found["embeddings"], dtype=np.float32))
            _remote(lambda: source.delete(ids=ids), "delete", self.remote)

    def drop(self, kb_id: str) -> None:
        if self.collection(kb_id) is not None:
            _remote(lambda: self.client.delete_collection(self._name(kb_id)), "drop", self.remote)
        self._collections.pop(kb_id, None)

    def reconcile(self, source: ChunkSource) -> int:
        """Make each knowledge base's vectors match its published chunks; returns vectors repaired.

        Counts are compared first (cheap); only a knowledge base whose counts differ is walked id by
        id. This heals a vector store that lost data, was replaced, or missed a crash's cleanup;
        missing vectors come back from the embedding cache. An embedded collection Chroma can no
        longer read (its HNSW files cut short by a process killed while it wrote them) is dropped
        and filled again the same way.
        """
        with source.db.session() as session:
            published = source.published_counts(session)
        others = self._other_encoders(set(published))
        repaired = 0
        for kb_id, expected in published.items():
            if self._readable_count(kb_id) != expected:
                if kb_id in others:
                    log.warning("the vectors of knowledge base %s were made by another encoder (%s): embedding its "
                                "%d chunks again with %s", kb_id, ", ".join(others[kb_id]), expected, self.prefix)
                repaired += self._reconcile_kb(source, kb_id)
        for kb_id, names in others.items():  # complete now with this encoder's vectors: the others go
            for name in names:
                log.warning("dropping the vector collection %s, made by another encoder", name)
                _remote(lambda: self.client.delete_collection(name), "drop", self.remote)
        return repaired

    def _readable_count(self, kb_id: str) -> int:
        """`count(kb_id)`; 0 once a damaged embedded collection was dropped (see reconcile)."""
        try:
            return self.count(kb_id)
        except Exception as exc:
            if self.remote or not _damaged(exc):
                raise
            log.warning("the vector collection of knowledge base %s cannot be read (%s); it is dropped and its "
                        "vectors are put back from the embedding cache", kb_id, exc)
        self._collections.pop(kb_id, None)
        self.client.delete_collection(self._name(kb_id))
        return 0

    def _other_encoders(self, kb_ids: set[str]) -> dict[str, list[str]]:
        """The vector collections of these knowledge bases made by another model or encoder
        (another prefix, collection_name): vectors of two encoders are never searched together."""
        found: dict[str, list[str]] = {}
        mine = self.prefix
        listing = _remote(self.client.list_collections, "list collections", self.remote)
        for item in listing:
            name = item if isinstance(item, str) else item.name
            base, _, kb_id = name.rpartition("-")
            if name.startswith("rag-chunks-") and kb_id in kb_ids and base != mine:
                found.setdefault(kb_id, []).append(name)
        return found

    def _reconcile_kb(self, source: ChunkSource, kb_id: str) -> int:
        # Another worker may be publishing meanwhile. Its chunk rows are committed before their
        # vectors are written, so reading the vectors first and every chunk row of the knowledge
        # base (any status) second never takes a vector in flight for an orphan.
        present = self.ids(kb_id)
        with source.db.session() as session:
            known = set(session.scalars(select(Chunk.id).where(Chunk.kb_id == kb_id)))
            live = list(session.scalars(
                select(Chunk.id)
                .join(DocumentVersion, DocumentVersion.id == Chunk.version_id)
                .where(Chunk.kb_id == kb_id, DocumentVersion.status == PUBLISHED)
                .order_by(Chunk.id)
            ))
        extra = [(int(i), kb_id) for i in present - known]
        missing = [i for i in live if i not in present]
        if not extra and not missing:
            return 0
        log.warning("vector lane of %s: %d missing, %d extra; repairing", kb_id, len(missing), len(extra))
        if extra:
            self.delete(None, extra)
        for i in range(0, len(missing), source.batch):
            with source.db.session() as session:
                rows = source.rows_of(session, missing[i:i + source.batch])
            self.add(None, rows, source.embed([row[1] for row in rows]))
        return len(missing) + len(extra)

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
        """Vectors of one knowledge base; without one, of the collections this process opened."""
        kbs = [kb_id] if kb_id else list(self._collections)
        total = 0
        for kb in kbs:
            collection = self.collection(kb)
            if collection is not None:
                total += int(_remote(collection.count, "count", self.remote))
        return total

    def health(self) -> None:
        self.client.heartbeat()

    def close(self) -> None:
        pass  # Chroma's client holds nothing that outlives the process

    # ----- searching -----

    def search(self, session: Session, query: Query, scope: Scope, depth: int) -> list[LaneHit]:
        """The nearest chunks of published versions: Chroma holds a version's vectors while it is
        being published, so hits are checked (rag/retrieve/published.py), widening when too few
        pass. The first fetch may have started on another thread (`ahead`)."""
        if scope.empty:
            return []
        started = query.ahead.pop(self.name, None)

        def fetch(n: int) -> list[LaneHit]:
            nonlocal started
            if started is not None and n == first_ask(depth):
                first, started = started, None
                return first.result()
            return self.nearest(query.vector, scope, n)

        return widen_until_full(fetch, session, depth)

    def ahead(self, query: Query, scope: Scope, depth: int) -> None:
        """Start this search's first fetch on another thread: Chroma is queried as soon as the
        query's vector is there, while the lanes that need no vector search (`search` takes it)."""
        if not scope.empty:
            started = query.embed_ahead(lambda vector: self.nearest(vector, scope, first_ask(depth)))
            if started is not None:
                query.ahead[self.name] = started

    def nearest(self, vector: np.ndarray, scope: Scope, k: int) -> list[LaneHit]:
        """Chroma's k nearest chunks under the scope, of any status, by cosine similarity."""
        if scope.empty:
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
