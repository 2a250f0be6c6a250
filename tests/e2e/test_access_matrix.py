"""The access matrix: every caller of a generated table (workspace x access none/all/one folder/a
top-level folder/two nested folders x role x scopes x person/agent, and a person with two
memberships) against every HTTP endpoint and every MCP tool, on both deployments. Nothing outside
a caller's access may appear in any answer (no id, name, excerpt, count, path or parent), an id
outside it answers exactly as a missing id (same status, same message), and a write outside it
fails the same way and changes nothing.

One small world per deployment (tests/support/access_world.py) is shared by the read checks; the write
checks come after them and prove the world unchanged, and the writes that succeed make their own
nodes. Each test collects every finding before failing, so one run lists every leak."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import httpx
import pytest
from anyio.from_thread import start_blocking_portal

from rag.service import KnowledgeService
from rag.service.content.tree import SCOPE_ROOT_FIXED
from rag.settings import Settings

from ..support.access_world import (
    ASK,
    CALLERS,
    COMMON,
    MISSING_ID,
    NAME_PART,
    WORKSPACES,
    WRITE_ROWS,
    Caller,
    World,
    build_world,
    forbidden,
    leaks,
    make_tokens,
    snapshot,
)
from ..support.api_support import LiveServer
from ..support.mcp_support import session

pytestmark = pytest.mark.filterwarnings("ignore:.*ReadOnly. qualifier:UserWarning")

NO_ACCESS = "no knowledge base access"


@dataclass(frozen=True)
class Op:
    """One operation on both surfaces: its HTTP route and its MCP tool (either may be absent)."""

    method: str | None = None
    path: str | None = None  # `{id}` is the node id; else the id goes in the body or query as `id_arg`
    tool: str | None = None
    id_arg: str = "node_id"
    key: str | None = None  # the one key an MCP tool puts a list under
    body: tuple[tuple[str, Any], ...] = ()


OPS = {
    "roots": Op("GET", "/v1/roots", "get_root_nodes", key="roots"),
    "tree": Op("GET", "/v1/tree", "get_folder_tree", id_arg="root_id"),
    "names": Op("GET", "/v1/nodes/search", "search_nodes_by_name", key="results"),
    "children": Op("GET", "/v1/folders/{id}/children", "list_children", id_arg="parent_id", key="children"),
    "document": Op("GET", "/v1/documents/{id}", "get_document"),
    "versions": Op("GET", "/v1/documents/{id}/versions", "get_document_versions", key="versions"),
    "version": Op("GET", "/v1/documents/{id}/versions/1", "get_document_version", body=(("version_number", 1),)),
    "search": Op("POST", "/v1/search", "search_knowledge"),
    "ask": Op("POST", "/v1/ask", "ask_knowledge"),
    "search_documents": Op(tool="search_documents"),
    "kb_search": Op(tool="search_knowledge_base"),
    # writes
    "rename_folder": Op("PUT", "/v1/folders/{id}/name", "rename_folder", body=(("name", "Planted Area"),)),
    "delete_folder": Op("DELETE", "/v1/folders/{id}", "delete_folder"),
    "rename_document": Op("PUT", "/v1/documents/{id}/name", "rename_document", body=(("name", "Planted Manual"),)),
    "delete_document": Op("DELETE", "/v1/documents/{id}", "delete_document"),
    "update_document": Op("PUT", "/v1/documents/{id}/draft", "update_document", body=(("content", "# Planted\n"),)),
    "publish": Op("POST", "/v1/documents/{id}/versions/1/publish", "publish_document_version",
                  body=(("version_number", 1),)),
    "rollback": Op("POST", "/v1/documents/{id}/versions/1/rollback"),
    "set_summary": Op("PUT", "/v1/nodes/{id}/summary", "set_summary", body=(("summary", "Planted"),)),
    "set_metadata": Op("PUT", "/v1/nodes/{id}/metadata", "set_metadata", body=(("metadata", {"planted": 1}),)),
    "move": Op("POST", "/v1/nodes/{id}/move", "move_node"),  # the node; `parent_id` given
    "move_into": Op("POST", "/v1/nodes/{node}/move", "move_node", id_arg="parent_id"),  # the target; `node` given
    "create_folder": Op("POST", "/v1/folders", "create_folder", id_arg="parent_id", body=(("name", "Planted Area"),)),
    "create_document": Op("POST", "/v1/documents", "create_document", id_arg="parent_id",
                          body=(("name", "Planted Manual"), ("content", "# Planted\n"))),
}
ID_READS = ("tree", "children", "document", "versions", "version")
ID_WRITES = ("rename_folder", "delete_folder", "rename_document", "delete_document", "update_document", "publish",
             "rollback", "set_summary", "set_metadata", "move", "move_into", "create_folder", "create_document")
FOLDER_OPS = {"tree", "children", "rename_folder", "delete_folder", "move_into", "create_folder", "create_document"}


@dataclass
class Reply:
    ok: bool
    data: Any  # the result (an MCP tool's list unwrapped from its key); None for an error
    error: Any  # what must match between an out-of-scope id and a missing one: (status, body) or the tool's text
    message: str | None  # the error's message as the caller reads it
    status: int | None  # HTTP only
    raw: str  # everything the caller received, for the leak check


class Http:
    name = "http"

    def __init__(self, client: httpx.Client) -> None:
        self.client = client

    def call(self, op_name: str, node_id: str | None = None, **args: Any) -> Reply:
        op = OPS[op_name]
        assert op.path is not None, op_name
        body = dict(op.body) | args
        path = op.path.format(id=node_id, node=args.pop("node", None))
        body.pop("node", None)
        if node_id is not None and "{id}" not in op.path:
            body[op.id_arg] = node_id
        body.pop("version_number", None)  # in the path
        if op.method in ("GET", "DELETE"):
            response = self.client.request(op.method, path, params=body)
        else:
            response = self.client.request(op.method, path, json=body)
        payload = response.json()
        ok = response.status_code < 300
        message = None if ok else payload["error"]["message"]
        return Reply(ok, payload if ok else None, None if ok else (response.status_code, payload), message,
                     response.status_code, response.text)


class Mcp:
    name = "mcp"

    def __init__(self, portal: Any, client: Any) -> None:
        self.portal, self.client = portal, client

    def call(self, op_name: str, node_id: str | None = None, **args: Any) -> Reply:
        op = OPS[op_name]
        assert op.tool is not None, op_name
        arguments = dict(op.body) | args
        if "node" in arguments:
            arguments["node_id"] = arguments.pop("node")
        if node_id is not None:
            arguments[op.id_arg] = node_id
        result = self.portal.call(partial(self.client.call, op.tool, arguments))
        text = result.content[0].text
        data = result.structured_content
        if not result.is_error and op.key:
            data = data[op.key]
        raw = text + json.dumps(data, ensure_ascii=False)
        return Reply(not result.is_error, None if result.is_error else data, text if result.is_error else None,
                     text.removeprefix("Tool failed: ") if result.is_error else None, None, raw)


@dataclass
class Matrix:
    svc: KnowledgeService
    world: World
    callers: dict[str, Caller]
    url: str
    missing: dict[tuple, Reply] = field(default_factory=dict)

    @contextmanager
    def surfaces(self, caller: Caller, mcp: bool = True) -> Iterator[tuple[Http, Mcp | None]]:
        """The caller's HTTP client on the live API and, when asked, its in-memory MCP client."""
        with ExitStack() as stack:
            client = stack.enter_context(httpx.Client(
                base_url=self.url, headers={"Authorization": f"Bearer {caller.secret}"}, timeout=120))
            tools = None
            if mcp:
                portal = stack.enter_context(start_blocking_portal())
                tools = Mcp(portal, stack.enter_context(portal.wrap_async_context_manager(
                    session(self.svc, caller.secret))))
            yield Http(client), tools


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def matrix(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Matrix]:
    """The world on one deployment (as conftest's `settings` makes them), its callers, a live API."""
    home = tmp_path_factory.mktemp(f"access-{request.param}") / "home"
    settings = Settings(home=home)
    if request.param == "postgresql":
        settings = Settings(home=home, database_url=request.getfixturevalue("postgres").new_database(),
                            chroma_url=request.getfixturevalue("chroma_server"))
    with KnowledgeService(settings) as svc:
        world = build_world(svc)
        callers = make_tokens(svc, world, CALLERS)
        with LiveServer(svc) as server:
            yield Matrix(svc, world, callers, server.url)
            svc.wait_for_publishing(120)


