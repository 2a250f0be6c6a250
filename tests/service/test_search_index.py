"""The search index: lanes in a registry by name, weights keyed by lane, the step after fusion.

Fake lanes show the contract without engines; the last tests check the real lanes of a service.
"""

from __future__ import annotations

import subprocess
import sys
from dataclasses import dataclass, field

import numpy as np
import pytest

from rag.errors import InvalidArgument
from rag.retrieve.fusion import Fused
from rag.retrieve.index import LANE_BUILDERS, RERANKERS, SearchIndex
from rag.retrieve.lanes import ChunkRef, ChunkSource, Lane
from rag.retrieve.types import IndexRow, LaneHit, Query, Scope
from rag.settings import RetrieveSettings, Settings

SCOPE = Scope("default", ("kb",))


@dataclass
class FakeLane:
    name: str
    ranking: list[int]
    in_store: bool = False
    uses_vectors: bool = False
    engine: str = "fake"
    added: list[tuple[list[int], bool]] = field(default_factory=list)
    deleted: list[int] = field(default_factory=list)
    queries: list[Query] = field(default_factory=list)

    def search(self, session, query: Query, scope: Scope, depth: int) -> list[LaneHit]:
        self.queries.append(query)
        if self.uses_vectors:
            query.vector  # noqa: B018 - the lane reads the query's vector
        return [LaneHit(chunk_id, 1.0 / rank) for rank, chunk_id in enumerate(self.ranking[:depth], start=1)]

    def add(self, session, rows: list[IndexRow], vectors: np.ndarray | None) -> None:
        self.added.append(([row.chunk_id for row in rows], vectors is not None))

    def delete(self, session, chunks: list[ChunkRef]) -> None:
        self.deleted += [chunk_id for chunk_id, _ in chunks]

    def move(self, session, rows, from_kb: str) -> None: ...
    def reconcile(self, source: ChunkSource) -> int: return 0
    def count(self, kb_id: str | None = None) -> int: return len(self.ranking)
    def health(self) -> None: ...
    def attach(self, source: ChunkSource) -> None: ...
    def open(self) -> None: ...
    def close(self) -> None: ...


class Reverse:
    name = "reverse"

    def rerank(self, session, query: Query, fused: list[Fused], k: int) -> list[Fused]:
        return list(reversed(fused))


def test_a_fake_lane_meets_the_protocol():
    lane: Lane = FakeLane("x", [])  # the assignment is what a type checker checks
    assert lane.name == "x"


def test_weights_are_keyed_by_lane_name_and_unknown_lanes_are_refused():
    index = SearchIndex([FakeLane("vector", [1, 2]), FakeLane("text", [2, 1])], {"vector": 1.4, "text": 0.6, "gone": 3})
    assert index.weights == {"vector": 1.4, "text": 0.6}  # a weight of a lane not registered is ignored
    found = index.search(None, Query("q"), SCOPE, 10)
    assert list(found) == ["vector", "text"]
    assert [f.chunk_id for f in index.rank(None, Query("q"), found, 2)] == [1, 2]
    assert list(index.search(None, Query("q"), SCOPE, 10, lanes=("text",))) == ["text"]
    with pytest.raises(InvalidArgument, match="no lane named 'title'"):
        index.search(None, Query("q"), SCOPE, 10, lanes=("title",))


def test_a_third_lane_votes_in_fusion_with_the_default_weight():
    lanes = [FakeLane("vector", [1, 2, 3]), FakeLane("text", [2, 1, 3]), FakeLane("heading", [3, 2, 1])]
    index = SearchIndex(lanes, {"vector": 1.0, "text": 1.0})
    fused = index.rank(None, Query("q"), index.search(None, Query("q"), SCOPE, 10), 3)
    assert index.weights["heading"] == 1.0
    assert fused[0].chunk_id == 2 and fused[0].lanes == {"vector": 2, "text": 1, "heading": 2}


def test_the_reranker_runs_after_fusion_and_before_the_cut():
    index = SearchIndex([FakeLane("vector", [1, 2, 3])], {"vector": 1.0}, reranker=Reverse())
    assert [f.chunk_id for f in index.rank(None, Query("q"), index.search(None, Query("q"), SCOPE, 10), 2)] == [3, 2]


def test_the_query_is_embedded_once_whatever_the_lanes():
    calls: list[str] = []

    def embed(text: str) -> np.ndarray:
        calls.append(text)
        return np.ones(3, dtype=np.float32)

    index = SearchIndex([FakeLane("a", [1], uses_vectors=True), FakeLane("b", [1], uses_vectors=True),
                         FakeLane("c", [1])], {})
    query = Query("question", embed)
    index.search(None, query, SCOPE, 10)
    assert calls == ["question"] and query.embedded
    keyword_only = Query("other", embed)
    index.search(None, keyword_only, SCOPE, 10, lanes=("c",))
    assert calls == ["question"] and not keyword_only.embedded  # no lane needed it: no model call


