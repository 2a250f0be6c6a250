"""The access policy (rag/service/identity/access.py) as a direct caller of the service meets it: naming a
knowledge base never tells whether it exists, whichever way it is named."""

from __future__ import annotations

import pytest

from rag.errors import NotFound, PermissionDenied


@pytest.fixture
def scoped(svc, two_kbs, principal_for):
    """An editor whose token holds the handbook's root folder only."""
    handbook, _ = two_kbs
    return principal_for("editor", access="folders", folders=(handbook.root_id,))


def test_a_knowledge_base_out_of_sight_reads_as_missing(svc, two_kbs, scoped):
    handbook, cafeteria = two_kbs
    assert [kb.name for kb in svc.knowledge_bases(scoped)] == ["handbook"]
    answers = []
    for name in ("cafeteria", "CAFETERIA", "no such base"):
        for call in (lambda: svc.search(scoped, "leave", kb_name=name),
                     lambda: svc.ask(scoped, "leave", kb_name=name),
                     lambda: svc.knowledge_base(scoped, name)):
            with pytest.raises(NotFound) as caught:
                call()
            answers.append(caught.value.message)
    assert set(answers) == {"knowledge base not found"}
    # The one it may see answers, in any case, and holds only what its folder holds.
    hits = svc.search(scoped, "leave", kb_name="HANDBOOK").hits
    assert hits and {hit.kb_id for hit in hits} == {handbook.id}
    assert cafeteria.id not in {hit.kb_id for hit in svc.search(scoped, "cafeteria pretzels").hits}


def test_the_history_records_the_refusal_under_the_name_sent(svc, two_kbs, scoped, admin):
    with pytest.raises(NotFound):
        svc.search(scoped, "leave", kb_name="cafeteria")
    row = svc.activity(admin, limit=1)[0]
    assert (row.action, row.target, row.outcome) == ("search", "cafeteria", "not_found")


def test_a_folder_scoped_caller_cannot_make_a_knowledge_base(svc, two_kbs, scoped, admin):
    with pytest.raises(PermissionDenied, match="needs knowledge-base access all"):
        svc.knowledge_base(scoped, "brand new", create=True)
    assert "brand new" not in [kb.name for kb in svc.knowledge_bases(admin)]
    made = svc.knowledge_base(admin, "brand new", create=True)
    assert svc.knowledge_base(admin, "Brand New").id == made.id


def test_the_default_model_id_names_the_default_knowledge_base(svc, two_kbs, admin):
    default = svc.knowledge_base(admin, "default")
    assert list(svc.list_models(admin)) == ["default", "handbook", "cafeteria"]
    assert svc.resolve_kb(admin, "default").id == default.id
    row = svc.activity(admin, limit=1)[0]
    assert (row.action, row.outcome, row.detail) == ("list_models", "ok", {"results": 3})
