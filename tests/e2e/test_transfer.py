"""Moving a store to the scale-out deployment: `rag export` from the embedded default, `rag import`
into PostgreSQL, with nothing lost (versions, metadata, summaries, activity, tokens) and the same
search results; refusals leave the target exactly as it was."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest
from sqlalchemy import func, select

from rag.errors import AlreadyExists, InvalidArgument, PermissionDenied, RagError, Unavailable
from rag.service import KnowledgeService, Principal
from rag.service.transfer.rows import TABLES, _dump
from rag.settings import Settings
from rag.store.models import ARCHIVED, DRAFT, PUBLISHED, PUBLISHING, Chunk

from ..support.paths import HANDBOOK, SMALL_SET
from ..support.transfer import archive_rows, empty_store

V1 = "# Expense policy\n\nMeals are reimbursed up to the platypus allowance of 40 dollars.\n"
V2 = "# Expense policy\n\nMeals are reimbursed up to the echidna allowance of 55 dollars.\n"
V3 = "# Expense policy\n\nA draft: meals are reimbursed up to the wombat allowance of 60 dollars.\n"
QUERIES = ("How much annual leave do I earn?", "echidna allowance for meals", "How do I start using Slack?")
ADMIN = Principal.local_admin("default")


def rows(svc: KnowledgeService) -> dict[str, list[dict]]:
    """Every row of every archived table, as the archive writes it, in key order."""
    with svc.db.session() as session:
        return {
            name: sorted(
                ({k: _dump(v) for k, v in row._mapping.items()} for row in session.execute(select(table))),
                key=lambda r, table=table: key(table, r),
            )
            for name, table in TABLES.items()
        }


def key(table, row: dict) -> tuple:
    return tuple(row[c.name] for c in table.primary_key.columns)


def chunk_count(svc: KnowledgeService) -> int:
    with svc.db.session() as session:
        return int(session.scalar(select(func.count()).select_from(Chunk)))


def vector_top(svc: KnowledgeService, query: str) -> list[tuple]:
    """The vector lane's ranking, by what a citation points at (chunk ids differ between stores)."""
    return [(h.source_id, h.version, h.char_start, h.char_end)
            for h in svc.search(ADMIN, query, 5, lanes=("vector",)).hits]