def test_writes_go_to_the_lanes_of_one_part_and_vectors_only_when_used():
    store, outside = FakeLane("text", [], in_store=True), FakeLane("vector", [], uses_vectors=True)
    index = SearchIndex([outside, store], {})
    assert index.uses_vectors
    rows = [IndexRow(7, "t", "kb", "n")]
    index.add(None, rows, np.zeros((1, 3)), in_store=True)
    assert store.added == [([7], True)] and outside.added == []
    index.add(None, rows, np.zeros((1, 3)), in_store=False)
    assert outside.added == [([7], True)]
    index.delete(None, [(7, "kb")], in_store=False)
    assert outside.deleted == [7] and store.deleted == []


def test_a_lane_outside_the_store_that_fails_to_delete_is_logged_not_raised(caplog):
    class Broken(FakeLane):
        def delete(self, session, chunks) -> None:
            raise RuntimeError("down")

    SearchIndex([Broken("vector", [])], {}).delete(None, [(1, "kb")], in_store=False)
    assert "could not delete 1 chunks from the vector lane" in caplog.text


def test_lane_weights_setting_keeps_the_others_and_reads_the_old_variable(monkeypatch):
    others = {"title": 0.0, "bridge": 0.6}
    assert RetrieveSettings().weights == {"vector": 0.8, "text": 1.2, **others}
    monkeypatch.setenv("RAG_RETRIEVE__WEIGHTS__TEXT", "1.0")
    assert Settings().retrieve.weights == {"vector": 0.8, "text": 1.0, **others}
    monkeypatch.delenv("RAG_RETRIEVE__WEIGHTS__TEXT")
    monkeypatch.setenv("RAG_RETRIEVE__VECTOR_WEIGHT", "1.0")  # deprecated: text gets 2 - it, as before
    assert Settings().retrieve.weights == {"vector": 1.0, "text": 1.0, **others}
    monkeypatch.setenv("RAG_RETRIEVE__WEIGHTS", '{"text": 0.5}')  # a lane named in the mapping wins
    assert Settings().retrieve.weights == {"vector": 1.0, "text": 0.5, **others}
    with pytest.raises(ValueError):
        RetrieveSettings(weights={"text": -1})


def test_every_configurable_lane_and_reranker_has_a_builder():
    lanes = RetrieveSettings.model_fields["lanes"].annotation.__args__[0].__args__  # list[Literal[...]]
    assert set(lanes) == set(LANE_BUILDERS)
    assert set(RetrieveSettings.model_fields["rerank"].annotation.__args__) == set(RERANKERS)


def test_text_analysis_has_no_cycle_through_the_keyword_lanes():
    code = ("import sys, rag.retrieve.tantivy_lane, rag.retrieve.text; "
            "assert 'rag.retrieve.keyword' not in sys.modules, 'tantivy imports the FTS5 lane'; "
            "import rag.synthesize.relevance, rag.synthesize.conversation; "
            "assert 'rag.retrieve.keyword' not in sys.modules, 'synthesis imports a lane'")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr


def test_the_services_lanes_count_the_chunks_answer_health_and_fill_the_hits(svc, admin):
    kb = svc.knowledge_base(admin, "default")
    doc = svc.create_document(admin, kb.root_id, "Expense policy", "# Expense policy\n\nMeals are reimbursed up to "
                              "the platypus allowance of 40 dollars.\n")
    svc.publish_version(admin, doc.node_id, 1)
    kb_id = svc.knowledge_base(admin, "default").id
    counts = svc.index.count(kb_id)
    lanes = ["vector", "text", "title"] if svc.db.dialect == "sqlite" else ["vector", "text"]  # title: tantivy only
    assert list(counts) == lanes and len(set(counts.values())) == 1 and counts["vector"] > 0
    assert svc.index.health() == {lane: True for lane in lanes}
    hit = svc.search(admin, "platypus allowance", 1).hits[0]
    # The title lane is not asked the question; on SQLite the bridge (the title lane asked with the
    # first result's words) finds the page by its title too, which its ranks say.
    assert hit.retrievers == ["vector", "text"]
    assert set(hit.lane_ranks) == ({"vector", "text", "bridge"} if "title" in lanes else {"vector", "text"})
    assert hit.vector_similarity == hit.lane_scores["vector"] > 0 and hit.lane_scores["text"] > 0


