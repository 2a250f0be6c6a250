"""Heavy callers give way to light ones between the stages of a search.

The compute threads (rag/api/compute.py) serve callers in turn, and a caller with other callers
about holds at most all but one of them: a quiet token's search starts at once beside a busy
token's. But the two then run side by side, and a search holds Python's interpreter lock for most
of its time, so each runs at half speed: the quiet token's search took twice as long whenever it
met one of the busy token's (`python -m benchmarks.load --phases quota`).

So a call on the compute threads steps aside at its stage boundaries (`give_way()`: before each
lane, before fusion, before the excerpts are read) while a call of a lighter caller is running: one
that started at most half as many calls in the last `RECENT_S`. It waits until no lighter call
runs, or `MAX_WAIT_S` at one boundary. Callers of about the same weight never wait for each other,
and a caller alone never waits, so this costs nothing without contention. The lighter call then
has the interpreter to itself but for the stage the heavier one was in (a lane's search in
tantivy or Chroma runs without the lock, on the other core).

`caller` says whose call it is (rag/api/auth.py sets the bearer secret's hash); calls without one
(the CLI, the editor's session, tests) are never weighed and never wait. One process's state.
"""

from __future__ import annotations

import contextvars
import threading
import time
from collections import deque

from rag import telemetry

caller: contextvars.ContextVar[str] = contextvars.ContextVar("rag_compute_caller", default="")

RECENT_S = 5.0
LIGHTER = 0.5  # a caller whose recent calls are at most this share of mine is lighter
MAX_WAIT_S = 0.05
_MAX_CALLERS = 1000
_MAX_STARTS = 10_000  # per caller, within RECENT_S


class Turns:
    def __init__(self, clock=time.monotonic) -> None:
        self.clock = clock
        self._changed = threading.Condition()
        self._running: dict[str, int] = {}
        self._starts: dict[str, deque[float]] = {}

    def started(self, key: str) -> None:
        if not key:
            return
        now = self.clock()
        with self._changed:
            self._running[key] = self._running.get(key, 0) + 1
            starts = self._starts.get(key)
            if starts is None:
                if len(self._starts) >= _MAX_CALLERS:
                    self._forget(now)
                starts = self._starts[key] = deque(maxlen=_MAX_STARTS)
            starts.append(now)

    def ended(self, key: str) -> None:
        if not key:
            return
        with self._changed:
            left = self._running.get(key, 0) - 1
            if left > 0:
                self._running[key] = left
            else:
                self._running.pop(key, None)
            self._changed.notify_all()

    def _forget(self, now: float) -> None:
        """Callers with no call in the last RECENT_S and none running (under the lock)."""
        self._starts = {k: s for k, s in self._starts.items() if k in self._running or (s and s[-1] > now - RECENT_S)}

    def _weight(self, key: str, now: float) -> int:
        starts = self._starts.get(key)
        if not starts:
            return 0
        while starts and starts[0] <= now - RECENT_S:
            starts.popleft()
        return len(starts)

    def _lighter_running(self, key: str) -> bool:
        now = self.clock()
        mine = self._weight(key, now)
        return any(other != key and self._weight(other, now) <= LIGHTER * mine for other in self._running)

    def give_way(self) -> float:
        """From a call on a compute thread, at a stage boundary: wait while a lighter caller's call
        runs (at most MAX_WAIT_S). Returns the seconds waited (0.0: it went on at once)."""
        key = caller.get()
        if not key:
            return 0.0
        with self._changed:
            if not self._lighter_running(key):
                return 0.0
            began = self.clock()
            deadline = began + MAX_WAIT_S
            while self._lighter_running(key):
                left = deadline - self.clock()
                if left <= 0:
                    break
                self._changed.wait(left)
        waited = self.clock() - began
        if telemetry.enabled:
            telemetry.GAVE_WAY.inc(waited)
        return waited


TURNS = Turns()


def give_way() -> float:
    """`TURNS.give_way()`: see the module's docstring."""
    return TURNS.give_way()
