"""`rag serve`'s HTTP connections: uvicorn's httptools protocol with deadlines and a connection cap
(issue 27, docs/reliability.md "Slow clients and connection floods").

uvicorn itself has no deadline for receiving a request: `timeout_keep_alive` covers only the idle
time between requests and is cancelled by the first byte of the next one, and ASGI middleware runs
only once the headers are parsed. So 300 connections sending `GET / HTTP/1.1\\r\\nX-a: ` stayed open
for good, and enough of them used up every file descriptor of the process. Here, per connection:

- a request head (line and headers) must arrive within `header_timeout_seconds` of the connection
  opening or of the head's first byte (between requests, uvicorn's keep-alive timeout closes an
  idle connection), and be at most MAX_HEAD_BYTES: else 408 (431) and close;
- a request body may take `body_timeout_seconds` plus one second per `body_min_rate_bytes`
  received; time the server spends not reading (flow control, a pending `100 Continue`) does not
  count: else 408 and close;
- a process keeps at most `max_connections` open: beyond it the oldest connection still waiting for
  a request head is closed, or, when none waits, the new one gets a 503 and is closed. The cap and
  the listen backlog stay within the open-file limit less a share kept for the store's own files.

Each kind of closing is logged (rag.log and the terminal) at most once every LOG_EVERY seconds with
the client's address and a count; never a request's target or headers."""

from __future__ import annotations

import asyncio
import logging
import resource
import time
from dataclasses import dataclass
from typing import Any

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from rag.settings import HttpSettings, Settings

log = logging.getLogger("rag.http")
_terminal = logging.getLogger("uvicorn.error")  # uvicorn's own lines go to the terminal only

DEFAULT_MAX_CONNECTIONS = 1024
RESERVED_FILES = 256  # at least this many open files, or a quarter of the limit, stay the store's
MAX_HEAD_BYTES = 64 * 1024  # a request line and headers together (uvicorn's h11 takes 16 KiB)
LOG_EVERY = 10.0


@dataclass(frozen=True)
class Limits:
    header_timeout: float
    body_timeout: float
    body_min_rate: int
    keep_alive: float
    max_connections: int
    backlog: int
    open_files: int

    @classmethod
    def from_settings(cls, http: HttpSettings, open_files: int | None = None) -> Limits:
        files = open_files if open_files is not None else resource.getrlimit(resource.RLIMIT_NOFILE)[0]
        cap, backlog = connection_room(files, http.max_connections, http.backlog)
        return cls(http.header_timeout_seconds, http.body_timeout_seconds, http.body_min_rate_bytes,
                   http.keep_alive_seconds, cap, backlog, files)

    def describe(self) -> str:
        return (f"connections: at most {self.max_connections} open (open-file limit {self.open_files}); "
                f"a request head within {self.header_timeout:g} s, a body within {self.body_timeout:g} s "
                f"+ 1 s per {self.body_min_rate} bytes\n")