class Findings(list):
    def check(self, ok: bool, where: str, what: str) -> bool:
        if not ok:
            self.append(f"{where}: {what}")
        return ok

    def clean(self, where: str, reply: Reply, banned: set[str]) -> None:
        found = leaks(reply.raw, banned)
        self.check(not found, where, f"leaks {found}: {reply.raw[:300]}")

    def like_missing(self, where: str, reply: Reply, missing: Reply) -> None:
        self.check(not reply.ok and reply.error == missing.error, where,
                   f"answers {reply.error if not reply.ok else 'success'}, a missing id {missing.error}")

    def no_access(self, where: str, reply: Reply, text: str = NO_ACCESS) -> None:
        self.check(not reply.ok and reply.message == NO_ACCESS and reply.status in (None, 403)
                   and (reply.status is not None or reply.error == text),
                   where, f"expected {text!r}, got {reply.error if not reply.ok else reply.raw[:200]}")

    def done(self) -> None:
        assert not self, f"{len(self)} findings:\n" + "\n".join(self)


def walk(node: dict) -> Iterator[str]:
    yield node["node_id"]
    for child in node.get("children") or []:
        yield from walk(child)


def sample(world: World, caller: Caller) -> list[str]:
    """The ids a row tries: for the full rows, the root, folders, documents and the draft of its own
    workspace and two nodes of the other; for the others, the nearest folder above its scope (the
    knowledge base's root above `alpha`, `alpha` above `inner`), or a node of the other workspace."""
    other = next(w for w in WORKSPACES if w != caller.ws)
    if caller.full:
        keys = ("root", "alpha", "inner", "inner_doc", "inner_draft", "beta_doc")
        return [world.id(caller.ws, k) for k in keys] + [world.id(other, k) for k in ("alpha", "inner_doc")]
    above = {"top": "root", "nested": "root", "folder": "alpha"}.get(caller.access)
    return [world.id(caller.ws, above) if above else world.id(other, "inner_doc")]


