"""Score fusion (normalised lane scores, the floor of a missing candidate, ties), the per-document
cap on the first results, and the multi-passage measure."""

from __future__ import annotations

import json

import pytest

from evals.answer_metrics import aggregate
from evals.metrics import all_found, evaluate, share_all_found
from rag.retrieve.fusion import Fused, diversify, first_by_scores, fused_scores, reciprocal_rank_fusion, score_fusion
from rag.retrieve.types import LaneHit, Query
from rag.service import KnowledgeService, Principal
from rag.settings import Settings


def fused(found: dict[str, list[LaneHit]], weights: dict[str, float] | None = None) -> list[Fused]:
    return reciprocal_rank_fusion(found, weights or {}, 60)


def test_min_max_fusion_is_the_convex_combination_of_each_lanes_normalised_scores():
    found = {
        "vector": [LaneHit(1, 0.80), LaneHit(2, 0.60), LaneHit(3, 0.40)],
        "text": [LaneHit(3, 12.0), LaneHit(2, 9.0), LaneHit(4, 4.0)],
    }
    totals = fused_scores(fused(found), {"vector": 0.8, "text": 1.2}, "minmax")
    # vector: (s - 0.4) / 0.4; text: (s - 4) / 8; a lane that did not return a chunk gives it 0.
    assert totals[1] == pytest.approx((0.8 * 1.0 + 1.2 * 0.0) / 2.0)
    assert totals[2] == pytest.approx((0.8 * 0.5 + 1.2 * 0.625) / 2.0)
    assert totals[3] == pytest.approx((0.8 * 0.0 + 1.2 * 1.0) / 2.0)
    assert totals[4] == pytest.approx(0.0)
    assert [f.chunk_id for f in score_fusion(fused(found), {"vector": 0.8, "text": 1.2})] == [3, 2, 1, 4]


def test_z_scores_put_a_missing_candidate_at_the_lanes_lowest_z_not_at_a_raw_zero():
    # BM25 scores far from 0: a raw 0 for chunk 9 (not found by text) would be 4 deviations below
    # the lane's weakest hit and bury it; at the lane's floor it stays level with that hit.
    found = {"vector": [LaneHit(9, 0.9), LaneHit(1, 0.5), LaneHit(2, 0.45)],
             "text": [LaneHit(1, 31.0), LaneHit(2, 30.0)]}
    totals = fused_scores(fused(found), {}, "zscore")
    # text z: chunk 1 +1, chunk 2 -1, chunk 9 at the floor -1; vector z of 0.9, 0.5, 0.45
    mean = (0.9 + 0.5 + 0.45) / 3
    sd = (((0.9 - mean) ** 2 + (0.5 - mean) ** 2 + (0.45 - mean) ** 2) / 3) ** 0.5
    assert totals[9] == pytest.approx(((0.9 - mean) / sd - 1.0) / 2)
    assert totals[1] == pytest.approx(((0.5 - mean) / sd + 1.0) / 2)
    assert [f.chunk_id for f in score_fusion(fused(found), {}, "zscore")] == [1, 9, 2]  # 9 above 2, not buried


def test_divided_by_the_best_keeps_zero_as_no_match():
    found = {"vector": [LaneHit(1, 0.5), LaneHit(2, 0.4)], "text": [LaneHit(2, 10.0), LaneHit(1, 5.0)]}
    totals = fused_scores(fused(found), {"vector": 0.0, "text": 1.0}, "max")
    assert totals == {1: pytest.approx(0.5), 2: pytest.approx(1.0)}  # a weight of 0 counts for nothing


def test_a_keyword_lane_with_one_hit_keeps_its_weight():
    """A word only one chunk holds: the keyword lane returns that chunk alone (no spread to
    normalise). It must still count fully, not drop out and leave the vector lane to decide."""
    found = {"vector": [LaneHit(i, 0.9 - 0.05 * i) for i in range(1, 7)], "text": [LaneHit(6, 3.2)]}
    for method in ("minmax", "zscore", "max"):
        ranked = score_fusion(fused(found, {"vector": 0.8, "text": 1.2}), {"vector": 0.8, "text": 1.2}, method)
        assert ranked[0].chunk_id == 6, method


