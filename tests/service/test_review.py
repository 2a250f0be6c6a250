"""The reviewer's reads (rag/service/content/review.py), each with its access rule and its HTTP endpoint:
drafts awaiting review in a knowledge base, the difference between two versions, one node's history."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from rag.api import create_app
from rag.errors import NotFound, PermissionDenied


@pytest.fixture
def world(svc, admin, principal_for):
    """A `policies` folder with a published `leave` document, an agent's draft of it, a person's
    new document (draft only), and an `other` folder with an agent's document."""
    kb = svc.knowledge_base(admin, "default", create=True)
    policies = svc.create_folder(admin, kb.root_id, "policies")
    other = svc.create_folder(admin, kb.root_id, "other")
    leave = svc.create_document(admin, policies.node_id, "leave", "# Leave\n\nFour hours a pay period.\n")
    svc.publish_version(admin, leave.node_id, 1)
    agent = principal_for("editor", agent=True, access="all")
    person = principal_for("editor")
    svc.update_document(agent, leave.node_id, "# Leave\n\nSix hours a pay period.\n")
    fresh = svc.create_document(person, policies.node_id, "travel", "# Travel\n\nBook early.\n")
    elsewhere = svc.create_document(agent, other.node_id, "menu", "# Menu\n\nPretzels.\n")
    return {"policies": policies.node_id, "other": other.node_id, "leave": leave.node_id, "travel": fresh.node_id,
            "menu": elsewhere.node_id, "agent": agent, "person": person}


def test_drafts_newest_first_with_their_authors_agents_marked(svc, world):
    drafts = svc.list_drafts(world["person"])
    assert [(d.node_id, d.version_number) for d in drafts] == [
        (world["menu"], 1), (world["travel"], 1), (world["leave"], 2)]
    by_node = {d.node_id: d for d in drafts}
    assert by_node[world["leave"]].author_is_agent and by_node[world["leave"]].author == world["agent"].actor
    assert by_node[world["leave"]].published_version == 1 and by_node[world["leave"]].path == "default/policies/leave"
    assert not by_node[world["travel"]].author_is_agent and by_node[world["travel"]].author == world["person"].actor
    svc.publish_version(world["person"], world["leave"], 2)  # reviewed: no longer waiting
    assert world["leave"] not in {d.node_id for d in svc.list_drafts(world["person"])}


def test_drafts_are_for_editors_and_admins_within_their_folders(svc, world, principal_for):
    with pytest.raises(PermissionDenied, match="editor role"):
        svc.list_drafts(principal_for("viewer", write=False))
    scoped = principal_for("editor", folders=(world["policies"],))
    assert {d.node_id for d in svc.list_drafts(scoped)} == {world["leave"], world["travel"]}
    assert [d.path for d in svc.list_drafts(scoped) if d.node_id == world["leave"]] == ["policies/leave"]
    with pytest.raises(NotFound, match="knowledge base not found"):
        svc.list_drafts(world["person"], "nowhere")


def test_diff_between_any_two_versions_for_anyone_who_may_read(svc, world, principal_for):
    viewer = principal_for("viewer", write=False)
    diff = svc.diff_versions(viewer, world["leave"], 1, 2)
    assert (diff.from_status, diff.to_status, diff.added, diff.removed) == ("published", "draft", 1, 1)
    assert "-Four hours a pay period." in diff.lines and "+Six hours a pay period." in diff.lines
    assert svc.diff_versions(viewer, world["leave"], 2, 2).lines == []
    with pytest.raises(NotFound, match="version 9 not found"):
        svc.diff_versions(viewer, world["leave"], 1, 9)
    with pytest.raises(NotFound, match="^not found$"):  # outside the caller's folders: as if missing
        svc.diff_versions(principal_for("viewer", write=False, folders=(world["other"],)), world["leave"], 1, 2)


def test_a_documents_activity_for_editors_and_admins_who_see_it(svc, world, admin, principal_for):
    svc.get_document(principal_for("viewer", write=False), world["leave"])  # one citation
    found = svc.document_activity(world["person"], world["leave"])
    assert found.citation_count == 1
    actions = [(e.action, e.actor_is_agent) for e in found.entries]
    assert ("update_document", True) in actions and ("get_document", False) in actions
    assert actions[0] == ("get_document", False)  # newest first
    update = next(e for e in found.entries if e.action == "update_document")
    assert update.detail["version_number"] == 2
    with pytest.raises(PermissionDenied, match="editor role"):
        svc.document_activity(principal_for("viewer", write=False), world["leave"])
    with pytest.raises(NotFound, match="^not found$"):
        svc.document_activity(principal_for("editor", folders=(world["other"],)), world["leave"])


def test_the_three_endpoints(svc, world, principal_for):
    def bearer(role: str, **kw) -> dict[str, str]:
        secret, _ = svc.create_token("default", role, ["knowledge:write"] if role != "viewer" else [],
                                     kw.get("access"), kw.get("folders", ()), False)
        return {"Authorization": f"Bearer {secret}"}

    editor, viewer = bearer("editor"), bearer("viewer")
    with TestClient(create_app(service=svc)) as client:
        drafts = client.get("/v1/drafts", params={"kb": "default"}, headers=editor)
        assert drafts.status_code == 200 and drafts.json()[-1]["author_is_agent"] is True
        assert client.get("/v1/drafts", headers=viewer).status_code == 403
        diff = client.get(f"/v1/documents/{world['leave']}/diff", params={"from_version": 1, "to_version": 2},
                          headers=viewer)
        assert diff.status_code == 200 and diff.json()["added"] == 1
        missing = client.get(f"/v1/documents/{world['leave']}/diff", params={"from_version": 1}, headers=viewer)
        assert missing.status_code == 400 and "to_version" in missing.json()["error"]["message"]
        activity = client.get(f"/v1/nodes/{world['leave']}/activity", headers=editor)
        assert activity.status_code == 200 and activity.json()["kind"] == "document"
        refused = client.get(f"/v1/nodes/{world['leave']}/activity", headers=viewer)
        assert refused.status_code == 403 and refused.json()["error"]["message"] == "this needs the editor role"
