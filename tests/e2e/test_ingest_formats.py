"""PDF, HTML and Word files: what each parser reads out of real files (office_docs), every kind of bad
file refused with its reason, and page numbers carried from a PDF to the citations of search and
ask, through the service and over the HTTP API."""

from __future__ import annotations

import io
import shutil
import zipfile
from pathlib import Path

import httpx
import pytest
from sqlalchemy import select

from rag.ingest.chunk import Chunker
from rag.ingest.formats import UnreadableFile, parse_here
from rag.ingest.read import parse_bytes
from rag.ingest.formats import docx as docx_format
from rag.ingest.formats.ocr import OcrLimits
from rag.ingest.sandbox import Limits, ParsePool
from rag.store.models import Chunk, DocumentVersion, Node

from ..support.ingested import ingested_folder
from ..support.api_support import Api, LiveServer
from ..support.paths import SHARED

OFFICE = SHARED / "datasets" / "office_docs" / "files"
TWO_COLUMN = "pdf/latex-two-column.pdf"
FINLAND = "According to the EU Countries Information table, what is the area of Finland?"


def read(rel: str) -> bytes:
    return (OFFICE / rel).read_bytes()


def parse(rel: str):
    return parse_bytes(read(rel), Path(rel).name)


def refusal(data: bytes, name: str, parse=parse_bytes) -> str:
    with pytest.raises(UnreadableFile) as caught:
        parse(data, name)
    return str(caught.value)


# ----- the parsers, one format at a time -----

def test_pdf_pages_columns_table_and_title() -> None:
    parsed = parse(TWO_COLUMN)
    assert parsed.title == "Two-Column Document with Lorem Ipsum"  # the largest type on page 1
    assert [page for _, _, page in parsed.pages] == [1, 2, 3]
    assert parsed.pages[0][0] == 0 and parsed.pages[-1][1] == len(parsed.body)
    assert all(a[1] == b[0] for a, b in zip(parsed.pages, parsed.pages[1:]))  # spans tile the body
    page = {p: parsed.body[s:e] for s, e, p in parsed.pages}
    # The abstract opens the first column; the table's row stays one line, on page 3.
    assert "This is a sample document with two columns filled\nwith Lorem Ipsum text." in page[1]
    assert "Finland 5.5 338,424 Helsinki Finnish, Swedish" in page[3].splitlines()
    assert "### Abstract" in page[1]  # a heading from its type size


def test_pdf_title_set_large_at_the_top_wherever_the_content_stream_puts_it() -> None:
    # The report's title and month are drawn after its table, scaled by the text matrix (every font
    # at size 1), on two lines; small table headings share the month's baseline.
    parsed = parse("pdf/nics-firearm-checks-2015-11.pdf")
    assert parsed.title == "NICS Firearm Background Checks November - 2015"
    assert "Pre-Pawn Redemption" in parsed.body  # the headings beside it are kept, as text
    # A section banner that the running header of the other pages repeats is not the title.
    assert parse("pdf/federal-register-2020-17221.pdf").title == "Federal register 2020 17221"


def test_pdf_outline_becomes_headings_on_their_pages() -> None:
    parsed = parse("pdf/nist-sp-800-63b.pdf")
    assert len(parsed.pages) == 78
    start, end, _ = parsed.pages[21]  # page 22
    text = parsed.body[start:end]
    assert "##### 5.1.1.2 Memorized Secret Verifiers" in text.splitlines()
    assert "at least 8 characters in length if chosen by the subscriber." in " ".join(text.split())
    specs = Chunker().chunk(parsed.body, parsed.pages)
    hit = next(s for s in specs if "at least 8 characters in length if chosen by the subscriber" in s.text)
    assert (hit.page_start, hit.page_end) == (22, 22)
    assert hit.heading_path[-1] == "5.1.1.1 Memorized Secret Authenticators"


def test_html_main_content_headings_links_and_declared_charset() -> None:
    parsed = parse("html/18f-hiring-authorities.html")
    assert parsed.title == "Hiring Authorities" and parsed.pages == []
    assert "## Competitive Service" in parsed.body.splitlines()
    assert "IT Specialist: term limited to a maximum of 8 years." in " ".join(parsed.body.split())
    assert "<style" not in parsed.body and "{" not in parsed.body  # the style block is dropped
    page = (
        '<html><head><meta http-equiv="Content-Type" content="text/html; charset=iso-8859-1">'
        "<title>Caf\xe9 rules</title><script>var x = 'dropped';</script></head><body>"
        "<nav><a href='/'>Home</a> | <a href='/menu'>Menu</a></nav>"
        "<H2>Opening hours</H2><P>The caf\xe9 opens at <A HREF='/hours'>eight o'clock</A>.</P>"
        "<ul><li>Tea</li><li>Coffee</li></ul><footer>Copyright</footer></body></html>"
    ).encode("latin-1")
    parsed = parse_bytes(page, "cafe.html")
    assert parsed.title == "Café rules"
    assert parsed.body == (
        "# Café rules\n\n## Opening hours\n\nThe café opens at eight o'clock.\n\n- Tea\n\n- Coffee\n"
    )


