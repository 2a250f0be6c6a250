"""Sources as objects of the service (rag/service/sources/): added, synced, paused, removed, with the
access rule, the bounds of their arguments, secrets that are never shown, and one sync at a time.
A folder source is the connector every machine can run; the other kinds have their own tests."""

from __future__ import annotations

import shutil
from datetime import timedelta
from pathlib import Path

import pytest
from sqlalchemy import func, select, update

from rag.errors import AlreadyExists, Busy, InvalidArgument, NotFound, PermissionDenied
from rag.render import hit_payload, hit_text
from rag.service import KnowledgeService, Principal
from rag.store.models import DOCUMENT, PUBLISHED, DocumentVersion, Node, Source, SourceItem, utcnow
from tests.support.paths import HANDBOOK, SMALL_SET


def _docs(svc: KnowledgeService, root_key_like: str = "source:%") -> dict[str, Node]:
    with svc.db.session() as session:
        nodes = session.scalars(select(Node).where(Node.kind == DOCUMENT, Node.ingest_root.like(root_key_like)))
        found = {n.source_id: n for n in nodes}
        for node in found.values():
            session.expunge(node)
        return found


def _published_versions(svc: KnowledgeService, node_id: str) -> list[int]:
    with svc.db.session() as session:
        return list(session.scalars(select(DocumentVersion.number).where(
            DocumentVersion.node_id == node_id, DocumentVersion.status == PUBLISHED)))


def test_a_folder_source_syncs_only_what_changed(svc: KnowledgeService, admin: Principal, small_tree: Path) -> None:
    info = svc.add_source(admin, "handbook-pages", "folder", {"path": str(small_tree)}, None, "Team/Handbook")
    assert info.payload()["status"] == "idle" and info.payload()["last_sync"]["outcome"] is None

    _, first = svc.sync_source(admin, "handbook-pages")
    assert sorted(first.added) == sorted(SMALL_SET) and not first.failed and first.chunks > 0
    docs = _docs(svc)
    leave = docs["fs:default:handbook-pages:travel-and-leave/leave.md"]
    assert leave.source_label == "fs:travel-and-leave/leave.md"
    with svc.db.session() as session:  # the documents sit in the source's folder, in the files' own hierarchy
        from rag.service.content.tree import path_label

        assert path_label(session, session.get(Node, leave.id)).startswith("default/Team/Handbook/travel-and-leave/")
        assert session.scalar(select(func.count()).select_from(SourceItem)) == len(SMALL_SET)

    again_info, again = svc.sync_source(admin, "handbook-pages")
    assert sorted(again.unchanged) == sorted(SMALL_SET) and again.chunks == 0 and not again.added
    assert again_info.payload()["last_sync"]["outcome"] == "ok"
    assert again_info.payload()["items"] == len(SMALL_SET)

    (small_tree / "tools/teams.md").write_text("# Teams\n\nThe teams page now says one new thing about rotas.\n")
    (small_tree / "tools/slack/getting-started.md").unlink()
    shutil.copy(HANDBOOK / "tools/slack.md", small_tree / "tools/slack.md")
    _, third = svc.sync_source(admin, "handbook-pages")
    assert third.updated == ["tools/teams.md"] and third.removed == ["tools/slack/getting-started.md"]
    assert third.added == ["tools/slack.md"] and len(third.unchanged) == len(SMALL_SET) - 2
    teams = _docs(svc)["fs:default:handbook-pages:tools/teams.md"]
    assert _published_versions(svc, teams.id) == [2]  # the new content is the published version
    hits = svc.search(admin, "rotas teams page new thing", 5).hits
    assert hits and hits[0].source_id == "fs:default:handbook-pages:tools/teams.md"


def test_a_document_written_through_the_api_is_left_alone(svc: KnowledgeService, admin: Principal,
                                                          small_tree: Path) -> None:
    svc.add_source(admin, "pages", "folder", {"path": str(small_tree)}, None, "Synced")
    svc.sync_source(admin, "pages")
    with svc.db.session() as session:
        folder_id = session.scalar(select(Node.id).where(Node.name == "Synced", Node.kind == "folder"))
    mine = svc.create_document(admin, folder_id, "My own notes", "# My own notes\n\nWritten by hand.\n")
    for rel in SMALL_SET:
        (small_tree / rel).unlink()
    _, report = svc.sync_source(admin, "pages")
    assert sorted(report.removed) == sorted(SMALL_SET)
    with svc.db.session() as session:  # the folder stays too: it holds a document nobody synced
        assert session.get(Node, mine.node_id).parent_id == folder_id
        assert session.scalar(select(DocumentVersion.body).where(DocumentVersion.node_id == mine.node_id)).startswith(
            "# My own notes")


