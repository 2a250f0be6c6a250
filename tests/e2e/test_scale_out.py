"""Several workers on one scale-out store (a real PostgreSQL and a real Chroma server).

Each "worker" is a KnowledgeService of its own (its own connection pool, as in another process),
or a real process: `rag serve --workers 2`, and a worker killed with SIGKILL mid-publish.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import textwrap
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import anyio
import httpx
import pytest
from sqlalchemy import func, select

from rag.service import KnowledgeService, Principal
from rag.settings import Settings
from rag.store.models import ARCHIVED, PUBLISHED, PUBLISHING, Chunk, DocumentVersion

from ..support.keyword_blocks import differences
from ..support.processes import closed_by_server, free_port, wait_until

BODY = "# Kiwi rota\n\nThe kiwi rota starts on Monday at nine.\n"


def edit(n: int) -> str:
    return f"# Kiwi rota\n\nEdit number {n}: the kiwi rota moves to room {100 + n}.\n"


@pytest.fixture
def scale_out(postgres, chroma_server, tmp_path) -> Settings:
    return Settings(home=tmp_path / "home", database_url=postgres.new_database(), chroma_url=chroma_server,
                    publish_poll_seconds=0.2)


@pytest.fixture
def workers(scale_out, tmp_path):
    """Two workers on the same engines, each with its own home (nothing is shared through it)."""
    first = KnowledgeService(scale_out)
    second = KnowledgeService(scale_out.model_copy(update={"home": tmp_path / "home2"}))
    first.ensure_workspace("default")
    yield first, second
    second.close()
    first.close()


ADMIN = Principal.local_admin("default")


def published(svc: KnowledgeService, node_id: str) -> list[int]:
    return [v.number for v in svc.versions(ADMIN, node_id) if v.status == PUBLISHED]


def test_concurrent_edits_from_two_workers_become_consecutive_versions(workers):
    first, second = workers
    doc = first.create_document(ADMIN, None, "Kiwi rota", BODY)
    edits = list(range(1, 17))
    with ThreadPoolExecutor(8) as pool:
        numbers = list(pool.map(lambda n: (first if n % 2 else second).update_document(ADMIN, doc.node_id, edit(n)),
                                edits))
    assert sorted(v.version_number for v in numbers) == list(range(2, 18))
    history = first.versions(ADMIN, doc.node_id)
    assert [v.number for v in history] == list(range(17, 0, -1))
    assert sorted(v.body for v in history[:-1]) == sorted(edit(n) for n in edits)  # no edit lost


def test_two_publishes_of_one_document_never_leave_two_published_versions(workers):
    first, second = workers
    doc = first.create_document(ADMIN, None, "Kiwi rota", BODY)
    first.publish_version(ADMIN, doc.node_id, 1)
    for round_ in range(3):
        a = first.update_document(ADMIN, doc.node_id, edit(2 * round_)).version_number
        b = second.update_document(ADMIN, doc.node_id, edit(2 * round_ + 1)).version_number
        barrier = threading.Barrier(2)

        def publish(svc, number):
            barrier.wait()
            return svc.publish_version(ADMIN, doc.node_id, number)

        with ThreadPoolExecutor(2) as pool:
            list(pool.map(publish, (first, second), (a, b)))
        assert len(published(first, doc.node_id)) == 1
    hits = first.search(ADMIN, "kiwi rota room", 5).hits
    assert len({h.version for h in hits}) == 1 and hits[0].version == published(first, doc.node_id)[0]


def test_the_latest_publish_request_wins_whichever_worker_finishes_first(workers, monkeypatch):
    first, second = workers
    doc = first.create_document(ADMIN, None, "Kiwi rota", BODY)
    first.publish_version(ADMIN, doc.node_id, 1)
    older = first.update_document(ADMIN, doc.node_id, edit(1)).version_number
    newer = second.update_document(ADMIN, doc.node_id, edit(2)).version_number
    release, embedding = threading.Event(), threading.Event()
    embed = first.embedder.embed_chunks

    def held_back(*args):  # the first worker indexes the older request slowly
        embedding.set()
        assert release.wait(120)
        return embed(*args)

    monkeypatch.setattr(first.embedder, "embed_chunks", held_back)  # what a publish embeds through
    with ThreadPoolExecutor(1) as pool:
        slow = pool.submit(first.publish_version, ADMIN, doc.node_id, older)
        assert embedding.wait(120)
        second.publish_version(ADMIN, doc.node_id, newer)  # requested later, finished first
        assert published(second, doc.node_id) == [newer]
        release.set()
        assert slow.result(120).status == ARCHIVED  # superseded: it never becomes the live one
    statuses = {v.number: v.status for v in first.versions(ADMIN, doc.node_id)}
    assert statuses == {1: ARCHIVED, older: ARCHIVED, newer: PUBLISHED}
    assert {h.version for h in first.search(ADMIN, "kiwi rota room", 5).hits} == {newer}
    with first.db.session() as session:  # the superseded version's chunks are gone from the store
        version_id = session.scalar(select(DocumentVersion.id).where(
            DocumentVersion.node_id == doc.node_id, DocumentVersion.number == older))
        assert session.scalar(select(func.count()).where(Chunk.version_id == version_id)) == 0


WORKER = textwrap.dedent("""
    import sys, time
    from rag.service import KnowledgeService, Principal
    from rag.settings import Settings

    svc = KnowledgeService(Settings(home=sys.argv[1], database_url=sys.argv[2], chroma_url=sys.argv[3]))
    add = svc.vector.add

    def add_then_hang(*args, **kwargs):  # chunks and vectors written, the flip not yet done
        add(*args, **kwargs)
        print("indexed", flush=True)
        time.sleep(3600)

    svc.vector.add = add_then_hang
    svc.publish_version(Principal.local_admin("default"), sys.argv[4], 2)
