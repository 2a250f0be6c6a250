"""What one MCP tool is, independent of the SDK: its name, description, hints, schemas and handler.

The handler is plain synchronous code over the service (it runs in a worker thread); the SDK
wiring lives in rag/mcp/server.py, so these specs stay easy to read side by side with the seed
documents they implement.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Mapping

from rag.service.arguments import Operation

if TYPE_CHECKING:
    from rag.service import KnowledgeService, Principal


@dataclass(frozen=True)
class Call:
    """One tool call: the service, who is calling, the raw arguments, and the node the person
    is viewing as the request says (X-Current-Node header or `current_node_id` in `_meta`)."""

    svc: KnowledgeService
    principal: Principal
    args: Mapping[str, Any]
    current_node: object = None  # as sent; the service decides what of it to believe

    def arg(self, name: str) -> Any:
        """An argument as sent (None when absent): the service checks it, not the surface."""
        return self.args.get(name)


@dataclass(frozen=True)
class Output:
    """A tool's result: the structured content (matching its output schema) and its text block."""

    structured: dict[str, Any]
    text: str

    @classmethod
    def json(cls, structured: dict[str, Any]) -> "Output":
        """Tools without a documented text rendering: the text block is the structured content as
        JSON, as the MCP specification recommends for clients that read only text."""
        return cls(structured, json.dumps(structured, ensure_ascii=False, indent=2))


@dataclass(frozen=True)
class Hints:
    """The four MCP tool annotations. Every tool here is closed-world: it touches only this
    service's own knowledge base."""

    read_only: bool
    destructive: bool = False
    idempotent: bool = True
    open_world: bool = False


READ = Hints(read_only=True)


@dataclass(frozen=True)
class ToolSpec:
    name: str
    title: str
    description: str
    # The service operation it runs, with the arguments the tool offers (rag/service/arguments.py):
    # its declarations are the input schema, as they are the HTTP API's models.
    operation: Operation
    output_type: Any  # a TypedDict or view dataclass; its JSON schema is the tool's output schema
    hints: Hints
    # None: the service method of the tool's own name, given the operation's arguments as keyword
    # arguments (the node tools of knowledge_base_mcp_server.md are named as the service names them).
    run: Callable[[Call], Output] | None = None
    # knowledge_search_and_ask.txt writes its errors as `Tool failed: <message>`.
    error_prefix: str = ""

    @property
    def input_schema(self) -> dict[str, Any]:
        return self.operation.input_schema()

    def execute(self, call: Call) -> Output:
        self.operation.check_present(call.args)
        if self.run is not None:
            return self.run(call)
        method = getattr(call.svc, self.name)
        result = method(call.principal, **{name: call.arg(name) for name in self.operation.names})
        if isinstance(result, list):  # structured content is an object: a list goes under the output's one key
            (key,) = self.output_type.__required_keys__
            return Output.json({key: [item.payload() for item in result]})
        return Output.json(result.payload())
