"""An upgrade keeps the access rules (issue 27, defect 5). Migration 0006 added `home_only` false for
every token that existed then, so a token a workspace's admin had made over the API kept acting in
its principal's other workspaces. The store here is built as an older release left it: alembic to
revision 0005, then rows as that code wrote them (git show 879be5d:rag/service/tokens.py and
rag/service/core.py's `record`): the CLI's tokens recorded by the actor `local-cli`, the API's by
the admin's own actor, with `created_token` and the admin's `token_id` in the detail. Opened with
this code (which migrates it to the head), the API-made tokens act in their home workspace only;
the CLI-made ones are as they were. On both deployments."""

from __future__ import annotations

import hashlib
import json
from datetime import datetime, timezone
from pathlib import Path

import pytest
import sqlalchemy as sa

from rag.errors import NotFound
from rag.service import KnowledgeService, Principal
from rag.settings import Settings
from rag.store.models import new_id

from ..support.store import alembic_config

NOW = datetime(2026, 6, 1, 12, 0, tzinfo=timezone.utc)
QUESTION = "How many days of annual leave?"


def _table(name: str, *columns: str, json: tuple[str, ...] = ()) -> sa.TableClause:
    def kind(column: str) -> sa.types.TypeEngine:
        return sa.JSON() if column in json else sa.DateTime(timezone=True) if column.endswith("_at") else sa.String()

    return sa.table(name, *(sa.column(c, kind(c)) for c in columns))


WORKSPACES = _table("workspaces", "id", "name", "created_at")
PRINCIPALS = _table("principals", "id", "name", "kind", "created_at")
MEMBERSHIPS = _table("memberships", "principal_id", "workspace_id", "role", "created_at")
TOKENS = _table("tokens", "id", "principal_id", "workspace_id", "secret_hash", "scopes", "access", "folder_ids",
                "created_at", json=("scopes", "folder_ids"))
ACTIVITY = _table("activity", "workspace_id", "actor", "action", "target", "outcome", "detail", "created_at",
                  json=("detail",))


class OldStore:
    """Rows as revision 0005's code wrote them."""

    def __init__(self) -> None:
        self.rows: dict[sa.TableClause, list[dict]] = {t: [] for t in (WORKSPACES, PRINCIPALS, MEMBERSHIPS, TOKENS,
                                                                        ACTIVITY)}
        self.secrets: dict[str, str] = {}  # token label -> secret
        self.ids: dict[str, str] = {}  # token label -> id
        for ws in ("default", "ws2"):
            self.rows[WORKSPACES].append({"id": ws, "name": ws, "created_at": NOW})

    def principal(self, name: str, kind: str, roles: dict[str, str]) -> str:
        pid = new_id("p")
        self.rows[PRINCIPALS].append({"id": pid, "name": name, "kind": kind, "created_at": NOW})
        for ws, role in roles.items():
            self.rows[MEMBERSHIPS].append({"principal_id": pid, "workspace_id": ws, "role": role, "created_at": NOW})
        return pid

    def token(self, label: str, pid: str, workspace: str, role: str, *, by: tuple[str, str] | None = None,
              agent: bool = False) -> None:
        """`by`: (actor, its token id), an admin over POST /v1/tokens; None: the local CLI."""
        token_id, secret = new_id("tok"), f"rag_{label}_{new_id('s')}"
        self.ids[label], self.secrets[label] = token_id, secret
        access = "none" if agent else "all"
        self.rows[TOKENS].append({
            "id": token_id, "principal_id": pid, "workspace_id": workspace,
            "secret_hash": hashlib.sha256(secret.encode()).hexdigest(), "scopes": ["knowledge:read"],
            "access": access, "folder_ids": [], "created_at": NOW,
        })
        detail = {"workspace": workspace, "role": role, "access": None, "agent": agent, "expires_days": None,
                  "created_token": token_id}
        actor = "local-cli"
        if by is not None:
            actor, detail["token_id"] = by[0], by[1]
        self.rows[ACTIVITY].append({"workspace_id": workspace, "actor": actor, "action": "create_token",
                                    "target": None, "outcome": "ok", "detail": detail, "created_at": NOW})

    def write(self, url: str) -> None:
        from alembic import command

        engine = sa.create_engine(url)
        try:
            with engine.begin() as conn:
                config = alembic_config()
                config.attributes["connection"] = conn
                command.upgrade(config, "0005")
                for table, rows in self.rows.items():
                    if rows:
                        conn.execute(sa.insert(table), rows)
            assert "home_only" not in {c["name"] for c in sa.inspect(engine).get_columns("tokens")}
        finally:
            engine.dispose()


