"""Faults injected for real into real processes: `rag serve` and `rag ingest` killed with SIGKILL,
the Chroma server stopped and started again under a running `rag serve`, and a disk that fills up
(a file-size limit on the server's process, which always works, and a small tmpfs where this
machine lets the tests mount one).

Each test polls for a condition with a deadline; every process it starts is stopped in `finally`.
"""

from __future__ import annotations

import json
import os
import random
import resource
import signal
import sqlite3
import subprocess
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest

from rag.errors import STORAGE_FULL
from rag.service import KnowledgeService, Principal
from rag.settings import Settings

from ..support.chromaserver import start_chroma, stop_chroma
from ..support.mcp_support import http_session, run
from ..support.processes import free_port, wait_until

ADMIN = Principal.local_admin("default")
WORDS = ("amber", "basil", "cedar", "delta", "ember", "fjord", "garnet", "harbor", "indigo", "juniper", "kestrel",
         "lagoon", "meadow", "nutmeg", "orchid", "pepper", "quartz", "raven", "saffron", "tundra", "willow")
UNREACHABLE = "the vector store (Chroma server) is unreachable"


def unique_text(rng: random.Random, tag: str, sentences: int) -> str:
    """A body the embedding cache has never seen (so publishing it does real work), with a tag word
    that finds it."""
    lines = [f"# Note {tag}", "", f"The code word of this note is {tag}."]
    for _ in range(sentences):
        lines.append(" ".join(rng.choice(WORDS) for _ in range(14)) + f" {rng.randrange(10**9)}.")
    return "\n".join(lines) + "\n"


def rag_env(home: Path, **extra: str) -> dict[str, str]:
    return {**os.environ, "RAG_HOME": str(home), "OPENBLAS_NUM_THREADS": "1", **extra}


@contextmanager
def serving(home: Path, env: dict[str, str] | None = None,
            preexec_fn: Callable[[], None] | None = None, logs: Path | None = None,
            ) -> Iterator[tuple[subprocess.Popen, str]]:
    """`rag serve` on a free port until it answers /healthz (200 or 503); SIGKILLed if still running
    when the block ends (a test that stops it itself has already done so)."""
    port = free_port()
    err = (logs or home.parent) / f"serve-{port}.err"  # a file, not a pipe: a full pipe would stall the server
    with err.open("w") as sink:
        server = subprocess.Popen([sys.executable, "-m", "rag.cli", "serve", "--port", str(port)],
                                  env=env or rag_env(home), stdout=subprocess.DEVNULL, stderr=sink,
                                  preexec_fn=preexec_fn)  # noqa: PLW1509 - it only sets a limit and a signal
    url = f"http://127.0.0.1:{port}"
    try:
        def answers() -> bool:
            assert server.poll() is None, err.read_text()
            try:
                return httpx.get(f"{url}/healthz", timeout=10).status_code in (200, 503)
            except httpx.TransportError:
                return False

        wait_until(answers, timeout=300, what="rag serve to answer")
        yield server, url
    finally:
        if server.poll() is None:
            server.kill()
        server.wait(60)


def stop(server: subprocess.Popen) -> int:
    """Ctrl-C, as a user stops it; its exit status."""
    server.send_signal(signal.SIGINT)
    try:
        return server.wait(60)
    except subprocess.TimeoutExpired:
        server.kill()
        return server.wait(60)


def statuses(db: Path) -> dict[str, int]:
    """Versions per status, read from the SQLite file by another process (as an operator would)."""
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=30) as conn:
        return dict(conn.execute("SELECT status, count(*) FROM document_versions GROUP BY status").fetchall())


