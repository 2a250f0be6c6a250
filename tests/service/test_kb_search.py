"""search_knowledge_base as search_knowledge_base.txt describes it, plus `failed_knowledge_bases`."""

from __future__ import annotations

import numpy as np
import pytest

from rag.errors import InvalidArgument, NotFound, Unavailable
from rag.render import knowledge_base_search_payload
from rag.service import KnowledgeService, Principal
from rag.store.models import Workspace

QUESTION = "How much annual leave do I earn?"


def test_query_is_required_before_anything_else(svc, principal_for):
    reader = principal_for("viewer", write=False, agent=True)  # access none, and every other argument wrong too
    for absent in (None, "", "   "):
        with pytest.raises(InvalidArgument, match="^query is required$"):
            svc.search_knowledge_base(reader, absent, workspace_id="nowhere", kb_id=7, top_k=0)


def test_top_k_is_enforced_not_clamped_and_defaults_to_six(svc, admin, small_tree, principal_for):
    svc.ingest_directory(admin, small_tree)
    reader = principal_for("viewer", write=False)
    for bad, message in ((0, "`top_k` must be at least 1"), (-2, "`top_k` must be at least 1"),
                         (51, "`top_k` must be at most 50"), ("5", "`top_k` must be an integer"),
                         (2.5, "`top_k` must be an integer"), (True, "`top_k` must be an integer")):
        with pytest.raises(InvalidArgument, match=f"^{message}$"):
            svc.search_knowledge_base(reader, QUESTION, top_k=bad)
    result = svc.search_knowledge_base(reader, QUESTION)
    assert len(result.hits) == 6 and result.hits[0].source == "fs:travel-and-leave/leave.md"
    assert len(svc.search_knowledge_base(reader, QUESTION, top_k=1).hits) == 1
    assert len(svc.search_knowledge_base(reader, QUESTION, top_k=50).hits) > 6
    payload = knowledge_base_search_payload(svc.search_knowledge_base(reader, QUESTION, top_k=2))
    assert set(payload) == {"query", "results"} and payload["query"] == QUESTION
    assert payload["results"][0]["node_id"] == result.hits[0].node_id and "kb_id" in payload["results"][0]
    scores = [r["score"] for r in payload["results"]]
    assert scores == sorted(scores, reverse=True)


def test_workspace_id_picks_among_the_principals_workspaces(svc, admin, small_tree):
    svc.ingest_directory(admin, small_tree)
    secret, info = svc.create_token("default", "viewer")
    svc.create_token("second", "editor", principal_id=info.principal_id)  # the same person, a second workspace
    person = svc.authenticate(secret)
    assert person.workspaces == {"default": "viewer", "second": "editor"} and person.workspace_id == "default"
    with pytest.raises(InvalidArgument, match="^workspace_id is required when you belong to more than one workspace$"):
        svc.search_knowledge_base(person, QUESTION)
    assert svc.search_knowledge_base(person, QUESTION, workspace_id="default").hits
    elsewhere = svc.search_knowledge_base(person, QUESTION, workspace_id="second")
    assert elsewhere.workspace_id == "second" and elsewhere.hits == [] and elsewhere.note is None
    with pytest.raises(NotFound, match="^workspace not found$"):
        svc.search_knowledge_base(person, QUESTION, workspace_id="third")
    single = svc.authenticate(svc.create_token("default", "viewer")[0])
    assert svc.search_knowledge_base(single, QUESTION).hits  # one workspace: workspace_id may be left out


def test_no_knowledge_base_is_a_note_and_kb_id_searches_one(svc, admin, two_kbs):
    with svc.db.session() as session:
        session.add(Workspace(id="empty", name="empty"))
    payload = knowledge_base_search_payload(svc.search_knowledge_base(Principal.local_admin("empty"), QUESTION))
    assert payload == {"query": QUESTION, "results": [], "note": "no knowledge base configured for this workspace"}

    handbook, cafeteria = two_kbs
    both = svc.search_knowledge_base(admin, "annual leave pretzels", top_k=20)
    assert {h.kb_id for h in both.hits} == {cafeteria.id, handbook.id}
    for key in (cafeteria.id, "Cafeteria"):  # by id, or by name
        assert {h.title for h in svc.search_knowledge_base(admin, "annual leave pretzels", kb_id=key).hits} == {
            "Cafeteria menu"}
    with pytest.raises(NotFound, match="^knowledge base not found$"):
        svc.search_knowledge_base(admin, QUESTION, kb_id="kb_nope")


def test_a_failing_knowledge_base_is_skipped_and_named(svc, admin, two_kbs):
    handbook, cafeteria = two_kbs
    # Break the cafeteria's vector collection for real: vectors of another dimension than the model's.
    svc.vector.drop(cafeteria.id)
    broken = svc.vector.client.create_collection(svc.vector._name(cafeteria.id), embedding_function=None)
    broken.add(ids=["1"], embeddings=np.array([[0.1, 0.2, 0.3]], dtype=np.float32))
    svc.vector._collections.pop(cafeteria.id, None)

    result = svc.search_knowledge_base(admin, "annual leave pretzels", top_k=10)
    assert result.hits and {h.kb_id for h in result.hits} == {handbook.id}
    payload = knowledge_base_search_payload(result)
    assert payload["failed_knowledge_bases"] == [{"id": cafeteria.id, "name": "cafeteria"}]
    alone = knowledge_base_search_payload(svc.search_knowledge_base(admin, "pretzels", kb_id=cafeteria.id))
    assert alone["results"] == [] and alone["failed_knowledge_bases"] == [{"id": cafeteria.id, "name": "cafeteria"}]
    assert "note" not in alone  # every knowledge base failed: said, not mistaken for "nothing matched"


def test_an_unreachable_store_gets_the_documented_message(tmp_path):
    from rag.settings import Settings

    settings = Settings(home=tmp_path / "home")
    with KnowledgeService(settings) as svc:
        svc.ensure_workspace("default")
        svc.db.engine.dispose()
        for suffix in ("", "-wal", "-shm"):  # the database file is gone; a directory stands in its place
            path = settings.home / f"rag.db{suffix}"
            if path.exists():
                path.rename(tmp_path / f"gone{suffix}")
        (settings.home / "rag.db").mkdir()
        with pytest.raises(Unavailable, match="^the knowledge base service is unreachable$"):
            svc.search_knowledge_base(Principal.local_admin("default"), QUESTION)
