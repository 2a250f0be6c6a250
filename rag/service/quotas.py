"""Request rates per token and per principal (issue 31): one caller cannot starve the others.

Each kind of call has its rate (QuotaSettings, `RAG_QUOTA__*`, per minute; 0: unlimited):
`search` (searches, over HTTP and MCP), `ask` (answers: /v1/ask, chat completions, the MCP ask
tool, the editor), `upload` (files uploaded) and `write` (every change of content: a draft, a
publish, a move, a delete, an ingest). A call is counted against its token and against the
principal the token belongs to (a person with five tokens has one person's rate); a call over
either is refused with 429 `rate_limited` and `Retry-After` (over MCP: the tool's error, with the
same words). The local CLI and the editor's signed-in sessions are not tokens: not counted.

The rate is a GCRA (a token bucket kept as one number per key, its "theoretical arrival time"):
calls may come in a burst of `burst_seconds` worth of the rate, then at the rate. On the embedded
store the counts are in this process's memory (it is the only process); on PostgreSQL they are
rows of `rate_limits`, updated in one statement per call, so that `rag serve --workers N` and
several replicas share them.
"""

from __future__ import annotations

import math
import threading
import time
from typing import TYPE_CHECKING, Protocol

from sqlalchemy import text

from rag.errors import TooManyRequests

if TYPE_CHECKING:
    from rag.service.identity.principal import Principal
    from rag.settings import QuotaSettings
    from rag.store.db import Database

KINDS = ("search", "ask", "upload", "write")
_WHAT = {"search": "searches", "ask": "answers", "upload": "uploads", "write": "changes"}
_MEMORY_KEYS = 100_000  # past this many keys, those whose bucket is full again are forgotten


class RateLimited(TooManyRequests):
    code = "rate_limited"

    def __init__(self, message: str, retry_after: float) -> None:
        super().__init__(message)
        self.retry_after = retry_after
        self.headers = {"Retry-After": str(max(1, math.ceil(retry_after)))}


class Counts(Protocol):
    def take(self, key: str, interval: float, tau: float, now: float) -> float | None:
        """Count one call of `key`; None when it may go on, else the seconds until it may."""


class MemoryCounts:
    """The embedded store's counts: this process's dictionary."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._tat: dict[str, float] = {}

    def take(self, key: str, interval: float, tau: float, now: float) -> float | None:
        with self._lock:
            tat = max(self._tat.get(key, now), now) + interval
            if tat - now > tau:
                return tat - now - tau
            self._tat[key] = tat
            if len(self._tat) > _MEMORY_KEYS:
                self._tat = {k: v for k, v in self._tat.items() if v > now}
            return None


_TAKE = text("""
INSERT INTO rate_limits (key, tat) VALUES (:key, :now + :interval)
ON CONFLICT (key) DO UPDATE SET tat = GREATEST(rate_limits.tat, :now) + :interval
    WHERE GREATEST(rate_limits.tat, :now) + :interval - :now <= :tau
RETURNING tat
""")
_READ = text("SELECT tat FROM rate_limits WHERE key = :key")


class StoreCounts:
    """PostgreSQL's counts, shared by every process on the store: one upsert per call."""

    def __init__(self, db: Database) -> None:
        self.db = db

    def take(self, key: str, interval: float, tau: float, now: float) -> float | None:
        values = {"key": key, "now": now, "interval": interval, "tau": tau}
        with self.db.engine.begin() as connection:
            if connection.execute(_TAKE, values).first() is not None:
                return None
            tat = connection.execute(_READ, {"key": key}).scalar_one()
        return max(tat, now) + interval - now - tau


class Quotas:
    def __init__(self, settings: QuotaSettings, counts: Counts, clock=time.time) -> None:
        self.settings = settings
        self.counts = counts
        self.clock = clock

    def take(self, principal: Principal, kind: str) -> None:
        """Count one call of `kind` by `principal`, or raise RateLimited."""
        rate = getattr(self.settings, f"{kind}_per_minute")
        if not rate or principal.token_id is None:
            return
        interval = 60.0 / rate
        tau = max(1.0, rate * self.settings.burst_seconds / 60.0) * interval
        now = self.clock()
        keys = [f"token:{principal.token_id}:{kind}"]
        if principal.principal_id is not None:
            keys.append(f"principal:{principal.principal_id}:{kind}")
        for key in keys:
            wait = self.counts.take(key, interval, tau, now)
            if wait is not None:
                whose = "this token" if key.startswith("token:") else "this token's owner"
                raise RateLimited(f"{whose} made more {_WHAT[kind]} than its quota allows ({rate} a minute); "
                                  f"try again in {max(1, math.ceil(wait))} s", wait)
