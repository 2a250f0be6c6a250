"""Errors as MCP tool error results, mapped once for every tool.

A RagError's message is written for the caller and goes out as it is (with the tool's documented
prefix, `Tool failed: ` for knowledge_search_and_ask.txt's tools). Anything else is unanticipated:
the caller gets search_knowledge_base.txt's generic message and the traceback goes to the log
only, so a database error or the query text that caused it never reaches the caller.

The result is built here rather than by raising the SDK's ToolError, because the SDK puts
`Error executing tool <name>: ` in front of a ToolError's message and the documents' messages
must arrive word for word.
"""

from __future__ import annotations

import logging

from mcp_types import CallToolResult, TextContent

from rag.errors import STORAGE_FULL, RagError, is_storage_full
from rag.service.query.kb_search import UNEXPECTED

log = logging.getLogger("rag.mcp")


def error_result(tool: str, exc: BaseException, prefix: str = "") -> CallToolResult:
    if isinstance(exc, RagError):
        log.info("tool %s refused: %s", tool, exc.code)  # the code only: a message may echo an argument
        message = exc.message
    else:
        log.error("tool %s failed unexpectedly", tool, exc_info=(type(exc), exc, exc.__traceback__))
        # A full disk is the operator's to fix, and saying so tells the caller to retry later.
        message = STORAGE_FULL if is_storage_full(exc) else UNEXPECTED
    return CallToolResult(content=[TextContent(type="text", text=prefix + message)], is_error=True)
