"""The document and folder operations of knowledge_base_mcp_server.md, through the service, with
real tokens: drafts, publishing, versions, rollback, names, summaries, metadata, moves, deletes."""

from __future__ import annotations

import pytest
from sqlalchemy import select

from rag.errors import AlreadyExists, InvalidArgument, NotFound, PermissionDenied
from rag.service.content.edits import ASSISTANT_KB
from rag.service.content.tree import ROOT_FIXED
from rag.store.models import Chunk, Node

BODY = "# Quokka rota\n\nThe quokka rota changes every Monday at nine, says the marsupial desk.\n"
BODY2 = "# Quokka rota\n\nThe quokka rota changes every Friday at noon, says the wallaby desk.\n"


def publish(svc, who, node_id: str, number: int) -> None:
    """publish_document_version answers at once; the test then waits for the indexing."""
    assert svc.publish_document_version(who, node_id, number).status == "publishing"
    assert svc.wait_for_publishing(120)


def statuses(svc, who, node_id: str) -> list[tuple[int, str]]:
    return [(v.version_number, v.status) for v in svc.get_document_versions(who, node_id)]


def test_an_agents_draft_is_unseen_by_search_until_it_publishes_it(svc, principal_for):
    agent = principal_for("editor", agent=True, access="all")
    doc = svc.create_document(agent, None, "Quokka rota", BODY, summary="Who feeds the quokkas")
    roots = {n.name: n.node_id for n in svc.get_root_nodes(agent)}
    assert doc.parent_id == roots[ASSISTANT_KB]  # an agent's write without a parent, made on first use
    assert (doc.version_number, doc.status) == (1, "draft")
    assert svc.search_documents(agent, "When does the quokka rota change?") == []
    with pytest.raises(NotFound, match="^not found$"):
        svc.get_document(agent, doc.node_id)

    publish(svc, agent, doc.node_id, 1)
    hits = svc.search_documents(agent, "When does the quokka rota change?")
    assert hits[0].node_id == doc.node_id and hits[0].version_number == 1  # a node id get_document takes
    assert svc.publish_document_version(agent, doc.node_id, 1).status == "published"  # again: a no-op
    first, second = svc.get_document(agent, doc.node_id), svc.get_document(agent, doc.node_id)
    assert (first.citation_count, second.citation_count) == (1, 2)
    assert second.content == BODY and second.summary == "Who feeds the quokkas"

    assert svc.create_folder(agent, None, "Notes").parent_id == roots[ASSISTANT_KB]  # the same one again
    person = principal_for("editor")
    default_root = svc.knowledge_base(person, "default").root_id
    assert svc.create_document(person, None, "Person note", BODY).parent_id == default_root


def test_update_publish_and_the_version_history(svc, principal_for):
    editor = principal_for("editor")
    doc = svc.create_document(editor, None, "Quokka rota", BODY)
    svc.update_document(editor, doc.node_id, BODY2)  # every edit is a new version, even over a draft
    assert statuses(svc, editor, doc.node_id) == [(2, "draft"), (1, "draft")]
    assert svc.get_document_version(editor, doc.node_id, 2).content == BODY2
    publish(svc, editor, doc.node_id, 2)

    draft = svc.update_document(editor, doc.node_id, BODY)  # the newest is published: a new draft
    assert (draft.version_number, draft.status) == (3, "draft")
    assert svc.get_document(editor, doc.node_id).version_number == 2  # the published one stays live
    publish(svc, editor, doc.node_id, 3)
    history = svc.get_document_versions(editor, doc.node_id)
    assert [(v.version_number, v.status) for v in history] == [(3, "published"), (2, "archived"), (1, "draft")]
    assert "content" not in history[0].payload() and history[0].published_at and history[1].archived_at
    assert svc.get_document_version(editor, doc.node_id, 2).payload()["content"] == BODY2

    with pytest.raises(InvalidArgument, match="^version 2 is archived; only draft versions can be published$"):
        svc.publish_document_version(editor, doc.node_id, 2)
    with pytest.raises(NotFound, match="^version 7 not found$"):
        svc.get_document_version(editor, doc.node_id, 7)
    for bad, message in ((0, "`version_number` must be at least 1"), ("2", "`version_number` must be an integer")):
        with pytest.raises(InvalidArgument, match=f"^{message}$"):
            svc.publish_document_version(editor, doc.node_id, bad)
    with pytest.raises(InvalidArgument, match="^`content` must be a string$"):
        svc.update_document(editor, doc.node_id, None)


