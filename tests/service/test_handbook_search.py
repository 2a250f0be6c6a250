"""Everyday questions over the whole 18F handbook find the right pages, through both lanes."""

from __future__ import annotations

import pytest

from rag.service import Principal

QUESTIONS = [
    ("How much annual leave do I earn each pay period?", "fs:travel-and-leave/leave.md"),
    ("Can I take sick leave to go to a funeral?", "fs:travel-and-leave/leave.md"),
    ("How do I get reimbursed for meals when I travel?", "fs:travel-and-leave/travel-and-leave-policies/"),
    ("How do I book a flight for work travel?", "fs:travel-and-leave/"),
    ("What chat tool does the team use for instant messaging?", ("fs:tools/slack/", "fs:general-information-and-resources/collaboration-tools.md")),
    ("How do I join a Slack channel?", "fs:tools/slack/"),
    ("How do I set up my laptop on the first day?", "fs:getting-started/"),
]


@pytest.mark.parametrize(("question", "expected"), QUESTIONS)
def test_everyday_questions_find_the_right_page(handbook, question, expected):
    hits = handbook.search(Principal.local_admin("default"), question, 5).hits
    top3 = [h.source for h in hits[:3]]
    assert any(source.startswith(expected) for source in top3), top3  # str.startswith takes a tuple too
    assert any(h.retrievers == ["vector", "text"] for h in hits[:3])


def test_scores_are_the_fused_rank_score(handbook):
    """Scores are fusion's, whatever step after fusion orders the candidates (rag/retrieve/rerank.py)."""
    hits = handbook.search(Principal.local_admin("default"), "annual leave carry over 240 hours", 10).hits
    # Reciprocal rank fusion's scale: first place in every ranking (the lanes and the bridge) at most.
    assert hits[0].score <= sum(handbook.index.weights.values()) / 61 + 1e-12
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)


@pytest.fixture(scope="module")
def handbook_fts5(tmp_path_factory):
    """The handbook with the SQLite FTS5 keyword lane (RAG_RETRIEVE__KEYWORD_ENGINE=fts5)."""
    from rag.service import KnowledgeService
    from rag.settings import Settings

    from ..support.paths import HANDBOOK

    settings = Settings(home=tmp_path_factory.mktemp("fts5") / "home", retrieve={"keyword_engine": "fts5"})
    with KnowledgeService(settings) as service:
        service.ensure_workspace("default")
        service.ingest_directory(Principal.local_admin("default"), HANDBOOK)
        yield service


@pytest.mark.parametrize(("question", "expected"), QUESTIONS)
def test_both_keyword_engines_find_the_right_page(handbook, handbook_fts5, question, expected):
    for service in (handbook, handbook_fts5):
        hits = service.search(Principal.local_admin("default"), question, 5, lanes=("text",)).hits
        assert any(h.source.startswith(expected) for h in hits), (service.settings.retrieve.keyword_engine, question)


@pytest.mark.parametrize("question", [q for q, _ in QUESTIONS])
def test_keyword_fast_path_ranks_like_the_exact_in_scope_query(handbook_fts5, question):
    from rag.retrieve.keyword import match_expression
    from rag.retrieve.text import query_terms
    from rag.retrieve.types import Query

    handbook = handbook_fts5
    scope = handbook.scope(Principal.local_admin("default"))
    with handbook.db.session() as session:
        fast = handbook.keyword.search(session, Query(question), scope, 20)
        terms = handbook.keyword.prune(session, query_terms(question))
        exact = handbook.keyword._search_in_scope(session, match_expression(terms), scope, 20)
    assert [h.chunk_id for h in fast] == [h.chunk_id for h in exact]
    assert [h.score for h in fast] == pytest.approx([h.score for h in exact])
