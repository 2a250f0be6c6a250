"""At most N open MCP sessions per token, on top of the SDK's session manager (issue 27).

One token once opened 6,000 sessions in 42.5 s (about 44 KB each), kept until 30 minutes idle.
Here a token that opens one more than `per_token` has its session idle longest closed first
(its id then answers the SDK's 404 "Session not found"); when each of its sessions has a request
in flight (an open GET stream counts, as for the SDK's idle timeout), the new one is refused
with 429 and a JSON-RPC error the SDK client reports.

The choice is made where the SDK admits a session (`_admit_session`, under its creation lock),
so concurrent openings by one token never pass the cap; the rest is the SDK's own code. "Idle"
is what the SDK's idle timeout reads: a transport's `idle_scope` deadline is infinite while a
request is in flight and `last request's end + timeout` after, so the smallest deadline is the
session idle longest.
"""

from __future__ import annotations

import logging
import math
from typing import Any

from mcp.server.auth.middleware.bearer_auth import AuthorizationContext
from mcp.server.streamable_http import StreamableHTTPServerTransport
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp_types import INVALID_REQUEST, ErrorData, JSONRPCError
from starlette.responses import Response
from starlette.types import Receive, Scope, Send

log = logging.getLogger("rag.mcp")


class AllSessionsInUse(Exception):
    """The token holds its cap of sessions and each has a request in flight."""


class TokenCappedSessionManager(StreamableHTTPSessionManager):
    """The SDK's session manager, with at most `per_token` sessions open per token."""

    def __init__(self, app: Any, *, per_token: int, **options: Any) -> None:
        super().__init__(app, **options)
        self.per_token = per_token

    def _admit_session(self, requestor: AuthorizationContext | None) -> StreamableHTTPServerTransport | None:
        if requestor is not None:
            self._make_room(requestor)
        return super()._admit_session(requestor)

    def _make_room(self, requestor: AuthorizationContext) -> None:
        """Close the requestor's sessions idle longest until one more fits; AllSessionsInUse if none is idle."""
        owned = [sid for sid, owner in self._session_owners.items() if owner == requestor]
        excess = len(owned) - self.per_token + 1
        if excess <= 0:
            return
        idle = sorted((since, sid) for sid in owned if (since := self._idle_deadline(sid)) is not None)
        if len(idle) < excess:
            raise AllSessionsInUse
        for _, sid in idle[:excess]:
            self._close(sid)
        log.info("closed %d idle MCP session(s) of token %s: it had %d open (RAG_MCP__SESSIONS_PER_TOKEN=%d)",
                 excess, requestor["client_id"] or "-", len(owned), self.per_token)

    def _idle_deadline(self, session_id: str) -> float | None:
        """When the session's idle timeout fires (earliest = idle longest); None while it is in use."""
        transport = self._server_instances.get(session_id)
        scope = transport.idle_scope if transport is not None else None
        if scope is None or math.isinf(scope.deadline):  # not started yet, or a request in flight
            return None
        return scope.deadline

    def _close(self, session_id: str) -> None:
        """Forget the session now (its id answers 404 from here on) and end it as a DELETE would."""
        transport = self._server_instances.pop(session_id)
        self._session_owners.pop(session_id, None)
        assert self._task_group is not None
        self._task_group.start_soon(transport.terminate)  # its server task then ends and cleans up

    async def _handle_stateful_request(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await super()._handle_stateful_request(scope, receive, send)
        except AllSessionsInUse:
            log.warning("refused a new MCP session: the token has %d open, each with a request in flight",
                        self.per_token)
            await _jsonrpc_error(429, (
                f"this token already has {self.per_token} MCP sessions open, each with a request in flight "
                "(RAG_MCP__SESSIONS_PER_TOKEN): end one (DELETE with its Mcp-Session-Id) before opening another"
            ))(scope, receive, send)


def _jsonrpc_error(status: int, message: str) -> Response:
    """The SDK's error shape for a refused request: a JSON-RPC error without an id."""
    body = JSONRPCError(jsonrpc="2.0", id=None, error=ErrorData(code=INVALID_REQUEST, message=message))
    return Response(body.model_dump_json(by_alias=True, exclude_unset=True), status_code=status,
                    media_type="application/json")