@pytest.fixture(scope="module")
def source(tmp_path_factory) -> dict:
    """An embedded store: five handbook pages in `handbook`, an API document with an archived, a
    published and a draft version, a summary, metadata, a read (citation), a token; exported once."""
    root = tmp_path_factory.mktemp("source")
    pages = root / "pages"
    for rel in SMALL_SET:
        (pages / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(HANDBOOK / rel, pages / rel)
    settings = Settings(home=root / "home")
    with KnowledgeService(settings) as svc:
        svc.ensure_workspace("default")
        report = svc.ingest_directory(ADMIN, pages, kb_name="handbook")
        assert not report.failed and len(report.added) == 5
        kb = svc.knowledge_base(ADMIN, "default")
        doc = svc.create_document(ADMIN, kb.root_id, "Expense policy", V1)
        svc.publish_version(ADMIN, doc.node_id, 1)
        svc.update_document(ADMIN, doc.node_id, V2)
        svc.publish_version(ADMIN, doc.node_id, 2)  # version 1 is archived
        svc.update_document(ADMIN, doc.node_id, V3)  # version 3 stays a draft
        svc.set_summary(ADMIN, doc.node_id, "What meals cost the company.")
        svc.set_metadata(ADMIN, doc.node_id, {"owner": "finance", "tags": ["meals", "travel"], "review": 2025})
        svc.get_document(ADMIN, doc.node_id)  # one citation
        secret, token = svc.create_token("default", "editor", ["knowledge:write"], name="Ada")
        before = {q: vector_top(svc, q) for q in QUERIES}
        top = {q: svc.search(ADMIN, q, 1).hits[0].source_id for q in QUERIES}
        archive = root / "store.jsonl"
        exported = svc.export_archive(ADMIN, archive)
        chunks = chunk_count(svc)
    return {"settings": settings, "pages": pages, "doc": doc.node_id, "secret": secret, "token": token,
            "before": before, "top": top, "archive": archive, "export": exported, "chunks": chunks}


@pytest.fixture(params=["sqlite", "postgresql"])
def target(request, tmp_path) -> Settings:
    """An empty store of either deployment to import into."""
    return empty_store(request, tmp_path)


def test_the_archive_has_a_header_then_every_row(source):
    header, by_table = archive_rows(source["archive"])
    assert header["format"] == "rag-archive" and header["version"] == 1
    assert header["revision"] and header["scope"] == {"workspace": None, "knowledge_bases": None}
    assert header["counts"] == {name: len(by_table[name]) for name in TABLES} == source["export"].counts
    assert header["counts"]["principals"] == header["counts"]["tokens"] == 1
    assert "chunks" not in header["counts"]
    token = by_table["tokens"][0]
    assert len(token["secret_hash"]) == 64 and source["secret"] not in source["archive"].read_text()
    assert oct(source["archive"].stat().st_mode & 0o777) == "0o600"
    versions = [v for v in by_table["document_versions"] if v["node_id"] == source["doc"]]
    assert [(v["number"], v["status"], v["body"]) for v in versions] == [(1, ARCHIVED, V1), (2, PUBLISHED, V2), (3, DRAFT, V3)]
    seen: set[str] = set()
    for node in by_table["nodes"]:  # parents before children, so the rows load in order
        assert node["parent_id"] is None or node["parent_id"] in seen
        seen.add(node["id"])


def test_an_export_is_one_moment_while_others_record_activity(target, tmp_path):
    with KnowledgeService(target) as svc:
        svc.ensure_workspace("default")
        svc.record(ADMIN, "search", None)

        def meanwhile(stage: str, done: int, total: int) -> None:
            if done == 0:  # counted, nothing written yet: another connection adds a row
                svc.record(ADMIN, "search", None)

        svc.export_archive(ADMIN, tmp_path / "moment.jsonl", progress=meanwhile)
        header, archived = archive_rows(tmp_path / "moment.jsonl")
        assert header["counts"] == {name: len(archived[name]) for name in TABLES}
        assert [a["action"] for a in archived["activity"]] == ["search"]
        assert [a.action for a in svc.activity(ADMIN)] == ["export_archive", "search", "search"]


def test_a_store_moves_to_postgresql_with_nothing_lost(source, postgres, tmp_path):
    _, archived = archive_rows(source["archive"])
    settings = Settings(home=tmp_path / "home2", database_url=postgres.new_database())
    stages: dict[str, tuple[int, int]] = {}
    with KnowledgeService(settings) as svc:
        report = svc.import_archive(ADMIN, source["archive"], lambda s, d, t: stages.__setitem__(s, (d, t)))
        assert report.counts == source["export"].counts and report.activity_offset == 0
        assert report.chunks == source["chunks"] == chunk_count(svc) and report.versions_indexed == 6
        assert stages["loading"][0] == stages["loading"][1] == sum(report.counts.values())
        assert stages["indexing"][0] == stages["indexing"][1] > 0

        # Every row as it was, timestamps of the re-indexed versions included; the import's own
        # activity rows follow the archived ones.
        now = rows(svc)
        for name in TABLES:
            if name != "activity":
                assert now[name] == sorted(archived[name], key=lambda r: key(TABLES[name], r)), name
        assert now["activity"][:len(archived["activity"])] == archived["activity"]
        assert [(a["action"], a["actor"]) for a in now["activity"][len(archived["activity"]):]] == [
            ("import_archive", "local-cli")]

        doc = source["doc"]
        assert [(v.number, v.status) for v in svc.versions(ADMIN, doc)] == [(3, DRAFT), (2, PUBLISHED), (1, ARCHIVED)]
        assert [svc.get_document_version(ADMIN, doc, n).content for n in (1, 2, 3)] == [V1, V2, V3]
        view = svc.get_document(ADMIN, doc)
        assert view.summary == "What meals cost the company." and view.version_number == 2
        assert view.metadata == {"owner": "finance", "tags": ["meals", "travel"], "review": 2025}
        assert view.citation_count == 2  # the source's read, and this one

        # The token still works: same principal, same token id, same grants.
        principal = svc.authenticate(source["secret"])
        assert principal.token_id == source["token"].token_id and principal.principal_id == source["token"].principal_id
        assert principal.role == "editor" and "knowledge:write" in principal.scopes

        # Search finds what it found before, under the same knowledge ids.
        assert {q: vector_top(svc, q) for q in QUERIES} == source["before"]
        assert {q: svc.search(ADMIN, q, 1).hits[0].source_id for q in QUERIES} == source["top"]
        assert source["top"]["echidna allowance for meals"] == f"kb:default:default:{doc}"

        # The sequences moved past the imported ids: new versions and activity rows do not collide.
        svc.update_document(ADMIN, doc, V3 + "\nMore.\n")
        created = svc.create_document(ADMIN, svc.knowledge_base(ADMIN, "default").root_id, "New", "# New\n")
        svc.publish_version(ADMIN, created.node_id, 1)
        assert len(svc.activity(ADMIN, 1000)) > len(archived["activity"])


def test_into_postgresql_and_a_chroma_server_and_never_twice_into_one_chroma(source, postgres, chroma_server, tmp_path):
    first = Settings(home=tmp_path / "a", database_url=postgres.new_database(), chroma_url=chroma_server)
    with KnowledgeService(first) as svc:
        assert svc.import_archive(ADMIN, source["archive"]).chunks == source["chunks"]
        assert {q: vector_top(svc, q) for q in QUERIES} == source["before"]
    # Another (empty) database with the same Chroma server would mix two stores' vectors.
    second = Settings(home=tmp_path / "b", database_url=postgres.new_database(), chroma_url=chroma_server)
    with KnowledgeService(second) as svc:
        before = rows(svc)
        with pytest.raises(AlreadyExists, match=r"this store already holds 2 knowledge bases' entries in the vector "
                                                r"lane, e\.g\. '\w+' \(kb_\w+\) in its chroma server: nothing was imported"):
            svc.import_archive(ADMIN, source["archive"])
        assert rows(svc) == before


def test_the_archive_round_trips_through_postgresql(source, postgres, tmp_path):
    """PostgreSQL exports what it imported, to the microsecond, and SQLite takes it back."""
    _, first = archive_rows(source["archive"])
    with KnowledgeService(Settings(home=tmp_path / "pg", database_url=postgres.new_database())) as svc:
        svc.import_archive(ADMIN, source["archive"])
        svc.export_archive(ADMIN, tmp_path / "again.jsonl")
    _, second = archive_rows(tmp_path / "again.jsonl")
    for name in TABLES:
        if name != "activity":
            assert second[name] == first[name], name
    assert second["activity"][:len(first["activity"])] == first["activity"]
    with KnowledgeService(Settings(home=tmp_path / "back")) as svc:
        report = svc.import_archive(ADMIN, tmp_path / "again.jsonl")
        assert report.chunks == source["chunks"]
        assert {q: vector_top(svc, q) for q in QUERIES} == source["before"]


def test_a_second_import_is_refused_and_changes_nothing(source, target):
    with KnowledgeService(target) as svc:
        svc.import_archive(ADMIN, source["archive"])
        before, chunks = rows(svc), chunk_count(svc)
        with pytest.raises(AlreadyExists) as refused:
            svc.import_archive(ADMIN, source["archive"])
        message = refused.value.message
        assert message.startswith("this store already holds 2 knowledge bases, e.g. ")
        assert "nodes" in message and "document versions" in message and "principal" in message
        assert message.endswith("nothing was imported (import into an empty store, or export other knowledge bases)")
        assert rows(svc) == before and chunk_count(svc) == chunks


def test_only_the_local_administrator_moves_stores(source, tmp_path):
    with KnowledgeService(Settings(home=tmp_path / "t")) as svc:
        secret, _ = svc.create_token("default", "admin")
        holder = svc.authenticate(secret)
        for call in (lambda: svc.export_archive(holder, tmp_path / "x.jsonl"),
                     lambda: svc.import_archive(holder, source["archive"])):
            with pytest.raises(PermissionDenied, match="local administrator"):
                call()
        with pytest.raises(PermissionDenied):
            svc.export_archive(Principal("local-cli", "default", role="editor"), tmp_path / "x.jsonl")
    assert not (tmp_path / "x.jsonl").exists()


def damaged(text: str, how: str) -> str:
    lines = text.splitlines(keepends=True)
    header = json.loads(lines[0])
    if how == "truncated line":
        return text[: len(text) - len(lines[-1]) // 2]  # the last row cut in the middle
    if how == "lost line":
        return "".join(lines[:-1])  # cut at a line boundary: only the header's counts tell
    if how == "unknown version":
        return json.dumps(header | {"version": 2}) + "\n" + "".join(lines[1:])
    if how == "not an archive":
        return '{"hello": "world"}\n' + "".join(lines[1:])
    if how == "newer schema":
        return json.dumps(header | {"revision": "9999"}) + "\n" + "".join(lines[1:])
    if how == "bad value":
        i = next(i for i, line in enumerate(lines) if '"table":"document_versions"' in line)
        record = json.loads(lines[i])
        record["row"]["number"] = "two"
        return "".join(lines[:i]) + json.dumps(record) + "\n" + "".join(lines[i + 1:])
    if how == "missing parent":
        i = next(i for i, line in enumerate(lines) if '"table":"nodes"' in line and '"parent_id":null' not in line)
        record = json.loads(lines[i])
        record["row"]["parent_id"] = "n_nowhere"
        return "".join(lines[:i]) + json.dumps(record) + "\n" + "".join(lines[i + 1:])
    if how == "unknown column":
        i = next(i for i, line in enumerate(lines) if '"table":"nodes"' in line)
        record = json.loads(lines[i])
        record["row"]["colour"] = "blue"
        return "".join(lines[:i]) + json.dumps(record) + "\n" + "".join(lines[i + 1:])
    if how == "sibling clash":  # passes every check of the archive itself; the store's constraint refuses it
        nodes = [(i, json.loads(line)["row"]) for i, line in enumerate(lines) if '"table":"nodes"' in line]
        first, (i, second) = next(((a, b) for a in nodes for b in nodes
                                   if a[0] < b[0] and a[1]["parent_id"] and a[1]["parent_id"] == b[1]["parent_id"]))
        second["name_key"] = first[1]["name_key"]
        return "".join(lines[:i]) + json.dumps({"table": "nodes", "row": second}) + "\n" + "".join(lines[i + 1:])
    raise AssertionError(how)


DAMAGE = {
    "truncated line": r"line \d+ is cut short: the archive is truncated",
    "lost line": r"the header announces \d+ \w+ rows and the archive holds \d+: it is truncated or damaged",
    "unknown version": r"unknown archive format version 2: this rag reads version 1",
    "not an archive": r"not a rag archive: its first line must be the 'rag-archive' header",
    "newer schema": r"the archive comes from a newer rag \(schema revision '9999'\)",
    "bad value": r"line \d+: document_versions.number is not an integer",
    "missing parent": r"line \d+: nodes row refers to parent node 'n_nowhere', which is not in the archive",
    "unknown column": r"line \d+: nodes has no column 'colour' here \(an archive of a newer rag\?\)",
    "sibling clash": (r"the archive does not fit this store \(two of its rows clash, or one refers to a row that is missing; "
                      r"the log has the detail\): nothing was imported"),
}


@pytest.mark.parametrize("how", list(DAMAGE))
def test_a_damaged_archive_is_refused_and_changes_nothing(source, tmp_path, how):
    path = tmp_path / "damaged.jsonl"
    path.write_text(damaged(source["archive"].read_text(encoding="utf-8"), how), encoding="utf-8")
    with KnowledgeService(Settings(home=tmp_path / "t")) as svc:
        svc.ensure_workspace("elsewhere")  # a store with something in it
        before = rows(svc)
        with pytest.raises(InvalidArgument, match=DAMAGE[how]):
            svc.import_archive(ADMIN, path)
        assert rows(svc) == before


@pytest.mark.parametrize("how", ["lost line", "sibling clash"])
def test_a_damaged_archive_is_refused_on_postgresql_too(source, postgres, tmp_path, how):
    path = tmp_path / "damaged.jsonl"
    path.write_text(damaged(source["archive"].read_text(encoding="utf-8"), how), encoding="utf-8")
    with KnowledgeService(Settings(home=tmp_path / "t", database_url=postgres.new_database())) as svc:
        svc.ensure_workspace("elsewhere")
        before = rows(svc)
        with pytest.raises(InvalidArgument, match=DAMAGE[how]):
            svc.import_archive(ADMIN, path)
        assert rows(svc) == before


def test_indexing_that_fails_leaves_the_rows_and_the_next_start_finishes_it(source, tmp_path):
    class Down:
        name, dim = "broken", 384

        def embed(self, texts):
            raise Unavailable("the embedding model broken is unavailable")

    settings = Settings(home=tmp_path / "t")
    with KnowledgeService(settings) as svc:
        svc.publisher._embedder = lambda: Down()
        with pytest.raises(RagError) as stopped:
            svc.import_archive(ADMIN, source["archive"])
        assert stopped.value.message == (
            "the rows are imported, but indexing stopped (the embedding model broken is unavailable): 6 versions are "
            "left publishing, and the next writer to open this store (any `rag` command that writes, or `rag serve`) "
            "indexes them"
        )
        assert [(v.number, v.status) for v in svc.versions(ADMIN, source["doc"])] == [
            (3, DRAFT), (2, PUBLISHING), (1, ARCHIVED)]
    with KnowledgeService(settings) as svc:  # the next writer
        assert [(v.number, v.status) for v in svc.versions(ADMIN, source["doc"])] == [
            (3, DRAFT), (2, PUBLISHED), (1, ARCHIVED)]
        assert chunk_count(svc) == source["chunks"]
        assert {q: vector_top(svc, q) for q in QUERIES} == source["before"]


def test_one_knowledge_base_joins_a_workspace_the_target_has(source, tmp_path):
    with KnowledgeService(source["settings"], writer=False) as svc:
        report = svc.export_archive(ADMIN, tmp_path / "handbook.jsonl", ["handbook"])
    assert report.counts["knowledge_bases"] == 1 and report.counts["principals"] == report.counts["tokens"] == 0
    _, archived = archive_rows(tmp_path / "handbook.jsonl")
    node_ids = {n["id"] for n in archived["nodes"]}
    assert archived["activity"] and all(a["target"] in node_ids or a["target"] == "handbook" for a in archived["activity"])
    with KnowledgeService(Settings(home=tmp_path / "t")) as svc:
        svc.ensure_workspace("default")  # with its own (empty) default knowledge base
        svc.record(ADMIN, "search", None)  # and some history of its own
        imported = svc.import_archive(ADMIN, tmp_path / "handbook.jsonl")
        assert imported.workspaces_kept == ["default"] and imported.activity_offset >= 1
        assert sorted(kb.name for kb in svc.knowledge_bases(ADMIN)) == ["default", "handbook"]
        hits = svc.search(ADMIN, "How much annual leave do I earn?", 3, kb_name="handbook").hits
        assert hits[0].source_id == "fs:default:handbook:travel-and-leave/leave.md"


# ----- the command line -----

def rag(env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, **env}
    return subprocess.run([sys.executable, "-m", "rag.cli", *args], capture_output=True, text=True, env=env, timeout=600)


def test_rag_export_and_rag_import(source, tmp_path):
    home = {"RAG_HOME": str(source["settings"].home)}
    archive = tmp_path / "cli.jsonl"
    done = rag(home, "export", str(archive))
    assert done.returncode == 0, done.stderr
    assert "Exported the whole store" in done.stdout and "document_versions" in done.stdout
    counts = archive_rows(archive)[0]["counts"]
    assert counts | {"activity": 0} == source["export"].counts | {"activity": 0}  # exports add activity rows
    assert counts["activity"] > source["export"].counts["activity"]
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".part")]

    streamed = rag(home, "export", "-", "--kb", "handbook")
    assert streamed.returncode == 0, streamed.stderr
    header = json.loads(streamed.stdout.splitlines()[0])
    assert header["scope"] == {"workspace": "default", "knowledge_bases": ["handbook"]}
    assert "Exported 'handbook' of workspace 'default' to -" in streamed.stderr

    missing = rag(home, "export", str(tmp_path / "no" / "such" / "dir.jsonl"))
    assert missing.returncode == 2 and "no such directory" in missing.stderr and "Traceback" not in missing.stderr
    unknown = rag(home, "export", str(tmp_path / "x.jsonl"), "--kb", "nope")
    assert unknown.returncode == 2 and "knowledge base 'nope' not found in workspace 'default'" in unknown.stderr

    target = {"RAG_HOME": str(tmp_path / "target")}
    loaded = rag(target, "import", str(archive), "--json")
    assert loaded.returncode == 0, loaded.stderr
    summary = json.loads(loaded.stdout)
    assert summary["counts"] == counts and summary["chunks"] == source["chunks"]

    again = rag(target, "import", str(archive))
    assert again.returncode == 2 and "Traceback" not in again.stderr
    assert "error: this store already holds 2 knowledge bases" in again.stderr

    broken = tmp_path / "broken.jsonl"
    broken.write_text(damaged(archive.read_text(encoding="utf-8"), "unknown version"), encoding="utf-8")
    refused = rag({"RAG_HOME": str(tmp_path / "other")}, "import", str(broken))
    assert refused.returncode == 2 and "Traceback" not in refused.stderr
    assert "error: unknown archive format version 2: this rag reads version 1" in refused.stderr
    nothing = rag({"RAG_HOME": str(tmp_path / "other")}, "import", str(tmp_path / "absent.jsonl"))
    assert nothing.returncode == 2 and "no such archive" in nothing.stderr

    searched = rag(target, "search", "How much annual leave do I earn?", "--limit", "1", "--json")
    assert searched.returncode == 0, searched.stderr
    assert json.loads(searched.stdout)["results"][0]["source_id"] == "fs:default:handbook:travel-and-leave/leave.md"


def test_run_by_a_server_an_import_and_an_export_send_their_progress_and_archive_as_events(source, tmp_path):
    """What `rag import` and `rag export -` beside a running `rag serve` receive (POST /local/…):
    progress reports while the server works, then the report; an export's archive as text events."""
    from rag.commands import OPERATIONS

    with KnowledgeService(Settings(home=tmp_path / "served")) as svc:
        imported = list(OPERATIONS["import"](svc, file=str(source["archive"])))
        stages = [e["progress"][0] for e in imported if "progress" in e]
        assert {"loading", "indexing"} <= set(stages) and list(imported[-1]) == ["report"]
        assert imported[-1]["report"]["counts"] == source["export"].counts
        assert imported[-1]["report"]["chunks"] == source["chunks"]
        exported = list(OPERATIONS["export"](svc, file="-", kb=["handbook"], workspace=None))
    text = "".join(e["data"] for e in exported if "data" in e)
    header, *rows = text.splitlines()
    assert text.endswith("\n") and json.loads(header)["scope"]["knowledge_bases"] == ["handbook"]
    assert len(rows) == sum(json.loads(header)["counts"].values())
    assert exported[-1]["report"]["archive"] == "-"
