"""Every operation's arguments, declared once: name, JSON type, bounds, default, description, and
whether it is required or nullable.

The surfaces are built from these declarations rather than restating them: the MCP tools' input
schemas (rag/mcp/tools_*.py) and the HTTP API's request bodies and path and query parameters
(rag/api/arguments.py). Before, each surface wrote its own bounds and they drifted (a node id was
capped at 64 characters over HTTP and 200 in the service), and the same bad input got FastAPI's 422
over HTTP and the service's message over MCP.

A declaration documents; it does not check. The service checks every argument itself
(rag/service/checks.py and the operations), whatever a surface sent, and no surface refuses a value
for breaking a bound before the service has seen it, so the same bad input gets the same message
everywhere. The bounds here are the service's (its constants, or these, which its operations
should read: see `SEARCH_LIMIT_MAX` and the like below).

Where a seed document clamps a value, falls back to a default or answers with its own message
(search_knowledge's `limit`, search_knowledge_base's `top_k`), the argument is `lenient`: its
schema states the bounds in words and in a first `anyOf` branch, and still accepts any value, so
the document's rule is what the caller meets.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from rag.errors import InvalidArgument
from rag.service.checks import (
    MAX_CONTENT_CHARS,
    MAX_ID_CHARS,
    MAX_INT,
    MAX_METADATA_CHARS,
    MAX_NAME_CHARS,
    MAX_SUMMARY_CHARS,
    clamped_int,
    encodable,
)
from rag.service.identity.principal import ACCESS_LEVELS, ROLES, SCOPES
from rag.synthesize.conversation import MAX_HISTORY_MESSAGES

JsonType = Literal["string", "integer", "number", "boolean", "object", "array"]

# The bounds of particular operations' arguments (the generic ones are in rag.service.checks).
MAX_QUERY_CHARS = 4000
SEARCH_LIMIT_DEFAULT, SEARCH_LIMIT_MAX = 10, 25  # search_knowledge's `limit`: clamped
TOP_K_DEFAULT, TOP_K_MAX = 6, 50  # search_knowledge_base's `top_k`: enforced, with its own message
DOCUMENTS_LIMIT_DEFAULT, DOCUMENTS_LIMIT_MAX = 10, 25  # search_documents
NAMES_LIMIT_DEFAULT, NAMES_LIMIT_MAX = 25, 100  # search_nodes_by_name
ACTIVITY_LIMIT_DEFAULT, ACTIVITY_LIMIT_MAX = 100, 1000
DRAFTS_LIMIT_DEFAULT, DRAFTS_LIMIT_MAX = 100, 1000  # list_drafts
MAX_TOKEN_NAME_CHARS = 200
MAX_EXPIRY_DAYS = 3650


def check_query(query: object) -> str:
    """A question or a search: non-empty text of at most MAX_QUERY_CHARS, which the store and the
    tokenizers can hold (no lone surrogate)."""
    if not isinstance(query, str) or not query.strip():
        raise InvalidArgument("`query` must be a non-empty string")
    if len(query) > MAX_QUERY_CHARS:
        raise InvalidArgument(f"`query` must be at most {MAX_QUERY_CHARS} characters")
    if not encodable(query):
        raise InvalidArgument("`query` must be valid Unicode text (it holds a lone surrogate)")
    return query


class _NoDefault:
    def __repr__(self) -> str:
        return "NO_DEFAULT"


NO_DEFAULT: Any = _NoDefault()  # no default: left out, it reaches the service as None


@dataclass(frozen=True)
class Arg:
    """One argument of an operation, as every surface shows it."""

    name: str
    type: JsonType
    description: str
    required: bool = False
    nullable: bool = False  # null is a value of its own ("clear it"), not "absent"
    default: Any = NO_DEFAULT
    min_length: int | None = None
    max_length: int | None = None
    minimum: int | None = None
    maximum: int | None = None
    max_items: int | None = None
    enum: tuple[str, ...] | None = None
    items: Mapping[str, Any] | None = None  # the JSON schema of an array's items
    lenient: bool = False  # the schema states the bounds and accepts any value (see the module docstring)
    # max_length counts the text once runs of white space are folded into one space, as the service
    # folds names: JSON Schema cannot say that, so the schema says it in words, not as maxLength.
    folded: bool = False

    @property
    def present(self) -> bool:
        """Required and nullable: it must be sent, and null means "clear it", so one left out is
        refused rather than read as null."""
        return self.required and self.nullable

    def bounds(self) -> dict[str, Any]:
        """The JSON-schema keywords of its bounds, and its type."""
        max_length = None if self.folded else self.max_length
        keywords = (("minLength", self.min_length), ("maxLength", max_length), ("minimum", self.minimum),
                    ("maximum", self.maximum), ("maxItems", self.max_items), ("enum", self.enum),
                    ("items", self.items))
        return {"type": self.type, **{key: _json(value) for key, value in keywords if value is not None}}

    def schema(self) -> dict[str, Any]:
        """Its JSON schema: what the MCP input schema and the OpenAPI document both say."""
        if self.lenient:
            return {"anyOf": [self.bounds(), {}], "default": self.default, "description": self.described()}
        bounds = self.bounds()
        kind = bounds.pop("type")
        if self.nullable:
            kind = [kind, "null"]
            if "enum" in bounds:
                bounds["enum"] = [*bounds["enum"], None]
        schema = {"type": kind, "description": self.described(), **bounds}
        if self.default is not NO_DEFAULT:
            schema["default"] = _json(self.default)
        return schema

    def described(self) -> str:
        """Its description, with the bounds the schema's keywords cannot state."""
        if self.folded and self.max_length is not None:
            return (f"{self.description} At most {self.max_length} characters once runs of white space are folded "
                    "into one space.")
        return self.description

    def clamp(self, value: object) -> int:
        """The value forced into the bounds: search_knowledge's rule for its `limit` (out of range
        is clamped, a non-numeric value falls back to the default)."""
        assert self.minimum is not None and self.maximum is not None and isinstance(self.default, int)
        return clamped_int(value, self.minimum, self.maximum, self.default)

    def but(self, **changes: Any) -> Arg:
        """The same argument with other details (another description, name or requirement)."""
        return replace(self, **changes)


