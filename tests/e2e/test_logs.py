"""`rag serve`'s log on standard output (issue 31): JSON lines, each with the request id (the
caller's X-Request-ID, or one made and returned) and the principal, none with the query or a token;
RAG_LOG__TO=file keeps it in the private file, as text with the same request id."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
from pathlib import Path

import httpx
import pytest

from rag.service import KnowledgeService
from rag.settings import Settings

from ..support.api_support import one_page_store
from ..support.processes import free_port, wait_for_health

QUERY = "How many days of annual leave?"


class Server:
    def __init__(self, home: Path, **env: str) -> None:
        environment = {**os.environ, "RAG_HOME": str(home), **env}
        if "RAG_LOG__TO" not in env:
            environment.pop("RAG_LOG__TO", None)  # the default: standard output, as it is not a terminal
        self.url = f"http://127.0.0.1:{(port := free_port())}"
        self.process = subprocess.Popen([sys.executable, "-m", "rag.cli", "serve", "--port", str(port)],
                                        env=environment, text=True, stdin=subprocess.DEVNULL,
                                        stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        self.lines: list[str] = []  # standard output, read as it comes: a full pipe would stall the server
        self.reader = threading.Thread(target=lambda: self.lines.extend(self.process.stdout), daemon=True)
        self.reader.start()
        wait_for_health(self.url, self.process, lambda: self.process.communicate()[1])

    def stop(self) -> tuple[list[str], str]:
        self.process.send_signal(signal.SIGINT)
        _, stderr = self.process.communicate(timeout=120)
        self.reader.join(30)
        return self.lines, stderr


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> dict:
    home = tmp_path_factory.mktemp("logs") / "home"
    with KnowledgeService(Settings(home=home)) as svc:
        _, secret = one_page_store(svc)
        principal = svc.authenticate(secret).principal_id
    return {"home": home, "secret": secret, "principal": principal}


def _calls(url: str, secret: str) -> dict[str, httpx.Response]:
    auth = {"Authorization": f"Bearer {secret}"}
    return {
        "given": httpx.post(f"{url}/v1/search", json={"query": QUERY}, headers={**auth, "X-Request-ID": "trace-7f3a"}),
        "made": httpx.post(f"{url}/v1/search", json={"query": QUERY}, headers=auth),
        "forged": httpx.post(f"{url}/v1/search", json={"query": QUERY},
                             headers={**auth, "X-Request-ID": "x" * 129}),
        "refused": httpx.post(f"{url}/v1/search", json={"query": QUERY}, headers={"X-Request-ID": "no-token-1"}),
        # The service's own warning, written while it serves this request:
        "mcp": httpx.post(f"{url}/mcp", json={}, headers={"Origin": "https://evil.example", "X-Request-ID": "mcp-9"}),
    }


def test_json_lines_on_standard_output_with_the_request_id_and_principal(store: dict) -> None:
    server = Server(store["home"])
    try:
        calls = _calls(server.url, store["secret"])
    finally:
        lines, stderr = server.stop()
    assert [r.status_code for r in calls.values()] == [200, 200, 200, 401, 403]
    assert calls["given"].headers["x-request-id"] == "trace-7f3a"
    made = calls["made"].headers["x-request-id"]
    assert re.fullmatch(r"[0-9a-f]{32}", made) and re.fullmatch(r"[0-9a-f]{32}", calls["forged"].headers["x-request-id"])
    assert calls["refused"].headers["x-request-id"] == "no-token-1"  # an error has its id too

    records = [json.loads(line) for line in lines]  # every line of standard output is one JSON object
    assert records and all({"time", "level", "logger", "message", "request_id", "principal"} <= set(r)
                           for r in records)
    access = {r["request_id"]: r for r in records if r["logger"] == "uvicorn.access"}
    assert access["trace-7f3a"]["principal"] == store["principal"]
    assert (access["trace-7f3a"]["method"], access["trace-7f3a"]["path"], access["trace-7f3a"]["status"]) \
        == ("POST", "/v1/search", 200)
    assert access[made]["principal"] == store["principal"]
    assert access["no-token-1"]["principal"] == "-" and access["no-token-1"]["status"] == 401
    assert "x" * 129 not in "".join(lines)
    warning = next(r for r in records if r["message"].startswith("refused an MCP request"))
    assert (warning["logger"], warning["level"], warning["request_id"]) == ("rag.mcp", "WARNING", "mcp-9")
    for text in ("".join(lines), stderr):
        assert QUERY not in text and "annual leave" not in text and store["secret"] not in text
    assert not (store["home"] / "logs" / "rag.log").exists() or "trace-7f3a" not in \
        (store["home"] / "logs" / "rag.log").read_text()


def test_the_file_log_keeps_the_request_id_as_text(store: dict) -> None:
    log = store["home"] / "logs" / "rag.log"
    before = log.read_text() if log.exists() else ""
    server = Server(store["home"], RAG_LOG__TO="file")
    try:
        calls = _calls(server.url, store["secret"])
    finally:
        lines, _ = server.stop()
    assert calls["given"].headers["x-request-id"] == "trace-7f3a"
    written = log.read_text()[len(before):]
    assert re.search(r" WARNING rag\.mcp \[mcp-9 -\]: refused an MCP request", written)
    assert written.strip() and not any(line.lstrip().startswith("{") for line in lines)  # no JSON on standard output
    # time, level, logger, [request id, principal] ("-" outside a request: the server's start and stop)
    assert all(re.match(r"\d{4}-\d\d-\d\d [\d:,]+ (INFO|WARNING|ERROR) [\w.]+ \[\S+ \S+\]: ", line)
               for line in written.splitlines() if line[:1].isdigit())
    assert QUERY not in written and store["secret"] not in written
