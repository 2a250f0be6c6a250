"""`rag mcp` as agents start it: a child process speaking MCP on stdin/stdout, driven by outside
clients (the MCP Inspector CLI, and the Python SDK's stdio client). Nothing but the protocol may
reach standard output."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters

from rag.service import KnowledgeService
from rag.settings import Settings

from ..support.mcp_support import TOOL_NAMES, run, token

RAG = str(Path(sys.executable).parent / "rag")  # the console script, as an agent's configuration names it
# A client starts `rag mcp` with the environment it is given: PYTHONPATH, when set, goes with it so
# that the child runs the code under test (a checkout's) rather than the installed package.
PASSED_ON = {name: os.environ[name] for name in ("PYTHONPATH",) if name in os.environ}


@pytest.fixture(scope="module")
def home(tmp_path_factory) -> tuple[Path, str]:
    """A home with an empty default knowledge base and an agent's token. The service is closed
    again: the `rag mcp` child holds the store while it serves."""
    path = tmp_path_factory.mktemp("mcp_stdio") / "home"
    with KnowledgeService(Settings(home=path)) as svc:
        svc.ensure_workspace("default")
        return path, token(svc, access="all")


INSPECTOR = "@modelcontextprotocol/inspector@2.12.0"  # as README.md and docs/mcp.md pin it
NODE_NEEDED = (22, 19)  # the Inspector's engines; scripts/install-node.sh puts one in the cache when older
CACHED_NODE = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "rag" / "node" / "node_modules" / ".bin"


def _node_version(node: str) -> tuple[int, ...]:
    done = subprocess.run([node, "-p", "process.versions.node"], capture_output=True, text=True, timeout=60)
    return tuple(int(part) for part in done.stdout.strip().split(".")) if done.returncode == 0 else ()


def _missing(why: str) -> None:
    if os.environ.get("CI"):
        pytest.fail(f"{why}: CI must run the MCP Inspector (scripts/install.sh --test installs it)")
    pytest.skip(f"{why} (the MCP Inspector CLI runs on Node; scripts/install-node.sh)")


def inspector_env() -> dict[str, str]:
    """The environment npx runs the Inspector in: PATH with a Node >= 22.19 first, the PATH's own
    when new enough, else the one scripts/install-node.sh installed."""
    if shutil.which("npx") is None:
        _missing("npx is missing")
    node = shutil.which("node")
    if node is None or _node_version(node) < NODE_NEEDED:
        if _node_version(str(CACHED_NODE / "node")) < NODE_NEEDED:
            _missing(f"no Node >= 22.19 on PATH or in {CACHED_NODE}")
        return {**os.environ, "PATH": f"{CACHED_NODE}{os.pathsep}{os.environ.get('PATH', '')}"}
    return dict(os.environ)


def inspector(home: tuple[Path, str], *args: str, code: int = 0) -> dict:
    """The Inspector CLI's JSON answer, its exit code `code` (5: a tool answered isError)."""
    path, secret = home
    command = ["npx", "-y", INSPECTOR, "--cli", "-e", f"RAG_HOME={path}",
               "-e", f"RAG_TOKEN={secret}", *(a for n, v in PASSED_ON.items() for a in ("-e", f"{n}={v}")), RAG, "mcp",
               *args]
    env = inspector_env()
    result = subprocess.run(command, capture_output=True, text=True, timeout=600, env=env)
    assert result.returncode == code, result.stderr[-2000:]
    return json.loads(result.stdout)


def test_the_inspector_lists_the_tools_and_calls_one(home):
    listed = inspector(home, "--method", "tools/list")["tools"]
    assert {t["name"] for t in listed} == TOOL_NAMES
    search = next(t for t in listed if t["name"] == "search_knowledge")
    assert search["annotations"]["readOnlyHint"] is True and search["annotations"]["openWorldHint"] is False
    assert search["outputSchema"]["type"] == "object" and search["inputSchema"]["required"] == ["query"]
    called = inspector(home, "--method", "tools/call", "--tool-name", "search_knowledge_base", code=5)
    assert called == {"content": [{"type": "text", "text": "query is required"}], "isError": True}
    asked = inspector(home, "--method", "tools/call", "--tool-name", "search_knowledge", "--tool-arg", "query=annual leave")
    assert asked["isError"] is False and asked["structuredContent"]["results"] == []  # docs/mcp.md's call; no documents


def test_the_sdk_stdio_client_drives_rag_mcp(home, tmp_path):
    path, secret = home
    mounted = tmp_path / "token"  # the token as a mounted secret: RAG_TOKEN_FILE
    mounted.write_text(secret + "\n")
    server = StdioServerParameters(command=RAG, args=["mcp"], env={
        "RAG_HOME": str(path), "RAG_TOKEN_FILE": str(mounted), "RAG_EMBED_CACHE": os.environ["RAG_EMBED_CACHE"],
        **PASSED_ON})

    async def main():
        async with Client(server) as client:
            roots = await client.call_tool("get_root_nodes", {})
            made = await client.call_tool("create_document", {"name": "Note", "content": "# Note\n\nHello.\n"})
            searched = await client.call_tool("search_knowledge", {"query": "hello"})  # loads the model
            return roots, made, searched

    roots, made, searched = run(main)
    assert [r["name"] for r in roots.structured_content["roots"]] == ["default"]
    assert made.structured_content["status"] == "draft"
    assert searched.content[0].text == "No results found."  # the only document is a draft


def test_a_bad_token_fails_before_serving(home):
    path, _ = home
    env = {**os.environ, "RAG_HOME": str(path)}
    result = subprocess.run([RAG, "mcp", "--token", "rag_nope"], capture_output=True, text=True, env=env,
                            stdin=subprocess.DEVNULL, timeout=300)
    assert result.returncode == 1 and result.stdout == ""
    assert result.stderr.endswith("error: invalid or expired token\n")


def test_the_tools_are_listed_before_the_engines_open_and_a_call_reports_their_failure(home):
    """`rag mcp` answers initialize and tools/list once the token is checked; Chroma and the model
    open in the background. Here the vector store cannot open (a Chroma server nobody runs): the
    tools are listed all the same, and a call that needs it says so as a tool error."""
    from ..support.processes import free_port

    path, secret = home
    server = StdioServerParameters(command=RAG, args=["mcp"], env={
        "RAG_HOME": str(path), "RAG_TOKEN": secret, "RAG_EMBED_CACHE": os.environ["RAG_EMBED_CACHE"],
        "RAG_CHROMA_URL": f"http://127.0.0.1:{free_port()}", **PASSED_ON})

    async def main():
        async with Client(server) as client:
            listed = await client.list_tools()
            searched = await client.call_tool("search_knowledge", {"query": "hello"})
            return listed, searched

    listed, searched = run(main)
    assert {t.name for t in listed.tools} == TOOL_NAMES
    assert searched.is_error and "unreachable" in searched.content[0].text
