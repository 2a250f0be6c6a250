"""Tokens made over the API by a workspace's admin act in their home workspace only (migration
0006's rule). Migration 0006 added `home_only` false for every token that existed then, and an
archive exported before it has no such column: both would let such a token act in every
workspace of its principal. What tells them apart is the history: the `create_token` activity
row of each names its maker (`actor`) and the token it made (`detail.created_token`); the local
command line (`rag token create`, `rag serve`'s first admin token) is the actor `local-cli`, and
its tokens keep what they have. Used by migration 0011 and by `rag import`; it reads and writes
through table stubs of its own, so later changes of the models never change what it does."""

from __future__ import annotations

from typing import Iterable

import sqlalchemy as sa
from sqlalchemy.engine import Connection

LOCAL_ACTOR = "local-cli"  # rag.service.identity.principal.Principal.local_admin's actor
_BATCH = 500

_activity = sa.table("activity", sa.column("actor", sa.String), sa.column("action", sa.String),
                     sa.column("detail", sa.JSON))
_tokens = sa.table("tokens", sa.column("id", sa.String), sa.column("home_only", sa.Boolean))


def api_made_token_ids(connection: Connection) -> set[str]:
    """The ids of the tokens whose `create_token` row names a maker other than the local CLI."""
    rows = connection.execute(sa.select(_activity.c.detail).where(
        _activity.c.action == "create_token", _activity.c.actor != LOCAL_ACTOR))
    made = set()
    for (detail,) in rows:
        created = detail.get("created_token") if isinstance(detail, dict) else None
        if isinstance(created, str):
            made.add(created)
    return made


def make_api_tokens_home_only(connection: Connection, among: Iterable[str] | None = None) -> int:
    """Set `home_only` on every API-made token (of `among`, when given) that lacks it; returns how many."""
    made = api_made_token_ids(connection)
    ids = sorted(made if among is None else made & set(among))
    changed = 0
    for i in range(0, len(ids), _BATCH):
        result = connection.execute(sa.update(_tokens).where(
            _tokens.c.id.in_(ids[i:i + _BATCH]), _tokens.c.home_only == sa.false()).values(home_only=True))
        changed += result.rowcount or 0
    return changed
