"""Tokens: hashed at rest, revocable, expiring, scoped; roles and access; the activity history; the CLI."""

from __future__ import annotations

import hashlib
import json
from datetime import timedelta

import pytest
from sqlalchemy import select, text, update

from rag.errors import InvalidArgument, NotFound, PermissionDenied, Unauthenticated
from rag.store.models import Activity, ApiToken, utcnow

from ..support.processes import rag_run as rag

INVALID = "^invalid or expired token$"


def test_the_secret_is_stored_only_as_its_hash(svc):
    secret, info = svc.create_token("default", "editor", ["knowledge:write"], name="Ada")
    assert secret.startswith("rag_") and len(secret) >= 40
    with svc.db.session() as session:
        token = session.get(ApiToken, info.token_id)
        assert token.secret_hash == hashlib.sha256(secret.encode()).hexdigest()
        every_value = " ".join(str(v) for table in ("tokens", "principals", "memberships", "activity")
                               for row in session.execute(text(f"SELECT * FROM {table}")) for v in row)
    assert secret not in every_value and secret[4:] not in every_value
    assert secret not in json.dumps([t.payload() for t in svc.list_tokens()])

    person = svc.authenticate(secret)
    assert (person.workspace_id, person.role, person.access, person.is_agent) == ("default", "editor", "all", False)
    assert person.scopes == {"knowledge:read", "knowledge:write"} and person.token_id == info.token_id
    assert person.actor == f"person:Ada ({info.principal_id})"


def test_revoked_expired_and_unknown_tokens_get_one_answer(svc):
    secret, info = svc.create_token("default", "viewer", expires_days=30)
    later, later_info = svc.create_token("default", "viewer")
    assert svc.authenticate(secret).token_id == info.token_id
    with svc.db.session() as session:  # thirty days later
        session.execute(update(ApiToken).where(ApiToken.id == info.token_id).values(expires_at=utcnow() - timedelta(seconds=1)))
    assert svc.revoke_token(later_info.token_id).revoked_at is not None
    assert svc.revoke_token(later_info.token_id).revoked_at is not None  # again: nothing changes
    for bad in (secret, later, "rag_" + "x" * 43, "not-a-token", "", None):
        with pytest.raises(Unauthenticated, match=INVALID):
            svc.authenticate(bad)
    assert issubclass(Unauthenticated, PermissionDenied)
    listed = {t.token_id: t for t in svc.list_tokens("default")}
    assert not listed[info.token_id].active and not listed[later_info.token_id].active
    with pytest.raises(NotFound, match="^token not found$"):
        svc.revoke_token("tok_nope")


def test_role_and_scopes_decide_together(svc, principal_for):
    root = svc.knowledge_base(principal_for("admin"), "default").root_id
    viewer_with_write = principal_for("viewer", write=True)
    assert "knowledge:write" in viewer_with_write.scopes
    with pytest.raises(PermissionDenied, match="^this needs the editor role$"):
        svc.create_folder(viewer_with_write, root, "Mine")
    editor_read_only = principal_for("editor", write=False)
    assert editor_read_only.scopes == {"knowledge:read"}  # read is always granted, write only when given
    with pytest.raises(PermissionDenied, match="^this needs the knowledge:write scope$"):
        svc.create_folder(editor_read_only, root, "Mine")
    assert svc.list_children(editor_read_only, root) == []  # reading needs no more
    assert svc.create_folder(principal_for("editor"), root, "Mine").name == "Mine"
    agent = principal_for("admin", agent=True)
    assert agent.is_agent and agent.access == "none"  # an agent's token starts without knowledge-base access


def test_folders_are_resolved_when_the_token_is_made(svc, admin, small_tree):
    svc.ingest_directory(admin, small_tree)
    svc.knowledge_base(admin, "handbook", create=True)
    root = svc.knowledge_base(admin, "default").root_id
    by_name = {n.name: n.node_id for n in svc.list_children(admin, root)}
    slack = next(n.node_id for n in svc.search_nodes_by_name(admin, "slack") if n.kind == "folder")
    _, info = svc.create_token("default", "viewer", folders=[
        "travel-and-leave", "Tools/SLACK", f"default:{'tools'}", by_name["general-information-and-resources"],
        "handbook:", "travel-and-leave"])
    handbook_root = svc.knowledge_base(admin, "handbook").root_id
    assert info.access == "folders" and info.folder_ids == [
        by_name["travel-and-leave"], slack, by_name["tools"], by_name["general-information-and-resources"], handbook_root]
    document = next(n.node_id for n in svc.list_children(admin, by_name["tools"]) if n.kind == "document")
    for folders, error, message in (
        (["travel-and-leave/nope"], NotFound, "^folder 'travel-and-leave/nope' not found in workspace 'default'$"),
        (["nowhere:tools"], NotFound, "^folder 'nowhere:tools' not found"),
        ([document], InvalidArgument, "is a document, not a folder$"),
    ):
        with pytest.raises(error, match=message):
            svc.create_token("default", "viewer", folders=folders)
    for kwargs, message in (
        ({"access": "all", "folders": ["tools"]}, "^folders are given with access 'folders'"),
        ({"access": "folders"}, "^folders are given with access 'folders'"),
        ({"access": "some"}, "^`access` must be none, all or folders$"),
        ({"scopes": ["knowledge:admin"]}, "^unknown scope 'knowledge:admin'"),
        ({"expires_days": 0}, "^`expires_days` must be at least 1$"),
    ):
        with pytest.raises(InvalidArgument, match=message):
            svc.create_token("default", "viewer", **kwargs)
    with pytest.raises(InvalidArgument, match="^`role` must be viewer, editor or admin$"):
        svc.create_token("default", "owner")


