"""The embedded default (SQLite file + embedded Chroma) belongs to one process at a time.

Embedded Chroma does not see another process's writes, so a second process would read stale
vectors or overwrite the first one's. Readers take a shared lock, writers an exclusive one; the
holder writes its pid and command line next to the lock so the refusal can name it.
"""

from __future__ import annotations

import fcntl
import json
import os
import sys
from pathlib import Path

from rag.errors import StoreLocked


class HomeLock:
    def __init__(self, home: Path) -> None:
        self.home = home
        self.path = home / "rag.lock"
        self._fd: int | None = None
        self.exclusive = False

    def acquire(self, exclusive: bool) -> None:
        self.home.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, (fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH) | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise StoreLocked(self._refusal(exclusive)) from None
        self._fd, self.exclusive = fd, exclusive
        if exclusive:
            self._holder_file().write_text(json.dumps({"pid": os.getpid(), "command": " ".join(sys.argv)}))

    def release(self) -> None:
        if self._fd is None:
            return
        if self.exclusive:
            self._holder_file().unlink(missing_ok=True)
        fcntl.flock(self._fd, fcntl.LOCK_UN)
        os.close(self._fd)
        self._fd = None

    def _holder_file(self) -> Path:
        return self.home / "rag.lock.holder"

    def _refusal(self, exclusive: bool) -> str:
        try:
            holder = json.loads(self._holder_file().read_text())
            who = f"process {holder['pid']} ({holder['command']})"
        except (OSError, ValueError, KeyError):
            who = "another process (reading it)" if exclusive else "another process"
        return (
            f"The knowledge store in {self.home} is in use by {who}. The embedded store belongs to one "
            "process at a time: stop that process, use another RAG_HOME, or run the scale-out deployment "
            "(RAG_DATABASE_URL and RAG_CHROMA_URL) for several processes."
        )
