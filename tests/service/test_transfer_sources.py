"""Sources in `rag export` / `rag import` (issue 29, section 1): a synced folder source moves to a fresh
store with its items and its last sync, idle, and its next sync there finds everything unchanged; a
source travels with the name of its secret and never a value; a damaged source row refuses the
import before anything is written; an archive made before sources existed imports as before."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import timedelta
from pathlib import Path

import pytest
from sqlalchemy import func, select, update

from rag.errors import AlreadyExists, InvalidArgument
from rag.service import KnowledgeService, Principal
from rag.service.transfer.rows import TABLES
from rag.settings import Settings
from rag.store.models import SOURCE_IDLE, SOURCE_RUNNING, Node, Source, SourceItem, utcnow

from ..support.transfer import archive_rows, empty_store

ADMIN = Principal.local_admin("default")
SECRET = "s3cr3t-value"
PAGES = {
    "vpn.md": "# VPN setup\n\nConnect to the kookaburra gateway before opening the intranet.\n",
    "travel/per-diem.md": "# Per diem\n\nThe per diem for a day in the field is 48 dollars.\n",
    "travel/booking.md": "# Booking travel\n\nBook trains through the quokka desk three days ahead.\n",
}


def write_pages(root: Path) -> Path:
    for rel, text in PAGES.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text, encoding="utf-8")
    return root


def write_archive(path: Path, header: dict, by_table: dict[str, list[dict]]) -> Path:
    lines = [header] + [{"table": table, "row": row} for table in TABLES for row in by_table.get(table, ())]
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    return path


def store_rows(svc: KnowledgeService) -> dict[str, int]:
    with svc.db.session() as session:
        return {name: int(session.scalar(select(func.count()).select_from(table))) for name, table in TABLES.items()}


def node_state(svc: KnowledgeService) -> list[tuple]:
    with svc.db.session() as session:
        return sorted(session.execute(select(Node.id, Node.source_id, Node.ingest_root, Node.ingest_hash)
                                      .where(Node.ingest_root.is_not(None))).all())


@pytest.fixture(scope="module")
def exported(tmp_path_factory) -> dict:
    """A store with a synced folder source `docs` (in Team/Docs of the default knowledge base) and a
    paused source `private` naming the secret `gh`, which this service's Settings supply; `docs` is
    caught mid-sync by the export (a lease and progress, as another process holding it writes them)."""
    root = tmp_path_factory.mktemp("sources")
    docs, private = write_pages(root / "docs"), write_pages(root / "private")
    settings = Settings(home=root / "home", source_secrets={"gh": SECRET})
    with KnowledgeService(settings) as svc:
        svc.ensure_workspace("default")
        svc.knowledge_base(ADMIN, "other", create=True)
        svc.add_source(ADMIN, "docs", "folder", {"path": str(docs)}, None, "Team/Docs")
        info, report = svc.sync_source(ADMIN, "docs")
        assert sorted(report.added) and not report.failed and info.row.status == SOURCE_IDLE
        svc.add_source(ADMIN, "private", "folder", {"path": str(private)}, "other", "", None, "gh")
        svc.set_source_paused(ADMIN, "private", True)
        before = {s.row.name: s.payload() for s in svc.list_sources(ADMIN)}
        nodes = node_state(svc)
        with svc.db.session() as session:
            session.execute(update(Source).where(Source.name == "docs").values(
                status=SOURCE_RUNNING, lease_owner="elsewhere:1:abc", lease_until=utcnow() + timedelta(hours=1),
                progress={"stage": "reading", "done": 1, "total": 3}))
        archive = root / "store.jsonl"
        svc.export_archive(ADMIN, archive)
        svc.export_archive(ADMIN, root / "other.jsonl", ["other"])
        svc.export_archive(ADMIN, root / "default.jsonl", ["default"])
    return {"root": root, "docs": docs, "archive": archive, "before": before, "nodes": nodes,
            "other": root / "other.jsonl", "default": root / "default.jsonl"}


@pytest.fixture(params=["sqlite", "postgresql"])
def target(request, tmp_path) -> Settings:
    """An empty store of either deployment to import into."""
    return empty_store(request, tmp_path)


def test_sources_travel_idle_with_their_items_and_the_name_of_their_secret(exported):
    text = exported["archive"].read_text(encoding="utf-8")
    header, rows = archive_rows(exported["archive"])
    assert header["counts"]["sources"] == 2 and header["counts"]["source_items"] == len(PAGES)
    assert list(TABLES).index("sources") > list(TABLES).index("nodes")
    assert list(TABLES).index("source_items") == list(TABLES).index("sources") + 1
    by_name = {s["name"]: s for s in rows["sources"]}
    for row in by_name.values():
        assert row["status"] == SOURCE_IDLE
        assert not {"lease_owner", "lease_until", "progress"} & set(row)
    assert by_name["private"]["secret"] == "gh" and by_name["private"]["paused"] is True
    assert by_name["docs"]["last_outcome"] == "ok" and by_name["docs"]["last_finished_at"]
    assert SECRET not in text and "elsewhere:1:abc" not in text
    node_ids = {n["id"] for n in rows["nodes"]}
    assert all(item["node_id"] in node_ids and item["source_pk"] == by_name["docs"]["id"]
               for item in rows["source_items"])


def test_a_knowledge_base_takes_its_sources_along(exported):
    header, rows = archive_rows(exported["other"])
    assert [s["name"] for s in rows["sources"]] == ["private"] and rows["source_items"] == []
    header, rows = archive_rows(exported["default"])
    assert [s["name"] for s in rows["sources"]] == ["docs"] and len(rows["source_items"]) == len(PAGES)
    assert "source_add" in {a["action"] for a in rows["activity"]}  # the activity about its sources too


def test_imported_sources_are_idle_and_their_next_sync_finds_nothing_changed(exported, target):
    with KnowledgeService(target) as svc:
        report = svc.import_archive(ADMIN, exported["archive"])
        assert report.counts["sources"] == 2 and report.counts["source_items"] == len(PAGES)
        listed = {s.row.name: s.payload() for s in svc.list_sources(ADMIN)}
        assert listed == exported["before"]  # idle, with their last sync, items, schedule and secret's name
        assert node_state(svc) == exported["nodes"]
        with svc.db.session() as session:
            assert session.scalar(select(func.count()).where(Source.lease_owner.is_not(None))) == 0

        info, again = svc.sync_source(ADMIN, "docs")
        assert (again.added, again.updated, again.removed, again.failed) == ([], [], [], [])
        assert len(again.unchanged) == len(PAGES) and again.chunks == 0
        assert info.row.status == SOURCE_IDLE and info.items == len(PAGES)
        assert node_state(svc) == exported["nodes"]

        # A changed file and a new one: the new item's row takes an id past the imported ones (on
        # PostgreSQL, the sequence was moved past them).
        (exported["docs"] / "vpn.md").write_text(PAGES["vpn.md"] + "\nUse the wombat profile.\n", encoding="utf-8")
        (exported["docs"] / "new.md").write_text("# New\n\nThe numbat room is on the second floor.\n")
        try:
            _, changed = svc.sync_source(ADMIN, "docs")
        finally:
            (exported["docs"] / "vpn.md").write_text(PAGES["vpn.md"], encoding="utf-8")
            (exported["docs"] / "new.md").unlink()
        assert (len(changed.updated), len(changed.added), len(changed.unchanged)) == (1, 1, len(PAGES) - 1)
        with svc.db.session() as session:
            assert session.scalar(select(func.count()).select_from(SourceItem)) == len(PAGES) + 1


def test_a_source_the_target_has_already_is_a_clash(exported, tmp_path):
    with KnowledgeService(Settings(home=tmp_path / "t")) as svc:
        svc.ensure_workspace("default")
        svc.knowledge_base(ADMIN, "mine", create=True)
        svc.add_source(ADMIN, "DOCS", "folder", {"path": str(exported["docs"])}, "mine")
        before = store_rows(svc)
        with pytest.raises(AlreadyExists) as refused:
            svc.import_archive(ADMIN, exported["default"])
        assert "source 'docs' of workspace 'default'" in refused.value.message
        assert refused.value.message.endswith("nothing was imported (import into an empty store, or export other "
                                              "knowledge bases)")
        assert store_rows(svc) == before


def damage(rows: dict[str, list[dict]], how: str) -> str:
    sources, items = rows["sources"], rows["source_items"]
    docs = next(s for s in sources if s["name"] == "docs")
    if how == "knowledge base not in the archive":
        docs["kb_id"] = "kb_nowhere"
        return r"line \d+: sources row refers to knowledge base 'kb_nowhere', which is not in the archive"
    if how == "two sources of one name":
        sources.append({**docs, "id": "src_twin"})
        return r"line \d+: two sources are named 'docs' in workspace 'default'"
    if how == "item of no source":
        items[0]["source_pk"] = "src_nowhere"
        return r"line \d+: source_items row refers to source 'src_nowhere', which is not in the archive"
    if how == "item of no node":
        items[0]["node_id"] = "n_nowhere"
        return r"line \d+: source_items row refers to node 'n_nowhere', which is not in the archive"
    if how == "item twice":
        items.append({**items[0], "id": 10_000})
        return rf"line \d+: item {items[0]['item_id']!r} of source 'docs' appears twice"
    if how == "paused not a boolean":
        docs["paused"] = "no"
        return r"line \d+: sources.paused is not true or false"
    raise AssertionError(how)


@pytest.mark.parametrize("how", ["knowledge base not in the archive", "two sources of one name", "item of no source",
                                 "item of no node", "item twice", "paused not a boolean"])
def test_a_damaged_source_row_is_refused_and_nothing_is_loaded(exported, tmp_path, how):
    header, rows = archive_rows(exported["archive"])
    expected = damage(rows, how)
    header["counts"] = {name: len(rows[name]) for name in TABLES}
    path = write_archive(tmp_path / "damaged.jsonl", header, rows)
    with KnowledgeService(Settings(home=tmp_path / "t")) as svc:
        svc.ensure_workspace("elsewhere")
        before = store_rows(svc)
        with pytest.raises(InvalidArgument, match=expected):
            svc.import_archive(ADMIN, path)
        assert store_rows(svc) == before


def test_an_archive_made_before_sources_imports_as_before(exported, tmp_path):
    """Schema revision 0011: no sources tables in the header's counts, no `url` on nodes."""
    header, rows = archive_rows(exported["archive"])
    header = {**header, "revision": "0011",
              "counts": {n: len(rows[n]) for n in TABLES if n not in ("sources", "source_items")}}
    rows["sources"], rows["source_items"] = [], []
    for node in rows["nodes"]:
        node.pop("url", None)
    path = write_archive(tmp_path / "old.jsonl", header, rows)
    with KnowledgeService(Settings(home=tmp_path / "t")) as svc:
        report = svc.import_archive(ADMIN, path)
        assert report.counts["sources"] == report.counts["source_items"] == 0
        assert report.counts["nodes"] == len(rows["nodes"]) and svc.list_sources(ADMIN) == []
        hits = svc.search(ADMIN, "kookaburra gateway", 1).hits
        assert hits and hits[0].title == "VPN setup"


