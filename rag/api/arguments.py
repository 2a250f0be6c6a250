"""The HTTP API's request bodies and path and query parameters, built from the declarations of
rag/service/arguments.py, as the MCP tools' input schemas are: one source for both surfaces.

FastAPI checks the shape of a request only: a body that is a JSON object without unknown fields,
each value of its declared JSON type (422 otherwise, naming the field and the type). Everything else
reaches the service as sent, which answers it as it answers the MCP tools, word for word: a bound
broken (a name too long, a limit out of range, a version number of 0), a blank or missing required
argument (null and absent both arrive as None), an id that no id can be (404 `not found`). The
OpenAPI document still states every declared bound, so that a client knows them in advance.
"""

from __future__ import annotations

from typing import Annotated, Any, Callable, ClassVar, Self

from fastapi import Path, Query
from pydantic import AfterValidator, BaseModel, ConfigDict, Field, GetJsonSchemaHandler, create_model, model_validator
from pydantic.json_schema import JsonSchemaValue
from pydantic_core import CoreSchema, PydanticCustomError

from rag.service.arguments import NO_DEFAULT, OPERATIONS, Arg, Operation
from rag.service.checks import encodable


def _unicode(value: str) -> str:
    """JSON can escape half of a UTF-16 pair (`\\ud800`) and json.loads passes it on: that is no
    Unicode text, and no store can hold it, so it is refused as a value of the wrong type (422).
    (The MCP transports' JSON parser refuses it before any tool runs.)"""
    if not encodable(value):
        raise PydanticCustomError("string_unicode", "Input should be a valid string")
    return value


_TYPES: dict[str, Any] = {
    "string": Annotated[str, AfterValidator(_unicode)], "integer": int, "number": float, "boolean": bool,
    "object": dict[str, Any], "array": list[Any],
}


def value_type(arg: Arg) -> Any:
    """The type FastAPI checks a value against: the declared JSON type or None (absent and null
    both reach the service, whose message names what is missing). A lenient argument takes any
    value: its operation's own rule decides (search_knowledge's `limit` is clamped)."""
    return Any if arg.lenient else _TYPES[arg.type] | None


def _documented(arg: Arg) -> Callable[[dict[str, Any]], None]:
    """The parameter's schema as declared (its description is the parameter's own), in place of
    the one FastAPI derives from the Python type."""
    def replace(schema: dict[str, Any]) -> None:
        schema.clear()
        schema.update({key: value for key, value in arg.schema().items() if key != "description"})

    return replace


def path_param(arg: Arg) -> Any:
    """`Annotated[type, Path(…)]` for a declared argument in the path (always there: a path with
    an empty segment matches no route)."""
    return Annotated[_TYPES[arg.type], Path(description=arg.described(), json_schema_extra=_documented(arg))]


def query_param(arg: Arg) -> Any:
    """`Annotated[type | None, Query(…)]` for a declared argument in the query string. Give it its
    declared default (`arg.default`), or None when it has none, so that a required one left out
    reaches the service, which names it."""
    return Annotated[value_type(arg), Query(description=arg.described(), json_schema_extra=_documented(arg))]


class Strict(BaseModel):
    """Unknown fields are refused (422), so a misspelt option never passes silently."""

    model_config = ConfigDict(extra="forbid")


class Arguments(Strict):
    """A request body of declared arguments (see request_body)."""

    operation: ClassVar[Operation]

    @model_validator(mode="after")
    def _present(self) -> Self:
        # set_summary's `summary` and set_metadata's `metadata`: left out is refused, null clears.
        self.operation.check_present(self.model_fields_set)
        return self

    @classmethod
    def __get_pydantic_json_schema__(cls, core_schema: CoreSchema, handler: GetJsonSchemaHandler) -> JsonSchemaValue:
        """The declared schemas and requirements of the operation's arguments, rather than those of
        the Python types (which accept null and absence, for the service to answer them)."""
        schema = handler.resolve_ref_schema(handler(core_schema))
        declared = cls.operation.input_schema()
        own = {name: value for name, value in schema.get("properties", {}).items() if name not in cls.operation}
        schema["properties"] = declared["properties"] | own
        required = declared.get("required", []) + [name for name in schema.get("required", []) if name in own]
        schema.pop("required", None)
        if required:
            schema["required"] = required
        return schema


def request_body(name: str, operation: Operation, description: str, **more: Any) -> type[Arguments]:
    """The JSON body of an endpoint: the operation's arguments (all of them: use Operation.only
    for fewer), and `more` fields of the endpoint's own (`(type, Field(…))`, as for create_model)."""
    fields: dict[str, Any] = {
        arg.name: (value_type(arg), Field(None if arg.default is NO_DEFAULT else arg.default))
        for arg in operation.args
    }
    model = create_model(name, __base__=Arguments, __doc__=description, **fields, **more)
    model.operation = operation
    return model


def required_as_declared(openapi: dict[str, Any]) -> dict[str, Any]:
    """FastAPI documents a parameter with a default as optional; a query parameter declared
    required (search_nodes_by_name's `query`) has the default None so that, missing, it reaches the
    service for its message, and is documented as required here. Routes name their operation by
    operationId."""
    for path_item in openapi.get("paths", {}).values():
        for operation in path_item.values():
            declared = OPERATIONS.get(operation.get("operationId")) if isinstance(operation, dict) else None
            for parameter in operation.get("parameters", []) if declared else ():
                if parameter["name"] in declared and declared[parameter["name"]].required:
                    parameter["required"] = True
    return openapi
