"""The document and folder tools of knowledge_base_mcp_server.md through the SDK's in-memory
client, on a real store with real handbook pages: drafts and publishing, versions, folders, names,
metadata, moves, deletes, access and the current node, with their messages word for word."""

from __future__ import annotations

import pytest

from rag.settings import Settings

from ..support.mcp_support import LEAVE_QUESTION, handbook_world, run, session, token

pytestmark = pytest.mark.filterwarnings("ignore:.*ReadOnly. qualifier:UserWarning")


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    yield from handbook_world(tmp_path_factory.mktemp("mcp_nodes"), Settings())


def test_agent_drafts_publishes_and_versions(world):
    svc = world.svc
    body = "# Quokka rota\n\nThe zorblax quokka rota starts every Monday at nine.\n"
    question = "zorblax quokka rota Monday"

    async def main():
        async with session(svc, world.agent) as s:
            made = await s.ok("create_document", {"name": "Quokka rota", "content": body, "metadata": {"owner": "ops"}})
            node = made["node_id"]
            roots = await s.ok("get_root_nodes")
            unseen = (await s.ok("search_documents", {"query": question}))["results"]
            unseen_k = (await s.ok("search_knowledge", {"query": question}))["results"]
            hidden = await s.error("get_document", {"node_id": node})
            drafts = await s.ok("get_document_versions", {"node_id": node})
            draft = await s.ok("get_document_version", {"node_id": node, "version_number": 1})
            publishing = await s.ok("publish_document_version", {"node_id": node, "version_number": 1})
            assert svc.wait_for_publishing(120)
            published = await s.ok("get_document_versions", {"node_id": node})
            reads = [await s.ok("get_document", {"node_id": node}) for _ in range(2)]
            found = (await s.ok("search_documents", {"query": question}))["results"]
            found_k = (await s.ok("search_knowledge", {"query": question}))["results"]
            by_knowledge_id = await s.error("get_document", {"node_id": found_k[0]["source_id"]})

            v2 = await s.ok("update_document", {"node_id": node, "content": body + "\nDraft two.\n"})
            v2_again = await s.ok("update_document", {"node_id": node, "content": body + "\nDraft two, edited.\n"})
            history = await s.ok("get_document_versions", {"node_id": node})
            still_live = await s.ok("get_document", {"node_id": node})
            await s.ok("publish_document_version", {"node_id": node, "version_number": 2})
            assert svc.wait_for_publishing(120)
            after = await s.ok("get_document_versions", {"node_id": node})
            archived = await s.error("publish_document_version", {"node_id": node, "version_number": 1})
            again = await s.ok("publish_document_version", {"node_id": node, "version_number": 2})
            gone = await s.error("get_document_version", {"node_id": node, "version_number": 9})
        return locals()

    r = run(main)
    assert r["made"]["status"] == "draft" and r["made"]["version_number"] == 1
    assistant = next(n for n in r["roots"]["roots"] if n["name"] == "Assistant Documents")
    assert r["made"]["parent_id"] == assistant["node_id"]  # no parent: the agent's writes land there
    node = r["made"]["node_id"]
    assert node not in {h["node_id"] for h in r["unseen"]} and "Quokka rota" not in {h["title"] for h in r["unseen_k"]}
    assert r["hidden"] == "not found"
    assert [(v["version_number"], v["status"]) for v in r["drafts"]["versions"]] == [(1, "draft")]
    assert r["draft"]["content"] == body and r["draft"]["status"] == "draft"
    assert r["publishing"]["status"] == "publishing"  # returned at once; indexed in the background
    assert r["published"]["versions"][0]["status"] == "published" and r["published"]["versions"][0]["published_at"]
    assert [d["citation_count"] for d in r["reads"]] == [1, 2] and r["reads"][0]["content"] == body
    assert r["reads"][0]["metadata"] == {"owner": "ops"}
    assert r["found"][0]["node_id"] == node and r["found_k"][0]["title"] == "Quokka rota"
    assert r["by_knowledge_id"] == "not found"  # a knowledge id is never a node id

    # Every edit is a version of its own: the second draft does not overwrite the first.
    assert (r["v2"]["version_number"], r["v2_again"]["version_number"], r["v2_again"]["status"]) == (2, 3, "draft")
    assert [(v["version_number"], v["status"]) for v in r["history"]["versions"]] == [
        (3, "draft"), (2, "draft"), (1, "published")]
    assert "content" not in r["history"]["versions"][0]  # no bodies in the history
    assert r["still_live"]["version_number"] == 1
    assert [(v["version_number"], v["status"]) for v in r["after"]["versions"]] == [
        (3, "draft"), (2, "published"), (1, "archived")]
    assert r["archived"] == "version 1 is archived; only draft versions can be published"
    assert r["again"]["status"] == "published"  # publishing a published version is a no-op
    assert r["gone"] == "version 9 not found"
    reads = [a for a in svc.activity(world.admin, 200) if a.action == "get_document" and a.target == node]
    assert reads[0].detail["citation_count"] == 3 and reads[0].outcome == "ok"


