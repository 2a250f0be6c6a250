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
        with self._lock:
            held = self._held.get(key, 0)
            if held >= self.limit:
                raise self.refusal(f"this token already has {held} {self.what} in progress, the most it may have at "
                                   "once; try again when one has finished")
            self._held[key] = held + 1
        try:
            yield
        finally:
            with self._lock:
                left = self._held[key] - 1
                if left:
                    self._held[key] = left
                else:
                    del self._held[key]  # the table holds only keys with calls in progress