def _json(value: Any) -> Any:
    return list(value) if isinstance(value, tuple) else value


@dataclass(frozen=True)
class Operation:
    """A service operation and its arguments, in the order surfaces list them. Its name is the
    service method's (and the MCP tool's and the HTTP route's operationId where they have one)."""

    name: str
    args: tuple[Arg, ...] = ()
    _by_name: dict[str, Arg] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_by_name", {arg.name: arg for arg in self.args})
        assert len(self._by_name) == len(self.args), f"{self.name}: an argument is declared twice"

    def __getitem__(self, name: str) -> Arg:
        return self._by_name[name]

    def __contains__(self, name: object) -> bool:
        return name in self._by_name

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(arg.name for arg in self.args)

    def only(self, *names: str) -> Operation:
        """The same operation with some of its arguments: those a surface offers (the MCP tool
        search_knowledge has no `kb`, which the HTTP API's /v1/search has)."""
        return Operation(self.name, tuple(self[name] for name in names))

    def input_schema(self) -> dict[str, Any]:
        """The JSON schema of its arguments as one object (an MCP tool's input schema)."""
        schema: dict[str, Any] = {"type": "object", "properties": {arg.name: arg.schema() for arg in self.args}}
        required = [arg.name for arg in self.args if arg.required]
        if required:
            schema["required"] = required
        return schema

    def check_present(self, sent: Collection[str]) -> None:
        """Refuse a call that leaves out an argument where null means "clear it" (set_summary's
        `summary`): read as null it would clear what the caller may have meant to keep. Every other
        argument left out reaches the service as None, which answers with its own message."""
        for arg in self.args:
            if arg.present and arg.name not in sent:
                raise InvalidArgument(f"`{arg.name}` is required (null clears it)")


