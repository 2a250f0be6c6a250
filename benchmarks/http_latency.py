"""HTTP latency and throughput of `rag serve` on the 18F handbook.

A real `rag serve` process on a temporary RAG_HOME (the handbook ingested first, embeddings from
the shared cache), driven over real sockets with httpx:

- latency: POST /v1/search (limit 10) and POST /v1/ask (the extractive answer, no model), one
  client, warm (10 warm-up requests each), p50 / p95 / mean over the handbook questions
  (evals/fixtures/handbook_questions.yaml: everyday ones and ones the handbook cannot answer);
- throughput: 8 clients at once (threads, one keep-alive connection each) for a fixed time per
  endpoint: requests per second, and the latency each client saw meanwhile.

    python -m benchmarks.http_latency [--rounds 2] [--duration 20] [--clients 8] [--json out.json]

With `--telemetry on,off` it measures instead what metrics and traces cost a search (issue 31): the
handbook is ingested once and copied to two homes, served at once by two `rag serve`, one with
RAG_TELEMETRY__ENABLED=true (traces made but not exported: no OTLP endpoint) and one with false.
Each round (default 10) runs every question on both, in alternating order, one client; the
figure is the median over rounds of the paired difference of the two p50s, with its 95% bootstrap
interval. `--telemetry exported,off` measures the same with the traces exported: the first server
sends its spans by OTLP/HTTP (OTEL_EXPORTER_OTLP_ENDPOINT, the SDK's batch processor at its
defaults) to a loopback receiver in this process, which only counts what it is sent.
`--telemetry off,off` runs the same with both off: the design's own asymmetry and noise (two
servers, two homes), against which the cost is read.

    python -m benchmarks.http_latency --telemetry on,off|exported,off|off,off [--rounds 10]
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, Callable

import httpx
import yaml

from benchmarks import NO_QUOTAS, wait_started, write_json

REPO = Path(__file__).resolve().parents[1]
HANDBOOK = Path(os.environ.get("RAG_SHARED_DIR", REPO.parent / "shared")) / "datasets" / "handbook_18f" / "pages"
QUESTIONS = REPO / "evals" / "fixtures" / "handbook_questions.yaml"


def questions() -> list[str]:
    data = yaml.safe_load(QUESTIONS.read_text())
    return [q["question"] for kind in ("answerable", "unanswerable") for q in data.get(kind, [])]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def rag(env: dict[str, str], *args: str, **kwargs: Any) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "rag.cli", *args], env=env, check=True, text=True,
                          capture_output=True, **kwargs)


class Served:
    """`rag serve` on a fresh home holding the handbook, until the block ends."""

    def __init__(self, home: Path, ingest: bool = True, **env: str) -> None:
        self.env = {**os.environ, "RAG_HOME": str(home), **NO_QUOTAS, **env}
        self.ingest = ingest
        self.env.setdefault("RAG_EMBED_CACHE", str(REPO / ".cache" / "embeddings.sqlite"))
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = home.parent / "serve.log"

    def __enter__(self) -> "Served":
        started = time.perf_counter()
        if self.ingest:
            rag(self.env, "ingest", str(HANDBOOK), "--json")
        self.ingest_s = time.perf_counter() - started
        self.token = rag(self.env, "token", "create", "--workspace", "default", "--role", "viewer").stdout.strip()
        with self.log.open("w") as log:
            self.process = subprocess.Popen([sys.executable, "-m", "rag.cli", "serve", "--port", str(self.port)],
                                            env=self.env, stdout=log, stderr=subprocess.STDOUT)
        wait_started(self.process, lambda: httpx.get(f"{self.url}/healthz", timeout=5).status_code == 200,
                     "rag serve", 180, self.log.read_text, (httpx.TransportError,))
        return self

    def __exit__(self, *exc: object) -> None:
        self.process.send_signal(signal.SIGINT)
        try:
            self.process.wait(60)
        except subprocess.TimeoutExpired:
            self.process.kill()

    def client(self) -> httpx.Client:
        return httpx.Client(base_url=self.url, headers={"Authorization": f"Bearer {self.token}"}, timeout=120)


Call = Callable[[httpx.Client, str], None]


def search(client: httpx.Client, query: str) -> None:
    response = client.post("/v1/search", json={"query": query, "limit": 10})
    response.raise_for_status()


def ask(client: httpx.Client, query: str) -> None:
    response = client.post("/v1/ask", json={"query": query})
    response.raise_for_status()


def summary(latencies_s: list[float]) -> dict[str, float]:
    ms = sorted(x * 1000 for x in latencies_s)
    return {
        "n": len(ms),
        "p50_ms": round(statistics.median(ms), 1),
        "p95_ms": round(ms[min(len(ms) - 1, int(round(0.95 * (len(ms) - 1))))], 1),
        "mean_ms": round(statistics.fmean(ms), 1),
    }


def latency(served: Served, call: Call, queries: list[str], rounds: int) -> dict[str, float]:
    with served.client() as client:
        for query in queries[:10]:
            call(client, query)
        times = []
        for _ in range(rounds):
            for query in queries:
                started = time.perf_counter()
                call(client, query)
                times.append(time.perf_counter() - started)
    return summary(times)


def throughput(served: Served, call: Call, queries: list[str], clients: int, duration: float) -> dict[str, float]:
    """`clients` threads, each with its own keep-alive connection, calling as fast as answers come."""
    times: list[list[float]] = [[] for _ in range(clients)]
    errors = [0] * clients
    ready, go = threading.Barrier(clients + 1), threading.Event()
    deadline = [0.0]

    def worker(i: int) -> None:
        with served.client() as client:
            call(client, queries[i])  # connected and warm before the clock starts
            ready.wait()
            go.wait()
            n = i
            while time.perf_counter() < deadline[0]:
                began = time.perf_counter()
                try:
                    call(client, queries[n % len(queries)])
                except httpx.HTTPError:
                    errors[i] += 1
                times[i].append(time.perf_counter() - began)
                n += clients

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(clients)]
    for thread in threads:
        thread.start()
    ready.wait()
    began = time.perf_counter()
    deadline[0] = began + duration
    go.set()
    for thread in threads:
        thread.join()
    elapsed = time.perf_counter() - began
    done = [t for per in times for t in per]
    loaded = summary(done)
    return {"clients": clients, "requests": len(done), "errors": sum(errors), "seconds": round(elapsed, 1),
            "requests_per_s": round(len(done) / elapsed, 1),
            "loaded_p50_ms": loaded["p50_ms"], "loaded_p95_ms": loaded["p95_ms"]}


def p50_ms(client: httpx.Client, queries: list[str]) -> float:
    times = []
    for query in queries:
        started = time.perf_counter()
        search(client, query)
        times.append(time.perf_counter() - started)
    return statistics.median(times) * 1000


def bootstrap_median(values: list[float], resamples: int = 10_000) -> tuple[float, float]:
    """The 95% percentile-bootstrap interval of the median of `values` (seeded: the same figures
    give the same interval)."""
    import random

    rng = random.Random(31)
    medians = sorted(statistics.median(rng.choices(values, k=len(values))) for _ in range(resamples))
    return medians[int(0.025 * resamples)], medians[int(0.975 * resamples) - 1]


def telemetry_cost(rounds: int, json_path: str | None, first: str = "on") -> None:
    """`--telemetry on,off`: see the module's docstring. The two homes swap roles half way (both
    servers restarted), so that what differs between them (which home is the copy, which process
    started first) falls on both sides and cancels out of the paired differences."""
    from tests.support.otlp import OtlpReceiver

    queries = questions()
    root = Path(tempfile.mkdtemp(prefix="rag-telemetry-bench-"))
    pairs: list[tuple[float, float]] = []
    receiver = OtlpReceiver(decode=False) if first == "exported" else None
    exporting = {"OTEL_EXPORTER_OTLP_ENDPOINT": receiver.url} if receiver else {}
    try:
        rag({**os.environ, "RAG_HOME": str(root / "a"), "RAG_EMBED_CACHE": os.environ.get(
            "RAG_EMBED_CACHE", str(REPO / ".cache" / "embeddings.sqlite"))}, "ingest", str(HANDBOOK), "--json")
        shutil.copytree(root / "a", root / "b")
        for half, (on_home, off_home) in enumerate(((root / "a", root / "b"), (root / "b", root / "a"))):
            with Served(on_home, ingest=False, RAG_TELEMETRY__ENABLED=str(first != "off").lower(), **exporting) as on, \
                    Served(off_home, ingest=False, RAG_TELEMETRY__ENABLED="false") as off, \
                    on.client() as on_client, off.client() as off_client:
                for client in (on_client, off_client):
                    for query in queries[:10]:
                        search(client, query)
                for i in range(half * (rounds // 2), rounds // 2 + half * (rounds - rounds // 2)):
                    order = [(on_client, "on"), (off_client, "off")][:: 1 if i % 2 == 0 else -1]
                    measured = {name: p50_ms(client, queries) for client, name in order}
                    pairs.append((measured["on"], measured["off"]))
                    print(f"round {i + 1}: p50 on {measured['on']:.1f} ms, off {measured['off']:.1f} ms", flush=True)
                metrics = httpx.get(f"{on.url}/metrics").text
    finally:
        shutil.rmtree(root, ignore_errors=True)
        if receiver is not None:
            receiver.close()
    differences = [100 * (a - b) / b for a, b in pairs]
    low, high = bootstrap_median(differences)
    result = {"rounds": rounds, "questions": len(queries), "p50_on_ms": [round(a, 2) for a, _ in pairs],
              "p50_off_ms": [round(b, 2) for _, b in pairs], "median_difference_pct": round(statistics.median(differences), 2),
              "interval_95_pct": [round(low, 2), round(high, 2)], "metrics_bytes": len(metrics),
              "first": first, "otlp_posts": receiver.posts if receiver else 0,
              "otlp_bytes": receiver.bytes if receiver else 0}
    what = {"on": "Metrics and traces", "exported": "Metrics and traces exported by OTLP", "off": "Both off"}[first]
    print(f"\n{what} on search p50 (the handbook, {len(queries)} questions a round, {rounds} rounds, "
          f"{os.cpu_count()} CPUs)" + (f"; the receiver got {receiver.posts} exports, {receiver.bytes:,} bytes"
                                       if receiver else "") + "\n")
    print("| p50 on, median ms | p50 off, median ms | median paired difference | 95% interval |")
    print("| ---: | ---: | ---: | --- |")
    print(f"| {statistics.median(a for a, _ in pairs):.1f} | {statistics.median(b for _, b in pairs):.1f} | "
          f"{result['median_difference_pct']:+.1f}% | {low:+.1f}% to {high:+.1f}% |")
    write_json(result, json_path)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=None,
                        help="Passes over the questions for latency (default 2; 10 with --telemetry).")
    parser.add_argument("--duration", type=float, default=20.0, help="Seconds of load per endpoint.")
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--telemetry", default=None, choices=["on,off", "exported,off", "off,off"],
                        help="Measure what metrics and traces cost a search instead (see above).")
    parser.add_argument("--json", default=None, help="Write the result here ('-': standard output).")
    args = parser.parse_args()
    if args.telemetry:
        telemetry_cost(args.rounds or 10, args.json, args.telemetry.split(",")[0])
        return
    args.rounds = args.rounds or 2

    queries = questions()
    root = Path(tempfile.mkdtemp(prefix="rag-http-bench-"))
    try:
        load_before = os.getloadavg()
        with Served(root / "home") as served:
            result: dict[str, Any] = {"questions": len(queries), "ingest_s": round(served.ingest_s, 1)}
            for name, call in (("search", search), ("ask", ask)):
                result[name] = latency(served, call, queries, args.rounds)
            for name, call in (("search", search), ("ask", ask)):
                result[name] |= throughput(served, call, queries, args.clients, args.duration)
        result["load_average"] = {"before": [round(x, 2) for x in load_before],
                                  "after": [round(x, 2) for x in os.getloadavg()]}
    finally:
        shutil.rmtree(root, ignore_errors=True)

    backend = os.environ.get("RAG_EMBED__BACKEND", "onnx")
    print(f"\nHTTP API on the 18F handbook ({len(queries)} questions; encoder {backend}; {os.cpu_count()} CPUs; "
          f"load average before {result['load_average']['before']}, after {result['load_average']['after']})\n")
    print(f"| endpoint | p50 ms | p95 ms | mean ms | req/s, {args.clients} clients | p50 / p95 ms under load | errors |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    for name in ("search", "ask"):
        r = result[name]
        print(f"| POST /v1/{name} | {r['p50_ms']} | {r['p95_ms']} | {r['mean_ms']} | {r['requests_per_s']} | "
              f"{r['loaded_p50_ms']} / {r['loaded_p95_ms']} | {r['errors']} |")
    write_json(result, args.json)


if __name__ == "__main__":
    main()
