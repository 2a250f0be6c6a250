"""The search index: the registry of lanes, their fusion weights, and the step after fusion.

Everything that writes, moves, repairs, checks or searches the lanes goes through one
`SearchIndex`, which runs the operation on each lane in order, so that no other module names a
lane. The lanes are built here from the settings (`build_search_index`): adding a lane is a
module with a class that meets `rag.retrieve.lanes.Lane`, an entry in `LANE_BUILDERS`, and its
name in `RetrieveSettings.lanes` (the `Literal`, and the default list to have it on) with its
default weight in `LANE_WEIGHTS` (docs/architecture.md, "Add a lane").

Writes come in two steps because of where the lanes keep their index (`Lane.in_store`): the lanes
in the store are written in the transaction that writes the chunk rows, the lanes outside it
once those rows are committed, so that an index outside the store never holds a chunk the store
does not (what `reconcile` repairs otherwise).
"""

from __future__ import annotations

import logging
import threading
from pathlib import Path
from typing import Callable, Iterable, Mapping, Sequence

import numpy as np
from sqlalchemy.orm import Session

from rag import telemetry
from rag.turns import give_way
from rag.errors import InvalidArgument, Unavailable
from rag.models.embed import Embedder
from rag.retrieve.fusion import Fused, reciprocal_rank_fusion, rrf_entries, rrf_order
from rag.retrieve.lanes import ChunkRef, ChunkSource, Lane, NoReranker, Reranker
from rag.retrieve.types import IndexRow, LaneHit, Query, Scope
from rag.settings import Settings
from rag.store.db import Database

log = logging.getLogger(__name__)

BRIDGE = "bridge"  # the name, in fusion and its weights, of the ranking `SearchIndex.follow` adds


