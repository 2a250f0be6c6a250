"""The first ten minutes (issue 16): `rag serve` on a fresh store makes an admin token that works
(its secret in a 0600 file in RAG_HOME whose path it prints, issue 28),
and the CLI works beside the running server (over HTTP, with the 0600 secret), with the output it
gives on its own; /docs works offline; `rag token list` piped shows whole values; chat usage."""

from __future__ import annotations

import json
import os
import signal
import stat
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from ..support.api_support import build_home
from ..support.processes import LEAVE_DOC, free_port, wait_for_health

QUESTION = "How much annual leave do I earn?"
LONG_NAME = "reviewer-with-a-rather-long-name-for-a-table-column"


def rag(home: Path, *args: str, timeout: float = 600) -> subprocess.CompletedProcess:
    env = {**os.environ, "RAG_HOME": str(home)}
    return subprocess.run([sys.executable, "-m", "rag.cli", *args], capture_output=True, text=True, env=env,
                          timeout=timeout, stdin=subprocess.DEVNULL)


def _commands(home: Path) -> dict[str, subprocess.CompletedProcess]:
    """The commands whose output must not depend on whether a server runs them."""
    return {
        "search text": rag(home, "search", QUESTION, "--limit", "3"),
        "search json": rag(home, "search", QUESTION, "--limit", "3", "--json"),
        "ask text": rag(home, "ask", QUESTION),
        "ask json": rag(home, "ask", QUESTION, "--json"),
        "bad query": rag(home, "search", "   "),
    }


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """A fresh store (no token yet), the commands' output without a server, then `rag serve` on it."""
    root = tmp_path_factory.mktemp("first-run")
    home = root / "home"
    pages = build_home(root)
    assert rag(home, "ingest", str(pages)).returncode == 0
    alone = _commands(home)
    port = free_port()
    env = {**os.environ, "RAG_HOME": str(home)}
    server = subprocess.Popen([sys.executable, "-m", "rag.cli", "serve", "--port", str(port)], env=env, text=True,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_for_health(url, server, lambda: server.communicate()[1])
        yield {"home": home, "url": url, "server": server, "alone": alone, "pages": pages}
    finally:
        if server.poll() is None:
            server.send_signal(signal.SIGINT)
            server.communicate(timeout=120)


def _first_token(served) -> str:
    """The admin token `rag serve` made: from the file whose path it printed on standard error, as
    a user does with the `export` line it shows."""
    if "token" not in served:
        lines = []
        while not any(line.startswith("    export RAG_TOKEN=") for line in lines):
            lines.append(served["server"].stderr.readline())
            assert lines[-1], "rag serve printed no token file"
        served["banner"] = "".join(lines)
        path = served["home"] / "admin-token"
        assert f"    export RAG_TOKEN=$(cat {path})\n" in served["banner"]
        served["token"] = path.read_text().strip()
    return served["token"]


def test_first_run_writes_an_admin_token_that_works_to_a_private_file_and_in_no_log(served):
    token = _first_token(served)
    assert "admin of workspace 'default'" in served["banner"] and "readable by you alone" in served["banner"]
    assert token.startswith("rag_") and token not in served["banner"]
    path = served["home"] / "admin-token"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600 and path.stat().st_uid == os.geteuid()
    assert path.read_text() == token + "\n"
    found = httpx.post(f"{served['url']}/v1/search", json={"query": "annual leave", "limit": 1},
                       headers={"Authorization": f"Bearer {token}"}, timeout=120)
    assert found.status_code == 200 and found.json()["results"][0]["document_id"] == LEAVE_DOC
    logs = "".join(p.read_text(errors="replace") for p in (served["home"] / "logs").rglob("*") if p.is_file())
    assert token not in logs and str(path) in logs  # the log says where it is, never what it is
    listed = rag(served["home"], "token", "list", "--json")
    tokens = json.loads(listed.stdout)
    assert [(t["kind"], t["role"], t["access"]) for t in tokens] == [("person", "admin", "all")]


def test_the_cli_beside_the_server_prints_what_it_prints_alone(served):
    beside = _commands(served["home"])
    for name, alone in served["alone"].items():
        now = beside[name]
        assert (now.returncode, now.stdout, now.stderr) == (alone.returncode, alone.stdout, alone.stderr), name
    assert beside["search json"].returncode == 0 and LEAVE_DOC in beside["search json"].stdout
    assert beside["ask text"].stdout.count("Sources:") == 1
    assert beside["bad query"].returncode == 2 and "`query` must be a non-empty string" in beside["bad query"].stderr


def test_the_secret_is_the_owners_alone_and_only_it_opens_the_local_door(served):
    _first_token(served)
    home = served["home"]
    secret_file = home / "rag.lock.secret"
    assert stat.S_IMODE(secret_file.stat().st_mode) == 0o600
    assert json.loads((home / "rag.lock.holder").read_text())["url"] == served["url"]
    door = f"{served['url']}/local/token_list"
    assert httpx.post(door, json={"workspace": None}).status_code == 401
    api_token = {"Authorization": f"Bearer {served['token']}"}  # an admin's API token is not the secret
    assert httpx.post(door, json={"workspace": None}, headers=api_token).status_code == 401
    secret = {"Authorization": f"Bearer {secret_file.read_text()}"}
    answered = httpx.post(door, json={"workspace": None}, headers=secret)
    assert answered.status_code == 200 and "tokens" in json.loads(answered.text.splitlines()[0])
    assert "/local" not in json.dumps(httpx.get(f"{served['url']}/openapi.json").json()["paths"])


def test_tokens_are_made_listed_and_revoked_beside_the_server(served):
    home = served["home"]
    made = rag(home, "token", "create", "--workspace", "default", "--role", "viewer", "--name", LONG_NAME)
    assert made.returncode == 0, made.stderr
    secret = made.stdout.strip()
    assert "store it now" in made.stderr
    asked = httpx.post(f"{served['url']}/v1/search", json={"query": "annual leave"},
                       headers={"Authorization": f"Bearer {secret}"}, timeout=120)
    assert asked.status_code == 200
    listed = rag(home, "token", "list")  # piped: captured by the test, as `| cat` would
    row = next(line for line in listed.stdout.splitlines() if LONG_NAME in line)
    assert "viewer" in row and "knowledge:read" in row and "…" not in listed.stdout
    token_id = json.loads(rag(home, "token", "list", "--json").stdout)[0]["token_id"]
    revoked = rag(home, "token", "revoke", token_id)
    assert revoked.returncode == 0 and revoked.stdout == f"revoked {token_id}\n"
    refused = httpx.post(f"{served['url']}/v1/search", json={"query": "annual leave"},
                         headers={"Authorization": f"Bearer {secret}"}, timeout=120)
    assert refused.status_code == 401
    unknown = rag(home, "token", "revoke", "tok_0000000000000000")
    assert unknown.returncode == 2 and unknown.stderr == "error: token not found\n"


def test_ingest_beside_the_server(served):
    home, pages = served["home"], served["pages"]
    (pages / "parking.md").write_text("# Parking\n\nThe bicycle racks are behind building C.\n")
    ingested = rag(home, "ingest", str(pages), "--json")
    assert ingested.returncode == 0, ingested.stderr
    assert json.loads(ingested.stdout)["added"] == 1
    found = rag(home, "search", "where are the bicycle racks", "--limit", "1", "--json")
    assert json.loads(found.stdout)["results"][0]["title"] == "Parking"


def test_export_and_import_beside_the_server(served, tmp_path):
    home = served["home"]
    archive = tmp_path / "archive.jsonl"
    exported = rag(home, "export", str(archive))
    assert exported.returncode == 0, exported.stderr
    assert exported.stdout.startswith(f"Exported the whole store to {archive}\n") and "document_versions" in exported.stdout
    header, *rows = archive.read_text(encoding="utf-8").splitlines()
    tables = [json.loads(row)["table"] for row in rows]
    assert json.loads(header)["counts"]["document_versions"] == tables.count("document_versions") > 0
    streamed = rag(home, "export", "-", "--kb", "default")  # the archive comes from the server as events
    assert streamed.returncode == 0, streamed.stderr
    lines = streamed.stdout.splitlines()
    assert json.loads(lines[0])["scope"] == {"workspace": "default", "knowledge_bases": ["default"]}
    assert all(json.loads(line) for line in lines[1:]) and streamed.stdout.endswith("\n")
    assert "Exported 'default' of workspace 'default' to -" in streamed.stderr
    # The server runs the import too: an archive of what it holds is refused as it is without it.
    again = rag(home, "import", str(archive))
    assert again.returncode == 2 and "in use by" not in again.stderr
    # Off a terminal the import's progress comes as plain lines first; the refusal is a line of its own.
    assert any(line.startswith("error: this store already holds") for line in again.stderr.splitlines())
    assert "Traceback" not in again.stderr


def test_docs_work_offline(served):
    page = httpx.get(f"{served['url']}/docs")
    assert page.status_code == 200
    assert "cdn" not in page.text.lower() and "/docs/assets/swagger-ui-bundle.js" in page.text
    script = httpx.get(f"{served['url']}/docs/assets/swagger-ui-bundle.js")
    assert script.status_code == 200 and "SwaggerUIBundle" in script.text
    assert httpx.get(f"{served['url']}/docs/assets/swagger-ui.css").status_code == 200


def test_chat_completions_count_tokens(served):
    token = _first_token(served)
    short = [{"role": "user", "content": QUESTION}]
    longer = [{"role": "user", "content": "Hello, I have a few questions about the handbook and its rules."},
              {"role": "assistant", "content": "Of course: ask away."}] + short
    usages = []
    for messages in (short, longer):
        reply = httpx.post(f"{served['url']}/v1/chat/completions", json={"model": "default", "messages": messages},
                           headers={"Authorization": f"Bearer {token}"}, timeout=120)
        assert reply.status_code == 200
        content, usage = reply.json()["choices"][0]["message"]["content"], reply.json()["usage"]
        assert usage["total_tokens"] == usage["prompt_tokens"] + usage["completion_tokens"]
        # A token is a few characters of English: between 2 and 6 of them on average.
        assert len(content) / 6 < usage["completion_tokens"] < len(content) / 2
        usages.append(usage)
    assert usages[0]["prompt_tokens"] >= len(QUESTION) / 6 and usages[1]["prompt_tokens"] > usages[0]["prompt_tokens"] + 15


def test_rag_mcp_beside_the_server_relays_its_tools(served):
    home = served["home"]
    agent = rag(home, "token", "create", "--workspace", "default", "--role", "viewer", "--agent", "--access", "all")
    env = {**os.environ, "RAG_HOME": str(home), "RAG_TOKEN": agent.stdout.strip()}
    process = subprocess.Popen([sys.executable, "-m", "rag.cli", "mcp"], env=env, text=True,
                               stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)

    def call(message: dict) -> dict | None:
        process.stdin.write(json.dumps(message) + "\n")
        process.stdin.flush()
        return json.loads(process.stdout.readline()) if "id" in message else None

    initialized = call({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "test", "version": "1"}}})
    assert "tools" in initialized["result"]["capabilities"]
    call({"jsonrpc": "2.0", "method": "notifications/initialized"})
    tools = {t["name"] for t in call({"jsonrpc": "2.0", "id": 2, "method": "tools/list"})["result"]["tools"]}
    assert {"search_knowledge", "ask_knowledge", "search_knowledge_base", "get_document"} <= tools
    found = call({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {
        "name": "search_knowledge", "arguments": {"query": QUESTION, "limit": 1}}})
    assert LEAVE_DOC in found["result"]["content"][0]["text"]
    process.stdin.close()
    assert process.wait(60) == 0 and "Traceback" not in process.stderr.read()
    bad = subprocess.run([sys.executable, "-m", "rag.cli", "mcp"], env=env | {"RAG_TOKEN": "rag_nope"}, text=True,
                         capture_output=True, stdin=subprocess.DEVNULL, timeout=120)
    assert bad.returncode == 1 and bad.stdout == "" and bad.stderr == "error: invalid or expired token\n"


