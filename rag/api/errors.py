"""Errors over HTTP, mapped once: every failure is one JSON shape, OpenAI's error object
(`{"error": {"message", "type", "code", "param"}}`), so a chat app on an OpenAI SDK reads our errors
as its own and every other client has one shape to parse.

A message is safe to show: a RagError's own text, a schema violation's field and rule (never the
value sent), or a generic sentence. Anything unexpected is logged with its traceback (rag.logs
writes it to RAG_HOME/logs) and never reaches the caller: no stack trace, no database message, no
query text.
"""

from __future__ import annotations

import logging
from typing import Any, Iterable

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel
from sqlalchemy.exc import IntegrityError, OperationalError
from sqlalchemy.exc import TimeoutError as PoolTimeout
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import ASGIApp, Receive, Scope, Send

from rag import telemetry
from rag.service.quotas import RateLimited
from rag.errors import (
    STORAGE_FULL,
    AlreadyExists,
    Busy,
    InvalidArgument,
    NotFound,
    PermissionDenied,
    RagError,
    StorageFull,
    StoreLocked,
    TooManyRequests,
    Unauthenticated,
    Unavailable,
    is_storage_full,
)

log = logging.getLogger("rag.api")

UNEXPECTED = "the request could not be completed; the details are in the server's log"

# Most specific first: Unauthenticated is a PermissionDenied, AlreadyExists an InvalidArgument.
_STATUS: tuple[tuple[type[RagError], int], ...] = (
    (Unauthenticated, 401),
    (PermissionDenied, 403),
    (NotFound, 404),
    (AlreadyExists, 409),
    (Busy, 409),
    (InvalidArgument, 400),
    (TooManyRequests, 429),
    (StoreLocked, 503),
    (StorageFull, 507),  # before Unavailable, which it is
    (Unavailable, 503),
)
_TYPES = {
    400: "invalid_request_error", 401: "authentication_error", 403: "permission_error", 404: "not_found_error",
    405: "invalid_request_error", 409: "conflict_error", 413: "invalid_request_error", 422: "invalid_request_error",
    429: "rate_limit_error",
    500: "server_error", 503: "service_unavailable", 507: "server_error",
}
_HTTP_CODES = {404: "not_found", 405: "method_not_allowed", 413: "body_too_large"}


class ErrorInfo(BaseModel):
    message: str
    type: str
    code: str
    param: str | None = None


class ErrorBody(BaseModel):
    """Every error response."""

    error: ErrorInfo


class ModelNotFound(NotFound):
    """An unknown `model` in the OpenAI-compatible endpoints, with OpenAI's own code."""

    code = "model_not_found"
    param = "model"


def status_of(exc: RagError) -> int:
    return next((status for kind, status in _STATUS if isinstance(exc, kind)), 500)


def error_payload(status: int, message: str, code: str, param: str | None = None) -> dict[str, Any]:
    return {"error": {"message": message, "type": _TYPES.get(status, "invalid_request_error"), "code": code,
                      "param": param}}


def rag_error_payload(exc: RagError) -> dict[str, Any]:
    return error_payload(status_of(exc), exc.message, exc.code, getattr(exc, "param", None))


def error_response(status: int, message: str, code: str, param: str | None = None,
                   headers: dict[str, str] | None = None) -> JSONResponse:
    return JSONResponse(error_payload(status, message, code, param), status_code=status, headers=headers)


# Documented on every route, so a client (and schemathesis) knows each error's shape.
ERROR_RESPONSES: dict[int | str, dict[str, Any]] = {
    status: {"model": ErrorBody, "description": description}
    for status, description in (
        (400, "The service refused an argument: out of its bounds, blank or missing, or not allowed here (an archived "
              "version to publish, a document where a folder is needed); the same message as over MCP."),
        (401, "No bearer token, or one that is unknown, revoked or expired."),
        (403, "The token's role, scopes or access do not allow this."),
        (404, "Missing, or outside the token's access: the two read the same (as does an id no id can be)."),
        (409, "A name already taken in the folder, or a concurrent change."),
        (413, "The request body is larger than the limit."),
        (422, "The request is not of this schema's shape: a body that is not a JSON object, an unknown field or query "
              "parameter, a value of the wrong JSON type. Bounds are the service's to check (400)."),
        (503, "A backend (store, vector lane, model) is unavailable."),
        (507, "The store cannot write: its disk is full (reads still work)."),
    )
}


def _field(loc: Iterable[Any]) -> str:
    parts = [str(p) for p in loc]
    if parts and parts[0] in ("body", "query", "path", "header"):
        parts = parts[1:]
    return ".".join(parts)


# A value of the wrong JSON type, by pydantic's error type: what it must be instead.
_MUST_BE = {
    "string_type": "a string", "string_unicode": "valid Unicode text (it holds a lone surrogate)",
    "int_type": "an integer", "int_parsing": "an integer", "int_from_float": "an integer",
    "float_type": "a number", "float_parsing": "a number", "bool_type": "a boolean", "bool_parsing": "a boolean",
    "dict_type": "a JSON object", "model_type": "a JSON object", "model_attributes_type": "a JSON object",
    "list_type": "an array",
}


