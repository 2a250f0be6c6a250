"""The world of the access matrix (tests/e2e/test_access_matrix.py): two workspaces with a few folders
and documents whose names and bodies carry one distinctive marker word each, the callers (one token
per row of a table: workspace x access x role x scopes x person/agent, and a principal with two
memberships), and the oracle: what each caller may see, and the words and ids it must never meet.

Layout of each workspace (the same keys in both, different marker words):

    <default kb root>              (named "default")
      alpha/                       a top-level folder
        alpha_doc                  published
        inner/                     a folder inside alpha
          inner_doc                published
          inner_draft              a draft only (never searchable, never readable by get_document)
      beta/
        beta_doc                   published
      root_doc                     published, directly in the knowledge base's root
    <annex kb root>                (a second knowledge base, named by its own marker word)
      annex_doc                    published
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import select

from rag.service import KnowledgeService, Principal
from rag.store.models import DocumentVersion, Node

WORKSPACES = ("default", "ws2")
COMMON = "shared handbook policy"  # in every body: a query on it finds every document a caller may see
ASK = "What does the shared handbook policy say about the team meetings?"
NAME_PART = "a"  # every name in the world contains it (the two knowledge-base roots "default" too)
MISSING_ID = "n_" + "0" * 16  # shaped like a real node id, never made

# key: (kind, parent key or "@annex" or None for the default kb's root, published)
LAYOUT: dict[str, tuple[str, str | None, bool]] = {
    "alpha": ("folder", None, False),
    "alpha_doc": ("document", "alpha", True),
    "inner": ("folder", "alpha", False),
    "inner_doc": ("document", "inner", True),
    "inner_draft": ("document", "inner", False),
    "beta": ("folder", None, False),
    "beta_doc": ("document", "beta", True),
    "root_doc": ("document", None, True),
    "annex_doc": ("document", "@annex", True),
}
MARKERS = {
    "default": {"annex": "Heronvelvet", "alpha": "Zebrafinch", "alpha_doc": "Quokkaberry", "inner": "Marmotflux",
                "inner_doc": "Pelicanquartz", "inner_draft": "Ibisnectar", "beta": "Walrusember",
                "beta_doc": "Otterglyph", "root_doc": "Lynxmarble", "annex_doc": "Tapirsolace"},
    "ws2": {"annex": "Cormorantjade", "alpha": "Narwhalpixel", "alpha_doc": "Gecko-saffron", "inner": "Toucanriddle",
            "inner_draft": "Meerkatdrizzle", "inner_doc": "Bisonlantern", "beta": "Jackalvortex",
            "beta_doc": "Koalacinder", "root_doc": "Ospreymaple", "annex_doc": "Yakpepper"},
}

# Knowledge-base access: the token's folders, by layout key (resolved in the token's workspace).
ACCESS: dict[str, tuple[str, ...] | str] = {
    "none": "none",
    "all": "all",
    "folder": ("inner",),  # one folder, inside a folder the caller may not see
    "top": ("alpha",),  # one top-level folder (its parent is the knowledge base's root)
    "nested": ("inner", "alpha"),  # two folders, one inside the other
}
ROLES = ("viewer", "editor", "admin")


@dataclass
class WorldNode:
    id: str
    key: str  # layout key, "root" or "annex" (a knowledge base's root folder)
    ws: str
    kind: str
    name: str
    parent: str | None  # node id
    kb_id: str
    word: str | None  # the marker (lower case); None for the default knowledge base's root ("default")
    published: bool = False


@dataclass
class World:
    nodes: dict[str, WorldNode] = field(default_factory=dict)  # by node id
    kbs: dict[str, list[str]] = field(default_factory=dict)  # workspace -> its knowledge-base ids
    annex_names: dict[str, str] = field(default_factory=dict)  # workspace -> the annex knowledge base's name

    def id(self, ws: str, key: str) -> str:
        return next(n.id for n in self.nodes.values() if n.ws == ws and n.key == key)

    def subtree(self, node_id: str) -> set[str]:
        found = {node_id}
        while True:
            more = {n.id for n in self.nodes.values() if n.parent in found} - found
            if not more:
                return found
            found |= more

    def everything(self, ws: str) -> set[str]:
        return {n.id for n in self.nodes.values() if n.ws == ws}

    def chain(self, node_id: str, visible: set[str]) -> list[str]:
        """Names from the topmost visible ancestor down to the node: the path a caller may be shown."""
        names, current = [], self.nodes[node_id]
        while True:
            names.append(current.name)
            if current.parent is None or current.parent not in visible:
                return names[::-1]
            current = self.nodes[current.parent]


def build_world(svc: KnowledgeService) -> World:
    """Both workspaces, made by each one's local administrator; every document published but the draft."""
    world = World()
    for ws in WORKSPACES:
        admin = Principal.local_admin(ws)
        svc.ensure_workspace(ws)
        words = MARKERS[ws]
        world.annex_names[ws] = words["annex"]
        default_kb = svc.knowledge_base(admin, "default")
        annex_kb = svc.knowledge_base(admin, words["annex"], create=True)
        world.kbs[ws] = [default_kb.id, annex_kb.id]
        ids = {None: default_kb.root_id, "@annex": annex_kb.root_id}
        world.nodes[default_kb.root_id] = WorldNode(default_kb.root_id, "root", ws, "folder", "default", None,
                                                    default_kb.id, None)
        world.nodes[annex_kb.root_id] = WorldNode(annex_kb.root_id, "annex", ws, "folder", words["annex"], None,
                                                  annex_kb.id, words["annex"].lower())
        for key, (kind, parent_key, published) in LAYOUT.items():
            word, parent = words[key], ids[parent_key]
            if kind == "folder":
                name = f"{word} Area"
                made = svc.create_folder(admin, parent, name)
            else:
                name = f"{word} Manual"
                body = (f"# {name}\n\nThe {COMMON} covers the {word} team. {word} members meet on Tuesdays "
                        f"to review the {word} handbook.\n")
                made = svc.create_document(admin, parent, name, body)
                if published:
                    svc.publish_version(admin, made.node_id, 1)
            ids[key] = made.node_id
            world.nodes[made.node_id] = WorldNode(made.node_id, key, ws, kind, name, parent, made.kb_id,
                                                  word.lower(), published)
    return world


