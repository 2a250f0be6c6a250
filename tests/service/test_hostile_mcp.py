"""Hostile input over every MCP tool (issue 12), through the SDK's in-memory client, as an agent
would send it: megabyte strings, integers past 2^63, control and bidi characters, SQL, nested
objects, wrong types, missing and unknown arguments. Two passes:

- a sweep: each hostile value in each argument of each tool, the other arguments ones the tool
  accepts (real ids), as an agent with access to everything, so each value reaches its check;
- hypothesis: arguments drawn from each tool's input schema (real ids, values within its bounds),
  one of them hostile or the call misshapen, as agents with all, folder and no access.

Every call is checked as a caller would: it ends (no exception in the client, whose output-schema
check covers the successes); an error is a refusal in words, never the generic "could not be
completed" of a crash; no error carries a traceback, an SQL statement or a driver's name, nor the
query text sent.

The embedded default only: the suite exercises the surfaces' argument handling, which is the same
on both deployments (tests/e2e/test_input_bounds.py checks the bounds on both).
"""

from __future__ import annotations

from contextlib import AsyncExitStack, asynccontextmanager
from typing import Any

import pytest
from anyio.from_thread import start_blocking_portal
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import select

from rag.mcp.server import TOOLS
from rag.service.query.kb_search import UNEXPECTED
from rag.settings import Settings
from rag.store.models import FOLDER, Node

from ..support.mcp_support import handbook_world, session, text, token

MAX_EXAMPLES = 10  # per tool and kind of caller
LEAKS = ("Traceback", 'File "', "sqlalchemy", "sqlite3", "psycopg", "[SQL:", "SELECT ", "INSERT INTO", "UPDATE ",
         "DELETE FROM", "IntegrityError", "OperationalError", "DataError", "OverflowError", "RecursionError")
# Deletes last: a run that removes the handbook's folders leaves the other tools less to find.
ORDER = sorted(TOOLS, key=lambda tool: tool.name.startswith("delete_"))


def nested(depth: int, leaf: Any = 1) -> Any:
    for i in range(depth):
        leaf = {"k": leaf} if i % 2 else [leaf]
    return leaf


HOSTILE_TEXTS = [
    "", " ", "\t\n", "\x00", "n_\x00", "\x1b[2J\x07", "\u202etxt.exe", "a\u2066b", "/", "..", ".", "\\",
    "'; DROP TABLE nodes; --", "SELECT * FROM api_tokens", "%", "_", "%_\\", "n_" + "0" * 16, "n_" * 100,
    "z" * 256, "z" * 4001, "q" * 100_002, "n_" + "z" * 3_145_728, "\ufeff\u200d\U0001f600", "\U0010ffff",
]
HOSTILE_NUMBERS = [0, -1, 2**31 - 1, 2**31, 2**63, -(2**63), 2**64, 10**400, 0.5, 1e308, -0.0,
                   float("inf"), float("-inf"), float("nan"), True, False]
# The transports' JSON parser refuses 200 levels of nesting and more: 199 is the deepest that arrives.
HOSTILE_SHAPES = [None, [], {}, ["n_"], {"$ne": None}, nested(199), nested(60, "x" * 1000)]
SWEEP = HOSTILE_TEXTS + HOSTILE_NUMBERS + HOSTILE_SHAPES

HOSTILE = st.one_of(
    st.sampled_from(SWEEP), st.integers(), st.floats(), st.text(), st.builds(nested, st.integers(1, 199)),
    st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=8),
                 lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=4), inner, max_size=4),
                 max_leaves=12),
)
QUERIES = st.one_of(  # a query long enough to be recognised if an error echoed it
    st.sampled_from(["How much annual leave do I earn?", "slack channels for a new team"]),
    st.text(min_size=12, max_size=60).filter(lambda q: len(q.strip()) >= 12),
)
GOOD = {"query": "How much annual leave do I earn?", "version_number": 1, "limit": 5, "top_k": 3, "kb_id": "default",
        "workspace_id": "default", "name": "Hostile probe", "content": "# Probe\n\nA probe.\n", "summary": "A probe.",
        "metadata": {"probe": 1}}


def good_arguments(tool: str, schema: dict[str, Any], world_ids: dict[str, str]) -> dict[str, Any]:
    """Every argument of the tool with a value it accepts: a real folder or document for an id."""
    def one(name: str) -> Any:
        if name in GOOD:
            return GOOD[name]
        return world_ids["folder" if name in ("parent_id", "root_id") or "folder" in tool else "document"]

    return {name: one(name) for name in schema["properties"]}


def schema_value(name: str, schema: dict[str, Any], ids: list[str]) -> st.SearchStrategy[Any]:
    """A value the property's schema allows: a real id for an id, so that calls get past the look-up."""
    kinds = schema.get("type") or [b.get("type") for b in schema.get("anyOf", []) if b.get("type")]
    kinds = kinds if isinstance(kinds, list) else [kinds]
    if name == "query":
        return QUERIES
    if name in GOOD and name not in ("name", "content", "summary", "metadata", "version_number"):
        return st.just(GOOD[name])
    if name.endswith("_id"):
        return st.sampled_from(ids)
    if "integer" in kinds:
        return st.integers(schema.get("minimum", 1), min(schema.get("maximum", 5), 5))
    if "object" in kinds:
        return st.dictionaries(st.text(max_size=10), st.text(max_size=10) | st.integers(), max_size=5)
    return st.text(min_size=1, max_size=min(schema.get("maxLength", 300), 300))