def check_nodes(out: Findings, where: str, items: list[dict], visible: set[str]) -> None:
    for item in items:
        out.check(item["node_id"] in visible, where, f"lists hidden node {item['node_id']}")
        if "parent_id" in item:
            out.check(item["parent_id"] is None or item["parent_id"] in visible, where,
                      f"gives {item['name']!r} the hidden parent {item['parent_id']}")


def check_listings(world: World, caller: Caller, surface: Http | Mcp, out: Findings, banned: set[str]) -> None:
    """Roots, the whole tree and a name search that matches every name: exactly the visible nodes."""
    visible, none, at = caller.visible, caller.access == "none", f"{surface.name} {caller.name}"
    roots = surface.call("roots")
    if out.check(roots.ok, f"{at} roots", f"failed: {roots.error}"):
        out.clean(f"{at} roots", roots, banned)
        expected = {i for i in visible if world.nodes[i].parent not in visible}
        out.check({r["node_id"] for r in roots.data} == expected, f"{at} roots", "are not the caller's tops")
        check_nodes(out, f"{at} roots", roots.data, visible)
    tree = surface.call("tree")
    names = surface.call("names", query=NAME_PART, limit=100)
    if none:
        out.no_access(f"{at} tree", tree)
        out.no_access(f"{at} names", names)
    else:
        if out.check(tree.ok, f"{at} tree", f"failed: {tree.error}"):
            out.clean(f"{at} tree", tree, banned)
            out.check({i for r in tree.data["roots"] for i in walk(r)} == visible, f"{at} tree", "is not the scope")
        if out.check(names.ok, f"{at} names", f"failed: {names.error}"):
            out.clean(f"{at} names", names, banned)
            wanted = {i for i in visible if NAME_PART in world.nodes[i].name.casefold()}
            out.check({n["node_id"] for n in names.data} == wanted, f"{at} names", "are not the visible ones")
            check_nodes(out, f"{at} names", names.data, visible)
            for n in names.data:
                path = "/".join(world.chain(n["node_id"], visible)) if n["node_id"] in visible else None
                out.check(n["path"] == path, f"{at} names", f"path {n['path']!r}, expected {path!r}")