@dataclass
class Caller:
    name: str  # the test id
    ws: str  # the token's home workspace
    role: str
    write: bool
    access: str  # a key of ACCESS
    agent: bool
    secret: str = ""
    principal_id: str = ""
    visible: set[str] = field(default_factory=set)  # node ids in its home workspace
    other: set[str] | None = None  # what it may see in the other workspace; None: not a member there
    multi: bool = False

    @property
    def writer(self) -> bool:
        return self.write and self.role != "viewer" and self.access != "none"

    @property
    def full(self) -> bool:
        """The rows that sweep node ids on both surfaces and run the searches. Reads depend on the
        workspace and the access only (the role and scopes are checked before any lookup, and every
        role reads), so one viewer per access and workspace runs them (for access none, the agent of
        knowledge_base_mcp_server.md), and the person of two memberships; every other row runs the
        light checks over HTTP (one hidden id through every read, the activity, the tokens)."""
        return self.multi or (self.role == "viewer" and not self.write and self.agent == (self.access == "none"))

    @property
    def surface(self) -> str:
        """Where a write row acts: people over HTTP, agents through MCP."""
        return "mcp" if self.agent else "http"


def caller_table() -> list[Caller]:
    rows = [
        Caller(f"{ws}-{access}-{role}-{'rw' if write else 'r'}-{'agent' if agent else 'person'}",
               ws, role, write, access, agent)
        for ws in WORKSPACES for access in ACCESS for role in ROLES for write in (False, True)
        for agent in (False, True)
    ]
    # One person, a member of both: limited to one folder in ws2, with an access-all token in default.
    rows += [Caller("multi-home-ws2", "ws2", "editor", True, "top", False, multi=True),
             Caller("multi-home-default", "default", "viewer", False, "all", False, multi=True)]
    return rows


CALLERS = caller_table()
# Writes outside the scope: an editor person (HTTP) and an admin agent (MCP) per access and workspace,
# and two rows that may not write at all (a viewer with the write scope, an editor without it).
WRITE_ROWS = [c for c in CALLERS if not c.multi and c.write and c.access != "none"
              and (c.role, c.agent) in (("editor", False), ("admin", True))]
WRITE_ROWS += [c for c in CALLERS if c.ws == "default" and c.access == "top" and not c.agent
               and (c.role, c.write) in (("viewer", True), ("editor", False))]


def visible_for(world: World, ws: str, access: str) -> set[str]:
    grant = ACCESS[access]
    if grant == "none":
        return set()
    if grant == "all":
        return world.everything(ws)
    return set().union(*(world.subtree(world.id(ws, key)) for key in grant))


def make_tokens(svc: KnowledgeService, world: World, callers: Iterable[Caller]) -> dict[str, Caller]:
    """One real token per caller (made as the local CLI makes them), and what each may see."""
    made: dict[str, Caller] = {}
    for caller in callers:
        caller = Caller(**{k: getattr(caller, k) for k in ("name", "ws", "role", "write", "access", "agent", "multi")})
        grant = ACCESS[caller.access]
        folders = [world.id(caller.ws, key) for key in grant] if isinstance(grant, tuple) else []
        principal_id = made["multi-home-ws2"].principal_id if caller.name == "multi-home-default" else None
        caller.secret, info = svc.create_token(
            caller.ws, caller.role, ["knowledge:write"] if caller.write else [],
            grant if isinstance(grant, str) else None, folders, caller.agent, principal_id=principal_id)
        caller.principal_id = info.principal_id
        caller.visible = visible_for(world, caller.ws, caller.access)
        made[caller.name] = caller
    # The person of two memberships: in each workspace, its standing there and its token's grants meet.
    made["multi-home-default"].other = made["multi-home-ws2"].visible
    made["multi-home-ws2"].other = set()  # its token's folders are ws2's: nothing of default
    return made


def forbidden(world: World, allowed: set[str]) -> set[str]:
    """What must never appear in an answer to a caller who may see `allowed`: every other node's id and
    marker word, and the id of every knowledge base it sees nothing of."""
    seen_kbs = {world.nodes[i].kb_id for i in allowed}
    tokens = {n.id for n in world.nodes.values() if n.id not in allowed}
    tokens |= {n.word for n in world.nodes.values() if n.id not in allowed and n.word}
    tokens |= {kb for kbs in world.kbs.values() for kb in kbs if kb not in seen_kbs}
    return tokens


def leaks(payload: Any, banned: set[str]) -> list[str]:
    text = (payload if isinstance(payload, str) else json.dumps(payload, ensure_ascii=False)).lower()
    return sorted(token for token in banned if token.lower() in text)


def snapshot(svc: KnowledgeService) -> list[tuple]:
    """Every node and version as the store holds them (citation counts aside: reads add them)."""
    with svc.db.session() as session:
        nodes = [(n.id, n.parent_id, n.kb_id, n.name, n.summary, json.dumps(n.meta), str(n.updated_at))
                 for n in session.scalars(select(Node).order_by(Node.id))]
        versions = [(v.node_id, v.number, v.status, v.content_hash)
                    for v in session.scalars(select(DocumentVersion).order_by(DocumentVersion.node_id,
                                                                              DocumentVersion.number))]
    return nodes + versions
