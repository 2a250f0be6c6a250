"""Only the published version is searchable; publishing never leaves a half-indexed document."""

from __future__ import annotations

import pytest
from sqlalchemy import select

from rag.errors import InvalidArgument, NotFound
from rag.service import KnowledgeService
from rag.service.indexing.publish import request_publish
from rag.store.models import ARCHIVED, DRAFT, PUBLISHED, Chunk, DocumentVersion

V1 = "# Expense policy\n\nMeals are reimbursed up to the platypus allowance of 40 dollars.\n"
V2 = "# Expense policy\n\nMeals are reimbursed up to the echidna allowance of 55 dollars.\n"


def titles(svc, admin, query: str) -> list[tuple[str, int]]:
    return [(h.title, h.version) for h in svc.search(admin, query, 5).hits]


@pytest.fixture
def doc(svc, admin):
    kb = svc.knowledge_base(admin, "default")
    created = svc.create_document(admin, kb.root_id, "Expense policy", V1)
    assert created.version_number == 1 and created.status == DRAFT
    return created


def test_drafts_are_not_searchable_until_published(svc, admin, doc):
    assert titles(svc, admin, "platypus allowance") == []
    with pytest.raises(NotFound):
        svc.get_document(admin, doc.node_id)
    published = svc.publish_version(admin, doc.node_id, 1)
    assert published.status == PUBLISHED
    assert titles(svc, admin, "platypus allowance")[0] == ("Expense policy", 1)


def test_publishing_again_is_a_noop_and_archived_versions_cannot_be_published(svc, admin, doc):
    svc.publish_version(admin, doc.node_id, 1)
    assert svc.publish_version(admin, doc.node_id, 1).status == PUBLISHED
    svc.update_document(admin, doc.node_id, V2)
    assert all(v == 1 for _, v in titles(svc, admin, "echidna allowance"))  # the draft stays out of search
    assert titles(svc, admin, "platypus allowance")[0] == ("Expense policy", 1)
    svc.publish_version(admin, doc.node_id, 2)
    assert titles(svc, admin, "echidna allowance")[0] == ("Expense policy", 2)
    assert all(v != 1 for _, v in titles(svc, admin, "platypus allowance"))
    assert [(v.number, v.status) for v in svc.versions(admin, doc.node_id)] == [(2, PUBLISHED), (1, ARCHIVED)]
    with pytest.raises(InvalidArgument, match="archived"):
        svc.publish_version(admin, doc.node_id, 1)
    with pytest.raises(NotFound):
        svc.publish_version(admin, doc.node_id, 9)


def test_every_update_is_a_new_version_so_no_edit_is_lost(svc, admin, doc):
    svc.update_document(admin, doc.node_id, V2)
    assert [(v.number, v.body) for v in svc.versions(admin, doc.node_id)] == [(2, V2), (1, V1)]


def test_an_error_mid_publish_keeps_the_old_version_searchable_and_the_new_one_in_draft(svc, admin, doc, monkeypatch):
    svc.publish_version(admin, doc.node_id, 1)
    svc.update_document(admin, doc.node_id, V2)

    def broken(*args):
        raise RuntimeError("embedding backend exploded")

    monkeypatch.setattr(svc.embedder, "embed_chunks", broken)  # what a publish embeds through
    with pytest.raises(RuntimeError):
        svc.publish_version(admin, doc.node_id, 2)
    monkeypatch.undo()
    assert [(v.number, v.status) for v in svc.versions(admin, doc.node_id)] == [(2, DRAFT), (1, PUBLISHED)]
    assert titles(svc, admin, "platypus allowance")[0] == ("Expense policy", 1)
    assert all(v == 1 for _, v in titles(svc, admin, "echidna allowance"))
    with svc.db.session() as session:  # no half-indexed leftovers of version 2
        v2 = session.scalar(select(DocumentVersion).where(DocumentVersion.node_id == doc.node_id, DocumentVersion.number == 2))
        assert session.scalar(select(Chunk.id).where(Chunk.version_id == v2.id)) is None
    assert svc.publish_version(admin, doc.node_id, 2).status == PUBLISHED  # and it can be published again


def test_a_crash_mid_publish_is_resumed_on_the_next_start(settings, svc, admin, doc):
    svc.publish_version(admin, doc.node_id, 1)
    svc.update_document(admin, doc.node_id, V2)
    # Simulate a process that died after writing part of version 2's chunks.
    with svc.db.session() as session:
        v2 = session.scalar(select(DocumentVersion).where(DocumentVersion.node_id == doc.node_id, DocumentVersion.number == 2))
        request_publish(session, v2)  # marked publishing, as publish_document_version does
        session.add(Chunk(version_id=v2.id, node_id=doc.node_id, kb_id=v2.node.kb_id, ordinal=0, text="partial",
                          heading_path=[], char_start=0, char_end=7))
    assert titles(svc, admin, "platypus allowance")[0] == ("Expense policy", 1)  # still the old one
    svc.close()
    with KnowledgeService(settings) as restarted:
        assert [(v.number, v.status) for v in restarted.versions(admin, doc.node_id)] == [(2, PUBLISHED), (1, ARCHIVED)]
        assert titles(restarted, admin, "echidna allowance")[0] == ("Expense policy", 2)
        with restarted.db.session() as session:
            assert session.scalar(select(Chunk.id).where(Chunk.text == "partial")) is None


