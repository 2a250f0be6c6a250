"""Each HTTP request counted and timed by its route's template, and traced as a span (what is
measured and why: rag/telemetry.py). Between the request id (outside) and CORS (inside): a
preflight is counted too, and the request's span carries its id."""

from __future__ import annotations

import time

from opentelemetry import trace
from opentelemetry.trace import SpanKind, Status, StatusCode
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from rag import telemetry
from rag.logs import current


def route_of(scope: Scope, status: int) -> str:
    """The template of the route that answered (`/v1/documents/{node_id}`), never the path: a
    path may hold an id or a name. `/mcp` for the MCP app; `unmatched` for a 404 no route took."""
    route = scope.get("route")
    template = getattr(route, "path", None)
    if isinstance(template, str):
        return template
    if scope.get("path", "").startswith("/mcp"):
        return "/mcp"
    return "unmatched" if status == 404 else "other"


class Observe:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not telemetry.enabled:
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        method = scope["method"]
        status = 500  # what a request that ends without a response counts as

        async def noting(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        span = telemetry.tracer.start_span(method, kind=SpanKind.SERVER) if telemetry.tracing else None
        try:
            if span is None:
                await self.app(scope, receive, noting)
            else:
                with trace.use_span(span, end_on_exit=False):
                    await self.app(scope, receive, noting)
        finally:
            route = route_of(scope, status)
            if span is not None:
                request = current.get() or {}
                span.update_name(f"{method} {route}")
                span.set_attributes({"http.request.method": method, "http.route": route,
                                     "http.response.status_code": status, "rag.request_id": request.get("id") or ""})
                if status >= 500:
                    span.set_status(Status(StatusCode.ERROR))
                span.end()
            telemetry.HTTP_REQUESTS.labels(method, route, str(status)).inc()
            telemetry.HTTP_SECONDS.labels(method, route).observe(time.perf_counter() - started)
