"""MCP tools for agents: every tool of the three seed documents, over stdio (`rag mcp`) and
streamable HTTP (rag/mcp/http.py, mounted by the HTTP API at /mcp). See docs/mcp.md."""

from rag.mcp.server import TOOLS, build_server

__all__ = ["TOOLS", "build_server"]
