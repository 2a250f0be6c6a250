"""RAG_HOME is its owner's alone: the store's documents, token hashes, editor sessions and the log
of session ids are in it (issue 27). Every entry point that writes it sets the umask (`private_umask`),
so what is created there is 0700 (folders) / 0600 (files); `make_private` repairs a home made before
that, once per process and home, and says so in one line. The embedding cache, which may live
outside the home, is made private by `private_file`: its file and SQLite's -wal/-shm beside it,
never the folder the user chose for it.
"""

from __future__ import annotations

import logging
import os
import stat
import sys
import threading
from pathlib import Path

log = logging.getLogger(__name__)

UMASK = 0o077
DIR_MODE = 0o700
FILE_MODE = 0o600
SQLITE_SIBLINGS = ("-wal", "-shm", "-journal")

_done: set[str] = set()
_done_lock = threading.Lock()


def private_umask() -> None:
    """What this process creates from now on is its owner's alone (an entry point calls it first)."""
    os.umask(UMASK)


def _repair(path: str, mode: int, uid: int) -> bool:
    """Give `path` (not followed when a link) `mode` when it is ours and looser; True when changed."""
    try:
        st = os.lstat(path)
    except OSError:
        return False
    if stat.S_ISLNK(st.st_mode) or st.st_uid != uid or stat.S_IMODE(st.st_mode) & 0o077 == 0:
        return False
    try:
        os.chmod(path, stat.S_IMODE(st.st_mode) & ~0o077 | mode, follow_symlinks=False)
    except (OSError, NotImplementedError):  # a file that vanished, or a system that cannot
        return False
    return True


def make_private(home: Path) -> int:
    """Create `home` 0700 when missing; otherwise (once per process) give every folder and file in
    it that this user owns 0700 / 0600, without following links, and say once how many were open
    to others. Returns that number."""
    key = os.path.abspath(home)
    with _done_lock:
        if key in _done:
            return 0
        _done.add(key)
    home.mkdir(mode=DIR_MODE, parents=True, exist_ok=True)
    uid = os.geteuid()
    changed = _repair(key, DIR_MODE, uid)
    if not os.path.islink(key):
        for top, dirs, files in os.walk(key, followlinks=False):
            changed += sum(_repair(os.path.join(top, name), DIR_MODE, uid) for name in dirs)
            changed += sum(_repair(os.path.join(top, name), FILE_MODE, uid) for name in files)
    if changed:
        message = (f"made RAG_HOME private: {changed} files and folders in {home} were readable by other "
                   "users; they are now the owner's alone (0700 folders, 0600 files)")
        if log.hasHandlers():  # else logging's last resort would print it on stderr a second time
            log.warning(message)
        sys.stderr.write(f"warning: {message}\n")
    return changed


def private_file(path: Path) -> None:
    """An SQLite file this process opens, made its owner's alone before SQLite opens it (SQLite
    gives -wal and -shm the file's own mode): created 0600 when missing, its folder 0700 when this
    makes it, and the file with its siblings repaired when they are ours and looser."""
    path.parent.mkdir(mode=DIR_MODE, parents=True, exist_ok=True)
    try:
        os.close(os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, FILE_MODE))
    except OSError:
        return  # SQLite says what is wrong when it opens it
    uid = os.geteuid()
    for suffix in ("", *SQLITE_SIBLINGS):
        _repair(f"{path}{suffix}", FILE_MODE, uid)
