"""Documents from files: a multipart upload (Markdown, PDF, Word, HTML) becomes a draft whose body is
the file's text and whose original file comes back byte for byte, under the same access rules as
the document; a file too large or unreadable is refused with nothing written; directory ingest
keeps the originals of the files it parses; `rag export`/`rag import` carry them, and archives
made before originals were kept still import."""

from __future__ import annotations

import base64
import hashlib
import json
import socket
from pathlib import Path
from urllib.parse import unquote

import pytest

from rag.errors import InvalidArgument, NotFound
from rag.service import KnowledgeService, Principal
from rag.service.indexing.originals import content_disposition
from rag.settings import Settings

from ..support.api_support import live_api, stored, upload
from ..support.paths import SHARED

OFFICE = SHARED / "datasets" / "office_docs" / "files"
PDF = OFFICE / "pdf" / "latex-two-column.pdf"
DOCX = OFFICE / "docx" / "usds-agile-igce-example.docx"
HTML = OFFICE / "html" / "18f-hiring-authorities.html"
BIG_PDF = OFFICE / "pdf" / "nist-sp-800-63b.pdf"  # 1.4 MB: over the test server's limit
LIMIT = 200_000  # bytes: the test server's upload limit
ADMIN = Principal.local_admin("default")
NOTE = "# Bike shed\n\nThe bike shed opens at seven, and the zebra key hangs by the door.\n"


@pytest.fixture(scope="module")
def api(tmp_path_factory):
    root = tmp_path_factory.mktemp("api-uploads")
    # One editor token uploads more files here than a quota lets through at once: uploads are not
    # rate-limited in this module (tests/e2e/test_quotas.py is about quotas).
    yield from live_api(root, Settings(home=root / "home", upload_max_bytes=LIMIT, quota={"upload_per_minute": 0}))


def test_a_markdown_upload_is_a_draft_whose_original_comes_back(api):
    with api.client("editor") as editor:
        made = upload(editor, "bike-shed.md", NOTE.encode())
        assert made.status_code == 201, made.text
        doc = made.json()
        assert (doc["name"], doc["version_number"], doc["status"]) == ("Bike shed", 1, "draft")
        assert editor.get(f"/v1/documents/{doc['node_id']}").status_code == 404  # a draft, as create_document's
        assert editor.get(f"/v1/documents/{doc['node_id']}/versions/1").json()["content"].startswith("# Bike shed")
        original = editor.get(f"/v1/documents/{doc['node_id']}/versions/1/original")
        assert original.status_code == 200
        assert original.content == NOTE.encode()
        assert original.headers["content-type"].startswith("text/markdown")
        assert original.headers["content-disposition"] == "attachment; filename=\"bike-shed.md\"; filename*=UTF-8''bike-shed.md"
        assert original.headers["x-content-type-options"] == "nosniff"


def test_a_published_upload_is_found_by_search(api):
    with api.client("editor") as editor:
        made = upload(editor, "ostrich.txt", b"Ostrich feathers are stored in the third cupboard.\n",
                      name="Ostrich storage", publish=True)
        assert made.status_code == 201 and made.json()["status"] == "publishing"
        assert api.svc.wait_for_publishing(120)
        hits = editor.post("/v1/search", json={"query": "where are ostrich feathers stored", "limit": 1}).json()
        assert hits["results"][0]["title"] == "Ostrich storage"


@pytest.mark.parametrize("path, media_type, words", [
    (PDF, "application/pdf", "Lorem"),
    (DOCX, "application/vnd.openxmlformats-officedocument.wordprocessingml.document", "CLIN"),
    (HTML, "text/html", "hiring"),
])
def test_office_files_become_documents_with_their_originals(api, path, media_type, words):
    data = path.read_bytes()
    with api.client("editor") as editor:
        made = upload(editor, path.name, data)
        assert made.status_code == 201, made.text
        node_id = made.json()["node_id"]
        body = editor.get(f"/v1/documents/{node_id}/versions/1").json()["content"]
        assert words.casefold() in body.casefold()
        original = editor.get(f"/v1/documents/{node_id}/versions/1/original")
        assert original.content == data
        assert original.headers["content-type"].split(";")[0] == media_type
        assert original.headers["etag"] == f'"{hashlib.sha256(data).hexdigest()}"'


