"""One declaration of each operation's arguments (rag/service/arguments.py), from which both surfaces
are built: every MCP tool's input schema and every HTTP route's parameters and body say exactly what
the declarations say, so a bound can no longer be written twice and drift (a node id was 64
characters over HTTP and 200 in the service). What each surface then answers for the same bad input
is checked against a live server in tests/e2e/test_input_bounds.py."""

from __future__ import annotations

from typing import Any

import pytest

from rag.api import create_app
from rag.errors import InvalidArgument
from rag.mcp.server import TOOLS
from rag.service.arguments import NAME, OPERATIONS, SEARCH, SET_SUMMARY, Arg, Operation
from rag.service.checks import MAX_ID_CHARS, MAX_INT

# What a route has of its own, beyond its operation's arguments: how the answer is sent.
SURFACE_FIELDS = {"ask": {"stream"}}


def openapi_operations() -> dict[str, tuple[str, dict[str, Any]]]:
    """Each declared operation's route in the served OpenAPI document, by operationId."""
    found: dict[str, tuple[str, dict[str, Any]]] = {}
    for path, item in create_app().openapi()["paths"].items():
        for method, operation in item.items():
            if operation.get("operationId") in OPERATIONS:
                found[operation["operationId"]] = (f"{method.upper()} {path}", operation)
    return found


OPENAPI = create_app().openapi()
ROUTES = openapi_operations()


def documented(arg: Arg) -> dict[str, Any]:
    """What an OpenAPI parameter's schema says of a declared argument (its description is the
    parameter's own; FastAPI adds a title)."""
    return {key: value for key, value in arg.schema().items() if key != "description"}


def numbers_as_floats(value: Any) -> Any:
    """FastAPI's OpenAPI model writes a schema's `minimum` and `maximum` as floats (1.0)."""
    if isinstance(value, dict):
        return {key: float(item) if key in ("minimum", "maximum") else numbers_as_floats(item)
                for key, item in value.items()}
    if isinstance(value, list):
        return [numbers_as_floats(item) for item in value]
    return value


@pytest.mark.parametrize("tool", TOOLS, ids=[tool.name for tool in TOOLS])
def test_every_tool_offers_its_operations_declared_arguments(tool):
    declared = OPERATIONS[tool.operation.name]
    assert all(declared[arg.name] is arg for arg in tool.operation.args), tool.name
    assert tool.input_schema == tool.operation.input_schema()


def test_every_operation_is_on_a_surface():
    tools = {tool.operation.name for tool in TOOLS}
    assert set(OPERATIONS) == tools | set(ROUTES), set(OPERATIONS) - tools - set(ROUTES)


@pytest.mark.parametrize("name", sorted(ROUTES))
def test_every_route_documents_its_operations_declarations(name):
    where, route = ROUTES[name]
    op = OPERATIONS[name]
    for parameter in route.get("parameters", []):
        if parameter["in"] not in ("path", "query"):
            continue
        arg = op[parameter["name"]]
        schema = {key: value for key, value in parameter["schema"].items() if key != "title"}
        assert numbers_as_floats(schema) == numbers_as_floats(documented(arg)), (where, arg.name)
        assert parameter["description"] == arg.described(), (where, arg.name)
        assert parameter["required"] == (arg.required or parameter["in"] == "path"), (where, arg.name)
    content = route.get("requestBody", {}).get("content", {}).get("application/json")
    if content is None:
        return
    body = OPENAPI["components"]["schemas"][content["schema"]["$ref"].rsplit("/", 1)[1]]
    own = set(body["properties"]) - set(op.names)
    assert own <= SURFACE_FIELDS.get(name, set()), (where, own)
    for field, schema in body["properties"].items():
        if field not in own:
            assert numbers_as_floats(schema) == numbers_as_floats(op[field].schema()), (where, field)
    assert [f for f in body.get("required", []) if f not in own] == [a.name for a in op.args if
                                                                     a.name in body["properties"] and a.required]
    assert body["additionalProperties"] is False  # an unknown field is still refused (422)


def test_a_path_id_is_documented_with_the_services_bound():
    """The drift that started this: /v1/documents/{node_id} said 64 characters, the service 200."""
    _, route = ROUTES["get_document"]
    (node_id,) = route["parameters"]
    assert node_id["schema"]["maxLength"] == MAX_ID_CHARS


def test_schemas_of_declarations():
    limit = SEARCH["limit"].schema()  # lenient: the bounds stated, any value accepted
    assert limit["anyOf"] == [{"type": "number", "minimum": 1, "maximum": 25}, {}] and limit["default"] == 10
    assert NAME.schema() == {  # a folded bound is said in words: JSON Schema cannot count that way
        "type": "string", "minLength": 1,
        "description": "The name (a title for a document), unique among its siblings ignoring case. At most 255 "
                       "characters once runs of white space are folded into one space.",
    }
    access = OPERATIONS["create_token"]["access"].schema()
    assert access["type"] == ["string", "null"] and access["enum"] == ["none", "all", "folders", None]
    version = OPERATIONS["get_document_version"]["version_number"].schema()
    assert (version["minimum"], version["maximum"]) == (1, MAX_INT)
    assert [SEARCH["limit"].clamp(v) for v in (0, 7, 99, "x", None, True, 3.9)] == [1, 7, 25, 10, 10, 10, 3]


def test_an_argument_where_null_clears_must_be_sent():
    SET_SUMMARY.check_present({"node_id", "summary"})
    with pytest.raises(InvalidArgument, match=r"^`summary` is required \(null clears it\)$"):
        SET_SUMMARY.check_present({"node_id"})
    with pytest.raises(AssertionError):
        Operation("twice", (NAME, NAME))
