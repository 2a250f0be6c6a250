"""A folder-scoped token sees nothing outside its folders, through any operation: outside reads
exactly as missing (the same "not found"), and listings leave it out without a trace."""

from __future__ import annotations

import pytest

from rag.errors import InvalidArgument, NotFound

LEAVE_QUESTION = "How much annual leave do I earn?"


def walk(node: dict):
    """Every node id of a get_folder_tree payload node."""
    yield node["node_id"]
    for child in node.get("children", []):
        yield from walk(child)


@pytest.fixture
def world(svc, admin, small_tree, principal_for):
    """The small handbook tree, and an agent allowed tools/ only (given by its path)."""
    svc.ingest_directory(admin, small_tree)
    agent = principal_for("editor", agent=True, folders=("tools",))
    root = svc.knowledge_base(admin, "default").root_id
    folders = {n.name: n.node_id for n in svc.list_children(admin, root)}
    inside = set(walk(svc.get_folder_tree(admin, folders["tools"]).payload()["roots"][0]))
    outside_doc = svc.search(admin, LEAVE_QUESTION, 1).hits[0].node_id
    return agent, root, folders, inside, outside_doc


def test_search_lanes_answers_and_reads_stay_inside(svc, admin, world):
    agent, root, folders, inside, outside_doc = world
    assert svc.get_root_nodes(agent)[0].node_id == folders["tools"] and len(svc.get_root_nodes(agent)) == 1
    hits = svc.search(agent, LEAVE_QUESTION, 10).hits
    assert hits and all(h.source.startswith("fs:tools/") for h in hits)
    assert set(h.node_id for h in svc.search_documents(agent, LEAVE_QUESTION, 25)) <= inside
    kb_search = svc.search_knowledge_base(agent, LEAVE_QUESTION, top_k=50)
    assert kb_search.hits and {h.node_id for h in kb_search.hits} <= inside
    for question in (LEAVE_QUESTION, "How do I get started with Slack?"):
        sources = svc.ask(agent, question).sources
        assert all(s.source_id.startswith("fs:default:default:tools/") for s in sources)
    assert sources  # the Slack question is answered, from inside
    assert svc.ask(admin, LEAVE_QUESTION).sources[0].source_id.endswith("travel-and-leave/leave.md")

    outside = [
        lambda: svc.get_document(agent, outside_doc),
        lambda: svc.get_document_versions(agent, outside_doc),
        lambda: svc.get_document_version(agent, outside_doc, 1),
        lambda: svc.list_children(agent, folders["travel-and-leave"]),
        lambda: svc.list_children(agent, root),
        lambda: svc.get_folder_tree(agent, root),
        lambda: svc.update_document(agent, outside_doc, "# Mine now\n"),
        lambda: svc.rename_document(agent, outside_doc, "Mine"),
        lambda: svc.set_metadata(agent, outside_doc, {"a": 1}),
        lambda: svc.delete_document(agent, outside_doc),
        lambda: svc.delete_folder(agent, folders["travel-and-leave"]),
        lambda: svc.create_document(agent, folders["travel-and-leave"], "Planted", "# Planted\n"),
        lambda: svc.get_document(agent, "n_doesnotexist00"),  # missing reads the same
    ]
    for call in outside:
        with pytest.raises(NotFound, match="^not found$"):
            call()
    assert svc.get_current_node(agent, outside_doc).node_id == outside_doc  # context, not a scoped read
    assert svc.get_document(admin, outside_doc).name  # it is still there for those who may see it


def test_listings_and_moves_stay_inside(svc, admin, world):
    agent, root, folders, inside, outside_doc = world
    tree = svc.get_folder_tree(agent).payload()
    assert [r["node_id"] for r in tree["roots"]] == [folders["tools"]]
    assert set(walk(tree["roots"][0])) == inside and outside_doc not in inside
    assert svc.search_nodes_by_name(agent, "leave") == [] and svc.search_nodes_by_name(admin, "leave")
    assert svc.search_nodes_by_name(agent, "slack")

    slack_doc = next(n.node_id for n in svc.search_nodes_by_name(agent, "slack") if n.kind == "document")
    for node, target in ((outside_doc, folders["tools"]), (slack_doc, folders["travel-and-leave"]), (slack_doc, root)):
        with pytest.raises(NotFound, match="^not found$"):
            svc.move_node(agent, node, target)
    archive = svc.create_folder(agent, folders["tools"], "Archive")
    assert svc.move_node(agent, slack_doc, archive.node_id).parent_id == archive.node_id  # inside its branch: fine
    assert svc.get_current_node(agent, slack_doc).node_id == slack_doc
    with pytest.raises(InvalidArgument, match="^`parent_id` is required: this token may only write inside its folders$"):
        svc.create_document(agent, None, "Nowhere", "# Nowhere\n")


def test_a_folder_scoped_admin_reads_only_the_history_of_its_folders(svc, admin, world, principal_for):
    agent, _, folders, inside, outside_doc = world
    svc.get_document(admin, outside_doc)
    slack_doc = next(n.node_id for n in svc.search_nodes_by_name(agent, "slack") if n.kind == "document")
    svc.set_summary(agent, slack_doc, "Chat")
    everything = {row.target for row in svc.activity(admin, 1000)}
    assert outside_doc in everything and slack_doc in everything
    scoped_admin = principal_for("admin", folders=("tools",))
    rows = svc.activity(scoped_admin, 1000)
    assert rows and {row.target for row in rows} <= inside and slack_doc in {row.target for row in rows}
