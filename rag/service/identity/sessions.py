"""The editor's sessions (rag/web/): a person signs in with a token's secret and gets a session,
named by a random id that only the browser's cookie holds (the store keeps its SHA-256).

The session remembers which token opened it, never the secret, and the token is checked again on
every request (tokens.authenticate_token_id), so revoking or expiring it ends its sessions at once.
The editor is for people: an agent's token opens no session. Sessions are rows of the store, so every
worker and replica of `rag serve` knows them; each carries the CSRF token its forms must send, and
the messages to show on the next page.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import TYPE_CHECKING

from sqlalchemy import delete, or_

from rag.errors import PermissionDenied, Unauthenticated
from rag.service.identity.principal import Principal
from rag.store.models import EditorSession, utcnow

if TYPE_CHECKING:
    from rag.service.activity import ActivityLog
    from rag.service.identity.tokens import Tokens
    from rag.store.db import Database

IDLE = timedelta(hours=8)  # a session unused this long is over
MAX_AGE = timedelta(hours=24)  # and any session after this long
SEEN_EVERY = timedelta(minutes=1)  # how stale `seen_at` may get before a request writes it
AGENT_REFUSED = "this is an agent's token: the editor is for people; sign in with a person's token"
SIGNED_OUT = "sign in with a person's token"
MAX_FLASHES = 10


@dataclass
class OpenSession:
    """A session as a request sees it: who, the CSRF token its writes must carry, pending messages."""

    id: str
    principal: Principal
    csrf: str
    flashes: list[tuple[str, str]] = field(default_factory=list)

    def csrf_ok(self, sent: object) -> bool:
        return isinstance(sent, str) and hmac.compare_digest(sent.encode(), self.csrf.encode())


def _hash(session_id: str) -> str:
    return hashlib.sha256(session_id.encode()).hexdigest()


def _aware(value: datetime) -> datetime:
    return value if value.tzinfo else value.replace(tzinfo=timezone.utc)


class EditorSessions:
    def __init__(self, db: Database, tokens: Tokens, activity: ActivityLog) -> None:
        self.db = db
        self.tokens = tokens
        self.activity = activity

    def open_session(self, secret: object) -> OpenSession:
        """Sign in: a new session for a person's token (an agent's is refused)."""
        principal = self.tokens.authenticate(secret)
        if principal.is_agent:
            self.activity.record(principal, "open_session", None, "permission_denied")
            raise PermissionDenied(AGENT_REFUSED)
        session_id, csrf, now = secrets.token_urlsafe(32), secrets.token_urlsafe(32), utcnow()
        with self.db.session() as session:
            session.execute(delete(EditorSession).where(  # the expired ones go, whoever's they were
                or_(EditorSession.seen_at < now - IDLE, EditorSession.created_at < now - MAX_AGE)))
            session.add(EditorSession(id_hash=_hash(session_id), token_id=principal.token_id, csrf=csrf,
                                      created_at=now, seen_at=now))
        self.activity.record(principal, "open_session", None, "ok")
        return OpenSession(session_id, principal, csrf)

    def session(self, session_id: object) -> OpenSession:
        """The open session of this id, with its token's principal as of now; an unknown, expired or
        revoked one is Unauthenticated (and gone)."""
        if not isinstance(session_id, str) or not 20 <= len(session_id) <= 100:
            raise Unauthenticated(SIGNED_OUT)
        now = utcnow()
        with self.db.session() as session:
            row = session.get(EditorSession, _hash(session_id))
            if row is None:
                raise Unauthenticated(SIGNED_OUT)
            expired = now - _aware(row.seen_at) > IDLE or now - _aware(row.created_at) > MAX_AGE
            token_id, csrf, flashes = row.token_id, row.csrf, [(k, m) for k, m in row.flashes or []]
            if not expired and now - _aware(row.seen_at) > SEEN_EVERY:
                row.seen_at = now
        try:
            if expired:
                raise Unauthenticated(SIGNED_OUT)
            principal = self.tokens.authenticate_token_id(token_id)
        except Unauthenticated:
            self.close_session(session_id)
            raise Unauthenticated(SIGNED_OUT) from None
        return OpenSession(session_id, principal, csrf, flashes)

    def flash(self, session_id: str, kind: str, message: str) -> None:
        """A message (kind `ok` or `error`) for the session's next page."""
        with self.db.session() as session:
            row = session.get(EditorSession, _hash(session_id))
            if row is not None:
                row.flashes = [*(row.flashes or []), [kind, message]][-MAX_FLASHES:]

    def take_flashes(self, open_session: OpenSession) -> list[tuple[str, str]]:
        """The pending messages, now shown, so cleared."""
        shown = open_session.flashes
        if shown:
            with self.db.session() as session:
                row = session.get(EditorSession, _hash(open_session.id))
                if row is not None:
                    row.flashes = None
            open_session.flashes = []
        return shown

    def close_session(self, session_id: object) -> None:
        """Sign out (or forget a session that is over)."""
        if isinstance(session_id, str):
            with self.db.session() as session:
                session.execute(delete(EditorSession).where(EditorSession.id_hash == _hash(session_id)))