def connection_room(open_files: int, max_connections: int | None, backlog: int) -> tuple[int, int]:
    """The connection cap and the listen backlog for a process that may open `open_files` files:
    what the store keeps aside (RESERVED_FILES or a quarter) is never theirs, and the connections
    take at most half of the rest, the backlog (accepted in bursts before any protocol sees them)
    what remains."""
    room = max(2, open_files - max(RESERVED_FILES, open_files // 4))
    cap = min(max_connections or DEFAULT_MAX_CONNECTIONS, max(1, room // 2))
    if max_connections is not None and max_connections > cap:
        log.warning("RAG_HTTP__MAX_CONNECTIONS=%d is more than the open-file limit (%d) leaves room for: "
                    "%d is used", max_connections, open_files, cap)
    return cap, max(1, min(backlog, room - cap))


def raise_open_files() -> int:
    """Raise this process's soft open-file limit to its hard limit (worker processes inherit it);
    the limit in force."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = hard if hard != resource.RLIM_INFINITY else max(soft, 65536)
    if soft != resource.RLIM_INFINITY and target > soft:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
            soft = target
        except (ValueError, OSError):  # e.g. macOS refuses more than OPEN_MAX
            pass
    return soft


_limits: Limits | None = None


def process_limits() -> Limits:
    """This process's limits: set by uvicorn_options in `rag serve`; a worker process of
    `--workers N` (spawned, with the same environment) reads its own settings once."""
    global _limits
    if _limits is None:
        _limits = Limits.from_settings(Settings().http)
    return _limits


def uvicorn_options(http: HttpSettings) -> tuple[dict[str, Any], Limits]:
    """The arguments of uvicorn.run that apply these limits, for one process or for `--workers N`
    (each worker counts its own connections against the same cap)."""
    global _limits
    raise_open_files()
    _limits = Limits.from_settings(http)
    options = {"http": BoundedHttpProtocol, "timeout_keep_alive": _limits.keep_alive, "backlog": _limits.backlog,
               "timeout_graceful_shutdown": http.shutdown_seconds}
    return options, _limits


class _Throttled:
    """At most one log line per LOG_EVERY seconds for each kind of closing: the first at once, then
    one that counts those in between."""

    SUMMARY = {
        "head": "closed without a complete request head in time",
        "size": "refused with 431 for a request head too large",
        "body": "cut for a request body too slow",
        "evict": "closed, idle or slow, to make room for new ones",
        "refuse": "refused with 503, every connection being busy",
    }

    def __init__(self) -> None:
        self.last: dict[str, float] = {}
        self.held: dict[str, int] = {}
        self.flushes: dict[str, asyncio.TimerHandle] = {}

    def note(self, kind: str, message: str) -> None:
        now = time.monotonic()
        if kind in self.last and now - self.last[kind] < LOG_EVERY:
            self.held[kind] = self.held.get(kind, 0) + 1
            if kind not in self.flushes:
                delay = self.last[kind] + LOG_EVERY - now
                self.flushes[kind] = asyncio.get_running_loop().call_later(delay, self._flush, kind)
            return
        self.last[kind] = now
        self._emit(message)

    def _flush(self, kind: str) -> None:
        self.flushes.pop(kind, None)
        self.last[kind] = time.monotonic()
        self._emit(f"{self.held.pop(kind, 0)} more connections {self.SUMMARY[kind]} in the last {LOG_EVERY:g} s")

    @staticmethod
    def _emit(message: str) -> None:
        log.warning(message)
        _terminal.warning(message)


_events = _Throttled()
_STATUS = {408: b"408 Request Timeout", 431: b"431 Request Header Fields Too Large", 503: b"503 Service Unavailable"}


def _answer(status: int) -> bytes:
    """A complete response that closes the connection, for what is refused before any app runs."""
    text = _STATUS[status].split(b" ", 1)[1]
    return (b"HTTP/1.1 " + _STATUS[status] + b"\r\ncontent-type: text/plain; charset=utf-8\r\n"
            b"connection: close\r\ncontent-length: " + str(len(text)).encode() + b"\r\n\r\n" + text)


class BoundedHttpProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol with the deadlines and the cap of this module. `_phase` is what the
    parser waits for: "head" (a request line and headers) or "body"; a deadline runs only while it
    is the client's turn (no response of this connection outstanding)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._limits = process_limits()
        self._timer: asyncio.TimerHandle | None = None
        self._phase = "head"
        self._head_bytes = 0  # received for the head now awaited (up to the read that completed the last)
        self._heads = 0  # request heads parsed on this connection
        self._body_start = 0.0
        self._body_bytes = 0
        waiting = getattr(self.server_state, "rag_waiting", None)
        if waiting is None:
            waiting = self.server_state.rag_waiting = {}  # type: ignore[attr-defined]
        self._waiting: dict[BoundedHttpProtocol, None] = waiting  # awaiting a head, oldest first

    # The connection

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        if self._admitted():
            self._await_head(deadline=True)

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        self._waiting.pop(self, None)
        super().connection_lost(exc)

    def handle_websocket_upgrade(self) -> None:
        self._disarm()
        self._waiting.pop(self, None)
        super().handle_websocket_upgrade()

    def data_received(self, data: bytes) -> None:
        in_head, heads = self._phase == "head", self._heads
        if in_head and self._timer is None and self._clients_turn() and not self.transport.is_closing():
            self._arm(self._limits.header_timeout, self._head_expired)  # the next request has begun
        super().data_received(data)
        if self.transport.is_closing():
            return
        if in_head and self._heads == heads:  # all of `data` went to the head still awaited
            self._head_bytes += len(data)
            if self._head_bytes > MAX_HEAD_BYTES:  # so a head takes at most this and one read
                self._refuse_head_size()
        elif self._phase == "body" and self._timer is None:
            self._arm(self._limits.body_timeout, self._body_check)

    def _admitted(self) -> bool:
        """Within the cap, after closing the oldest connection that waits for a head if need be."""
        cap = self._limits.max_connections
        if len(self.connections) <= cap:
            return True
        oldest = next(iter(self._waiting), None)
        if oldest is not None:
            _events.note("evict", f"closed the idle or slow connection from {oldest._address()}: "
                         f"{cap} connections were open (RAG_HTTP__MAX_CONNECTIONS)")
            oldest._close(408 if oldest._head_bytes else None)
            return True
        _events.note("refuse", f"refused a connection from {self._address()} with 503: {cap} connections "
                     "were open and busy (RAG_HTTP__MAX_CONNECTIONS)")
        self.connections.discard(self)
        self.transport.write(_answer(503))
        self.transport.close()
        return False

    # Parser callbacks

    def on_headers_complete(self) -> None:
        self._disarm()
        self._waiting.pop(self, None)
        self._phase, self._body_start, self._body_bytes, self._head_bytes = "body", self.loop.time(), 0, 0
        self._heads += 1
        super().on_headers_complete()

    def on_body(self, body: bytes) -> None:
        self._body_bytes += len(body)
        super().on_body(body)

    def on_message_complete(self) -> None:
        super().on_message_complete()
        self._disarm()
        self._phase = "head"
        if self._clients_turn():  # answered before the body was all in
            self._await_head(deadline=True)

    def on_response_complete(self) -> None:
        pipelined = bool(self.pipeline)  # a request already received is served next: the server's turn
        super().on_response_complete()
        if self._phase == "head" and not pipelined and not self.transport.is_closing():
            self._await_head(deadline=False)  # uvicorn's keep-alive timer closes it if it stays idle

    # Deadlines

    def _arm(self, delay: float, callback: Any) -> None:
        self._disarm()
        self._timer = self.loop.call_later(delay, callback)

    def _disarm(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _clients_turn(self) -> bool:
        """No response of this connection is outstanding."""
        return self.cycle is None or self.cycle.response_complete

    def _await_head(self, deadline: bool) -> None:
        """Waiting for a request head: evictable; with `deadline`, it must come within the header
        timeout (else it runs from the head's first byte)."""
        self._head_bytes = 0
        self._waiting[self] = None
        if deadline:
            self._arm(self._limits.header_timeout, self._head_expired)

    def _head_expired(self) -> None:
        self._timer = None
        if self.transport.is_closing() or self._phase != "head":
            return
        if not self._clients_turn():
            return  # a response is outstanding
        if self._head_bytes or self.cycle is None:  # silence after a response is an idle keep-alive
            _events.note("head", f"closed the connection from {self._address()}: no complete request head "
                         f"within {self._limits.header_timeout:g} s (RAG_HTTP__HEADER_TIMEOUT_SECONDS)")
        self._close(408 if self._head_bytes else None)

    def _body_check(self) -> None:
        self._timer = None
        if self.transport.is_closing() or self._phase != "body":
            return
        now, limits = self.loop.time(), self._limits
        if self.flow.read_paused or (self.cycle is not None and self.cycle.waiting_for_100_continue):
            self._body_start, self._body_bytes = now, 0  # the server is not reading: its wait, not the client's
        deadline = self._body_start + limits.body_timeout + self._body_bytes / limits.body_min_rate
        if now < deadline:
            self._arm(deadline - now, self._body_check)
            return
        _events.note("body", f"cut the request body from {self._address()}: {self._body_bytes} bytes in "
                     f"{now - self._body_start:.0f} s, slower than {limits.body_min_rate} bytes a second after "
                     f"{limits.body_timeout:g} s (RAG_HTTP__BODY_TIMEOUT_SECONDS, RAG_HTTP__BODY_MIN_RATE_BYTES)")
        self._close(408 if self.cycle is None or not self.cycle.response_started else None)

    def _refuse_head_size(self) -> None:
        _events.note("size", f"refused a request head over {MAX_HEAD_BYTES} bytes from {self._address()} with 431")
        self._close(431 if self._clients_turn() else None)  # never inside a response being sent

    def _close(self, status: int | None) -> None:
        """Close now, with `status` as the answer when given; an app still waiting for this request's
        body is told the client left."""
        self._disarm()
        self._waiting.pop(self, None)
        self.connections.discard(self)
        if status is not None:
            self.transport.write(_answer(status))
        cycle = self.cycle
        if cycle is not None and not cycle.response_complete:
            cycle.disconnected = True
            cycle.message_event.set()
        self.transport.close()

    def _address(self) -> str:
        return "%s:%d" % self.client if self.client else "an unknown address"