def check_store(home: Path) -> dict[str, list[str]]:
    """The embedded store after a crash and a restart: not corrupt, one published version per
    document at most, and the lanes hold exactly the published versions' chunks. Returns each
    document's version statuses."""
    with sqlite3.connect(f"file:{home / 'rag.db'}?mode=ro", uri=True) as conn:
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        by_doc: dict[str, list[str]] = {}
        for node_id, status in conn.execute("SELECT node_id, status FROM document_versions ORDER BY node_id, number"):
            by_doc.setdefault(node_id, []).append(status)
        chunks = {row[0] for row in conn.execute(
            "SELECT c.id FROM chunks c JOIN document_versions v ON v.id = c.version_id WHERE v.status = 'published'")}
        assert conn.execute("SELECT count(*) FROM chunks").fetchone()[0] == len(chunks), "chunks of unpublished versions"
    assert all(s.count("published") <= 1 for s in by_doc.values()), by_doc
    assert all("publishing" not in s for s in by_doc.values()), "a publish was neither finished nor undone"
    import chromadb
    from chromadb.config import Settings as ChromaSettings

    client = chromadb.PersistentClient(path=str(home / "chroma"), settings=ChromaSettings(anonymized_telemetry=False))
    vectors = {int(i) for c in client.list_collections() for i in client.get_collection(c.name).get(include=[])["ids"]}
    assert vectors == chunks, f"{len(vectors - chunks)} orphan vectors, {len(chunks - vectors)} missing"
    return by_doc


def found(client: httpx.Client, query: str) -> list[str]:
    """The documents a search finds: their ids (`fs:…` for an ingested file, `kb:…:<node id>` otherwise)."""
    response = client.post("/v1/search", json={"query": query, "limit": 5})
    assert response.status_code == 200, response.text
    return [r["document_id"] for r in response.json()["results"]]


def finds(client: httpx.Client, query: str, node_id: str) -> bool:
    return any(document.endswith(f":{node_id}") for document in found(client, query))


# ----- kill -9 -----


def test_rag_serve_killed_during_publishes_loses_nothing(tmp_path, small_tree):
    home = tmp_path / "home"
    with KnowledgeService(Settings(home=home)) as svc:
        svc.ensure_workspace("default")
        ingested = svc.ingest_directory(ADMIN, small_tree)
        secret, _ = svc.create_token("default", "editor", ["knowledge:write"])
    with sqlite3.connect(home / "rag.db") as conn:
        before = {row[0] for row in conn.execute("SELECT node_id FROM document_versions WHERE status = 'published'")}
    assert len(ingested.added) == 5 and len(before) == 5
    rng = random.Random()
    tags = [f"kiwi{n}x{rng.randrange(10**6)}" for n in range(8)]
    headers = {"Authorization": f"Bearer {secret}"}
    with serving(home) as (server, url), httpx.Client(base_url=url, headers=headers, timeout=120) as client:
        new = {}
        for tag in tags:  # each publish is queued; they are indexed one after another
            made = client.post("/v1/documents", json={"name": tag, "content": unique_text(rng, tag, 40)})
            assert made.status_code == 201, made.text
            new[tag] = made.json()["node_id"]
            assert client.post(f"/v1/documents/{new[tag]}/versions/1/publish").json()["status"] == "publishing"
        edited = sorted(before)[:2]  # published documents whose new version is being published
        for node_id in edited:
            number = client.put(f"/v1/documents/{node_id}/draft", json={"content": unique_text(rng, "fig", 40)}).json()
            client.post(f"/v1/documents/{node_id}/versions/{number['version_number']}/publish")
        wait_until(lambda: statuses(home / "rag.db").get("published", 0) >= 6, timeout=120, what="a first publish")
        server.send_signal(signal.SIGKILL)
        server.wait(30)
    at_kill = statuses(home / "rag.db")
    assert at_kill.get("publishing", 0) > 0, f"every publish ended before the kill: {at_kill}"

    with serving(home) as (server, url), httpx.Client(base_url=url, headers=headers, timeout=120) as client:
        for node_id in before:  # what was published still is, and the edits are live or still drafts
            assert client.get(f"/v1/documents/{node_id}").status_code == 200
        for tag, node_id in new.items():
            versions = client.get(f"/v1/documents/{node_id}/versions").json()
            assert [v["status"] for v in versions] in (["published"], ["draft"])
            assert finds(client, f"code word {tag}", node_id) == (versions[0]["status"] == "published")
        assert stop(server) == 0
    by_doc = check_store(home)
    assert all(by_doc[node_id].count("published") == 1 for node_id in before)


