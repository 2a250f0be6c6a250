"""Logging: full detail (tracebacks included) to a file under RAG_HOME, brief warnings to stderr."""

from __future__ import annotations

import logging
import logging.handlers
import os
import warnings
from pathlib import Path

from rag.store.home import DIR_MODE, FILE_MODE, make_private


class _PrivateFileHandler(logging.handlers.RotatingFileHandler):
    """The log (and each file it rolls over to) is made 0600, whatever the process's umask."""

    def _open(self):  # type: ignore[override]
        fd = os.open(self.baseFilename, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW, FILE_MODE)
        return open(fd, self.mode, encoding=self.encoding, errors=self.errors)


def configure(home: Path, verbose: bool = False) -> Path:
    log_dir = home / "logs"
    home.mkdir(mode=DIR_MODE, parents=True, exist_ok=True)
    log_dir.mkdir(mode=DIR_MODE, exist_ok=True)  # the log names sessions: the owner's alone
    path = log_dir / "rag.log"
    root = logging.getLogger()
    if not any(getattr(h, "_rag", False) for h in root.handlers):
        handler = _PrivateFileHandler(path, maxBytes=10_000_000, backupCount=3)
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
        handler._rag = True  # type: ignore[attr-defined]
        root.addHandler(handler)
        root.setLevel(logging.INFO)
        for noisy in ("httpx", "chromadb", "sentence_transformers", "urllib3", "alembic"):
            logging.getLogger(noisy).setLevel(logging.WARNING)
    make_private(home)  # an older home repaired, once (said in the log just opened, and on stderr)
    if not verbose:
        warnings.filterwarnings("ignore", category=FutureWarning)
        warnings.filterwarnings("ignore", category=DeprecationWarning)
    return path