def check_reads(m: Matrix, caller: Caller, surface: Http | Mcp, out: Findings) -> None:
    """The node reads: roots, the tree, names, and every id through every id-taking read."""
    world, visible = m.world, caller.visible
    banned = forbidden(world, visible)
    at = f"{surface.name} {caller.name}"
    if caller.full:
        check_listings(world, caller, surface, out, banned)
    # A missing id answers alike for every role and scope (each may read): asked once per kind of access.
    missing = {}
    for op in ID_READS:
        key = (surface.name, caller.access == "none", op)
        if caller.full or key not in m.missing:
            m.missing[key] = surface.call(op, MISSING_ID)
        missing[op] = m.missing[key]
    for node_id in sample(world, caller):
        node = world.nodes[node_id]
        for op in ID_READS:
            where = f"{at} {op} {node.ws}:{node.key}"
            reply = surface.call(op, node_id)
            if node_id not in visible or (op == "document" and not node.published and node.kind == "document"):
                out.like_missing(where, reply, missing[op])
            elif (node.kind == "folder") != (op in FOLDER_OPS):
                out.check(not reply.ok and reply.status in (None, 400), where, f"wrong kind answered {reply.raw[:200]}")
            elif out.check(reply.ok, where, f"failed: {reply.error}"):
                out.clean(where, reply, banned)
                if op == "children":
                    out.check({c["node_id"] for c in reply.data} == {i for i in visible if world.nodes[i].parent == node_id},
                              where, "are not the visible children")
                    check_nodes(out, where, reply.data, visible)
                elif op == "tree":
                    out.check(set(walk(reply.data["roots"][0])) == world.subtree(node_id), where, "is not the subtree")
                elif op == "document":
                    check_nodes(out, where, [reply.data], visible)


def check_searches(m: Matrix, caller: Caller, http: Http, mcp: Mcp, out: Findings) -> None:
    """Search, answers and chat: only the visible published documents, and nothing else said."""
    world, visible = m.world, caller.visible
    banned = forbidden(world, visible)
    published = {world.nodes[i].name for i in visible if world.nodes[i].published}
    at = caller.name
    home = caller.ws
    replies = {
        "http search": http.call("search", query=COMMON, limit=25),
        "mcp search_knowledge": mcp.call("search", query=COMMON, limit=25),
        "mcp search_documents": mcp.call("search_documents", query=COMMON, limit=25),
        "mcp search_knowledge_base": mcp.call("kb_search", query=COMMON, top_k=50, workspace_id=home),
    }
    if home == "default" or caller.access == "none":  # answers cost the most: ws2 rows rely on its searches
        replies |= {"http ask": http.call("ask", query=ASK), "http chat": chat(http, "default"),
                    "mcp ask_knowledge": mcp.call("ask", query=ASK)}
    for name, reply in replies.items():
        where = f"{name} {at}"
        if caller.access == "none":
            prefix = "Tool failed: " if name in ("mcp search_knowledge", "mcp ask_knowledge") else ""
            out.no_access(where, reply, prefix + NO_ACCESS)
            continue
        if not out.check(reply.ok, where, f"failed: {reply.error}"):
            continue
        out.clean(where, reply, banned)
        data = reply.data
        if name == "http chat" or "sources" in data:
            titles = {s["title"] for s in data["sources"]}
        else:
            titles = {r.get("title") or r.get("name") for r in data["results"]}
        if "ask" in name or "chat" in name:
            out.check(titles <= published, where, f"cites {titles - published}")
        else:
            out.check(titles == published, where, f"found {sorted(titles)}, visible {sorted(published)}")