def test_the_server_stopped_the_cli_opens_the_store_again(served):
    server, home = served["server"], served["home"]
    beside = rag(home, "search", QUESTION, "--limit", "3")
    token = _first_token(served)
    server.send_signal(signal.SIGTERM)  # as a service manager stops it (Ctrl-C: tests/e2e/test_api_serve.py)
    out, err = server.communicate(timeout=120)
    assert server.returncode == 0 and "Traceback" not in err
    assert token not in out + served["banner"] + err  # everything it printed: the secret is in the file alone
    assert not (home / "rag.lock.secret").exists() and not (home / "rag.lock.holder").exists()
    alone = rag(home, "search", QUESTION, "--limit", "3")
    assert alone.returncode == 0 and alone.stdout == beside.stdout


def test_rag_mcp_without_a_token_says_none_was_given(tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in ("RAG_TOKEN", "RAG_TOKEN_FILE")}
    (tmp_path / "empty").write_text("\n")
    missing = tmp_path / "no-such-file"
    said = {
        "": "error: no token was given: set RAG_TOKEN or RAG_TOKEN_FILE, or pass --token",
        "RAG_TOKEN=": "error: no token was given: set RAG_TOKEN or RAG_TOKEN_FILE, or pass --token",
        f"RAG_TOKEN_FILE={tmp_path / 'empty'}": "error: no token was given",
        f"RAG_TOKEN_FILE={missing}": f"error: RAG_TOKEN_FILE: the file {missing} does not exist",
        f"RAG_TOKEN=x RAG_TOKEN_FILE={missing}": "error: both RAG_TOKEN and RAG_TOKEN_FILE are set: set one of them",
    }
    for settings, message in said.items():
        extra = dict(pair.split("=", 1) for pair in settings.split())
        result = subprocess.run([sys.executable, "-m", "rag.cli", "mcp"], capture_output=True, text=True,
                                env=env | extra | {"RAG_HOME": str(tmp_path)}, stdin=subprocess.DEVNULL, timeout=120)
        assert result.returncode == 2 and result.stdout == "", settings
        assert result.stderr.startswith(message), (settings, result.stderr)