@st.composite
def arguments(draw: st.DrawFn, schema: dict[str, Any], ids: list[str]) -> dict[str, Any]:
    """Allowed arguments with one of them hostile (most draws), or a call of the wrong shape."""
    properties = schema["properties"]
    allowed = {name: schema_value(name, prop, ids) for name, prop in properties.items()}
    required = schema.get("required", ())
    args = draw(st.fixed_dictionaries({n: allowed[n] for n in required},
                                      optional={n: s for n, s in allowed.items() if n not in required}))
    how = draw(st.sampled_from(["one hostile", "one hostile", "one hostile", "shape", "as allowed"]))
    if how == "one hostile" and properties:
        args[draw(st.sampled_from(sorted(properties)))] = draw(HOSTILE)
    elif how == "shape":
        for name in draw(st.lists(st.sampled_from(sorted(args)), max_size=2)) if args else ():
            args.pop(name, None)  # a required argument missing
        if draw(st.booleans()):
            args["unknown_argument"] = draw(HOSTILE)
    return args


def check(tool: str, args: dict[str, Any], result) -> None:
    message = text(result)
    shown = {k: repr(v)[:60] for k, v in args.items()}
    if not result.is_error:
        assert result.structured_content is not None, (tool, shown, message[:300])
        return
    assert UNEXPECTED not in message, (tool, shown)
    sent = " ".join(repr(v) for v in args.values())
    for leak in LEAKS:
        assert leak not in message or leak in sent, (tool, shown, leak, message[:300])
    query = args.get("query")
    if isinstance(query, str) and len(query.strip()) >= 12:
        assert query not in message, (tool, shown, message[:300])


@asynccontextmanager
async def sessions(svc, secrets: dict[str, str]):
    async with AsyncExitStack() as stack:
        yield {who: await stack.enter_async_context(session(svc, secret)) for who, secret in secrets.items()}


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    root = tmp_path_factory.mktemp("hostile")
    yield from handbook_world(root, Settings(home=root / "home"))


@pytest.fixture(scope="module")
def callers(world):
    """An MCP session per kind of agent, kept open in one event loop for the whole module."""
    secrets = {"all": token(world.svc, access="all"), "none": world.blind,
               "folders": token(world.svc, folders=("travel-and-leave",))}
    with start_blocking_portal() as portal, portal.wrap_async_context_manager(sessions(world.svc, secrets)) as by_who:
        yield portal, by_who


@pytest.fixture(scope="module")
def ids(world) -> list[str]:
    """A few real folders and documents, folder-scoped ones among them."""
    with world.svc.db.session() as db:
        nodes = list(db.scalars(select(Node).where(Node.parent_id.is_not(None)).order_by(Node.source_label)))
    folders = [n.id for n in nodes if n.kind == FOLDER]
    documents = [n.id for n in nodes if n.kind != FOLDER]
    return folders[:3] + documents[:3]


@pytest.fixture(scope="module")
def probe(world) -> dict[str, str]:
    """A folder and a published document of their own, for the sweep's allowed arguments."""
    svc, admin = world.svc, world.admin
    folder = svc.create_folder(admin, svc.knowledge_base(admin, "default").root_id, "Probes")
    document = svc.create_document(admin, folder.node_id, "Probe", "# Probe\n\nA probe.\n")
    svc.publish_version(admin, document.node_id, 1)
    return {"folder": folder.node_id, "document": document.node_id}


@pytest.mark.parametrize("tool", ORDER, ids=[t.name for t in ORDER])
def test_every_argument_refuses_every_hostile_value(callers, probe, tool):
    portal, by_who = callers
    good = good_arguments(tool.name, tool.input_schema, probe)
    calls = [{**good, name: value} for name in good for value in SWEEP]
    calls += [{k: v for k, v in good.items() if k != name} for name in tool.input_schema.get("required", ())]
    calls += [{**good, "unknown_argument": value} for value in HOSTILE_SHAPES]
    for args in calls:
        check(tool.name, args, portal.call(by_who["all"].call, tool.name, args))


@pytest.mark.parametrize("who", ["all", "folders", "none"])
@pytest.mark.parametrize("tool", ORDER, ids=[t.name for t in ORDER])
def test_no_tool_breaks_on_generated_arguments(callers, ids, tool, who):
    portal, by_who = callers

    @settings(max_examples=MAX_EXAMPLES, deadline=None, derandomize=True, database=None,
              suppress_health_check=list(HealthCheck))
    @given(args=arguments(tool.input_schema, ids))
    def one(args: dict[str, Any]) -> None:
        check(tool.name, args, portal.call(by_who[who].call, tool.name, args))

    one()
