"""A million chunks, measured: build a large store without the model, then time a real `rag serve` on it.

The build writes synthetic documents through the service's own ingest path (`ingest_records`: nodes,
versions, the Publisher's chunking, chunk rows, the keyword lane, the vector lane, the flip to
published), with one difference: the embedder is a stub that returns random unit vectors of the
model's dimension (384) under the model's name, so no model runs and the vector lane's collection is
the one a real `rag serve` searches. Chunk text is drawn word by word from SciFact's corpus
vocabulary with the corpus's own (Zipf-like) word frequencies, in sentences of 6-28 words; read from
../shared/datasets, never copied here. Each batch is one `ingest_records` call with its own provider
(`synth-<n>`), so an interrupted build resumes at the next batch. The built home is cached under
`.cache/bench/million-<backend>-<N>/` (PostgreSQL + Chroma server: their data there too).

Then, against a real `rag serve` on that home (the real query encoder embeds each query; the
queries are SciFact's test queries, in the same vocabulary): cold start (process start to the first
search answered), search p50/p95 with 1 client and with `--clients` (16) clients over HTTP, the
server's RSS after warm-up and after the search phases, the published-set reload (SQLite: reading
every published chunk id, as `rag.retrieve.published.PublishedSet` does first, and bringing them up
to date from the log of changes, as it does after a change), the keyword
and vector index sizes on disk, and the publish latency of one more real document (its text new, so
the model really embeds it) through the API into the big knowledge base.

    python -m benchmarks.million                          # 1,000,000 chunks, embedded
    python -m benchmarks.million --chunks 20000 --json out.json
    python -m benchmarks.million --backend postgres --chunks 100000
    python -m benchmarks.million --backend postgres --keyword-lane   # the keyword lane alone, in process
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections import Counter
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any, Iterator, Sequence

import httpx
import numpy as np

from benchmarks import NO_QUOTAS, wait_started, write_json
from benchmarks.fixture100k import BENCH_CACHE, DATASETS, read_jsonl
from benchmarks.http_latency import summary
from benchmarks.load import handbook_paragraphs
from benchmarks.scale_out import Serve
from benchmarks.search_latency import load_snapshot

KB = "million"
DIM = 384
BATCH_RECORDS = 2000  # records per ingest_records call (10,000 chunks)
PARAGRAPHS = (2, 9)  # paragraphs (chunks) of a record: 5 on average
PARAGRAPH_WORDS = (100, 190)  # about the 256 tokens of a chunk of SciFact-like text
TARGET_P50_MS = 40.0  # issue 33: search p50 at 1M chunks, embedded, one client
TARGET_RSS_MB = 3 * 1024
# The PostgreSQL server's own settings for a store this size on this 24 GiB machine (anything not
# named keeps PostgreSQL's default): its defaults (128 MB of buffers, a checkpoint every 1 GB of
# WAL) made each chunk's ~100 postings land on index pages written out again and again, full page
# images in the WAL included (21 GB of WAL for ~120,000 chunks).
PG_CONFIG = {"shared_buffers": "2GB", "effective_cache_size": "12GB", "max_wal_size": "8GB",
             "checkpoint_timeout": "30min", "maintenance_work_mem": "512MB"}


# ----- synthetic text -----

_WORD = re.compile(r"[A-Za-z][A-Za-z0-9\-]*")


def vocabulary() -> tuple[np.ndarray, np.ndarray]:
    """SciFact corpus words and their frequencies (as probabilities), most frequent first."""
    counts: Counter[str] = Counter()
    for rec in read_jsonl(DATASETS / "scifact" / "corpus.jsonl"):
        counts.update(_WORD.findall(f"{rec.get('title') or ''} {rec['text']}"))
    words, freq = zip(*counts.most_common())
    p = np.asarray(freq, dtype=np.float64)
    return np.asarray(words, dtype=object), p / p.sum()


def synthetic_records(batch: int, n: int, vocab: tuple[np.ndarray, np.ndarray]) -> list[dict]:
    """`n` records of batch `batch` (deterministic: seeded by the batch number): a title, then
    PARAGRAPHS paragraphs of PARAGRAPH_WORDS words in sentences of 6-28 words; each paragraph is one
    chunk (ParagraphChunker)."""
    words, p = vocab
    rng = np.random.default_rng(batch)
    records = []
    for i in range(n):
        paragraphs = []
        for _ in range(int(rng.integers(*PARAGRAPHS))):
            length = int(rng.integers(*PARAGRAPH_WORDS))
            drawn = words[rng.choice(len(words), size=length, p=p)]
            sentences, start = [], 0
            for end in np.cumsum(rng.integers(6, 29, size=length // 6 + 2)):
                if start >= length:
                    break
                piece = " ".join(drawn[start:end])
                sentences.append(piece[:1].upper() + piece[1:] + ".")
                start = int(end)
            paragraphs.append(" ".join(sentences))
        title = " ".join(words[rng.choice(len(words), size=int(rng.integers(3, 8)), p=p)]).capitalize()
        records.append({"_id": f"b{batch}-{i}", "title": title, "text": "\n\n".join(paragraphs)})
    return records


class ParagraphChunker:
    """The build's chunker: each paragraph of a synthetic body is one chunk under the body's title
    (what the real chunker makes of such a body, near enough, at a fraction of its cost: its
    sentence splitter would be most of a million-chunk build's time). A real document published
    into the store later goes through the real chunker."""

    def chunk(self, body: str, pages: object = None) -> list:
        from rag.ingest.chunk import ChunkSpec

        heading: tuple[str, ...] = ()
        specs, start = [], 0
        while start < len(body):
            end = body.find("\n\n", start)
            end = len(body) if end < 0 else end
            text = body[start:end]
            if text.startswith("# "):
                heading = (text[2:].strip(),)
            elif text.strip():
                specs.append(ChunkSpec(text, heading, start, end))
            start = end + 2
        return specs


class RandomEmbedder:
    """Random unit vectors under the local model's name and dimension: the vector lane files them in
    the collection a real `rag serve` searches, and no model runs."""

    def __init__(self, seed: int = 0) -> None:
        from rag.settings import LOCAL_EMBED_MODEL

        self.name = LOCAL_EMBED_MODEL
        self._rng = np.random.default_rng(seed)
        self._lock = threading.Lock()
        self.texts = 0

    @property
    def dim(self) -> int:
        return DIM

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        with self._lock:
            vectors = self._rng.standard_normal((len(texts), DIM), dtype=np.float32)
            self.texts += len(texts)
        return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)

    def embed_query(self, text: str) -> np.ndarray:
        return self.embed([text])[0]

    def embed_search_query(self, text: str) -> np.ndarray:
        return self.embed_query(text)


# ----- the store -----

def home_for(backend: str, chunks: int) -> Path:
    return BENCH_CACHE / f"million-{backend}-{chunks}"


@contextmanager
def servers(home: Path, backend: str) -> Iterator[dict[str, str]]:
    """The RAG_* variables of the deployment; PostgreSQL and a Chroma server (the tests' helpers, data
    kept in `home`) started for the block and stopped after."""
    env = {"RAG_HOME": str(home / "home")}
    if backend == "embedded":
        yield env
        return
    from tests.support.chromaserver import start_chroma, stop_chroma
    from tests.support.pgserver import PgServer

    with ExitStack() as stack:
        pg = PgServer(keep=pg_data(home), config=PG_CONFIG).start()
        stack.callback(pg.stop)
        chroma, chroma_url = start_chroma(home / "chroma")
        stack.callback(stop_chroma, chroma)
        import psycopg

        with psycopg.connect(f"host=127.0.0.1 port={pg.port} user=postgres dbname=postgres", autocommit=True) as conn:
            if not conn.execute("SELECT 1 FROM pg_database WHERE datname = 'rag'").fetchone():
                conn.execute("CREATE DATABASE rag")
        yield env | {"RAG_DATABASE_URL": pg.url("rag"), "RAG_CHROMA_URL": chroma_url}


def pg_data(home: Path) -> Path:
    """The PostgreSQL cluster of a home: under /var/tmp, as the server's own user cannot enter the
    private .cache folder."""
    return Path("/var/tmp") / f"rag-bench-{home.name}-postgres"


def seed_from_smaller(home: Path, backend: str, chunks: int) -> None:
    """Start from the largest complete smaller store of this backend, when one is cached (a copy: its
    batches are the first batches of this one, so the build goes on from there)."""
    smaller = []
    for path in BENCH_CACHE.glob(f"million-{backend}-*"):
        meta = path / "fixture.json"
        size = path.name.rsplit("-", 1)[-1]
        if meta.exists() and size.isdigit() and int(size) < chunks:
            smaller.append((int(size), path))
    if smaller:
        size, path = max(smaller)
        began = time.perf_counter()
        shutil.copytree(path, home, symlinks=True, ignore=shutil.ignore_patterns("*.log", "postmaster.pid", "*.lock"))
        (home / "fixture.json").rename(home / f"seeded-from-{size}.json")
        print(f"seeded {home.name} from {path.name} in {time.perf_counter() - began:.0f} s", flush=True)


def settings_for(env: dict[str, str]):
    from rag.settings import Settings

    # A model is named (never called) so that publishes skip the extractive answer's sentence vectors,
    # as benchmarks/fixture100k.py builds: no search reads them.
    # Items stored per transaction (`RAG_SOURCES__BATCH`, default 32): 400 records of ~5 chunks,
    # published as one group (build() widens the Publisher's group to match), so the lanes' fixed
    # cost per write (a tantivy commit is ~0.1 s) is paid once per 2,000 chunks.
    settings = Settings(home=Path(env["RAG_HOME"]), database_url=env.get("RAG_DATABASE_URL"),
                        chroma_url=env.get("RAG_CHROMA_URL"), embed_cache=BENCH_CACHE / "million-unused-cache.sqlite",
                        llm_model="openai/unused")
    return settings.model_copy(update={"sources": settings.sources.model_copy(update={"batch": 400})})


def store_chunks(svc: Any) -> int:
    from sqlalchemy import func, select

    from rag.store.models import Chunk

    with svc.db.session() as session:
        return int(session.scalar(select(func.count()).select_from(Chunk)))


def build(home: Path, env: dict[str, str], target: int, batch_records: int = BATCH_RECORDS,
          seconds_left: float | None = None) -> dict[str, Any]:
    """Ingest synthetic batches until the store holds `target` chunks; resumes an interrupted build.
    `seconds_left`: stop after the batch that passes this many seconds (the store is then measured
    as it is, `complete` false, and the next run goes on building it)."""
    meta_path = home / "fixture.json"
    if meta_path.exists():
        meta = json.loads(meta_path.read_text())
        if meta.get("target") == target:
            print(f"reusing {home} ({meta['chunks']:,} chunks, built in {meta['build_seconds']:.0f} s)")
            return meta
    from rag.service import KnowledgeService, Principal

    vocab = vocabulary()
    svc = KnowledgeService(settings_for(env), defer_start=True)
    stub = RandomEmbedder()
    svc.engines.__dict__["embedder"] = stub  # the cached property, set before anything embeds
    svc.publisher.chunker = ParagraphChunker()
    svc.publisher.batch_chunks = 2048  # one group per stored batch (settings_for)
    with ExitStack() as stack:
        stack.callback(svc.close)
        svc.start_writer()
        principal = Principal.local_admin("default")
        count = store_chunks(svc)
        batch = 0
        started, began_with = time.perf_counter(), count
        print(f"building {home.name}: {count:,} chunks already, target {target:,}", flush=True)
        stop = stack.enter_context(_stop_between_batches())
        while count < target:
            if seconds_left is not None and time.perf_counter() - started > seconds_left:
                print(f"  stopped at {count:,} chunks: --build-seconds {seconds_left:.0f} passed", flush=True)
                break
            if stop.is_set():
                print(f"  stopped at {count:,} chunks: asked to (SIGTERM or SIGINT)", flush=True)
                break
            batch += 1
            provider = f"synth-{batch}"
            if _has_provider(svc, provider):
                continue
            records = synthetic_records(batch, batch_records, vocab)
            t0 = time.perf_counter()
            svc.ingest_records(principal, records, KB, provider=provider)
            before, count = count, store_chunks(svc)
            took = time.perf_counter() - t0
            total = time.perf_counter() - started
            print(f"  batch {batch}: +{count - before:,} chunks in {took:.1f} s ({(count - before) / took:,.0f} chunks/s); "
                  f"{count:,} in all, {(count - began_with) / total:,.0f} chunks/s overall, "
                  f"load {os.getloadavg()[0]:.2f}", flush=True)
        seconds = time.perf_counter() - started
    meta = {"target": target, "chunks": count, "batches": batch, "build_seconds": round(seconds, 1),
            "chunks_per_s": round((count - began_with) / seconds, 1) if seconds else None,
            "built_at": time.strftime("%Y-%m-%d %H:%M:%S"), "complete": count >= target}
    if meta["complete"]:
        meta_path.write_text(json.dumps(meta, indent=2))
    return meta


@contextmanager
def _stop_between_batches() -> Iterator[threading.Event]:
    """An event set by SIGTERM or SIGINT within the block: the build stops after the batch in
    progress, as a batch cut short would leave its provider's documents half written (and skipped on
    resuming)."""
    stop = threading.Event()

    def ask(signum: int, frame: object) -> None:
        print(f"  signal {signum}: stopping after this batch", flush=True)
        stop.set()

    before = {signum: signal.signal(signum, ask) for signum in (signal.SIGTERM, signal.SIGINT)}
    try:
        yield stop
    finally:
        for signum, handler in before.items():
            signal.signal(signum, handler)


def _has_provider(svc: Any, provider: str) -> bool:
    from sqlalchemy import select

    from rag.store.models import Node

    with svc.db.session() as session:
        return session.scalar(select(Node.id).where(Node.source_id.like(provider + ":%")).limit(1)) is not None


# ----- measuring -----

def rss_mb(pid: int) -> int:
    status = Path(f"/proc/{pid}/status").read_text().splitlines()
    return int(next(line for line in status if line.startswith("VmRSS")).split()[1]) // 1024


def du_mb(path: Path) -> float:
    """Bytes on disk under a folder, or of a file with its -wal and -shm."""
    if path.is_file():
        total = sum(p.stat().st_size for p in (path, Path(f"{path}-wal"), Path(f"{path}-shm")) if p.exists())
    else:
        total = sum(f.stat().st_size for f in path.rglob("*") if f.is_file()) if path.exists() else 0
    return round(total / 2**20, 1)


def cli(env: dict[str, str], *args: str) -> str:
    done = subprocess.run([sys.executable, "-m", "rag.cli", *args], env=env, text=True, capture_output=True)
    if done.returncode != 0:
        raise RuntimeError(f"rag {args[0]} failed: {done.stderr[-2000:]}")
    return done.stdout


def queries() -> list[str]:
    """SciFact's queries (test ones first): the vocabulary the synthetic chunks are drawn from."""
    test = []
    for line in (DATASETS / "scifact" / "qrels" / "test.tsv").read_text().splitlines()[1:]:
        qid = line.split("\t")[0]
        if qid and qid not in test:
            test.append(qid)
    text = {q["_id"]: q["text"] for q in read_jsonl(DATASETS / "scifact" / "queries.jsonl")}
    rest = [q for q in text if q not in test]
    return [text[q] for q in test + rest if q in text]


