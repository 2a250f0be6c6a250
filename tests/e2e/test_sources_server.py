"""Sources beside a running `rag serve` (issue 29), with real processes: the scheduler syncs a
folder source that /v1/sources added and follows a change to it; a sync started over HTTP runs in
the background and a second one is refused while it runs; bad bodies and callers that may not are
refused in plain words; the CLI relays `rag source sync` and `list` to the server; and an answer
about a page a website source brought cites the page's URL on every surface (/v1/ask, the
OpenAI-compatible sources field, MCP's structured output).

One server per module (a fresh store, so its first-run admin token is the admin's), one site on
127.0.0.1 in the test process, and every wait a condition with a deadline."""

from __future__ import annotations

import json
import re
from pathlib import Path

import anyio
import pytest

from ..support.mcp_support import http_session
from ..support.processes import wait_until
from ..support.site_server import SiteServer, build_site
from ..support.sources_e2e import Served, handbook_pages, rag_cli, rag_serve

MARKER = "zephyrquartz"  # a word no handbook page has, written into a page to see the change arrive
CERTS_PAGE = "/docs/concepts/authentication/certificates.html"
CERTS_QUESTION = "How does uv use TLS certificates to verify the identity of package indexes?"
LEAKS = ("Traceback", "sqlalchemy", "SELECT ", "INSERT ", "File \"")


@pytest.fixture(scope="module")
def site():
    with SiteServer(build_site(6)) as server:
        yield server


@pytest.fixture(scope="module")
def served(tmp_path_factory) -> Served:
    root = tmp_path_factory.mktemp("sources-server")
    with rag_serve(root / "home") as running:
        yield running


def _add(served: Served, body: dict, token: str | None = None):
    with served.client(token) as http:
        return http.post("/v1/sources", json=body)


def _folder(served: Served, name: str, count: int) -> Path:
    return handbook_pages(served.home.parent / name, count)


def _search(served: Served, text: str) -> list[dict]:
    with served.client() as http:
        found = http.post("/v1/search", json={"query": text, "limit": 5})
    assert found.status_code == 200, found.text
    return found.json()["results"]


def test_the_scheduler_syncs_a_source_added_over_http_and_follows_its_changes(served):
    pages = _folder(served, "scheduled", 6)
    made = _add(served, {"name": "scheduled", "kind": "folder", "config": {"path": str(pages)},
                         "folder": "Scheduled", "every": "2s"})
    assert made.status_code == 201, made.text
    assert made.json()["every_seconds"] == 2 and made.json()["next_run_at"] is not None
    first = served.synced("scheduled")
    assert first["last_sync"]["outcome"] == "ok", first
    assert first["items"] == 6 and first["last_sync"]["counts"]["added"] == 6
    target = sorted(pages.rglob("*.md"))[-1]
    page_id = f"fs:default:scheduled:{target.relative_to(pages).as_posix()}"
    title_words = re.search(r"^title: (.+)$", target.read_text(), re.M).group(1)
    assert any(r["document_id"] == page_id for r in _search(served, title_words))

    target.write_text(target.read_text() + f"\n\nThe {MARKER} rule: badges are returned on the last day.\n")

    def changed() -> list[dict] | None:  # a later scheduled sync stored and published the new text
        hits = _search(served, f"{MARKER} rule badges")
        return hits if hits and hits[0]["document_id"] == page_id and MARKER in json.dumps(hits[0]) else None

    wait_until(changed, 120, "a scheduled sync that brings the changed page")
    later = served.source("scheduled")
    assert later["last_sync"]["outcome"] == "ok" and later["items"] == 6
    assert later["last_sync"]["finished_at"] >= first["last_sync"]["finished_at"]
    with served.client() as http:  # the rest of the module does not need it running every 2 s
        assert http.patch("/v1/sources/scheduled", json={"paused": True}).json()["paused"] is True


def test_a_sync_started_over_http_runs_in_the_background_and_a_second_is_refused(served):
    pages = _folder(served, "bulk", 60)
    assert _add(served, {"name": "bulk", "kind": "folder", "config": {"path": str(pages)},
                         "folder": "Bulk"}).status_code == 201
    with served.client() as http:
        seen_busy = None
        for _ in range(3):  # a sync too quick to catch running is retried with its pages changed
            started = http.post("/v1/sources/bulk/sync")
            assert started.status_code == 202, started.text
            assert started.json()["status"] == "running"
            second = http.post("/v1/sources/bulk/sync")
            running = http.get("/v1/sources/bulk").json()
            if second.status_code == 409 and running["status"] == "running":
                seen_busy = second
                assert "progress" in running
                break
            served.synced("bulk")
            for page in pages.rglob("*.md"):
                page.write_text(page.read_text() + "\n\nAgain.\n")
        assert seen_busy is not None, "no sync of 60 pages was seen running"
        body = seen_busy.json()
        assert "a sync of this source is running already" in body["error"]["message"]
        assert not any(leak in seen_busy.text for leak in LEAKS)
    done = served.synced("bulk")
    assert done["last_sync"]["outcome"] == "ok" and done["items"] == 60, done