def test_a_secret_value_in_a_source_row_is_masked_in_messages_and_refuses_the_export(tmp_path):
    folder = write_pages(tmp_path / f"copy-{SECRET}")  # a path that happens to hold the secret
    settings = Settings(home=tmp_path / "home", source_secrets={"gh": SECRET, "other_file": str(tmp_path / "x")})
    (tmp_path / "x").write_text("from-a-file-secret\n")
    with KnowledgeService(settings) as svc:
        svc.ensure_workspace("default")
        svc.add_source(ADMIN, "plain", "folder", {"path": str(tmp_path / "nowhere")})
        with svc.db.session() as session:  # a connector's message that quoted both secrets
            session.execute(update(Source).where(Source.name == "plain").values(
                last_error=f"denied for {SECRET} and from-a-file-secret", last_failures=[["a.md", f"token {SECRET}"]]))
        svc.export_archive(ADMIN, tmp_path / "plain.jsonl")
        text = (tmp_path / "plain.jsonl").read_text(encoding="utf-8")
        assert SECRET not in text and "from-a-file-secret" not in text
        plain = archive_rows(tmp_path / "plain.jsonl")[1]["sources"][0]
        assert plain["last_error"] == "denied for [secret] and [secret]"
        assert plain["last_failures"] == [["a.md", "token [secret]"]]

        svc.add_source(ADMIN, "leaky", "folder", {"path": str(folder)})
        with pytest.raises(InvalidArgument, match=r"source 'leaky' of workspace 'default' holds the value of a "
                                                  r"secret in its config: .*nothing was exported"):
            svc.export_archive(ADMIN, tmp_path / "leaky.jsonl")
    assert not (tmp_path / "leaky.jsonl").exists()
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".part")]


