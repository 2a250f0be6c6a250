"""Searches and extractive answers take turns on a few threads (`RAG_SEARCH_THREADS`, default 2).

A search holds Python's interpreter lock for most of its time (SQLAlchemy, fusion, the response):
only the query's embedding, Chroma's and tantivy's own searches run without it. FastAPI's
threadpool runs up to 40 blocking endpoints at once; with 16 clients on 2 cores that many threads
only took turns at the lock, and the switching cost more than the work (`python -m
benchmarks.scale_out --only embedded` measures it). So the endpoints that compute run on a limiter of their own, as
many at once as the setting says, and wait in the event loop for a turn; everything else (a
model's answer that waits on the network, uploads, the other endpoints) keeps the threadpool.
"""

from __future__ import annotations

import asyncio
import weakref
from typing import Callable, TypeVar

import anyio
import anyio.to_thread

T = TypeVar("T")

# One limiter per event loop (a test client runs each app on a loop of its own).
_limiters: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, anyio.CapacityLimiter] = weakref.WeakKeyDictionary()


def _limiter(threads: int) -> anyio.CapacityLimiter:
    loop = asyncio.get_running_loop()
    limiter = _limiters.get(loop)
    if limiter is None:
        limiter = _limiters[loop] = anyio.CapacityLimiter(threads)
    return limiter


async def compute(threads: int, call: Callable[[], T]) -> T:
    """Run `call` on one of `threads` threads of this event loop's compute limiter."""
    return await anyio.to_thread.run_sync(call, limiter=_limiter(threads))
