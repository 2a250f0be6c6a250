"""Text that a parser writes into a body stays text when the body is rendered as Markdown: an HTML
page, a Word document or a PDF that says `<img src=x onerror=…>` or `[x](javascript:…)` as text
gives no live tag and no live link to a renderer that allows raw HTML (as an MCP client or a chat
app may), and what a reader is shown (clean_text) is still the file's own characters."""

from __future__ import annotations

import io
import re
import zlib

import docx
from markdown_it import MarkdownIt

from rag.ingest.read import parse_bytes
from rag.ingest.formats.markdown import escape_text, fenced
from rag.synthesize.markup import clean_text
from tests.support.hostile_files import page_pdf

# A permissive renderer: raw HTML on, as a client rendering an MCP tool's Markdown might be.
RENDER = MarkdownIt("commonmark", {"html": True})
IMG = "<img src=x onerror=alert(5)>"
LINK = "[x](javascript:alert(4))"


def live(body: str) -> list[str]:
    """What a permissive renderer makes live of the body: raw tags other than its own, javascript: links."""
    html = RENDER.render(body)
    return re.findall(r"<img\b[^>]*>|href=\"javascript:[^\"]*\"|<script\b", html, re.I)


def test_html_text_that_looks_like_markup_stays_text() -> None:
    page = (b"<html><head><title>Tags &lt;b&gt; here</title></head><body>"
            b"<h2>Heading [h](javascript:alert(1))</h2>"
            b"<p>&lt;img src=x onerror=alert(5)&gt; and [x](javascript:alert(4))</p>"
            b"<p><b>[y]</b>(javascript:alert(7)) and the entity text &amp;lt;b&amp;gt;</p>"
            b"<ul><li>&lt;script&gt;alert(8)&lt;/script&gt;</li></ul>"
            b"<table><tr><th>a</th><th>b</th></tr><tr><td>[c](javascript:alert(9))</td><td>&lt;img src=y&gt;</td></tr></table>"
            b"<p># not a heading</p></body></html>")
    parsed = parse_bytes(page, "page.html")
    assert live(parsed.body) == []
    assert "<img" not in parsed.body and "<script" not in parsed.body
    assert parsed.title == "Tags <b> here"  # the name is plain text: not escaped
    shown = clean_text(parsed.body)  # a reader sees the page's characters
    for text in (IMG, LINK, "[y](javascript:alert(7))", "&lt;b&gt;", "<script>alert(8)</script>"):
        assert text in shown, text
    assert RENDER.render(parsed.body).count("<h") == 2  # the title and the h2: no heading from "# not a heading"


def test_a_doctype_internal_subset_leaks_nothing_into_the_body() -> None:
    page = b'<!DOCTYPE html [<!ENTITY x "y"> <!ENTITY z "w">]><html><body><p>Plain words.</p></body></html>'
    parsed = parse_bytes(page, "doctype.html")
    assert "]>" not in parsed.body and "ENTITY" not in parsed.body
    assert parsed.body == "# Doctype\n\nPlain words.\n"


def test_code_holding_a_fence_stays_one_code_block() -> None:
    page = b"<html><body><pre>```\n&lt;img src=x onerror=alert(6)&gt;\n```</pre><p>after</p></body></html>"
    body = parse_bytes(page, "code.html").body
    html = RENDER.render(body)
    assert html.count("<pre>") == 1 and "&lt;img src=x onerror=alert(6)&gt;" in html and "<img" not in html
    assert fenced("a ```` b").startswith("`````\n")


def test_word_text_that_looks_like_markup_stays_text() -> None:
    document = docx.Document()
    document.add_paragraph("Report <b>", style="Title")
    document.add_heading(f"Section {LINK}", level=1)
    document.add_paragraph(f"{IMG} and {LINK}")
    document.add_paragraph("[z](javascript:alert(3))", style="List Bullet")
    table = document.add_table(rows=2, cols=2)
    table.cell(0, 0).text, table.cell(0, 1).text = "a", "b"
    table.cell(1, 0).text, table.cell(1, 1).text = IMG, LINK
    buffer = io.BytesIO()
    document.save(buffer)
    parsed = parse_bytes(buffer.getvalue(), "report.docx")
    assert live(parsed.body) == []
    assert parsed.title == "Report <b>"
    assert IMG in clean_text(parsed.body) and LINK in clean_text(parsed.body)


def one_page_pdf(lines: list[str]) -> bytes:
    """A PDF of one page that draws `lines` in Helvetica (the content stream compressed)."""
    def literal(text: str) -> str:
        return text.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)")

    content = "BT /F1 12 Tf 72 720 Td 14 TL " + " ".join(f"({literal(line)}) Tj T*" for line in lines) + " ET"
    return page_pdf(zlib.compress(content.encode("latin-1")))


def test_pdf_text_that_looks_like_markup_stays_text() -> None:
    parsed = parse_bytes(one_page_pdf([f"{IMG} and {LINK}.", "# not a heading."]), "scan.pdf")
    assert live(parsed.body) == []
    assert f"{IMG} and {LINK}." in clean_text(parsed.body)
    assert RENDER.render(parsed.body).count("<h1>") == 1  # the title only


def test_escaping_is_linear_and_leaves_plain_text_alone() -> None:
    assert escape_text("Terms & conditions [1] p < 0.05 a_b *c*") == "Terms & conditions [1] p &lt; 0.05 a_b *c*"
    hostile = "[" * 20_000 + "](" + "&#1;" * 5_000
    assert live(escape_text(hostile)) == [] and len(escape_text(hostile)) < 3 * len(hostile)