def test_rag_ingest_killed_mid_run_then_run_again_publishes_every_file_once(tmp_path):
    home, pages = tmp_path / "home", tmp_path / "notes"
    rng = random.Random()
    files = 200  # new texts: the indexing takes long enough to be killed in the middle of it
    for n in range(files):
        folder = pages / f"part{n % 4}"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"note{n}.md").write_text(unique_text(rng, f"n{n}q{rng.randrange(10**6)}", 1))
    ingest = [sys.executable, "-m", "rag.cli", "ingest", str(pages), "--json"]
    first = subprocess.Popen(ingest, env=rag_env(home), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        def indexing() -> bool:  # a first batch of files is in the store, its publishing has begun
            assert first.poll() is None, f"the ingest ended before it was killed: {first.communicate()}"
            try:
                return statuses(home / "rag.db").get("publishing", 0) > 0
            except sqlite3.Error:  # the file or its tables do not exist yet
                return False

        wait_until(indexing, timeout=240, what="the files to be in the store")
    finally:
        first.send_signal(signal.SIGKILL)
        first.communicate(timeout=30)
    at_kill = statuses(home / "rag.db")
    # Files are stored a batch at a time (RAG_SOURCES__BATCH), each batch published before the next.
    assert at_kill.get("publishing", 0) > 0 and sum(at_kill.values()) <= files, at_kill

    again = subprocess.run(ingest, env=rag_env(home), capture_output=True, text=True, timeout=600, check=False)
    assert again.returncode == 0, again.stderr  # the lock went with the killed process
    report = json.loads(again.stdout)
    assert report["failed"] == 0 and report["added"] + report["unchanged"] + report["updated"] == files
    by_doc = check_store(home)
    assert len(by_doc) == files and all(s == ["published"] for s in by_doc.values())


# ----- the Chroma server, stopped and started again -----


def test_chroma_server_down_then_back_under_a_running_rag_serve(postgres, tmp_path, small_tree):
    chroma, chroma_url = start_chroma(tmp_path / "chroma-data")
    settings = Settings(home=tmp_path / "setup", database_url=postgres.new_database(), chroma_url=chroma_url)
    try:
        with KnowledgeService(settings) as svc:
            svc.ensure_workspace("default")
            assert not svc.ingest_directory(ADMIN, small_tree).failed
            secret, _ = svc.create_token("default", "editor", ["knowledge:write"], "all")
        env = rag_env(tmp_path / "home", RAG_DATABASE_URL=settings.database_url, RAG_CHROMA_URL=chroma_url,
                      RAG_PUBLISH_POLL_SECONDS="0.5")
        with serving(tmp_path / "home", env) as (server, url), \
                httpx.Client(base_url=url, headers={"Authorization": f"Bearer {secret}"}, timeout=120) as client:
            assert httpx.get(f"{url}/healthz").status_code == 200
            assert found(client, "annual leave")
            stop_chroma(chroma)

            down = client.post("/v1/search", json={"query": "annual leave"})
            assert down.status_code == 503 and down.json()["error"]["message"] == UNREACHABLE
            health = httpx.get(f"{url}/healthz", timeout=60)
            assert health.status_code == 503 and health.json()["status"] == "degraded"
            assert not health.json()["vector"]["ok"] and health.json()["store"]["ok"]
            # Not ready (a load balancer sends searches elsewhere), yet alive: restarting cures nothing here.
            ready = httpx.get(f"{url}/readyz", timeout=60)
            assert ready.status_code == 503 and ready.json() == {"status": "not ready", "failing": ["vector"]}
            assert httpx.get(f"{url}/livez").status_code == 200
            via_mcp = run(mcp_search, f"{url}/mcp", secret)
            assert via_mcp["results"] == [] and [kb["name"] for kb in via_mcp["failed_knowledge_bases"]] == ["default"]
            made = client.post("/v1/documents", json={"name": "Kiwi rota", "content": unique_text(random.Random(), "kiwirota", 3)})
            node_id = made.json()["node_id"]
            published = client.post(f"/v1/documents/{node_id}/versions/1/publish")
            assert published.status_code == 200 and published.json()["status"] == "publishing"

            chroma = subprocess.Popen(chroma.args, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)  # same port, same data

            def recovered() -> bool:
                try:
                    return finds(client, "code word kiwirota", node_id)
                except AssertionError:  # still 503
                    return False

            wait_until(recovered, timeout=90, what="search to find the document published while Chroma was down")
            assert httpx.get(f"{url}/healthz").status_code == 200
            assert httpx.get(f"{url}/readyz").json() == {"status": "ready", "failing": []}
            assert found(client, "How much annual leave do I earn?")[0] == "fs:default:default:travel-and-leave/leave.md"
            assert [v["status"] for v in client.get(f"/v1/documents/{node_id}/versions").json()] == ["published"]
            stop(server)
    finally:
        stop_chroma(chroma)


async def mcp_search(url: str, secret: str) -> dict:
    async with http_session(url, secret) as session:
        return await session.ok("search_knowledge_base", {"query": "annual leave"})


# ----- a full disk -----


def fill_until_refused(url: str, secret: str, node_id: str) -> httpx.Response:
    """Write ever more drafts of about 1 MB until the store refuses one."""
    body = "# Filler\n\n" + "All work and no play makes a full disk. " * 25_000
    with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {secret}"}, timeout=120) as client:
        for n in range(60):
            response = client.put(f"/v1/documents/{node_id}/draft", json={"content": f"{body} {n}"})
            if response.status_code != 200:
                return response
    raise AssertionError("60 MB of drafts were all accepted")


def assert_full_and_degraded(url: str, secret: str, node_id: str) -> None:
    refused = fill_until_refused(url, secret, node_id)
    assert refused.status_code == 507, refused.text
    assert refused.json()["error"] == {"message": STORAGE_FULL, "type": "server_error", "code": "storage_full",
                                       "param": None}
    health = httpx.get(f"{url}/healthz", timeout=60)
    assert health.status_code == 503, health.text
    assert health.json()["status"] == "degraded" and not health.json()["writes"]["ok"] and health.json()["store"]["ok"]
    with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {secret}"}, timeout=120) as client:
        assert found(client, "How much annual leave do I earn?")  # reads still work
    refused_tool = run(mcp_update, f"{url}/mcp", secret, node_id)
    assert refused_tool == STORAGE_FULL


async def mcp_update(url: str, secret: str, node_id: str) -> str:
    async with http_session(url, secret) as session:
        return await session.error("update_document", {"node_id": node_id, "content": "x" * 1_500_000})


def store_with_a_document(home: Path, pages: Path) -> tuple[str, str]:
    """(an editor's token, an ingested document's id)."""
    with KnowledgeService(Settings(home=home)) as svc:
        svc.ensure_workspace("default")
        assert not svc.ingest_directory(ADMIN, pages).failed
        secret, _ = svc.create_token("default", "editor", ["knowledge:write"])
        return secret, svc.search(ADMIN, "annual leave", 1).hits[0].node_id


def test_a_file_size_limit_gives_clean_errors_and_a_degraded_health(tmp_path, small_tree):
    home = tmp_path / "home"
    secret, node_id = store_with_a_document(home, small_tree)
    limit = max(f.stat().st_size for f in home.rglob("*") if f.is_file()) + (4 << 20)

    def limited() -> None:  # writes past `limit` bytes fail with EFBIG, as on a full disk
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    with serving(home, preexec_fn=limited) as (server, url):
        assert httpx.get(f"{url}/healthz").json()["writes"] == {"ok": True, "engine": "sqlite"}
        assert_full_and_degraded(url, secret, node_id)
        stop(server)


def test_a_small_file_system_gives_clean_errors_and_a_degraded_health(tmp_path, small_tree):
    mount = tmp_path / "small"
    mount.mkdir()
    size = 24 << 20
    made = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(mount)],
                          capture_output=True, text=True, check=False)
    if made.returncode != 0:
        pytest.skip(f"cannot mount a small file system here: {made.stderr.strip() or made.returncode}")
    try:
        home = mount / "home"
        secret, node_id = store_with_a_document(home, small_tree)
        with serving(home, logs=tmp_path) as (server, url):
            assert httpx.get(f"{url}/healthz").json()["writes"] == {"ok": True, "engine": "sqlite"}
            assert_full_and_degraded(url, secret, node_id)
            stop(server)
    finally:
        subprocess.run(["umount", "-l", str(mount)], capture_output=True, check=False)