def chat(http: Http, model: str) -> Reply:
    response = http.client.post("/v1/chat/completions", json={"model": model, "messages": [
        {"role": "user", "content": ASK}]})
    payload = response.json()
    ok = response.status_code < 300
    return Reply(ok, payload if ok else None, None if ok else (response.status_code, payload),
                 None if ok else payload["error"]["message"], response.status_code, response.text)


def check_knowledge_bases(m: Matrix, caller: Caller, http: Http, mcp: Mcp, out: Findings) -> None:
    """Knowledge bases and workspaces named by a caller: a hidden one reads as a missing one."""
    world, visible, at = m.world, caller.visible, caller.name
    banned = forbidden(world, visible)
    other = next(w for w in WORKSPACES if w != caller.ws)
    annex = world.annex_names[caller.ws]
    sees_annex = world.id(caller.ws, "annex") in visible
    models = http.client.get("/v1/models")
    out.check(models.status_code == 200 and not leaks(models.text, banned), f"http models {at}", models.text[:300])
    wanted = ["default"] + ([annex] if sees_annex else [])
    out.check([d["id"] for d in models.json().get("data", [])] == wanted, f"http models {at}", models.text[:300])
    if not sees_annex:
        model = http.client.get(f"/v1/models/{annex}")
        nomodel = http.client.get("/v1/models/Nomodelhere")
        out.check((model.status_code, model.text.replace(annex, "X")) == (nomodel.status_code,
                  nomodel.text.replace("Nomodelhere", "X")), f"http models/{{annex}} {at}", model.text)
        pair = [chat(http, name) for name in (annex, "Nomodelhere")]
        out.check(pair[0].status == pair[1].status and pair[0].raw.replace(annex, "X") ==
                  pair[1].raw.replace("Nomodelhere", "X"), f"http chat model={{annex}} {at}", pair[0].raw)
        pair = [http.client.post("/v1/search", json={"query": COMMON, "kb": name}) for name in (annex, "Nokbhere")]
        out.check((pair[0].status_code, pair[0].text) == (pair[1].status_code, pair[1].text),
                  f"http search kb={{annex}} {at}", pair[0].text)
    kb_missing = mcp.call("kb_search", query=COMMON, workspace_id=caller.ws, kb_id="Nokbhere")
    hidden_kbs = [kb for kb in world.kbs[caller.ws] if not sees_annex and kb == world.kbs[caller.ws][1]]
    for kb in hidden_kbs + ([annex] if not sees_annex else []) + world.kbs[other]:
        if caller.access == "none":
            break
        out.like_missing(f"mcp search_knowledge_base kb_id={kb} {at}",
                         mcp.call("kb_search", query=COMMON, workspace_id=caller.ws, kb_id=kb), kb_missing)
    # The other workspace: a stranger there reads it as missing; a member gets what it may see there.
    there = mcp.call("kb_search", query=COMMON, workspace_id=other, top_k=50)
    where = f"mcp search_knowledge_base workspace_id={other} {at}"
    if caller.other is None:
        out.like_missing(where, there, mcp.call("kb_search", query=COMMON, workspace_id="nowherews", top_k=50))
    elif there.ok:
        out.clean(where, there, forbidden(world, caller.other | visible))
        found = {r["node_id"] for r in there.data["results"]}
        out.check(found <= caller.other, where, f"reads {sorted(world.nodes[i].name for i in found - caller.other)}")
    else:
        out.check(there.message == NO_ACCESS, where, f"failed: {there.error}")


