"""POST /v1/search and /v1/ask over a real socket: the shapes and rules of search_knowledge and
ask_knowledge, Server-Sent Events, health, tokens, and bad input that never gets a 500."""

from __future__ import annotations

import json
import os
import re

import httpx
import pytest

from ..support.api_support import LEAVE_QUESTION, live_api, sse_events
from ..support.processes import LEAVE_DOC



@pytest.fixture(scope="module")
def api(tmp_path_factory):
    yield from live_api(tmp_path_factory.mktemp("api"))


def test_health_reports_each_part_without_a_token(api):
    response = httpx.get(f"{api.url}/healthz")
    assert response.status_code == 200
    assert response.json() == {
        "status": "ok", "synthesizer": "extractive",
        "store": {"ok": True, "engine": "sqlite"},
        "vector": {"ok": True, "engine": "chroma embedded"},
        "text": {"ok": True, "engine": "tantivy"},
        "title": {"ok": True, "engine": "tantivy"},
        "model": {"ok": True, "engine": "local:all-MiniLM-L6-v2"},
        "writes": {"ok": True, "engine": "sqlite"},
        "parsing": {"busy": 0, "capacity": os.cpu_count(), "queued": 0},  # the parse workers' load
    }
    assert httpx.get(f"{api.url}/openapi.json").json()["info"]["title"] == "rag"
    assert httpx.get(f"{api.url}/livez").json() == {"status": "ok"}
    ready = httpx.get(f"{api.url}/readyz")
    assert ready.status_code == 200 and ready.json() == {"status": "ready", "failing": []}


def test_a_store_migrated_past_this_code_is_not_ready_yet_alive(api):
    """A newer replica migrated the shared store: this one is taken out of the load balancer, not
    restarted in a loop."""
    with api.svc.db.engine.begin() as connection:
        (stamped,) = connection.exec_driver_sql("SELECT version_num FROM alembic_version").one()
        connection.exec_driver_sql("UPDATE alembic_version SET version_num = 'a_newer_revision'")
    try:
        ready = httpx.get(f"{api.url}/readyz")
        assert ready.status_code == 503 and ready.json() == {"status": "not ready", "failing": ["migrations"]}
        assert httpx.get(f"{api.url}/livez").status_code == 200
    finally:
        with api.svc.db.engine.begin() as connection:
            connection.exec_driver_sql("UPDATE alembic_version SET version_num = ?", (stamped,))
    assert httpx.get(f"{api.url}/readyz").status_code == 200


def test_tokens_are_required_and_checked(api):
    body = {"query": "leave"}
    with api.client(None) as anonymous:
        missing = anonymous.post("/v1/search", json=body)
        assert missing.status_code == 401 and missing.headers["www-authenticate"] == "Bearer"
        assert missing.json()["error"]["code"] == "unauthenticated"
        for header in ("Bearer rag_not-a-real-token", "Basic dXNlcjpwYXNz", "Bearer", "rag_x"):
            refused = anonymous.post("/v1/search", json=body, headers={"Authorization": header})
            assert refused.status_code == 401, header
    secret = api.token("viewer")
    with httpx.Client(base_url=api.url, headers={"Authorization": f"Bearer {secret}"}) as client:
        assert client.post("/v1/search", json=body).status_code == 200
        api.svc.revoke_token(api.svc.authenticate(secret).token_id)
        revoked = client.post("/v1/search", json=body)
    assert revoked.status_code == 401 and revoked.json()["error"]["message"] == "invalid or expired token"


def test_search_has_the_shape_of_search_knowledge(api):
    with api.client("viewer") as client:
        response = client.post("/v1/search", json={"query": "How much annual leave do I earn?", "limit": 3})
    assert response.status_code == 200, response.text
    payload = response.json()
    assert set(payload) == {"query", "results", "truncated", "text"} and payload["truncated"] is False
    assert len(payload["results"]) == 3
    first = payload["results"][0]
    assert set(first) == {"source_id", "document_id", "title", "score", "retrievers", "excerpt", "source"}
    assert first["source_id"] == first["document_id"] == LEAVE_DOC and first["retrievers"] == ["vector", "text"]
    assert payload["text"].startswith(f"### {first['title']} (score: {first['score']:.4f}, via vector+text)\n")


def test_search_limit_is_clamped_and_a_non_number_falls_back(api):
    counts = {}
    with api.client("viewer") as client:
        for limit in (0, -4, 1, 2.7, 100, "3", "many", None, True, [2], {"n": 1}):
            response = client.post("/v1/search", json={"query": "leave", "limit": limit})
            assert response.status_code == 200, (limit, response.text)
            counts[json.dumps(limit)] = len(response.json()["results"])
        default = len(client.post("/v1/search", json={"query": "leave"}).json()["results"])
    assert counts["0"] == counts["-4"] == counts["1"] == 1
    assert counts["2.7"] == 2 and counts['"3"'] == 3
    assert counts["100"] == 25  # clamped to the top of the range
    assert default == counts['"many"'] == counts["null"] == counts["true"] == counts["[2]"] == counts['{"n": 1}'] == 10


