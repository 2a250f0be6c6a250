"""Syncs of sources as processes (issue 29), without a server: `rag source sync` killed with
kill -9 in the middle resumes once its lease runs out, storing nothing twice (a folder, a Git
repository, a website, an S3 bucket, a Notion and a Confluence export); and two `rag source sync` of one source started at once against one
PostgreSQL store (and a Chroma server): one syncs, the other is refused, every document exists once.

The store is watched by reading it, not by sleeping: the SQLite file opened read-only (the CLI
holds the store's lock, sqlite3 does not need it), PostgreSQL through psycopg."""

from __future__ import annotations

import json
import signal
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable

import pytest

from ..support.exports import CONFLUENCE, NOTION, zip_tree
from ..support.gitrepo import GitRepo
from ..support.processes import wait_until
from ..support.s3server import S3Server, s3_server
from ..support.site_server import SiteServer, build_site
from ..support.sources_e2e import handbook_pages, query, rag_cli, rag_env, rag_popen, rag_serve

PAGES = 60
BUSY = "a sync of this source is running already"
# A lease far longer than the test: the killed sync's source is free because its process is gone
# (issue 49, 8(c)), not because the lease ran out.
KILLED = {"RAG_SOURCES__BATCH": "4", "RAG_SOURCES__LEASE_SECONDS": "3600"}


def _folder(root: Path) -> tuple[dict, int]:
    return {"path": str(handbook_pages(root / "pages", PAGES))}, PAGES


def _git(root: Path) -> tuple[dict, int]:
    repo = GitRepo(root / "repo")
    handbook_pages(repo.work, PAGES)
    repo.commit("the handbook")
    repo.push()
    return {"repository": str(repo.bare), "branch": "main"}, PAGES


def _notion(root: Path) -> tuple[dict, int]:
    return {"path": str(zip_tree(NOTION, root / "notion.zip"))}, 9  # its pages, one attachment, its database (a sheet)


def _confluence(root: Path) -> tuple[dict, int]:
    return {"path": str(zip_tree(CONFLUENCE, root / "space.zip")), "base_url": "https://wiki.example.org/wiki"}, 7


def _website(site: SiteServer) -> Callable[[Path], tuple[dict, int]]:
    def config(root: Path) -> tuple[dict, int]:
        pages = [p for p in site.site if p.startswith("/docs/") and p.endswith(".html") and "/private/" not in p]
        return {"start_urls": [site.url("/docs/index.html")], "include_files": False,
                "allow_hosts": ["127.0.0.1"]}, len(pages)
    return config


def _s3(server: S3Server) -> Callable[[Path], tuple[dict, int]]:
    def config(root: Path) -> tuple[dict, int]:
        pages = handbook_pages(root / "pages", PAGES)
        client = server.client()
        client.create_bucket(Bucket="handbook")
        for page in sorted(pages.rglob("*.md")):
            client.put_object(Bucket="handbook", Key=page.relative_to(pages).as_posix(), Body=page.read_bytes(),
                              ACL="public-read")
        return {"bucket": "handbook", "endpoint_url": server.url, "allow_hosts": ["127.0.0.1"]}, PAGES
    return config


@pytest.fixture(scope="module")
def s3():
    with s3_server(auth=False) as server:  # a public bucket, read unsigned: no secret to pass
        yield server


@pytest.fixture(scope="module")
def site():
    with SiteServer(build_site(12)) as server:
        yield server


def _source_pk(db: Path, name: str) -> str:
    return query(db, "SELECT id FROM sources WHERE name = ?", name)[0][0]


def _stored(db: Path, source_pk: str) -> int:
    return query(db, "SELECT count(*) FROM source_items WHERE source_pk = ?", source_pk)[0][0]


def _lease_over(db: Path, source_pk: str) -> bool:
    (until,) = query(db, "SELECT lease_until FROM sources WHERE id = ?", source_pk)[0]
    if until is None:
        return True
    when = datetime.fromisoformat(until)
    return (when if when.tzinfo else when.replace(tzinfo=timezone.utc)) < datetime.now(timezone.utc)


def _documents(db: Path, source_pk: str) -> list[tuple]:
    """(source_id, versions, published versions) of each document the source brought."""
    return query(db, """
        SELECT n.source_id, count(v.id), sum(CASE WHEN v.status = 'published' THEN 1 ELSE 0 END)
        FROM nodes n LEFT JOIN document_versions v ON v.node_id = n.id
        WHERE n.kind = 'document' AND n.ingest_root = ? GROUP BY n.id, n.source_id""", f"source:{source_pk}")


