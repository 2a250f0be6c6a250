"""Calls in progress at once, per caller: a caller over its limit is refused at once (429), never
queued behind itself.

`KeyedLimiter(limit)` counts the calls each key (a token, a signed-in editor) has in progress;
`slot(key)` takes one for the length of a `with` block, or raises the limiter's TooManyRequests.
It is one process's count (each `rag serve --workers` process keeps its own). Uploads use it
(`RAG_UPLOADS__PER_TOKEN`, rag/api/routes/uploads.py); request rates can use the same.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

from rag.errors import TooManyRequests
from rag.service.identity.principal import Principal


def caller_key(principal: Principal) -> str:
    """Whom a limit counts: the token, else the actor (an editor session, the local CLI)."""
    return f"token:{principal.token_id}" if principal.token_id is not None else f"actor:{principal.actor}"


class TooManyStreams(TooManyRequests):
    code = "too_many_streams"


def stream_slot(request, principal: Principal, limit: int):
    """One of the caller's streams at once (`RAG_QUOTA__STREAMS_PER_TOKEN`, per process), taken now
    (429 `too_many_streams` over it); the function returned gives it back when the stream ends."""
    limiter = getattr(request.app.state, "stream_limiter", None)
    if limiter is None:
        limiter = request.app.state.stream_limiter = KeyedLimiter(limit, TooManyStreams, "answers streaming")
    limiter.limit = limit  # the setting as it is now
    key = caller_key(principal)
    limiter.acquire(key)
    released = threading.Event()

    def release() -> None:
        if not released.is_set():
            released.set()
            limiter.release(key)

    return release


class KeyedLimiter:
    def __init__(self, limit: int, refusal: type[TooManyRequests] = TooManyRequests, what: str = "calls") -> None:
        self.limit = limit
        self.refusal = refusal
        self.what = what
        self._lock = threading.Lock()
        self._held: dict[str, int] = {}

    def held(self, key: str) -> int:
        return self._held.get(key, 0)

    @contextmanager
    def slot(self, key: str) -> Iterator[None]:
        self.acquire(key)
        try:
            yield
        finally:
            self.release(key)

    def acquire(self, key: str) -> None:
        """Take one for `key` (a limit of 0: no limit), or raise the refusal; `release` gives it back."""
        with self._lock:
            held = self._held.get(key, 0)
            if self.limit and held >= self.limit:
                raise self.refusal(f"this token already has {held} {self.what} in progress, the most it may have at "
                                   "once; try again when one has finished")
            self._held[key] = held + 1

    def release(self, key: str) -> None:
        with self._lock:
            left = self._held[key] - 1
            if left:
                self._held[key] = left
            else:
                del self._held[key]  # the table holds only keys with calls in progress
