"""The MCP tools over streamable HTTP on a real socket (uvicorn), mounted the way the HTTP API
mounts them (at /mcp, the session manager run by the host's lifespan), behind bearer tokens."""

from __future__ import annotations

from contextlib import asynccontextmanager

import httpx2
import pytest
from starlette.applications import Starlette
from starlette.routing import Mount

from rag.mcp.http import mcp_http
from rag.service import KnowledgeService, Principal
from rag.settings import Settings

from ..support.mcp_support import LEAVE_QUESTION, TOOL_NAMES, copy_pages, http_session, run, running, token

pytestmark = pytest.mark.filterwarnings("ignore:.*ReadOnly. qualifier:UserWarning")


def walk(node: dict):
    yield node["node_id"]
    for child in node.get("children", []):
        yield from walk(child)


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """The small handbook set behind a host app that mounts the MCP app at /mcp, on a free port."""
    root = tmp_path_factory.mktemp("mcp_http")
    with KnowledgeService(Settings(home=root / "home")) as svc:
        svc.ensure_workspace("default")
        assert not svc.ingest_directory(Principal.local_admin("default"), copy_pages(root / "pages")).failed
        app, sessions = mcp_http(svc)

        @asynccontextmanager
        async def lifespan(_):
            async with sessions():  # a mounted app's lifespan does not run: the host runs the sessions
                yield

        with running(Starlette(routes=[Mount("/mcp", app=app)], lifespan=lifespan)) as base:
            yield svc, f"{base}/mcp/"


@pytest.fixture(scope="module")
def scoped(served):
    """An agent that may read and write tools/ only, and what lies inside and outside it."""
    svc, _ = served
    admin = Principal.local_admin("default")
    root = svc.knowledge_base(admin, "default").root_id
    folders = {n.name: n.node_id for n in svc.list_children(admin, root)}
    inside = set(walk(svc.get_folder_tree(admin, folders["tools"]).payload()["roots"][0]))
    outside_doc = svc.search(admin, LEAVE_QUESTION, 1).hits[0].node_id
    slack_doc = next(n.node_id for n in svc.search_nodes_by_name(admin, "slack")
                     if n.kind == "document" and n.node_id in inside)
    assert outside_doc not in inside
    return token(svc, folders=("tools",)), root, folders, inside, outside_doc, slack_doc


def test_bearer_tokens_are_required(served):
    svc, url = served
    revoked = token(svc, access="all")
    svc.revoke_token(svc.authenticate(revoked).token_id)
    hello = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
    answers = []
    for headers in ({}, {"Authorization": "Bearer rag_nope"}, {"Authorization": f"Bearer {revoked}"},
                    {"Authorization": f"Basic {revoked}"}):
        headers["Accept"] = "application/json, text/event-stream"
        answers.append(httpx2.post(url, json=hello, headers=headers))
    for answer in answers:
        assert answer.status_code == 401
        assert answer.headers["www-authenticate"].startswith('Bearer error="invalid_token"')
        assert answer.json() == {"error": "invalid_token", "error_description": "invalid or expired token"}

    async def main():
        async with http_session(url, token(svc, "viewer", write=False, agent=False)) as s:
            return (await s.client.list_tools()).tools, await s.ok("search_knowledge", {"query": LEAVE_QUESTION})

    tools, found = run(main)
    assert {t.name for t in tools} == TOOL_NAMES and found["results"][0]["title"] == "Leave types"