# ----- arguments shared by several operations -----

_NOT_A_KNOWLEDGE_ID = " A node id, never a knowledge id (`source_id`/`document_id`)."


def node_id(description: str, name: str = "node_id", *, required: bool = True) -> Arg:
    """A node id (`n_…`). A longer one, or one with characters no id has, is answered exactly as
    an unknown id (rag.service.checks.id_arg), so the bound documents and never refuses."""
    return Arg(name, "string", description + _NOT_A_KNOWLEDGE_ID, required=required, min_length=1,
               max_length=MAX_ID_CHARS)


def integer(name: str, description: str, *, minimum: int = 1, maximum: int = MAX_INT, **more: Any) -> Arg:
    """An integer; the service takes none above MAX_INT (2^31 - 1), whatever the argument's own bound."""
    return Arg(name, "integer", description, minimum=minimum, maximum=min(maximum, MAX_INT), **more)


NODE_ID = node_id("The node id (`n_…`) of the document or folder.")
DOCUMENT_ID = node_id("The document's node id.")
FOLDER_ID = node_id("The folder's node id.")
NEW_PARENT = node_id(
    "The folder to create it in. Without it, an agent's node lands in the knowledge base 'Assistant Documents' "
    "(made on first use) and a person's in the default knowledge base; a folder-scoped token must give one.",
    "parent_id", required=False,
)
NAME = Arg("name", "string", "The name (a title for a document), unique among its siblings ignoring case.",
           required=True, min_length=1, max_length=MAX_NAME_CHARS, folded=True)
CONTENT = Arg("content", "string", "The whole Markdown body.", required=True, max_length=MAX_CONTENT_CHARS)
SUMMARY = Arg("summary", "string", "A short summary for people browsing; null or blank clears it. Never searchable.",
              nullable=True, max_length=MAX_SUMMARY_CHARS)
METADATA = Arg("metadata", "object", f"Free-form key-value pairs (a JSON object of at most {MAX_METADATA_CHARS} "
               "characters), stored as given; null removes it all.", nullable=True)
KB = Arg("kb", "string", "One knowledge base by name (as GET /v1/models lists them; `default` is the default one). "
         "Default: every knowledge base the token can see.", nullable=True, min_length=1, max_length=MAX_NAME_CHARS)


def query(description: str, max_length: int = MAX_QUERY_CHARS, *, folded: bool = False) -> Arg:
    return Arg("query", "string", description, required=True, max_length=max_length, folded=folded)


def limit(maximum: int, default: int) -> Arg:
    return integer("limit", f"Maximum results, 1 to {maximum}.", maximum=maximum, default=default)


# ----- search and answers (knowledge_search_and_ask.txt, search_knowledge_base.txt) -----

