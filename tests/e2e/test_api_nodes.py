"""Knowledge management over HTTP: folders, documents, drafts, publishing, rollback, tree, names,
activity; who may write; and a folder-scoped token that sees nothing outside its folders."""

from __future__ import annotations

import json

import pytest

from ..support.api_support import LEAVE_QUESTION, live_api


@pytest.fixture(scope="module")
def api(tmp_path_factory):
    yield from live_api(tmp_path_factory.mktemp("api-nodes"))


def node_named(client, name: str) -> dict:
    found = client.get("/v1/nodes/search", params={"query": name}).json()
    return next(n for n in found if n["name"] == name)


def test_a_document_from_draft_to_published_to_rolled_back(api):
    with api.client("admin") as admin:
        root = next(r for r in admin.get("/v1/roots").json() if r["name"] == "default")
        folder = admin.post("/v1/folders", json={"parent_id": root["node_id"], "name": "Zeppelin office",
                                                  "summary": "Facilities", "metadata": {"owner": "ops"}})
        assert folder.status_code == 201 and folder.json()["metadata"] == {"owner": "ops"}
        folder_id = folder.json()["node_id"]
        made = admin.post("/v1/documents", json={"parent_id": folder_id, "name": "Parking",
                                                  "content": "# Parking\n\nZeppelin parking is free with a green permit."})
        assert made.status_code == 201 and made.json()["status"] == "draft" and made.json()["version_number"] == 1
        doc = made.json()["node_id"]
        assert admin.get(f"/v1/documents/{doc}").status_code == 404  # a draft is not readable yet
        published = admin.post(f"/v1/documents/{doc}/versions/1/publish").json()
        assert published["status"] == "publishing"
        assert api.svc.wait_for_publishing(120)
        assert admin.get(f"/v1/documents/{doc}").json()["content"].endswith("free with a green permit.")
        hits = admin.post("/v1/search", json={"query": "Zeppelin parking permit", "limit": 1}).json()["results"]
        assert hits[0]["title"] == "Parking"

        draft = admin.put(f"/v1/documents/{doc}/draft", json={"content": "# Parking\n\nZeppelin parking costs 5 dollars."})
        assert draft.json()["version_number"] == 2 and draft.json()["status"] == "draft"
        admin.post(f"/v1/documents/{doc}/versions/2/publish")
        assert api.svc.wait_for_publishing(120)
        versions = admin.get(f"/v1/documents/{doc}/versions").json()
        assert [(v["version_number"], v["status"]) for v in versions] == [(2, "published"), (1, "archived")]
        assert admin.get(f"/v1/documents/{doc}/versions/1").json()["content"].endswith("green permit.")
        again = admin.post(f"/v1/documents/{doc}/versions/1/publish")
        assert again.status_code == 400 and "only draft versions can be published" in again.json()["error"]["message"]

        for who in ("editor", "agent_admin"):  # rollback: admins who are people only
            with api.client(who) as other:
                refused = other.post(f"/v1/documents/{doc}/versions/1/rollback")
                assert refused.status_code == 403, who
        assert admin.post(f"/v1/documents/{doc}/versions/1/rollback").json()["status"] == "publishing"
        assert api.svc.wait_for_publishing(120)
        assert admin.get(f"/v1/documents/{doc}").json()["version_number"] == 1

        renamed = admin.put(f"/v1/documents/{doc}/name", json={"name": "Parking rules"})
        assert renamed.json()["name"] == "Parking rules"
        assert admin.put(f"/v1/folders/{doc}/name", json={"name": "x"}).status_code == 400  # a document, not a folder
        assert admin.put(f"/v1/nodes/{doc}/summary", json={"summary": "How to park"}).json()["summary"] == "How to park"
        assert admin.put(f"/v1/nodes/{doc}/metadata", json={"metadata": {"a": 1}}).json()["metadata"] == {"a": 1}
        assert admin.put(f"/v1/nodes/{doc}/metadata", json={"metadata": None}).json()["metadata"] is None
        twin = admin.post("/v1/documents", json={"parent_id": folder_id, "name": "PARKING RULES", "content": "x"})
        assert twin.status_code == 409 and twin.json()["error"]["code"] == "already_exists"

        moved = admin.post(f"/v1/nodes/{doc}/move", json={"parent_id": root["node_id"]})
        assert moved.json()["parent_id"] == root["node_id"]
        cycle = admin.post(f"/v1/nodes/{folder_id}/move", json={"parent_id": folder_id})
        assert cycle.status_code == 400 and "into itself" in cycle.json()["error"]["message"]
        children = admin.get(f"/v1/folders/{root['node_id']}/children").json()
        assert "Parking rules" in [c["name"] for c in children]

        tree = admin.get("/v1/tree", params={"root_id": folder_id}).json()
        assert tree == {"roots": [{"node_id": folder_id, "name": "Zeppelin office", "kind": "folder", "children": []}],
                        "truncated": False}
        assert admin.delete(f"/v1/documents/{doc}").json() == {"node_id": doc, "kind": "document", "documents": 1, "folders": 0}
        assert admin.delete(f"/v1/folders/{folder_id}").json()["folders"] == 1
        assert admin.get(f"/v1/documents/{doc}/versions").status_code == 404

        actions = [(row["action"], row["outcome"]) for row in admin.get("/v1/activity", params={"limit": 200}).json()]
    assert ("rollback_document_version", "permission_denied") in actions
    assert ("rollback_document_version", "ok") in actions and ("publish_completed", "ok") in actions
    assert ("create_document", "already_exists") in actions