def test_ties_keep_the_best_single_lane_rank_then_the_chunk_id_and_scores_fall_by_place():
    found = {"vector": [LaneHit(5, 1.0), LaneHit(7, 0.0)], "text": [LaneHit(7, 2.0), LaneHit(5, 1.0)]}
    ranked = score_fusion(fused(found), {}, "minmax")  # both total 0.5; both are first in one lane
    assert [f.chunk_id for f in ranked] == [5, 7]
    three = {"vector": [LaneHit(8, 1.0), LaneHit(3, 1.0)]}  # a lane that cannot tell them apart
    assert [f.chunk_id for f in score_fusion(fused(three), {}, "minmax")] == [8, 3]  # rank 1 before rank 2
    rrf = fused({"vector": [LaneHit(1, 0.2), LaneHit(2, 0.9)], "text": [LaneHit(1, 1.0), LaneHit(2, 5.0)]})
    ranked = score_fusion(rrf, {})
    assert [f.chunk_id for f in ranked] == [2, 1]
    assert [f.score for f in ranked] == sorted((f.score for f in rrf), reverse=True)  # fusion's scale, by place
    with pytest.raises(ValueError):
        score_fusion(rrf, {}, "softmax")


def test_diversify_caps_each_document_in_the_window_unless_fewer_documents_match():
    order, settled = diversify(list("aaaabcab"), per_key=2, window=4)
    assert [list("aaaabcab")[i] for i in order] == list("aabc" "aaab")
    assert order[:4] == [0, 1, 4, 5] and settled
    # Only two documents: after two of each, the held-back excerpts follow in their order.
    order, settled = diversify(list("aaaab"), per_key=2, window=10)
    assert order == [0, 1, 4, 2, 3] and not settled
    assert diversify(list("aaa"), per_key=0, window=10) == ([0, 1, 2], True)


def test_all_relevant_in_the_top_k_is_counted_per_question():
    qrels = {"q1": {"a": 1, "b": 1}, "q2": {"c": 1, "d": 1}, "q3": {"e": 1}, "q4": {"z": 0}}
    run = {"q1": ["a", "x", "b"], "q2": ["c", "x", "y"], "q3": ["e"]}
    assert all_found(run["q1"], qrels["q1"], 3) and not all_found(run["q1"], qrels["q1"], 2)
    assert not all_found(["z"], qrels["q4"], 10)  # nothing relevant to find: not "all found"
    assert share_all_found(run, qrels, 10) == pytest.approx(2 / 3)  # q4 is unjudged
    scores = evaluate(run, qrels)
    assert scores["recall@10"] == pytest.approx((1 + 0.5 + 1) / 3) and scores["all@10"] == pytest.approx(2 / 3)
    # rag eval run: the share beside the mean recall@10 (None: an unanswerable question).
    result = aggregate([], [1.0, 0.5, 0.5, None, 1.0], [])
    assert result["retrieval_recall@10"] == 0.75 and result["retrieval_all@10"] == 0.5


SECTION = ("The quokka exporter writes every ledger row to the archive, checks the totals twice, and "
           "signs the file with the team's release key before anyone downloads it. Section {n} changes how "
           "the exporter names its files and how long it keeps them on the shared drive for auditors.\n\n")


@pytest.fixture(params=[2, 0], ids=["cap", "no-cap"])
def search_service(request, tmp_path):
    settings = Settings(home=tmp_path / "home", retrieve={"per_document": request.param})
    with KnowledgeService(settings) as service:
        service.ensure_workspace("default")
        admin = Principal.local_admin("default")
        root = service.knowledge_base(admin, "default").root_id
        notes = "# Release notes\n\n" + "".join(f"## Version 1.{n}\n\n" + SECTION.format(n=n) for n in range(8))
        for name, body in [("Release notes", notes),
                           ("Exporting to the archive", "# Exporting to the archive\n\n" + SECTION.format(n=99)),
                           ("Cafeteria", "# Cafeteria\n\nThe cafeteria serves soup on Tuesdays and quokka-shaped "
                                         "pretzels on Fridays.\n")]:
            doc = service.create_document(admin, root, name, body)
            service.publish_version(admin, doc.node_id, 1)
        yield service, admin, request.param