def check_admin_reads(m: Matrix, caller: Caller, http: Http, out: Findings) -> None:
    """Activity and token listings: admins only, and only their workspace, their folders."""
    banned = forbidden(m.world, caller.visible)
    at = caller.name
    activity = http.client.get("/v1/activity", params={"limit": 1000})
    if out.check(activity.status_code == (200 if caller.role == "admin" else 403), f"http activity {at}",
                 f"{activity.status_code}") and activity.status_code == 200:
        for row in activity.json():
            if caller.access != "all":
                out.check(row["target"] in caller.visible, f"http activity {at}", f"shows {row}")
            if row["outcome"] == "ok":
                out.check(not leaks(row, banned), f"http activity {at}", f"leaks {leaks(row, banned)} in {row}")
    check_review_reads(m, caller, http, out, banned)
    tokens = http.client.get("/v1/tokens")
    allowed = caller.role == "admin" and not caller.agent and caller.access == "all"
    if out.check(tokens.status_code == (200 if allowed else 403), f"http tokens {at}", str(tokens.status_code)) \
            and allowed:
        rows = tokens.json()
        out.check({r["workspace_id"] for r in rows} == {caller.ws}, f"http tokens {at}", "lists another workspace")
        out.check(not leaks(rows, banned), f"http tokens {at}", f"leaks {leaks(rows, banned)}")


def check_review_reads(m: Matrix, caller: Caller, http: Http, out: Findings, banned: set[str]) -> None:
    """The reviewer's reads (rag/service/content/review.py): drafts and a node's history for editors and
    admins, a difference between versions for any reader; never anything outside the access, and a
    hidden id answers as a missing one."""
    at, client = caller.name, http.client
    reviewer = caller.role != "viewer" and caller.access != "none"
    drafts = client.get("/v1/drafts")
    if out.check(drafts.status_code == (200 if reviewer else 403), f"http drafts {at}", str(drafts.status_code)) \
            and reviewer:
        out.check(all(row["node_id"] in caller.visible for row in drafts.json()), f"http drafts {at}", drafts.text)
        out.check(not leaks(drafts.json(), banned), f"http drafts {at}", f"leaks {leaks(drafts.json(), banned)}")
    documents = [i for i in caller.visible if m.world.nodes[i].kind == "document"]
    hidden = [i for i in (hidden_targets(m.world, caller) if caller.access != "none" else [])
              if m.world.nodes[i].kind == "document"]
    for node_id in documents[:1] + hidden + [MISSING_ID]:
        seen = node_id in caller.visible
        diff = client.get(f"/v1/documents/{node_id}/diff", params={"from_version": 1, "to_version": 1})
        expected = 200 if seen else 404 if caller.access != "none" else 403
        out.check(diff.status_code == expected, f"http diff {at} {node_id}", f"{diff.status_code} {diff.text[:200]}")
        history = client.get(f"/v1/nodes/{node_id}/activity")
        expected = (200 if seen else 404) if reviewer else 403
        out.check(history.status_code == expected, f"http node activity {at} {node_id}", str(history.status_code))
        if history.status_code == 200:
            out.check(not leaks(history.json(), banned), f"http node activity {at}", history.text[:300])
        elif history.status_code == 404:
            out.check(history.json()["error"]["message"] == "not found", f"http node activity {at}", history.text)


@pytest.mark.parametrize("who", [c.name for c in CALLERS])
def test_reads_show_nothing_outside_the_callers_access(matrix: Matrix, who: str) -> None:
    caller, out = matrix.callers[who], Findings()
    with matrix.surfaces(caller, mcp=caller.full) as (http, mcp):
        for surface in (http, mcp) if mcp else (http,):
            check_reads(matrix, caller, surface, out)
        check_admin_reads(matrix, caller, http, out)
        if mcp:
            check_knowledge_bases(matrix, caller, http, mcp, out)
            check_searches(matrix, caller, http, mcp, out)
    out.done()