def test_folders_names_metadata_moves_and_deletes(world):
    async def main():
        async with session(world.svc, world.agent) as s:
            team = await s.ok("create_folder", {"name": "Team notes", "summary": "Notes", "metadata": {"a": 1}})
            sub = await s.ok("create_folder", {"parent_id": team["node_id"], "name": "Archive"})
            doc = await s.ok("create_document", {"parent_id": team["node_id"], "name": "Standup", "content": "# S\n"})
            taken = await s.error("create_document", {"parent_id": team["node_id"], "name": "standup", "content": "x"})
            children = await s.ok("list_children", {"parent_id": team["node_id"]})
            not_folder = await s.error("list_children", {"parent_id": doc["node_id"]})
            tree = await s.ok("get_folder_tree", {"root_id": team["node_id"]})
            named = await s.ok("search_nodes_by_name", {"query": "TEAM no"})
            renamed = await s.ok("rename_folder", {"node_id": team["node_id"], "name": "Team journal"})
            retitled = await s.ok("rename_document", {"node_id": doc["node_id"], "name": "Daily standup"})
            summary = await s.ok("set_summary", {"node_id": doc["node_id"], "summary": "What we did"})
            cleared = await s.ok("set_summary", {"node_id": doc["node_id"], "summary": None})
            must_say = await s.error("set_summary", {"node_id": doc["node_id"]})
            meta = await s.ok("set_metadata", {"node_id": doc["node_id"], "metadata": {"owner": "a", "dept": "b"}})
            replaced = await s.ok("set_metadata", {"node_id": doc["node_id"], "metadata": {"owner": "c"}})
            no_meta = await s.ok("set_metadata", {"node_id": doc["node_id"], "metadata": None})
            meta_must_say = await s.error("set_metadata", {"node_id": doc["node_id"]})
            bad_meta = await s.error("set_metadata", {"node_id": doc["node_id"], "metadata": [1]})
            moved = await s.ok("move_node", {"node_id": doc["node_id"], "parent_id": sub["node_id"]})
            cycle = await s.error("move_node", {"node_id": team["node_id"], "parent_id": sub["node_id"]})
            root = next(n for n in (await s.ok("get_root_nodes"))["roots"] if n["name"] == "Assistant Documents")
            fixed = await s.error("rename_folder", {"node_id": root["node_id"], "name": "Mine"})
            extra = await s.ok("create_document", {"parent_id": team["node_id"], "name": "Extra", "content": "x"})
            deleted_doc = await s.ok("delete_document", {"node_id": extra["node_id"]})
            deleted = await s.ok("delete_folder", {"node_id": team["node_id"]})
            after = await s.error("get_document_versions", {"node_id": doc["node_id"]})
        return locals()

    r = run(main)
    assert r["team"]["summary"] == "Notes" and r["team"]["metadata"] == {"a": 1} and r["team"]["kind"] == "folder"
    assert r["taken"] == "a node named 'standup' already exists in this folder"
    children = r["children"]["children"]
    assert [(c["name"], c["kind"]) for c in children] == [("Archive", "folder"), ("Standup", "document")]
    assert children[1]["draft_version"] == 1 and children[1]["published_version"] is None
    assert r["not_folder"] == "`parent_id` is a document, not a folder"
    (top,) = r["tree"]["roots"]
    assert top["name"] == "Team notes" and [c["name"] for c in top["children"]] == ["Archive", "Standup"]
    assert "children" not in top["children"][1] and r["tree"]["truncated"] is False
    assert r["named"]["results"][0]["path"] == "Assistant Documents/Team notes"
    assert r["renamed"]["name"] == "Team journal" and r["retitled"]["name"] == "Daily standup"
    assert r["summary"]["summary"] == "What we did" and r["cleared"]["summary"] is None
    assert r["must_say"] == "`summary` is required (null clears it)"
    assert r["meta"]["metadata"] == {"owner": "a", "dept": "b"} and r["replaced"]["metadata"] == {"owner": "c"}
    assert r["no_meta"]["metadata"] is None and r["meta_must_say"] == "`metadata` is required (null clears it)"
    assert r["bad_meta"] == "`metadata` must be a JSON object or null"
    assert r["moved"]["parent_id"] == r["sub"]["node_id"]
    assert r["cycle"] == "a folder cannot be moved into itself or into one of its sub-folders"
    assert r["fixed"] == "the root folder of a knowledge base cannot be renamed, moved or deleted"
    assert r["deleted_doc"] == {"node_id": r["extra"]["node_id"], "kind": "document", "documents": 1, "folders": 0}
    assert r["deleted"] == {"node_id": r["team"]["node_id"], "kind": "folder", "documents": 1, "folders": 2}
    assert r["after"] == "not found"  # the whole subtree went with the folder