@pytest.mark.parametrize("filename, data, message", [
    ("broken.pdf", b"%PDF-1.7\nthis is not the rest of a PDF", "broken.pdf: "),
    ("bad-encrypted.pdf", (OFFICE / "pdf" / "bad-encrypted.pdf").read_bytes(), "bad-encrypted.pdf: "),
    ("program.exe", b"MZ\x90\x00", "program.exe: an unsupported file type (.exe)"),
    ("latin1.md", "# Caf\u00e9\n".encode("latin-1"), "latin1.md: not UTF-8 text"),
    # A connector's internal suffixes: their parsers' bodies are a page's raw HTML or its links, no document.
    ("page.confluencepage", b'{"title": "t", "links": {}}\n<div id="main-content"><script>alert(1)</script></div>',
     "page.confluencepage: an unsupported file type (.confluencepage)"),
    ("links.weblinks", b'<a href="<img src=x onerror=alert(1)>">x</a>', "links.weblinks: an unsupported file type"),
    ("map.sitemap", b"<urlset><url><loc>https://example.org/</loc></url></urlset>", "map.sitemap: an unsupported"),
])
def test_an_unreadable_file_is_refused_with_nothing_written(api, filename, data, message):
    before = stored(api.svc)
    with api.client("editor") as editor:
        refused = upload(editor, filename, data)
    assert refused.status_code == 400
    error = refused.json()["error"]
    assert error["message"].startswith(message) and error["code"] == "invalid_argument"
    assert "Traceback" not in error["message"]
    assert stored(api.svc) == before


def test_a_file_over_the_limit_is_refused_with_413(api):
    before = stored(api.svc)
    message = f"the file must be at most {LIMIT} bytes (0.2 MiB)"
    with api.client("editor") as editor:
        just_over = upload(editor, "long.md", b"# Long\n\n" + b"a" * LIMIT)  # past the file's limit, inside the form's
        whole = upload(editor, BIG_PDF.name, BIG_PDF.read_bytes())  # refused before the body is read
    for refused in (just_over, whole):
        assert refused.status_code == 413
        assert refused.json()["error"] | {"param": None} == {"message": message, "type": "invalid_request_error",
                                                             "code": "file_too_large", "param": None}
    assert stored(api.svc) == before


def test_an_unknown_caller_is_refused_before_the_file_is_sent(api):
    """The 401 comes back while the client has sent only the headers and the first kilobyte of a
    declared upload just under the limit: the server did not wait for (or read) the rest."""
    host, port = api.url.removeprefix("http://").split(":")
    boundary = "rag-test-boundary"
    head = (f"--{boundary}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"big.md\"\r\n"
            "Content-Type: text/markdown\r\n\r\n").encode()
    declared = LIMIT  # inside the whole request's limit: BodyLimit lets it through to the app
    with socket.create_connection((host, int(port)), timeout=30) as conn:
        conn.sendall((f"POST /v1/uploads HTTP/1.1\r\nHost: {host}\r\nAuthorization: Bearer not-a-token\r\n"
                      f"Content-Type: multipart/form-data; boundary={boundary}\r\n"
                      f"Content-Length: {declared}\r\n\r\n").encode() + head + b"a" * 1024)
        answer = conn.recv(65536).decode("latin-1")  # the rest of the body is never sent
    assert answer.startswith("HTTP/1.1 401"), answer[:200]
    assert "invalid or expired token" in answer


def test_a_form_without_its_file_or_with_a_bad_field_is_refused_with_422(api):
    before = stored(api.svc)
    with api.client("editor") as editor:
        no_file = editor.post("/v1/uploads", data={"name": "No file"})
        bad_flag = upload(editor, "x.md", NOTE.encode(), publish="perhaps")
        unknown = upload(editor, "x.md", NOTE.encode(), colour="blue")
    assert no_file.status_code == bad_flag.status_code == unknown.status_code == 422
    assert no_file.json()["error"]["param"] == "file"
    assert bad_flag.json()["error"]["param"] == "publish"
    assert unknown.json()["error"]["param"] == "colour"
    assert stored(api.svc) == before