def test_rollback_is_for_people_who_are_admins(svc, principal_for):
    admin, editor = principal_for("admin"), principal_for("editor")
    agent_admin = principal_for("admin", agent=True, access="all")
    doc = svc.create_document(admin, None, "Quokka rota", BODY)
    publish(svc, admin, doc.node_id, 1)
    svc.update_document(admin, doc.node_id, BODY2)
    publish(svc, admin, doc.node_id, 2)
    svc.update_document(admin, doc.node_id, BODY + "\nA draft nobody published.\n")

    with pytest.raises(PermissionDenied, match="^this needs the admin role$"):
        svc.rollback_document_version(editor, doc.node_id, 1)
    with pytest.raises(PermissionDenied, match="never for agents"):
        svc.rollback_document_version(agent_admin, doc.node_id, 1)
    with pytest.raises(InvalidArgument, match="rollback returns to an archived"):
        svc.rollback_document_version(admin, doc.node_id, 3)  # a draft is published, not rolled back to

    assert svc.rollback_document_version(admin, doc.node_id, 1).status == "publishing"
    assert svc.wait_for_publishing(120)
    assert statuses(svc, admin, doc.node_id) == [(3, "draft"), (2, "archived"), (1, "published")]
    assert svc.get_document(admin, doc.node_id).content == BODY
    assert [h.version_number for h in svc.search_documents(admin, "quokka rota Monday marsupial")] == [1]
    assert svc.rollback_document_version(admin, doc.node_id, 1).status == "published"  # already: a no-op


def test_names_summaries_and_metadata_apply_at_once(svc, principal_for):
    editor = principal_for("editor")
    folder = svc.create_folder(editor, None, "Rotas", summary="Who does what")
    doc = svc.create_document(editor, folder.node_id, "Quokka rota", BODY, metadata={"owner": "ops"})
    other = svc.create_document(editor, folder.node_id, "Wallaby rota", BODY2)
    with pytest.raises(AlreadyExists, match="^a node named 'QUOKKA ROTA' already exists in this folder$"):
        svc.rename_document(editor, other.node_id, "QUOKKA ROTA")
    with pytest.raises(AlreadyExists):
        svc.create_folder(editor, folder.node_id, "  quokka   rota ")  # documents and folders share names
    assert svc.rename_document(editor, doc.node_id, "QUOKKA rota").name == "QUOKKA rota"  # its own name: fine
    with pytest.raises(InvalidArgument, match="^`node_id` is a document, not a folder$"):
        svc.rename_folder(editor, doc.node_id, "Elsewhere")
    svc.rename_folder(editor, folder.node_id, "Team rotas")

    listed = {n.name: n for n in svc.list_children(editor, folder.node_id)}
    assert listed["QUOKKA rota"].metadata == {"owner": "ops"} and listed["QUOKKA rota"].draft_version == 1
    assert listed["QUOKKA rota"].published_version is None
    found = svc.search_nodes_by_name(editor, "quokka")
    assert [(n.node_id, n.path) for n in found] == [(doc.node_id, "default/Team rotas/QUOKKA rota")]

    assert svc.set_summary(editor, doc.node_id, "Monday feeding").summary == "Monday feeding"
    assert svc.set_summary(editor, doc.node_id, None).summary is None
    assert svc.set_metadata(editor, doc.node_id, {"dept": "hr", "tags": ["a"]}).metadata == {"dept": "hr", "tags": ["a"]}
    assert svc.set_metadata(editor, folder.node_id, {"k": 1}).metadata == {"k": 1}  # folders too
    svc.set_metadata(editor, doc.node_id, None)  # null clears every key
    assert {n.name: n.metadata for n in svc.list_children(editor, folder.node_id)}["QUOKKA rota"] is None
    with pytest.raises(InvalidArgument, match="^`metadata` must be a JSON object or null$"):
        svc.set_metadata(editor, doc.node_id, ["not", "an", "object"])

    root = svc.knowledge_base(editor, "default").root_id
    for call in (lambda: svc.rename_folder(editor, root, "x"), lambda: svc.delete_folder(editor, root)):
        with pytest.raises(InvalidArgument, match=f"^{ROOT_FIXED}$"):
            call()


