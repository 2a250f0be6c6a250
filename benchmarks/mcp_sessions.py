"""MCP sessions one token opens against a real `rag serve` (issue 27, defect 6), and the memory they take.

A fresh embedded home and one agent token; `rag serve` on 127.0.0.1. The token opens `--sessions`
sessions one after another, each as a client opens one (initialize, then the initialized
notification) and leaves it idle. Printed: the time, the server's RSS before and after, how many of
the last 200 still answer tools/list (all of them without a cap; RAG_MCP__SESSIONS_PER_TOKEN with
one), and the status of an initialize sent with `Origin: http://evil.example` (403 since the fix).

    python -m benchmarks.mcp_sessions [--sessions 2000] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

from benchmarks import wait_started
from benchmarks.http_latency import free_port

HELLO = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
    "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "bench", "version": "1"}}}


def rss_mb(pid: int) -> int:
    status = Path(f"/proc/{pid}/status").read_text().splitlines()
    return int(next(line for line in status if line.startswith("VmRSS")).split()[1]) // 1024


def wait_healthy(url: str, process: subprocess.Popen) -> None:
    wait_started(process, lambda: httpx.get(f"{url}/healthz", timeout=5).status_code == 200,
                 "rag serve", 180, errors=(httpx.TransportError,))


def open_sessions(client: httpx.Client, n: int) -> list[str]:
    ids = []
    for _ in range(n):
        opened = client.post("/mcp", json=HELLO)
        opened.raise_for_status()
        ids.append(opened.headers["mcp-session-id"])
        client.post("/mcp", json={"jsonrpc": "2.0", "method": "notifications/initialized"},
                    headers={"Mcp-Session-Id": ids[-1]})
    return ids


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=2000)
    parser.add_argument("--json", help="also write the figures as JSON to this path ('-': standard output)")
    args = parser.parse_args()
    n = args.sessions
    from rag.service import KnowledgeService
    from rag.settings import Settings

    home = Path(tempfile.mkdtemp(prefix="mcp-sessions-")) / "home"
    with KnowledgeService(Settings(home=home)) as svc:
        svc.ensure_workspace("default")
        secret, _ = svc.create_token("default", "editor", [], None, (), True)
    port = free_port()
    process = subprocess.Popen([sys.executable, "-m", "rag.cli", "serve", "--port", str(port)],
                               env={**os.environ, "RAG_HOME": str(home)},
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_healthy(url, process)
        headers = {"Authorization": f"Bearer {secret}", "Accept": "application/json, text/event-stream"}
        with httpx.Client(base_url=url, headers=headers, timeout=60) as client:
            open_sessions(client, 1)  # warm
            before, started = rss_mb(process.pid), time.perf_counter()
            ids = open_sessions(client, n)
            took, after = time.perf_counter() - started, rss_mb(process.pid)
            tools = {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}
            alive = sum(client.post("/mcp", json=tools, headers={"Mcp-Session-Id": sid}).status_code == 200
                        for sid in ids[-200:])
            evil = client.post("/mcp", json=HELLO, headers={"Origin": "http://evil.example"}).status_code
        print(f"{n} sessions in {took:.1f} s; RSS {before} -> {after} MB (+{after - before}); "
              f"of the last {min(n, 200)}, {alive} answer; an evil Origin -> {evil}")
        figures = {"sessions": n, "seconds": round(took, 2), "rss_before_mb": before, "rss_after_mb": after,
                   "last_200_answering": alive, "evil_origin_status": evil}
        if args.json == "-":
            print(json.dumps(figures))
        elif args.json:
            Path(args.json).write_text(json.dumps(figures, indent=2) + "\n")
    finally:
        process.send_signal(signal.SIGINT)
        try:
            process.wait(60)
        except subprocess.TimeoutExpired:
            process.kill()


if __name__ == "__main__":
    main()
