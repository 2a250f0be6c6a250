"""Every service call lands in the activity history: who, what, when, and how it ended.

Activity is recorded one way: through `ActivityLog.record`, which every part of the service holds
as `self.activity`. `@recorded(...)` wraps a part's method whose first argument after self is the
Principal, and records the outcome (`ok`, or the error's code) and only what is named as safe: the target
node's id and small scalar arguments. Query texts, bodies and secrets never reach the history.

What is recorded is bounded whatever the caller sent (any token may call, and each call is a row):
a target that is not a possible id is not kept as sent (bounded_target), and a detail string is
kept only when it is short and printable. So the history cannot be grown by megabytes per call,
and an export of it always fits the columns an import checks.
"""

from __future__ import annotations

import functools
import inspect
import logging
import math
from typing import TYPE_CHECKING, Any, Callable, TypeVar

from sqlalchemy import select

from rag.errors import RagError
from rag.service.arguments import ACTIVITY_LIMIT_DEFAULT, ACTIVITY_LIMIT_MAX
from rag.service.checks import MAX_ID_CHARS, MAX_NAME_CHARS, int_arg, is_id, name_problem
from rag.service.principal import Principal
from rag.store.models import Activity

if TYPE_CHECKING:
    from rag.service.access import Access
    from rag.store.db import Database

log = logging.getLogger(__name__)

F = TypeVar("F", bound=Callable[..., Any])


MAX_TARGET_CHARS = max(MAX_ID_CHARS, MAX_NAME_CHARS)  # a target is a node or token id, or a knowledge base's name
INVALID_TARGET = "(an invalid id)"  # what the history keeps of a target no id or name can be


def bounded_target(value: object) -> str | None:
    """The target as the history keeps it: an id, or a name (a knowledge base's), kept as sent; anything
    else (too long, control or bidi characters) becomes INVALID_TARGET, so a hostile value is seen
    to have been tried, without being stored."""
    if not isinstance(value, str):
        return None
    if is_id(value) or (len(value) <= MAX_TARGET_CHARS and name_problem(value, separators=False) is None):
        return value
    return INVALID_TARGET


def _small(value: object) -> bool:
    """A detail worth keeping as sent: a flag, a number JSON can hold, an id-like string."""
    if isinstance(value, float):
        return math.isfinite(value)
    return value is None or isinstance(value, (bool, int)) or (isinstance(value, str) and is_id(value))


def recorded(
    action: str,
    target: str | None = None,
    detail: tuple[str, ...] = (),
    after: Callable[[Any], dict[str, Any]] | None = None,
) -> Callable[[F], F]:
    """Record each call as `action`. `target`: the argument naming the node (else the result's
    node_id); `detail`: arguments safe to keep (numbers, ids, flags); `after`: what of a
    successful result to keep (counts, new ids)."""

    def wrap(method: F) -> F:
        signature = inspect.signature(method)

        @functools.wraps(method)
        def call(self, principal, *args: Any, **kwargs: Any) -> Any:
            try:
                binding = signature.bind(self, principal, *args, **kwargs)
                binding.apply_defaults()
                bound = binding.arguments
            except TypeError:
                bound = {}
            node = bounded_target(bound.get(target)) if target else None
            info = {name: bound[name] for name in detail if name in bound and _small(bound[name])} or None
            try:
                result = method(self, principal, *args, **kwargs)
            except RagError as exc:
                self.activity.record(principal, action, node, exc.code, info)
                raise
            except Exception:
                self.activity.record(principal, action, node, "error", info)
                raise
            if node is None:
                node = getattr(result, "node_id", None)
            if after is not None:
                info = {**(info or {}), **after(result)}
            self.activity.record(principal, action, node, "ok", info)
            return result

        return call  # type: ignore[return-value]

    return wrap


class ActivityLog:
    """The history: written by every part of the service, read by admins."""

    def __init__(self, db: Database, access: Access) -> None:
        self.db = db
        self.access = access

    def record(
        self,
        principal: Principal,
        action: str,
        target: str | None,
        outcome: str = "ok",
        detail: dict[str, Any] | None = None,
    ) -> None:
        if principal.token_id is not None:  # which token, so an admin can revoke the one misused
            detail = {**(detail or {}), "token_id": principal.token_id}
        try:
            with self.db.session() as session:
                session.add(
                    Activity(
                        workspace_id=principal.workspace_id,
                        actor=principal.actor,
                        action=action,
                        target=bounded_target(target),  # whatever a caller sent, the row stays small
                        outcome=outcome,
                        detail=detail,
                    )
                )
        except Exception:  # noqa: BLE001 - losing an activity row must not fail the call itself
            log.exception("could not record activity %s", action)

    def history(self, principal: Principal, limit: int = ACTIVITY_LIMIT_DEFAULT) -> list[Activity]:
        """The workspace's history, newest first, for admins. A folder-scoped admin sees only the
        rows about nodes inside its folders: a row about anything else would tell it exists."""
        self.access.require_role(principal, "admin")
        limit = int_arg(limit, "limit", 1, ACTIVITY_LIMIT_MAX, default=ACTIVITY_LIMIT_DEFAULT)
        stmt = select(Activity).where(Activity.workspace_id == principal.workspace_id).order_by(Activity.id.desc())
        with self.db.session() as session:
            visible = self.access.visible_ids(session, principal)
            if visible is None:  # the whole workspace
                return list(session.scalars(stmt.limit(limit)))
            rows = (row for row in session.scalars(stmt.execution_options(yield_per=500)) if row.target in visible)
            shown = [row for _, row in zip(range(limit), rows)]
        # A row's detail may name another node (the folder something was made in): out of scope, none.
        return [
            Activity(id=row.id, workspace_id=row.workspace_id, actor=row.actor, action=row.action, target=row.target,
                     outcome=row.outcome, created_at=row.created_at, detail=None if row.detail is None else {
                         key: None if isinstance(value, str) and value.startswith("n_") and value not in visible
                         else value for key, value in row.detail.items()})
            for row in shown
        ]
