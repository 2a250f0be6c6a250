"""Who is calling: the bearer token, read through the service (`KnowledgeService.authenticate`).

The service answers every unknown, revoked or expired token alike, so the API never tells whether
a token existed. The principal's dependency reads the store on the compute threads
(rag/api/compute.py), so the database call never blocks the event loop.
"""

from __future__ import annotations

import hashlib
from typing import Annotated

from fastapi import Depends, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from rag.api.compute import caller, compute
from rag.api.refusals import refusals
from rag.errors import Unauthenticated, Unavailable
from rag.logs import set_principal
from rag.service import KnowledgeService, Principal
from rag.service.identity.tokens import ONE_AUTHORIZATION

TOKEN_REQUIRED = "a bearer token is required (Authorization: Bearer <token>)"

# auto_error=False: a missing header gets our 401 and message, not FastAPI's.
_bearer = HTTPBearer(auto_error=False, description="A token made with `rag token create`.")


def get_service(request: Request) -> KnowledgeService:
    svc = getattr(request.app.state, "service", None)
    if svc is None:  # only between the start of the process and the end of its lifespan start-up
        raise Unavailable("the service is starting; try again")
    return svc


async def get_principal(
    request: Request, credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)]
) -> Principal:
    # Refused rather than picking one: a proxy and the client (or two layers) would each believe
    # their own header is the one that counts.
    if len(request.headers.getlist("authorization")) > 1:
        raise Unauthenticated(ONE_AUTHORIZATION)
    if credentials is None:
        raise Unauthenticated(TOKEN_REQUIRED)
    # Whose call this is, hashed once: for the refusals remembered (rag/api/refusals.py) and the
    # turns on the compute threads (rag/api/compute.py).
    request.state.bearer_sha256 = hashlib.sha256(credentials.credentials.encode("utf-8", "replace")).hexdigest()
    await refusals(request).check(request)  # refused for its rate here a moment ago: held, then again
    caller.set(request.state.bearer_sha256)
    svc = get_service(request)
    # A few milliseconds of the store's work, on the compute threads with the searches it precedes.
    principal = await compute(svc.settings.search_threads, lambda: svc.authenticate(credentials.credentials))
    set_principal(principal.principal_id)  # on the request's log lines from now on
    return principal


async def _service(request: Request) -> KnowledgeService:
    """get_service as a dependency: a coroutine, so FastAPI runs it on the event loop (it reads
    app.state, nothing that blocks) rather than sending it to its threadpool and back, a thread
    hop per request."""
    return get_service(request)


Service = Annotated[KnowledgeService, Depends(_service)]
Caller = Annotated[Principal, Depends(get_principal)]
