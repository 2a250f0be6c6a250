"""A source's lease names its holder (`host:pid:nonce`); a holder on this host whose process is gone
(killed with kill -9) leaves its source `stale`, not `running`, and the next sync takes it at once
(issue 49, 8(c)). The whole kill -9 path, through `rag source sync`, is
tests/e2e/test_sources_processes.py."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys

from rag.service.sources.manage import holder_gone


def _owner(pid: int, host: str | None = None) -> str:
    return f"{host or socket.gethostname()}:{pid}:0123abcd"


def test_a_holder_killed_and_reaped_is_gone_a_running_one_is_not() -> None:
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        assert not holder_gone(_owner(child.pid))
        assert not holder_gone(_owner(os.getpid()))  # this process holds it: alive
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait(timeout=30)
    assert holder_gone(_owner(child.pid))


def test_a_killed_holder_not_yet_reaped_is_gone() -> None:
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        child.send_signal(signal.SIGKILL)
        os.waitid(os.P_PID, child.pid, os.WEXITED | os.WNOWAIT)  # dead, a zombie until reaped
        assert holder_gone(_owner(child.pid))
    finally:
        child.wait(timeout=30)


def test_a_holder_on_another_host_or_unreadable_is_not_known_gone() -> None:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait(timeout=30)
    assert not holder_gone(_owner(child.pid, host="another-host"))
    for owner in (None, "", "garbage", f"{socket.gethostname()}:notapid:x"):
        assert not holder_gone(owner)
