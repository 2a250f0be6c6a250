"""Logging: full detail (tracebacks included) to a file under RAG_HOME, brief warnings to stderr."""

from __future__ import annotations

import logging
import logging.handlers
import warnings
from pathlib import Path


def configure(home: Path, verbose: bool = False) -> Path:
    log_dir = home / "logs"
    log_dir.mkdir(parents=True, exist_ok=True)
    path = log_dir / "rag.log"
    root = logging.getLogger()
    if not any(getattr(h, "_rag", False) for h in root.handlers):
        handler = logging.handlers.RotatingFileHandler(path, maxBytes=10_000_000, backupCount=3)
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
        handler._rag = True  # type: ignore[attr-defined]
        root.addHandler(handler)
        root.setLevel(logging.INFO)
        for noisy in ("httpx", "chromadb", "sentence_transformers", "urllib3", "alembic"):
            logging.getLogger(noisy).setLevel(logging.WARNING)
    if not verbose:
        warnings.filterwarnings("ignore", category=FutureWarning)
        warnings.filterwarnings("ignore", category=DeprecationWarning)
    return path