def test_move_refuses_cycles_and_clashes_and_carries_a_document_into_another_knowledge_base(svc, principal_for):
    editor = principal_for("editor")
    a = svc.create_folder(editor, None, "A")
    b = svc.create_folder(editor, a.node_id, "B")
    c = svc.create_folder(editor, b.node_id, "C")
    for target in (a, c):
        with pytest.raises(InvalidArgument, match="^a folder cannot be moved into itself or into one of its sub-folders$"):
            svc.move_node(editor, a.node_id, target.node_id)
    doc = svc.create_document(editor, b.node_id, "Quokka rota", BODY)
    svc.create_document(editor, a.node_id, "quokka ROTA", BODY2)
    with pytest.raises(AlreadyExists, match="already exists in the target folder"):
        svc.move_node(editor, doc.node_id, a.node_id)
    with pytest.raises(InvalidArgument, match="^`parent_id` is a document, not a folder$"):
        svc.move_node(editor, c.node_id, doc.node_id)
    publish(svc, editor, doc.node_id, 1)

    handbook = svc.knowledge_base(editor, "handbook", create=True)
    moved = svc.move_node(editor, b.node_id, handbook.root_id)  # B, with C and the document inside
    assert moved.kb_id == handbook.id and moved.parent_id == handbook.root_id
    for lanes in (("vector",), ("text",)):
        there = svc.search(editor, "quokka rota Monday marsupial", 5, kb_name="handbook", lanes=lanes).hits
        assert there[0].node_id == doc.node_id and there[0].source == "kb:handbook/B/Quokka rota"
        here = svc.search(editor, "quokka rota Monday marsupial", 5, kb_name="default", lanes=lanes).hits
        assert doc.node_id not in {h.node_id for h in here}
    tree = svc.get_folder_tree(editor, handbook.root_id).payload()["roots"][0]
    assert tree["children"] == [{"node_id": b.node_id, "name": "B", "kind": "folder", "children": [
        {"node_id": c.node_id, "name": "C", "kind": "folder", "children": []},
        {"node_id": doc.node_id, "name": "Quokka rota", "kind": "document"},
    ]}]


def test_delete_folder_removes_the_whole_subtree_from_both_lanes(svc, principal_for):
    editor = principal_for("editor")
    top = svc.create_folder(editor, None, "Old")
    sub = svc.create_folder(editor, top.node_id, "Older")
    docs = [svc.create_document(editor, top.node_id, "Quokka rota", BODY),
            svc.create_document(editor, sub.node_id, "Wallaby rota", BODY2)]
    for doc in docs:
        svc.publish_version(editor, doc.node_id, 1)
    kb_id = docs[0].kb_id
    with svc.db.session() as session:
        chunk_ids = [str(i) for i in session.scalars(select(Chunk.id).where(Chunk.node_id.in_([d.node_id for d in docs])))]
    assert chunk_ids and svc.search_documents(editor, "quokka rota Monday")

    deleted = svc.delete_folder(editor, top.node_id)
    assert (deleted.documents, deleted.folders) == (2, 2)
    assert svc.search_documents(editor, "quokka rota Monday") == []
    assert svc.search_documents(editor, "wallaby desk Friday") == []
    assert svc.vector.collection(kb_id).get(ids=chunk_ids)["ids"] == []
    with svc.db.session() as session:
        assert session.scalar(select(Chunk.id).where(Chunk.id.in_([int(i) for i in chunk_ids]))) is None
        assert session.scalar(select(Node.id).where(Node.id.in_([top.node_id, sub.node_id]))) is None
    with pytest.raises(NotFound, match="^not found$"):
        svc.list_children(editor, top.node_id)
    keep = svc.create_document(editor, None, "Keep", BODY)
    with pytest.raises(InvalidArgument, match="^`node_id` is a document, not a folder$"):
        svc.delete_folder(editor, keep.node_id)
    assert svc.delete_document(editor, keep.node_id).documents == 1
    with pytest.raises(NotFound):
        svc.get_document_versions(editor, keep.node_id)


def test_no_knowledge_base_access_fails_every_tool_but_roots_and_current_node(svc, principal_for):
    agent = principal_for("editor", agent=True)  # an agent's token starts with access none
    assert agent.access == "none"
    root = svc.knowledge_base(principal_for("admin"), "default").root_id
    calls = [
        lambda: svc.search_documents(agent, "quokka"),
        lambda: svc.get_document(agent, root),
        lambda: svc.get_document_versions(agent, root),
        lambda: svc.get_document_version(agent, root, 1),
        lambda: svc.list_children(agent, root),
        lambda: svc.get_folder_tree(agent),
        lambda: svc.search_nodes_by_name(agent, "default"),
        lambda: svc.create_document(agent, None, "x", BODY),
        lambda: svc.create_folder(agent, root, "x"),
        lambda: svc.update_document(agent, root, BODY),
        lambda: svc.publish_document_version(agent, root, 1),
        lambda: svc.rename_document(agent, root, "x"),
        lambda: svc.rename_folder(agent, root, "x"),
        lambda: svc.delete_document(agent, root),
        lambda: svc.delete_folder(agent, root),
        lambda: svc.move_node(agent, root, root),
        lambda: svc.set_summary(agent, root, "x"),
        lambda: svc.set_metadata(agent, root, None),
    ]
    for call in calls:
        with pytest.raises(PermissionDenied, match="^no knowledge base access$"):
            call()
    assert svc.get_root_nodes(agent) == []
    # Conversation context, never failing and never scoped (knowledge_base_mcp_server.md).
    assert svc.get_current_node(agent, root).payload() == {"node_id": root}
    assert svc.get_current_node(agent, None).payload() == svc.get_current_node(agent, "  ").payload() == {"node_id": None}
