"""The editor's sessions (rag/service/identity/sessions.py), on both deployments: a person's token opens one,
an agent's does not; the store keeps only the id's hash and the token's id; a revoked token, an idle
or old session and signing out end it; and every service on the store (every worker) knows it."""

from __future__ import annotations

from datetime import timedelta

import pytest
from sqlalchemy import select, update

from rag.errors import PermissionDenied, Unauthenticated
from rag.service import KnowledgeService
from rag.store.models import EditorSession, utcnow


def make(svc: KnowledgeService, agent: bool = False) -> str:
    return svc.create_token("default", "editor", ["knowledge:write"], "all", (), agent)[0]


def test_a_person_signs_in_an_agent_does_not(svc: KnowledgeService, admin) -> None:
    secret = make(svc)
    opened = svc.open_session(secret)
    again = svc.editor_session(opened.id)
    assert again.principal == svc.authenticate(secret) and again.csrf == opened.csrf and again.csrf_ok(opened.csrf)
    assert not again.csrf_ok("") and not again.csrf_ok(None) and not again.csrf_ok(opened.csrf + "x")
    with svc.db.session() as session:
        rows = list(session.scalars(select(EditorSession)))
    assert len(rows) == 1 and opened.id not in rows[0].id_hash and secret not in str(vars(rows[0]))
    with pytest.raises(PermissionDenied, match="the editor is for people"):
        svc.open_session(make(svc, agent=True))
    with pytest.raises(Unauthenticated):
        svc.open_session("rag_not-a-token")
    assert [(a.action, a.outcome) for a in svc.activity(admin, 10) if a.action == "open_session"] == [
        ("open_session", "permission_denied"), ("open_session", "ok")]


def test_messages_wait_for_the_next_page(svc: KnowledgeService) -> None:
    opened = svc.open_session(make(svc))
    svc.flash(opened.id, "error", "this needs the admin role")
    shown = svc.editor_session(opened.id)
    assert svc.take_flashes(shown) == [("error", "this needs the admin role")]
    assert svc.take_flashes(svc.editor_session(opened.id)) == []


@pytest.mark.parametrize("ending", ["revoked", "idle", "old", "signed out", "unknown"])
def test_a_session_ends(svc: KnowledgeService, ending: str) -> None:
    secret = make(svc)
    opened = svc.open_session(secret)
    if ending == "revoked":
        svc.revoke_token(svc.authenticate(secret).token_id)
    elif ending in ("idle", "old"):
        column = EditorSession.seen_at if ending == "idle" else EditorSession.created_at
        hours = 9 if ending == "idle" else 25
        with svc.db.session() as session:
            session.execute(update(EditorSession).values({column: utcnow() - timedelta(hours=hours)}))
    elif ending == "signed out":
        svc.close_session(opened.id)
    session_id = opened.id if ending != "unknown" else opened.id[::-1]
    with pytest.raises(Unauthenticated, match="sign in with a person's token"):
        svc.editor_session(session_id)
    if ending != "unknown":
        with svc.db.session() as session:
            assert session.scalar(select(EditorSession)) is None  # gone from the store


def test_every_worker_on_the_store_knows_a_session(svc: KnowledgeService, settings) -> None:
    if settings.embedded:
        pytest.skip("the embedded store has one process")
    opened = svc.open_session(make(svc))
    with KnowledgeService(settings, publish_worker=False) as other:
        assert other.editor_session(opened.id).principal.token_id == opened.principal.token_id