def test_deleted_documents_leave_both_lanes(svc, admin, doc):
    svc.publish_version(admin, doc.node_id, 1)
    hits = svc.search(admin, "platypus allowance", 5).hits
    chunk_ids, kb_id = [h.chunk_id for h in hits], hits[0].kb_id
    svc.delete_document(admin, doc.node_id)
    assert titles(svc, admin, "platypus allowance") == []
    assert svc.vector.collection(kb_id).get(ids=[str(c) for c in chunk_ids])["ids"] == []


def test_a_lost_vector_store_is_rebuilt_on_the_next_start(settings, svc, admin, doc):
    svc.publish_version(admin, doc.node_id, 1)
    kb_id = svc.knowledge_base(admin, "default").id
    expected = svc.vector.count(kb_id)
    svc.vector.drop(kb_id)  # the vectors are gone; the store still has the chunks
    svc.close()
    with KnowledgeService(settings) as restarted:
        assert restarted.vector.count(kb_id) == expected > 0
        hits = restarted.search(admin, "platypus allowance", 3, lanes=("vector",)).hits
        assert hits and hits[0].title == "Expense policy"


def chunk_total(svc) -> int:
    with svc.db.session() as session:
        return len(session.scalars(select(Chunk.id)).all())


def test_a_failure_after_the_keyword_index_was_written_leaves_no_orphans(svc, admin, doc, monkeypatch):
    svc.publish_version(admin, doc.node_id, 1)
    svc.update_document(admin, doc.node_id, V2)

    def broken(*args, **kwargs):
        raise RuntimeError("vector store exploded")

    monkeypatch.setattr(svc.vector, "add", broken)
    with pytest.raises(RuntimeError):
        svc.publish_version(admin, doc.node_id, 2)
    monkeypatch.undo()
    assert all(v == 1 for _, v in titles(svc, admin, "echidna allowance"))  # version 1 still the one
    if svc.settings.retrieve.keyword_engine == "tantivy" and svc.db.dialect == "sqlite":  # outside the store
        assert svc.keyword.count(None) == chunk_total(svc)
    assert svc.publish_version(admin, doc.node_id, 2).status == PUBLISHED
    assert titles(svc, admin, "echidna allowance")[0] == ("Expense policy", 2)


def test_a_lost_keyword_index_is_rebuilt_on_the_next_start(settings, svc, admin, doc):
    import shutil

    if svc.db.dialect != "sqlite":
        pytest.skip("PostgreSQL keeps its keyword index inside the store")
    svc.publish_version(admin, doc.node_id, 1)
    svc.close()
    shutil.rmtree(settings.keyword_path)
    with KnowledgeService(settings) as restarted:
        assert restarted.keyword.count(None) == chunk_total(restarted) > 0
        hits = restarted.search(admin, "platypus allowance", 3, lanes=("text",)).hits
        assert hits and hits[0].title == "Expense policy"


def test_switching_keyword_engines_fills_the_new_one(settings, svc, admin, doc):
    if svc.db.dialect != "sqlite":
        pytest.skip("PostgreSQL has one keyword engine")
    svc.publish_version(admin, doc.node_id, 1)
    svc.close()

    def reopen(engine: str) -> KnowledgeService:
        retrieve = settings.retrieve.model_copy(update={"keyword_engine": engine})
        return KnowledgeService(settings.model_copy(update={"retrieve": retrieve}))

    def text_titles(service, query: str) -> list[tuple[str, int]]:
        return [(h.title, h.version) for h in service.search(admin, query, 3, lanes=("text",)).hits]

    with reopen("fts5") as fts5:
        assert text_titles(fts5, "platypus allowance")[0] == ("Expense policy", 1)
    with reopen("tantivy") as tantivy:  # an edit while FTS5 is not written
        tantivy.update_document(admin, doc.node_id, V2)
        tantivy.publish_version(admin, doc.node_id, 2)
    with reopen("fts5") as fts5:  # as many chunks as before, other ids: the fingerprint tells
        assert text_titles(fts5, "echidna allowance")[0] == ("Expense policy", 2)
        assert all(version == 2 for _, version in text_titles(fts5, "platypus allowance"))