class SearchIndex:
    """The lanes by name, in order (the order of a hit's `retrievers`), with the fusion weights
    keyed by lane name (1.0 for a lane without one) and the reranker after fusion."""

    def __init__(
        self,
        lanes: Iterable[Lane],
        weights: Mapping[str, float],
        rrf_k: int = 60,
        reranker: Reranker | None = None,
        bridge: str | None = None,
        bridge_terms: int = 64,
    ) -> None:
        self.lanes: dict[str, Lane] = {}
        for lane in lanes:
            if lane.name in self.lanes:
                raise ValueError(f"two lanes are named {lane.name!r}")
            self.lanes[lane.name] = lane
        self.weights = {name: float(weights.get(name, 1.0)) for name in self.lanes}
        self.rrf_k = rrf_k
        # The lane searched a second time with the words of the first result (`follow`), its ranking
        # weighed as the lane `bridge`; None: no such search (no such lane, or a weight of 0).
        self.bridge = bridge if bridge in self.lanes and float(weights.get(BRIDGE, 1.0)) > 0 else None
        if self.bridge is not None:
            self.weights[BRIDGE] = float(weights.get(BRIDGE, 1.0))
        self.bridge_terms = bridge_terms
        self.reranker: Reranker = reranker or NoReranker()
        self.source: ChunkSource | None = None
        self._running = 0  # searches in progress in this process (`search` guesses only when alone)
        self._counting = threading.Lock()

    def lane(self, name: str) -> Lane:
        try:
            return self.lanes[name]
        except KeyError:
            raise InvalidArgument(f"no lane named {name!r} (the lanes: {', '.join(self.lanes)})") from None

    def select(self, names: Sequence[str] | None = None) -> list[Lane]:
        """These lanes, in the registry's order (all of them for None); an unknown name is refused."""
        if names is None:
            return list(self.lanes.values())
        wanted = {self.lane(name).name for name in names}
        return [lane for name, lane in self.lanes.items() if name in wanted]

    @property
    def uses_vectors(self) -> bool:
        """Whether a lane needs the chunks' vectors: the publisher embeds them only then."""
        return any(lane.uses_vectors for lane in self.lanes.values())

    def _part(self, in_store: bool) -> list[Lane]:
        return [lane for lane in self.lanes.values() if lane.in_store == in_store]

    # ----- searching -----

    def search(
        self, session: Session, query: Query, scope: Scope, depth: int, lanes: Sequence[str] | None = None
    ) -> dict[str, list[LaneHit]]:
        """Each lane's own ranking of its best `depth` chunks under the scope. Without `lanes`, a
        lane weighted 0 is not searched with the query (the title lane, kept for the bridge).

        When some lanes need the query's vector and others do not, the vector is computed on
        another thread, and a lane that can (`ahead`, the vector lane) starts its first fetch there
        as soon as the vector is there, while the others search here (the model, Chroma and
        tantivy all run without Python's lock); those lanes go first. Without `lanes` (a search
        that `follow` completes), while that thread is still busy and no other search is running
        here, this one guesses the bridge's search (`_guess`): with other searches running, both
        cores already have work, and a wrong guess would only take time from them."""
        chosen = self._chosen(lanes)
        query.ahead, query.guess, query.fused = {}, None, None  # what an earlier search with this query left
        if not scope.empty and self._mixed(chosen):
            for lane in chosen:
                ahead = getattr(lane, "ahead", None) if lane.uses_vectors else None
                if ahead is not None:
                    ahead(query, scope, depth)
            query.embed_ahead()  # for a vector lane that cannot start ahead (nothing when started)
        first = sorted(chosen, key=lambda lane: lane.uses_vectors)  # stable: otherwise the registry's order
        found: dict[str, list[LaneHit]] = {}
        with self._counting:
            self._running += 1
        try:
            for lane in first:
                if lane.uses_vectors and lanes is None and query.ahead and self._running == 1 and not all(
                        started.done() for started in query.ahead.values()):
                    self._guess(session, query, scope, found, depth)
                give_way()  # to a lighter caller's search (rag/turns.py)
                with telemetry.stage("lane", lane.name):
                    try:
                        found[lane.name] = lane.search(session, query, scope, depth)
                    except Exception:
                        telemetry.count(telemetry.ERRORS, lane.name)
                        raise
        finally:
            with self._counting:
                self._running -= 1
        return {lane.name: found[lane.name] for lane in chosen}  # the registry's order

    def _chosen(self, lanes: Sequence[str] | None) -> list[Lane]:
        """The lanes a search with `lanes` asks (without: those weighted above 0)."""
        if lanes is not None:
            return self.select(lanes)
        return [lane for lane in self.lanes.values() if self.weights[lane.name] > 0]

    @staticmethod
    def _mixed(chosen: Sequence[Lane]) -> bool:
        return any(lane.uses_vectors for lane in chosen) and not all(lane.uses_vectors for lane in chosen)

    def embeds_ahead(self, lanes: Sequence[str] | None = None) -> bool:
        """Whether a search of these lanes computes the query's vector on another thread while
        some lanes search: a caller may then start it sooner (`Query.embed_ahead`)."""
        return self._mixed(self._chosen(lanes))

    def _guess(self, session: Session, query: Query, scope: Scope, found: Mapping[str, Sequence[LaneHit]],
               depth: int) -> None:
        """The bridge's search for the chunk the lanes searched so far rank first (the heaviest
        one's first hit), made while this thread would only wait for the vector lane: `follow`
        keeps it when that chunk is the one fusion puts first (about 4 searches in 5 at 100,000
        chunks), and otherwise searches again. Once per search."""
        if self.bridge is None or query.guess is not None or self.source is None:
            return
        ranked = [(self.weights.get(name, 1.0), name) for name, hits in found.items() if hits]
        if not ranked:
            return
        chunk_id = found[max(ranked)[1]][0].chunk_id
        query.guess = (chunk_id, scope, depth, self._bridge_hits(session, chunk_id, scope, depth))

    def _bridge_hits(self, session: Session, chunk_id: int, scope: Scope, depth: int) -> list[LaneHit] | None:
        """The bridge lane searched with the words of this chunk (None: no such chunk now)."""
        assert self.bridge is not None and self.source is not None
        rows = self.source.rows_of(session, [chunk_id])
        if not rows:
            return None
        return self.lanes[self.bridge].search(session, Query(rows[0].text, max_terms=self.bridge_terms), scope, depth)

    def follow(self, session: Session, query: Query, scope: Scope, found: Mapping[str, Sequence[LaneHit]],
               depth: int) -> dict[str, list[LaneHit]]:
        """The lanes' rankings with the bridge's added: the `bridge` lane (the title lane) searched
        with the words of the result that ranks first, so that a document the first one names finds
        its way in by its title (a question about "the director of film X": X's passage names her,
        hers is titled with her name). Its ranking joins fusion as the lane `bridge`. Nothing is
        added when no bridge is set, or nothing was found. A guess `search` made for that chunk
        is used as it is."""
        found = {name: list(hits) for name, hits in found.items()}
        if self.bridge is None or not any(found.values()) or self.source is None:
            return found
        entries = rrf_entries(found, self.weights, self.rrf_k)
        first = self.reranker.rerank(session, query, rrf_order(entries), 1)[:1]
        if first:
            chunk_id = first[0].chunk_id
            guess = query.guess
            hits = guess[3] if guess is not None and guess[:3] == (chunk_id, scope, depth) else self._bridge_hits(
                session, chunk_id, scope, depth)
            if hits is not None:
                found[BRIDGE] = hits
        # `rank` adds the bridge to these sums rather than fusing the lanes again.
        query.fused = (found, tuple(name for name in found if name != BRIDGE), entries)
        return found

    def fuse(self, found: Mapping[str, Sequence[LaneHit]]) -> list[Fused]:
        """Reciprocal rank fusion with the weights by lane name."""
        return reciprocal_rank_fusion(found, self.weights, self.rrf_k)

    def _fuse_following(self, query: Query, found: Mapping[str, Sequence[LaneHit]]) -> list[Fused]:
        """`fuse(found)`; when `found` is what `follow` returned for this query, from the sums it
        made before adding the bridge (used once: they change in place)."""
        made, query.fused = query.fused, None
        if made is not None and made[0] is found:
            names, (_, fused_names, entries) = list(found), made
            rest = names[len(fused_names):]
            if tuple(names[:len(fused_names)]) == fused_names and all(name == BRIDGE for name in rest):
                return rrf_order(rrf_entries({name: found[name] for name in rest}, self.weights, self.rrf_k, entries))
        return self.fuse(found)

    def rank(self, session: Session, query: Query, found: Mapping[str, Sequence[LaneHit]],
             k: int | None) -> list[Fused]:
        """The best k (every candidate for None): the lanes' rankings fused, then reranked."""
        fused = self._fuse_following(query, found)
        k = len(fused) if k is None else k
        return self.reranker.rerank(session, query, fused, k)[:k]

    def doc_freq(self, session: Session, words: Sequence[str]) -> tuple[dict[str, int], int] | None:
        """The knowledge's vocabulary: how many chunks hold each word, and how many chunks there
        are, from the first lane that counts words (a keyword lane); None when no lane does."""
        for lane in self.lanes.values():
            counter = getattr(lane, "doc_freq", None)
            if counter is not None:
                return counter(session, words)
        return None

    # ----- the index side -----

    def attach(self, source: ChunkSource) -> None:
        """Where the store's chunks are read from, for the lanes that repair themselves."""
        self.source = source
        for lane in self.lanes.values():
            lane.attach(source)

    def _source(self) -> ChunkSource:
        if self.source is None:
            raise RuntimeError("the search index has no source of chunks attached (the publisher attaches it)")
        return self.source

    def add(self, session: Session | None, rows: Sequence[IndexRow], vectors: np.ndarray | None,
            *, in_store: bool) -> None:
        """Index a version's chunks in the lanes of one part: those in the store (`session` is the
        transaction that writes the chunk rows), or, once it committed, those outside it."""
        for lane in self._part(in_store):
            lane.add(session, rows, vectors)

    def delete(self, session: Session | None, chunks: Sequence[ChunkRef], *, in_store: bool) -> None:
        """Remove chunks from the lanes of one part (as for add). A failure outside the store is
        logged, not raised: a chunk left there is never shown (the lanes return published chunks
        only), and the next reconcile removes it."""
        if not chunks:
            return
        for lane in self._part(in_store):
            if in_store:
                lane.delete(session, chunks)
                continue
            try:
                lane.delete(None, chunks)
            except Exception:  # noqa: BLE001 - see the docstring
                log.exception("could not delete %d chunks from the %s lane; they stay invisible to search",
                              len(chunks), lane.name)

    def move(self, chunk_ids: Sequence[int], from_kb: str) -> None:
        """Chunks moved to another knowledge base in the store (committed): each lane that filters
        on it follows, in its own transaction. A lane that fails is logged and left to the next
        reconcile; the move itself stands."""
        if not chunk_ids:
            return
        source = self._source()
        with source.db.session() as session:
            rows = source.rows_of(session, chunk_ids)
        for lane in self.lanes.values():
            try:
                if lane.in_store:
                    with source.db.session() as session:
                        lane.move(session, rows, from_kb)
                else:
                    lane.move(None, rows, from_kb)
            except Exception:  # noqa: BLE001 - see the docstring
                log.exception("moving %d chunks between knowledge bases failed in the %s lane", len(rows), lane.name)

    def compact(self) -> None:
        """Let each lane tidy its index after writes (merges of small parts), each in its own
        transactions. A failure is logged, not raised: it costs search speed, never results."""
        for lane in self.lanes.values():
            try:
                lane.compact()
            except Exception:  # noqa: BLE001 - see the docstring
                log.exception("compacting the %s lane failed; it is tried again after the next publish", lane.name)

    def reconcile(self) -> dict[str, int]:
        """Each lane made to hold what the store says it should (a writer does this when it opens
        the store); returns the chunks each lane repaired. A lane whose engine is down is skipped
        and the others still run; then the first such error is raised."""
        source = self._source()
        repaired: dict[str, int] = {}
        down: Unavailable | None = None
        for lane in self.lanes.values():
            try:
                repaired[lane.name] = lane.reconcile(source)
            except Unavailable as exc:
                log.warning("the %s lane is unreachable; it is not reconciled", lane.name)
                down = down or exc
        if down is not None:
            raise down
        return repaired

    def count(self, kb_id: str | None = None) -> dict[str, int]:
        """Chunks in each lane's index (of one knowledge base, or of all)."""
        return {name: lane.count(kb_id) for name, lane in self.lanes.items()}

    def health(self) -> dict[str, bool]:
        """Whether each lane's engine answers; the log says why one does not."""
        status: dict[str, bool] = {}
        for name, lane in self.lanes.items():
            try:
                lane.health()
                status[name] = True
            except Exception:  # noqa: BLE001 - health reports, it never fails
                log.warning("health check of the %s lane failed", name, exc_info=True)
                status[name] = False
        return status

    def open(self) -> None:
        """Open every lane's engine now (Chroma, the model's name) rather than in the first search."""
        for lane in self.lanes.values():
            lane.open()

    def close(self) -> None:
        for lane in self.lanes.values():
            lane.close()  # the keyword index releases its writer's lock


