"""The editor's Sources page and its links to originals (issue 29), in-process with FastAPI's
TestClient: what each person sees is what the service lets them see, "Sync now" starts a real sync
of a real folder (and is refused to a non-admin, and while a sync runs), everything a source brought
is escaped, and only an http(s) URL of an original becomes a link."""

from __future__ import annotations

import json
import os
import re
import threading
import time
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest

from rag.service import KnowledgeService, Principal
from rag.settings import Settings
from rag.web.caller import original_link
from tests.support.editor import flashes, page_csrf, signed_in, sync_linked_pages

ADMIN = Principal.local_admin("default")
HOSTILE = '<img src=x onerror="alert(1)">'


class World:
    def __init__(self, svc: KnowledgeService, pages: Path, odd: Path) -> None:
        self.svc = svc
        kb = svc.knowledge_base(ADMIN, "default", create=True)
        self.handbook = svc.create_folder(ADMIN, kb.root_id, "handbook").node_id
        self.other = svc.create_folder(ADMIN, kb.root_id, "other").node_id
        svc.add_source(ADMIN, "docs", "folder", {"path": str(pages)}, folder="handbook", every="6h")
        svc.add_source(ADMIN, "odd", "folder", {"path": str(odd)}, folder="other/odd")
        self.tokens = {
            "admin": svc.create_token("default", "admin", ["knowledge:write"], None, (), False)[0],
            "editor": svc.create_token("default", "editor", ["knowledge:write"], None, (), False)[0],
            "in-handbook": svc.create_token("default", "editor", ["knowledge:write"], None, (self.handbook,),
                                            False)[0],
            "in-other": svc.create_token("default", "admin", ["knowledge:write"], None, (self.other,), False)[0],
        }
        report = sync_linked_pages(svc, "default", {
            "leave": ("https://intranet.example.org/leave?a=1&b=2", "# Annual leave\n\nStaff earn four hours of "
                      "annual leave every fortnight.\n"),
            "trap": ("javascript:alert(document.cookie)", "# Trap page\n\nThe parking garage closes at midnight.\n"),
            "file": ("file:///etc/passwd", "# Local file\n\nThe cafeteria opens at noon.\n"),
        })
        assert len(report.added) == 3
        self.linked = {child.name: child.node_id for child in svc.list_children(
            ADMIN, next(c.node_id for c in svc.list_children(ADMIN, kb.root_id) if c.name == "linked"))}


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    base = tmp_path_factory.mktemp("editor-sources")
    pages = base / "pages"
    (pages / "guides").mkdir(parents=True)
    (pages / "guides" / "vpn.md").write_text("# VPN setup\n\nInstall the client, then sign in.\n")
    (pages / "welcome.md").write_text("# Welcome\n\nThe handbook of the team.\n")
    odd = base / "odd"
    odd.mkdir()
    (odd / "fine.md").write_text("# Fine\n\nNothing odd here.\n")
    os.symlink(base / "nowhere.md", odd / f"{HOSTILE}.md")  # a broken link: that sync's one failure
    with KnowledgeService(Settings(home=base / "home")) as svc:
        svc.ensure_workspace("default")
        yield World(svc, pages, odd)


