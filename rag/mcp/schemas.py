"""JSON schemas of the tools: small builders for the input schemas, and output schemas derived
from the result types, so a field is declared once (in the view or the TypedDict) and its schema
follows.

Input schemas say every documented bound. Where a document clamps a value, falls back to a
default or answers with its own message (search_knowledge's `limit`, search_knowledge_base's
`top_k` and `query`), the schema states the bound in words but still accepts the value, so that
the service applies the document's rule and its message reaches the caller word for word.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from pydantic import TypeAdapter

from rag.service.checks import MAX_ID_CHARS, MAX_INT


def string(description: str, **extra: Any) -> dict[str, Any]:
    return {"type": "string", "description": description, **extra}


def integer(description: str, **extra: Any) -> dict[str, Any]:
    """An integer; the service takes none above MAX_INT (2^31 - 1), whatever the tool's own bound."""
    return {"type": "integer", "description": description, "maximum": MAX_INT, **extra}


def nullable(schema: dict[str, Any]) -> dict[str, Any]:
    kinds = schema["type"] if isinstance(schema["type"], list) else [schema["type"]]
    return {**schema, "type": [*kinds, "null"]}


def node_id(description: str = "The node id (`n_…`) of the document or folder.") -> dict[str, Any]:
    # Node ids only: a knowledge id (source_id/document_id of search_knowledge) is never one.
    return string(description + " A node id, never a knowledge id (`source_id`/`document_id`).",
                  minLength=1, maxLength=MAX_ID_CHARS)


DOCUMENT_ID = node_id("The document's node id.")
FOLDER_ID = node_id("The folder's node id.")


def inputs(properties: dict[str, dict[str, Any]], required: tuple[str, ...] = ()) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "object", "properties": properties}
    if required:
        schema["required"] = list(required)
    return schema


def query_and_limit(query: str, maximum: int, default: int) -> dict[str, Any]:
    """The inputs of a search: a required query and a limit whose bounds are enforced."""
    limit = integer(f"Maximum results, 1 to {maximum}.", minimum=1, maximum=maximum, default=default)
    return inputs({"query": string(query), "limit": limit}, required=("query",))


def lenient(bounded: dict[str, Any], description: str, default: int) -> dict[str, Any]:
    """A value whose bounds the schema states (first branch) while still accepting anything (the
    empty second branch): the document's own rule, applied by the service, decides what happens to
    it (clamped, defaulted, or refused with a message naming the bound)."""
    return {"anyOf": [bounded, {}], "default": default, "description": description}


@lru_cache(maxsize=None)
def output_schema(output_type: Any) -> dict[str, Any]:
    """The JSON schema of what a tool returns, as serialised (datetimes are ISO 8601 strings)."""
    schema = TypeAdapter(output_type).json_schema(mode="serialization")
    ref = schema.get("$ref", "")
    if ref.startswith("#/$defs/"):  # a recursive root (TreeNode): MCP wants an object at the root
        schema = {**schema["$defs"][ref.removeprefix("#/$defs/")], "$defs": schema["$defs"]}
    return schema