# ----- building the lanes from the settings -----

# (settings, database, the model on first use, whether this process only reads the store)
LaneBuilder = Callable[[Settings, Database, Callable[[], Embedder], bool], Lane]


def _vector_lane(settings: Settings, db: Database, embedder: Callable[[], Embedder], read_only: bool) -> Lane:
    from rag.retrieve.vector import ChromaVectorLane, open_chroma_client

    return ChromaVectorLane(lambda: open_chroma_client(settings, read_only), embedder,
                            remote=bool(settings.chroma_url))


def _keyword_lane(settings: Settings, db: Database, embedder: Callable[[], Embedder], read_only: bool) -> Lane:
    """PostgreSQL's own full text on PostgreSQL; on SQLite, tantivy (default) or FTS5."""
    from rag.retrieve.keyword import PostgresKeywordLane, SqliteKeywordLane

    engine, max_df = settings.retrieve.keyword_engine, settings.retrieve.keyword_max_df
    if db.dialect == "sqlite" and engine == "tantivy":
        from rag.retrieve.tantivy_lane import TantivyKeywordLane

        return TantivyKeywordLane(Path(settings.keyword_path))
    if db.dialect == "sqlite":
        return SqliteKeywordLane(db, max_df)
    if db.dialect == "postgresql":
        return PostgresKeywordLane(db, max_df)
    raise ValueError(f"no keyword lane for the {db.dialect} database")


