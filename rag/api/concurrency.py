"""Calls in progress at once, per caller: a caller over its limit is refused at once (429), never
queued behind itself.

`KeyedLimiter(slots, kind, limit)` counts the calls of one kind each key (a token, a signed-in
editor) has in progress, in the service's slots (rag/service/slots.py: this process's memory on the
embedded store, shared by every process on PostgreSQL). `acquire(key)` takes one or raises the
limiter's TooManyRequests, and returns the function that gives it back; it may wait on the store,
so async code runs it on a thread. Uploads use it (`RAG_UPLOADS__PER_TOKEN`,
rag/api/routes/uploads.py), and answers streamed (`stream_limiter`).
"""

from __future__ import annotations

from starlette.concurrency import run_in_threadpool

from rag.errors import TooManyRequests
from rag.service.identity.principal import Principal
from rag.service.slots import Full, MemorySlots, Release, Slots


def caller_key(principal: Principal) -> str:
    """Whom a limit counts: the token, else the actor (an editor session, the local CLI)."""
    return f"token:{principal.token_id}" if principal.token_id is not None else f"actor:{principal.actor}"


class TooManyStreams(TooManyRequests):
    code = "too_many_streams"


class KeyedLimiter:
    def __init__(self, slots: Slots, kind: str, limit: int, refusal: type[TooManyRequests] = TooManyRequests,
                 what: str = "calls") -> None:
        self.slots = slots
        self.kind = kind  # keeps one kind's counts apart from another's
        self.limit = limit
        self.refusal = refusal
        self.what = what

    def acquire(self, key: str) -> Release:
        """Take one for `key` (a limit of 0: no limit), or raise the refusal; call the result to give it back."""
        try:
            return self.slots.acquire(f"{self.kind}:{key}", self.limit)
        except Full as full:
            raise self.refusal(f"this token already has {full.held} {self.what} in progress, the most it may have "
                               "at once; try again when one has finished") from None


async def acquire_async(limiter: KeyedLimiter, key: str) -> Release:
    """`limiter.acquire(key)` from async code: on a thread where it waits on the store."""
    if isinstance(limiter.slots, MemorySlots):
        return limiter.acquire(key)
    return await run_in_threadpool(limiter.acquire, key)


def stream_limiter(svc) -> KeyedLimiter:
    """One of the caller's streams at once (`RAG_QUOTA__STREAMS_PER_TOKEN`): taken before the first
    event (429 `too_many_streams` over it), given back when the stream ends."""
    return KeyedLimiter(svc.access.slots, "stream", svc.settings.quota.streams_per_token, TooManyStreams,
                        "answers streaming")
