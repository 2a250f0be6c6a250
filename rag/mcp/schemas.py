"""Output schemas of the tools, derived from the result types, so a field is declared once (in the
view or the TypedDict) and its schema follows.

The input schemas are the declarations of rag/service/arguments.py (`Operation.input_schema`),
which the HTTP API's models are built from too.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from pydantic import TypeAdapter


@lru_cache(maxsize=None)
def output_schema(output_type: Any) -> dict[str, Any]:
    """The JSON schema of what a tool returns, as serialised (datetimes are ISO 8601 strings)."""
    schema = TypeAdapter(output_type).json_schema(mode="serialization")
    ref = schema.get("$ref", "")
    if ref.startswith("#/$defs/"):  # a recursive root (TreeNode): MCP wants an object at the root
        schema = {**schema["$defs"][ref.removeprefix("#/$defs/")], "$defs": schema["$defs"]}
    return schema