def hidden_targets(world: World, caller: Caller) -> list[str]:
    """Nodes a write row may not touch: the folder above its scope (or a sibling under access all),
    a document outside, and a folder and a document of the other workspace."""
    other = next(w for w in WORKSPACES if w != caller.ws)
    near = {"all": [], "top": ["root", "beta_doc"], "folder": ["alpha", "alpha_doc"], "nested": ["beta", "root_doc"]}
    return [world.id(caller.ws, k) for k in near[caller.access]] + [world.id(other, k) for k in ("inner", "inner_doc")]


@pytest.mark.parametrize("who", [c.name for c in WRITE_ROWS])
def test_writes_outside_the_access_fail_like_missing_and_change_nothing(matrix: Matrix, who: str) -> None:
    caller, out, world = matrix.callers[who], Findings(), matrix.world
    folder, document = world.id(caller.ws, "inner"), world.id(caller.ws, "inner_doc")  # visible to every row
    before = snapshot(matrix.svc)
    with matrix.surfaces(caller, mcp=caller.surface == "mcp") as (http, mcp):
        surface = mcp or http
        for op in ID_WRITES:
            if (surface is mcp and OPS[op].tool is None) or (not caller.writer and op not in ("set_summary", "move")):
                continue
            extra = {"parent_id": folder} if op == "move" else {"node": document} if op == "move_into" else {}
            missing = surface.call(op, MISSING_ID, **extra)
            for node_id in hidden_targets(world, caller):
                node = world.nodes[node_id]
                out.like_missing(f"{surface.name} {caller.name} {op} {node.ws}:{node.key}",
                                 surface.call(op, node_id, **extra), missing)
    out.check(snapshot(matrix.svc) == before, caller.name, "the store changed")
    out.done()


SCOPED = [c for c in CALLERS if c.ws == "default" and c.role == "editor" and c.write and c.access != "none"
          and not c.multi]


@pytest.mark.parametrize("who", [c.name for c in SCOPED])
def test_writes_inside_the_access_answer_nothing_from_outside(matrix: Matrix, who: str) -> None:
    """What a successful write answers stays inside too: the scoped folder itself (its summary and
    metadata set, its rename refused: a rename would meet the names around it) and a scratch folder
    and document."""
    caller, out, world = matrix.callers[who], Findings(), matrix.world
    banned = forbidden(world, caller.visible)
    top = world.id(caller.ws, "inner" if caller.access == "folder" else "alpha")  # its topmost folder
    with matrix.surfaces(caller, mcp=caller.surface == "mcp") as (http, mcp):
        surface = mcp or http
        replies = {
            "rename_folder": surface.call("rename_folder", top, name=world.nodes[top].name),
            "set_summary": surface.call("set_summary", top, summary=None),
            "set_metadata": surface.call("set_metadata", top, metadata=None),
            "create_folder": surface.call("create_folder", top, name=f"Scratch {caller.name}"),
        }
        scratch = replies["create_folder"].data["node_id"] if replies["create_folder"].ok else MISSING_ID
        replies["create_document"] = surface.call("create_document", scratch, name="Scratch Manual")
        made = replies["create_document"].data["node_id"] if replies["create_document"].ok else MISSING_ID
        replies["update_document"] = surface.call("update_document", made)
        replies["move"] = surface.call("move", made, parent_id=top)
        replies["delete_document"] = surface.call("delete_document", made)
        replies["delete_folder"] = surface.call("delete_folder", scratch)
        if caller.access != "all":  # a folder it was given, not one inside what it sees
            renamed = replies.pop("rename_folder")
            out.check(not renamed.ok and SCOPE_ROOT_FIXED in str(renamed.error), f"{surface.name} {caller.name} "
                      "rename_folder", f"renaming its own folder: {renamed.error or 'allowed'}")
        for op, reply in replies.items():
            where = f"{surface.name} {caller.name} {op}"
            if out.check(reply.ok, where, f"failed: {reply.error}"):
                out.clean(where, reply, banned)
                parent = reply.data.get("parent_id")
                out.check(parent is None or parent in caller.visible | {scratch, top}, where, f"hidden parent {parent}")
    out.done()