@pytest.mark.parametrize(("body", "status", "named"), [
    ({"name": "odd", "kind": "ftp", "config": {}}, 400, "unknown source kind 'ftp'"),
    ({"name": "odd", "kind": "folder", "config": {"path": "/srv/x", "pth": "/srv/y"}}, 400,
     "pth: Extra inputs are not permitted"),
    ({"name": "odd", "kind": "folder", "config": {}}, 400, "path: Field required"),
    ({"name": "odd", "kind": "folder", "config": {"path": "/srv/x"}, "every": "often"}, 400, "`every`"),
    ({"name": "bad name!", "kind": "folder", "config": {"path": "/srv/x"}}, 400, "source's name"),
    # A field of the body itself, not of the kind's settings: the API's schema check (422, as everywhere).
    ({"name": "odd", "kind": "folder", "config": {"path": "/srv/x"}, "colour": "red"}, 422, "colour"),
])
def test_a_bad_body_is_refused_naming_the_setting_without_internals(served, body, status, named):
    answered = _add(served, body)
    assert answered.status_code == status, answered.text
    assert named in answered.json()["error"]["message"], answered.text
    assert not any(leak in answered.text for leak in LEAKS)


def _token(served: Served, *args: str) -> str:
    made = rag_cli(served.home, "token", "create", "--workspace", "default", *args)
    assert made.returncode == 0, made.stderr
    return made.stdout.strip()


def test_who_sees_and_who_may_change_sources(served):
    for name, folder in (("inside", "Scoped/Team"), ("outside", "Elsewhere")):
        pages = _folder(served, name, 2)
        assert _add(served, {"name": name, "kind": "folder", "config": {"path": str(pages)},
                             "folder": folder}).status_code == 201
        with served.client() as http:
            assert http.post(f"/v1/sources/{name}/sync").status_code == 202
        served.synced(name)
    viewer = _token(served, "--role", "viewer")
    scoped = _token(served, "--role", "viewer", "--folders", "Scoped")
    editor = _token(served, "--role", "editor", "--scope", "knowledge:write")
    new = {"name": "theirs", "kind": "folder", "config": {"path": str(served.home.parent / "x")}}
    # (caller, sees in the list, GET inside, GET outside, POST add)
    rows = [
        (served.admin, {"inside", "outside"}, 200, 200, 201),
        (viewer, {"inside", "outside"}, 200, 200, 403),
        (editor, {"inside", "outside"}, 200, 200, 403),
        (scoped, {"inside"}, 200, 404, 403),
    ]
    for token, sees, inside, outside, add in rows:
        with served.client(token) as http:
            listed = http.get("/v1/sources")
            assert listed.status_code == 200, listed.text
            assert sees <= {s["name"] for s in listed.json()}
            if token != served.admin:
                assert all("secret" not in s for s in listed.json())
            assert http.get("/v1/sources/inside").status_code == inside
            hidden = http.get("/v1/sources/outside")
            assert hidden.status_code == outside
            if outside == 404:
                missing = http.get("/v1/sources/no-such-source")
                assert (hidden.status_code, hidden.json()) == (missing.status_code, missing.json())
            added = http.post("/v1/sources", json={**new, "name": f"theirs-{add}"})
            assert added.status_code == add, added.text
            if add != 201:
                assert http.post("/v1/sources/inside/sync").status_code in (403, 404)
    with served.client(scoped) as http:
        assert {s["name"] for s in http.get("/v1/sources").json()} == {"inside"}


