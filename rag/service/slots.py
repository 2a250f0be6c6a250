"""Calls in progress at once, per caller: the cap on answers one token streams at once
(`RAG_QUOTA__STREAMS_PER_TOKEN`) and on uploads one token has in progress (`RAG_UPLOADS__PER_TOKEN`).

Counted where the request rates are counted (rag/service/quotas.py): on the embedded store in this
process's memory (it is the only process); on PostgreSQL as rows of `call_slots`, one per call in
progress, so that `rag serve --workers N` and several replicas share the cap. A row is a lease:
the process holding it renews it every `RENEW_S` and deletes it when the call ends; a process that
dies holding rows (killed, its node lost) leaves them to lapse after `LEASE_S`, and the next call
for that key clears them. Times are the database's clock, so replicas' clocks need not agree.

`acquire(key, limit)` takes one slot for `key` or raises `Full` (with how many it holds); it may
block on the store, so async code calls it on a thread. The release it returns never blocks: on
PostgreSQL the row is deleted by the renewing thread, at once.
"""

from __future__ import annotations

import logging
import threading
import uuid
from typing import TYPE_CHECKING, Callable, Protocol

from sqlalchemy import bindparam, text

if TYPE_CHECKING:
    from rag.store.db import Database

log = logging.getLogger(__name__)

LEASE_S = 60.0  # a row not renewed for this long is a dead process's: it no longer counts
RENEW_S = 15.0

Release = Callable[[], None]


class Full(Exception):
    def __init__(self, held: int) -> None:
        super().__init__(held)
        self.held = held


class Slots(Protocol):
    def acquire(self, key: str, limit: int) -> Release:
        """One slot for `key` (a limit of 0: no limit), or raise Full; call the result once to give it back."""


def _nothing() -> None:
    pass


def _once(give_back: Callable[[], None]) -> Release:
    done = threading.Event()

    def release() -> None:
        if not done.is_set():
            done.set()
            give_back()

    return release


class MemorySlots:
    """The embedded store's slots: this process's counts."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._held: dict[str, int] = {}

    def acquire(self, key: str, limit: int) -> Release:
        with self._lock:
            held = self._held.get(key, 0)
            if limit and held >= limit:
                raise Full(held)
            self._held[key] = held + 1
        return _once(lambda: self._give_back(key))

    def _give_back(self, key: str) -> None:
        with self._lock:
            left = self._held[key] - 1
            if left:
                self._held[key] = left
            else:
                del self._held[key]  # the table holds only keys with calls in progress


_NOW = "extract(epoch from clock_timestamp())"
_LOCK = text("SELECT pg_advisory_xact_lock(hashtextextended(:key, 31))")
_LAPSED = text(f"DELETE FROM call_slots WHERE key = :key AND expires < {_NOW}")
_COUNT = text("SELECT count(*) FROM call_slots WHERE key = :key")
_TAKE = text(f"INSERT INTO call_slots (id, key, expires) VALUES (:id, :key, {_NOW} + :lease)")
_GONE = text("DELETE FROM call_slots WHERE id IN :ids").bindparams(bindparam("ids", expanding=True))
_RENEW = text(f"UPDATE call_slots SET expires = {_NOW} + :lease WHERE id IN :ids").bindparams(
    bindparam("ids", expanding=True))


class StoreSlots:
    """PostgreSQL's slots, shared by every process on the store (see the module's docstring)."""

    def __init__(self, db: Database, lease_s: float = LEASE_S, renew_s: float = RENEW_S) -> None:
        self.db = db
        self.lease_s, self.renew_s = lease_s, renew_s
        self._lock = threading.Lock()
        self._mine: set[str] = set()  # rows this process holds: renewed
        self._gone: list[str] = []  # rows given back: to delete
        self._wake = threading.Event()
        self._thread: threading.Thread | None = None

    def acquire(self, key: str, limit: int) -> Release:
        if not limit:
            return _nothing  # no limit: nothing to count
        row = uuid.uuid4().hex
        with self.db.engine.begin() as connection:
            connection.execute(_LOCK, {"key": key})  # one caller's acquires, from every process, one at a time
            connection.execute(_LAPSED, {"key": key})
            held = connection.execute(_COUNT, {"key": key}).scalar_one()
            if held >= limit:
                raise Full(held)
            connection.execute(_TAKE, {"id": row, "key": key, "lease": self.lease_s})
        with self._lock:
            self._mine.add(row)
            self._start()
        return _once(lambda: self._give_back(row))

    def _give_back(self, row: str) -> None:
        with self._lock:
            self._mine.discard(row)
            self._gone.append(row)
            self._start()
        self._wake.set()

    def _start(self) -> None:  # under self._lock
        if self._thread is None or not self._thread.is_alive():
            self._thread = threading.Thread(target=self._tend, name="call-slots", daemon=True)
            self._thread.start()

    def _tend(self) -> None:
        """Delete the rows given back (as soon as they are) and renew the others, until none is left."""
        while True:
            self._wake.wait(self.renew_s)
            self._wake.clear()
            with self._lock:
                gone, self._gone = self._gone, []
                mine = list(self._mine)
                if not gone and not mine:
                    self._thread = None
                    return
            try:
                with self.db.engine.begin() as connection:
                    if gone:
                        connection.execute(_GONE, {"ids": gone})
                    if mine:
                        connection.execute(_RENEW, {"ids": mine, "lease": self.lease_s})
            except Exception:  # noqa: BLE001 - the store is down: rows lapse by themselves; tried again
                log.warning("could not update the calls in progress on the store", exc_info=True)
                with self._lock:
                    self._gone.extend(gone)
