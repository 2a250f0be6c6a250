"""`rag mcp`: the MCP tools over stdio, acting with one bearer token.

Standard output is the protocol channel. While the service starts (libraries that print, a model
that loads), file descriptor 1 points at standard error, and the SDK points it there again while
it serves; only the protocol's own messages reach the real standard output.
"""

from __future__ import annotations

import os
import sys
from contextlib import contextmanager
from typing import TYPE_CHECKING, Callable, Iterator

import anyio

from rag.mcp.server import build_server

if TYPE_CHECKING:
    from rag.service import KnowledgeService


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


def serve_stdio(svc: KnowledgeService, token: str | None, hand_over: Callable[[], None] = lambda: None) -> None:
    """Serve until the client closes standard input. A bad token fails here, before serving
    (Unauthenticated); each call checks it again, so revoking it takes effect at once."""
    svc.authenticate(token)
    server = build_server(svc, token)
    hand_over()
    anyio.run(server.run_stdio_async)
