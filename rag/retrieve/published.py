"""Only chunks of published versions are searchable: the check both index-outside-the-store lanes share.

Chroma and tantivy receive a version's chunks while it is still `publishing`, so what they return
is checked before it counts.

On SQLite the check reads memory: a process keeps the ids of every published chunk (`PublishedSet`,
one per database), with the value of the store's search generation it was read at. Triggers move
that value in the transaction of every change to what is published (migration 0010), whichever
process makes it, so a search reads the one-row table and, while the value is the one its set was
read at, checks its candidates there (about 0.1 ms against 1.2-1.6 ms per lane for a hundred
candidates by primary key at 100,000 chunks). After a change the set is read again once the new
value has been seen by two searches, on a thread of its own (no search waits for it; meanwhile
they check by primary key as before). Triggers also log the chunks each change adds or withdraws
(migration 0016, `published_changes`), so the set is brought up to date from the rows after the
last one it applied (one document published: its chunks' rows, 5 ms at a million chunks, against
0.4-0.7 s to read every id; benchmarks/million.py)
and read whole only when the log does not reach back that far, or a change asks for it. A read
costs time, so a new one starts no sooner than RELOAD_SPACING times its last duration after it: at
a million chunks a stream of publishes does not keep a core reading ids. On PostgreSQL (no
triggers there) every check is by primary key.
"""

from __future__ import annotations

import itertools
import logging
import threading
import time
import weakref
from concurrent.futures import Future
from typing import Callable

import numpy as np
from sqlalchemy import bindparam, select, text
from sqlalchemy.engine import Engine
from sqlalchemy.orm import Session

from rag.retrieve.types import LaneHit, run_ahead
from rag.store.models import PUBLISHED, Chunk, DocumentVersion


log = logging.getLogger(__name__)

MEMO = "rag.published"  # session.info key: one search's statuses by chunk id (None: no such chunk)
HELD = "rag.published.held"  # session.info key: the published set one search reads (None: check by key)
RELOAD_AFTER = 2  # searches that see a new generation before the set is read again
# A read of the ids starts no sooner after the last one ended than this many times as long as it
# took: however large the store, reading them takes at most about a tenth of a core while
# documents are published one after another (each change a new generation); meanwhile searches
# check by key. 12 ms at 20,000 chunks, ~0.1 s at 280,000 (benchmarks/million.py).
RELOAD_SPACING = 10.0