def test_docx_headings_lists_and_tables() -> None:
    igce = parse("docx/usds-agile-igce-example.docx")
    assert igce.title == "Agile Task Order FFP Independent Government Cost Estimate (IGCE) Example"
    rows = [line for line in igce.body.splitlines() if line.startswith("| ")]
    assert any(row.startswith("| Scrum Master | $147.00 |") for row in rows)
    assert any("Price Per Iteration" in row and "$73,669" in row for row in rows)
    guide = parse("docx/usds-8a-guide.docx")
    lines = guide.body.splitlines()
    assert "### Background" in lines  # Heading 2, under the title
    assert "- Give a clear, easy, and fast path to agencies to start digital services projects" in lines


# ----- bad files: each refused with a reason a user understands -----

def test_bad_files_are_refused_with_their_reason() -> None:
    assert "encrypted (password-protected)" in refusal(read("pdf/bad-encrypted.pdf"), "a.pdf")
    with ParsePool(1, Limits(ocr=OcrLimits(command=""))) as no_ocr:  # tesseract absent (tests/e2e/test_ingest_ocr.py)
        assert refusal(read("pdf/bad-no-text-layer.pdf"), "a.pdf", no_ocr.parse) == (
            "a PDF with no extractable text (scanned or image-only); OCR is not installed: install tesseract-ocr "
            "(scripts/install.sh --ocr)")
    whole = read("pdf/google-doc-example.pdf")
    assert refusal(whole[: len(whole) // 3], "cut.pdf") == "a damaged or truncated PDF that cannot be opened"
    assert refusal(b"# Not a PDF\n\nJust Markdown.\n", "notes.pdf") == (
        "not a PDF (its content does not match the .pdf extension)")
    assert refusal(whole, "report.docx") == "not a Word document (its content does not match the .docx extension)"
    assert refusal(whole, "page.html") == "not an HTML page (its content does not match the .html extension)"
    docx = read("docx/usds-agile-igce-example.docx")
    assert refusal(docx[: len(docx) // 2], "cut.docx") == "a damaged or truncated Word document"


def test_a_decompression_bomb_is_refused_before_it_is_expanded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(docx_format, "MAX_EXPANDED", 5_000_000)
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as package:
        package.writestr("[Content_Types].xml", "<Types/>")
        package.writestr("word/document.xml", "<w:document/>")
        package.writestr("word/media/padding.bin", b"\0" * 20_000_000)  # 20 MB that packs into ~20 kB
    data = buffer.getvalue()
    assert len(data) < 100_000
    # In this process: the lowered cap is this process's (a parse worker has its own modules).
    assert refusal(data, "bomb.docx", parse_here) == (
        "a Word document that expands to more than 5 MB (a decompression bomb?); refused")


# ----- through the service and the API: pages in citations -----

@pytest.fixture(scope="module")
def office(tmp_path_factory: pytest.TempPathFactory):
    """A folder of a few real files (and bad ones), ingested once into a SQLite home."""
    root = tmp_path_factory.mktemp("office")
    files = root / "files"
    for rel in (TWO_COLUMN, "pdf/bad-encrypted.pdf", "pdf/bad-no-text-layer.pdf", "html/18f-hiring-authorities.html",
                "docx/usds-agile-igce-example.docx"):
        (files / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(OFFICE / rel, files / rel)
    (files / "pdf" / "lies.pdf").write_text("# A text file\n\nwearing a .pdf name.\n")
    whole = read("pdf/google-doc-example.pdf")
    (files / "pdf" / "truncated.pdf").write_bytes(whole[: len(whole) // 3])
    with ingested_folder(root / "home", files) as (svc, admin, report):
        yield svc, admin, files, report


def test_ingest_reads_each_format_and_refuses_bad_files_by_name(office) -> None:
    svc, admin, files, report = office
    assert sorted(report.added) == [
        "docx/usds-agile-igce-example.docx", "html/18f-hiring-authorities.html", TWO_COLUMN]
    failed = dict(report.failed)
    assert sorted(failed) == ["pdf/bad-encrypted.pdf", "pdf/bad-no-text-layer.pdf", "pdf/lies.pdf",
                              "pdf/truncated.pdf"]
    assert "encrypted" in failed["pdf/bad-encrypted.pdf"]
    assert failed["pdf/bad-no-text-layer.pdf"] == "a PDF with no text: it has no text layer, and OCR found none on its 6 pages"
    with svc.db.session() as session:  # nothing half-written for a refused file
        names = set(session.scalars(select(Node.source_label).where(Node.kind == "document")))
        assert names == {f"fs:{rel}" for rel in report.added}
        pages = session.scalar(select(DocumentVersion.pages).join(Node).where(Node.source_label == f"fs:{TWO_COLUMN}"))
        assert [p for _, _, p in pages] == [1, 2, 3]
        chunk_pages = session.execute(select(Chunk.page_start, Chunk.page_end, Node.source_label).join(Node)).all()
    assert {(a, b) for a, b, label in chunk_pages if label.endswith(".pdf")} == {(1, 1), (2, 2), (3, 3)}
    assert {(a, b) for a, b, label in chunk_pages if not label.endswith(".pdf")} == {(None, None)}
    again = svc.ingest_directory(admin, files)  # incremental: the hash of each file's bytes
    assert sorted(again.unchanged) == sorted(report.added) and not again.added and not again.updated
    assert len(again.failed) == 4


def test_search_and_ask_cite_the_pdf_page(office) -> None:
    svc, admin, _, _ = office
    hits = svc.search(admin, FINLAND, 5).hits
    top = hits[0]
    assert top.source == f"fs:{TWO_COLUMN}" and top.page == 3 and "338,424" in top.text
    assert all(h.page is None for h in hits if not h.source.endswith(".pdf"))
    answer = svc.ask(admin, FINLAND)
    first = answer.sources[0]
    assert first.source == f"fs:{TWO_COLUMN}" and [h.page for h in first.hits][0] == 3
    assert "338,424" in answer.text
    documents = [d.payload() for d in svc.search_documents(admin, FINLAND, 5)]  # the MCP tool's results
    assert documents[0]["page"] == 3 and "338,424" in documents[0]["excerpt"]
    assert all("page" not in d for d in documents if d["name"] != "Two-Column Document with Lorem Ipsum")


def test_the_api_carries_the_page_in_json_and_on_a_line_of_its_own(office) -> None:
    svc, _, _, _ = office
    with LiveServer(svc) as server:
        api = Api(server.url, svc)
        with httpx.Client(base_url=api.url, headers={"Authorization": f"Bearer {api.token('viewer')}"},
                          timeout=120) as client:
            found = client.post("/v1/search", json={"query": FINLAND, "limit": 5}).json()
            asked = client.post("/v1/ask", json={"query": FINLAND}).json()
            hiring = client.post("/v1/search", json={"query": "IT Specialist term limit Direct Hiring Authority"}).json()
    top = found["results"][0]
    assert top["page"] == 3 and top["title"] == "Two-Column Document with Lorem Ipsum"
    block = found["text"].split("\n\n### ")[0].splitlines()
    assert block[:3] == [f"### {top['title']} (score: {top['score']:.4f}, via {'+'.join(top['retrievers'])})",
                         f"document_id: {top['document_id']}", "page: 3"]
    html = next(r for r in hiring["results"] if r["title"] == "Hiring Authorities")
    assert "page" not in html  # a source that is not a PDF has no page
    source = asked["sources"][0]
    assert source["page"] == 3 and source["excerpts"][0]["page"] == 3
    lines = asked["text"].split("Sources:\n", 1)[1].splitlines()
    assert lines[0] == f"[1] {source['title']} ({source['document_id']}, score {source['score']:.4f})"
    assert lines[1] == "    page: 3"


def test_pages_are_stored_and_cited_on_both_deployments(svc, admin, tmp_path: Path) -> None:
    """SQLite and PostgreSQL (with the Chroma server) alike: the page columns, migrated, and read back."""
    folder = tmp_path / "pdfs"
    folder.mkdir()
    shutil.copy(OFFICE / TWO_COLUMN, folder / "two-column.pdf")
    report = svc.ingest_directory(admin, folder)
    assert report.added == ["two-column.pdf"] and not report.failed
    top = svc.search(admin, FINLAND, 3).hits[0]
    assert (top.page, top.title) == (3, "Two-Column Document with Lorem Ipsum")
    doc = svc.get_document(admin, top.node_id)
    assert doc.content[top.char_start:top.char_end] == top.text
