"""Helpers of the tests that run servers as processes (`rag serve`, workers): a free port, a `rag`
process, waiting for /healthz or a condition, and watching a socket until the server closes it."""

from __future__ import annotations

import os
import select
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable, Iterator, NamedTuple

import httpx

# The leave page of the small handbook set, as the API names it.
LEAVE_DOC = "fs:default:default:travel-and-leave/leave.md"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def rag_process(home: Path, *args: str, **kwargs) -> subprocess.Popen:
    """`rag ARGS` with RAG_HOME=home, its output piped."""
    env = {**os.environ, "RAG_HOME": str(home)}
    return subprocess.Popen([sys.executable, "-m", "rag.cli", *args], env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, **kwargs)


def rag_run(home: Path, *args: str) -> subprocess.CompletedProcess:
    """`rag ARGS` run to its end with RAG_HOME=home, its output captured."""
    env = {**os.environ, "RAG_HOME": str(home)}
    return subprocess.run([sys.executable, "-m", "rag.cli", *args], capture_output=True, text=True, env=env, timeout=600)


def wait_for_health(url: str, server: subprocess.Popen, why: Callable[[], str], seconds: float = 300) -> None:
    """Until `rag serve` answers /healthz; `why` says what went wrong when it stops first."""
    deadline = time.monotonic() + seconds
    while True:
        assert server.poll() is None, f"rag serve stopped: {why()[-3000:]}"
        try:
            if httpx.get(f"{url}/healthz", timeout=5).status_code == 200:
                return
        except httpx.TransportError:
            pass
        assert time.monotonic() < deadline, "rag serve did not answer /healthz"
        time.sleep(0.2)


def wait_until(condition, timeout: float = 120.0, what: str = "the condition"):
    deadline = time.monotonic() + timeout
    while not (found := condition()):
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)
    return found


def readable(sock: socket.socket, seconds: float) -> bool:
    """Whether `sock` has data (or its end) within `seconds`: poll, not select, which refuses the
    descriptors above 1023 a long test session holds."""
    poller = select.poll()
    poller.register(sock, select.POLLIN)
    return bool(poller.poll(seconds * 1000))


def closed_by_server(sock: socket.socket, seconds: float) -> tuple[float | None, bytes]:
    """Seconds until the server closed `sock` (None: still open after `seconds`), and what it sent."""
    start, got = time.monotonic(), b""
    deadline = start + seconds
    while (left := deadline - time.monotonic()) > 0:
        if readable(sock, min(left, 0.5)):
            try:
                data = sock.recv(65536)
            except ConnectionResetError:
                return time.monotonic() - start, got
            if not data:
                return time.monotonic() - start, got
            got += data
    return None, got


class Proc(NamedTuple):
    pid: int
    name: str
    state: str  # "Z": a zombie, dead but not reaped
    ppid: int


def processes() -> Iterator[Proc]:
    """Every process of this machine as /proc/PID/stat tells it (one gone meanwhile is left out)."""
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            name, rest = stat[stat.index("(") + 1:stat.rindex(")")], stat[stat.rindex(")") + 2:].split()
            yield Proc(int(entry.name), name, rest[0], int(rest[1]))