def _validation_message(error: dict[str, Any]) -> str:
    """One schema violation in words: the field and the rule, never the value that broke it."""
    field = _field(error.get("loc", ()))
    kind = error.get("type", "")
    if kind in _MUST_BE:
        return f"`{field}` must be {_MUST_BE[kind]}" if field else f"the body must be {_MUST_BE[kind]}"
    if kind == "extra_forbidden":
        return f"unknown field `{field}`"
    if kind == "missing":
        return f"`{field}` is required" if field else "a JSON body is required"
    if kind == "json_invalid":
        return "the body is not valid JSON"
    message = str(error.get("msg", "is invalid"))
    return f"`{field}`: {message}" if field else message


async def _on_rag_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RagError)
    status = status_of(exc)
    if status >= 500:
        log.warning("%s %s: %s", request.method, request.url.path, exc.message)
    if isinstance(exc, RateLimited) and not getattr(exc, "held", False):  # its next calls here: refused at no cost
        from rag.api.refusals import refusals

        refusals(request).note(request, exc)
    headers = {"WWW-Authenticate": "Bearer"} if status == 401 else getattr(exc, "headers", None)  # Retry-After
    return JSONResponse(rag_error_payload(exc), status_code=status, headers=headers)


async def _on_validation_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)
    errors = list(exc.errors())
    messages = list(dict.fromkeys(_validation_message(e) for e in errors))
    message = "; ".join(messages[:5]) + (f"; and {len(messages) - 5} more" if len(messages) > 5 else "")
    first = errors[0] if errors else {}
    param = None if first.get("type") == "json_invalid" else (_field(first.get("loc", ())) or None)
    return error_response(422, message or "the request is invalid", "invalid_argument", param)


def _unreadable_body(exc: StarletteHTTPException) -> str | None:
    """FastAPI answers 400 for a body json.loads could not even read (its bytes are not UTF-8, or it
    nests deeper than Python's recursion limit); docs/api.md says 422, as for any body that is not
    valid JSON. What was wrong, in words; None for any other HTTP error."""
    cause = exc.__cause__
    if exc.status_code != 400 or not isinstance(cause, (UnicodeError, RecursionError, ValueError)):
        return None
    if isinstance(cause, UnicodeError):
        return "the body is not valid JSON: it is not UTF-8 text"
    if isinstance(cause, RecursionError):
        return "the body is not valid JSON: it is nested too deeply"
    return "the body is not valid JSON"


async def _on_http_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, StarletteHTTPException)
    unreadable = _unreadable_body(exc)
    if unreadable is not None:
        return error_response(422, unreadable, "invalid_argument")
    status = exc.status_code
    message = exc.detail if isinstance(exc.detail, str) else "the request is invalid"
    if status == 404:
        message = "no such endpoint"
    return error_response(status, message, _HTTP_CODES.get(status, "invalid_request"), headers=exc.headers)


async def _on_store_error(request: Request, exc: Exception) -> JSONResponse:
    """The store failed under the call: the caller learns what to do, the log gets the rest."""
    log.error("%s %s: store error", request.method, request.url.path, exc_info=exc)
    telemetry.count(telemetry.ERRORS, "store")
    if is_storage_full(exc):
        return error_response(507, STORAGE_FULL, StorageFull.code)
    if isinstance(exc, IntegrityError):
        return error_response(409, "the change conflicts with another one made at the same time; try again",
                              "conflict")
    return error_response(503, "the store is busy or unreachable; try again", "unavailable")


def install_error_handlers(app: FastAPI) -> None:
    app.add_exception_handler(RagError, _on_rag_error)
    app.add_exception_handler(RequestValidationError, _on_validation_error)
    app.add_exception_handler(StarletteHTTPException, _on_http_error)
    for kind in (OperationalError, IntegrityError, PoolTimeout):
        app.add_exception_handler(kind, _on_store_error)


class CatchAll:
    """The last net: an exception nothing else handled becomes a generic 500 and a traceback in the
    log. Starlette's own ServerErrorMiddleware would answer too, but its log goes to uvicorn's
    stderr and it re-raises; this one writes to rag's log file and ends there."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = False

        async def tracking_send(message: Any) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        try:
            await self.app(scope, receive, tracking_send)
        except Exception as exc:  # noqa: BLE001 - the whole point: nothing escapes as a stack trace
            log.exception("unexpected error in %s %s", scope.get("method"), scope.get("path"))
            if not started and is_storage_full(exc):  # a write that no handler above saw (tantivy, Chroma)
                await error_response(507, STORAGE_FULL, StorageFull.code)(scope, receive, send)
            elif not started:
                await error_response(500, UNEXPECTED, "error")(scope, receive, send)
