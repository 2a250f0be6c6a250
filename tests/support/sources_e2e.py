"""Helpers of the end-to-end tests of sources (tests/e2e/test_sources_*.py): a folder of real
handbook pages, `rag serve` started with the sources' clock turned fast, a client of /v1/sources,
and read-only looks into a SQLite store (sqlite3 itself, not the CLI, which takes the store's lock)."""

from __future__ import annotations

import os
import shutil
import signal
import sqlite3
import subprocess
import sys
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

import httpx

from .paths import HANDBOOK
from .processes import free_port, wait_for_health, wait_until

# Fast clocks: the scheduler looks every second and a source may run every second; leases short
# enough that a test waits past one. 127.0.0.1 allowed by the operator's setting (a source's own
# `allow_hosts` may only narrow it), so a website source reaches the test's site.
FAST_SOURCES = {"RAG_SOURCES__POLL_SECONDS": "1", "RAG_SOURCES__MIN_EVERY_SECONDS": "1",
                "RAG_SOURCES__ALLOW_HOSTS": "127.0.0.1", "OPENBLAS_NUM_THREADS": "1"}


def handbook_pages(root: Path, count: int) -> Path:
    """The first `count` Markdown pages of the 18F handbook (sorted by path), copied under `root`."""
    pages = sorted(p for p in HANDBOOK.rglob("*.md") if p.is_file())[:count]
    assert len(pages) == count, f"the handbook has {len(pages)} pages, not {count}"
    for page in pages:
        target = root / page.relative_to(HANDBOOK)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(page, target)
    return root


def rag_env(home: Path, **extra: str) -> dict[str, str]:
    """The environment of `rag` over `home`: the fast clocks, and the operator's settings a server and
    the CLI share. Sources added over HTTP may read local paths beside `home` (RAG_SOURCES__LOCAL_ROOTS
    is home's parent; home itself stays refused)."""
    return {**os.environ, "RAG_HOME": str(home), **FAST_SOURCES, "RAG_SOURCES__LOCAL_ROOTS": str(home.parent), **extra}


def rag_cli(home: Path, *args: str, env: dict[str, str] | None = None, timeout: float = 600) -> subprocess.CompletedProcess:
    """`rag ARGS` run to its end (beside a server, when one holds `home`)."""
    return subprocess.run([sys.executable, "-m", "rag.cli", *args], capture_output=True, text=True,
                          env=env or rag_env(home), timeout=timeout, stdin=subprocess.DEVNULL)


def rag_popen(home: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "rag.cli", *args], env=env or rag_env(home), text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL)


@dataclass
class Served:
    home: Path
    url: str
    server: subprocess.Popen
    admin: str  # the first-run admin token

    def client(self, token: str | None = None) -> httpx.Client:
        return httpx.Client(base_url=self.url, timeout=120,
                            headers={"Authorization": f"Bearer {token or self.admin}"})

    def source(self, name: str, token: str | None = None) -> dict[str, Any]:
        with self.client(token) as http:
            got = http.get(f"/v1/sources/{name}")
        assert got.status_code == 200, got.text
        return got.json()

    def synced(self, name: str, timeout: float = 300) -> dict[str, Any]:
        """The source once it is idle after a sync."""
        def done() -> dict[str, Any] | None:
            state = self.source(name)
            return state if state["last_sync"]["finished_at"] and state["status"] == "idle" else None
        return wait_until(done, timeout, f"a finished sync of {name}")


@contextmanager
def rag_serve(home: Path, **extra: str) -> Iterator[Served]:
    """`rag serve` on a free 127.0.0.1 port over `home`, with the fast clocks; stopped with Ctrl-C
    however the test ends."""
    port = free_port()
    server = rag_popen(home, "serve", "--host", "127.0.0.1", "--port", str(port), env=rag_env(home, **extra))
    url = f"http://127.0.0.1:{port}"
    try:
        wait_for_health(url, server, lambda: server.communicate(timeout=30)[1])
        token_file = home / "admin-token"
        wait_until(token_file.exists, 60, "the first-run admin token")
        yield Served(home, url, server, token_file.read_text().strip())
    finally:
        if server.poll() is None:
            server.send_signal(signal.SIGINT)
            try:
                server.communicate(timeout=120)
            except subprocess.TimeoutExpired:
                server.kill()
                server.communicate(timeout=30)


def query(db: Path, sql: str, *args: Any) -> list[tuple]:
    """Rows of `sql` from the SQLite store, opened read-only (a running sync keeps writing)."""
    connection = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=30)
    try:
        return connection.execute(sql, args).fetchall()
    finally:
        connection.close()