def test_search_picks_one_knowledge_base(api):
    with api.client("viewer") as client:
        cafeteria = client.post("/v1/search", json={"query": "leave", "kb": "cafeteria"}).json()
        default = client.post("/v1/search", json={"query": "pretzels", "kb": "default"}).json()
        unknown = client.post("/v1/search", json={"query": "leave", "kb": "nope"})
    assert [r["title"] for r in cafeteria["results"]] == ["Cafeteria menu"]
    assert all(r["source_id"].startswith("fs:default:default:") for r in default["results"])
    assert unknown.status_code == 404 and unknown.json()["error"]["message"] == "knowledge base not found"


SECRET_QUERY = "zebra-7731 confidential payroll"


@pytest.mark.parametrize("body, status, message", [
    ({"query": "   "}, 400, "`query` must be a non-empty string"),
    ({"query": ""}, 400, "`query` must be a non-empty string"),
    ({}, 400, "`query` must be a non-empty string"),
    ({"query": None}, 400, "`query` must be a non-empty string"),
    ({"query": 12}, 422, "`query` must be a string"),
    ({"query": SECRET_QUERY + "x" * 4000}, 400, "`query` must be at most 4000 characters"),
    ({"query": SECRET_QUERY, "lmit": 3}, 422, "unknown field `lmit`"),
    ({"query": SECRET_QUERY, "kb": 7}, 422, "`kb` must be a string"),
    ({"query": SECRET_QUERY, "kb": "k" * 300}, 404, "knowledge base not found"),
])
def test_bad_search_input_is_a_clear_4xx(api, body, status, message):
    with api.client("viewer") as client:
        response = client.post("/v1/search", json=body)
    assert response.status_code == status, response.text
    error = response.json()["error"]
    assert error["message"] == message and error["type"] in ("invalid_request_error", "not_found_error")
    assert "zebra" not in response.text and "Traceback" not in response.text


def test_bodies_that_are_not_json_or_too_large(api):
    with api.client("viewer") as client:
        broken = client.post("/v1/search", content=b'{"query": "leave"', headers={"Content-Type": "application/json"})
        empty = client.post("/v1/search")
        array = client.post("/v1/search", json=["leave"])
        big = b'{"query": "' + b"x" * (9 * 1024 * 1024) + b'"}'
        declared = client.post("/v1/search", content=big, headers={"Content-Type": "application/json"})
        chunked = client.post("/v1/search", content=iter([big[:4_000_000], big[4_000_000:]]),
                              headers={"Content-Type": "application/json"})
    assert broken.status_code == 422 and broken.json()["error"]["message"] == "the body is not valid JSON"
    assert empty.status_code == 422 and empty.json()["error"]["message"] == "a JSON body is required"
    assert array.status_code == 422
    for response in (declared, chunked):
        assert response.status_code == 413, response.text[:200]
        assert response.json()["error"]["code"] == "body_too_large"


def test_unknown_paths_and_methods(api):
    with api.client("viewer") as client:
        missing = client.get("/v1/nothing-here")
        wrong = client.get("/v1/search")
    assert missing.status_code == 404 and missing.json()["error"]["code"] == "not_found"
    assert wrong.status_code == 405 and wrong.headers["allow"] == "POST"


def test_ask_has_the_shape_of_ask_knowledge(api):
    with api.client("viewer") as client:
        response = client.post("/v1/ask", json={"query": LEAVE_QUESTION})
        nothing = client.post("/v1/ask", json={"query": "What is the capital of Mongolia?"})
    assert response.status_code == 200, response.text
    payload = response.json()
    assert set(payload) == {"answer", "sources", "synthesizer", "abstained", "declined", "text"}
    assert payload["synthesizer"] == "extractive" and payload["abstained"] is False and payload["declined"] is None
    assert payload["sources"][0]["document_id"] == LEAVE_DOC
    numbers = sorted({int(n) for n in re.findall(r"\[(\d+)\]", payload["answer"])})
    assert numbers == list(range(1, len(payload["sources"]) + 1))
    answer, sources = payload["text"].split("\n\nSources:\n")
    assert answer == payload["answer"] and sources.startswith(f"[1] {payload['sources'][0]['title']} ({LEAVE_DOC}, score 0.")
    assert nothing.json() | {"text": ""} == {
        "answer": "The knowledge base has nothing on this question.", "sources": [], "synthesizer": "extractive",
        "abstained": True, "declined": "off_topic", "text": "",
    }