def test_managing_sources_needs_an_admin_with_access_all(svc: KnowledgeService, admin: Principal,
                                                         small_tree: Path, principal_for) -> None:
    svc.add_source(admin, "pages", "folder", {"path": str(small_tree)}, None, "Team/Pages")
    svc.sync_source(admin, "pages")
    svc.add_source(admin, "elsewhere", "folder", {"path": str(small_tree)}, "other-kb", secret="docs_token")
    editor = principal_for("editor")
    assert [s.payload()["name"] for s in svc.list_sources(editor)] == ["elsewhere", "pages"]
    assert "secret" not in svc.show_source(editor, "elsewhere").payload()  # the secret's name is an admin's to see
    assert svc.show_source(admin, "elsewhere").payload()["secret"] == "docs_token"
    for attempt in (lambda p: svc.add_source(p, "more", "folder", {"path": str(small_tree)}),
                    lambda p: svc.sync_source(p, "pages"), lambda p: svc.set_source_paused(p, "pages", True),
                    lambda p: svc.remove_source(p, "pages")):
        with pytest.raises(PermissionDenied):
            attempt(editor)

    with svc.db.session() as session:
        pages = session.scalar(select(Node).where(Node.name == "Pages", Node.kind == "folder"))
        travel = session.scalar(select(Node).where(Node.name == "travel-and-leave", Node.parent_id == pages.id))
        team = session.scalar(select(Node).where(Node.name == "Team", Node.kind == "folder"))
    scoped_admin = principal_for("admin", folders=(team.id,))  # the source's target lies inside its folder
    assert [s.payload()["name"] for s in svc.list_sources(scoped_admin)] == ["pages"]
    with pytest.raises(PermissionDenied):  # a folder-scoped admin sees, never manages
        svc.sync_source(scoped_admin, "pages")
    below = principal_for("viewer", write=False, folders=(travel.id,))  # a folder below the target: not inside
    assert svc.list_sources(below) == []
    for name in ("pages", "elsewhere", "nothing-of-that-name"):
        with pytest.raises(NotFound, match="source not found"):
            svc.show_source(below, name)


@pytest.mark.parametrize(("change", "message"), [
    ({"name": "../up"}, "a source's name"),
    ({"kind": "ftp"}, "unknown source kind 'ftp'"),
    ({"config": {"path": "/tmp", "pth": "typo"}}, "pth: Extra inputs are not permitted"),
    ({"config": {}}, "path: Field required"),
    ({"every": "5s"}, "at least 60 seconds"),
    ({"every": "often"}, "a duration such as 30m"),
    ({"secret": "ghp_abc123/=="}, "never its value"),
    ({"folder": "a/\u202eb"}, "`folder`: a folder name"),
])
def test_bad_source_arguments_are_refused_clearly(svc: KnowledgeService, admin: Principal, tmp_path: Path,
                                                  change: dict, message: str) -> None:
    arguments = {"name": "docs", "kind": "folder", "config": {"path": str(tmp_path)}, "every": None,
                 "secret": None, "folder": ""} | change
    with pytest.raises(InvalidArgument, match=message.replace("(", r"\(").replace("?", r"\?")):
        svc.add_source(admin, arguments["name"], arguments["kind"], arguments["config"], None, arguments["folder"],
                       arguments["every"], arguments["secret"])
    assert svc.list_sources(admin) == []


def test_a_name_is_one_source(svc: KnowledgeService, admin: Principal, tmp_path: Path) -> None:
    svc.add_source(admin, "Docs", "folder", {"path": str(tmp_path)})
    with pytest.raises(AlreadyExists, match="a source named 'docs' exists already"):
        svc.add_source(admin, "docs", "folder", {"path": str(tmp_path)})


def test_a_missing_secret_or_folder_fails_the_sync_with_its_reason(svc: KnowledgeService, admin: Principal,
                                                                   tmp_path: Path) -> None:
    svc.add_source(admin, "needs-secret", "folder", {"path": str(tmp_path)}, secret="not_set_anywhere")
    info, report = svc.sync_source(admin, "needs-secret")
    assert report.outcome == "failed" and "RAG_SOURCE_SECRETS__NOT_SET_ANYWHERE" in report.error
    assert info.payload()["last_sync"]["error"] == report.error and info.payload()["status"] == "idle"

    svc.add_source(admin, "gone", "folder", {"path": str(tmp_path / "missing")})
    info, report = svc.sync_source(admin, "gone")
    assert report.outcome == "failed" and report.error.endswith("missing: no such directory")


