"""POST /local/<operation>: the local CLI's commands (rag/commands.py), run by the server that holds
the embedded store, so `rag search`, `rag ask`, `rag token …` and `rag ingest` work beside it.

Only the secret that `rag serve` wrote in RAG_HOME (mode 0600: the owner of RAG_HOME alone can read
it) opens this door; an API token never does, and without the secret nothing is run. The answer is
JSON lines: the operation's events then `{"end": true}`, or a last `{"error", "exit"}` line with
the message and exit code the CLI would have given (a stream that ends with neither was cut: the
server stopped in the middle, and the CLI says so). Not in the OpenAPI schema: it is the CLI's, not a public API.
"""

from __future__ import annotations

import hmac
import inspect
import json
import logging
from typing import Annotated, Any, Iterator

from fastapi import APIRouter, Body, Depends, Request
from fastapi.responses import StreamingResponse
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from rag.api.auth import Service
from rag.commands import IN_PROCESS, OPERATIONS, exit_code
from rag.errors import STORAGE_FULL, InvalidArgument, NotFound, RagError, Unauthenticated, is_storage_full
from rag.service.identity.tokens import INVALID_TOKEN

log = logging.getLogger("rag.api")

router = APIRouter(prefix="/local", include_in_schema=False)
_bearer = HTTPBearer(auto_error=False)


def local_caller(
    request: Request, credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)]
) -> None:
    expected = getattr(request.app.state, "local_secret", None)
    given = credentials.credentials if credentials is not None else ""
    if not expected or not hmac.compare_digest(given.encode("utf-8"), expected.encode("utf-8")):
        raise Unauthenticated(INVALID_TOKEN)


@router.post("/{operation}", dependencies=[Depends(local_caller)])
def run(operation: str, svc: Service, arguments: Annotated[dict[str, Any], Body()]) -> StreamingResponse:
    command = OPERATIONS.get(operation)
    if command is None:
        raise NotFound(f"no such command: {operation}")
    names = set(inspect.signature(command).parameters) - IN_PROCESS
    if set(arguments) != names:
        raise InvalidArgument(f"{operation} takes {', '.join(sorted(names))}")
    return StreamingResponse(_lines(command(svc, **arguments)), media_type="application/x-ndjson")


def _lines(events: Iterator[dict[str, Any]]) -> Iterator[str]:
    try:
        for event in events:
            yield json.dumps(event, ensure_ascii=False) + "\n"
        yield json.dumps({"end": True}) + "\n"
    except RagError as exc:
        yield json.dumps({"error": exc.message, "exit": exit_code(exc)}) + "\n"
    except Exception as exc:  # noqa: BLE001 - the caller gets a sentence, the log the traceback
        log.exception("a local command failed")
        message = STORAGE_FULL if is_storage_full(exc) else "an unexpected error stopped the command; details are in the server's log"
        yield json.dumps({"error": message, "exit": 1}) + "\n"