def test_documents_without_a_parent_land_by_who_wrote_them(api):
    with api.client("editor") as person, api.client("agent_admin") as agent:
        mine = person.post("/v1/documents", json={"name": "Person note", "content": "hello"}).json()
        theirs = agent.post("/v1/documents", json={"name": "Agent note", "content": "hello"}).json()
        kb_names = {r["kb_id"]: r["name"] for r in person.get("/v1/roots").json()}
        assert kb_names[mine["kb_id"]] == "default" and kb_names[theirs["kb_id"]] == "Assistant Documents"
        assert person.delete(f"/v1/documents/{mine['node_id']}").status_code == 200
        assert agent.delete(f"/v1/documents/{theirs['node_id']}").status_code == 200


def test_readers_cannot_write(api):
    with api.client("admin") as admin:
        doc = node_named(admin, "Leave types")
        folder = node_named(admin, "travel-and-leave")
    writes = [
        ("POST", "/v1/folders", {"parent_id": folder["node_id"], "name": "New"}),
        ("POST", "/v1/documents", {"parent_id": folder["node_id"], "name": "New", "content": "x"}),
        ("PUT", f"/v1/documents/{doc['node_id']}/draft", {"content": "x"}),
        ("PUT", f"/v1/documents/{doc['node_id']}/name", {"name": "x"}),
        ("PUT", f"/v1/folders/{folder['node_id']}/name", {"name": "x"}),
        ("PUT", f"/v1/nodes/{doc['node_id']}/summary", {"summary": "x"}),
        ("PUT", f"/v1/nodes/{doc['node_id']}/metadata", {"metadata": {}}),
        ("POST", f"/v1/nodes/{doc['node_id']}/move", {"parent_id": folder["node_id"]}),
        ("POST", f"/v1/documents/{doc['node_id']}/versions/1/publish", None),
        ("POST", f"/v1/documents/{doc['node_id']}/versions/1/rollback", None),
        ("DELETE", f"/v1/documents/{doc['node_id']}", None),
        ("DELETE", f"/v1/folders/{folder['node_id']}", None),
    ]
    for who in ("viewer", "viewer_with_write_scope", "editor_read_only", "agent_none"):
        with api.client(who) as client:
            for method, path, body in writes:
                response = client.request(method, path, json=body)
                assert response.status_code == 403, (who, method, path, response.text)
            assert client.get("/v1/activity").status_code == 403  # admins only
    with api.client("admin") as admin:  # nothing changed
        assert node_named(admin, "Leave types")["parent_id"] == doc["parent_id"]
        assert admin.get(f"/v1/documents/{doc['node_id']}").json()["version_number"] == 1


