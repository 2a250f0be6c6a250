"""CORS: which browser pages on other origins may call this server, from `RAG_ALLOWED_ORIGINS`,
the list /mcp's Origin check reads (rag/origins.py; empty by default: no other origin).

- A preflight (`OPTIONS` with `Origin` and `Access-Control-Request-Method`) from a listed origin is
  answered here, 204, for every path (the API, /mcp, the editor's JSON): the methods and request
  headers the server takes, cached by the browser for `MAX_AGE` seconds. From any other origin it
  gets 403 `invalid_origin`, with no CORS header, so the browser stops there.
- Any other request from a listed origin gets `Access-Control-Allow-Origin` naming that origin
  (never `*`), `Vary: Origin`, and the response headers a page may read (`EXPOSED`).
- Credentials are never allowed (no `Access-Control-Allow-Credentials`): a page sends its bearer
  token in `Authorization`, which needs none, and the editor's session cookie never works from
  another origin. A request from an unlisted origin goes on as before without CORS headers: the
  browser hides its answer from the page, and /mcp refuses it outright.
"""

from __future__ import annotations

from collections.abc import Sequence

from starlette.datastructures import Headers, MutableHeaders
from starlette.responses import Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from rag.api.errors import error_response
from rag.origins import INVALID_ORIGIN, HeaderRules

METHODS = "GET, POST, PUT, PATCH, DELETE"
# What a page may send: its token, JSON, a request id, and the MCP transport's own headers.
HEADERS = "Authorization, Content-Type, X-Request-ID, Last-Event-ID, Mcp-Session-Id, Mcp-Protocol-Version"
EXPOSED = "X-Request-ID, Retry-After, Mcp-Session-Id, Location"
MAX_AGE = "600"


class Cors:
    """The CORS middleware over the whole app (see the module's docstring)."""

    def __init__(self, app: ASGIApp, origins: Sequence[str]) -> None:
        self.app = app
        self.rules = HeaderRules([], origins)
        self.enabled = bool(origins)

    def allowed(self, origin: str) -> bool:
        if not self.enabled:
            return False
        # The request's own origin needs no CORS; only listed origins are named (host "" matches no Origin).
        return self.rules.origin_allowed(origin, "")

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = Headers(scope=scope)
        origins = headers.getlist("origin")
        if len(origins) != 1:  # none: not a cross-origin browser request; several: refused where it matters
            await self.app(scope, receive, send)
            return
        origin = origins[0]
        # A preflight is answered here even with no list (every origin is then unlisted: 403), so it
        # never reaches a route and gets its 405.
        if scope["method"] == "OPTIONS" and "access-control-request-method" in headers:
            if not self.allowed(origin):
                await error_response(403, INVALID_ORIGIN[1], INVALID_ORIGIN[0])(scope, receive, send)
                return
            await Response(status_code=204, headers={
                "Access-Control-Allow-Origin": origin, "Access-Control-Allow-Methods": METHODS,
                "Access-Control-Allow-Headers": HEADERS, "Access-Control-Max-Age": MAX_AGE, "Vary": "Origin",
            })(scope, receive, send)
            return
        if not self.enabled or not self.allowed(origin):
            await self.app(scope, receive, send)
            return

        async def with_cors(message: Message) -> None:
            if message["type"] == "http.response.start":
                response = MutableHeaders(scope=message)
                response["Access-Control-Allow-Origin"] = origin
                response["Access-Control-Expose-Headers"] = EXPOSED
                response.add_vary_header("Origin")
            await send(message)

        await self.app(scope, receive, with_cors)