def test_a_folder_scoped_agent_sees_nothing_outside_its_folders(served, scoped):
    svc, url = served
    agent, root, folders, inside, outside_doc, slack_doc = scoped

    async def main():
        async with http_session(url, agent) as s:
            return {
                "search": (await s.ok("search_knowledge", {"query": LEAVE_QUESTION, "limit": 25}))["results"],
                "kb_search": (await s.ok("search_knowledge_base", {"query": LEAVE_QUESTION, "top_k": 50}))["results"],
                "documents": (await s.ok("search_documents", {"query": LEAVE_QUESTION, "limit": 25}))["results"],
                "ask_leave": (await s.ok("ask_knowledge", {"query": LEAVE_QUESTION}))["sources"],
                "ask_slack": (await s.ok("ask_knowledge", {"query": "How do I get started with Slack?"}))["sources"],
                "read": await s.error("get_document", {"node_id": outside_doc}),
                "versions": await s.error("get_document_versions", {"node_id": outside_doc}),
                "tree": await s.ok("get_folder_tree"),
                "tree_root": await s.error("get_folder_tree", {"root_id": root}),
                "children": await s.error("list_children", {"parent_id": folders["travel-and-leave"]}),
                "names_out": (await s.ok("search_nodes_by_name", {"query": "leave"}))["results"],
                "names_in": (await s.ok("search_nodes_by_name", {"query": "slack"}))["results"],
                "move_out": await s.error("move_node", {"node_id": slack_doc,
                                                        "parent_id": folders["travel-and-leave"]}),
                "move_in": await s.error("move_node", {"node_id": outside_doc, "parent_id": folders["tools"]}),
                "roots": (await s.ok("get_root_nodes"))["roots"],
            }

    r = run(main)
    prefix = "fs:default:default:tools/"
    assert r["search"] and all(h["source_id"].startswith(prefix) for h in r["search"])
    assert r["kb_search"] and {h["node_id"] for h in r["kb_search"]} <= inside
    assert r["documents"] and {h["node_id"] for h in r["documents"]} <= inside
    assert all(s["source_id"].startswith(prefix) for s in r["ask_leave"] + r["ask_slack"]) and r["ask_slack"]
    assert r["read"] == r["versions"] == r["tree_root"] == r["children"] == r["move_out"] == r["move_in"] == "not found"
    assert [t["node_id"] for t in r["tree"]["roots"]] == [folders["tools"]]
    assert set(walk(r["tree"]["roots"][0])) == inside
    assert r["names_out"] == [] and {n["node_id"] for n in r["names_in"]} <= inside and r["names_in"]
    assert [n["node_id"] for n in r["roots"]] == [folders["tools"]]
    assert svc.get_document(Principal.local_admin("default"), outside_doc).name  # still there for those who may see it


def test_current_node_comes_from_the_header_or_meta(served, scoped):
    svc, url = served
    agent, _, _, _, outside_doc, slack_doc = scoped

    async def main():
        async with http_session(url, agent, **{"X-Current-Node": slack_doc}) as s:
            header = await s.ok("get_current_node")
            meta_wins = await s.ok("get_current_node", current_node_id=folders_tools)
        async with http_session(url, agent, **{"X-Current-Node": outside_doc}) as s:
            outside = await s.ok("get_current_node")
        async with http_session(url, agent) as s:
            none = await s.ok("get_current_node")
        return header, meta_wins, outside, none

    folders_tools = scoped[2]["tools"]
    header, meta_wins, outside, none = run(main)
    assert header == {"node_id": slack_doc} and meta_wins == {"node_id": folders_tools}
    # Conversation context, not a scoped lookup (knowledge_base_mcp_server.md): reading it is scoped.
    assert outside == {"node_id": outside_doc} and none == {"node_id": None}


def test_an_agent_drafts_then_publishes_and_search_finds_it(served, scoped):
    svc, url = served
    agent, _, folders, _, _, _ = scoped
    body = "# Wombat rota\n\nThe wombat rota for the zorblax channel starts every Tuesday at ten.\n"
    question = "wombat rota zorblax channel Tuesday"

    async def draft():
        async with http_session(url, agent) as s:
            nowhere = await s.error("create_document", {"name": "Wombat rota", "content": body})
            made = await s.ok("create_document",
                              {"parent_id": folders["tools"], "name": "Wombat rota", "content": body})
            unseen = (await s.ok("search_knowledge", {"query": question}))["results"]
            unseen_docs = (await s.ok("search_documents", {"query": question}))["results"]
            published = await s.ok("publish_document_version", {"node_id": made["node_id"], "version_number": 1})
            again = await s.ok("publish_document_version", {"node_id": made["node_id"], "version_number": 1})
            return nowhere, made, unseen, unseen_docs, published, again

    async def after(node: str):
        async with http_session(url, agent) as s:
            return (await s.ok("get_document_versions", {"node_id": node}),
                    (await s.ok("search_knowledge", {"query": question}))["results"],
                    (await s.ok("search_documents", {"query": question}))["results"],
                    await s.ok("get_document", {"node_id": node}))

    nowhere, made, unseen, unseen_docs, published, again = run(draft)
    assert nowhere == "`parent_id` is required: this token may only write inside its folders"
    assert made["status"] == "draft" and made["parent_id"] == folders["tools"]
    assert "Wombat rota" not in {h["title"] for h in unseen}
    assert made["node_id"] not in {h["node_id"] for h in unseen_docs}
    assert published["status"] == "publishing"  # at once; the chunks are indexed in the background
    assert again["status"] in ("publishing", "published")  # a no-op, whether or not the indexing is done yet
    assert svc.wait_for_publishing(120)
    versions, found, found_docs, document = run(after, made["node_id"])
    assert versions["versions"][0]["status"] == "published"
    assert found[0]["title"] == "Wombat rota" and found_docs[0]["node_id"] == made["node_id"]
    assert document["content"] == body and document["citation_count"] == 1