def test_the_cli_relays_source_sync_and_list_to_the_running_server(served):
    pages = _folder(served, "relayed", 3)
    assert _add(served, {"name": "relayed", "kind": "folder", "config": {"path": str(pages)},
                         "folder": "Relayed"}).status_code == 201
    synced = rag_cli(served.home, "source", "sync", "relayed")
    assert synced.returncode == 0, synced.stderr
    assert synced.stdout.startswith("added=3 updated=0 unchanged=0"), synced.stdout
    again = rag_cli(served.home, "source", "sync", "relayed", "--json")
    assert again.returncode == 0, again.stderr
    report = json.loads(again.stdout)
    assert (report["outcome"], report["added"], report["unchanged"]) == ("ok", 0, 3)
    listed = rag_cli(served.home, "source", "list", "--json")
    assert listed.returncode == 0, listed.stderr
    relayed = next(s for s in json.loads(listed.stdout) if s["name"] == "relayed")
    assert relayed["items"] == 3 and relayed["last_sync"]["outcome"] == "ok"
    assert served.source("relayed")["last_sync"]["finished_at"] == relayed["last_sync"]["finished_at"]
    gone = served.home.parent / "gone"
    assert _add(served, {"name": "gone", "kind": "folder", "config": {"path": str(gone)}}).status_code == 201
    failed = rag_cli(served.home, "source", "sync", "gone")  # a source that cannot be listed: said, exit 1
    assert failed.returncode == 1 and failed.stdout.startswith("added=0"), (failed.stdout, failed.stderr)
    assert str(gone) in failed.stderr and "Traceback" not in failed.stderr, failed.stderr
    assert served.source("gone")["last_sync"]["outcome"] == "failed"


def test_an_answer_about_a_page_of_a_website_source_cites_its_url(served, site):
    made = _add(served, {"name": "uvdocs", "kind": "website", "folder": "uv",
                         "config": {"start_urls": [site.url("/docs/index.html")], "include_files": False}})
    assert made.status_code == 201, made.text
    with served.client() as http:
        assert http.post("/v1/sources/uvdocs/sync").status_code == 202
    done = served.synced("uvdocs")
    assert done["last_sync"]["outcome"] == "ok" and done["items"] >= 6, done
    page_url = site.url(CERTS_PAGE)
    with served.client() as http:
        asked = http.post("/v1/ask", json={"query": CERTS_QUESTION})
        assert asked.status_code == 200, asked.text
        cited = asked.json()["sources"]
        assert cited and cited[0]["url"] == page_url, cited
        chat = http.post("/v1/chat/completions", json={
            "model": "default", "messages": [{"role": "user", "content": CERTS_QUESTION}]})
        assert chat.status_code == 200, chat.text
        assert chat.json()["sources"][0]["url"] == page_url
        found = http.post("/v1/search", json={"query": CERTS_QUESTION, "limit": 3}).json()["results"]
        assert found[0]["url"] == page_url
        handbook = http.post("/v1/search", json={"query": "badges returned last day", "limit": 3}).json()["results"]
        assert all("url" not in r for r in handbook if r["document_id"].startswith("fs:"))  # folders have no URL

    async def mcp() -> tuple[dict, str]:
        async with http_session(f"{served.url}/mcp", served.admin) as s:
            result = await s.call("ask_knowledge", {"query": CERTS_QUESTION})
            assert not result.is_error
            return result.structured_content, result.content[0].text

    structured, text = anyio.run(mcp)
    assert structured["sources"][0]["url"] == page_url
    assert page_url not in text and "url:" not in text.lower()


def test_the_operators_cli_adds_a_source_on_any_path_an_http_admin_only_inside_the_roots(served, tmp_path):
    """Issue 49, defect 2: relayed through the local secret, `rag source add` is the operator's and
    reads a folder outside RAG_SOURCES__LOCAL_ROOTS; the same folder over HTTP is refused, the same
    sentence as for a path that does not exist."""
    pages = handbook_pages(tmp_path / "operators", 2)  # beside the test, not under the server's root
    refused = _add(served, {"name": "theirs-outside", "kind": "folder", "config": {"path": str(pages)}})
    missing = _add(served, {"name": "theirs-missing", "kind": "folder", "config": {"path": str(tmp_path / "none")}})
    assert refused.status_code == missing.status_code == 403, refused.text
    assert (refused.json()["error"]["message"].replace(str(pages), "P")
            == missing.json()["error"]["message"].replace(str(tmp_path / "none"), "P"))
    added = rag_cli(served.home, "source", "add", "operators", "--kind", "folder", "-o", f"path={pages}")
    assert added.returncode == 0, added.stderr
    synced = rag_cli(served.home, "source", "sync", "operators", "--json")
    assert synced.returncode == 0, synced.stderr
    assert json.loads(synced.stdout)["added"] == 2
    with served.client() as http:  # the admin's new settings make it theirs: held to the roots
        changed = http.patch("/v1/sources/operators", json={"config": {"path": str(pages)}})
    assert changed.status_code == 403, changed.text