def keyword_lane(env: dict[str, str], n: int = 100, passes: int = 3, depth: int = 100) -> dict[str, Any]:
    """The keyword lane alone, in this process (no server, no fusion): p50 / p95 of each pass over
    the first `n` SciFact queries at `depth` in the store's big knowledge base. Pass 1 reads what
    the caches do not hold yet."""
    from sqlalchemy import text as sql

    from rag.retrieve.types import Query, Scope
    from rag.service import KnowledgeService

    svc = KnowledgeService(settings_for(env), defer_start=True)
    try:
        lane = svc.engines.index.lanes["text"]
        with svc.db.session() as session:
            kb_id = session.scalar(sql("SELECT id FROM knowledge_bases WHERE name = :name"), {"name": KB})
        scope = Scope("default", (kb_id,))
        rows = []
        for number in range(1, passes + 1):
            times = []
            for question in queries()[:n]:
                with svc.db.session() as session:
                    began = time.perf_counter()
                    lane.search(session, Query(question), scope, depth)
                    times.append(1000 * (time.perf_counter() - began))
            times.sort()
            rows.append({"pass": number, "p50_ms": round(times[len(times) // 2], 1),
                         "p95_ms": round(times[int(0.95 * len(times))], 1)})
            print(f"keyword lane ({lane.engine}), pass {number}: p50 {rows[-1]['p50_ms']} ms, "
                  f"p95 {rows[-1]['p95_ms']} ms ({n} queries, depth {depth})", flush=True)
        return {"engine": lane.engine, "queries": n, "depth": depth, "passes": rows}
    finally:
        svc.close()


class Served(Serve):
    """`rag serve` on the home, one process; `cold_start_s`: process start to the first search answered."""

    def __init__(self, env: dict[str, str], log: Path) -> None:
        super().__init__(env, 1, log)

    def __enter__(self) -> "Served":
        self.token = cli(self.env, "token", "create", "--workspace", "default", "--role", "editor",
                         "--scope", "knowledge:write", "--name", "million benchmark").strip()
        with self.log.open("w") as log:
            began = time.perf_counter()
            self.process = subprocess.Popen([sys.executable, "-m", "rag.cli", "serve", "--port", str(self.port)],
                                            env=self.env, stdout=log, stderr=subprocess.STDOUT)
        with self.client() as client:
            wait_started(self.process, lambda: client.post(
                "/v1/search", json={"query": "insulin resistance", "limit": 10}).status_code == 200,
                "rag serve", 1800, self.log.read_text, (httpx.TransportError,), every=0.05)
        self.cold_start_s = time.perf_counter() - began
        return self


def search_clients(served: Served, qs: list[str], clients: int, per_client: int) -> dict[str, Any]:
    """`clients` threads, one keep-alive connection each, `per_client` searches each."""
    times: list[float] = []
    errors = Counter()
    lock = threading.Lock()
    start = threading.Barrier(clients + 1)

    def work(i: int) -> None:
        with served.client() as client:
            start.wait()
            for n in range(per_client):
                q = qs[(i * per_client + n) % len(qs)]
                began = time.perf_counter()
                status = client.post("/v1/search", json={"query": q, "limit": 10}).status_code
                took = time.perf_counter() - began
                with lock:
                    times.append(took)
                    if status != 200:
                        errors[status] += 1

    threads = [threading.Thread(target=work, args=(i,)) for i in range(clients)]
    for thread in threads:
        thread.start()
    load = load_snapshot()
    start.wait()
    began = time.perf_counter()
    for thread in threads:
        thread.join()
    elapsed = time.perf_counter() - began
    return {**summary(times), "clients": clients, "requests_per_s": round(len(times) / elapsed, 1),
            "errors": dict(errors), "load_before": load, "load_after": load_snapshot()}


def reload_published(env: dict[str, str], repeat: int = 3) -> dict[str, Any] | None:
    """The published set's reads (SQLite): `PublishedSet._load`, the read a search triggers after a
    change, timed alone: read whole (a process's first; best and median of `repeat`), and brought
    up to date after one change from the log of changes (a published document withdrawn and
    published again: its chunks' rows, applied; median of `repeat`). None on PostgreSQL (its checks
    go by key)."""
    if env.get("RAG_DATABASE_URL"):
        return None
    from sqlalchemy import text

    from rag.retrieve.published import PublishedSet
    from rag.store.db import Database

    db = Database(f"sqlite:///{Path(env['RAG_HOME']) / 'rag.db'}")
    times, changes, size = [], [], 0
    for _ in range(repeat):
        published = PublishedSet(db.engine)
        began = time.perf_counter()
        published._load()
        times.append(time.perf_counter() - began)
        held = published._held
        size = 0 if held is None or held[1] is None else int(held[1].nbytes)
    for _ in range(repeat):
        with db.engine.begin() as connection:  # the last version published, withdrawn and published again
            version = connection.execute(text(
                "SELECT max(id) FROM document_versions WHERE status = 'published'")).scalar_one()
            for status in ("archived", "published"):
                connection.execute(text("UPDATE document_versions SET status = :s WHERE id = :v"),
                                   {"s": status, "v": version})
        began = time.perf_counter()
        published._load()
        changes.append(time.perf_counter() - began)
    if published.reads["changes"] != repeat:
        raise RuntimeError(f"the published set was read whole after a change: {published.reads}")
    db.close()
    return {"best_ms": round(min(times) * 1000, 1), "median_ms": round(sorted(times)[len(times) // 2] * 1000, 1),
            "ids_mb": round(size / 2**20, 2),
            "after_a_change_ms": round(sorted(changes)[len(changes) // 2] * 1000, 1)}


def publish_one(served: Served, label: str) -> dict[str, Any]:
    """One more real document (new text: the model embeds it) created and published through the API
    into the big knowledge base: the time from the publish request to the version published, and
    the searches answered right after it (the first after a change checks by key while the
    published set is read again). The document is deleted afterwards: the store keeps its size."""
    run = uuid.uuid4().hex[:8]
    body = f"# Million benchmark {label} {run}\n\n" + "\n\n".join(f"{p} ({run})" for p in handbook_paragraphs()[:12])
    with served.client() as client:
        roots = client.get("/v1/roots").json()
        parent = next((r["node_id"] for r in roots if r.get("name") == KB), None)
        made = client.post("/v1/documents", json={"parent_id": parent, "name": f"{label} {run}", "content": body})
        made.raise_for_status()
        doc = made.json()["node_id"]
        began = time.perf_counter()
        client.post(f"/v1/documents/{doc}/versions/1/publish").raise_for_status()
        status = "publishing"
        while status == "publishing" and time.perf_counter() - began < 600:
            status = client.get(f"/v1/documents/{doc}/versions").json()[0]["status"]
            if status == "publishing":
                time.sleep(0.02)
        publish_s = time.perf_counter() - began
        after = []
        for q in (f"Million benchmark {label} {run}", "insulin resistance", "vitamin D deficiency", "statins"):
            t0 = time.perf_counter()
            client.post("/v1/search", json={"query": q, "limit": 10}).raise_for_status()
            after.append(round((time.perf_counter() - t0) * 1000, 1))
        client.delete(f"/v1/documents/{doc}")
    return {"status": status, "publish_s": round(publish_s, 2), "chars": len(body), "searches_after_ms": after}


def measure(env: dict[str, str], home: Path, searches: int, clients: int, per_client: int) -> dict[str, Any]:
    base = {**os.environ, "OPENBLAS_NUM_THREADS": "1", "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    base = {k: v for k, v in base.items() if not k.startswith("RAG_")} | NO_QUOTAS | env
    base["RAG_EMBED_CACHE"] = str(BENCH_CACHE / "million-query-cache.sqlite")
    qs = queries()
    result: dict[str, Any] = {"load_start": load_snapshot()}
    with Served(base, home / "serve.log") as served:
        result["cold_start_s"] = round(served.cold_start_s, 2)
        result["rss_start_mb"] = rss_mb(served.process.pid)
        with served.client() as client:
            for q in qs[searches:searches + 20]:  # warm-up
                client.post("/v1/search", json={"query": q, "limit": 10}).raise_for_status()
        result["rss_warm_mb"] = rss_mb(served.process.pid)
        result["one_client"] = search_clients(served, qs[:searches], 1, searches)
        result["many_clients"] = search_clients(served, qs, clients, per_client)
        result["rss_after_search_mb"] = rss_mb(served.process.pid)
        # The first publish loads the document model (seconds); the second is the one reported.
        result["publish_first"] = publish_one(served, "first")
        result["publish_one"] = publish_one(served, "second")
        result["rss_after_publish_mb"] = rss_mb(served.process.pid)
    result["published_set_reload"] = reload_published(env)
    result["keyword_index_mb"] = (du_mb(Path(env["RAG_HOME"]) / "keyword") if "RAG_DATABASE_URL" not in env
                                  else pg_keyword_mb(env["RAG_DATABASE_URL"]))
    result["vector_index_mb"] = du_mb(home / "chroma" if "RAG_CHROMA_URL" in env else Path(env["RAG_HOME"]) / "chroma")
    result["store_mb"] = (du_mb(Path(env["RAG_HOME"]) / "rag.db") if "RAG_DATABASE_URL" not in env
                          else du_mb(pg_data(home)))
    return result


def pg_keyword_mb(url: str) -> float:
    """The PostgreSQL keyword lane's tables with their indexes and TOAST, in MB."""
    import psycopg

    with psycopg.connect(url.replace("postgresql+psycopg://", "postgresql://")) as conn:
        size = conn.execute("SELECT sum(pg_total_relation_size(t::regclass)) "
                            "FROM unnest(ARRAY['chunk_tsv', 'keyword_blocks', 'keyword_dead', 'keyword_batches', "
                            "'keyword_df']) AS t").fetchone()[0]
    return round(int(size) / 2**20, 1)


def print_table(r: dict[str, Any]) -> None:
    one, many, reload = r["one_client"], r["many_clients"], r["published_set_reload"]
    partial = "" if r["build"].get("complete", True) else f", a partial build towards {r['build']['target']:,}"
    print(f"\n## {r['backend']}: {r['chunks']:,} chunks{partial} (load at start {r['load_start']['loadavg_1m']}, "
          f"1 client {one['load_before']['loadavg_1m']}, {many['clients']} clients {many['load_before']['loadavg_1m']}, "
          f"end {many['load_after']['loadavg_1m']})")
    print("| measure | value |\n|---|---|")
    rows = [
        ("build (chunks/s)", f"{r['build']['chunks_per_s']} ({r['build']['build_seconds']:.0f} s)"),
        ("cold start: process start to first search answered", f"{r['cold_start_s']} s"),
        ("search p50 / p95, 1 client", f"{one['p50_ms']} / {one['p95_ms']} ms (n {one['n']})"),
        (f"search p50 / p95, {many['clients']} clients", f"{many['p50_ms']} / {many['p95_ms']} ms, "
                                                          f"{many['requests_per_s']} req/s, errors {many['errors'] or 0}"),
        ("RSS of rag serve: started / warm / after searches / after publish",
         f"{r['rss_start_mb']} / {r['rss_warm_mb']} / {r['rss_after_search_mb']} / {r['rss_after_publish_mb']} MB"),
        ("published-set reload (best / median)", f"{reload['best_ms']} / {reload['median_ms']} ms, {reload['ids_mb']} MB of ids"
         if reload else "none (PostgreSQL: checked by key)"),
        ("published set after one change (from the log, median)", f"{reload['after_a_change_ms']} ms"
         if reload else "none (PostgreSQL: checked by key)"),
        ("keyword index on disk", f"{r['keyword_index_mb']} MB"
         + (" (in PostgreSQL: chunk_tsv, keyword_blocks, keyword_dead, keyword_batches, keyword_df)" if r["backend"] == "postgres" else "")),
        ("vector index on disk", f"{r['vector_index_mb']} MB"),
        ("store on disk", f"{r['store_mb']} MB"),
        ("publish one more document (model included; the first, loading the model)",
         f"{r['publish_one']['publish_s']} s (first {r['publish_first']['publish_s']} s) ({r['publish_one']['chars']:,} chars, {r['publish_one']['status']}); "
         f"searches after: {r['publish_one']['searches_after_ms']} ms"),
    ]
    for name, value in rows:
        print(f"| {name} | {value} |")
    p50 = one["p50_ms"]
    print(f"search p50 {p50} ms: {'meets' if p50 <= TARGET_P50_MS else 'ABOVE'} the target of <= {TARGET_P50_MS:.0f} ms; "
          f"RSS {r['rss_after_search_mb']} MB: {'meets' if r['rss_after_search_mb'] <= TARGET_RSS_MB else 'ABOVE'} "
          f"the target of <= {TARGET_RSS_MB} MB")
    for busy in r["load_start"]["busy_processes"]:
        print(f"  busy at start: {busy}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--chunks", type=int, default=1_000_000, help="chunks in the store (20000 while developing)")
    parser.add_argument("--backend", choices=["embedded", "postgres"], default="embedded",
                        help="embedded: SQLite + tantivy + embedded Chroma; postgres: PostgreSQL + a Chroma server")
    parser.add_argument("--searches", type=int, default=200, help="searches of the one client")
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--per-client", type=int, default=25, help="searches of each concurrent client")
    parser.add_argument("--build-only", action="store_true")
    parser.add_argument("--build-seconds", type=float, default=None,
                        help="stop building after this long and measure the store as it is (a later run goes on)")
    parser.add_argument("--rebuild", action="store_true", help="delete the cached store first")
    parser.add_argument("--keyword-lane", action="store_true",
                        help="measure the keyword lane alone, in process, instead of the server (100 queries, 3 passes)")
    parser.add_argument("--json", metavar="PATH", help="also write the results as JSON ('-' for stdout)")
    args = parser.parse_args(argv)
    home = home_for(args.backend, args.chunks)
    if args.rebuild and home.exists():
        shutil.rmtree(home)
    if args.rebuild and args.backend == "postgres":
        shutil.rmtree(pg_data(home), ignore_errors=True)
    if not home.exists() and args.backend == "embedded":  # a cluster elsewhere is not copied: built afresh
        seed_from_smaller(home, args.backend, args.chunks)
    home.mkdir(parents=True, exist_ok=True)
    with servers(home, args.backend) as env:
        meta = build(home, env, args.chunks, seconds_left=args.build_seconds)
        if args.build_only:
            return 0
        if args.keyword_lane:
            write_json({"backend": args.backend, "chunks": meta["chunks"], **keyword_lane(env)}, args.json)
            return 0
        result = {"backend": args.backend, "chunks": meta["chunks"], "home": str(home), "build": meta,
                  **measure(env, home, args.searches, args.clients, args.per_client)}
    print_table(result)
    write_json(result, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
