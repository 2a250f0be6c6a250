"""`rag mcp`: the MCP tools over stdio, acting with one bearer token.

Standard output is the protocol channel. While the service starts (libraries that print, a model
that loads), file descriptor 1 points at standard error, and the SDK points it there again while
it serves; only the protocol's own messages reach the real standard output.
"""

from __future__ import annotations

import logging
import os
import sys
import threading
from contextlib import contextmanager
from typing import TYPE_CHECKING, Callable, Iterator

import anyio
import anyio.lowlevel

from rag.mcp.server import build_server

if TYPE_CHECKING:
    from rag.service import KnowledgeService

log = logging.getLogger(__name__)


@contextmanager
def stdout_reserved() -> Iterator[Callable[[], None]]:
    """Send everything written to standard output to standard error until the returned function
    hands it back to the protocol (just before serving); restored on the way out."""
    sys.stdout.flush()
    wire = os.dup(1)
    os.dup2(2, 1)

    def hand_over() -> None:
        sys.stdout.flush()  # what was buffered meanwhile goes to stderr, not onto the wire
        os.dup2(wire, 1)

    try:
        yield hand_over
    finally:
        sys.stdout.flush()
        os.dup2(wire, 1)
        os.close(wire)


class Warmup:
    """The rest of opening the service, once (the writer's start-up, then the search index and the
    model: Chroma and ONNX Runtime take a second or more to load): begun in the background as soon
    as the server serves, and awaited by every tool call (a failure is that call's error, and the
    next call tries again)."""

    def __init__(self, svc: KnowledgeService) -> None:
        self.svc = svc
        self._lock = threading.Lock()
        self._done = False
        self._thread: threading.Thread | None = None

    def __call__(self) -> None:
        with self._lock:
            if not self._done:
                self.svc.start_writer()
                self.svc.retriever, self.svc.synthesizer  # noqa: B018
                self._done = True

    def start(self) -> None:
        self._thread = threading.Thread(target=self._background, name="rag-mcp-warmup", daemon=True)
        self._thread.start()

    def _background(self) -> None:
        try:
            self()
        except Exception:  # noqa: BLE001 - the first tool call tries again and reports it
            log.warning("opening the service in the background failed; the first tool call tries again",
                        exc_info=True)

    def join(self) -> None:
        """Wait for the background start (the service must not close under it)."""
        if self._thread is not None:
            self._thread.join()


def serve_stdio(svc: KnowledgeService, token: str | None, hand_over: Callable[[], None] = lambda: None) -> None:
    """Serve until the client closes standard input. A bad token fails here, before serving
    (Unauthenticated); each call checks it again, so revoking it takes effect at once. `svc` may
    be opened with `defer_start`: initialize and tools/list are answered while the rest of it opens."""
    svc.authenticate(token)
    warmup = Warmup(svc)
    server = build_server(svc, token, ready=warmup)
    hand_over()

    async def serve() -> None:
        async with anyio.create_task_group() as group:
            group.start_soon(server.run_stdio_async)
            # The server's task runs first: it points file descriptor 1 at standard error before it
            # first waits, so nothing the warm-up's libraries print can reach the protocol.
            await anyio.lowlevel.checkpoint()
            warmup.start()

    try:
        anyio.run(serve)
    finally:
        warmup.join()
