"""The editor's pages without a browser (FastAPI's TestClient): sessions, CSRF on every write, the
agent refusal, the service's own messages, the security headers, and the Markdown sanitiser.
tests/e2e/test_editor_browser.py runs the same pages in Chromium."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Iterator

import pytest
from fastapi.testclient import TestClient

from rag.service import KnowledgeService, Principal
from rag.settings import Settings
from rag.web.markdown import render
from tests.support.editor import flashes, page_csrf, sign_in, signed_in


class World:
    def __init__(self, svc: KnowledgeService) -> None:
        self.svc = svc
        admin = Principal.local_admin("default")
        kb = svc.knowledge_base(admin, "default", create=True)
        self.folder = svc.create_folder(admin, kb.root_id, "policies").node_id
        self.other = svc.create_folder(admin, kb.root_id, "other").node_id
        self.doc = svc.create_document(admin, self.folder, "leave", "# Leave\n\nFour hours.\n").node_id
        self.tokens = {
            "editor": svc.create_token("default", "editor", ["knowledge:write"], None, (), False)[0],
            "viewer": svc.create_token("default", "viewer", [], None, (), False)[0],
            "agent": svc.create_token("default", "editor", ["knowledge:write"], "all", (), True)[0],
            "scoped": svc.create_token("default", "editor", ["knowledge:write"], None, (self.other,), False)[0],
        }


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    home: Path = tmp_path_factory.mktemp("editor-pages") / "home"
    with KnowledgeService(Settings(home=home)) as svc:
        svc.ensure_workspace("default")
        yield World(svc)


def client_for(world: World, who: str | None) -> TestClient:
    return signed_in(world.svc, world.tokens[who] if who is not None else None)


def test_pages_need_a_session_and_the_cookie_is_httponly_strict(world: World) -> None:
    client = client_for(world, None)
    assert client.get("/").headers["location"] == "/signin"
    assert client.get(f"/documents/{world.doc}").headers["location"] == "/signin"
    assert client.post(f"/nodes/{world.doc}/rename", data={"name": "x"}).status_code == 401
    signed = sign_in(client, world.tokens["editor"])
    cookie = signed.headers["set-cookie"]
    assert "rag_session=" in cookie and "HttpOnly" in cookie and "SameSite=strict" in cookie and "Path=/" in cookie
    home = client.get("/")
    assert home.status_code == 200 and world.tokens["editor"] not in home.text
    assert "script-src 'self'" in home.headers["content-security-policy"]
    assert home.headers["x-frame-options"] == "DENY" and home.headers["cache-control"] == "no-store"


def test_sign_in_refuses_agents_bad_tokens_and_a_missing_form_token(world: World) -> None:
    client = client_for(world, None)
    refused = sign_in(client, world.tokens["agent"])
    assert refused.status_code == 401 and "the editor is for people" in refused.text and "rag_session" not in client.cookies
    assert sign_in(client, "rag_nothing").status_code == 401
    forged = client.post("/signin", data={"token": world.tokens["editor"], "csrf": "guess"})
    assert forged.status_code == 403 and "CSRF" in forged.text


WRITES = [
    ("/folders/{folder}/folders", {"name": "made"}),
    ("/folders/{folder}/documents", {"name": "made", "content": "x"}),
    ("/nodes/{doc}/rename", {"kind": "document", "name": "renamed"}),
    ("/nodes/{doc}/move", {"kind": "document", "parent_id": "{other}"}),
    ("/nodes/{doc}/summary", {"kind": "document", "summary": "s"}),
    ("/nodes/{doc}/metadata", {"kind": "document", "metadata": "{}"}),
    ("/nodes/{doc}/delete", {"kind": "document"}),
    ("/documents/{doc}/draft", {"content": "new"}),
    ("/documents/{doc}/versions/1/publish", {}),
    ("/ask", {"query": "leave"}),
    ("/sources/docs/sync", {}),
    ("/sources/docs/pause", {}),
    ("/signout", {}),
]


@pytest.mark.parametrize("path, form", WRITES, ids=[path for path, _ in WRITES])
@pytest.mark.parametrize("csrf", ["missing", "wrong"])
def test_every_write_without_its_csrf_token_is_refused(world: World, path: str, form: dict, csrf: str) -> None:
    client = client_for(world, "editor")
    ids = {"folder": world.folder, "doc": world.doc, "other": world.other}
    data = {key: ids.get(value.strip("{}"), value) for key, value in form.items()}
    if csrf == "wrong":
        data["csrf"] = "x" * 43
    before = world.svc.get_document_versions(Principal.local_admin("default"), world.doc)
    answer = client.post(path.format(**ids), data=data)
    assert answer.status_code == 403 and "CSRF token is missing or wrong" in answer.text
    assert world.svc.get_document_versions(Principal.local_admin("default"), world.doc) == before
    assert world.svc.node_info(Principal.local_admin("default"), world.doc).name == "leave"


def test_script_writes_need_the_csrf_header(world: World) -> None:
    client = client_for(world, "editor")
    csrf = page_csrf(client)
    publish = client.post(f"/documents/{world.doc}/versions/1/publish", headers={"Accept": "application/json"})
    assert publish.status_code == 403 and "CSRF" in publish.json()["error"]["message"]
    asked = client.post("/ask/stream", json={"query": "leave"})
    assert asked.status_code == 403
    fine = client.post("/ask/stream", json={"query": "leave"}, headers={"X-CSRF-Token": csrf})
    assert fine.status_code == 200 and "event: done" in fine.text


def test_refusals_show_the_services_own_message(world: World) -> None:
    viewer = client_for(world, "viewer")
    drafts = viewer.get("/drafts")
    assert drafts.status_code == 403 and "this needs the editor role" in drafts.text
    back = f"/documents/{world.doc}"
    viewer.post(f"/nodes/{world.doc}/summary", data={"kind": "document", "summary": "x", "csrf": page_csrf(viewer)},
                headers={"referer": back})
    assert flashes(viewer, back) == ["this needs the editor role"]
    editor = client_for(world, "editor")
    csrf = page_csrf(editor)
    for text, message in [("{not json", "the metadata is not valid JSON: Expecting property name enclosed in "
                           "double quotes"), ("[1, 2]", "the metadata must be a JSON object ({…}), or empty to remove it"),
                          ('{"owner": "hr"}', "metadata saved")]:
        editor.post(f"/nodes/{world.doc}/metadata", data={"kind": "document", "metadata": text, "csrf": csrf})
        assert flashes(editor, back) == [message]
    assert world.svc.node_info(Principal.local_admin("default"), world.doc).metadata == {"owner": "hr"}
    editor.post(f"/nodes/{world.doc}/rename", data={"kind": "folder", "name": "x", "csrf": csrf})
    assert flashes(editor, back.replace("documents", "folders"))[0] == "`node_id` is a document, not a folder"


def test_a_folder_scoped_person_meets_not_found_outside_and_revocation_ends_the_session(world: World) -> None:
    scoped = client_for(world, "scoped")
    outside = scoped.get(f"/documents/{world.doc}")
    assert outside.status_code == 404 and "not found" in outside.text
    assert "policies" not in scoped.get("/").text
    world.svc.revoke_token(world.svc.authenticate(world.tokens["scoped"]).token_id)
    assert scoped.get("/").headers["location"] == "/signin"


def test_the_api_mcp_docs_and_health_are_where_they_were(world: World) -> None:
    client = client_for(world, None)
    paths = client.get("/openapi.json").json()["paths"]
    assert not [path for path in paths if not path.startswith(("/v1", "/healthz", "/livez", "/readyz"))]
    assert client.get("/docs").status_code == 200 and client.get("/healthz").status_code in (200, 503)
    assert client.get("/livez").status_code == 200 and client.get("/readyz").status_code in (200, 503)
    assert client.get("/v1/roots").status_code == 401
    assert client.get("/static/editor.js").headers["content-type"].startswith(("text/javascript", "application/javascript"))


def test_markdown_is_rendered_without_anything_that_runs() -> None:
    html = render("# T\n\n<script>alert(1)</script>\n\n<img src=x onerror=alert(2)>\n\n[x](javascript:alert(3)) "
                  "[ok](https://example.org)\n")
    assert "<script" not in html and "onerror=" not in html.replace("onerror=alert(2)&gt;", "")
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html and 'href="javascript' not in html
    assert '<a href="https://example.org" rel="noopener noreferrer nofollow">ok</a>' in html


def test_a_span_is_highlighted_inside_the_rendered_document() -> None:
    body = "# Leave\n\n## Annual leave\n\nYou earn four hours.\n\nUnrelated.\n"
    start = body.index("## Annual")
    html = render(body, (start, body.index("Unrelated")))
    assert '<h2><mark id="hl">Annual leave</mark></h2>' in html  # still a heading: the mark starts after `## `
    assert "<p><mark>You earn four hours.</mark>" in html and "<p>Unrelated.</p>" in html
    assert render(body, (5, 2)) == render(body) and render(body, (0, 10_000)).count("<mark") == 4


def test_folders_and_documents_are_made_renamed_moved_and_deleted_from_their_pages(world: World) -> None:
    client = client_for(world, "editor")
    csrf = page_csrf(client)
    made = client.post(f"/folders/{world.folder}/folders", data={"name": "Forms", "csrf": csrf})
    folder = made.headers["location"].rsplit("/", 1)[1]
    assert made.headers["location"] == f"/folders/{folder}" and "Forms" in client.get(made.headers["location"]).text
    again = client.post(f"/folders/{world.folder}/folders", data={"name": "forms", "csrf": csrf})
    assert flashes(client, again.headers["location"]) == ["a node named 'forms' already exists in this folder"]
    doc = client.post(f"/folders/{folder}/documents", data={"name": "Leave form", "content": "# Form\n", "csrf": csrf})
    doc_id = doc.headers["location"].rsplit("/", 1)[1]
    page = client.get(doc.headers["location"]).text
    assert '<span class="status draft" data-status-of="1">draft</span>' in page and "<h1>Form</h1>" in page
    client.post(f"/nodes/{doc_id}/rename", data={"kind": "document", "name": "Leave request", "csrf": csrf})
    assert flashes(client, f"/documents/{doc_id}") == ["renamed to 'Leave request'"]
    client.post(f"/nodes/{doc_id}/move", data={"kind": "document", "parent_id": world.folder, "csrf": csrf})
    assert world.svc.node_info(Principal.local_admin("default"), doc_id).parent_id == world.folder
    draft = client.post(f"/documents/{doc_id}/draft", data={"content": "# Form v2\n", "csrf": csrf})
    assert draft.headers["location"] == f"/documents/{doc_id}?version=2"
    assert "<h1>Form v2</h1>" in client.get(draft.headers["location"]).text
    gone = client.post(f"/nodes/{folder}/delete", data={"kind": "folder", "csrf": csrf})
    assert gone.headers["location"] == "/" and flashes(client, "/") == ["deleted (0 documents, 1 folders)"]
    client.post(f"/nodes/{doc_id}/delete", data={"kind": "document", "csrf": csrf})
    assert client.get(f"/documents/{doc_id}").status_code == 404


def test_text_colours_meet_wcag_aa_contrast() -> None:
    """Every text colour of the style sheet on the background it is used on: at least 4.5:1."""
    css = (Path(__file__).resolve().parents[2] / "rag" / "web" / "static" / "editor.css").read_text()
    colour = dict(re.findall(r"--([a-z]+): (#[0-9a-f]{6})", css))

    def luminance(hex_colour: str) -> float:
        channels = [int(hex_colour[i:i + 2], 16) / 255 for i in (1, 3, 5)]
        r, g, b = [c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4 for c in channels]
        return 0.2126 * r + 0.7152 * g + 0.0722 * b

    def ratio(fg: str, bg: str) -> float:
        high, low = sorted((luminance(fg), luminance(bg)), reverse=True)
        return (high + 0.05) / (low + 0.05)

    pairs = [(colour[fg], colour[bg]) for fg, bg in [("fg", "bg"), ("link", "bg"), ("muted", "bg"), ("ok", "soft"),
                                                     ("err", "soft"), ("link", "soft"), ("fg", "mark")]]
    pairs += [("#ffffff", "#17324d"), ("#ffffff", "#5a2d82"), ("#ffffff", "#0b4f9c"), ("#7a4a00", "#ffffff"),
              ("#0a4a22", "#e6f6ea"), ("#7c1414", "#fde8e8")]  # header, badge, buttons, publishing, diff lines
    assert all(hex_colour in css for pair in pairs[7:] for hex_colour in pair if hex_colour != "#ffffff")
    assert min(ratio(fg, bg) for fg, bg in pairs) >= 4.5
