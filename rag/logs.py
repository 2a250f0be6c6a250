"""Logging: full detail (tracebacks included) to a file under RAG_HOME, brief warnings to stderr;
`rag serve` may write to standard output instead, as JSON lines (LogSettings, rag/settings.py).

Every line carries the request it was written for: `request_id` (the caller's `X-Request-ID` when
it sent a well-formed one, else one made here; rag/api/request_id.py sets it and returns it on the
response) and `principal`, the id of whoever the request's token belongs to once it is known.
Outside a request both are "-". Neither the query nor any token is ever put on a line.
"""

from __future__ import annotations

import contextvars
import json
import logging
import logging.handlers
import os
import sys
import time
import warnings
from pathlib import Path
from typing import Any

from rag.store.home import DIR_MODE, FILE_MODE, make_private

TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s [%(request_id)s %(principal)s]: %(message)s"
NOISY = ("httpx", "chromadb", "sentence_transformers", "urllib3", "alembic")

# The request being served: {"id": ..., "principal": ...}. A dict, filled as the request goes on
# (the principal once its token is checked), and shared with the threads the request's context is
# copied to.
current: contextvars.ContextVar[dict[str, str | None] | None] = contextvars.ContextVar("rag_request", default=None)


def set_principal(principal_id: str | None) -> None:
    """The request's caller, once authenticated (rag/api/auth.py, the MCP endpoint)."""
    request = current.get()
    if request is not None:
        request["principal"] = principal_id


class RequestContext(logging.Filter):
    """Puts the current request's id and principal on each record a handler writes."""

    def filter(self, record: logging.LogRecord) -> bool:
        request = current.get() or {}
        record.request_id = request.get("id") or "-"
        record.principal = request.get("principal") or "-"
        return True


class JsonFormatter(logging.Formatter):
    """One JSON object a line: time (UTC, ISO 8601), level, logger, message, request_id,
    principal, and `exception` (the traceback) when there is one."""

    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, Any] = {
            "time": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created)) + f".{int(record.msecs):03d}Z",
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
            "request_id": getattr(record, "request_id", "-"),
            "principal": getattr(record, "principal", "-"),
        }
        if record.name == "uvicorn.access" and isinstance(record.args, tuple) and len(record.args) == 5:
            _client, line["method"], line["path"], _version, line["status"] = record.args  # the path redacted
        if record.exc_info:
            line["exception"] = self.formatException(record.exc_info)
        return json.dumps(line, ensure_ascii=False)


class _PrivateFileHandler(logging.handlers.RotatingFileHandler):
    """The log (and each file it rolls over to) is made 0600, whatever the process's umask."""

    def _open(self):  # type: ignore[override]
        fd = os.open(self.baseFilename, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW, FILE_MODE)
        return open(fd, self.mode, encoding=self.encoding, errors=self.errors)


def _formatter(json_lines: bool) -> logging.Formatter:
    return JsonFormatter() if json_lines else logging.Formatter(TEXT_FORMAT)


def _install(handler: logging.Handler, json_lines: bool) -> None:
    handler.setFormatter(_formatter(json_lines))
    handler.addFilter(RequestContext())
    handler._rag = True  # type: ignore[attr-defined]
    root = logging.getLogger()
    root.addHandler(handler)
    root.setLevel(logging.INFO)
    for noisy in NOISY:
        logging.getLogger(noisy).setLevel(logging.WARNING)


def configure(home: Path, verbose: bool = False, json_lines: bool = False) -> Path:
    """The log file under home (every command's, `rag mcp`'s, and `rag serve`'s unless it logs to
    standard output: then this adds no file)."""
    log_dir = home / "logs"
    home.mkdir(mode=DIR_MODE, parents=True, exist_ok=True)
    log_dir.mkdir(mode=DIR_MODE, exist_ok=True)  # the log names sessions: the owner's alone
    path = log_dir / "rag.log"
    if not any(getattr(h, "_rag", False) for h in logging.getLogger().handlers):
        _install(_PrivateFileHandler(path, maxBytes=10_000_000, backupCount=3), json_lines)
    make_private(home)  # an older home repaired, once (said in the log just opened, and on stderr)
    if not verbose:
        warnings.filterwarnings("ignore", category=FutureWarning)
        warnings.filterwarnings("ignore", category=DeprecationWarning)
    return path


def serving_destination(settings: Any) -> tuple[str, bool]:
    """(`stdout` or `file`, JSON or not) for `rag serve` under `settings.log`."""
    to = settings.log.to
    if to == "auto":
        to = "file" if sys.stdout.isatty() else "stdout"
    json_lines = settings.log.format == "json" or (settings.log.format == "auto" and to == "stdout")
    return to, json_lines


def configure_serving(settings: Any) -> None:
    """`rag serve` (and each of its workers): the log where LogSettings says. Called before
    configure(), which then adds no file when standard output was chosen."""
    to, json_lines = serving_destination(settings)
    if to == "stdout":
        if not any(getattr(h, "_rag", False) for h in logging.getLogger().handlers):
            _install(logging.StreamHandler(sys.stdout), json_lines)
    else:
        configure(settings.home, json_lines=json_lines)