def test_a_secret_comes_from_settings_and_is_never_shown(tmp_path: Path, small_tree: Path) -> None:
    from rag.settings import Settings

    value = "s3cr3t-value-never-shown"
    settings = Settings(home=tmp_path / "home", source_secrets={"docs_token": value})
    assert settings.source_secret("DOCS_TOKEN") == value
    with KnowledgeService(settings) as svc:
        admin = Principal.local_admin("default")
        svc.ensure_workspace("default")
        svc.add_source(admin, "pages", "folder", {"path": str(small_tree)}, secret="docs_token")
        info, report = svc.sync_source(admin, "pages")
        assert report.outcome == "ok"
        shown = repr(info.payload()) + repr([(a.detail, a.target) for a in svc.activity(admin, limit=50)])
        with svc.db.session() as session:
            stored = repr([(s.config, s.secret, s.last_error) for s in session.scalars(select(Source))])
    assert value not in shown and value not in stored
    file_secret = tmp_path / "token"
    file_secret.write_text(value + "\n")
    assert Settings(home=tmp_path / "h2", source_secrets={"x_file": str(file_secret)}).source_secret("x") == value


def test_one_sync_at_a_time_and_a_dead_holder_s_lease_expires(svc: KnowledgeService, admin: Principal,
                                                              small_tree: Path) -> None:
    svc.add_source(admin, "pages", "folder", {"path": str(small_tree)})
    with svc.db.session() as session:
        source_pk = session.scalar(select(Source.id))
    assert svc.sources._take_lease(source_pk)  # another sync holds it (as one in another worker would)
    with pytest.raises(Busy, match="running already"):
        svc.sync_source(admin, "pages")
    assert svc.show_source(admin, "pages").payload()["status"] == "running"
    with svc.db.session() as session:  # its holder died: the lease runs out
        session.execute(update(Source).values(lease_until=utcnow() - timedelta(seconds=1)))
    _, report = svc.sync_source(admin, "pages")
    assert sorted(report.added) == sorted(SMALL_SET)
    assert svc.show_source(admin, "pages").payload()["status"] == "idle"


def test_a_schedule_makes_a_source_due_and_pausing_stops_it(svc: KnowledgeService, admin: Principal,
                                                            small_tree: Path) -> None:
    svc.add_source(admin, "hourly", "folder", {"path": str(small_tree)}, every="1h")
    svc.add_source(admin, "manual", "folder", {"path": str(small_tree)}, "other")
    with svc.db.session() as session:
        ids = {s.name: s.id for s in session.scalars(select(Source))}
    assert svc.sources.due() == [ids["hourly"]]
    svc.set_source_paused(admin, "hourly", True)
    assert svc.sources.due() == []
    svc.set_source_paused(admin, "hourly", False)
    svc.sources.run(ids["hourly"])
    shown = svc.show_source(admin, "hourly").payload()
    assert shown["last_sync"]["outcome"] == "ok" and shown["next_run_at"] > shown["last_sync"]["finished_at"]
    assert svc.sources.due() == []  # not due again before its hour


def test_removing_a_source_keeps_its_documents_unless_asked(svc: KnowledgeService, admin: Principal,
                                                            small_tree: Path) -> None:
    svc.add_source(admin, "keep", "folder", {"path": str(small_tree)}, "kept")
    svc.add_source(admin, "drop", "folder", {"path": str(small_tree)}, "dropped")
    svc.sync_source(admin, "keep")
    svc.sync_source(admin, "drop")
    assert svc.remove_source(admin, "keep")["documents_kept"] is True
    removed = svc.remove_source(admin, "drop", keep_documents=False)
    assert removed["documents"] == len(SMALL_SET)
    with svc.db.session() as session:
        kept = session.scalars(select(Node).where(Node.kind == DOCUMENT, Node.source_id.like("fs:default:keep:%"))).all()
        assert len(kept) == len(SMALL_SET) and all(n.ingest_root is None for n in kept)
        assert session.scalar(select(func.count()).select_from(Node).where(
            Node.source_id.like("fs:default:drop:%"))) == 0
        assert session.scalar(select(func.count()).select_from(Source)) == 0
    with pytest.raises(NotFound):
        svc.show_source(admin, "keep")
    assert svc.search(admin, "annual leave", 3, kb_name="kept").hits  # still searchable, as ordinary documents


def test_a_source_s_url_is_an_added_field_never_a_text_line() -> None:
    from rag.retrieve.types import Hit

    hit = Hit(chunk_id=1, score=0.03, retrievers=["vector"], node_id="n_1", kb_id="kb_1",
              source_id="web:default:docs:/guide/", title="Guide", source="web:docs.example.org/guide/", version=1,
              heading_path=[], text="The guide.", char_start=0, char_end=10, url="https://docs.example.org/guide/")
    payload = hit_payload(hit)
    assert payload["url"] == "https://docs.example.org/guide/"
    without = hit_payload(Hit(**{**hit.__dict__, "url": None}))
    assert "url" not in without and hit_text(payload) == hit_text(without)
