"""Limits on what a request may carry, checked before any endpoint runs."""

from __future__ import annotations

from typing import Any

from fastapi import Request
from fastapi.exceptions import RequestValidationError
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from rag.api.errors import error_response

# A document body may hold 2,000,000 characters (rag.service.checks.MAX_CONTENT_CHARS); in JSON
# that is 2 MB of plain text and a few times more when escaped. 8 MiB leaves room for that and
# keeps a runaway client from filling memory.
MAX_BODY_BYTES = 8 * 1024 * 1024
TOO_LARGE = f"the request body must be at most {MAX_BODY_BYTES} bytes"


class _Refused(Exception):
    """Stops the app once the 413 is sent."""


class BodyLimit:
    """Refuse bodies over the limit with 413: at once when Content-Length says so, else as soon as a
    chunked body grows past it, before the app has buffered it all. The 413 is sent from here:
    FastAPI would turn an exception raised while it reads the body into a generic 400.
    `paths`: another limit, with its own message and code, for an exact path (the file upload's)."""

    def __init__(self, app: ASGIApp, limit: int = MAX_BODY_BYTES,
                 paths: dict[str, tuple[int, str, str]] | None = None) -> None:
        self.app = app
        self.limit = limit
        self.paths = paths or {}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        limit, too_large, code = self.paths.get(scope.get("path", ""), (self.limit, TOO_LARGE, "body_too_large"))
        refuse = error_response(413, too_large, code)
        declared = _content_length(scope)
        if declared is not None and declared > limit:
            await refuse(scope, receive, send)
            return
        seen, refused = 0, False

        async def counting_receive() -> Message:
            nonlocal seen, refused
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > limit and not refused:
                    refused = True
                    await refuse(scope, receive, send)
                    raise _Refused
            return message

        async def guarded_send(message: Message) -> None:
            if not refused:  # whatever the app answers to the interruption, the 413 went first
                await send(message)

        try:
            await self.app(scope, counting_receive, guarded_send)
        except _Refused:
            pass


def _content_length(scope: Scope) -> int | None:
    headers: Any = scope.get("headers") or []
    for name, value in headers:
        if name == b"content-length":
            try:
                return int(value)
            except ValueError:
                return None
    return None


def _known_query(route: Any) -> frozenset[str]:
    known = _KNOWN.get(id(route))
    if known is None:
        names: set[str] = set()
        todo = [route.dependant]
        while todo:  # the route's own parameters and those of its dependencies
            dependant = todo.pop()
            names.update(field.alias for field in dependant.query_params)
            todo.extend(dependant.dependencies)
        known = _KNOWN[id(route)] = frozenset(names)
    return known


_KNOWN: dict[int, frozenset[str]] = {}


async def known_query_only(request: Request) -> None:
    """Unknown query parameters are refused like unknown body fields (422): `?limt=5` must not pass
    for `?limit=5` with the default silently applied."""
    route = request.scope.get("route")
    if route is None or not hasattr(route, "dependant"):
        return
    unknown = sorted(set(request.query_params) - _known_query(route))
    if unknown:
        raise RequestValidationError(
            [{"type": "extra_forbidden", "loc": ("query", name), "msg": "Extra inputs are not permitted"} for name in unknown]
        )
