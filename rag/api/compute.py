"""Searches and extractive answers take turns on a few threads (`RAG_SEARCH_THREADS`, default 2).

A search holds Python's interpreter lock for most of its time (SQLAlchemy, fusion, the response):
only the query's embedding, Chroma's and tantivy's own searches run without it. FastAPI's
threadpool runs up to 40 blocking endpoints at once; with 16 clients on 2 cores that many threads
only took turns at the lock, and the switching cost more than the work (`python -m
benchmarks.scale_out --only embedded` measures it). So the endpoints that compute run on a limiter of their own, as
many at once as the setting says, and wait in the event loop for a turn; everything else (a
model's answer that waits on the network, uploads, the other endpoints) keeps the threadpool.

The turns are fair between callers (tokens): each has its own queue and the queues are served in
turn, so a token with many calls waiting (within its quota, rag/service/quotas.py) does not hold back
another's single call, and a heavy caller's call gives way to a lighter one's between its stages
(rag/turns.py; `python -m benchmarks.load --phases quota` measures both).
"""

from __future__ import annotations

import asyncio
import time
import weakref
from collections import OrderedDict, deque
from typing import Callable, TypeVar

import anyio.to_thread

from rag import turns

T = TypeVar("T")

# Whose call this is (rag/turns.py): the bearer secret's hash (rag/api/auth.py sets it), "" for a call without one.
caller = turns.caller


class FairLimiter:
    """At most `slots` calls at once; the others wait in one queue per caller, served in turn
    (round robin): a caller with many calls waiting does not hold back one with a single call.
    While other callers have called in the last `RECENT_S`, one caller holds at most `slots - 1`
    (a slot stays free for the others); alone, it may have them all. One event loop's."""

    RECENT_S = turns.RECENT_S  # the same "other callers about" as the give-way's weights

    def __init__(self, slots: int, clock=time.monotonic) -> None:
        self.slots = slots
        self.clock = clock
        self.held: dict[str, int] = {}
        self.seen: dict[str, float] = {}  # each caller's last call
        self.waiting: OrderedDict[str, deque[asyncio.Future]] = OrderedDict()

    @property
    def busy(self) -> int:
        return sum(self.held.values())

    def cap(self, key: str) -> int:
        """How many slots `key` may hold now."""
        recent = self.clock() - self.RECENT_S
        others = any(seen > recent for caller, seen in self.seen.items() if caller != key)
        return max(1, self.slots - 1) if others else self.slots

    def _may(self, key: str) -> bool:
        return self.busy < self.slots and self.held.get(key, 0) < self.cap(key)

    def _note(self, key: str) -> None:
        now = self.clock()
        self.seen[key] = now
        if len(self.seen) > 1000:
            self.seen = {k: t for k, t in self.seen.items() if t > now - self.RECENT_S}

    async def acquire(self, key: str) -> None:
        # At once when a slot is free for this caller and no other caller who could take it waits
        # (one at its own cap waits for its own calls to end, not for this one).
        self._note(key)
        eligible = any(self.held.get(waiter, 0) < self.cap(waiter) for waiter in self.waiting)
        if not eligible and self._may(key):
            self.held[key] = self.held.get(key, 0) + 1
            return
        turn = asyncio.get_running_loop().create_future()
        self.waiting.setdefault(key, deque()).append(turn)
        try:
            await turn
        except asyncio.CancelledError:
            if turn.done() and not turn.cancelled():
                self.release(key)  # the slot was handed over as the caller went away: pass it on
            else:
                queue = self.waiting.get(key)
                if queue is not None and turn in queue:
                    queue.remove(turn)
                    if not queue:
                        del self.waiting[key]
            raise

    def release(self, key: str) -> None:
        """Give `key`'s slot back, and hand free slots to the callers waiting, in turn."""
        left = self.held.get(key, 0) - 1
        if left > 0:
            self.held[key] = left
        else:
            self.held.pop(key, None)
        for waiter in list(self.waiting):
            if self.busy >= self.slots:
                return
            queue = self.waiting[waiter]
            while queue and queue[0].done():  # gone while waiting
                queue.popleft()
            if queue and self.held.get(waiter, 0) < self.cap(waiter):
                queue.popleft().set_result(None)
                self.held[waiter] = self.held.get(waiter, 0) + 1
            if queue:
                self.waiting.move_to_end(waiter)  # its next call waits for the others' turns
            else:
                del self.waiting[waiter]


# One limiter per event loop (a test client runs each app on a loop of its own).
_limiters: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, FairLimiter] = weakref.WeakKeyDictionary()


def _limiter(threads: int) -> FairLimiter:
    loop = asyncio.get_running_loop()
    limiter = _limiters.get(loop)
    if limiter is None:
        limiter = _limiters[loop] = FairLimiter(threads)
    return limiter


async def compute(threads: int, call: Callable[[], T]) -> T:
    """Run `call` on one of `threads` threads of this event loop's compute limiter, in the caller's
    turn (`caller`)."""
    limiter, key = _limiter(threads), caller.get()
    await limiter.acquire(key)
    turns.TURNS.started(key)  # lighter callers' calls are given way to (rag/turns.py)
    try:
        return await anyio.to_thread.run_sync(call)
    finally:
        turns.TURNS.ended(key)
        limiter.release(key)