def test_ask_streams_deltas_then_sources_then_done(api):
    with api.client("viewer") as client:
        whole = client.post("/v1/ask", json={"query": LEAVE_QUESTION}).json()
        with client.stream("POST", "/v1/ask", json={"query": LEAVE_QUESTION, "stream": True}) as response:
            assert response.status_code == 200
            assert response.headers["content-type"].startswith("text/event-stream")
            events = sse_events(response)
        with client.stream("POST", "/v1/ask", json={"query": LEAVE_QUESTION},
                           headers={"Accept": "text/event-stream"}) as response:
            by_accept = sse_events(response)
    names = [name for name, _ in events]
    assert names[-2:] == ["sources", "done"] and set(names[:-2]) == {"delta"}
    text = "".join(json.loads(data)["text"] for name, data in events if name == "delta")
    done = json.loads(events[-1][1])
    assert text == done["answer"] == whole["answer"] and done == whole
    assert json.loads(events[-2][1]) == {"sources": whole["sources"]}
    assert by_accept == events


def test_ask_refuses_bad_input_before_streaming(api):
    with api.client("viewer") as client:
        blank = client.post("/v1/ask", json={"query": " ", "stream": True})
        history = client.post("/v1/ask", json={"query": "and sick leave?", "history": [{"role": "robot", "content": "x"}]})
        too_long = client.post("/v1/ask", json={"query": "x", "history": [{"role": "user", "content": "y" * 40_001}]})
        too_many = client.post("/v1/ask", json={"query": "x", "history": [{"role": "user", "content": "y"}] * 51})
        not_a_list = client.post("/v1/ask", json={"query": "x", "history": {"role": "user"}})
    assert blank.status_code == 400 and blank.headers["content-type"] == "application/json"
    assert history.status_code == 400
    assert history.json()["error"]["message"] == "`history[0].role` must be one of user, assistant, system"
    assert too_long.status_code == 400 and "at most 40000 characters" in too_long.json()["error"]["message"]
    assert too_many.status_code == 400
    assert too_many.json()["error"]["message"] == "`history` may hold at most 50 messages"
    assert not_a_list.status_code == 422 and not_a_list.json()["error"]["message"] == "`history` must be an array"


def test_a_conversation_rewrites_the_follow_up(api):
    history = [{"role": "user", "content": "How much annual leave do I earn each pay period?"},
               {"role": "assistant", "content": "Four hours [1]."}]
    with api.client("viewer") as client:
        response = client.post("/v1/ask", json={"query": "And how is it for part-time employees?", "history": history})
    assert response.status_code == 200
    assert response.json()["sources"][0]["document_id"] == LEAVE_DOC


def test_concurrent_calls_while_publishing(api):
    """Eight clients at once, while documents publish in the background: every call succeeds."""
    from concurrent.futures import ThreadPoolExecutor

    with api.client("admin") as admin:
        created = [admin.post("/v1/documents", json={"name": f"Load test {i}", "content": f"# Load {i}\n\nLeave test page {i}."})
                   for i in range(4)]
        ids = [c.json()["node_id"] for c in created]

    def call(i: int) -> int:
        with api.client("viewer") as client:
            if i % 3 == 0:
                return client.post("/v1/ask", json={"query": LEAVE_QUESTION}).status_code
            return client.post("/v1/search", json={"query": f"annual leave {i}", "limit": 5}).status_code

    with ThreadPoolExecutor(8) as pool, api.client("admin") as admin:
        futures = [pool.submit(call, i) for i in range(32)]
        for node_id in ids:
            assert admin.post(f"/v1/documents/{node_id}/versions/1/publish").json()["status"] == "publishing"
        statuses = [f.result() for f in futures]
    assert statuses == [200] * 32
    assert api.svc.wait_for_publishing(120)
    with api.client("admin") as admin:
        for node_id in ids:
            assert admin.get(f"/v1/documents/{node_id}").status_code == 200
            assert admin.delete(f"/v1/documents/{node_id}").status_code == 200


def test_the_mcp_tools_are_served_at_mcp_behind_the_same_tokens(api):
    """rag.mcp's streamable-HTTP app, mounted by the API and run by its lifespan."""
    pytest.importorskip("rag.mcp.http")
    import anyio
    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    async def tools_and_answer(path: str) -> tuple[list[str], bool]:
        headers = {"Authorization": f"Bearer {api.tokens['viewer']}"}
        async with httpx2.AsyncClient(headers=headers, timeout=120) as http:
            async with Client(streamable_http_client(f"{api.url}{path}", http_client=http)) as client:
                tools = [tool.name for tool in (await client.list_tools()).tools]
                result = await client.call_tool("search_knowledge", {"query": LEAVE_QUESTION, "limit": 1})
                return tools, result.is_error

    for path in ("/mcp", "/mcp/"):
        tools, failed = anyio.run(tools_and_answer, path)
        assert {"search_knowledge", "ask_knowledge", "get_document"} <= set(tools) and not failed
    refused = httpx.post(f"{api.url}/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
    assert refused.status_code == 401
