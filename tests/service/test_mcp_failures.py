"""Long excerpts and long responses, and failures, through the MCP tools: each with the documented
text. The failures are real: a model that keeps answering "rate limited" (litellm's mock response),
a knowledge base whose vectors are broken, a store whose table is gone."""

from __future__ import annotations

import logging
import random

import pytest
from sqlalchemy import text as sql

from rag.service import KnowledgeService, Principal
from rag.settings import IndexSettings, LLMSettings, Settings

from ..support.mcp_support import run, session, token

pytestmark = pytest.mark.filterwarnings("ignore:.*ReadOnly. qualifier:UserWarning")

WORDS = ("ledger budget travel review policy meeting office laptop badge parking training report benefit "
         "payroll holiday contract vendor invoice security network project roadmap").split()
QUESTION = "Who keeps the quokka ledger of zorblax payments?"


@pytest.fixture(scope="module")
def faulty(tmp_path_factory):
    """30 documents of about 4,000 characters, one chunk each (chunks of 1,024 tokens), so that
    excerpts are cut at 2,000 characters and 25 of them pass 50,000. The model is always rate limited."""
    root = tmp_path_factory.mktemp("mcp_failures")
    pages = root / "pages"
    pages.mkdir()
    rng = random.Random(7)
    for i in range(30):
        words = " ".join(rng.choice(WORDS) for _ in range(560))
        lead = "The quokka ledger of zorblax payments is kept by Ada. " if i == 0 else ""
        (pages / f"report-{i:02d}.md").write_text(f"# Report {i}\n\n{lead}{words}.\n")
    settings = Settings(
        home=root / "home", index=IndexSettings(chunk_size=1024, chunk_overlap=32), llm_model="openai/gpt-4o-mini",
        llm=LLMSettings(mock_response="litellm.RateLimitError", max_attempts=1, backoff_initial=0.01, backoff_max=0.02),
    )
    with KnowledgeService(settings) as svc:
        svc.ensure_workspace("default")
        assert not svc.ingest_directory(Principal.local_admin("default"), pages).failed
        yield svc


def test_long_excerpts_and_responses_are_cut_as_documented(faulty):
    async def main():
        async with session(faulty, token(faulty, "viewer", write=False, agent=False)) as s:
            return await s.call("search_knowledge", {"query": "ledger budget report", "limit": 25})

    result = run(main)
    payload, rendered = result.structured_content, result.content[0].text
    assert payload["truncated"] is True and 0 < len(payload["results"]) < 25
    dropped = 25 - len(payload["results"])
    assert rendered.endswith(f"\n\n[…{dropped} more results truncated]") and len(rendered) < 50_000
    for hit in payload["results"]:
        assert len(hit["excerpt"]) == 2000 + len("[…truncated]") and hit["excerpt"].endswith("[…truncated]")


def test_failures_reach_the_caller_with_the_documented_messages(faulty, caplog):
    caplog.set_level(logging.INFO)
    reader = token(faulty, "viewer", write=False, agent=False)
    kb = faulty.knowledge_base(Principal.local_admin("default"), "default")

    async def call(name: str, args: dict | None = None):
        async with session(faulty, reader) as s:
            return await s.call(name, args)

    # The model: its own message behind the document's prefix, and not the question.
    asked = run(call, "ask_knowledge", {"query": QUESTION})
    assert asked.is_error and asked.content[0].text.startswith(
        "Tool failed: the language model is unavailable (rate limited")
    assert "quokka" not in asked.content[0].text

    # One knowledge base's vectors broken for real (another dimension than the model's): skipped,
    # logged, and named, so an empty result does not read as "nothing matched".
    faulty.vector.drop(kb.id)
    broken = faulty.vector.client.create_collection(faulty.vector._name(kb.id), embedding_function=None)
    broken.add(ids=["1"], embeddings=[[0.1, 0.2, 0.3]])
    faulty.vector._collections.pop(kb.id, None)
    skipped = run(call, "search_knowledge_base", {"query": QUESTION})
    assert not skipped.is_error and skipped.structured_content == {
        "query": QUESTION, "results": [], "failed_knowledge_bases": [{"id": kb.id, "name": "default"}]}
    assert any("skipped" in r.getMessage() and r.exc_info for r in caplog.records)

    # The store loses a table: search_knowledge_base says the service is unreachable; for the other
    # tools it is unanticipated: the generic message, and the traceback in the log only.
    with faulty.db.session() as db:
        db.execute(sql("ALTER TABLE knowledge_bases RENAME TO knowledge_bases_gone"))
    caplog.clear()
    unreachable = run(call, "search_knowledge_base", {"query": QUESTION})
    unexpected = run(call, "search_knowledge", {"query": QUESTION})
    roots = run(call, "get_root_nodes")
    assert [r.content[0].text for r in (unreachable, unexpected, roots)] == [
        "the knowledge base service is unreachable",
        "Tool failed: this tool call could not be completed",
        "this tool call could not be completed",
    ]
    assert all(r.is_error and r.structured_content is None for r in (unreachable, unexpected, roots))
    tracebacks = [r for r in caplog.records if r.name == "rag.mcp" and r.exc_info]
    assert [r.getMessage() for r in tracebacks] == [
        "tool search_knowledge failed unexpectedly", "tool get_root_nodes failed unexpectedly"]
    assert all("no such table" in str(r.exc_info[1]) for r in tracebacks)