def test_search_shows_at_most_two_excerpts_of_a_document_first_unless_fewer_documents_match(search_service):
    service, admin, cap = search_service
    hits = service.search(admin, "how does the quokka exporter name its files", 10).hits
    titles = [h.title for h in hits]
    assert titles.count("Release notes") == 8 and len(hits) == 10  # every excerpt still comes back
    if cap:
        # Three documents match: two excerpts of the release notes, then the two other documents,
        # then (fewer documents than places) the release notes' other excerpts, in their order.
        assert titles[:4].count("Release notes") == 2 and set(titles[:4]) == {"Release notes",
                                                                              "Exporting to the archive", "Cafeteria"}
        assert titles[4:] == ["Release notes"] * 6
    else:
        assert titles[:4].count("Release notes") >= 3  # what the cap is for: one document fills the top
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)


def test_tune_fusion_compares_methods_reproduces_the_retriever_and_replays_saved_rankings(tmp_path, capsys):
    from evals.tune_fusion import main
    from tests.support.beir import write_beir

    dataset, saved = write_beir(tmp_path / "beir"), tmp_path / "rankings.json"
    args = ["--dataset", str(dataset), "--split", "test", "--methods", "rrf,minmax", "--weights", "0.8,1.0", "--json"]
    assert main([*args, "--home", str(tmp_path / "home"), "--save", str(saved)]) == 0
    searched = json.loads(capsys.readouterr().out)
    assert searched["refusion_matches_retriever"] is True  # the re-fusion is the retriever's own (RRF default)
    assert [(r["method"], r["weight"]) for r in searched["sweep"]] == [
        ("rrf", 0.8), ("rrf", 1.0), ("minmax", 0.8), ("minmax", 1.0)]
    assert all(0.0 <= r["all@10_candidates"] <= 1.0 for r in searched["sweep"])
    assert searched["sweep"][0]["ndcg@10"] > 0.5  # four easy questions over six documents
    assert main([*args, "--load", str(saved)]) == 0
    replayed = json.loads(capsys.readouterr().out)
    assert [r["ndcg@10"] for r in replayed["sweep"]] == [r["ndcg@10"] for r in searched["sweep"]]


def test_the_title_lane_ranks_chunks_by_their_heading_path_alone(tmp_path):
    settings = Settings(home=tmp_path / "home", retrieve={"weights": {"title": 0.4}, "bridge": "none"})
    with KnowledgeService(settings) as service:
        service.ensure_workspace("default")
        admin = Principal.local_admin("default")
        root = service.knowledge_base(admin, "default").root_id
        for name, body in [("Wombat care", "# Wombat care\n\nFeed them grasses and roots at dusk.\n"),
                           ("Garden", "# Garden\n\nA wombat dug under the fence again; we call the ranger.\n")]:
            doc = service.create_document(admin, root, name, body)
            service.publish_version(admin, doc.node_id, 1)
        kb_id = service.knowledge_base(admin, "default").id
        assert service.index.count(kb_id) == {"vector": 2, "text": 2, "title": 2}
        assert service.index.health()["title"] is True
        retriever, scope = service.retriever, service.scope(admin, "default")
        with service.db.session() as session:
            found = retriever.lane_hits(session, "wombat", scope, 10, ("title",))
        titles = {h.chunk_id: h.title for h in service.search(admin, "wombat", 5).hits}
        assert [titles[h.chunk_id] for h in found["title"]] == ["Wombat care"]  # the body's "wombat" is not a title
        hit = service.search(admin, "wombat care", 1).hits[0]
        assert hit.title == "Wombat care" and hit.retrievers == ["vector", "text", "title"]
    with pytest.raises(Exception, match="tantivy"):
        KnowledgeService(Settings(home=tmp_path / "fts5", retrieve={"lanes": ["vector", "title"],
                                                                   "keyword_engine": "fts5"})).close()