def rag(home: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "RAG_HOME": str(home)}
    return subprocess.run([sys.executable, "-m", "rag.cli", *args], capture_output=True, text=True, env=env, timeout=600)


def test_rag_import_then_rag_source_list_and_rag_source_sync(exported, tmp_path):
    """What an operator sees on the target: the sources, idle with their last sync, and a sync that
    finds nothing to do."""
    home = tmp_path / "target"
    loaded = rag(home, "import", str(exported["archive"]), "--json")
    assert loaded.returncode == 0, loaded.stderr
    assert json.loads(loaded.stdout)["counts"]["sources"] == 2
    listed = rag(home, "source", "list", "--json")
    assert listed.returncode == 0, listed.stderr
    sources = {s["name"]: s for s in json.loads(listed.stdout)}
    assert sorted(sources) == ["docs", "private"] and {s["status"] for s in sources.values()} == {SOURCE_IDLE}
    assert sources["docs"]["last_sync"] == exported["before"]["docs"]["last_sync"]
    assert sources["docs"]["items"] == len(PAGES) and sources["private"]["secret"] == "gh"
    synced = rag(home, "source", "sync", "docs", "--json")
    assert synced.returncode == 0, synced.stderr
    summary = json.loads(synced.stdout)
    assert (summary["added"], summary["updated"], summary["unchanged"], summary["outcome"]) == (0, 0, len(PAGES), "ok")
