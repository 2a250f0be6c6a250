"""Each workspace confined to what the operator allows it (issue 49, defects 2, 6 and 8(e)): for
every role and both workspaces, a source on a local path inside and outside the operator's
RAG_SOURCES__LOCAL_ROOTS, on RAG_HOME and on another source's mirror, a source's own `allow_hosts`
that would widen the operator's RAG_SOURCES__ALLOW_HOSTS and one that narrows it, and who sees a
source's settings. Service calls with real tokens (the principal /v1/sources, MCP and the editor
act as), the operator's `rag` command as Principal.local_admin; no browser, no server process."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest
from sqlalchemy import select

from rag.errors import InvalidArgument, NotFound, PermissionDenied
from rag.service import KnowledgeService, Principal
from rag.settings import Settings
from rag.sources import addresses
from rag.store.models import Source

WORKSPACES = ("default", "ws2")
ROLES = ("viewer", "editor", "admin")
REFUSED = "is not inside a directory the operator lets sources read"


@dataclass
class World:
    svc: KnowledgeService
    root: Path  # the operator's one local root; RAG_HOME lies inside it
    outside: Path  # a directory the server can read, outside the root
    callers: dict[tuple[str, str], Principal]  # (workspace, role) -> a token's principal, access all
    scoped_admin: Principal  # an admin of "default" whose token reaches the folder "Seed" only


def _page(folder: Path, name: str, text: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_text(text)
    return folder


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory):
    base = tmp_path_factory.mktemp("tenancy")
    root, outside = base / "root", base / "outside"
    _page(root / "docs", "inside.md", "# Inside\n\nThe Saffronquill page lies inside the root.\n")
    _page(outside, "secret.md", "# Outside\n\nThe Vermilionowl page must never be read by a workspace.\n")
    settings = Settings(home=root / "home", sources={"local_roots": [str(root)], "allow_hosts": ["127.0.0.1"]})
    with KnowledgeService(settings) as svc:
        callers = {}
        for ws in WORKSPACES:
            for role in ROLES:
                secret, _ = svc.create_token(ws, role, ["knowledge:read", "knowledge:write"], "all")
                callers[(ws, role)] = svc.authenticate(secret)
        operator = Principal.local_admin("default")
        svc.create_folder(operator, None, "Seed")
        seed = svc.add_source(operator, "seed", "folder", {"path": str(root / "docs")}, None, "Seed")
        assert seed.row.added_by_operator
        scoped, _ = svc.create_token("default", "admin", ["knowledge:read", "knowledge:write"], "folders", ["Seed"])
        yield World(svc, root, outside, callers, svc.authenticate(scoped))


def _names(world: World, ws: str, role: str, label: str) -> str:
    return f"{label}-{ws}-{role}"


def test_a_local_path_is_taken_inside_the_roots_only_for_every_role_and_workspace(world: World) -> None:
    svc, home = world.svc, world.svc.settings.home
    link = world.root / "to-outside"
    if not link.exists():
        link.symlink_to(world.outside, target_is_directory=True)
    refused_paths = {
        "outside": world.outside, "missing": world.outside / "no-such-dir", "home": home,
        "home's sources": home / "sources", "above home": world.root.parent, "link out": link,
        "dotdot": world.root / "docs" / ".." / ".." / "outside",
    }
    for ws in WORKSPACES:
        for role in ROLES:
            caller = world.callers[(ws, role)]
            inside = {"path": str(world.root / "docs")}
            if role != "admin":  # the role decides first: no path is looked at
                with pytest.raises(PermissionDenied) as denied:
                    svc.add_source(caller, _names(world, ws, role, "in"), "folder", inside)
                assert REFUSED not in denied.value.message
                continue
            added = svc.add_source(caller, _names(world, ws, role, "in"), "folder", inside, None, "In")
            assert not added.row.added_by_operator
            messages = {}
            for label, path in refused_paths.items():
                with pytest.raises(PermissionDenied, match=REFUSED) as denied:
                    svc.add_source(caller, _names(world, ws, role, label.replace(" ", "").replace("'", "")),
                                   "folder", {"path": str(path)})
                messages[label] = denied.value.message.replace(repr(str(path)), "PATH")
            # The same sentence whether the path exists or not: the refusal tells nothing of the disk.
            assert len(set(messages.values())) == 1, messages
            with pytest.raises(PermissionDenied, match=REFUSED):
                svc.change_source(caller, _names(world, ws, role, "in"), config={"path": str(world.outside)})
            assert svc.show_source(caller, _names(world, ws, role, "in")).row.config == inside


def test_git_and_export_sources_name_local_paths_inside_the_roots_only(world: World) -> None:
    admin = world.callers[("ws2", "admin")]
    with world.svc.db.session() as session:
        seed = session.scalar(select(Source.id).where(Source.name == "seed"))
    mirror = world.svc.settings.home / "sources" / seed / "mirror.git"
    for config in ({"repository": str(world.outside / "repo.git")},
                   {"repository": (world.outside / "repo.git").as_uri()},
                   {"repository": f"file://{mirror}"},  # another source's mirror, inside the root
                   {"repository": str(mirror)},
                   {"repository": "https://git.example.org/org/repo.git", "cache_dir": str(world.outside)}):
        with pytest.raises(PermissionDenied, match=REFUSED):
            world.svc.add_source(admin, "repo", "git", config)
    world.svc.add_source(admin, "repo", "git", {"repository": (world.root / "repo.git").as_uri()})
    for kind in ("notion", "confluence"):
        with pytest.raises(PermissionDenied, match=REFUSED):
            world.svc.add_source(admin, f"{kind}-export", kind, {"path": str(world.outside / "export.zip")})
        world.svc.add_source(admin, f"{kind}-export", kind, {"path": str(world.root / "export.zip")})


def test_a_non_operator_ingest_reads_inside_the_roots_only(world: World) -> None:
    with pytest.raises(PermissionDenied, match=REFUSED):
        world.svc.ingest_directory(world.callers[("ws2", "admin")], world.outside)


def test_an_operator_source_syncs_any_path_until_an_admin_changes_its_settings(world: World) -> None:
    svc, admin = world.svc, world.callers[("ws2", "admin")]
    svc.ensure_workspace("ws2")
    svc.add_source(Principal.local_admin("ws2"), "operators", "folder", {"path": str(world.outside)}, None, "Ops")
    assert svc.change_source(admin, "operators", every="1h").row.added_by_operator  # a schedule is no path
    _, report = svc.sync_source(admin, "operators")
    assert report.error is None and len(report.added) == 1
    with pytest.raises(PermissionDenied, match=REFUSED):  # the admin may not point it elsewhere outside
        svc.change_source(admin, "operators", config={"path": str(world.outside / ".")})
    moving = world.root / "moving"
    moving.symlink_to(world.root / "docs", target_is_directory=True)
    changed = svc.change_source(admin, "operators", config={"path": str(moving)})
    assert not changed.row.added_by_operator  # the admin's now: held to the roots on every sync
    moving.unlink()
    moving.symlink_to(world.outside, target_is_directory=True)  # the link swapped after the check
    _, report = svc.sync_source(admin, "operators")
    assert report.error is not None and REFUSED in report.error and not report.added


def test_a_sources_own_allow_hosts_may_narrow_the_operators_never_widen_it(world: World) -> None:
    configs = {
        "website": {"start_urls": ["http://127.0.0.1:9/docs/"]},
        "s3": {"bucket": "docs", "endpoint_url": "http://127.0.0.1:9"},
        "imap": {"host": "127.0.0.1", "username": "team", "security": "none"},
    }
    for ws in WORKSPACES:
        for role in ROLES:
            caller = world.callers[(ws, role)]
            for kind, config in configs.items():
                name, secret = f"{kind}-{ws}-{role}", "mail" if kind == "imap" else None
                if role != "admin":
                    with pytest.raises(PermissionDenied):
                        world.svc.add_source(caller, name, kind, {**config, "allow_hosts": ["127.0.0.1"]},
                                             secret=secret)
                    continue
                for wider in (["127.0.0.1", "169.254.169.254"], ["10.0.0.1"], ["localhost"]):
                    with pytest.raises(InvalidArgument, match="allow_hosts may only narrow") as refused:
                        world.svc.add_source(caller, name, kind, {**config, "allow_hosts": wider}, secret=secret)
                    assert wider[-1] in refused.value.message
                world.svc.add_source(caller, name, kind, {**config, "allow_hosts": ["127.0.0.1"]}, secret=secret)
                with pytest.raises(InvalidArgument, match="allow_hosts may only narrow"):
                    world.svc.change_source(caller, name, config={**config, "allow_hosts": ["192.168.1.1"]})


def test_only_admins_with_access_all_see_a_sources_settings(world: World) -> None:
    svc = world.svc
    for ws in WORKSPACES:
        svc.ensure_workspace(ws)
        svc.add_source(Principal.local_admin(ws), f"shown-{ws}", "imap",
                       {"host": "127.0.0.1", "username": "archivist", "security": "none"}, secret="mail")
    for ws in WORKSPACES:
        for role in ROLES:
            caller = world.callers[(ws, role)]
            shown = svc.show_source(caller, f"shown-{ws}").payload()
            listed = [s.payload() for s in svc.list_sources(caller)]
            assert {s["name"] for s in listed} >= {f"shown-{ws}"}
            if role == "admin":
                assert shown["config"]["username"] == "archivist" and shown["secret"] == "mail"
            else:
                assert "config" not in shown and "secret" not in shown, shown
                assert all("config" not in s and "secret" not in s for s in listed)
                assert "archivist" not in str(listed)
            assert {"name", "kind", "knowledge_base", "folder", "status", "items", "last_sync"} <= set(shown)
            other = WORKSPACES[1 - WORKSPACES.index(ws)]
            with pytest.raises(NotFound):
                svc.show_source(caller, f"shown-{other}")
    seen = [s.payload() for s in svc.list_sources(world.scoped_admin)]  # an admin of some folders only: no settings
    assert [s["name"] for s in seen] == ["seed"] and "config" not in seen[0]


def test_a_website_source_never_reaches_the_services_own_port(world: World, monkeypatch: pytest.MonkeyPatch) -> None:
    """The attack of defect 6: a workspace's admin points a website source at `rag serve`'s own
    /metrics. 127.0.0.1 is allowed by the operator (as the tests' sites need), its own port never."""
    monkeypatch.setattr(addresses, "_serving", set())
    monkeypatch.delenv(addresses.SERVING_VARIABLE, raising=False)
    addresses.serving("127.0.0.1", 9)  # as `rag serve --host 127.0.0.1 --port 9` records it
    admin = world.callers[("ws2", "admin")]
    world.svc.add_source(admin, "own-metrics", "website", {"start_urls": ["http://127.0.0.1:9/metrics"]})
    _, report = world.svc.sync_source(admin, "own-metrics")
    assert report.error is not None and "this service's own address; always refused" in report.error, report.error
    assert not report.added