def test_only_admin_people_manage_tokens_through_a_surface(svc, principal_for):
    secret, info = svc.create_token("default", "viewer", agent=True, access="all")
    other_ws = svc.create_token("elsewhere", "viewer")[1]
    with pytest.raises(PermissionDenied, match="never by agents"):
        svc.list_tokens("default", by=principal_for("admin", agent=True, access="all"))
    with pytest.raises(PermissionDenied, match="^this needs the admin role$"):
        svc.revoke_token(info.token_id, by=principal_for("editor"))
    boss = principal_for("admin")
    with pytest.raises(NotFound, match="^token not found$"):
        svc.revoke_token(other_ws.token_id, by=boss)  # another workspace's token reads as missing
    assert svc.revoke_token(info.token_id, by=boss).revoked_at is not None
    with pytest.raises(Unauthenticated):
        svc.authenticate(secret)
    assert {t.workspace_id for t in svc.list_tokens(by=boss)} == {"default"}  # its own workspace only
    assert {t.workspace_id for t in svc.list_tokens()} == {"default", "elsewhere"}  # the local administrator
    with pytest.raises(PermissionDenied, match="needs knowledge-base access all"):
        svc.list_tokens(by=principal_for("admin", folders=("default:",)))
    with pytest.raises(NotFound, match="^workspace not found$"):  # an admin cannot make a workspace exist
        svc.create_token("nowhere", "admin", by=boss)
    with svc.db.session() as session:
        from rag.store.models import Workspace

        assert session.get(Workspace, "nowhere") is None


def test_every_call_is_recorded_without_secrets_or_query_text(svc, admin):
    secret, info = svc.create_token("default", "editor", ["knowledge:write"], agent=True, access="all")
    agent = svc.authenticate(secret)
    doc = svc.create_document(agent, None, "Quokka rota", "# Quokka rota\n\nThe rota is on Mondays.\n")
    with pytest.raises(NotFound):
        svc.get_document(agent, doc.node_id)
    svc.search_documents(agent, "what does the platypus committee decide")
    svc.publish_version(agent, doc.node_id, 1)
    assert svc.get_document(agent, doc.node_id).citation_count == 1
    with svc.db.session() as session:
        rows = list(session.scalars(select(Activity).order_by(Activity.id)))
    mine = [(a.action, a.target, a.outcome) for a in rows if a.actor.startswith("agent:")]
    assert mine == [
        ("create_document", doc.node_id, "ok"),
        ("get_document", doc.node_id, "not_found"),
        ("search_documents", None, "ok"),
        ("publish_version", doc.node_id, "ok"),
        ("get_document", doc.node_id, "ok"),
    ]
    assert all(a.detail["token_id"] == info.token_id for a in rows if a.actor.startswith("agent:"))
    assert rows[-1].detail["citation_count"] == 1  # the history shows the count get_document recorded
    made = next(a for a in rows if a.action == "create_token")
    assert made.actor == "local-cli" and made.detail["created_token"] == info.token_id
    everything = json.dumps([[a.actor, a.action, a.target, a.detail] for a in rows])
    assert secret not in everything and "platypus" not in everything and "Mondays" not in everything


def test_the_token_commands(tmp_path):
    home = tmp_path / "home"
    made = rag(home, "token", "create", "--workspace", "default", "--role", "editor", "--scope", "knowledge:write",
               "--agent", "--access", "all", "--expires", "30", "--name", "helper")
    assert made.returncode == 0, made.stderr
    secret = made.stdout.strip()
    assert made.stdout == secret + "\n" and secret.startswith("rag_")  # the token alone on stdout
    listed = rag(home, "token", "list", "--json")
    assert listed.returncode == 0, listed.stderr
    [token] = json.loads(listed.stdout)
    assert (token["name"], token["kind"], token["role"], token["access"], token["active"]) == (
        "helper", "agent", "editor", "all", True)
    assert token["scopes"] == ["knowledge:read", "knowledge:write"] and secret not in listed.stdout
    bad = rag(home, "token", "create", "--workspace", "default", "--role", "viewer", "--folders", "nope,tools")
    assert bad.returncode == 2 and "folder 'nope' not found" in bad.stderr and bad.stdout == ""
    revoked = rag(home, "token", "revoke", token["token_id"])
    assert revoked.returncode == 0 and token["token_id"] in revoked.stdout
    assert json.loads(rag(home, "token", "list", "--json").stdout)[0]["active"] is False