def title_lane_possible(settings: Settings, db: Database) -> bool:
    """The title lane is a tantivy index: the embedded SQLite store's default keyword engine only."""
    return db.dialect == "sqlite" and settings.retrieve.keyword_engine == "tantivy"


def _title_lane(settings: Settings, db: Database, embedder: Callable[[], Embedder], read_only: bool) -> Lane:
    """The chunks' heading paths (a document's title first) in a tantivy index of their own; the
    embedded default's engine only."""
    if not title_lane_possible(settings, db):
        raise InvalidArgument("the title lane needs the tantivy keyword engine (the embedded SQLite store)")
    from rag.retrieve.tantivy_lane import TantivyKeywordLane

    return TantivyKeywordLane(Path(settings.keyword_path).with_name("keyword-title"), name="title", field="heading")


LANE_BUILDERS: dict[str, LaneBuilder] = {"vector": _vector_lane, "text": _keyword_lane, "title": _title_lane}

def _score_fusion(settings: Settings, embedder: Callable[[], Embedder]) -> Reranker:
    from rag.retrieve.rerank import ScoreFusion

    return ScoreFusion(settings.retrieve.weights, settings.retrieve.score_norm)


RERANKERS: dict[str, Callable[[Settings, Callable[[], Embedder]], Reranker]] = {
    "none": lambda settings, embedder: NoReranker(),
    "scores": _score_fusion,
}