def test_a_folder_scoped_token_sees_nothing_outside_its_folders(api):
    with api.client("admin") as admin:
        everything = json.dumps(admin.get("/v1/tree").json())
        tools = node_named(admin, "tools")  # outside the token's folder: tools/teams.md, tools/slack/…
        outside = next(c for c in admin.get(f"/v1/folders/{tools['node_id']}/children").json() if c["kind"] == "document")
        inside = node_named(admin, "travel-and-leave")
    assert "tools" in everything and "Cafeteria menu" in everything
    outside = outside["node_id"]

    with api.client("folder") as scoped, api.client("folder_admin") as scoped_admin:
        # Search, ask and chat find only what is inside.
        for query in ("Slack channels", "cafeteria pretzels", "Microsoft Teams"):
            results = scoped.post("/v1/search", json={"query": query, "limit": 25}).json()["results"]
            assert all("travel-and-leave" in r["source_id"] for r in results), query
            answer = scoped.post("/v1/ask", json={"query": f"What about {query}?"}).json()
            assert all("travel-and-leave" in s["source_id"] for s in answer["sources"])
        assert scoped.post("/v1/search", json={"query": "pretzels", "kb": "cafeteria"}).status_code == 404
        assert scoped.post("/v1/search", json={"query": "leave", "kb": "no-such-kb"}).json()["error"] == \
            scoped.post("/v1/search", json={"query": "leave", "kb": "cafeteria"}).json()["error"]
        chat = scoped.post("/v1/chat/completions", json={"model": "cafeteria", "messages": [{"role": "user", "content": "menu?"}]})
        assert chat.status_code == 404 and chat.json()["error"]["code"] == "model_not_found"
        chat = scoped.post("/v1/chat/completions", json={"model": "default", "messages": [{"role": "user", "content": "Slack channels?"}]})
        assert all("travel-and-leave" in s["source_id"] for s in chat.json()["sources"])
        assert scoped.get("/v1/models").json()["data"][0]["id"] == "default" and len(scoped.get("/v1/models").json()["data"]) == 1

        # Every node operation: outside reads exactly as missing.
        for path in (f"/v1/documents/{outside}", f"/v1/documents/{outside}/versions", f"/v1/documents/{outside}/versions/1",
                     f"/v1/folders/{tools['node_id']}/children"):
            response = scoped.get(path)
            assert response.status_code == 404 and response.json()["error"]["message"] == "not found", path
            assert scoped.get(path.replace(outside, "n_0000000000000000")).json() == response.json()
        assert scoped.get("/v1/tree", params={"root_id": tools["node_id"]}).status_code == 404
        assert scoped.put(f"/v1/nodes/{outside}/summary", json={"summary": "x"}).status_code == 404
        assert scoped.post(f"/v1/nodes/{outside}/move", json={"parent_id": inside["node_id"]}).status_code == 404
        assert scoped.delete(f"/v1/documents/{outside}").status_code == 404

        # Listings leave it out: roots, tree, names.
        assert [r["node_id"] for r in scoped.get("/v1/roots").json()] == [inside["node_id"]]
        scoped_tree = json.dumps(scoped.get("/v1/tree").json())
        assert "tools" not in scoped_tree and "Cafeteria" not in scoped_tree and "Leave types" in scoped_tree
        assert scoped.get("/v1/nodes/search", params={"query": "t"}).json()  # finds inside ones…
        for name in ("tools", "Cafeteria", "collaboration", "default"):  # …never outside ones
            assert scoped.get("/v1/nodes/search", params={"query": name}).json() == [], name

        # Activity: a folder-scoped admin sees only rows about nodes inside its folders.
        with api.client("admin") as admin:
            admin.get(f"/v1/documents/{outside}")
        rows = scoped_admin.get("/v1/activity", params={"limit": 1000}).json()
        assert rows and all(r["target"] is not None for r in rows)
        assert outside not in json.dumps(rows) and tools["node_id"] not in json.dumps(rows)


