"""Tokens over HTTP, so an administrator can make and revoke them while `rag serve` holds the store
(the CLI cannot open it then). The service allows it to people who are admins of the workspace,
with access all, never to agents (`by=`, docs/service.md); the first admin token comes from
`rag token create`. A token is made in the caller's workspace."""

from __future__ import annotations

from typing import Any, get_type_hints

from fastapi import APIRouter
from fastapi.responses import JSONResponse
from pydantic import Field, create_model

from rag.api.arguments import path_param, request_body
from rag.api.auth import Caller, Service
from rag.api.errors import ERROR_RESPONSES
from rag.service import TokenInfo
from rag.service.arguments import CREATE_TOKEN, REVOKE_TOKEN

router = APIRouter(prefix="/v1/tokens", tags=["tokens"], responses=ERROR_RESPONSES)

NewToken = request_body("NewToken", CREATE_TOKEN, "create_token's arguments, in the caller's own workspace.")
TokenId = path_param(REVOKE_TOKEN["token_id"])


# The service's TokenInfo, as listed: its fields and whether it is active (neither revoked nor expired).
TokenRow = create_model(
    "TokenRow", **{name: (kind, ...) for name, kind in get_type_hints(TokenInfo).items()}, active=(bool, ...)
)
CreatedToken = create_model(
    "CreatedToken", __base__=TokenRow, token=(str, Field(description="The secret: shown this once, never stored."))
)


def _row(info: TokenInfo) -> dict[str, Any]:
    return info.payload() | {"active": info.active}


@router.get("", response_model=list[TokenRow], operation_id="list_tokens",  # type: ignore[valid-type]
            summary="The workspace's tokens (never their secrets)")
def list_tokens(svc: Service, principal: Caller) -> JSONResponse:
    return JSONResponse([_row(info) for info in svc.list_tokens(by=principal)])


@router.post("", response_model=CreatedToken, status_code=201, operation_id="create_token", summary="Make a token")
def create_token(body: NewToken, svc: Service, principal: Caller) -> JSONResponse:
    # Always the caller's own workspace: the service would make a workspace it was given before
    # checking the caller's right to it.
    secret, info = svc.create_token(
        principal.workspace_id, body.role, body.scopes, body.access, body.folders, body.agent,
        body.expires_days, name=body.name, principal_id=body.principal_id, by=principal,
    )
    return JSONResponse(_row(info) | {"token": secret}, status_code=201)


@router.delete("/{token_id}", response_model=TokenRow, operation_id="revoke_token", summary="Revoke a token for good")
def revoke_token(token_id: TokenId, svc: Service, principal: Caller) -> JSONResponse:
    return JSONResponse(_row(svc.revoke_token(token_id, by=principal)))