def wait_for(condition: Callable[[], Any], what: str, seconds: float = 60.0) -> Any:
    """Poll `condition` until it is truthy, up to `seconds`; fail saying `what` was awaited."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        found = condition()
        if found:
            return found
        time.sleep(0.05)
    pytest.fail(f"waited {seconds:.0f}s for {what}")


def source_row(page: str, name: str) -> str:
    return re.search(rf'<tr data-source="{name}">(.*?)</tr>', page, re.S).group(1)


def idle_and_ok(svc: KnowledgeService) -> bool:
    shown = svc.show_source(ADMIN, "docs").payload()
    return shown["status"] == "idle" and shown["last_sync"]["outcome"] == "ok"


def test_the_page_lists_a_folder_source_and_is_linked_from_the_navigation(world: World) -> None:
    client = signed_in(world.svc, world.tokens["editor"])
    home = client.get("/").text
    assert '<a href="/sources">Sources</a>' in home
    page = client.get("/sources")
    assert page.status_code == 200 and "script-src 'self'" in page.headers["content-security-policy"]
    row = source_row(page.text, "docs")
    assert "<td>folder</td>" in row and "<td>default:/handbook</td>" in row and "every 6h" in row
    assert 'id="sync-docs"' not in page.text and 'id="pause-docs"' not in page.text  # an editor does not manage


def test_a_folder_scoped_person_sees_only_the_sources_inside_their_folders(world: World) -> None:
    inside = signed_in(world.svc, world.tokens["in-handbook"]).get("/sources").text
    assert 'data-source="docs"' in inside
    outside = signed_in(world.svc, world.tokens["in-other"]).get("/sources").text
    assert 'data-source="docs"' not in outside and "handbook" not in outside and 'id="no-sources"' in outside


def test_sync_now_as_admin_syncs_and_the_page_shows_the_outcome_counts_and_failures(world: World) -> None:
    client = signed_in(world.svc, world.tokens["admin"])
    csrf = page_csrf(client, "/sources")
    started = client.post("/sources/docs/sync", data={"csrf": csrf})
    assert started.status_code == 303 and started.headers["location"] == "/sources"
    wait_for(lambda: idle_and_ok(world.svc), "the sync started from the page to end")
    page = client.get("/sources").text
    assert flashes(client, "/sources") == []  # the "syncing" message was shown once, on the page above
    assert "syncing docs" in page
    shown = world.svc.show_source(ADMIN, "docs").payload()
    assert shown["items"] == 2 and shown["last_sync"]["counts"]["added"] == 2
    row = source_row(page, "docs")
    assert "<td>2</td>" in row and "<td>ok · <time" in row
    assert "added 2 · updated 0 · unchanged 0 · removed 0 · skipped 0 · failed 0" in page
    assert 'id="sync-docs"' in page and 'id="pause-docs"' in page


def test_the_last_error_and_failures_are_shown_escaped(world: World) -> None:
    _, report = world.svc.sync_source(ADMIN, "odd")
    assert report.outcome == "partial" and len(report.failed) == 1
    page = signed_in(world.svc, world.tokens["in-other"]).get("/sources").text
    assert "<td>partial · <time" in source_row(page, "odd") and 'data-source="docs"' not in page
    # The failure's item is a file name from the folder: escaped, never markup.
    assert HOSTILE not in page and "&lt;img src=x onerror=&#34;alert(1)&#34;&gt;.md" in page and "a broken link" in page
    assert 'id="sync-odd"' not in page  # a folder-scoped admin does not manage sources


def test_sync_now_is_refused_to_a_non_admin_and_while_a_sync_runs(world: World) -> None:
    editor = signed_in(world.svc, world.tokens["editor"])
    editor.post("/sources/docs/sync", data={"csrf": page_csrf(editor, "/sources")})
    assert flashes(editor, "/sources") == ["this needs the admin role"]
    scoped_admin = signed_in(world.svc, world.tokens["in-other"])
    refused = scoped_admin.post("/sources/docs/sync", data={"csrf": page_csrf(scoped_admin, "/sources")})
    assert flashes(scoped_admin, refused.headers["location"]) == ["managing sources needs knowledge-base access all"]

    # A sync held at its listing: the page says it runs, and "Sync now" meets the service's Busy.
    listed, release = threading.Event(), threading.Event()

    def hold(stage: str, done: int, total: int) -> None:
        if stage == "listing" and total:
            listed.set()
            release.wait(30)

    running = threading.Thread(target=world.svc.sync_source, args=(ADMIN, "docs"), kwargs={"progress": hold})
    running.start()
    try:
        assert listed.wait(30), "the sync never listed the folder"
        admin = signed_in(world.svc, world.tokens["admin"])
        page = admin.get("/sources").text
        assert 'data-status-of="docs">running</span>' in page and "running: listing" in page
        admin.post("/sources/docs/sync", data={"csrf": page_csrf(admin, "/sources")})
        assert flashes(admin, "/sources") == ["a sync of this source is running already; it is synced once at a time"]
    finally:
        release.set()
        running.join(30)
    assert not running.is_alive()
    wait_for(lambda: idle_and_ok(world.svc), "the held sync to end")


def test_pause_and_resume_from_the_page(world: World) -> None:
    admin = signed_in(world.svc, world.tokens["admin"])
    admin.post("/sources/docs/pause", data={"csrf": page_csrf(admin, "/sources")})
    assert flashes(admin, "/sources") == ["docs paused"]
    assert world.svc.show_source(ADMIN, "docs").payload()["paused"] is True
    assert 'id="resume-docs"' in admin.get("/sources").text
    admin.post("/sources/docs/resume", data={"csrf": page_csrf(admin, "/sources")})
    assert flashes(admin, "/sources") == ["docs resumed"]
    assert world.svc.show_source(ADMIN, "docs").payload()["paused"] is False
    editor = signed_in(world.svc, world.tokens["editor"])
    editor.post("/sources/docs/pause", data={"csrf": page_csrf(editor, "/sources")})
    assert flashes(editor, "/sources") == ["this needs the admin role"]
    assert world.svc.show_source(ADMIN, "docs").payload()["paused"] is False


def test_a_document_with_an_http_url_links_to_its_original_and_others_do_not(world: World) -> None:
    client = signed_in(world.svc, world.tokens["editor"])
    leave = client.get(f"/documents/{world.linked['Annual leave']}").text
    assert ('<a href="https://intranet.example.org/leave?a=1&amp;b=2" rel="noopener noreferrer" class="original">'
            in leave)
    for name, url in [("Trap page", "javascript:alert(document.cookie)"), ("Local file", "file:///etc/passwd")]:
        page = client.get(f"/documents/{world.linked[name]}").text
        assert f'href="{url}' not in page and 'class="original"' in page
        assert re.search(r'<span class="original"[^>]*>' + re.escape(url) + "</span>", page)
    ingested = world.svc.list_children(ADMIN, world.handbook)
    assert ingested and all(child.url is None for child in ingested)  # a folder's files have no original URL


def test_answer_sources_link_to_the_original(world: World) -> None:
    client = signed_in(world.svc, world.tokens["editor"])
    csrf = page_csrf(client, "/ask")
    page = client.post("/ask", data={"query": "How much annual leave do staff earn every fortnight?",
                                     "csrf": csrf}).text
    sources = re.search(r'<ol id="sources" class="sources">(.*?)</ol>', page, re.S).group(1)
    assert "Annual leave" in sources
    assert '<a href="https://intranet.example.org/leave?a=1&amp;b=2" rel="noopener noreferrer"' in sources
    streamed = client.post("/ask/stream", json={"query": "When does the parking garage close?"},
                           headers={"X-CSRF-Token": csrf}).text
    done = json.loads(streamed.split("event: done", 1)[1].split("data: ", 1)[1].split("\n\n", 1)[0])
    trap = next(s for s in done["sources"] if s["title"] == "Trap page")
    assert trap["url"] == "javascript:alert(document.cookie)" and trap["original"] is None


@pytest.mark.parametrize("url, link", [
    ("https://example.org/a", True), ("http://127.0.0.1:8080/x?y=1", True), ("HTTPS://EXAMPLE.ORG", True),
    ("javascript:alert(1)", False), (" javascript:alert(1)", False), ("JaVaScRiPt:alert(1)", False),
    ("java\tscript:alert(1)", False), ("file:///etc/passwd", False), ("data:text/html,<b>x</b>", False),
    ("//example.org/a", False), ("/documents/x", False), ("https://", False), ("https://exa mple.org", False),
    ("https://[::1", False), (None, False), ("", False),
])
def test_only_http_urls_with_a_host_become_links(url: Any, link: bool) -> None:
    assert original_link(url) == (url if link else None)
