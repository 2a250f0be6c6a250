"""A request id on every request: the caller's `X-Request-ID` when it sent one well-formed value
(at most 128 characters of letters, digits and `-_.:`; a proxy's or a client's own, so that one id
follows a call across services), else a new one (32 hex digits). It is put on every log line the
request writes (rag/logs.py) and returned on the response as `X-Request-ID`, errors included."""

from __future__ import annotations

import re
import uuid

from starlette.datastructures import Headers, MutableHeaders
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from rag.logs import current

HEADER = "X-Request-ID"
_WELL_FORMED = re.compile(r"[A-Za-z0-9._:-]{1,128}")


def request_id(given: list[str]) -> str:
    """The id of a request whose `X-Request-ID` values are `given`: the one given, when it is one
    and well-formed (anything else could forge log lines or carry a secret into them), else new."""
    if len(given) == 1 and _WELL_FORMED.fullmatch(given[0]):
        return given[0]
    return uuid.uuid4().hex


class RequestId:
    """The middleware: the id in the log's context for the request, and on its response."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        rid = request_id(Headers(scope=scope).getlist(HEADER.lower()))
        token = current.set({"id": rid, "principal": None})

        async def with_id(message: Message) -> None:
            if message["type"] == "http.response.start":
                MutableHeaders(scope=message)[HEADER] = rid
            await send(message)

        try:
            await self.app(scope, receive, with_id)
        finally:
            current.reset(token)