def test_originals_follow_the_document_access_rules(api):
    with api.client("admin") as admin:
        made = upload(admin, "menu-notes.md", NOTE.encode(), parent_id=api.svc.knowledge_base(ADMIN, "cafeteria").root_id)
        assert made.status_code == 201
        outside = made.json()["node_id"]
        text_only = admin.post("/v1/documents", json={"name": "Typed note", "content": "# Typed\n\nNo file.\n"}).json()
    path = f"/v1/documents/{outside}/versions/1/original"
    with api.client("viewer") as viewer:
        assert viewer.get(path).content == NOTE.encode()  # reading needs no write scope
        refused = upload(viewer, "x.md", NOTE.encode())
        assert refused.status_code == 403 and refused.json()["error"]["message"] == "this needs the editor role"
    with api.client("folder") as scoped:  # sees travel-and-leave only: the cafeteria's file is "not found"
        hidden = scoped.get(path)
        missing = scoped.get("/v1/documents/n_0000000000000000/versions/1/original")
        assert hidden.status_code == missing.status_code == 404
        assert hidden.json() == missing.json()
        into_hidden = upload(scoped, "x.md", NOTE.encode(), parent_id=api.svc.knowledge_base(ADMIN, "cafeteria").root_id)
        assert into_hidden.status_code == 404
        no_parent = upload(scoped, "x.md", NOTE.encode())
        assert no_parent.status_code == 400 and "parent_id" in no_parent.json()["error"]["message"]
    with api.client("agent_none") as nobody:
        assert nobody.get(path).status_code == 403
    with api.client("admin") as admin:
        none = admin.get(f"/v1/documents/{text_only['node_id']}/versions/1/original")
        assert none.status_code == 404
        assert none.json()["error"]["message"] == "version 1 has no original file (it was written as text)"


def test_a_file_name_cannot_reach_a_header_or_a_path(api):
    with api.client("editor") as editor:
        made = upload(editor, "../../etc/r\u00e9sum\u00e9; final.md", NOTE.encode(), name="Resume final")
        assert made.status_code == 201, made.text
        original = editor.get(f"/v1/documents/{made.json()['node_id']}/versions/1/original")
    disposition = original.headers["content-disposition"]
    assert disposition.startswith('attachment; filename="r_sum__ final.md"; ')
    assert unquote(disposition.split("filename*=UTF-8''")[1]) == "r\u00e9sum\u00e9; final.md"
    assert content_disposition('a"b\\c.md') == "attachment; filename=\"a_b_c.md\"; filename*=UTF-8''a%22b%5Cc.md"
    with api.client("editor") as editor:
        for bad in ("../", "a\x1bb.md"):
            refused = upload(editor, bad, NOTE.encode())
            assert refused.status_code in (400, 422), bad


# ----- the store: both deployments -----

@pytest.fixture(params=["sqlite", "postgresql"])
def store(request, tmp_path) -> Settings:
    if request.param == "postgresql":
        return Settings(home=tmp_path / "home", database_url=request.getfixturevalue("postgres").new_database())
    return Settings(home=tmp_path / "home")


def test_directory_ingest_keeps_the_originals_of_parsed_files(store, tmp_path):
    folder = tmp_path / "files"
    (folder / "forms").mkdir(parents=True)
    (folder / "forms" / DOCX.name).write_bytes(DOCX.read_bytes())
    (folder / "note.md").write_text(NOTE)
    with KnowledgeService(store) as svc:
        svc.ensure_workspace("default")
        report = svc.ingest_directory(ADMIN, folder)
        assert not report.failed and len(report.added) == 2
        docx = next(n for n in svc.search_nodes_by_name(ADMIN, "igce") if n.kind == "document")
        original = svc.get_document_original(ADMIN, docx.node_id, 1)
        assert (original.data, original.filename) == (DOCX.read_bytes(), DOCX.name)
        note = next(n for n in svc.search_nodes_by_name(ADMIN, "bike shed"))
        with pytest.raises(NotFound, match="no original file"):  # Markdown is its own original
            svc.get_document_original(ADMIN, note.node_id, 1)
        again = svc.ingest_directory(ADMIN, folder)
        assert sorted(again.unchanged) == sorted(report.added) and not again.updated
        assert stored(svc)[1] == 1  # ingested again unchanged: no second copy
        svc.delete_document(ADMIN, docx.node_id)
        assert stored(svc)[1] == 0  # the original goes with its document