def test_access_roles_tokens_and_current_node(world):
    svc = world.svc
    root = svc.knowledge_base(world.admin, "default").root_id
    doc = svc.search(world.admin, LEAVE_QUESTION, 1).hits[0].node_id
    revoked = token(svc, access="all")
    svc.revoke_token(svc.authenticate(revoked).token_id)
    node_calls = [
        ("search_documents", {"query": "leave"}), ("get_document", {"node_id": doc}),
        ("get_document_versions", {"node_id": doc}), ("get_document_version", {"node_id": doc, "version_number": 1}),
        ("list_children", {"parent_id": root}), ("get_folder_tree", {}), ("search_nodes_by_name", {"query": "leave"}),
        ("create_document", {"name": "x", "content": "x"}), ("create_folder", {"parent_id": root, "name": "x"}),
        ("update_document", {"node_id": doc, "content": "x"}),
        ("publish_document_version", {"node_id": doc, "version_number": 1}),
        ("rename_document", {"node_id": doc, "name": "x"}), ("rename_folder", {"node_id": root, "name": "x"}),
        ("delete_document", {"node_id": doc}), ("delete_folder", {"node_id": root}),
        ("move_node", {"node_id": doc, "parent_id": root}), ("set_summary", {"node_id": doc, "summary": "x"}),
        ("set_metadata", {"node_id": doc, "metadata": None}),
    ]

    async def main():
        async with session(svc, world.blind) as s:
            refused = {name: await s.error(name, args) for name, args in node_calls}
            blind_roots = await s.ok("get_root_nodes")
            blind_current = await s.ok("get_current_node", current_node_id=doc)
        async with session(svc, world.viewer) as s:
            viewer_write = await s.error("create_document", {"name": "x", "content": "x"})
            viewer_read = await s.ok("get_document", {"node_id": doc})
        async with session(svc, world.person) as s:
            current = await s.ok("get_current_node", current_node_id=doc)
            nothing = await s.ok("get_current_node")
            unknown = await s.ok("get_current_node", current_node_id="n_doesnotexist00")
        async with session(svc, revoked) as s:
            revoked_msgs = [await s.error("get_root_nodes"), await s.error("search_knowledge", {"query": "leave"})]
        async with session(svc, "rag_not-a-real-token") as s:
            invalid = await s.error("search_knowledge_base", {"query": "leave"})
        async with session(svc, None) as s:
            no_token = await s.error("get_current_node")
        return locals()

    r = run(main)
    assert r["refused"] == {name: "no knowledge base access" for name, _ in node_calls}
    # get_current_node is conversation context: it never fails and never enforces scope.
    assert r["blind_roots"] == {"roots": []} and r["blind_current"] == {"node_id": doc}
    assert r["viewer_write"] == "this needs the editor role" and r["viewer_read"]["node_id"] == doc
    assert r["current"] == {"node_id": doc} and r["nothing"] == {"node_id": None} and r["unknown"] == {"node_id": "n_doesnotexist00"}
    assert r["revoked_msgs"] == ["invalid or expired token", "Tool failed: invalid or expired token"]
    assert r["invalid"] == r["no_token"] == "invalid or expired token"