BRIDGE_CORPUS = [
    ("Quokka Dawn", "# Quokka Dawn\n\nQuokka Dawn is a 1998 drama film directed by Marguerite Ollivander, shot on "
                    "Rottnest Island over one summer.\n"),
    ("Marguerite Ollivander", "# Marguerite Ollivander\n\nMarguerite Ollivander is a painter who grew up in Hobart, "
                              "Tasmania, and later taught there.\n"),
    *[(f"Festival {n}", f"# Festival {n}\n\nThe festival's director chose a film from every state this year; the "
                        f"home crowd voted for film number {n}.\n") for n in range(6)],
    *[(f"Studio {n}", f"# Studio {n}\n\nStudio {n} hired a new director of photography for its drama film; her home "
                      f"state paid for half of it.\n") for n in range(4)],
]
BRIDGE_QUESTION = "What is the home state of the director of Quokka Dawn?"


def _publish_bridge_corpus(service: KnowledgeService) -> Principal:
    """BRIDGE_CORPUS published in the default knowledge base; returns its admin."""
    service.ensure_workspace("default")
    admin = Principal.local_admin("default")
    root = service.knowledge_base(admin, "default").root_id
    for title, body in BRIDGE_CORPUS:
        service.publish_version(admin, service.create_document(admin, root, title, body).node_id, 1)
    return admin


def _bridge_search(tmp_path, name: str, retrieve: dict) -> list:
    with KnowledgeService(Settings(home=tmp_path / name, retrieve=retrieve)) as service:
        return service.search(_publish_bridge_corpus(service), BRIDGE_QUESTION, 3).hits


def test_the_bridge_finds_the_document_the_first_result_names_by_its_title(tmp_path):
    # The director's page shares no word with the question: only the film's page names her.
    hits = _bridge_search(tmp_path, "bridge", {})
    titles = [h.title for h in hits]
    assert titles[0] == "Quokka Dawn" and "Marguerite Ollivander" in titles
    found = hits[titles.index("Marguerite Ollivander")]
    # Found by the bridge (its rank is kept); `retrievers` names the lanes that found it by the question,
    # and the title lane is not asked the question.
    assert "bridge" in found.lane_ranks and found.retrievers == ["vector"]
    without = [h.title for h in _bridge_search(tmp_path, "off", {"bridge": "none"})]
    assert without[0] == "Quokka Dawn" and "Marguerite Ollivander" not in without


def test_the_default_lanes_leave_the_title_lane_out_where_the_keyword_engine_is_not_tantivy(tmp_path):
    with KnowledgeService(Settings(home=tmp_path / "fts5", retrieve={"keyword_engine": "fts5"})) as service:
        assert list(service.index.lanes) == ["vector", "text"] and service.index.bridge is None
    with KnowledgeService(Settings(home=tmp_path / "tantivy")) as service:
        assert list(service.index.lanes) == ["vector", "text", "title"] and service.index.bridge == "title"


