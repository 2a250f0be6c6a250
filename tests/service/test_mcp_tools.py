"""The MCP tools through the SDK's in-memory client, on a real store with real handbook pages:
listings (hints, input and output schemas), and the tools of knowledge_search_and_ask.txt and
search_knowledge_base.txt with their renderings and messages word for word. The model is litellm's
mock response."""

from __future__ import annotations

import json
import re

import jsonschema
import pytest

from rag.settings import LLMSettings, Settings
from rag.store.models import Workspace
from rag.synthesize.declines import REASONS

from ..support.mcp_support import LEAVE_QUESTION, TOOL_NAMES, handbook_world, run, session, text, token

pytestmark = pytest.mark.filterwarnings("ignore:.*ReadOnly. qualifier:UserWarning")

# The model's reply (litellm's mock response): excerpt 2, cited first, becomes source [1]; [99] is dropped.
REPLY = "Employees earn annual leave every pay period [2]. It grows with years of service [1][99]."


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    settings = Settings(llm_model="openai/gpt-4o-mini", llm=LLMSettings(mock_response=REPLY))
    yield from handbook_world(tmp_path_factory.mktemp("mcp_tools"), settings)


def block(result: dict) -> str:
    via = "+".join(result["retrievers"])
    return (f"### {result['title']} (score: {result['score']:.4f}, via {via})\n"
            f"document_id: {result['document_id']}\n\n{result['excerpt']}")


def test_every_tool_is_listed_with_hints_and_schemas(world):
    async def main():
        async with session(world.svc, world.agent) as s:
            return (await s.client.list_tools()).tools

    tools = {t.name: t for t in run(main)}
    assert set(tools) == TOOL_NAMES and "rollback_document_version" not in tools
    read_only = {"search_knowledge_base", "search_knowledge", "ask_knowledge", "search_documents", "get_document",
                 "get_document_versions", "get_document_version", "list_children", "get_folder_tree",
                 "search_nodes_by_name", "get_root_nodes", "get_current_node"}
    destructive = {"update_document", "delete_document", "delete_folder", "set_summary", "set_metadata"}
    for name, tool in tools.items():
        hints = tool.annotations
        assert hints is not None and hints.open_world_hint is False and hints.idempotent_hint is not None
        assert hints.read_only_hint is (name in read_only) and hints.destructive_hint is (name in destructive)
        assert tool.input_schema["type"] == "object" and tool.output_schema["type"] == "object"
        assert tool.description and tool.title
    assert tools["get_document"].annotations.idempotent_hint is False  # each read adds a citation

    # Bounds are stated; where a document clamps or names its own message, the schema still accepts.
    limit = tools["search_knowledge"].input_schema["properties"]["limit"]
    assert limit["anyOf"][0] == {"type": "number", "minimum": 1, "maximum": 25} and limit["default"] == 10
    top_k = tools["search_knowledge_base"].input_schema["properties"]["top_k"]
    assert top_k["anyOf"][0] == {"type": "integer", "minimum": 1, "maximum": 50} and top_k["default"] == 6
    for tool, args in (("search_knowledge", {"query": "q", "limit": 100}),
                       ("search_knowledge", {"query": "q", "limit": "x"}),
                       ("search_knowledge_base", {"query": "", "top_k": 0}),
                       ("search_knowledge_base", {"query": "q", "top_k": 51})):
        jsonschema.validate(args, tools[tool].input_schema)
    assert tools["search_knowledge_base"].input_schema["required"] == ["query"]
    assert tools["search_documents"].input_schema["properties"]["limit"]["maximum"] == 25
    assert tools["search_nodes_by_name"].input_schema["properties"]["limit"]["maximum"] == 100
    assert tools["get_document_version"].input_schema["properties"]["version_number"]["minimum"] == 1
    for name in ("get_document", "move_node", "list_children", "get_folder_tree", "publish_document_version"):
        assert not {"source_id", "document_id"} & set(tools[name].input_schema["properties"])
    ask = tools["ask_knowledge"].output_schema
    assert set(ask["properties"]) == {"answer", "sources", "declined"}  # `declined`: added, present only then
    assert set(ask["required"]) == {"answer", "sources"}
    assert set(tools["search_knowledge"].output_schema["properties"]) == {"results", "truncated"}


def test_search_knowledge_renders_and_clamps_as_documented(world):
    async def main():
        async with session(world.svc, world.person) as s:
            three = await s.call("search_knowledge", {"query": LEAVE_QUESTION, "limit": 3})
            counts = {repr(v): len((await s.ok("search_knowledge", {"query": LEAVE_QUESTION, "limit": v}))["results"])
                      for v in (0, -4, 2.7, "7", "lots", None, 100)}
            errors = [await s.error("search_knowledge", args)
                      for args in ({}, {"query": ""}, {"query": "  "}, {"query": 5})]
        async with session(world.svc, world.blind) as s:  # access none: refused, not an empty result
            nothing = await s.call("search_knowledge", {"query": LEAVE_QUESTION})
        return three, counts, errors, nothing

    three, counts, errors, nothing = run(main)
    results = three.structured_content["results"]
    assert set(three.structured_content) == {"results", "truncated"} and three.structured_content["truncated"] is False
    assert len(results) == 3 and results[0]["title"] == "Leave types"
    for r in results:
        assert set(r) == {"source_id", "document_id", "title", "score", "retrievers", "excerpt", "source"}
        assert r["source_id"] == r["document_id"] and r["source"].startswith("fs:") and len(r["excerpt"]) <= 2000
    assert text(three) == "\n\n".join(block(r) for r in results)
    assert re.match(r"### Leave types \(score: 0\.0\d{3}, via vector\+text\)\ndocument_id: fs:default:default:"
                    r"travel-and-leave/leave\.md\n\n", text(three))
    assert counts == {"0": 1, "-4": 1, "2.7": 2, "'7'": 7, "'lots'": 10, "None": 10, "100": 25}
    assert errors == ["Tool failed: `query` must be a non-empty string"] * 4
    assert nothing.is_error and text(nothing) == "Tool failed: no knowledge base access"


