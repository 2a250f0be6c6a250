"""The editor's sessions: kept on the server, named by a random id in an HttpOnly, SameSite=Strict
cookie. A session holds the person's token (so every request is authenticated anew: a revoked
token ends its sessions at once), a CSRF token every write must carry, and the messages to show on
the next page. The token never reaches the browser after sign-in: page scripts cannot read it.

Sessions live in the memory of the serving process: a restart signs everyone out, and behind
`rag serve --workers N` a session is only known to the worker that made it (use one worker for
the editor, or a proxy that keeps a client on one worker).
"""

from __future__ import annotations

import hmac
import secrets
import threading
import time
from dataclasses import dataclass, field

COOKIE = "rag_session"
IDLE_S = 8 * 3600  # a session unused this long is gone
MAX_AGE_S = 24 * 3600  # and any session after this long
MAX_SESSIONS = 10_000  # the oldest go first


@dataclass
class Session:
    id: str
    secret: str  # the bearer token, server-side only
    csrf: str
    created: float
    seen: float
    flashes: list[tuple[str, str]] = field(default_factory=list)  # (kind: ok | error, message)

    def flash(self, kind: str, message: str) -> None:
        self.flashes.append((kind, message))

    def take_flashes(self) -> list[tuple[str, str]]:
        shown, self.flashes = self.flashes, []
        return shown

    def csrf_ok(self, sent: str | None) -> bool:
        return isinstance(sent, str) and hmac.compare_digest(sent.encode(), self.csrf.encode())


class SessionStore:
    def __init__(self) -> None:
        self._sessions: dict[str, Session] = {}
        self._lock = threading.Lock()

    def create(self, secret: str) -> Session:
        now = time.monotonic()
        session = Session(secrets.token_urlsafe(32), secret, secrets.token_urlsafe(32), now, now)
        with self._lock:
            self._drop_expired(now)
            while len(self._sessions) >= MAX_SESSIONS:
                self._sessions.pop(next(iter(self._sessions)))
            self._sessions[session.id] = session
        return session

    def get(self, session_id: str | None) -> Session | None:
        if not session_id:
            return None
        now = time.monotonic()
        with self._lock:
            session = self._sessions.get(session_id)
            if session is None:
                return None
            if now - session.seen > IDLE_S or now - session.created > MAX_AGE_S:
                del self._sessions[session_id]
                return None
            session.seen = now
            return session

    def end(self, session_id: str | None) -> None:
        with self._lock:
            self._sessions.pop(session_id or "", None)

    def _drop_expired(self, now: float) -> None:
        for key in [k for k, s in self._sessions.items() if now - s.seen > IDLE_S or now - s.created > MAX_AGE_S]:
            del self._sessions[key]