""")


def test_a_publish_interrupted_by_a_killed_worker_is_finished_by_another(workers, scale_out, tmp_path):
    first, second = workers
    doc = first.create_document(ADMIN, None, "Kiwi rota", BODY)
    first.publish_version(ADMIN, doc.node_id, 1)
    first.update_document(ADMIN, doc.node_id, edit(7))
    # Both workers stand by until the process below is dead: a live poller could take the job
    # between the moment the process marks it publishing and the moment it claims it.
    first.publish_worker.close()
    second.publish_worker.close()
    worker = subprocess.Popen(
        [sys.executable, "-c", WORKER, str(tmp_path / "worker-home"), scale_out.database_url,
         scale_out.chroma_url, doc.node_id],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env={**os.environ, "OPENBLAS_NUM_THREADS": "1"},
    )
    try:
        assert worker.stdout.readline().strip() == "indexed", worker.stderr.read()
        with first.db.session() as session:  # the killed worker's chunks are in the store, unpublished
            v2 = session.scalar(select(DocumentVersion).where(DocumentVersion.node_id == doc.node_id,
                                                              DocumentVersion.number == 2))
            assert v2.status == PUBLISHING
            assert session.scalar(select(func.count()).where(Chunk.version_id == v2.id)) > 0
        assert first.publisher.publish([v2.id], wait=False) == 0  # held by the live worker: not ours
    finally:
        worker.send_signal(signal.SIGKILL)
        worker.wait(30)
    taker = KnowledgeService(scale_out.model_copy(update={"home": tmp_path / "home3"}))
    try:
        wait_until(lambda: published(taker, doc.node_id) == [2], what="another worker to finish the publish")
        with taker.db.session() as session:
            kb_id = session.get(DocumentVersion, v2.id).node.kb_id
            chunks = session.scalar(select(func.count()).where(Chunk.version_id == v2.id))
            total = session.scalar(select(func.count()).where(Chunk.kb_id == kb_id))
        assert chunks == len(taker.publisher.chunker.chunk(edit(7)))  # indexed once: the dead attempt's chunks were dropped
        assert total == chunks and taker.vector.count(kb_id) == chunks
        assert [h.version for h in taker.search(ADMIN, "kiwi rota room 107", 3).hits] == [2]
    finally:
        taker.close()


def test_rag_serve_with_two_workers_on_the_scale_out_store(workers, scale_out, tmp_path):
    first, _ = workers
    secret, _ = first.create_token("default", "editor", ["knowledge:write"], "all")
    doc = first.create_document(ADMIN, None, "Kiwi rota", BODY)
    first.publish_version(ADMIN, doc.node_id, 1)
    port = free_port()
    env = {**os.environ, "RAG_HOME": str(tmp_path / "serve-home"), "RAG_DATABASE_URL": scale_out.database_url,
           "RAG_CHROMA_URL": scale_out.chroma_url, "OPENBLAS_NUM_THREADS": "1", "RAG_HTTP__HEADER_TIMEOUT_SECONDS": "2"}
    server = subprocess.Popen([sys.executable, "-m", "rag.cli", "serve", "--port", str(port), "--workers", "2"],
                              env=env, text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    url, headers = f"http://127.0.0.1:{port}", {"Authorization": f"Bearer {secret}"}
    try:
        def healthy() -> bool:
            assert server.poll() is None, server.communicate()[1]
            try:
                return httpx.get(f"{url}/healthz", timeout=5).status_code == 200
            except httpx.TransportError:
                return False

        wait_until(healthy, what="rag serve --workers 2")
        slow = [socket.create_connection(("127.0.0.1", port), timeout=5) for _ in range(4)]  # both workers' share
        for sock in slow:
            sock.sendall(b"GET /healthz HTTP/1.1\r\nX-a: ")
        for sock in slow:  # each worker applies the header timeout (docs/reliability.md)
            took, got = closed_by_server(sock, 10)
            assert took is not None and took <= 2 + 1.5 and got.startswith(b"HTTP/1.1 408 ")
        with httpx.Client(base_url=url, headers=headers, timeout=120) as client, ThreadPoolExecutor(16) as pool:
            answers = list(pool.map(
                lambda n: client.put(f"/v1/documents/{doc.node_id}/draft", json={"content": edit(n)}), range(16)))
            assert [a.status_code for a in answers] == [200] * 16
            assert sorted(a.json()["version_number"] for a in answers) == list(range(2, 18))
            assert client.post(f"/v1/documents/{doc.node_id}/versions/17/publish").json()["status"] == PUBLISHING
            wait_until(lambda: client.get(f"/v1/documents/{doc.node_id}").json().get("version_number") == 17,
                       what="the publish")
            body = client.get(f"/v1/documents/{doc.node_id}").json()["content"]
            room = body.split("moves to ")[1].rstrip(".\n")  # which edit got number 17 is up to the race
            found = client.post("/v1/search", json={"query": f"kiwi rota {room}", "limit": 1}).json()["results"]
            assert room in found[0]["excerpt"]
        sessions = anyio.run(mcp_sessions, f"{url}/mcp", secret, 10)
        assert sessions == [True] * 10  # a session client's requests may reach either worker
        # Both workers' counts, whichever answers the scrape (prometheus_client's multi-process mode).
        for _ in range(4):
            scraped = metric_samples(httpx.get(f"{url}/metrics", timeout=30).text)
            assert scraped[("rag_http_requests_total", (("method", "PUT"), ("route", "/v1/documents/{node_id}/draft"),
                                                        ("status", "200")))] == 16
    finally:
        server.send_signal(signal.SIGINT)
        _, err = server.communicate(timeout=120)
    assert "Traceback" not in err, err
    assert f"with 2 workers on http://127.0.0.1:{port}" in err


def metric_samples(text: str) -> dict[tuple[str, tuple], float]:
    """Prometheus' text format read with its own parser: (name, sorted labels) to value."""
    from prometheus_client.parser import text_string_to_metric_families

    return {(sample.name, tuple(sorted(sample.labels.items()))): sample.value
            for family in text_string_to_metric_families(text) for sample in family.samples}