@pytest.mark.parametrize("kind", ["folder", "git", "website", "s3", "notion", "confluence"])
def test_a_sync_killed_with_kill_9_resumes_without_duplicates(kind, tmp_path, request):
    servers = {"website": lambda: _website(request.getfixturevalue("site")), "s3": lambda: _s3(request.getfixturevalue("s3"))}
    make = {"folder": _folder, "git": _git, "notion": _notion, "confluence": _confluence}.get(kind) or servers[kind]()
    config, expected = make(tmp_path)
    home = tmp_path / "home"
    added = rag_cli(home, "source", "add", "killed", "--kind", kind, "--config", json.dumps(config),
                    "--folder", "Killed")
    assert added.returncode == 0, added.stderr
    db = home / "rag.db"
    source_pk = _source_pk(db, "killed")
    env = rag_env(home, **KILLED)
    first = rag_popen(home, "source", "sync", "killed", "--json", env=env)
    try:
        wait_until(lambda: first.poll() is not None or _stored(db, source_pk) > 0, 300, "the first stored batch")
    finally:
        first.send_signal(signal.SIGKILL)
        said = first.communicate(timeout=60)
    assert first.returncode == -signal.SIGKILL, f"the sync ended before it was killed: {said[0]}{said[1][-2000:]}"
    kept = _stored(db, source_pk)
    assert 0 < kept < expected, f"{kept} of {expected} items stored when killed"
    assert query(db, "SELECT status FROM sources WHERE id = ?", source_pk)[0][0] == "running"  # as the kill left it
    assert not _lease_over(db, source_pk)
    stale = json.loads(rag_cli(home, "source", "show", "killed", "--json").stdout)
    assert stale["status"] == "stale" and "progress" not in stale, stale  # its holder is gone

    second = rag_cli(home, "source", "sync", "killed", "--json", env=env)  # not refused as busy
    assert second.returncode == 0, second.stderr
    report = json.loads(second.stdout)
    assert report["outcome"] == "ok" and report["unchanged"] == kept, report
    assert report["added"] == expected - kept, report
    documents = _documents(db, source_pk)
    assert len(documents) == expected == len({d[0] for d in documents})
    assert all(versions == 1 and published == 1 for _, versions, published in documents), documents
    shown = json.loads(rag_cli(home, "source", "show", "killed", "--json").stdout)
    assert shown["status"] == "idle" and shown["items"] == expected


def _pg_documents(database_url: str, name: str) -> list[tuple]:
    import psycopg

    conninfo = database_url.replace("postgresql+psycopg://", "postgresql://")
    with psycopg.connect(conninfo) as connection:
        return connection.execute("""
            SELECT n.source_id, count(v.id), sum(CASE WHEN v.status = 'published' THEN 1 ELSE 0 END)
            FROM nodes n JOIN sources s ON n.ingest_root = 'source:' || s.id
            LEFT JOIN document_versions v ON v.node_id = n.id
            WHERE n.kind = 'document' AND s.name = %s GROUP BY n.id, n.source_id""", (name,)).fetchall()


def test_two_syncs_of_one_source_at_once_on_postgresql_one_runs(postgres, chroma_server, tmp_path):
    home = tmp_path / "home"
    database_url = postgres.new_database()
    env = rag_env(home, RAG_DATABASE_URL=database_url, RAG_CHROMA_URL=chroma_server)
    pages = handbook_pages(tmp_path / "pages", PAGES)
    added = rag_cli(home, "source", "add", "shared", "--kind", "folder", "-o", f"path={pages}", env=env)
    assert added.returncode == 0, added.stderr
    outcomes = []
    for attempt in range(3):  # two syncs that happened not to overlap are tried again, with new text
        both = [rag_popen(home, "source", "sync", "shared", env=env) for _ in range(2)]
        outcomes = sorted((*p.communicate(timeout=600), p.returncode)[::-1] for p in both)
        if outcomes[1][0] == 1:
            break
        for page in pages.rglob("*.md"):
            page.write_text(page.read_text() + f"\n\nRevision {attempt}.\n")
    (won, won_err, won_out), (lost, lost_err, _) = outcomes
    assert (won, lost) == (0, 1), outcomes
    assert won_out.startswith("added="), won_out
    assert f"error: {BUSY}" in lost_err and "Traceback" not in lost_err
    documents = _pg_documents(database_url, "shared")
    assert len(documents) == PAGES == len({d[0] for d in documents})
    assert all(published == 1 for _, _, published in documents), documents


def test_rag_serve_stopped_during_a_sync_ends_it_as_stopped_and_the_next_sync_resumes(tmp_path):
    home = tmp_path / "home"
    pages = handbook_pages(tmp_path / "pages", PAGES)
    with rag_serve(home, **KILLED) as served, served.client() as http:
        made = http.post("/v1/sources", json={"name": "stopped", "kind": "folder", "config": {"path": str(pages)}})
        assert made.status_code == 201, made.text
        assert http.post("/v1/sources/stopped/sync").status_code == 202
        db = home / "rag.db"
        source_pk = _source_pk(db, "stopped")
        wait_until(lambda: _stored(db, source_pk) > 0 or served.source("stopped")["status"] == "idle", 300,
                   "the first stored batch")
        served.server.send_signal(signal.SIGINT)
        _, err = served.server.communicate(timeout=120)
    assert served.server.returncode == 0 and "Traceback" not in err, err[-3000:]
    kept = _stored(db, source_pk)
    assert 0 < kept < PAGES, f"{kept} of {PAGES} items stored when stopped"
    status, outcome, lease = query(db, "SELECT status, last_outcome, lease_until FROM sources WHERE id = ?",
                                   source_pk)[0]
    assert (status, outcome, lease) == ("idle", "stopped", None)  # it ended, it was not cut off
    again = rag_cli(home, "source", "sync", "stopped", "--json")
    assert again.returncode == 0, again.stderr
    report = json.loads(again.stdout)
    assert (report["unchanged"], report["added"], report["removed"]) == (kept, PAGES - kept, 0), report