def test_score_fusion_orders_by_how_far_each_lane_set_a_candidate_apart():
    from rag.retrieve.rerank import ScoreFusion

    # Ranks alone favour 2 (first in text, second in vector); the scores say 1 stands out in the
    # vector lane while the text lane can barely tell its candidates apart.
    found = {
        "vector": [LaneHit(1, 0.90), LaneHit(2, 0.40), LaneHit(3, 0.39), LaneHit(4, 0.38)],
        "text": [LaneHit(2, 10.2), LaneHit(3, 10.1), LaneHit(1, 10.0), LaneHit(5, 9.9)],
    }
    rrf = SearchIndex([FakeLane("vector", []), FakeLane("text", [])], {"vector": 1.0, "text": 1.0})
    assert rrf.fuse(found)[0].chunk_id == 2
    scores = SearchIndex([FakeLane("vector", []), FakeLane("text", [])], {}, reranker=ScoreFusion())
    ranked = scores.rank(None, Query("q"), found, 5)
    assert [f.chunk_id for f in ranked][:2] == [1, 2]
    assert ranked[-1].chunk_id == 5  # found by one lane only, and last there: the other lane's lowest counts
    # The order is new; the scores are fusion's, handed out by place (first still at most 2/61).
    assert [f.score for f in ranked] == sorted((f.score for f in rrf.fuse(found)), reverse=True)


def test_a_query_embedded_ahead_is_embedded_once_and_the_same() -> None:
    """The vector computed on another thread while the keyword lane searches is the one the
    vector lane (and the answer stage) reads, and the model is called once."""
    import numpy as np

    from rag.retrieve.types import Query

    calls: list[str] = []

    def embed(text: str) -> np.ndarray:
        calls.append(text)
        return np.full(4, float(len(text)), dtype=np.float32)

    ahead = Query("annual leave", embed)
    ahead.embed_ahead()
    ahead.embed_ahead()  # a second call starts nothing new
    assert np.array_equal(ahead.vector, np.full(4, 12.0, dtype=np.float32))
    assert np.array_equal(ahead.vector, Query("annual leave", embed).vector)
    assert calls == ["annual leave", "annual leave"]  # once ahead, once for the plain query


def test_a_fetch_chained_to_the_embedding_runs_on_its_thread_and_passes_failures_on() -> None:
    """The vector lane's first fetch runs on the thread that computed the vector, right after it
    (no thread woken to wait for it); once the vector is there, on another thread, never the
    caller's; a failed embedding or fetch is the fetch's failure."""
    import threading

    from rag.retrieve.types import Query

    release = threading.Event()

    def embed(text: str) -> np.ndarray:
        release.wait(10)
        if text == "broken":
            raise RuntimeError("model down")
        return np.ones(4, dtype=np.float32)

    def fetch(vector: np.ndarray) -> tuple[float, int]:
        return float(vector.sum()), threading.get_ident()

    query = Query("annual leave", embed)
    query.embed_ahead()
    chained = query.embed_ahead(fetch)
    release.set()
    total, thread = chained.result(10)
    assert total == 4.0 and thread != threading.get_ident()
    assert query.embed_ahead(fetch).result(10)[1] != threading.get_ident()  # vector known: still not here
    assert Query("annual leave", embed).embed_ahead(lambda v: 1 / 0).exception(10).__class__ is ZeroDivisionError
    with pytest.raises(RuntimeError, match="model down"):
        Query("broken", embed).embed_ahead(fetch).result(10)


def test_an_unknown_lane_is_refused_after_the_callers_access_is_checked(svc, admin):
    from rag.errors import PermissionDenied
    from rag.service import Principal

    nobody = Principal(actor="t", workspace_id="default", access="none")
    with pytest.raises(PermissionDenied):
        svc.search(nobody, "where do staff park", 5, lanes=["nope"])
    with pytest.raises(InvalidArgument, match="no lane named"):
        svc.search(admin, "where do staff park", 5, lanes=["nope"])


def test_searches_embed_with_the_search_encoder_and_answers_with_the_answers_one(svc, admin, monkeypatch):
    """Search results only rank chunks: their queries go through the cheaper encoder
    (`embed_search_query`); an answer picks sentences by their similarity to its question, so
    its question goes through the other (`embed_query`), once."""
    calls: list[tuple[str, str]] = []
    embedder = svc.retriever.embedder
    for method in ("embed_query", "embed_search_query"):
        real = getattr(embedder, method)
        monkeypatch.setattr(embedder, method, lambda text, real=real, method=method: calls.append((method, text))
                            or real(text))
    root = svc.knowledge_base(admin, "default").root_id
    doc = svc.create_document(admin, root, "Parking", "# Parking\n\nStaff park in the north garage on weekdays.\n")
    svc.publish_version(admin, doc.node_id, 1)
    question = "Where do staff park their cars on weekdays?"
    for search in (lambda: svc.search(admin, question, 5), lambda: svc.search_documents(admin, question, 5),
                   lambda: svc.search_knowledge_base(admin, question)):
        calls.clear()
        assert search()
        assert calls == [("embed_search_query", question)]
    calls.clear()
    svc.ask(admin, question)
    assert [method for method, _ in calls if method == "embed_search_query"] == []
    assert calls.count(("embed_query", question)) == 1
