"""Issue 27, defects 6 and 7, over streamable HTTP on a real socket (uvicorn), the MCP app mounted
at /mcp as the HTTP API mounts it: at most RAG_MCP__SESSIONS_PER_TOKEN sessions per token (the one
idle longest closed first, 429 when all are in use), the idle timeout as a setting, and the Host
and Origin checks (403 before any token is looked up)."""

from __future__ import annotations

import logging
import re
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import httpx2
import pytest
import yaml
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from starlette.applications import Starlette
from starlette.routing import Mount

from rag.mcp.http import mcp_http
from rag.service import KnowledgeService
from rag.settings import Settings

from ..support.mcp_support import Session, http_session, run, running, token

pytestmark = pytest.mark.filterwarnings("ignore:.*ReadOnly. qualifier:UserWarning")

CAP = 3
COMPOSE = Path(__file__).resolve().parents[2] / "docker" / "compose.yaml"
ACCEPT = "application/json, text/event-stream"
HELLO = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
    "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "test", "version": "1"}}}
LIST_TOOLS = {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}
CALL_TOOL = {"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "get_root_nodes", "arguments": {}}}


def compose_allowed_hosts() -> str:
    """RAG_ALLOWED_HOSTS as docker/compose.yaml gives it to the rag service (its ${...:-default})."""
    value = yaml.safe_load(COMPOSE.read_text())["services"]["rag"]["environment"]["RAG_ALLOWED_HOSTS"]
    match = re.fullmatch(r"\$\{RAG_ALLOWED_HOSTS:-(.*)\}", value)
    return match.group(1) if match else value


def serve(root: Path, settings: Settings):
    """A service on an empty default workspace and its MCP app mounted at /mcp on a free port: the
    body of a module-scoped fixture, yielding (svc, the /mcp/ URL, the port)."""
    with KnowledgeService(settings.model_copy(update={"home": root / "home"})) as svc:
        svc.ensure_workspace("default")
        app, sessions = mcp_http(svc)

        @asynccontextmanager
        async def lifespan(_):
            async with sessions():
                yield

        with running(Starlette(routes=[Mount("/mcp", app=app)], lifespan=lifespan)) as base:
            yield svc, f"{base}/mcp/", int(base.rsplit(":", 1)[1])


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """Sessions capped at 3 per token; the hosts docker/compose.yaml allows; localhost pages allowed."""
    with pytest.MonkeyPatch.context() as env:
        env.setenv("RAG_ALLOWED_HOSTS", compose_allowed_hosts())
        env.setenv("RAG_ALLOWED_ORIGINS", "http://localhost:*")
        env.setenv("RAG_MCP__SESSIONS_PER_TOKEN", str(CAP))
        settings = Settings()
    yield from serve(tmp_path_factory.mktemp("mcp_cap"), settings)


def post(url: str, secret: str | None, body: dict, session: str | None = None, **headers: str) -> httpx2.Response:
    headers = {"Accept": ACCEPT, **headers}
    if secret is not None:
        headers["Authorization"] = f"Bearer {secret}"
    if session is not None:
        headers["Mcp-Session-Id"] = session
    return httpx2.post(url, json=body, headers=headers, timeout=60)


def open_session(url: str, secret: str) -> str:
    """A session opened as a client opens one (initialize, then the initialized notification), left idle."""
    opened = post(url, secret, HELLO)
    assert opened.status_code == 200, opened.text
    session = opened.headers["mcp-session-id"]
    ready = post(url, secret, {"jsonrpc": "2.0", "method": "notifications/initialized"}, session)
    assert ready.status_code == 202, ready.text
    return session


def answers(url: str, secret: str, session: str) -> bool:
    """True when the session serves tools/list; False when it is gone (the SDK's 404 Session not found)."""
    reply = post(url, secret, LIST_TOOLS, session)
    if reply.status_code == 404:
        assert reply.json()["error"]["message"] == "Session not found"
        return False
    assert reply.status_code == 200 and '"tools"' in reply.text, reply.text
    return True


def test_past_its_cap_a_token_loses_its_session_idle_longest_and_no_other(served):
    svc, url, _ = served
    mine, other = token(svc), token(svc)
    theirs = open_session(url, other)
    first, second, third = (open_session(url, mine) for _ in range(CAP))
    assert answers(url, mine, first)  # now `second` is the one idle longest

    fourth = open_session(url, mine)
    assert not answers(url, mine, second)
    assert all(answers(url, mine, s) for s in (first, third, fourth))
    assert answers(url, other, theirs)

    # A bounded loop of 3 × the cap more openings: never more than CAP of this token's sessions answer,
    # the newest always does, and the other token's session is untouched.
    opened = [first, second, third, fourth]
    for _ in range(3 * CAP):
        opened.append(open_session(url, mine))
        alive = [s for s in opened if answers(url, mine, s)]
        assert len(alive) == CAP and opened[-1] in alive
    assert answers(url, other, theirs)

    async def newest_through_the_sdk():
        async with legacy_session(url, mine) as client:
            return await client.ok("get_root_nodes")

    assert run(newest_through_the_sdk)["roots"] is not None  # it took the place of the one idle longest
    assert sum(answers(url, mine, s) for s in opened) == CAP - 1


def leaves(exc: BaseException):
    """The exceptions inside (nested) exception groups: the SDK client's task group wraps its error."""
    if isinstance(exc, BaseExceptionGroup):
        for inner in exc.exceptions:
            yield from leaves(inner)
    else:
        yield exc


def test_openings_at_once_never_pass_the_cap(served):
    """12 openings by one token at the same moment: each is admitted or refused (429) under the SDK's
    creation lock, so afterwards at most CAP of the admitted ones answer."""
    svc, url, _ = served
    secret = token(svc)
    with ThreadPoolExecutor(12) as pool:
        replies = list(pool.map(lambda _: post(url, secret, HELLO), range(12)))
    assert {reply.status_code for reply in replies} <= {200, 429}
    admitted = [reply.headers["mcp-session-id"] for reply in replies if reply.status_code == 200]
    assert admitted and sum(answers(url, secret, session) for session in admitted) <= CAP


@asynccontextmanager
async def legacy_session(url: str, secret: str):
    """The SDK client with the initialize handshake (protocol versions up to 2025-11-25, what clients
    use today): it opens a session, and holds a GET stream open while connected. (Its default,
    "auto", settles on the 2026 protocol, where each request stands alone and no session is kept.)"""
    async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {secret}"}, timeout=60) as http:
        async with Client(streamable_http_client(url, http_client=http), mode="legacy") as client:
            yield Session(client)


def test_when_every_session_has_a_request_in_flight_a_new_one_is_refused_with_429(served):
    svc, url, _ = served
    secret = token(svc)

    async def main():
        headers = {"Authorization": f"Bearer {secret}", "Accept": "text/event-stream"}
        async with httpx2.AsyncClient(timeout=60) as http:
            streams = []
            try:
                for _ in range(CAP):  # each session holds its GET stream open: each is in use
                    stream = http.stream("GET", url, headers={**headers, "Mcp-Session-Id": open_session(url, secret)})
                    response = await stream.__aenter__()
                    assert response.status_code == 200
                    streams.append(stream)
                refused = await anyio.to_thread.run_sync(post, url, secret, HELLO)
                assert refused.status_code == 429
                message = refused.json()["error"]["message"]
                assert f"already has {CAP} MCP sessions open" in message and "RAG_MCP__SESSIONS_PER_TOKEN" in message
                with pytest.raises(Exception) as failed:  # noqa: B017 - what the SDK client says
                    async with legacy_session(url, secret):
                        pass
                assert any("RAG_MCP__SESSIONS_PER_TOKEN" in str(leaf) for leaf in leaves(failed.value))
            finally:
                for stream in streams:
                    await stream.__aexit__(None, None, None)

    run(main)
    # The streams closed, their sessions are idle again: a new one opens (the server notices the
    # closed connections soon, not at once).
    deadline = time.monotonic() + 30
    while (reply := post(url, secret, HELLO)).status_code == 429:
        assert time.monotonic() < deadline, "the sessions stayed in use after their streams closed"
        time.sleep(0.05)
    assert reply.status_code == 200


class _Seen(logging.Handler):
    def __init__(self, pattern: str) -> None:
        super().__init__(logging.INFO)
        self.pattern, self.event = pattern, threading.Event()

    def emit(self, record: logging.LogRecord) -> None:
        if self.pattern in record.getMessage():
            self.event.set()


def test_the_idle_timeout_is_a_setting(tmp_path):
    idle = 0.5
    settings = Settings(mcp={"session_idle_seconds": idle})
    assert Settings().mcp.session_idle_seconds == 1800  # the SDK's default stays the default
    server = serve(tmp_path, settings)
    svc, url, _ = next(server)
    try:
        secret = token(svc)
        session = open_session(url, secret)
        started = time.monotonic()
        # The SDK logs when it closes a session for idleness; wait for that without touching the
        # session (each request would start its idle period again).
        seen = _Seen(f"Session {session} idle timeout")
        sdk_log = logging.getLogger("mcp.server.streamable_http_manager")
        level = sdk_log.level
        sdk_log.addHandler(seen)
        sdk_log.setLevel(logging.INFO)
        try:
            assert seen.event.wait(30), "the session was not closed for idleness within 30 s"
        finally:
            sdk_log.removeHandler(seen)
            sdk_log.setLevel(level)
        assert time.monotonic() - started >= idle * 0.9
        assert not answers(url, secret, session)
    finally:
        server.close()


def refused(reply: httpx2.Response, error: str) -> bool:
    return reply.status_code == 403 and reply.json()["error"] == error and "RAG_ALLOWED_" in reply.json()[
        "error_description"]


def test_an_origin_not_allowed_is_refused_before_the_token(served):
    svc, url, port = served
    secret = token(svc)
    evil = {"Origin": "http://evil.example"}
    assert refused(post(url, secret, HELLO, **evil), "invalid_origin")
    assert refused(post(url, None, HELLO, **evil), "invalid_origin")  # no token: still 403, not 401
    assert refused(post(url, "rag_nope", HELLO, **evil), "invalid_origin")
    session = open_session(url, secret)
    assert refused(post(url, secret, CALL_TOOL, session, **evil), "invalid_origin")
    for origin in ("null", f"http://127.0.0.1:{port + 1}", "https://localhost:3000", "http://localhost.evil.example:3000"):
        assert refused(post(url, secret, HELLO, Origin=origin), "invalid_origin"), origin

    # No Origin (no browser), the server's own origin, and an allowed one (http://localhost:*) pass.
    for headers in ({}, {"Origin": f"http://127.0.0.1:{port}"}, {"Origin": "http://localhost:5173"}):
        assert post(url, secret, CALL_TOOL, session, **headers).status_code == 200, headers

    async def through_the_sdk(**headers: str):
        async with http_session(url, secret, **headers) as client:
            return await client.ok("get_root_nodes")

    assert run(through_the_sdk)["roots"] is not None
    assert run(lambda: through_the_sdk(Origin="http://localhost:3000"))["roots"] is not None
    with pytest.raises(Exception):  # noqa: B017 - the SDK's error for a 403 on initialize
        run(lambda: through_the_sdk(Origin="http://evil.example"))


def test_a_host_not_allowed_is_refused_and_compose_s_host_is_allowed(served):
    svc, url, port = served
    secret = token(svc)
    for host in ("evil.example", f"evil.example:{port}", "rag:9000", "rag.evil.example:8000"):
        assert refused(post(url, secret, HELLO, Host=host), "invalid_host"), host
        assert refused(post(url, None, HELLO, Host=host), "invalid_host"), host
    assert compose_allowed_hosts().split(",")[0] == "rag:8000"
    # docker/compose.yaml's name for the service, a loopback name, and addresses pass.
    for host in ("rag:8000", f"localhost:{port}", f"127.0.0.1:{port}", "10.1.2.3:8000"):
        assert post(url, secret, HELLO, Host=host).status_code == 200, host
    # A page served under the compose name may call it (its own origin).
    assert post(url, secret, HELLO, Host="rag:8000", Origin="http://rag:8000").status_code == 200


def test_the_lists_read_from_the_environment_and_bad_entries_stop_the_start(monkeypatch):
    monkeypatch.setenv("RAG_ALLOWED_HOSTS", "[::1],rag:8000, proxy.example ")
    monkeypatch.setenv("RAG_ALLOWED_ORIGINS", '["https://app.example", "http://localhost:*"]')
    settings = Settings()
    assert settings.allowed_hosts == ["[::1]", "rag:8000", "proxy.example"]
    assert settings.allowed_origins == ["https://app.example", "http://localhost:*"]
    for name, value in (("RAG_ALLOWED_HOSTS", "http://rag:8000"), ("RAG_ALLOWED_ORIGINS", "app.example"),
                        ("RAG_ALLOWED_ORIGINS", "ftp://app.example")):
        monkeypatch.setenv(name, value)
        with pytest.raises(ValueError, match="is not"):
            Settings()
        monkeypatch.delenv(name)


def test_serving_beyond_loopback_with_only_loopback_names_is_said_at_start():
    from rag.origins import bind_warning

    for host in ("127.0.0.1", "::1", "localhost", "127.0.0.2"):
        assert bind_warning(host, ["localhost"]) is None, host
    assert "set RAG_ALLOWED_HOSTS" in bind_warning("0.0.0.0", ["localhost"]).replace("Set", "set")
    assert bind_warning("", ["localhost"]) is not None  # every interface
    assert bind_warning("0.0.0.0", ["rag:8000", "localhost"]) is None
