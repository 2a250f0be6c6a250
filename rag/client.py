"""The local CLI's client of a running `rag serve`: when the server holds the embedded store, the CLI
has it run its commands (rag/commands.py) over HTTP instead of being refused.

It authenticates with the secret the server wrote in RAG_HOME (mode 0600, rag/store/lock.py); the
answer is a stream of JSON lines, the operation's events, or one `{"error", "exit"}` line. Only the
standard library: a command that goes to the server loads nothing else.
"""

from __future__ import annotations

import http.client
import json
import time
from typing import Any, Callable, Iterator
from urllib.parse import urlsplit


START_WAIT = 120  # seconds a server that holds the store may take to listen (it loads its models first)


class ServerError(Exception):
    """The server refused or failed the command: its message and the CLI's exit code."""

    def __init__(self, message: str, exit_code: int) -> None:
        super().__init__(message)
        self.message = message
        self.exit_code = exit_code


CUT = ("the server stopped before the command ended; run it again (what it had done is kept, and a command "
       "such as ingest goes on with the rest)")

def call(url: str, secret: str, operation: str, arguments: dict[str, Any], *,
         starting: Callable[[], bool] = lambda: False, timeout: float = 3600) -> Iterator[dict]:
    """The operation's events, as the server streams them. `starting`: whether the server still
    holds the store, asked while it refuses connections (it listens once its start-up is done)."""
    response = _post(url, secret, operation, arguments, starting, timeout)
    if response.status != 200:
        raise ServerError(_refusal(response), 3 if response.status in (401, 503) else 1)
    try:
        for line in _lines(response):
            if not line.strip():
                continue
            event = json.loads(line)
            # The failure event is {"error", "exit"} (rag/api/routes/local.py); a command's own
            # result may hold an "error" field too (a sync's report, often None), which is no failure.
            if "exit" in event and "error" in event:
                raise ServerError(event["error"], int(event["exit"]))
            if event == {"end": True}:
                return
            yield event
        raise ServerError(CUT, 3)  # neither its end nor an error: the server stopped in the middle
    finally:
        response.close()


def _lines(response: http.client.HTTPResponse) -> Iterator[bytes]:
    try:
        yield from response
    except (http.client.HTTPException, OSError):
        raise ServerError(CUT, 3) from None


def _post(url: str, secret: str, operation: str, arguments: dict[str, Any], starting: Callable[[], bool],
          timeout: float) -> http.client.HTTPResponse:
    parts = urlsplit(url)
    body = json.dumps(arguments).encode("utf-8")
    headers = {"Authorization": f"Bearer {secret}", "Content-Type": "application/json"}
    deadline = time.monotonic() + START_WAIT
    while True:
        connection = http.client.HTTPConnection(parts.hostname or "127.0.0.1", parts.port or 80, timeout=timeout)
        try:
            connection.request("POST", f"/local/{operation}", body=body, headers=headers)
            return connection.getresponse()
        except ConnectionRefusedError as exc:
            connection.close()
            if time.monotonic() > deadline or not starting():
                raise ServerError(f"the server that holds the store ({url}) did not answer: {exc}", 3) from None
            time.sleep(0.2)
        except OSError as exc:
            connection.close()
            raise ServerError(f"the server that holds the store ({url}) did not answer: {exc}", 3) from None


def _refusal(response: http.client.HTTPResponse) -> str:
    try:
        message = json.loads(response.read())["error"]["message"]
    except (ValueError, KeyError, TypeError):
        message = f"HTTP {response.status}"
    return f"the server that holds the store refused the command: {message}"


def token_refusal(url: str, token: str) -> str | None:
    """None when the server knows the bearer token; else its message (GET /v1/models answers 401)."""
    parts = urlsplit(url)
    connection = http.client.HTTPConnection(parts.hostname or "127.0.0.1", parts.port or 80, timeout=60)
    try:
        connection.request("GET", "/v1/models", headers={"Authorization": f"Bearer {token}"})
        response = connection.getresponse()
        if response.status == 200:
            return None
        try:
            return json.loads(response.read())["error"]["message"]
        except (ValueError, KeyError, TypeError):
            return f"HTTP {response.status}"
    except OSError as exc:
        raise ServerError(f"the server that holds the store ({url}) did not answer: {exc}", 3) from None
    finally:
        connection.close()


def bridge_mcp(url: str, token: str) -> None:
    """`rag mcp` beside a running server: relay the agent's stdio messages to the server's MCP
    endpoint (streamable HTTP, `url`/mcp, with the agent's token) and its answers back, until the
    agent closes standard input. The tools are the server's, so they act exactly as over stdio."""
    import anyio
    from mcp.client.streamable_http import streamable_http_client
    from mcp.server.stdio import stdio_server
    from mcp.shared._httpx_utils import create_mcp_http_client

    async def relay() -> None:
        headers = {"Authorization": f"Bearer {token}"}
        async with (
            create_mcp_http_client(headers=headers) as http,
            streamable_http_client(f"{url}/mcp", http_client=http) as (remote_in, remote_out),
            stdio_server() as (local_in, local_out),
            anyio.create_task_group() as group,
        ):
            async def up() -> None:
                async for message in local_in:
                    if not isinstance(message, Exception):  # a line that is not JSON-RPC: the SDK logs it
                        await remote_out.send(message)
                group.cancel_scope.cancel()  # the agent is gone: close both ends, so each transport ends
                await local_out.aclose()
                await remote_out.aclose()

            async def down() -> None:
                async for message in remote_in:
                    if not isinstance(message, Exception):
                        await local_out.send(message)

            group.start_soon(up)
            group.start_soon(down)

    anyio.run(relay)
