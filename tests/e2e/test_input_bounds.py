"""Bounds at the edge of the service (issue 12, defects 2, 8 and 12): identifiers, integers, names,
texts and request bodies a caller controls. Whatever is sent, the answer is a clean refusal that
names the argument (or "not found", word for word as for an unknown id), never a store error, and
the activity history stays small enough that an export always imports."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import httpx
import pytest
from sqlalchemy import func, select

from rag.errors import InvalidArgument, NotFound
from rag.mcp.tools_knowledge import TOOL_FAILED
from rag.service.arguments import (
    ACTIVITY,
    CREATE_TOKEN,
    GET_DOCUMENT_VERSION,
    SEARCH_DOCUMENTS,
    SEARCH_KNOWLEDGE_BASE,
    SEARCH_NODES_BY_NAME,
)
from rag.service import KnowledgeService
from rag.service.activity import INVALID_TARGET, MAX_TARGET_CHARS
from rag.service.checks import MAX_INT
from rag.store.models import Activity

from ..support.api_support import live_api
from ..support.mcp_support import run, session, token

HUGE_ID = "n_" + "z" * 3_145_728  # the attack run's 3 MB id
LONG_ID = "n_" + "z" * 100_000  # the 100,002-character id that broke `rag import`
ODD_IDS = ("n_\x00", "n_\x1b[31m", "n_\u202eabc", "n_\ud800", "n_" + "z" * 199)
BAD_NAMES = {
    "a\x00b": "control characters", "a\x1bb": "control characters", "a\x07b": "control characters",
    "a\u202eb": "bidirectional control", "a\u2066b": "bidirectional control", "a/b": "`/`", "a\\b": "`/`",
    "..": "cannot be `.` or `..`", ".": "cannot be `.` or `..`", "a\ud800": "lone surrogate",
}


def activity_targets(svc: KnowledgeService) -> list[str | None]:
    with svc.db.session() as db:
        return list(db.scalars(select(Activity.target)))


def test_hostile_ids_stay_out_of_the_history_and_an_export_always_imports(svc, admin, tmp_path):
    kb = svc.knowledge_base(admin, "default")
    doc = svc.create_document(admin, kb.root_id, "Expense policy", "# Expense policy\n\nMeals: 40 dollars.\n")
    blind, full = token(svc), token(svc, access="all")  # agents: one without access, one with all

    async def attack() -> None:
        async with session(svc, blind) as s:
            assert await s.error("get_document", {"node_id": HUGE_ID}) == "no knowledge base access"
        async with session(svc, full) as s:
            for bad in (HUGE_ID, LONG_ID, *ODD_IDS):
                assert await s.error("get_document", {"node_id": bad}) == "not found"
                assert await s.error("list_children", {"parent_id": bad}) == "not found"
                assert await s.error("get_folder_tree", {"root_id": bad}) == "not found"
                assert await s.error("move_node", {"node_id": doc.node_id, "parent_id": bad}) == "not found"
                assert await s.error("get_document_version", {"node_id": bad, "version_number": 1}) == "not found"

    run(attack)
    svc.record(admin, "direct", "z" * 100_002)  # the store's own sink bounds what any caller hands it
    targets = [t for t in activity_targets(svc) if t is not None]
    assert max(map(len, targets)) <= MAX_TARGET_CHARS
    assert targets.count(INVALID_TARGET) >= 3  # the attempts are seen, the values are not kept
    assert doc.node_id in targets and not any("\x00" in t or "\x1b" in t or "\u202e" in t for t in targets)

    archive = tmp_path / "store.jsonl"
    svc.export_archive(admin, archive)
    env = {**os.environ, "RAG_HOME": str(tmp_path / "empty")}
    loaded = subprocess.run([sys.executable, "-m", "rag.cli", "import", str(archive)], capture_output=True,
                            text=True, env=env, timeout=600, check=False)
    assert loaded.returncode == 0, loaded.stderr


def test_ids_no_store_could_hold_are_not_found_without_a_look_up(svc, admin):
    """On PostgreSQL a NUL in an id used to reach the database and fail there."""
    kb = svc.knowledge_base(admin, "default")
    for bad in (LONG_ID, *ODD_IDS):
        for call, args in ((svc.get_document, (bad,)), (svc.list_children, (bad,)),
                           (svc.delete_document, (bad,)), (svc.create_folder, (bad, "x"))):
            with pytest.raises(NotFound) as refused:
                call(admin, *args)
            assert refused.value.message == "not found"
    with pytest.raises(InvalidArgument, match="`node_id` must be a non-empty string"):
        svc.get_document(admin, 5)  # a wrong type is a wrong argument, named
    assert svc.get_current_node(admin, "n_\x1b[2J").node_id is None
    assert svc.get_current_node(admin, kb.root_id).node_id == kb.root_id


def test_integers_are_bounded_whatever_the_argument(svc, admin):
    kb = svc.knowledge_base(admin, "default")
    doc = svc.create_document(admin, kb.root_id, "Doc", "# Doc\n")
    for number in (2**63, 2**31, 10**400, 1e300):
        for call in (svc.get_document_version, svc.publish_document_version, svc.publish_version):
            with pytest.raises(InvalidArgument) as refused:
                call(admin, doc.node_id, number)
            assert refused.value.message == f"`version_number` must be at most {MAX_INT}"
    with pytest.raises(NotFound, match=f"version {MAX_INT} not found"):
        svc.get_document_version(admin, doc.node_id, MAX_INT)
    with pytest.raises(InvalidArgument, match="`limit` must be at most 1000"):
        svc.activity(admin, 2**63)


def test_version_numbers_beyond_the_bound_over_mcp(svc, admin):
    kb = svc.knowledge_base(admin, "default")
    doc = svc.create_document(admin, kb.root_id, "Doc", "# Doc\n")
    full = token(svc, access="all")

    async def calls() -> None:
        async with session(svc, full) as s:
            for tool in ("get_document_version", "publish_document_version"):
                message = await s.error(tool, {"node_id": doc.node_id, "version_number": 2**63})
                assert message == f"`version_number` must be at most {MAX_INT}"

    run(calls)


def test_names_refuse_control_bidi_and_path_characters(svc, admin):
    kb = svc.knowledge_base(admin, "default")
    doc = svc.create_document(admin, kb.root_id, "Doc", "# Doc\n")
    for bad, why in BAD_NAMES.items():
        for call, args in ((svc.create_folder, (kb.root_id, bad)), (svc.create_document, (kb.root_id, bad, "x")),
                           (svc.rename_document, (doc.node_id, bad))):
            with pytest.raises(InvalidArgument, match="name") as refused:
                call(admin, *args)
            assert why in refused.value.message
    # White space of any kind is folded, not refused; dots and other scripts are fine.
    assert svc.create_folder(admin, kb.root_id, "Team\tnotes\r\n 2025").name == "Team notes 2025"
    assert svc.create_folder(admin, kb.root_id, "...v1.2 Café — 東京 🙂").name == "...v1.2 Café — 東京 🙂"


def test_knowledge_base_names_are_checked_before_the_look_up(svc, admin):
    """core.knowledge_base looked a name up before checking it: on PostgreSQL a NUL failed in the
    database, a lone surrogate fails on both. A name no knowledge base can have is not found; one
    to create is refused like any other name."""
    for bad, why in BAD_NAMES.items():
        with pytest.raises(InvalidArgument, match="a knowledge base name") as refused:
            svc.knowledge_base(admin, bad, create=True)
        assert why in refused.value.message
    for bad in ("a\x00b", "a\ud800", "x" * 100_000):
        with pytest.raises(NotFound, match="^knowledge base .* not found|^knowledge base not found$"):
            svc.knowledge_base(admin, bad)


def test_texts_the_store_cannot_hold_are_refused(svc, admin):
    """PostgreSQL cannot store NUL, and no store can encode a lone surrogate: both used to fail in
    the database (a 500); now they are refused the same way on both deployments."""
    kb = svc.knowledge_base(admin, "default")
    doc = svc.create_document(admin, kb.root_id, "Doc", "# Doc\n")
    with pytest.raises(InvalidArgument, match="`content` must not contain NUL"):
        svc.update_document(admin, doc.node_id, "a\x00b")
    with pytest.raises(InvalidArgument, match="`content` must be valid Unicode"):
        svc.create_document(admin, kb.root_id, "Other", "a\ud800b")
    with pytest.raises(InvalidArgument, match="`summary` must not contain NUL"):
        svc.set_summary(admin, doc.node_id, "\x00")
    with pytest.raises(InvalidArgument, match="`metadata` must be valid Unicode"):
        svc.set_metadata(admin, doc.node_id, {"k": "\udc80"})
    deep: dict = {}
    for _ in range(5000):  # deeper than Python's recursion limit
        deep = {"a": deep}
    with pytest.raises(InvalidArgument, match="`metadata` must be nested at most 32 levels"):
        svc.set_metadata(admin, doc.node_id, deep)
    assert svc.set_metadata(admin, doc.node_id, {"tabs": "a\tb", "nested": [[{"ok": 1}]]}).metadata


# ----- over HTTP -----

@pytest.fixture(scope="module")
def api(tmp_path_factory):
    yield from live_api(tmp_path_factory.mktemp("bounds"))


def document_id(api) -> str:
    with api.client() as http:
        return http.get("/v1/nodes/search", params={"query": "leave"}).json()[0]["node_id"]


def error_of(response: httpx.Response) -> dict:
    body = response.json()
    assert set(body) == {"error"} and set(body["error"]) == {"message", "type", "code", "param"}, body
    return body["error"]


def test_http_version_numbers_beyond_the_bound_get_the_service_message(api):
    node = document_id(api)
    with api.client() as http:
        for method, path in (("GET", f"/v1/documents/{node}/versions/9223372036854775808"),
                             ("POST", f"/v1/documents/{node}/versions/9223372036854775808/publish"),
                             ("POST", f"/v1/documents/{node}/versions/{MAX_INT + 1}/rollback")):
            response = http.request(method, path)
            assert response.status_code == 400, response.text
            assert error_of(response)["message"] == f"`version_number` must be at most {MAX_INT}"
        assert http.get(f"/v1/documents/{node}/versions/{MAX_INT}").status_code == 404
        not_a_number = http.get(f"/v1/documents/{node}/versions/1e3")  # a type error stays FastAPI's
        assert not_a_number.status_code == 422
        assert error_of(not_a_number) | {"type": ""} == {
            "message": "`version_number` must be an integer", "type": "", "code": "invalid_argument",
            "param": "version_number",
        }


@pytest.mark.parametrize("body, says", [
    (b'{"name": "x", "metadata": ' + b"[" * 100_000 + b"]" * 100_000 + b"}", "nested too deeply"),
    (b'{"name": "caf\xe9"}', "not UTF-8"),
    (b'{"name": ', "not valid JSON"),
])
def test_http_bodies_that_cannot_be_read_are_422(api, body, says):
    with api.client() as http:
        response = http.post("/v1/folders", content=body, headers={"Content-Type": "application/json"})
    assert response.status_code == 422, response.text
    error = error_of(response)
    assert says in error["message"] and error["code"] == "invalid_argument" and error["type"] == "invalid_request_error"


@pytest.mark.parametrize("path, body, status", [
    ("/v1/search", b'{"query": "annual leave", "kb": "\\ud800"}', 422),
    ("/v1/search", b'{"query": "annual \\udc80 leave"}', 422),
    ("/v1/folders", b'{"name": "x", "parent_id": "n_\\ud800"}', 422),
    ("/v1/folders", b'{"name": "x", "metadata": {"\\ud800": 1}}', 400),  # Any: the service refuses it
])
def test_http_lone_surrogates_are_refused(api, path, body, status):
    """JSON can escape half of a UTF-16 pair and json.loads passes it on; no store can hold it."""
    with api.client() as http:
        response = http.post(path, content=body, headers={"Content-Type": "application/json"})
    assert response.status_code == status, response.text
    assert "annual" not in error_of(response)["message"]


def test_http_names_with_control_characters_are_refused(api):
    with api.client() as http:
        for bad in ("a\u0000b", "a\u001b[31mb", "a\u202eb", "../etc", ".."):
            response = http.post("/v1/folders", json={"name": bad})
            assert response.status_code == 400, response.text
            assert "name" in error_of(response)["message"]


def test_http_two_authorization_headers_are_refused(api):
    token = api.tokens["admin"]
    headers = [("Authorization", f"Bearer {token}"), ("Authorization", f"Bearer {api.tokens['viewer']}")]
    response = httpx.get(f"{api.url}/v1/roots", headers=headers)
    assert response.status_code == 401
    assert error_of(response)["message"] == "send one Authorization header, not several"
    same_twice = httpx.get(f"{api.url}/v1/roots", headers=[("Authorization", f"Bearer {token}")] * 2)
    assert same_twice.status_code == 401
    assert httpx.get(f"{api.url}/v1/roots", headers={"Authorization": f"Bearer {token}"}).status_code == 200


def test_http_hostile_ids_in_paths_and_bodies(api):
    with api.client() as http:
        for path in ("/v1/documents/n_%00", "/v1/documents/n_%1B%5B31m", "/v1/folders/n_%E2%80%AE/children"):
            response = http.get(path)
            assert response.status_code == 404 and error_of(response)["message"] == "not found", response.text
        for parent in ("n_" + "z" * 63, "n_" + "z" * 300):  # an id no id can be reads as an unknown one
            response = http.post("/v1/folders", json={"name": "x", "parent_id": parent})
            assert response.status_code == 404 and error_of(response)["message"] == "not found", response.text


def test_no_row_of_the_history_is_larger_than_the_bound(api):
    """After every request above (and the module's fixture): nothing oversize was recorded."""
    targets = [t for t in activity_targets(api.svc) if t]
    assert targets and max(map(len, targets)) <= MAX_TARGET_CHARS
    with api.svc.db.session() as db:
        assert db.scalar(select(func.count()).select_from(Activity)) > 0
    json.dumps(targets)  # every target is plain text


# ----- one argument rule, one answer: the same bad input over HTTP and over MCP -----

LONG_NAME = "x" * 256


def same_input_cases(node: str, folder: str) -> list[tuple[str, tuple[str, str, dict | None], str, dict]]:
    """(what is wrong, the HTTP request, the MCP tool and its arguments): each the same call of the
    same operation with the same bad argument."""
    short_long, long_id = "n_" + "z" * 63, "n_" + "z" * 199
    return [
        ("a 65-character id", ("GET", f"/v1/documents/{short_long}", None), "get_document", {"node_id": short_long}),
        ("a 201-character id", ("GET", f"/v1/folders/{long_id}/children", None), "list_children",
         {"parent_id": long_id}),
        ("a 201-character id in a body", ("POST", f"/v1/nodes/{node}/move", {"parent_id": long_id}), "move_node",
         {"node_id": node, "parent_id": long_id}),
        ("a name too long", ("PUT", f"/v1/folders/{folder}/name", {"name": LONG_NAME}), "rename_folder",
         {"node_id": folder, "name": LONG_NAME}),
        ("a new name too long", ("POST", "/v1/folders", {"parent_id": folder, "name": LONG_NAME}), "create_folder",
         {"parent_id": folder, "name": LONG_NAME}),
        ("a limit above the bound", ("GET", "/v1/nodes/search?query=leave&limit=101", None), "search_nodes_by_name",
         {"query": "leave", "limit": 101}),
        ("a limit below the bound", ("GET", "/v1/nodes/search?query=leave&limit=0", None), "search_nodes_by_name",
         {"query": "leave", "limit": 0}),
        ("a version number of 0", ("GET", f"/v1/documents/{node}/versions/0", None), "get_document_version",
         {"node_id": node, "version_number": 0}),
        ("a version number past 2^31 - 1", ("POST", f"/v1/documents/{node}/versions/{MAX_INT + 1}/publish", None),
         "publish_document_version", {"node_id": node, "version_number": MAX_INT + 1}),
        ("a summary too long", ("PUT", f"/v1/nodes/{node}/summary", {"summary": "s" * 4001}), "set_summary",
         {"node_id": node, "summary": "s" * 4001}),
        ("a query too long", ("POST", "/v1/search", {"query": "q" * 4001}), "search_knowledge", {"query": "q" * 4001}),
        ("a blank query", ("POST", "/v1/ask", {"query": "  "}), "ask_knowledge", {"query": "  "}),
        ("a missing query", ("POST", "/v1/search", {}), "search_knowledge", {}),
        ("a missing name", ("POST", "/v1/folders", {"parent_id": folder}), "create_folder", {"parent_id": folder}),
        ("a null name", ("PUT", f"/v1/documents/{node}/name", {"name": None}), "rename_document",
         {"node_id": node, "name": None}),
        ("a missing content", ("PUT", f"/v1/documents/{node}/draft", {}), "update_document", {"node_id": node}),
        ("a missing summary", ("PUT", f"/v1/nodes/{node}/summary", {}), "set_summary", {"node_id": node}),
        ("a missing query string", ("GET", "/v1/nodes/search", None), "search_nodes_by_name", {}),
    ]


def test_the_same_bad_input_gets_the_same_message_over_http_and_mcp(api):
    """The surfaces no longer check bounds of their own (rag/service/arguments.py declares them
    once, and the service checks them): an over-long id, an over-long name, an out-of-range limit or
    version number, a missing required argument answer alike, in the service's words. Only the
    prefix search_knowledge's and ask_knowledge's document gives their errors differs."""
    node = document_id(api)
    with api.client() as http:
        folder = next(r for r in http.get("/v1/roots").json() if r["name"] == "default")["node_id"]
        before = http.get("/v1/tree").json()
    cases = same_input_cases(node, folder)
    with api.client() as http:
        over_http = [http.request(method, path, json=body) for _, (method, path, body), _, _ in cases]

    async def over_mcp() -> list[str]:
        async with session(api.svc, api.tokens["admin"]) as s:  # the same caller: an admin person
            return [await s.error(tool, args) for _, _, tool, args in cases]

    for (what, _, tool, _), response, message in zip(cases, over_http, run(over_mcp)):
        assert response.status_code in (400, 404), (what, response.status_code, response.text)
        error = error_of(response)
        assert error["code"] == ("not_found" if response.status_code == 404 else "invalid_argument"), what
        prefix = TOOL_FAILED if tool in ("search_knowledge", "ask_knowledge") else ""
        assert message == prefix + error["message"], (what, message, error["message"])
    with api.client() as http:
        assert http.get("/v1/tree").json() == before  # nothing was made, renamed or moved


def test_the_service_enforces_the_declared_bounds(api):
    """Every declared bound is the one the service checks: its message names the declared number.
    (Some of the service's operations still hold their numbers themselves; this keeps them equal.)"""
    node = document_id(api)
    integers = [("search_documents", {"query": "leave"}, SEARCH_DOCUMENTS["limit"]),
                ("search_nodes_by_name", {"query": "leave"}, SEARCH_NODES_BY_NAME["limit"]),
                ("search_knowledge_base", {"query": "leave"}, SEARCH_KNOWLEDGE_BASE["top_k"]),
                ("get_document_version", {"node_id": node}, GET_DOCUMENT_VERSION["version_number"])]
    texts = [(tool, op["query"]) for tool, op in (("search_documents", SEARCH_DOCUMENTS),
                                                   ("search_knowledge_base", SEARCH_KNOWLEDGE_BASE),
                                                   ("search_nodes_by_name", SEARCH_NODES_BY_NAME))]

    async def over_mcp() -> list[tuple[str, str]]:
        said = []
        async with session(api.svc, api.tokens["admin"]) as s:
            for tool, args, arg in integers:
                assert arg.minimum is not None and arg.maximum is not None
                said.append((await s.error(tool, {**args, arg.name: arg.maximum + 1}),
                             f"`{arg.name}` must be at most {arg.maximum}"))
                said.append((await s.error(tool, {**args, arg.name: arg.minimum - 1}),
                             f"`{arg.name}` must be at least {arg.minimum}"))
            for tool, arg in texts:
                assert arg.max_length is not None
                said.append((await s.error(tool, {arg.name: "q" * (arg.max_length + 1)}),
                             f"`{arg.name}` must be at most {arg.max_length} characters"))
        return said

    for message, expected in run(over_mcp):
        assert message == expected
    with api.client() as http:
        days, chars = CREATE_TOKEN["expires_days"].maximum, CREATE_TOKEN["name"].max_length
        assert days is not None and chars is not None
        too_many = http.get("/v1/activity", params={"limit": ACTIVITY["limit"].maximum + 1})
        too_long = http.post("/v1/tokens", json={"role": "viewer", "expires_days": days + 1})
        long_name = http.post("/v1/tokens", json={"role": "viewer", "name": "n" * (chars + 1)})
    assert error_of(too_many)["message"] == f"`limit` must be at most {ACTIVITY['limit'].maximum}"
    assert error_of(too_long)["message"] == f"`expires_days` must be at most {days}"
    assert error_of(long_name)["message"] == f"`name` must be 1 to {chars} characters"