def build_reranker(settings: Settings, embedder: Callable[[], Embedder]) -> Reranker:
    """The step after fusion `settings.retrieve.rerank` names."""
    return RERANKERS[settings.retrieve.rerank](settings, embedder)


def build_search_index(settings: Settings, db: Database, embedder: Callable[[], Embedder],
                       read_only: bool = False) -> SearchIndex:
    """The lanes `settings.retrieve.lanes` names, in that order (which is also the order of a hit's
    `retrievers`), with their weights and the configured reranker. Nothing is opened yet: `embedder`
    is called when the model is first needed. `read_only`: this process never writes the lanes (it
    holds the embedded store's lock shared), so a lane may open its engine the cheaper way."""
    retrieve = settings.retrieve
    names = list(retrieve.lanes)
    if "lanes" not in retrieve.model_fields_set and not title_lane_possible(settings, db):
        names.remove("title")  # the default's title lane, where its engine is not (PostgreSQL, FTS5)
    lanes = [LANE_BUILDERS[name](settings, db, embedder, read_only) for name in names]
    bridge = None if retrieve.bridge == "none" else retrieve.bridge
    return SearchIndex(lanes, retrieve.weights, retrieve.rrf_k, build_reranker(settings, embedder),
                       bridge, retrieve.bridge_terms)
