"""Every service call lands in the activity history: who, what, when, and how it ended.

Activity is recorded one way: through `ActivityLog.record`, which every part of the service holds
as `self.activity`. `@recorded(...)` wraps a part's method whose first argument after self is the
Principal, and records the outcome (`ok`, or the error's code) and only what is named as safe: the target
node's id and small scalar arguments. Query texts, bodies and secrets never reach the history.

What is recorded is bounded whatever the caller sent (any token may call, and each call is a row):
a target that is not a possible id is not kept as sent (bounded_target), and a detail string is
kept only when it is short and printable. So the history cannot be grown by megabytes per call,
and an export of it always fits the columns an import checks.

The rows of searches, the calls a client repeats many times a second, are written off the
request's path: queued, and written in batches by a background thread (every FLUSH_S, or at once
when MAX_PENDING wait). A search then costs no write transaction of its own (and, on SQLite, no
turn at the store's one write lock). Any other row is written at once, after the queued ones, so
the history keeps the order calls ended in; reading the history (and closing the service) writes
the queue first.
"""

from __future__ import annotations

import functools
import inspect
import logging
import math
import threading
from typing import TYPE_CHECKING, Any, Callable, TypeVar

from sqlalchemy import select

from rag.errors import RagError
from rag.service.arguments import ACTIVITY_LIMIT_DEFAULT, ACTIVITY_LIMIT_MAX
from rag.service.checks import MAX_ID_CHARS, MAX_NAME_CHARS, int_arg, is_id, name_problem
from rag.service.identity.principal import Principal
from rag.store.models import Activity, utcnow

if TYPE_CHECKING:
    from rag.service.identity.access import Access
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

    BATCHED = frozenset({"search", "search_documents", "search_nodes_by_name", "search_knowledge_base"})
    FLUSH_S = 0.25
    MAX_PENDING = 256
    MAX_KEPT = 100_000  # rows kept for another try while the store cannot be written

    def __init__(self, db: Database, access: Access) -> None:
        self.db = db
        self.access = access
        self._pending: list[dict[str, Any]] = []
        self._cond = threading.Condition()
        self._writing = threading.Lock()  # one writer at a time, so rows land in the order queued
        self._writer: threading.Thread | None = None
        self._closed = False

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
        row = {
            "workspace_id": principal.workspace_id, "actor": principal.actor, "action": action,
            "target": bounded_target(target),  # whatever a caller sent, the row stays small
            "outcome": outcome, "detail": detail, "created_at": utcnow(),
        }
        if action in self.BATCHED and self._queue(row):
            return
        with self._writing:
            self._write([*self._take(), row])

    def _queue(self, row: dict[str, Any]) -> bool:
        """Queue a row for the background writer (started on first use); False once closed."""
        with self._cond:
            if self._closed:
                return False
            self._pending.append(row)
            if self._writer is None:
                self._writer = threading.Thread(target=self._write_loop, name="activity-writer", daemon=True)
                self._writer.start()
            if len(self._pending) in (1, self.MAX_PENDING):  # the first to wait, or a full batch
                self._cond.notify_all()
        return True

    def _take(self) -> list[dict[str, Any]]:
        with self._cond:
            rows, self._pending = self._pending, []
        return rows

    def _write(self, rows: list[dict[str, Any]]) -> bool:
        if not rows:
            return True
        try:
            with self.db.session() as session:
                session.add_all([Activity(**row) for row in rows])
            return True
        except Exception:  # noqa: BLE001 - losing an activity row must not fail the call itself
            log.exception("could not record %d activity rows (%s)", len(rows), rows[-1]["action"])
            return False

    def _write_loop(self) -> None:
        while True:
            with self._cond:
                while not self._closed and not self._pending:
                    self._cond.wait()
                if not self._closed and len(self._pending) < self.MAX_PENDING:
                    self._cond.wait(self.FLUSH_S)  # a batch gathers
                closed = self._closed
            with self._writing:
                rows = self._take()
                if not self._write(rows) and not closed:
                    with self._cond:  # kept for the next round (a store busy past its timeout)
                        self._pending[:0] = rows[-self.MAX_KEPT:]
            if closed:
                return

    def flush(self) -> None:
        """Write the queued rows now."""
        with self._writing:
            self._write(self._take())

    def close(self) -> None:
        """Write the queue and stop the background writer; later rows are written at once."""
        with self._cond:
            self._closed = True
            writer = self._writer
            self._cond.notify_all()
        if writer is not None:
            writer.join(10)
        self.flush()

    def history(self, principal: Principal, limit: int = ACTIVITY_LIMIT_DEFAULT) -> list[Activity]:
        """The workspace's history, newest first, for admins. A folder-scoped admin sees only the
        rows about nodes inside its folders: a row about anything else would tell it exists."""
        self.access.require_role(principal, "admin")
        limit = int_arg(limit, "limit", 1, ACTIVITY_LIMIT_MAX, default=ACTIVITY_LIMIT_DEFAULT)
        self.flush()
        stmt = select(Activity).where(Activity.workspace_id == principal.workspace_id).order_by(Activity.id.desc())
        with self.db.session() as session:
            visible = self.access.visible_ids(session, principal)
            if visible is None:  # the whole workspace
                return list(session.scalars(stmt.limit(limit)))
            rows = (row for row in session.scalars(stmt.execution_options(yield_per=500)) if row.target in visible)
            shown = [row for _, row in zip(range(limit), rows)]
        return [
            Activity(id=row.id, workspace_id=row.workspace_id, actor=row.actor, action=row.action, target=row.target,
                     outcome=row.outcome, created_at=row.created_at, detail=shown_detail(row.detail, visible))
            for row in shown
        ]


def shown_detail(detail: dict[str, Any] | None, visible: set[str] | None) -> dict[str, Any] | None:
    """A row's detail as a folder-scoped caller sees it (`visible`: the node ids it may see; None,
    the whole workspace): it may name another node (the folder something was made in), which an
    out-of-scope caller is shown as none."""
    if detail is None or visible is None:
        return detail
    return {key: None if isinstance(value, str) and value.startswith("n_") and value not in visible else value
            for key, value in detail.items()}