def test_ask_knowledge_cites_in_order_and_abstains(world):
    async def main():
        async with session(world.svc, world.person) as s:
            return (await s.call("ask_knowledge", {"query": LEAVE_QUESTION}),
                    await s.call("ask_knowledge", {"query": "What is the capital of Mongolia?"}),
                    [await s.error("ask_knowledge", args) for args in ({}, {"query": ""})])

    cited, abstained, errors = run(main)
    answer = cited.structured_content
    assert set(answer) == {"answer", "sources"}  # `declined` is added only to an answer that declines
    # Renumbered in order of first citation, [99] (no such excerpt) dropped; one number per document.
    numbers = [int(n) for n in re.findall(r"\[(\d+)\]", answer["answer"])]
    assert answer["answer"].startswith("Employees earn annual leave every pay period [1].")
    assert "[99]" not in answer["answer"]
    assert sorted(set(numbers)) == list(range(1, len(answer["sources"]) + 1))
    for source in answer["sources"]:
        assert set(source) <= {"source_id", "document_id", "title", "score", "source"}
        assert source["source_id"] == source["document_id"] and "source" in source
    lines = [f"[{n}] {s['title']} ({s['document_id']}, score {s['score']:.4f})"
             for n, s in enumerate(answer["sources"], start=1)]
    assert text(cited) == answer["answer"] + "\n\nSources:\n" + "\n".join(lines)
    assert abstained.structured_content["sources"] == []
    assert abstained.structured_content["declined"] in REASONS  # why, by name; the text block stays the seed's
    assert text(abstained) == abstained.structured_content["answer"]  # no sources: the answer alone
    assert errors == ["Tool failed: `query` must be a non-empty string"] * 2


def test_search_knowledge_base_keeps_its_own_contract(world):
    svc = world.svc
    with svc.db.session() as db:
        db.add(Workspace(id="empty", name="empty"))  # a workspace with no knowledge base at all
    two = token(svc, "viewer", write=False, agent=False)
    svc.create_token("empty", "viewer", principal_id=svc.authenticate(two).principal_id)

    async def main():
        async with session(svc, world.person) as s:
            required = [await s.error("search_knowledge_base", args)
                        for args in ({}, {"query": ""}, {"query": "   "}, {"query": None, "top_k": 0, "kb_id": 7})]
            bounds = [await s.error("search_knowledge_base", {"query": LEAVE_QUESTION, "top_k": v})
                      for v in (0, -2, 51, "5", 2.5, True)]
            default = await s.call("search_knowledge_base", {"query": LEAVE_QUESTION})
            counts = [len((await s.ok("search_knowledge_base", {"query": LEAVE_QUESTION, "top_k": k}))["results"])
                      for k in (None, 1, 50)]
            missing_kb = await s.error("search_knowledge_base", {"query": LEAVE_QUESTION, "kb_id": "kb_nope"})
            by_name = await s.ok("search_knowledge_base", {"query": LEAVE_QUESTION, "kb_id": "default"})
        async with session(svc, two) as s:  # a person in two workspaces
            which = await s.error("search_knowledge_base", {"query": LEAVE_QUESTION})
            empty = await s.ok("search_knowledge_base", {"query": LEAVE_QUESTION, "workspace_id": "empty"})
            elsewhere = await s.error("search_knowledge_base", {"query": LEAVE_QUESTION, "workspace_id": "third"})
        return required, bounds, default, counts, missing_kb, by_name, which, empty, elsewhere

    required, bounds, default, counts, missing_kb, by_name, which, empty, elsewhere = run(main)
    assert required == ["query is required"] * 4
    assert bounds == (["`top_k` must be at least 1"] * 2 + ["`top_k` must be at most 50"]
                      + ["`top_k` must be an integer"] * 3)
    payload = default.structured_content
    assert set(payload) == {"query", "results"} and payload["query"] == LEAVE_QUESTION
    assert len(payload["results"]) == 6 and json.loads(text(default)) == payload
    first = payload["results"][0]
    assert first["source"] == "fs:travel-and-leave/leave.md" and first["node_id"].startswith("n_") and first["kb_id"]
    scores = [r["score"] for r in payload["results"]]
    assert scores == sorted(scores, reverse=True)
    assert counts[:2] == [6, 1] and counts[2] > 6
    assert missing_kb == "knowledge base not found" and by_name["results"]
    assert which == "workspace_id is required when you belong to more than one workspace"
    assert empty == {"query": LEAVE_QUESTION, "results": [], "note": "no knowledge base configured for this workspace"}
    assert elsewhere == "workspace not found"