SEARCH = Operation("search", (
    query("The search query. Must be a non-empty string."),
    Arg("limit", "number", f"Maximum results, 1 to {SEARCH_LIMIT_MAX}. Values outside the range are clamped; a "
        f"non-numeric value falls back to the default ({SEARCH_LIMIT_DEFAULT}).", minimum=1,
        maximum=SEARCH_LIMIT_MAX, default=SEARCH_LIMIT_DEFAULT, lenient=True),
    KB,
))
ASK = Operation("ask", (
    query("The question to answer. Must be a non-empty string."),
    KB,
    Arg("history", "array", "The earlier conversation, oldest first; the question is rewritten into a standalone "
        f"one before retrieval. At most {MAX_HISTORY_MESSAGES} messages and 40,000 characters; system messages are "
        "ignored.", nullable=True, max_items=MAX_HISTORY_MESSAGES, items={
            "type": "object", "required": ["role", "content"],
            "properties": {"role": {"type": "string", "enum": ["user", "assistant", "system"]},
                           "content": {"type": "string"}},
        }),
))
SEARCH_KNOWLEDGE_BASE = Operation("search_knowledge_base", (
    query("The search text. Required; an empty string counts as absent."),
    Arg("workspace_id", "string",
        "The workspace to act in. Optional if you belong to exactly one workspace, required otherwise."),
    Arg("kb_id", "string", "Search one knowledge base (its id, or its name) instead of every one in the workspace."),
    Arg("top_k", "integer", f"Minimum 1, maximum {TOP_K_MAX}, default {TOP_K_DEFAULT}. The bounds are enforced, not "
        f"clamped: a value outside 1 to {TOP_K_MAX} is refused with a message naming the bound, and 0 is not read "
        "as unspecified.", minimum=1, maximum=TOP_K_MAX, default=TOP_K_DEFAULT, lenient=True),
))

# ----- reading nodes (knowledge_base_mcp_server.md) -----

SEARCH_DOCUMENTS = Operation("search_documents", (
    query("What to look for. Must be a non-empty string."), limit(DOCUMENTS_LIMIT_MAX, DOCUMENTS_LIMIT_DEFAULT),
))
GET_DOCUMENT = Operation("get_document", (DOCUMENT_ID,))
GET_DOCUMENT_VERSIONS = Operation("get_document_versions", (DOCUMENT_ID,))
GET_DOCUMENT_VERSION = Operation("get_document_version", (
    DOCUMENT_ID, integer("version_number", "The 1-based version number, from get_document_versions.", required=True),
))
LIST_CHILDREN = Operation("list_children", (FOLDER_ID.but(name="parent_id"),))
GET_FOLDER_TREE = Operation("get_folder_tree", (
    node_id("The folder to start from (default: every root this token sees).", "root_id", required=False),
))
SEARCH_NODES_BY_NAME = Operation("search_nodes_by_name", (
    query("Text the name contains (case-insensitive).", MAX_NAME_CHARS, folded=True),
    limit(NAMES_LIMIT_MAX, NAMES_LIMIT_DEFAULT),
))
GET_ROOT_NODES = Operation("get_root_nodes")
GET_CURRENT_NODE = Operation("get_current_node")  # read from the request, never from an argument

# ----- writing nodes -----

CREATE_DOCUMENT = Operation("create_document", (NEW_PARENT, NAME, CONTENT, SUMMARY, METADATA))
UPDATE_DOCUMENT = Operation("update_document", (DOCUMENT_ID, CONTENT))
PUBLISH_DOCUMENT_VERSION = Operation("publish_document_version", (
    DOCUMENT_ID, integer("version_number", "The 1-based version number to publish.", required=True),
))
ROLLBACK_DOCUMENT_VERSION = Operation("rollback_document_version", (  # people only: no MCP tool
    DOCUMENT_ID, integer("version_number", "The 1-based number of an archived (earlier published) version to "
                         "publish again.", required=True),
))
RENAME_DOCUMENT = Operation("rename_document", (DOCUMENT_ID, NAME))
DELETE_DOCUMENT = Operation("delete_document", (DOCUMENT_ID,))
CREATE_FOLDER = Operation("create_folder", (NEW_PARENT, NAME, SUMMARY, METADATA))
RENAME_FOLDER = Operation("rename_folder", (FOLDER_ID, NAME))
DELETE_FOLDER = Operation("delete_folder", (FOLDER_ID,))
MOVE_NODE = Operation("move_node", (
    node_id("The document or folder to move."), node_id("The folder to move it into.", "parent_id"),
))
SET_SUMMARY = Operation("set_summary", (NODE_ID, SUMMARY.but(required=True)))
SET_METADATA = Operation("set_metadata", (NODE_ID, METADATA.but(required=True)))

