"""The embedded default (SQLite file + embedded Chroma) belongs to one process at a time.

Embedded Chroma does not see another process's writes, so a second process would read stale
vectors or overwrite the first one's. Readers take a shared lock, writers an exclusive one; the
holder writes its pid and command line next to the lock so the refusal can name it.

A server (`rag serve`) that holds the store also says where it listens, and writes a secret in a
file only the owner of RAG_HOME can read (mode 0600): the local CLI reads both and has the server
run its commands (rag/client.py), proving with the secret that it may act for RAG_HOME.
"""

from __future__ import annotations

import fcntl
import json
import os
import secrets
import sys
from pathlib import Path
from typing import Mapping

from rag.errors import StoreLocked
from rag.store.home import FILE_MODE, make_private


class HomeLock:
    def __init__(self, home: Path) -> None:
        self.home = home
        self.path = home / "rag.lock"
        self._fd: int | None = None
        self.exclusive = False

    def acquire(self, exclusive: bool) -> None:
        make_private(self.home)  # before anything is opened in it: 0700, and an older home repaired
        # The owner's alone (0600 in a 0700 home): another user holding it would keep the store
        # from opening. Never through a link someone planted in its place.
        try:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, FILE_MODE)
        except OSError as exc:
            raise StoreLocked(f"The knowledge store's lock {self.path} cannot be opened ({exc.strerror}): it must "
                              "be a plain file of RAG_HOME's owner; remove it if it is a link.") from None
        try:
            fcntl.flock(fd, (fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH) | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise StoreLocked(self._refusal(exclusive)) from None
        self._fd, self.exclusive = fd, exclusive
        if exclusive:
            _write_private(self._holder_file(), json.dumps({"pid": os.getpid(), "command": " ".join(sys.argv)}))

    def release(self) -> None:
        if self._fd is None:
            return
        if self.exclusive:
            self._holder_file().unlink(missing_ok=True)
            secret_file(self.home).unlink(missing_ok=True)
        fcntl.flock(self._fd, fcntl.LOCK_UN)
        os.close(self._fd)
        self._fd = None

    def _holder_file(self) -> Path:
        return holder_file(self.home)

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


def default_home() -> Path:
    """RAG_HOME when the environment sets none."""
    import platformdirs

    return Path(platformdirs.user_data_dir("rag", appauthor=False))


def configured_home(environ: Mapping[str, str] | None = None) -> tuple[Path, bool]:
    """(home, embedded) as rag.settings.Settings reads them from the `RAG_` variables (any case),
    without loading the settings: pydantic takes a good part of a second to import, and a command
    that a running server runs for the CLI needs nothing else from them. The configuration file
    (RAG_CONFIG) and RAG_DATABASE_URL_FILE count as they do there (rag/config_file.py)."""
    from rag.config_file import configured

    home = configured("home", environ)
    database_url, chroma_url = configured("database_url", environ, secret=True), configured("chroma_url", environ)
    home = Path(home) if isinstance(home, str) else default_home()
    database_url = database_url if isinstance(database_url, str) else None
    return home, not database_url or database_url.startswith("sqlite") or not chroma_url


def holder_file(home: Path) -> Path:
    return home / "rag.lock.holder"


def secret_file(home: Path) -> Path:
    return home / "rag.lock.secret"


def announce_server(home: Path, url: str) -> str:
    """Called by the server that holds the store exclusively: record where it listens, and make a
    new secret (readable by the owner alone) that the local CLI proves itself with. Returns it."""
    secret = "ragl_" + secrets.token_urlsafe(32)
    path = secret_file(home)
    path.unlink(missing_ok=True)  # O_EXCL below: never write into a file someone else prepared
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, FILE_MODE)
    with os.fdopen(fd, "w") as file:
        file.write(secret)
    holder = holder_file(home)
    try:
        record = json.loads(holder.read_text())
    except (OSError, ValueError):
        record = {"pid": os.getpid(), "command": " ".join(sys.argv)}
    _write_private(holder, json.dumps(record | {"url": url}))
    return secret


def _write_private(path: Path, text: str) -> None:
    """Write `text` to a file of the owner's alone (0600), never through a link."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, FILE_MODE)
    with os.fdopen(fd, "w") as file:
        file.write(text)


def running_server(home: Path) -> tuple[str, str] | None:
    """(url, secret) of the server that holds the store, when one does and this user can read its
    secret; None otherwise (nobody holds it, a one-shot command does, or the secret is not ours)."""
    try:
        fd = os.open(home / "rag.lock", os.O_RDONLY | os.O_NOFOLLOW)
    except OSError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        pass  # held exclusively: by a writer, perhaps a server
    else:
        fcntl.flock(fd, fcntl.LOCK_UN)
        return None
    finally:
        os.close(fd)
    try:
        url = json.loads(holder_file(home).read_text())["url"]
        secret = secret_file(home).read_text().strip()
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return (url, secret) if isinstance(url, str) and secret else None