def test_the_bridge_guessed_while_the_vector_lane_waits_is_the_one_follow_would_search(tmp_path):
    """While the vector lane's first fetch runs on another thread, a search alone in its process
    makes the bridge's search for the keyword lane's first hit; `follow` keeps it only when fusion
    puts that chunk first, and the rankings are those of a search that guessed nothing. With
    another search running, it guesses nothing."""
    import threading

    from rag.retrieve.index import BRIDGE

    with KnowledgeService(Settings(home=tmp_path / "guess")) as service:
        admin = _publish_bridge_corpus(service)
        retriever, index, scope = service.retriever, service.index, service.scope(admin, "default")
        vector = retriever.embedder.embed_query(BRIDGE_QUESTION)
        vector_lane = index.lanes["vector"]
        searching = vector_lane.search
        reached = threading.Event()  # the model "finishes" only once the search reaches the vector lane

        def vector_search(*args):
            reached.set()
            return searching(*args)

        def slow_embed(text: str):
            assert reached.wait(30)
            return vector

        vector_lane.search = vector_search
        try:
            with service.db.session() as session:
                query = Query(BRIDGE_QUESTION, slow_embed)
                found = index.search(session, query, scope, 20)
                assert query.guess is not None and query.guess[0] == found["text"][0].chunk_id
                guessed = index.follow(session, query, scope, found, 20)
                plain = index.follow(session, Query(BRIDGE_QUESTION, vector=vector), scope, found, 20)
                assert guessed == plain and guessed[BRIDGE]
                # A guess for another chunk is not used.
                other = found["text"][-1].chunk_id
                query.guess = (other, scope, 20, [LaneHit(other, 99.0)])
                assert index.follow(session, query, scope, found, 20) == plain
                # The vector lane's ranking, fetched on the other thread, is the one it makes alone.
                alone = index.search(session, Query(BRIDGE_QUESTION, vector=vector), scope, 20, ("vector",))
                assert found["vector"] == alone["vector"]
                # Another search running: no guess, the same rankings.
                reached.clear()
                index._running += 1
                try:
                    busy = Query(BRIDGE_QUESTION, slow_embed)
                    assert index.search(session, busy, scope, 20) == found and busy.guess is None
                    assert index.follow(session, busy, scope, found, 20) == plain
                finally:
                    index._running -= 1
        finally:
            del vector_lane.search


def test_the_first_by_scores_is_the_first_of_the_ordering():
    lanes = {"vector": [LaneHit(i, 1.0 - i / 50) for i in range(30)],
             "text": [LaneHit(60 - i, 9.0 - (i % 7)) for i in range(40)]}
    for method in ("minmax", "zscore", "max"):
        fused = reciprocal_rank_fusion(lanes, {"vector": 0.8, "text": 1.2})
        ordered = score_fusion(fused, {"vector": 0.8, "text": 1.2}, method)
        first = first_by_scores(fused, {"vector": 0.8, "text": 1.2}, method)
        assert (first.chunk_id, first.score, first.lanes) == (ordered[0].chunk_id, ordered[0].score, ordered[0].lanes)


def test_the_ranking_that_finishes_follows_sums_is_the_ranking_of_a_fresh_fusion(tmp_path):
    """`rank` adds the bridge to the sums `follow` made for the other lanes: what it returns is
    what fusing all the rankings at once returns, scores, ranks and order; the sums serve once."""
    from rag.retrieve.fusion import reciprocal_rank_fusion, rrf_entries

    with KnowledgeService(Settings(home=tmp_path / "sums")) as service:
        admin = _publish_bridge_corpus(service)
        index, scope = service.index, service.scope(admin, "default")
        with service.db.session() as session:
            query = Query(BRIDGE_QUESTION, service.retriever.embedder.embed_query)
            found = index.follow(session, query, scope, index.search(session, query, scope, 20), 20)
            assert query.fused is not None and query.fused[0] is found
            finished = index.rank(session, query, found, None)
            assert query.fused is None
            fresh = index.reranker.rerank(session, query, reciprocal_rank_fusion(found, index.weights, index.rrf_k),
                                          len(finished))
            assert finished == fresh and len(finished) > 10
            assert index.rank(session, query, found, None) == fresh  # again: fused afresh, the same
    # Lanes added in two steps sum to what one step gives.
    lanes = {"a": [LaneHit(1, 0.9), LaneHit(2, 0.8)], "b": [LaneHit(2, 3.0), LaneHit(3, 2.0)], "c": [LaneHit(3, 1.0)]}
    weights = {"a": 0.8, "b": 1.2, "c": 0.5}
    split = rrf_entries({"c": lanes["c"]}, weights, 60, rrf_entries({k: lanes[k] for k in "ab"}, weights))
    assert split == rrf_entries(lanes, weights)
