"""What the retriever stage passes around."""

from __future__ import annotations

import contextvars
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Callable, NamedTuple, Sequence, TypeVar

import numpy as np

TRUNCATION_MARK = "[…truncated]"
T = TypeVar("T")


@dataclass(frozen=True)
class Scope:
    """Where a search may look: knowledge bases, and optionally only these documents (folder scope)."""

    workspace_id: str
    kb_ids: tuple[str, ...]
    node_ids: frozenset[str] | None = None

    @property
    def empty(self) -> bool:
        """Nowhere to look: no knowledge base, or a folder scope without documents."""
        return not self.kb_ids or (self.node_ids is not None and not self.node_ids)


class LaneHit(NamedTuple):
    """A lane's hit (a tuple: a lane makes a hundred or more per search)."""

    chunk_id: int
    score: float  # the lane's own score, higher is better (cosine similarity, negated bm25)


class IndexRow(NamedTuple):
    """A chunk as the lanes index it. A tuple, so that rows read in bulk stay cheap."""

    chunk_id: int
    text: str  # the indexed text: the heading path, then the chunk's own text (contextual headings)
    kb_id: str
    node_id: str
    heading: str = ""  # the chunk's heading path, joined: what a title lane indexes


def heading_text(heading_path: Sequence[str] | None) -> str:
    """A chunk's heading path as one line (document title first), for a title lane."""
    return " > ".join(heading_path or ())


_ahead_pool: ThreadPoolExecutor | None = None
_ahead_lock = threading.Lock()


def run_ahead(fn: Callable[..., T], *args: object) -> Future[T]:
    """Run fn on the threads that do a search's work ahead of need (the query's embedding, the
    vector lane's first fetch, a read of the published ids), made on first use. In the caller's
    context (its request id on log lines, its span as the parent of a stage's)."""
    global _ahead_pool
    with _ahead_lock:
        if _ahead_pool is None:
            _ahead_pool = ThreadPoolExecutor(max_workers=8, thread_name_prefix="rag-ahead")
    return _ahead_pool.submit(contextvars.copy_context().run, fn, *args)


def after(first: Future[T], then: Callable[[T], object]) -> Future:
    """then(first's result), run by the thread that finishes `first` as soon as it does (no other
    thread woken to wait for it), or on the ahead pool when `first` is already done. A failure of
    either is the returned future's."""
    out: Future = Future()
    caller = threading.get_ident()

    def finish(done: Future[T]) -> None:
        try:
            out.set_result(then(done.result()))
        except BaseException as exc:  # noqa: BLE001 - handed to whoever waits on `out`
            out.set_exception(exc)

    def step(done: Future[T]) -> None:
        if threading.get_ident() == caller:  # `first` was done already: not on the caller's thread
            run_ahead(finish, done)
        else:
            finish(done)

    first.add_done_callback(step)
    return out


class Query:
    """One search's question. Its embedding is computed on first use and then kept, so that every
    lane that needs it (and, later, the answer stage) shares one model call, and a search that
    needs no vector (the keyword lane alone) makes none.

    A search also leaves here what it started ahead of need (`ahead`: a lane's first fetch, begun
    on another thread as soon as the vector is there) and what it guessed (`guess`: the bridge's
    search for the chunk it expects first, rag/retrieve/index.py)."""

    def __init__(self, text: str, embed: Callable[[str], np.ndarray] | None = None,
                 vector: np.ndarray | None = None, max_terms: int = 32) -> None:
        self.text = text
        self.max_terms = max_terms  # the keyword lanes' limit on distinct query words (a bridge query has more)
        self._embed = embed
        self._vector = vector
        self._pending: Future[np.ndarray] | None = None
        self.ahead: dict[str, Future] = {}  # lane name -> its first fetch, running on another thread
        # (chunk id, scope, depth, the bridge's hits for them; None: no such chunk)
        self.guess: tuple[int, Scope, int, list[LaneHit] | None] | None = None
        # What `follow` fused before adding the bridge: (the rankings it returned, the lanes fused,
        # their sums by chunk id), for `rank` to finish.
        self.fused: tuple[dict, tuple[str, ...], dict] | None = None

    @property
    def vector(self) -> np.ndarray:
        if self._vector is None:
            if self._pending is not None:
                self._vector = self._pending.result()
            elif self._embed is None:
                raise ValueError("this query was made without an embedder")
            else:
                self._vector = self._embed(self.text)
        return self._vector

    def embed_ahead(self, then: Callable[[np.ndarray], T] | None = None) -> Future[T] | None:
        """Start computing the embedding on another thread (the model runs without Python's lock),
        so that a lane that needs no vector searches meanwhile; `vector` then waits for it. `then`:
        what to do with the vector on another thread once it is there (a lane's first fetch); the
        future returned is its result (None without `then`, or when nothing can embed)."""
        if self._vector is None and self._pending is None:
            if self._embed is None:
                return None
            self._pending = run_ahead(self._embed, self.text)
        if then is None:
            return None
        if self._vector is not None:
            return run_ahead(then, self._vector)
        return after(self._pending, then)

    @property
    def embedded(self) -> bool:
        return self._vector is not None

    def __repr__(self) -> str:
        return f"Query({self.text!r})"


@dataclass
class Hit:
    """One ranked excerpt: a chunk of a published document version."""

    chunk_id: int
    score: float  # the fused ranking score (reciprocal rank fusion)
    retrievers: list[str]
    node_id: str
    kb_id: str
    source_id: str
    title: str
    source: str | None
    version: int
    heading_path: list[str]
    text: str
    char_start: int
    char_end: int
    lane_ranks: dict[str, int] = field(default_factory=dict)  # lane name -> 1-based rank in that lane
    lane_scores: dict[str, float] = field(default_factory=dict)  # lane name -> the lane's own score
    page: int | None = None  # the 1-based page of a paged original (PDF) the excerpt lies on; else None
    # What the excerpt names beyond its page: {"slide": n}, {"sheet": name, "rows": [a, b]}, {"ocr": True}
    locator: dict | None = None
    url: str | None = None  # where the original lives (a page, a file in a repository), for a source's document

    @property
    def vector_similarity(self) -> float | None:
        """The vector lane's cosine similarity to the question (None when it did not find the
        chunk): the signal abstention reads, since the fused score is rank-only."""
        return self.lane_scores.get("vector")

    @property
    def document_id(self) -> str:
        return self.source_id

    def excerpt(self, limit: int = 2000) -> str:
        if len(self.text) <= limit:
            return self.text
        return self.text[:limit] + TRUNCATION_MARK
