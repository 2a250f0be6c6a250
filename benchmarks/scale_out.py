"""Search and ask over HTTP at 100,000 chunks: the embedded default against the scale-out deployment.

- embedded: one `rag serve` process on the 100k fixture's home (SQLite, tantivy, embedded Chroma);
- scale-out: `rag serve --workers 2` on PostgreSQL (store and keyword lane) and a Chroma server,
  both started here on free 127.0.0.1 ports with their data under .cache/bench/scaleout100k/. They are loaded
  once from the fixture with `rag export` and `rag import` (the import's re-indexing takes its
  vectors from the shared embedding cache), and reused while the database holds the fixture's chunks.

For each: latency with one client (warm, p50/p95 over the SciFact and HotpotQA queries of
benchmarks/search_latency.py), then `--clients` clients at once for `--duration` seconds per
endpoint (requests/s, and the latency the clients saw meanwhile). Ask is the extractive answer.

    python -m benchmarks.fixture100k                 # the embedded fixture, once (~25 min)
    python -m benchmarks.scale_out [--clients 16] [--workers 2] [--duration 30] [--queries 100]
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx

from benchmarks import NO_QUOTAS, write_json
from benchmarks.fixture100k import BENCH_CACHE, EMBED_CACHE
from benchmarks.http_latency import ask, free_port, search, summary, throughput
from benchmarks.search_latency import load_queries

DATA = BENCH_CACHE / "scaleout100k"
FIXTURE = BENCH_CACHE / "home100k"


class Servers:
    """PostgreSQL (a cluster kept in DATA/postgres) and a Chroma server (data in DATA/chroma), on
    free loopback ports: the tests' own server helpers, with data kept between runs."""

    def __enter__(self) -> "Servers":
        from tests.support.chromaserver import start_chroma
        from tests.support.pgserver import PgServer

        self.pg = PgServer(keep=DATA / "postgres").start()
        try:
            self.chroma, self.chroma_url = start_chroma(DATA / "chroma")
        except BaseException:
            self.pg.stop()
            raise
        import psycopg

        with psycopg.connect(f"host=127.0.0.1 port={self.pg.port} user=postgres dbname=postgres", autocommit=True) as conn:
            if not conn.execute("SELECT 1 FROM pg_database WHERE datname = 'rag'").fetchone():
                conn.execute("CREATE DATABASE rag")
        self.database_url = self.pg.url("rag")
        return self

    def __exit__(self, *exc: object) -> None:
        from tests.support.chromaserver import stop_chroma

        stop_chroma(self.chroma)
        self.pg.stop()


def wait_for(check, what: str, timeout: float = 300) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            if check():
                return
        except (httpx.HTTPError, OSError):
            pass
        if time.monotonic() > deadline:
            raise RuntimeError(f"{what} did not start")
        time.sleep(0.25)


def rag(env: dict[str, str], *args: str) -> str:
    done = subprocess.run([sys.executable, "-m", "rag.cli", *args], env=env, text=True, capture_output=True)
    if done.returncode != 0:
        raise RuntimeError(f"rag {args[0]} failed: {done.stderr[-2000:]}")
    return done.stdout


def chunk_count(database_url: str) -> int:
    from sqlalchemy import create_engine, inspect, text

    engine = create_engine(database_url)
    try:
        if not inspect(engine).has_table("chunks"):
            return 0
        with engine.connect() as conn:
            return int(conn.execute(text("SELECT count(*) FROM chunks")).scalar())
    finally:
        engine.dispose()


def load_scale_out(env: dict[str, str], servers: Servers, expected: int) -> dict[str, float] | None:
    """Copy the fixture into PostgreSQL + Chroma with rag export / rag import, unless done before."""
    if chunk_count(servers.database_url) == expected:
        return None
    archive = DATA / "fixture100k.jsonl"
    started = time.perf_counter()
    embedded = {k: v for k, v in env.items() if k not in ("RAG_DATABASE_URL", "RAG_CHROMA_URL")}
    rag({**embedded, "RAG_HOME": str(FIXTURE)}, "export", str(archive))
    exported = time.perf_counter() - started
    started = time.perf_counter()
    rag(env, "import", str(archive))
    imported = time.perf_counter() - started
    archive.unlink()
    return {"export_s": round(exported, 1), "import_s": round(imported, 1)}