def test_bad_management_input(api):
    """Bounds, blanks and missing arguments are the service's to answer (400, its message, as over
    MCP); FastAPI answers only what is not of the request's shape (422: an unknown field, a value
    of the wrong JSON type), naming the field."""
    with api.client("admin") as admin:
        doc = node_named(admin, "Leave types")["node_id"]
        cases = [
            (admin.get(f"/v1/documents/{doc}/versions/0"), 400, None, "`version_number` must be at least 1"),
            (admin.get(f"/v1/documents/{doc}/versions/abc"), 422, "version_number",
             "`version_number` must be an integer"),
            (admin.get("/v1/nodes/search", params={"query": "a", "limit": 101}), 400, None,
             "`limit` must be at most 100"),
            (admin.get("/v1/nodes/search", params={"query": "a", "limit": "ten"}), 422, "limit",
             "`limit` must be an integer"),
            (admin.get("/v1/nodes/search"), 400, None, "`query` must be a non-empty string"),
            (admin.get("/v1/nodes/search", params={"query": "n" * 256}), 400, None,
             "`query` must be at most 255 characters"),
            (admin.get("/v1/activity", params={"limit": 0}), 400, None, "`limit` must be at least 1"),
            (admin.get("/v1/activity", params={"limt": 5}), 422, "limt", "unknown field `limt`"),
            (admin.post("/v1/folders", json={"name": "x", "color": "red"}), 422, "color", "unknown field `color`"),
            (admin.post("/v1/folders", json={"name": "  "}), 400, None, "a folder name must be a non-empty string"),
            (admin.post("/v1/folders", json={}), 400, None, "a folder name must be a non-empty string"),
            (admin.post("/v1/folders", json=["x"]), 422, None, "the body must be a JSON object"),
            (admin.put(f"/v1/nodes/{doc}/metadata", json={"metadata": [1, 2]}), 422, "metadata",
             "`metadata` must be a JSON object"),
            (admin.put(f"/v1/nodes/{doc}/metadata", json={"metadata": {"k": "v" * 70_000}}), 400, None,
             "`metadata` must be at most 65536 characters as JSON"),
            (admin.put(f"/v1/nodes/{doc}/summary", json={}), 400, None, "`summary` is required (null clears it)"),
            (admin.put(f"/v1/nodes/{doc}/metadata", json={}), 400, None, "`metadata` is required (null clears it)"),
            (admin.post("/v1/documents", json={"name": "x", "content": 5}), 422, "content", "`content` must be a string"),
            (admin.get(f"/v1/documents/n_{'0' * 100}"), 404, None, "not found"),  # 64 characters was a 422
            (admin.delete(f"/v1/tokens/tok_{'0' * 100}"), 404, None, "token not found"),
            (admin.post("/v1/tokens", json={"role": "owner"}), 400, None, "`role` must be viewer, editor or admin"),
            (admin.post("/v1/tokens", json={"role": "viewer", "expires_days": 0}), 400, None,
             "`expires_days` must be at least 1"),
        ]
    for response, status, param, message in cases:
        assert response.status_code == status, (response.request.url, response.text)
        error = response.json()["error"]
        assert (error["param"], error["message"]) == (param, message), (response.request.url, error)
        assert "Traceback" not in response.text


def test_ask_and_search_are_recorded_without_their_text(api):
    with api.client("admin") as admin:
        admin.post("/v1/ask", json={"query": LEAVE_QUESTION})
        rows = admin.get("/v1/activity", params={"limit": 5}).json()
    ask = next(r for r in rows if r["action"] == "ask")
    assert ask["actor"].startswith("person:") and ask["outcome"] == "ok" and ask["detail"]["token_id"].startswith("tok_")
    assert "annual" not in json.dumps(rows)


def test_admins_who_are_people_manage_tokens_while_the_server_runs(api):
    with api.client("admin") as admin:
        made = admin.post("/v1/tokens", json={"role": "viewer", "name": "Kiosk", "expires_days": 30})
        assert made.status_code == 201, made.text
        info = made.json()
        assert info["token"].startswith("rag_") and info["role"] == "viewer" and info["active"] is True
        assert info["scopes"] == ["knowledge:read"] and info["access"] == "all"
        with api.client(info["token"]) as kiosk:
            assert kiosk.post("/v1/search", json={"query": "leave"}).status_code == 200
            assert kiosk.post("/v1/tokens", json={"role": "admin"}).status_code == 403  # a viewer
            listed = {t["token_id"]: t for t in admin.get("/v1/tokens").json()}
            assert "token" not in listed[info["token_id"]] and listed[info["token_id"]]["name"] == "Kiosk"
            assert admin.delete(f"/v1/tokens/{info['token_id']}").json()["active"] is False
            assert kiosk.post("/v1/search", json={"query": "leave"}).status_code == 401
        assert admin.delete("/v1/tokens/tok_0000000000000000").status_code == 404
        assert admin.post("/v1/tokens", json={"role": "viewer", "workspace": "other"}).status_code == 422
    for who in ("agent_admin", "folder_admin", "editor"):  # never agents, never a narrower admin
        with api.client(who) as other:
            assert other.post("/v1/tokens", json={"role": "viewer"}).status_code == 403, who
            assert other.get("/v1/tokens").status_code == 403, who
