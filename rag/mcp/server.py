"""The MCP server: every tool of the three seed documents, registered with the SDK (`MCPServer`).

Each call finds its caller (the principal an HTTP bearer token gave the request, else the token
this server was started with, checked again at every call so a revoked token stops working at
once), runs the tool's handler over the service in a worker thread (the service is synchronous),
and returns the structured content with its text block, or a tool error result.

Arguments reach the service exactly as sent: the SDK's own validation is bypassed on purpose, so
that the documents' rules (clamping, defaults, their own messages) are applied by the service, the
one place that checks them for every surface. The input schemas are the declarations of
rag/service/arguments.py, from which the HTTP API's models are built too, so both surfaces
document the same bounds and the same bad input gets the same message on both.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable

import anyio
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.tools import Tool
from mcp.server.mcpserver.utilities.func_metadata import ArgModelBase, FuncMetadata
from mcp_types import CallToolResult, TextContent, ToolAnnotations

from rag import __version__
from rag.mcp.errors import error_result
from rag.mcp.schemas import output_schema
from rag.mcp.spec import Call, ToolSpec
from rag.mcp.tools_knowledge import KNOWLEDGE_TOOLS
from rag.mcp.tools_read import READ_TOOLS
from rag.mcp.tools_write import WRITE_TOOLS

if TYPE_CHECKING:
    from rag.service import KnowledgeService, Principal

TOOLS: tuple[ToolSpec, ...] = KNOWLEDGE_TOOLS + READ_TOOLS + WRITE_TOOLS
PRINCIPAL_KEY = "rag.principal"  # where rag/mcp/http.py leaves the bearer token's principal in the ASGI scope
CURRENT_NODE_HEADER = "x-current-node"
CURRENT_NODE_META = "current_node_id"

INSTRUCTIONS = (
    "An organisation's knowledge base. ask_knowledge answers a question with cited sources; search_knowledge and "
    "search_knowledge_base return ranked excerpts. The document and folder tools (search_documents, get_document, "
    "list_children, create_document, publish_document_version, ...) address nodes by node_id (n_...); the "
    "source_id/document_id of search_knowledge is a knowledge id and is never a node id. Content you write is a "
    "draft until you publish it."
)


class _RawArguments(FuncMetadata):
    """Hands a tool its arguments as the client sent them (see the module docstring)."""

    def validate_arguments(self, arguments_to_validate: dict[str, Any]) -> dict[str, Any]:
        return {"arguments": dict(arguments_to_validate)}


def request_principal(ctx: Context) -> Principal | None:
    """The principal rag/mcp/http.py authenticated for this HTTP request; None on stdio."""
    scope = getattr(ctx.request_context.request, "scope", None)
    return scope.get(PRINCIPAL_KEY) if isinstance(scope, dict) else None


def current_node(ctx: Context) -> object:
    """The node the person is viewing: `current_node_id` in the request's `_meta`, else the
    X-Current-Node header of the HTTP request. The service decides what of it to believe."""
    meta = ctx.request_context.meta or {}
    if meta.get(CURRENT_NODE_META) is not None:
        return meta[CURRENT_NODE_META]
    headers = ctx.headers
    return headers.get(CURRENT_NODE_HEADER) if headers is not None else None


def _sdk_tool(spec: ToolSpec, svc: KnowledgeService, token: str | None, ready: Callable[[], None]) -> Tool:
    def invoke(arguments: dict[str, Any], principal: Principal | None, node: object) -> CallToolResult:
        try:
            ready()
            if principal is None:
                principal = svc.authenticate(token)
            output = spec.execute(Call(svc, principal, arguments, node))
        except Exception as exc:  # noqa: BLE001 - every failure becomes a tool error result
            return error_result(spec.name, exc, spec.error_prefix)
        return CallToolResult(
            content=[TextContent(type="text", text=output.text)], structured_content=output.structured
        )

    async def handler(arguments: dict[str, Any], ctx: Context) -> CallToolResult:
        return await anyio.to_thread.run_sync(invoke, arguments, request_principal(ctx), current_node(ctx))

    hints = spec.hints
    return Tool(
        fn=handler,
        name=spec.name,
        title=spec.title,
        description=spec.description,
        parameters=spec.input_schema,
        fn_metadata=_RawArguments(arg_model=ArgModelBase, output_schema=output_schema(spec.output_type)),
        is_async=True,
        context_kwarg="ctx",
        annotations=ToolAnnotations(
            title=spec.title, read_only_hint=hints.read_only, destructive_hint=hints.destructive,
            idempotent_hint=hints.idempotent, open_world_hint=hints.open_world,
        ),
    )


def build_server(svc: KnowledgeService, token: str | None = None,
                 ready: Callable[[], None] | None = None) -> MCPServer:
    """The MCP server over this service. `token`: the bearer secret stdio and in-process callers
    act with; over HTTP each request brings its own (rag/mcp/http.py) and `token` stays None.
    `ready`: run by every tool call before it acts, from worker threads at once (rag/mcp/stdio.py
    finishes opening the service there); without it the engines are built now."""
    if ready is None:
        # The engines are built now, once: tool calls run in worker threads at the same time, and
        # the service builds them lazily with cached_property, which has no lock. (The model itself
        # loads on first use, behind its own lock.)
        svc.retriever, svc.synthesizer  # noqa: B018
    return MCPServer(
        name="rag", title="Knowledge base", instructions=INSTRUCTIONS, version=__version__,
        tools=[_sdk_tool(spec, svc, token, ready or _ready) for spec in TOOLS],
    )


def _ready() -> None:
    return None