class PublishedSet:
    """The ids of every published chunk as of one search generation (a sorted array), for the
    searches of one process on one SQLite database. The ids are read on a thread of their own
    (about 35 ms at 100,000 chunks): no search waits for them; the searches meanwhile check by key."""

    def __init__(self, engine: Engine) -> None:
        self._engine = weakref.ref(engine)
        self._lock = threading.Lock()
        self._held: tuple[int, np.ndarray | None] | None = None  # (generation, ids or None while not read)
        self._read: tuple[int, np.ndarray] | None = None  # the last log row applied, and the ids then
        self.reads = {"whole": 0, "changes": 0}  # how each read was made (tests, benchmarks)
        self._sightings = 0  # searches that saw the generation held, while its ids are not read
        self._loading: Future[None] | None = None
        self._not_before = 0.0  # time.monotonic() before which no read of the ids starts

    def current(self, session: Session) -> np.ndarray | None:
        """The published ids, when the set held is that of the store's generation now; None when
        this search should check by primary key (a new generation, its ids not read yet)."""
        generation = session.execute(_GENERATION).scalar()
        if generation is None:
            return None  # a store without the row: check by key
        held = self._held
        if held is not None and held[0] == generation and held[1] is not None:
            return held[1]
        with self._lock:
            held = self._held
            if held is None or held[0] != generation:
                self._held, self._sightings = (generation, None), 1
                return None
            if held[1] is not None:
                return held[1]
            self._sightings += 1
            if self._sightings >= RELOAD_AFTER and self._loading is None and time.monotonic() >= self._not_before:
                self._loading = run_ahead(self._load)
            return None

    def _load(self) -> None:
        started = time.monotonic()
        try:
            engine = self._engine()
            if engine is None:
                return
            with Session(engine) as session:
                # Straight from sqlite3's cursor into the array: through SQLAlchemy's rows this
                # read took 2.3-2.7x as long (27 vs 12 ms at 20,000 chunks, 166 vs 73 ms at
                # 100,000, on a loaded machine), GIL held (benchmarks/million.py's stores).
                raw = session.connection().connection.driver_connection
                if not raw.in_transaction:
                    raw.execute("BEGIN")  # one snapshot: the generation and the ids or changes read with it
                try:
                    generation = raw.execute(_GENERATION_SQL).fetchone()
                    generation = None if generation is None else generation[0]
                    last = raw.execute(_LAST_CHANGE).fetchone()[0]
                    ids = self._changed(raw, last)
                    if ids is None:
                        cursor = raw.execute(_PUBLISHED_IDS, (PUBLISHED,))
                        ids = np.fromiter(itertools.chain.from_iterable(cursor), dtype=np.int64)
                        ids.sort()
                        self.reads["whole"] += 1
                    else:
                        self.reads["changes"] += 1
                finally:
                    raw.rollback()
            with self._lock:
                if generation is not None:
                    self._held, self._read = (generation, ids), (last, ids)
        except Exception:  # noqa: BLE001 - the searches go on checking by key
            log.warning("could not read the published chunks' ids; searches check them by key", exc_info=True)
        finally:
            with self._lock:
                self._loading = None
                ended = time.monotonic()
                self._not_before = ended + RELOAD_SPACING * (ended - started)

    def _changed(self, raw, last: int) -> np.ndarray | None:
        """The ids held, brought up to log row `last` by the rows after the one they were read at
        (None: read them whole: none held yet, the log no longer reaches back, or a row asks for it)."""
        read = self._read
        if read is None or last < read[0]:
            return None
        first = raw.execute(_FIRST_CHANGE).fetchone()[0]
        if first is not None and first > read[0] + 1:
            return None  # the rows after it were deleted: older than the log keeps (migration 0016)
        if last - read[0] > max(1000, len(read[1]) // 4):
            return None  # as much to do as a whole read
        state: dict[int, bool] = {}
        for chunk_id, published in raw.execute(_CHANGES, (read[0], last)):  # in order: a chunk's last row counts
            if chunk_id < 0:
                return None
            state[chunk_id] = bool(published)
        ids = read[1]
        gone = np.fromiter((i for i, on in state.items() if not on), dtype=np.int64)
        ids = np.delete(ids, np.searchsorted(ids, gone[held_in(ids, gone)]))
        new = np.fromiter((i for i, on in state.items() if on), dtype=np.int64)
        new = new[~held_in(ids, new)]
        new.sort()
        return np.insert(ids, np.searchsorted(ids, new), new)

    def settled(self, timeout: float = 30.0) -> bool:
        """Wait until no read of the ids is running (tests, benchmarks); False on a timeout."""
        loading = self._loading
        if loading is None:
            return True
        try:
            loading.result(timeout)
        except TimeoutError:
            return False
        return True


_GENERATION_SQL = "SELECT value FROM search_generation WHERE id = 1"
_GENERATION = text(_GENERATION_SQL)
_LAST_CHANGE = "SELECT coalesce(max(seq), 0) FROM published_changes"
_FIRST_CHANGE = "SELECT min(seq) FROM published_changes"
_CHANGES = "SELECT chunk_id, published FROM published_changes WHERE seq > ? AND seq <= ? ORDER BY seq"
_PUBLISHED_IDS = "SELECT c.id FROM chunks AS c JOIN document_versions AS v ON v.id = c.version_id WHERE v.status = ?"
# Chunks' version statuses by id (the check by key): one statement, made once, as hydration's.
_STATUSES = (
    select(Chunk.id, DocumentVersion.status)
    .join(DocumentVersion, DocumentVersion.id == Chunk.version_id)
    .where(Chunk.id.in_(bindparam("ids", expanding=True)))
)
_sets: "weakref.WeakKeyDictionary[Engine, PublishedSet]" = weakref.WeakKeyDictionary()
_sets_lock = threading.Lock()


def published_set(engine: Engine) -> PublishedSet | None:
    """The published set of this engine's database (None: not SQLite, checks go by key)."""
    if engine.dialect.name != "sqlite":
        return None
    with _sets_lock:
        found = _sets.get(engine)
        if found is None:
            found = _sets[engine] = PublishedSet(engine)
        return found


def _published_set(session: Session) -> PublishedSet | None:
    bind = session.get_bind()
    return published_set(getattr(bind, "engine", bind))


def held_ids(session: Session) -> np.ndarray | None:
    """The published ids this session's checks may read from memory (None: check by key). A
    search's session (`remember_statuses`) reads the generation once; another reads it each time."""
    if HELD in session.info:
        return session.info[HELD]
    published = _published_set(session)
    held = published.current(session) if published is not None else None
    if MEMO in session.info:
        session.info[HELD] = held
    return held


def remember_statuses(session: Session) -> None:
    """Keep the statuses this session's checks read (one search's: the retriever's session), so
    that the second lane checks only the chunks the first did not return. Only for a session that
    writes nothing."""
    session.info[MEMO] = {}


def published_ids(session: Session, chunk_ids: list[int]) -> set[int]:
    """The chunk ids among these that belong to published versions (in memory when the published
    set is current, else by primary key)."""
    if not chunk_ids:
        return set()
    held = held_ids(session)
    if held is not None:
        if not len(held):
            return set()
        wanted_ids = np.fromiter(chunk_ids, dtype=np.int64, count=len(chunk_ids))
        return {int(i) for i in wanted_ids[held_in(held, wanted_ids)]}
    memo: dict[int, str | None] | None = session.info.get(MEMO)
    wanted = list(dict.fromkeys(chunk_ids))
    missing = wanted if memo is None else [i for i in wanted if i not in memo]
    found: dict[int, str | None] = {}
    if missing:
        # The status is checked here rather than in SQL: with it in the WHERE clause SQLite plans
        # from the status index and walks every published version (110 ms at 10,000 documents,
        # against 0.2 ms by primary key). Only ids and statuses: the text of a hundred candidates
        # is read for the few shown (retriever._hydrate), not here.
        found = {chunk_id: status for chunk_id, status in session.execute(_STATUSES, {"ids": missing})}
        if memo is not None:
            memo.update({i: found.get(i) for i in missing})
    statuses = found if memo is None else memo
    return {i for i in wanted if statuses.get(i) == PUBLISHED}


def held_in(ids: np.ndarray, wanted: np.ndarray) -> np.ndarray:
    """Which of `wanted` are in the sorted `ids` (a mask over `wanted`)."""
    if not len(ids):
        return np.zeros(len(wanted), dtype=bool)
    at = np.minimum(np.searchsorted(ids, wanted), len(ids) - 1)  # where each would sit in the sorted ids
    return ids[at] == wanted


def first_ask(depth: int) -> int:
    """How many hits a lane is asked for first, to keep `depth` once unpublished ones are dropped."""
    return depth + 16


def widen_until_full(
    fetch: Callable[[int], list[LaneHit]], session: Session, depth: int
) -> list[LaneHit]:
    """Ask a lane for a few more than needed and keep published chunks, widening when too few were."""
    ask = first_ask(depth)
    while True:
        raw = fetch(ask)
        live = published_ids(session, [h.chunk_id for h in raw])
        hits = [h for h in raw if h.chunk_id in live]
        if len(hits) >= depth or len(raw) < ask or ask >= 8 * depth:
            return hits[:depth]
        ask *= 2
