"""`rag ingest` behaviour on real handbook pages: import, re-import, edits, deletions, bad files."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from sqlalchemy import select

from rag.errors import InvalidArgument
from rag.store.models import ARCHIVED, PUBLISHED, DocumentVersion, Node


def sources(svc, admin, query: str, limit: int = 10) -> list[str]:
    return [h.source for h in svc.search(admin, query, limit).hits]


def test_ingest_builds_folders_documents_and_ids(svc, admin, small_tree: Path):
    report = svc.ingest_directory(admin, small_tree)
    assert len(report.added) == 5 and not report.failed and report.chunks > 20
    with svc.db.session() as session:
        leave = session.scalar(select(Node).where(Node.source_id == "fs:default:default:travel-and-leave/leave.md"))
        assert leave.name == "Leave types"  # the front matter title
        assert leave.source_label == "fs:travel-and-leave/leave.md"
        assert leave.meta["keywords"].startswith("hrlinks")
        folder = session.get(Node, leave.parent_id)
        assert (folder.kind, folder.name) == ("folder", "travel-and-leave")
        version = session.scalar(select(DocumentVersion).where(DocumentVersion.node_id == leave.id))
        assert (version.number, version.status) == (1, PUBLISHED)
        assert version.body.startswith("# Leave types\n") and "{%" not in version.body


def test_search_names_both_lanes_and_cites_spans(svc, admin, small_tree: Path):
    svc.ingest_directory(admin, small_tree)
    hits = svc.search(admin, "How much annual leave do I earn each pay period?", 5).hits
    assert hits[0].source == "fs:travel-and-leave/leave.md"
    assert hits[0].retrievers == ["vector", "text"]
    doc = svc.get_document(admin, hits[0].node_id)
    assert doc.content[hits[0].char_start:hits[0].char_end] == hits[0].text
    assert hits[0].version == doc.version_number == 1


def test_reingest_changes_only_what_changed(svc, admin, small_tree: Path):
    svc.ingest_directory(admin, small_tree)
    leave = small_tree / "travel-and-leave/leave.md"
    leave.write_text(leave.read_text() + "\n## Zorblax leave\n\nEvery employee gets one zorblax day per year.\n")
    (small_tree / "tools/teams.md").unlink()
    report = svc.ingest_directory(admin, small_tree)
    assert report.summary()["added"] == 0
    assert report.updated == ["travel-and-leave/leave.md"]
    assert report.removed == ["tools/teams.md"]
    assert len(report.unchanged) == 3

    # the edited document: version 2 published and searchable, version 1 archived
    hits = svc.search(admin, "zorblax day", 3).hits
    assert hits[0].source == "fs:travel-and-leave/leave.md" and hits[0].version == 2
    versions = {v.number: v.status for v in svc.versions(admin, hits[0].node_id)}
    assert versions == {2: PUBLISHED, 1: ARCHIVED}
    # the deleted file is gone from search, both lanes
    assert "fs:tools/teams.md" not in sources(svc, admin, "Microsoft Teams meetings", 25)
    # a directory that is gone takes its (now empty) folder with it
    shutil.rmtree(small_tree / "tools")
    svc.ingest_directory(admin, small_tree)
    with svc.db.session() as session:
        assert session.scalar(select(Node).where(Node.name == "tools")) is None
        assert session.scalar(select(Node).where(Node.name == "travel-and-leave")) is not None
    # a third run with nothing changed touches nothing
    again = svc.ingest_directory(admin, small_tree)
    assert len(again.unchanged) == 3 and not (again.added or again.updated or again.removed)


def test_bad_files_get_clear_messages_and_the_rest_goes_on(svc, admin, small_tree: Path):
    (small_tree / "binary.md").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00")
    (small_tree / "latin1.txt").write_bytes("caf\xe9 au lait".encode("latin-1"))
    (small_tree / "picture.png").write_bytes(b"\x89PNG")  # an image is read by OCR: this one is damaged
    (small_tree / "drawing.svg").write_text("<svg/>")
    report = svc.ingest_directory(admin, small_tree)
    failed = dict(report.failed)
    assert failed["binary.md"] == "a binary file, not text"
    assert failed["latin1.txt"].startswith("not UTF-8 text")
    assert failed["picture.png"] == "not a PNG image (its content does not match the file's extension)"
    assert dict(report.skipped)["drawing.svg"] == "not a file type ingest reads (its formats: docs/service.md)"
    assert len(report.added) == 5


@pytest.mark.parametrize("bad", ["does/not/exist", "file"])
def test_bad_path_is_refused_clearly(svc, admin, tmp_path: Path, bad: str):
    (tmp_path / "file").write_text("x")
    with pytest.raises(InvalidArgument, match="no such directory|not a directory"):
        svc.ingest_directory(admin, tmp_path / bad)


def test_ingest_never_touches_api_documents_and_keeps_edits_until_the_file_changes(svc, admin, small_tree: Path):
    svc.ingest_directory(admin, small_tree)
    kb = svc.knowledge_base(admin, "default")
    note = svc.create_document(admin, kb.root_id, "Team note", "# Team note\n\nThe quokka rota is on Mondays.\n")
    svc.publish_version(admin, note.node_id, 1)
    slack = next(h for h in svc.search(admin, "What is Slack?", 5).hits if h.source == "fs:tools/slack/getting-started.md")
    svc.update_document(admin, slack.node_id, "# Getting started with Slack\n\nOur wombat channel is #wombats.\n")
    svc.publish_version(admin, slack.node_id, 2)

    report = svc.ingest_directory(admin, small_tree)
    assert len(report.unchanged) == 5 and not report.removed
    assert svc.search(admin, "quokka rota", 1).hits[0].title == "Team note"
    assert svc.search(admin, "wombat channel", 1).hits[0].version == 2  # the edit survives

    path = small_tree / "tools/slack/getting-started.md"
    path.write_text(path.read_text() + "\nNew paragraph about numbats.\n")
    report = svc.ingest_directory(admin, small_tree)
    assert report.updated == ["tools/slack/getting-started.md"]
    statuses = {v.number: v.status for v in svc.versions(admin, slack.node_id)}
    assert statuses == {3: PUBLISHED, 2: ARCHIVED, 1: ARCHIVED}  # the edit stays in the history
    assert "fs:tools/slack/getting-started.md" in sources(svc, admin, "numbats", 3)


def test_fts5_keyword_lane_leaves_out_words_most_chunks_contain(tmp_path):
    from rag.retrieve.text import query_terms
    from rag.service import KnowledgeService, Principal
    from rag.settings import Settings

    pages = tmp_path / "widgets"
    pages.mkdir()
    for i in range(30):
        (pages / f"w{i}.md").write_text(f"# Widget {i}\n\nEvery widget model {i} ships in a box.\n")
    (pages / "airship.md").write_text("# Airship\n\nThe zeppelin widget floats like a blimp.\n")
    settings = Settings(home=tmp_path / "home", retrieve={"keyword_engine": "fts5", "keyword_max_df": 0.2})
    with KnowledgeService(settings) as svc:
        svc.ensure_workspace("default")
        admin = Principal.local_admin("default")
        svc.ingest_directory(admin, pages)
        with svc.db.session() as session:
            assert svc.keyword.prune(session, query_terms("widget zeppelin blimp")) == ["zeppelin", "blimp"]
            assert svc.keyword.prune(session, query_terms("widget box")) == ["widget", "box"]  # two: kept
            # all three are common: the two rarest stay ("widget" is in every chunk, the others in 30 of 31)
            assert svc.keyword.prune(session, query_terms("widget box ships")) == ["box", "ships"]
        hits = svc.search(admin, "widget zeppelin blimp", 3, lanes=("text",)).hits
        assert hits[0].title == "Airship"
