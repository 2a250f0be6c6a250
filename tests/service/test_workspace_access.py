"""Access across workspaces and at the edge of a folder scope (issue 12, defects 1, 10 and 11).

A token's access never widens its principal's standing in another workspace; an admin of one
workspace makes tokens for its own members only, and those act at home only; a folder-scoped
caller never learns what holds its folders; without knowledge-base access the search tools fail
as the node tools do, and the refusal is in the activity history.
"""

from __future__ import annotations

import pytest

from rag.errors import InvalidArgument, NotFound, PermissionDenied
from rag.service import KnowledgeService, Principal
from rag.service.content.tree import subtree

from ..support.mcp_support import run, session

LEAVE = "How much annual leave do I earn each pay period?"


@pytest.fixture
def two_workspaces(svc: KnowledgeService, small_tree):
    """`default` and `ws2`, each holding the small handbook tree."""
    for ws in ("default", "ws2"):
        svc.ensure_workspace(ws)
        assert not svc.ingest_directory(Principal.local_admin(ws), small_tree).failed
    return svc


def _folder(svc: KnowledgeService, workspace: str, path: str) -> str:
    found = svc.search_nodes_by_name(Principal.local_admin(workspace), path.rsplit("/", 1)[-1])
    return next(n.node_id for n in found if n.kind == "folder" and n.path.endswith(path))


def _member(svc: KnowledgeService, workspace: str, role: str, **kw) -> tuple[str, str]:
    secret, info = svc.create_token(workspace, role, **kw)
    return secret, info.principal_id


def test_an_admin_makes_tokens_for_its_own_members_only(two_workspaces: KnowledgeService):
    svc = two_workspaces
    ws2_secret, ws2_admin = _member(svc, "ws2", "admin")
    attacker = svc.authenticate(_member(svc, "default", "admin")[0])
    with pytest.raises(NotFound) as foreign:
        svc.create_token("default", "viewer", access="all", principal_id=ws2_admin, by=attacker)
    with pytest.raises(NotFound) as unknown:
        svc.create_token("default", "viewer", access="all", principal_id="p_nobody", by=attacker)
    assert str(foreign.value) == str(unknown.value) == "principal not found"
    ws2_token = svc.list_tokens("ws2")[0].token_id
    with pytest.raises(NotFound):
        svc.revoke_token(ws2_token, by=attacker)
    assert svc.authenticate(ws2_secret).workspace_id == "ws2"  # still valid


def test_a_token_made_by_a_workspace_admin_acts_at_home_only(two_workspaces: KnowledgeService):
    """A member of both workspaces, admin in ws2: the admin of `default` may give it a token, but
    that token cannot be used to act in ws2 as the member."""
    svc = two_workspaces
    _, shared = _member(svc, "ws2", "admin")
    svc.create_token("default", "viewer", principal_id=shared)  # the local administrator adds it to default
    admin = svc.authenticate(_member(svc, "default", "admin")[0])
    minted, info = svc.create_token("default", "viewer", access="all", principal_id=shared, by=admin)
    assert info.home_only
    holder = svc.authenticate(minted)
    assert holder.workspaces == {"default": "viewer"}
    with pytest.raises(NotFound, match="workspace not found"):
        svc.search_knowledge_base(holder, LEAVE, workspace_id="ws2")
    with pytest.raises(NotFound):
        svc.revoke_token(svc.list_tokens("ws2")[0].token_id, by=holder)


def test_a_tokens_access_never_widens_a_membership(two_workspaces: KnowledgeService):
    """A person limited to one folder in ws2 who also holds an access-all token in `default`."""
    svc = two_workspaces
    tools = _folder(svc, "ws2", "tools")
    _, person = _member(svc, "ws2", "viewer", folders=[tools])
    secret, _ = svc.create_token("default", "viewer", access="all", principal_id=person)
    caller = svc.authenticate(secret)
    in_ws2 = caller.in_workspace("ws2")
    assert (in_ws2.access, in_ws2.folder_ids) == ("folders", (tools,))
    found = svc.search_knowledge_base(caller, LEAVE, workspace_id="ws2", top_k=20)
    with svc.db.session() as s:
        inside = {row.id for row in subtree(s, [tools])}
    assert found.hits and {hit.node_id for hit in found.hits} <= inside
    assert svc.search_knowledge_base(caller, LEAVE, workspace_id="default").hits  # all of its own workspace

    # A folder-scoped token of `default` has no access at all in ws2, whatever the standing there.
    _, other = _member(svc, "ws2", "admin")
    scoped, _ = svc.create_token("default", "viewer", folders=["tools"], principal_id=other)
    with pytest.raises(PermissionDenied, match="no knowledge base access"):
        svc.search_knowledge_base(svc.authenticate(scoped), LEAVE, workspace_id="ws2")


