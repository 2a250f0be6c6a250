"""uvicorn's access log without query strings: a URL's query may carry a token (`?token=rag_…`,
refused, but logged before the refusal) or a user's words (name search, `?q=…`). Each line keeps
the method, the path and the status; nothing after the `?`."""

from __future__ import annotations

import copy
import logging
from typing import Any

from uvicorn.config import LOGGING_CONFIG


def redact_target(target: object) -> object:
    """The request target as logged: its path, with any query replaced by `?…`."""
    if isinstance(target, str) and "?" in target:
        return target.split("?", 1)[0] + "?…"
    return target


class RedactQuery(logging.Filter):
    """On uvicorn.access records, whose args are (client, method, target, http version, status)."""

    def filter(self, record: logging.LogRecord) -> bool:
        args = record.args
        if isinstance(args, tuple) and len(args) >= 3:
            record.args = args[:2] + (redact_target(args[2]),) + args[3:]
        return True


def log_config(json_lines: bool = False) -> dict[str, Any]:
    """uvicorn's own logging configuration with the filter on its access handler (each worker
    process applies it at start-up). `json_lines`: uvicorn's lines too are JSON on standard
    output, with the request id and principal (rag/logs.py), as `rag serve`'s own log then is."""
    config = copy.deepcopy(LOGGING_CONFIG)
    filters = config.setdefault("filters", {})
    filters["redact_query"] = {"()": "rag.api.access_log.RedactQuery"}
    config["handlers"]["access"]["filters"] = ["redact_query"]
    if json_lines:
        filters["request"] = {"()": "rag.logs.RequestContext"}
        config["formatters"]["json"] = {"()": "rag.logs.JsonFormatter"}
        for handler in config["handlers"].values():
            handler.update(formatter="json", stream="ext://sys.stdout")
            handler["filters"] = [*handler.get("filters", []), "request"]
    return config
