"""The MCP tools over streamable HTTP, behind the HTTP API's bearer tokens.

    app, lifespan = mcp_http(svc)
    api.mount("/mcp", app)            # serves /mcp/ (Starlette redirects /mcp to it), or:
    api.add_route("/mcp", app)        # serves /mcp itself; the app answers on any path it is given
    ... and in the host's lifespan:  async with lifespan(): yield

A mounted app's own lifespan never runs, so the host enters the session manager's. Every HTTP
request is authenticated with `svc.authenticate` (the same tokens, the same "invalid or expired
token" for unknown, revoked and expired ones, as 401); the principal travels in the ASGI scope to
the tool call, which acts with it. Before that, the Host and Origin headers are checked (rag/origins.py:
`RAG_ALLOWED_HOSTS`, `RAG_ALLOWED_ORIGINS`), so a DNS-rebinding or cross-site page gets 403 before any
token is looked up. On the embedded store each token holds at most `RAG_MCP__SESSIONS_PER_TOKEN`
sessions (rag/mcp/sessions.py), each closed after `RAG_MCP__SESSION_IDLE_SECONDS` without a request.
"""

from __future__ import annotations

import json
import logging
from contextlib import AbstractAsyncContextManager
from typing import TYPE_CHECKING, Callable

import anyio
from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from mcp.server.auth.provider import AccessToken
from mcp.server.streamable_http_manager import StreamableHTTPASGIApp
from mcp.server.transport_security import TransportSecuritySettings
from starlette.datastructures import Headers
from starlette.types import ASGIApp, Receive, Scope, Send

from rag.errors import Unauthenticated
from rag.mcp.server import PRINCIPAL_KEY, build_server
from rag.mcp.sessions import TokenCappedSessionManager
from rag.logs import set_principal
from rag.origins import HeaderRules
from rag.service.query.kb_search import UNREACHABLE
from rag.service.identity.tokens import ONE_AUTHORIZATION

if TYPE_CHECKING:
    from rag.service import KnowledgeService

log = logging.getLogger("rag.mcp")


def bearer_auth(app: ASGIApp, svc: KnowledgeService) -> ASGIApp:
    """ASGI middleware: an allowed Host and Origin or 403, then a valid bearer token or 401, before
    anything of MCP runs."""
    rules = HeaderRules(svc.settings.allowed_hosts, svc.settings.allowed_origins)

    async def authenticated(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            headers = Headers(scope=scope)
            refusal = rules.refusal(headers.getlist("host"), headers.getlist("origin"))
            if refusal is not None:
                log.warning("refused an MCP request: %s (Host %.100r, Origin %.100r)", refusal[0],
                            headers.get("host"), headers.get("origin"))
                await _refuse(send, 403, *refusal)
                return
            authenticated_scope = await _with_principal(scope, send, svc)
            if authenticated_scope is None:
                return  # refused, and answered
            scope = authenticated_scope
        await app(scope, receive, send)

    return authenticated


async def _with_principal(scope: Scope, send: Send, svc: KnowledgeService) -> Scope | None:
    """The scope with the caller's principal in it; None when the request was refused (and answered)."""
    headers = Headers(scope=scope)
    if len(headers.getlist("authorization")) > 1:  # which one would count? neither: say so
        await _refuse(send, 401, "invalid_token", ONE_AUTHORIZATION)
        return None
    scheme, _, secret = headers.get("authorization", "").partition(" ")
    try:
        # A database lookup: off the event loop. A missing or non-Bearer header is refused by
        # authenticate itself, with the same message as a bad token.
        bearer = secret.strip() if scheme.lower() == "bearer" else None
        principal = await anyio.to_thread.run_sync(svc.authenticate, bearer)
    except Unauthenticated as exc:
        await _refuse(send, 401, "invalid_token", exc.message)
        return None
    except Exception:  # noqa: BLE001 - a store that is down: said generically, logged in full
        log.exception("authenticating an MCP request failed")
        await _refuse(send, 503, "temporarily_unavailable", UNREACHABLE)
        return None
    set_principal(principal.principal_id)  # on the request's log lines from now on
    # `user` binds each MCP session to the token that opened it: the SDK answers a request for a
    # session with another token's credential as if the session did not exist.
    user = AuthenticatedUser(AccessToken(
        token=principal.token_id or "", client_id=principal.token_id or "", scopes=sorted(principal.scopes),
        subject=principal.principal_id,
    ))
    return {**scope, PRINCIPAL_KEY: principal, "user": user}


async def _refuse(send: Send, status: int, error: str, message: str) -> None:
    body = json.dumps({"error": error, "error_description": message}).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    if status == 401:
        headers.append((b"www-authenticate", f'Bearer error="{error}", error_description="{message}"'.encode()))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


def mcp_http(svc: KnowledgeService) -> tuple[ASGIApp, Callable[[], AbstractAsyncContextManager[None]]]:
    """The streamable-HTTP MCP app (bearer tokens required) and the context manager the host
    enters in its lifespan to run the MCP sessions."""
    server = build_server(svc)
    # Builds the session manager; its Starlette wrapper (one fixed route, a lifespan that would not
    # run when mounted) is not used: the session manager's own ASGI app answers on any path.
    # On the scale-out store several worker processes (and replicas) answer /mcp, and an MCP session
    # would live in the one process that opened it: there the transport is stateless (each request
    # stands alone), so a session client's requests may reach any worker. Our tools push nothing
    # between requests, so nothing is lost. Host and Origin are checked by bearer_auth, before the
    # token (the SDK's own check would come after it, in plain text, and answer 421 for a Host).
    security = TransportSecuritySettings(enable_dns_rebinding_protection=False)
    server.streamable_http_app(transport_security=security, stateless_http=not svc.settings.embedded)
    manager = server.session_manager
    if svc.settings.embedded:  # sessions: at most so many per token, each closed when idle so long
        manager = TokenCappedSessionManager(
            manager.app, per_token=svc.settings.mcp.sessions_per_token, security_settings=security,
            session_idle_timeout=svc.settings.mcp.session_idle_seconds,
        )
    return bearer_auth(StreamableHTTPASGIApp(manager), svc), manager.run