class Serve:
    def __init__(self, env: dict[str, str], workers: int, log: Path) -> None:
        self.env, self.workers, self.log = env, workers, log
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"

    def __enter__(self) -> "Serve":
        self.token = rag(self.env, "token", "create", "--workspace", "default", "--role", "viewer").strip()
        with self.log.open("w") as log:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "rag.cli", "serve", "--port", str(self.port), "--workers", str(self.workers)],
                env=self.env, stdout=log, stderr=subprocess.STDOUT)
        wait_for(lambda: self.process.poll() is None and httpx.get(f"{self.url}/healthz", timeout=5).status_code == 200,
                 "rag serve")
        return self

    def __exit__(self, *exc: object) -> None:
        self.process.send_signal(signal.SIGINT)
        try:
            self.process.wait(120)
        except subprocess.TimeoutExpired:
            self.process.kill()

    def client(self) -> httpx.Client:
        return httpx.Client(base_url=self.url, headers={"Authorization": f"Bearer {self.token}"}, timeout=300)


def measure(served: Serve, queries: list[str], warmup: list[str], clients: int, duration: float) -> dict:
    result: dict = {}
    with served.client() as client:
        for name, call in (("search", search), ("ask", ask)):
            for query in warmup:
                call(client, query)
            times = []
            for query in queries:
                began = time.perf_counter()
                call(client, query)
                times.append(time.perf_counter() - began)
            result[name] = summary(times)
    for name, call in (("search", search), ("ask", ask)):
        result[name]["load"] = throughput(served, call, queries, clients, duration)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--workers", type=int, default=2, help="rag serve workers on the scale-out deployment.")
    parser.add_argument("--duration", type=float, default=30.0, help="Seconds of load per endpoint.")
    parser.add_argument("--queries", type=int, default=100, help="Queries for the one-client latency.")
    parser.add_argument("--only", choices=("embedded", "scale-out"), default=None)
    parser.add_argument("--json", default=None, help="Write the result here ('-': standard output).")
    args = parser.parse_args()
    if not (FIXTURE / "rag.db").exists():
        sys.exit("the 100k fixture is missing: python -m benchmarks.fixture100k")
    warmup, queries = load_queries(args.queries, 10)
    base = {**os.environ, "OPENBLAS_NUM_THREADS": "1", "LITELLM_LOCAL_MODEL_COST_MAP": "True",
            "RAG_EMBED_CACHE": str(EMBED_CACHE)}
    base = {k: v for k, v in base.items() if not (k.startswith("RAG_") and k not in ("RAG_EMBED_CACHE",))}
    base |= NO_QUOTAS  # one token drives every client
    expected = chunk_count(f"sqlite:///{FIXTURE / 'rag.db'}")
    report: dict = {"chunks": expected, "clients": args.clients, "duration_s": args.duration, "queries": len(queries)}

    if args.only in (None, "embedded"):
        env = {**base, "RAG_HOME": str(FIXTURE)}
        with Serve(env, 1, BENCH_CACHE / "serve-embedded.log") as served:
            report["embedded"] = {"workers": 1, **measure(served, queries, warmup, args.clients, args.duration)}
        print_row("embedded, 1 process", report["embedded"])

    if args.only in (None, "scale-out"):
        with Servers() as servers:
            env = {**base, "RAG_HOME": str(DATA / "home"), "RAG_DATABASE_URL": servers.database_url,
                   "RAG_CHROMA_URL": servers.chroma_url}
            loaded = load_scale_out(env, servers, expected)
            if loaded:
                report["load"] = loaded
                print(f"loaded the scale-out copy: export {loaded['export_s']} s, import {loaded['import_s']} s")
            assert chunk_count(servers.database_url) == expected, "the scale-out copy does not hold the fixture"
            with Serve(env, args.workers, BENCH_CACHE / "serve-scale-out.log") as served:
                report["scale_out"] = {"workers": args.workers,
                                       **measure(served, queries, warmup, args.clients, args.duration)}
        print_row(f"PostgreSQL + Chroma server, {args.workers} workers", report["scale_out"])
    write_json(report, args.json)


def print_row(label: str, r: dict) -> None:
    s, a = r["search"], r["ask"]
    print(f"| {label} | {s['p50_ms']} / {s['p95_ms']} | {a['p50_ms']} / {a['p95_ms']} | "
          f"{s['load']['requests_per_s']} ({s['load']['loaded_p50_ms']} / {s['load']['loaded_p95_ms']}) | "
          f"{a['load']['requests_per_s']} ({a['load']['loaded_p50_ms']} / {a['load']['loaded_p95_ms']}) | "
          f"{s['load']['errors'] + a['load']['errors']} |", flush=True)


if __name__ == "__main__":
    main()