async def mcp_sessions(url: str, secret: str, n: int) -> list[bool]:
    """n MCP clients that open a session (the initialize handshake), each calling tools three times."""
    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    results = []
    async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {secret}"}, timeout=120) as http:
        for _ in range(n):
            async with Client(streamable_http_client(url, http_client=http), mode="legacy") as client:
                calls = [await client.call_tool("search_knowledge", {"query": "kiwi rota"}) for _ in range(3)]
                results.append(all(not c.is_error and "Kiwi rota" in str(c.structured_content) for c in calls))
    return results


def test_several_workers_need_the_scale_out_store(tmp_path):
    env = {**os.environ, "RAG_HOME": str(tmp_path / "home")}
    run = subprocess.run([sys.executable, "-m", "rag.cli", "serve", "--workers", "2"], env=env, text=True,
                         capture_output=True, timeout=120)
    assert run.returncode == 2 and "RAG_DATABASE_URL" in run.stderr and "Traceback" not in run.stderr
    assert not Path(tmp_path / "home" / "rag.db").exists()  # refused before anything was opened


def test_workers_starting_at_once_on_an_empty_database_migrate_it_once(postgres):
    from rag.store.db import Database

    url = postgres.new_database()
    barrier = threading.Barrier(4)

    def start() -> str:
        barrier.wait()
        db = Database(url)  # each migrates (or finds the schema done) on its own connection
        try:
            with db.session() as session:
                return session.execute(select(func.count()).select_from(DocumentVersion)).scalar_one() == 0
        finally:
            db.close()

    with ThreadPoolExecutor(4) as pool:
        assert list(pool.map(lambda _: start(), range(4))) == [True] * 4


def test_the_postgresql_keyword_lane_keeps_its_postings_and_counts_exact(workers, small_tree):
    """BM25 on PostgreSQL reads postings (in blocks) and document frequencies kept by triggers: after
    ingest, an edit, a move into another knowledge base and a delete they still match the chunks."""
    from sqlalchemy import text

    first, _ = workers
    first.ingest_directory(ADMIN, small_tree)
    other = first.knowledge_base(ADMIN, "other", create=True)
    hits = first.search(ADMIN, "How much annual leave do I earn?", 3, lanes=("text",)).hits
    assert hits[0].source == "fs:travel-and-leave/leave.md"
    doc = first.create_document(ADMIN, other.root_id, "Kiwi rota", BODY)
    first.publish_version(ADMIN, doc.node_id, 1)
    first.move_node(ADMIN, hits[0].node_id, other.root_id)
    gone = first.search(ADMIN, "Slack channels", 1).hits[0].node_id
    first.delete_document(ADMIN, gone)
    with first.db.session() as session:
        counts = dict(session.execute(text("SELECT lexeme, df FROM keyword_df WHERE lexeme IN ('', ' dl')")).all())
        assert counts[""] == session.scalar(text("SELECT count(*) FROM chunk_tsv"))
        assert counts[" dl"] == session.scalar(text("SELECT sum(length(tsv)) FROM chunk_tsv"))
    # Every live posting in the blocks is one the chunks' lexemes make, in the chunk's knowledge
    # base now (the moved document's too), and every document frequency its count of postings.
    assert differences(first.db) == {}
    moved = first.search(ADMIN, "How much annual leave do I earn?", 3, kb_name="other", lanes=("text",)).hits
    assert moved[0].source == "fs:travel-and-leave/leave.md"