def test_export_and_import_carry_the_originals(store, tmp_path):
    source = Settings(home=tmp_path / "source")
    data = {name: path.read_bytes() for name, path in (("pdf", PDF), ("docx", DOCX))}
    with KnowledgeService(source) as svc:
        svc.ensure_workspace("default")
        made = {kind: svc.upload_document(ADMIN, path.name, data[kind], publish=True) for kind, path in
                (("pdf", PDF), ("docx", DOCX))}
        draft = svc.upload_document(ADMIN, "bike-shed.md", NOTE.encode())
        elsewhere = svc.knowledge_base(ADMIN, "elsewhere", create=True)
        svc.upload_document(ADMIN, "other.md", b"# Other\n\nNot exported.\n", parent_id=elsewhere.root_id)
        assert svc.wait_for_publishing(120)
        archive = tmp_path / "store.jsonl"
        report = svc.export_archive(ADMIN, archive, kb_names=["default"])
    assert report.counts["document_originals"] == 3  # the default knowledge base's, not elsewhere's
    with KnowledgeService(store) as target:
        imported = target.import_archive(ADMIN, archive)
        assert imported.counts["document_originals"] == 3
        for kind, doc in made.items():
            assert target.get_document_original(ADMIN, doc.node_id, 1).data == data[kind]
        assert target.get_document_original(ADMIN, draft.node_id, 1).data == NOTE.encode()
        hits = target.search(ADMIN, "Lorem ipsum dolor", 3).hits
        assert made["pdf"].node_id in {h.node_id for h in hits}


def _rewrite(archive: Path, target: Path, change) -> None:
    lines = archive.read_text(encoding="utf-8").splitlines()
    header, records = json.loads(lines[0]), [json.loads(line) for line in lines[1:]]
    header, records = change(header, records)
    target.write_text("\n".join(json.dumps(x) for x in [header, *records]) + "\n", encoding="utf-8")


def test_an_archive_from_before_originals_still_imports_and_a_damaged_original_is_refused(tmp_path):
    with KnowledgeService(Settings(home=tmp_path / "source")) as svc:
        svc.ensure_workspace("default")
        doc = svc.upload_document(ADMIN, "bike-shed.md", NOTE.encode(), publish=True)
        assert svc.wait_for_publishing(120)
        archive = tmp_path / "store.jsonl"
        svc.export_archive(ADMIN, archive)

    def before_originals(header, records):  # what a rag at revision 0006 wrote
        counts = {k: v for k, v in header["counts"].items() if k != "document_originals"}
        return header | {"revision": "0006", "counts": counts}, [r for r in records if r["table"] != "document_originals"]

    def flipped(header, records):  # one byte of the file changed, its size and SHA-256 kept
        for r in records:
            if r["table"] == "document_originals":
                r["row"]["data"] = base64.b64encode(NOTE.replace("zebra", "zebu!").encode()).decode()
        return header, records

    old, bad = tmp_path / "old.jsonl", tmp_path / "bad.jsonl"
    _rewrite(archive, old, before_originals)
    _rewrite(archive, bad, flipped)
    with KnowledgeService(Settings(home=tmp_path / "damaged")) as target:
        before = stored(target)
        with pytest.raises(InvalidArgument, match="does not match its size and SHA-256: the archive is damaged"):
            target.import_archive(ADMIN, bad)
        assert stored(target) == before
    with KnowledgeService(Settings(home=tmp_path / "old")) as target:
        target.import_archive(ADMIN, old)
        assert target.get_document(ADMIN, doc.node_id).content.startswith("# Bike shed")
        with pytest.raises(NotFound, match="no original file"):
            target.get_document_original(ADMIN, doc.node_id, 1)