def old_store() -> OldStore:
    """Person X: an editor of default and a viewer of ws2. ws2's admin made X a ws2 token over the
    API (the issue's reproduction), and another for agent A (a member of both); the CLI made X's
    own tokens, A's default token, ws2's admin's token and the first-run admin token."""
    old = OldStore()
    x = old.principal("x", "person", {"default": "editor", "ws2": "viewer"})
    admin2 = old.principal("admin2", "person", {"ws2": "admin"})
    agent = old.principal("agent-a", "agent", {"default": "viewer", "ws2": "viewer"})
    root = old.principal("root", "person", {"default": "admin"})
    old.token("first_run", root, "default", "admin")  # rag serve's first admin token: the CLI's
    old.token("admin2", admin2, "ws2", "admin")
    old.token("cli_x_default", x, "default", "editor")
    old.token("cli_x_ws2", x, "ws2", "viewer")  # `rag token create -w ws2`: acts in default too
    old.token("cli_agent", agent, "default", "viewer", agent=True)
    by_admin2 = (f"person:admin2 ({admin2})", old.ids["admin2"])
    old.token("api_x", x, "ws2", "viewer", by=by_admin2)
    old.token("api_agent", agent, "ws2", "viewer", by=by_admin2, agent=True)
    # Rows that name no token made: a refused attempt and a listing, by the same admin.
    old.rows[ACTIVITY] += [
        {"workspace_id": "ws2", "actor": by_admin2[0], "action": "create_token", "target": None,
         "outcome": "permission_denied", "detail": {"workspace": "ws2", "token_id": old.ids["admin2"]},
         "created_at": NOW},
        {"workspace_id": "ws2", "actor": by_admin2[0], "action": "list_tokens", "target": None, "outcome": "ok",
         "detail": {"token_id": old.ids["admin2"]}, "created_at": NOW},
    ]
    return old


@pytest.fixture(params=["sqlite", "postgresql"])
def upgraded(request: pytest.FixtureRequest, tmp_path: Path):
    """The old store, opened with this code."""
    home = tmp_path / "home"
    if request.param == "postgresql":
        url = request.getfixturevalue("postgres").new_database()
        settings = Settings(home=home, database_url=url, chroma_url=request.getfixturevalue("chroma_server"))
    else:
        home.mkdir()
        settings = Settings(home=home)
    old = old_store()
    old.write(settings.sqlalchemy_url)
    pages = tmp_path / "pages"
    pages.mkdir()
    (pages / "leave.md").write_text("# Annual leave\n\nEveryone earns 26 days of annual leave a year.\n")
    with KnowledgeService(settings) as svc:
        svc.ingest_directory(Principal.local_admin("default"), pages, kb_name="handbook")
        yield svc, old


def test_api_made_tokens_act_in_their_home_workspace_only_after_the_upgrade(upgraded):
    svc, old = upgraded
    x = svc.authenticate(old.secrets["api_x"])
    assert x.workspaces == {"ws2": "viewer"}
    with pytest.raises(NotFound, match="^workspace not found$"):
        svc.search_knowledge_base(x, QUESTION, workspace_id="default")
    assert svc.search_knowledge_base(x, QUESTION).workspace_id == "ws2"  # its own workspace still answers
    assert svc.authenticate(old.secrets["api_agent"]).workspaces == {"ws2": "viewer"}
    home_only = {t.token_id: t.home_only for t in svc.list_tokens()}
    assert {label for label, token_id in old.ids.items() if home_only[token_id]} == {"api_x", "api_agent"}


def test_cli_made_tokens_act_as_they_did_after_the_upgrade(upgraded):
    svc, old = upgraded
    x = svc.authenticate(old.secrets["cli_x_ws2"])  # home ws2, and default by X's standing there
    assert x.workspaces == {"default": "editor", "ws2": "viewer"}
    found = svc.search_knowledge_base(x, QUESTION, workspace_id="default")
    assert found.hits and "26 days" in found.hits[0].text
    assert svc.authenticate(old.secrets["cli_agent"]).workspaces == {"default": "viewer", "ws2": "viewer"}
    assert svc.authenticate(old.secrets["first_run"]).workspaces == {"default": "admin"}
    assert svc.authenticate(old.secrets["admin2"]).workspaces == {"ws2": "admin"}


def test_an_archive_from_before_home_only_imports_with_the_rule(upgraded, tmp_path):
    """`rag import` of an archive an older release exported (its token rows have no `home_only`)
    applies the same rule: the API-made tokens act in their home workspace only."""
    svc, old = upgraded
    archive, older = tmp_path / "now.jsonl", tmp_path / "older.jsonl"
    svc.export_archive(Principal.local_admin("default"), archive)
    lines = [json.loads(line) for line in archive.read_text().splitlines()]
    lines[0]["revision"] = "0005"
    for line in lines[1:]:
        if line["table"] == "tokens":
            del line["row"]["home_only"]
    older.write_text("".join(json.dumps(line) + "\n" for line in lines))
    with KnowledgeService(Settings(home=tmp_path / "target")) as target:
        target.import_archive(Principal.local_admin("default"), older)
        home_only = {t.token_id: t.home_only for t in target.list_tokens()}
        assert {label for label, token_id in old.ids.items() if home_only[token_id]} == {"api_x", "api_agent"}
        with pytest.raises(NotFound, match="^workspace not found$"):
            target.search_knowledge_base(target.authenticate(old.secrets["api_x"]), QUESTION, workspace_id="default")
