"""Helpers of the MCP tests: a home with a few real handbook pages, tool calls through the SDK's
in-memory client or over streamable HTTP, and a real HTTP server on a free port."""

from __future__ import annotations

import shutil
import socket
import threading
import time
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

import anyio
import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp_types import CallToolResult

from rag.mcp import build_server
from rag.service import KnowledgeService, Principal
from rag.settings import Settings

from .paths import HANDBOOK, SMALL_SET

LEAVE_QUESTION = "How much annual leave do I earn each pay period?"
TOOL_NAMES = {
    "search_knowledge_base", "search_knowledge", "ask_knowledge", "search_documents", "get_document",
    "get_document_versions", "get_document_version", "list_children", "get_folder_tree", "search_nodes_by_name",
    "get_root_nodes", "get_current_node", "create_document", "update_document", "publish_document_version",
    "rename_document", "delete_document", "create_folder", "rename_folder", "delete_folder", "move_node",
    "set_summary", "set_metadata",
}


def copy_pages(root: Path) -> Path:
    for rel in SMALL_SET:
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(HANDBOOK / rel, root / rel)
    return root


@dataclass
class World:
    """A service on the small handbook set, and tokens of several kinds."""

    svc: KnowledgeService
    admin: Principal  # the local administrator
    person: str  # an admin person, access all
    agent: str  # an editor agent with knowledge:write, access all
    blind: str  # an agent token with knowledge-base access none
    viewer: str  # a person who may only read


def handbook_world(root: Path, settings: Settings) -> Iterator[World]:
    """The body of a module-scoped fixture: `settings` with its home under `root`."""
    with KnowledgeService(settings.model_copy(update={"home": root / "home"})) as svc:
        svc.ensure_workspace("default")
        admin = Principal.local_admin("default")
        assert not svc.ingest_directory(admin, copy_pages(root / "pages")).failed
        yield World(svc, admin, token(svc, "admin", agent=False), token(svc, access="all"), token(svc),
                    token(svc, "viewer", write=False, agent=False))


def token(svc: KnowledgeService, role: str = "editor", *, write: bool = True, agent: bool = True,
          access: str | None = None, folders: tuple[str, ...] = (), workspace: str = "default") -> str:
    secret, _ = svc.create_token(workspace, role, ["knowledge:write"] if write else [], access, folders, agent)
    return secret


def text(result: CallToolResult) -> str:
    return result.content[0].text  # type: ignore[union-attr]


class Session:
    """Tool calls through one MCP client (in-process or HTTP), run to completion one by one."""

    def __init__(self, client: Client) -> None:
        self.client = client

    async def call(self, name: str, args: dict[str, Any] | None = None, **meta: Any) -> CallToolResult:
        return await self.client.call_tool(name, args or {}, meta=meta or None)

    async def ok(self, name: str, args: dict[str, Any] | None = None, **meta: Any) -> dict[str, Any]:
        """The structured content of a call that must succeed (the client has checked it against
        the tool's output schema)."""
        result = await self.call(name, args, **meta)
        assert not result.is_error, text(result)
        assert result.structured_content is not None
        return result.structured_content

    async def error(self, name: str, args: dict[str, Any] | None = None, **meta: Any) -> str:
        result = await self.call(name, args, **meta)
        assert result.is_error, result.structured_content
        return text(result)


@asynccontextmanager
async def session(svc: KnowledgeService, secret: str | None):
    """A client connected in-process (the SDK's in-memory transport) to a server acting with `secret`."""
    async with Client(build_server(svc, secret), mode="legacy") as client:  # JSON-RPC over memory streams
        yield Session(client)


@asynccontextmanager
async def http_session(url: str, secret: str | None, **headers: str):
    if secret is not None:
        headers["Authorization"] = f"Bearer {secret}"
    async with httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(120, read=300)) as http:
        async with Client(streamable_http_client(url, http_client=http)) as client:
            yield Session(client)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextmanager
def running(app: Any) -> Iterator[str]:
    """Serve an ASGI app with uvicorn on a free local port (a real socket) until the block ends."""
    import uvicorn

    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", lifespan="on"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 60
    while not server.started:
        assert thread.is_alive() and time.monotonic() < deadline, "the server did not start"
        time.sleep(0.05)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(30)


def run(coroutine_function, *args: Any) -> Any:
    return anyio.run(coroutine_function, *args)