# ----- administration (HTTP and CLI only) -----

ACTIVITY = Operation("activity", (
    integer("limit", f"Maximum rows, 1 to {ACTIVITY_LIMIT_MAX}.", maximum=ACTIVITY_LIMIT_MAX,
            default=ACTIVITY_LIMIT_DEFAULT),
))

# ----- reviewing (the editor, rag/web/; rag/service/content/review.py) -----

LIST_DRAFTS = Operation("list_drafts", (
    Arg("kb", "string", "The knowledge base, by name (`default`, the default one, when left out).",
        min_length=1, max_length=MAX_NAME_CHARS),
    integer("limit", f"Maximum drafts, 1 to {DRAFTS_LIMIT_MAX}.", maximum=DRAFTS_LIMIT_MAX,
            default=DRAFTS_LIMIT_DEFAULT),
))
DIFF_VERSIONS = Operation("diff_versions", (
    DOCUMENT_ID,
    integer("from_version", "The older side's 1-based version number.", required=True),
    integer("to_version", "The newer side's 1-based version number.", required=True),
))
DOCUMENT_ACTIVITY = Operation("document_activity", (
    NODE_ID,
    integer("limit", f"Maximum rows, 1 to {ACTIVITY_LIMIT_MAX}.", maximum=ACTIVITY_LIMIT_MAX,
            default=ACTIVITY_LIMIT_DEFAULT),
))
CREATE_TOKEN = Operation("create_token", (
    Arg("role", "string", "The role in the workspace.", required=True, enum=ROLES),
    Arg("scopes", "array", "knowledge:read is always granted; add knowledge:write to allow writing.", default=(),
        items={"type": "string", "enum": list(SCOPES)}),
    Arg("access", "string", "Default: all for a person, none for an agent, folders when folders are given.",
        nullable=True, enum=ACCESS_LEVELS),
    Arg("folders", "array", "Node ids, paths in the default knowledge base, or KB:path.", default=(),
        items={"type": "string"}),
    Arg("agent", "boolean", "A token for an agent rather than a person.", default=False),
    integer("expires_days", "Days until it expires; null: never.", maximum=MAX_EXPIRY_DAYS, nullable=True),
    Arg("name", "string", "Who it is for, as the activity shows it.", nullable=True, min_length=1,
        max_length=MAX_TOKEN_NAME_CHARS),
    Arg("principal_id", "string", "Another token of this principal (a member of the workspace).", nullable=True,
        min_length=1, max_length=MAX_ID_CHARS),
))
REVOKE_TOKEN = Operation("revoke_token", (
    Arg("token_id", "string", "The token's id (`tok_…`), as GET /v1/tokens lists it.", required=True, min_length=1,
        max_length=MAX_ID_CHARS),
))
LIST_TOKENS = Operation("list_tokens")

OPERATIONS: dict[str, Operation] = {op.name: op for op in (
    SEARCH, ASK, SEARCH_KNOWLEDGE_BASE, SEARCH_DOCUMENTS, GET_DOCUMENT, GET_DOCUMENT_VERSIONS, GET_DOCUMENT_VERSION,
    LIST_CHILDREN, GET_FOLDER_TREE, SEARCH_NODES_BY_NAME, GET_ROOT_NODES, GET_CURRENT_NODE, CREATE_DOCUMENT,
    UPDATE_DOCUMENT, PUBLISH_DOCUMENT_VERSION, ROLLBACK_DOCUMENT_VERSION, RENAME_DOCUMENT, DELETE_DOCUMENT,
    CREATE_FOLDER, RENAME_FOLDER, DELETE_FOLDER, MOVE_NODE, SET_SUMMARY, SET_METADATA, ACTIVITY, CREATE_TOKEN,
    REVOKE_TOKEN, LIST_TOKENS, LIST_DRAFTS, DIFF_VERSIONS, DOCUMENT_ACTIVITY,
)}
