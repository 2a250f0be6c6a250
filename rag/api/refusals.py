"""Refusals remembered: once a token was refused for its rate on an endpoint, its next calls there
are refused again until the wait it was told has passed, on the event loop, without looking the
token up in the store or taking a compute thread (rag/api/compute.py), and answered only after that
wait (at most `HOLD_S`): a client that ignores 429 and Retry-After and calls again at once is slowed
to one call per connection per second, instead of taking the server's time from the others
(`python -m benchmarks.load --phases quota`). Holding costs nothing: the request sleeps on the loop.

The table is keyed by the bearer secret's hash, the method and the route's template; it holds
only tokens the store has authenticated and then limited, and forgets each entry once its wait
is over. One process's memory: another worker refuses such a client after one call of its own.
"""

from __future__ import annotations

import asyncio
import threading
import time

from fastapi import Request

from rag.service.quotas import RateLimited

_MAX = 10_000
HOLD_S = 1.0


class Refusals:
    def __init__(self, clock=time.monotonic) -> None:
        self.clock = clock
        self._lock = threading.Lock()
        self._until: dict[tuple[str, str, str], tuple[float, str]] = {}

    @staticmethod
    def key(request: Request) -> tuple[str, str, str] | None:
        """(the bearer secret's hash, as rag/api/auth.py made it, the method, the route's template)."""
        secret = getattr(request.state, "bearer_sha256", None)
        route = getattr(request.scope.get("route"), "path", None)
        if secret is None or route is None:
            return None
        return secret, request.method, route

    async def check(self, request: Request) -> None:
        """When this token was refused here and its wait is not over: hold the request for that
        wait (at most HOLD_S), then refuse it again."""
        key = self.key(request)
        if key is None:
            return
        with self._lock:
            found = self._until.get(key)
        if found is not None:
            left = found[0] - self.clock()
            if left > 0:
                await asyncio.sleep(min(left, HOLD_S))
                again = RateLimited(found[1], max(0.0, found[0] - self.clock()))
                again.held = True  # not noted again: the wait told stays the one that counts
                raise again

    def note(self, request: Request, exc: RateLimited) -> None:
        key = self.key(request)
        if key is None:
            return
        now = self.clock()
        with self._lock:
            if len(self._until) >= _MAX:
                self._until = {k: v for k, v in self._until.items() if v[0] > now}
            if len(self._until) < _MAX:  # until the Retry-After it was told (whole seconds, at least 1)
                self._until[key] = (now + int(exc.headers["Retry-After"]), exc.message)


def refusals(request: Request) -> Refusals:
    table = getattr(request.app.state, "refusals", None)
    if table is None:
        table = request.app.state.refusals = Refusals()
    return table
