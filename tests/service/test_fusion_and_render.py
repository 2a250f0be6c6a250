from __future__ import annotations

import json

import pytest

from rag.render import MAX_RESPONSE_CHARS, NO_RESULTS, search_response
from rag.retrieve.fusion import reciprocal_rank_fusion
from rag.retrieve.keyword import match_expression
from rag.retrieve.text import query_terms
from rag.retrieve.types import TRUNCATION_MARK, Hit, LaneHit
from rag.service.query.search import clamp_limit


def lane(*ids: int) -> list[LaneHit]:
    return [LaneHit(i, 1.0) for i in ids]


def test_first_in_both_lanes_scores_two_over_61():
    fused = reciprocal_rank_fusion({"vector": lane(7, 8), "text": lane(7, 9)}, {"vector": 1, "text": 1}, k=60)
    assert fused[0].chunk_id == 7
    assert fused[0].score == pytest.approx(2 / 61) and round(fused[0].score, 4) == 0.0328
    assert fused[0].lanes == {"vector": 1, "text": 1}
    assert {f.chunk_id for f in fused} == {7, 8, 9}
    assert fused[1].score == pytest.approx(1 / 62)


def test_weights_shift_the_order_but_keep_first_place_at_two_over_61():
    lanes = {"vector": lane(1, 2), "text": lane(2, 1)}
    assert reciprocal_rank_fusion(lanes, {"vector": 1.4, "text": 0.6})[0].chunk_id == 1
    assert reciprocal_rank_fusion(lanes, {"vector": 0.6, "text": 1.4})[0].chunk_id == 2
    both = reciprocal_rank_fusion({"vector": lane(3), "text": lane(3)}, {"vector": 1.4, "text": 0.6})
    assert both[0].score == pytest.approx(2 / 61)


def test_query_terms_drop_stop_words_and_are_quoted():
    assert query_terms("How many days of Annual leave do I get?") == ["many", "days", "annual", "leave", "get"]
    assert match_expression(['say "hi"', "x"]) == '"say ""hi""" OR "x"'
    assert query_terms("the of and") == []


def _hit(i: int, text: str, source: str | None = "fs:a.md") -> Hit:
    return Hit(
        chunk_id=i, score=0.03, retrievers=["vector", "text"], node_id=f"n{i}", kb_id="kb", source_id=f"fs:w:k:{i}",
        title=f"Doc {i}", source=source, version=1, heading_path=["Doc"], text=text, char_start=0, char_end=len(text),
    )


def test_excerpts_stop_at_2000_characters_then_say_so():
    payload, text = search_response("q", [_hit(1, "x" * 2500)])
    excerpt = payload["results"][0]["excerpt"]
    assert excerpt == "x" * 2000 + TRUNCATION_MARK
    assert text.startswith("### Doc 1 (score: 0.0300, via vector+text)\ndocument_id: fs:w:k:1\n\n")


def test_responses_stay_under_50000_characters():
    hits = [_hit(i, "y" * 3000) for i in range(30)]
    payload, text = search_response("q", hits)
    assert payload["truncated"] is True
    assert len(text) < MAX_RESPONSE_CHARS
    dropped = 30 - len(payload["results"])
    assert dropped > 0 and text.endswith(f"[…{dropped} more results truncated]")


def test_structured_results_stay_under_50000_characters_too():
    """Quotes, new lines and non-ASCII letters take more room as JSON than in the text block."""
    hits = [_hit(i, ('"é"\n' * 600)[:2000]) for i in range(25)]
    payload, text = search_response("q", hits)
    as_json = json.dumps({"results": payload["results"], "truncated": payload["truncated"]}, ensure_ascii=True)
    assert payload["truncated"] is True and len(text) < MAX_RESPONSE_CHARS
    assert len(as_json) < MAX_RESPONSE_CHARS, len(as_json)


def test_empty_results_and_absent_source_label():
    payload, text = search_response("q", [])
    assert payload == {"query": "q", "results": [], "truncated": False} and text == NO_RESULTS
    payload, _ = search_response("q", [_hit(1, "t", source=None)])
    assert "source" not in payload["results"][0]
    assert payload["results"][0]["document_id"] == payload["results"][0]["source_id"]


@pytest.mark.parametrize(("value", "expected"), [(0, 1), (-3, 1), (26, 25), (7, 7), ("12", 12), ("many", 10), (None, 10), (3.7, 3)])
def test_limit_is_clamped_and_non_numeric_falls_back(value, expected):
    assert clamp_limit(value) == expected