def test_an_admin_mints_tokens_only_for_its_own_workspace(matrix: Matrix) -> None:
    """Defect 1: a foreign principal or folder reads as a missing one; nothing changes for it, and a
    token of another workspace cannot be revoked, even by a person who belongs to both."""
    svc, world, out = matrix.svc, matrix.world, Findings()
    admin = matrix.callers["default-all-admin-rw-person"]
    stranger_secret, stranger = svc.create_token("ws2", "admin", ["knowledge:write"], "all")  # an admin of ws2
    victim = svc.create_token("ws2", "viewer")[1]
    both = svc.create_token("ws2", "admin", ["knowledge:write"], "all")[1]  # an admin of both, by the local CLI
    both_secret = svc.create_token("default", "admin", ["knowledge:write"], "all", principal_id=both.principal_id)[0]
    absent = "p_" + "0" * 16
    with matrix.surfaces(admin, mcp=False) as (http, _):
        def mint(**body: Any) -> httpx.Response:
            return http.client.post("/v1/tokens", json={"role": "viewer", **body})

        for extra in ({"access": "all"}, {"access": "all", "agent": True}):
            minted, missing = mint(principal_id=stranger.principal_id, **extra), mint(principal_id=absent, **extra)
            where = f"http POST /v1/tokens principal_id=<an admin of ws2> {extra}"
            same = (minted.status_code, minted.json()) == (missing.status_code, missing.json())
            out.check(same, where, f"{minted.status_code} {minted.text[:200]}; a missing one: {missing.text[:200]}")
            if minted.status_code == 201:
                follow_up(matrix, minted.json()["token"], victim.token_id, out)
        folder = mint(folders=[world.id("ws2", "alpha")]).text.replace(world.id("ws2", "alpha"), "X")
        out.check(folder == mint(folders=[MISSING_ID]).text.replace(MISSING_ID, "X"), "http POST /v1/tokens "
                  "folders=[<a ws2 folder>]", folder)
        revoke, revoke_missing = (http.client.delete(f"/v1/tokens/{t}") for t in (victim.token_id, "tok_" + "0" * 16))
        out.check((revoke.status_code, revoke.json()) == (revoke_missing.status_code, revoke_missing.json()),
                  "http DELETE /v1/tokens/<a ws2 token> by an admin of default", revoke.text[:200])
    with httpx.Client(base_url=matrix.url, headers={"Authorization": f"Bearer {both_secret}"}) as client:
        revoke = client.delete(f"/v1/tokens/{victim.token_id}")
        out.check(revoke.status_code == 404 and revoke.json()["error"]["message"] == "token not found",
                  "http DELETE /v1/tokens/<a ws2 token> with the default token of an admin of both", revoke.text[:200])
    out.check(svc.authenticate(stranger_secret).workspaces == {"ws2": "admin"}, "the admin of ws2",
              f"has memberships {svc.authenticate(stranger_secret).workspaces}")
    out.check(next(t for t in svc.list_tokens("ws2") if t.token_id == victim.token_id).active, "the ws2 token",
              "was revoked")
    out.done()


def follow_up(matrix: Matrix, secret: str, victim: str, out: Findings) -> None:
    """What a token minted for a foreign principal then reaches (the reproduction of defect 1)."""
    with matrix.surfaces(Caller("minted", "default", "viewer", False, "all", False, secret=secret)) as (http, mcp):
        found = mcp.call("kb_search", query=COMMON, workspace_id="ws2", top_k=50)
        out.check(not found.ok or not found.data["results"], "mcp search_knowledge_base workspace_id=ws2 with it",
                  f"reads {[r['title'] for r in found.data['results']] if found.ok else ''}")
        revoked = http.client.delete(f"/v1/tokens/{victim}")
        out.check(revoked.status_code == 404, "http DELETE /v1/tokens/<a ws2 token> with it", str(revoked.status_code))