def test_a_folder_scoped_caller_sees_nothing_above_its_folders(svc: KnowledgeService, admin, small_tree):
    assert not svc.ingest_directory(admin, small_tree).failed
    secret, _ = svc.create_token("default", "editor", ["knowledge:write"], folders=["travel-and-leave"], agent=True)
    agent = svc.authenticate(secret)
    (root,) = svc.get_root_nodes(agent)
    assert root.name == "travel-and-leave" and root.parent_id is None
    named = svc.search_nodes_by_name(agent, "travel")
    assert named and all(n.path.startswith("travel-and-leave") for n in named)
    assert all(n.parent_id is None for n in named if n.node_id == root.node_id)
    assert svc.search_nodes_by_name(admin, "travel-and-leave")[0].path == "default/travel-and-leave"
    # Its own folder stays put: a rename or move would meet the names around it.
    with pytest.raises(InvalidArgument, match="^a folder this token was given cannot be renamed"):
        svc.rename_folder(agent, root.node_id, "Handbook")
    sub = svc.create_folder(agent, root.node_id, "sub")
    with pytest.raises(InvalidArgument):
        svc.move_node(agent, root.node_id, sub.node_id)
    assert svc.set_summary(agent, root.node_id, "mine").parent_id is None


def test_node_edits_report_the_published_version(svc: KnowledgeService, admin, small_tree):
    assert not svc.ingest_directory(admin, small_tree).failed
    leave = next(n for n in svc.search_nodes_by_name(admin, "leave") if n.kind == "document")
    published = svc.get_document(admin, leave.node_id).version_number
    for info in (
        svc.rename_document(admin, leave.node_id, "Leave, renamed"),
        svc.set_summary(admin, leave.node_id, "How leave works"),
        svc.set_metadata(admin, leave.node_id, {"owner": "people-ops"}),
        svc.move_node(admin, leave.node_id, svc.get_root_nodes(admin)[0].node_id),
    ):
        assert info.published_version == published


def test_without_access_the_search_tools_fail_and_are_recorded(svc: KnowledgeService, admin, small_tree):
    assert not svc.ingest_directory(admin, small_tree).failed
    secret, _ = svc.create_token("default", "viewer", agent=True)  # an agent starts with access none
    blind = svc.authenticate(secret)
    for call in (lambda: svc.search(blind, LEAVE), lambda: svc.ask(blind, LEAVE),
                 lambda: svc.search_knowledge_base(blind, LEAVE)):
        with pytest.raises(PermissionDenied, match="^no knowledge base access$"):
            call()
    with pytest.raises(Exception):
        svc.search(blind, "")
    mine = [(a.action, a.outcome) for a in svc.activity(admin, 50) if a.detail and a.detail.get("token_id") == blind.token_id]
    assert ("search", "permission_denied") in mine and ("ask", "permission_denied") in mine
    assert ("search", "invalid_argument") in mine and ("search_knowledge_base", "permission_denied") in mine

    async def tools():
        async with session(svc, secret) as s:
            assert await s.error("search_knowledge", {"query": LEAVE}) == "Tool failed: no knowledge base access"
            assert await s.error("ask_knowledge", {"query": LEAVE}) == "Tool failed: no knowledge base access"
            assert await s.error("search_knowledge_base", {"query": LEAVE}) == "no knowledge base access"
            assert (await s.ok("get_root_nodes"))["roots"] == []

    run(tools)


def test_labels_and_knowledge_ids_start_at_the_callers_folder(svc: KnowledgeService, admin, small_tree):
    """A caller given travel-and-leave/travel-and-leave-policies never reads `travel-and-leave`."""
    assert not svc.ingest_directory(admin, small_tree).failed
    question = "What does the travel guide FAQ say?"
    full = next(h for h in svc.search(admin, question, 10).hits if "travel-guide-faq" in h.source)
    assert full.source == "fs:travel-and-leave/travel-and-leave-policies/travel-guide-faq.md"
    secret, _ = svc.create_token("default", "admin", folders=["travel-and-leave/travel-and-leave-policies"])
    scoped = svc.authenticate(secret)
    for hits in (svc.search(scoped, question, 10).hits, svc.search_knowledge_base(scoped, question).hits):
        assert hits and all(h.node_id == full.node_id for h in hits)
        assert {h.source for h in hits} == {"fs:travel-and-leave-policies/travel-guide-faq.md"}
        assert {h.source_id for h in hits} == {"fs:default:default:travel-and-leave-policies/travel-guide-faq.md"}
    answer = svc.ask(scoped, question)
    assert all("travel-and-leave/" not in (s.source or "") + s.source_id for s in answer.sources)


def test_activity_details_name_no_node_outside_the_callers_folders(svc: KnowledgeService, admin):
    root = svc.get_root_nodes(admin)[0].node_id
    team = svc.create_folder(admin, root, "team")
    svc.create_folder(admin, team.node_id, "notes")
    secret, _ = svc.create_token("default", "admin", folders=[team.node_id])
    rows = svc.activity(svc.authenticate(secret))
    made = next(r for r in rows if r.action == "create_folder" and r.target == team.node_id)
    assert made.detail["parent_id"] is None  # the knowledge base's root is not the caller's to know
    inner = next(r for r in rows if r.action == "create_folder" and r.target != team.node_id)
    assert inner.detail["parent_id"] == team.node_id
    assert next(r for r in svc.activity(admin) if r.target == team.node_id).detail["parent_id"] == root
