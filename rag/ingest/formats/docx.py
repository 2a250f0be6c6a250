"""Word (.docx): paragraphs, headings, lists and tables as Markdown, in document order.

python-docx (MIT) reads the document's XML; the package is a zip, so it is checked first without
trusting its headers (rag/ingest/formats/package.py, shared with the other Office formats): every
member is decompressed in bounded steps, and a file that would expand past MAX_EXPANDED bytes (a
decompression bomb), holds too many members, is encrypted, or whose document holds more than
MAX_PARAGRAPHS paragraphs (python-docx spends ~150 µs of CPU and a few hundred
bytes on each: 20,000 take 3 s, the 5.4 million of a 545 KB file would take hours) is refused
before python-docx opens it. The paragraphs are counted by their `<w:p>` tags as the bytes are
inflated; a document that names the namespace otherwise escapes the count, not the parse worker's
bounds of time and memory (rag/ingest/sandbox.py).

Text becomes Markdown escaped (rag/ingest/formats/markdown.py): a paragraph saying `<img …>` or
`[x](javascript:…)` stays text in the body.
"""

from __future__ import annotations

import io
import re

import docx
from docx.table import Table
from docx.text.paragraph import Paragraph

from rag.ingest.formats import UnreadableFile
from rag.ingest.formats.markdown import escape_block, escape_text
from rag.ingest.formats.package import Package, Tally, check_package
from rag.ingest.formats.tables import cell, markdown_table
from rag.ingest.parse import ParsedDocument, with_title

MAX_EXPANDED = 200_000_000
MAX_MEMBERS = 10_000
MAX_PARAGRAPHS = 100_000
_PARAGRAPH_TAGS = (b"<w:p>", b"<w:p ")
_DOCUMENT = "word/document.xml"
_HEADING_STYLE = re.compile(r"^heading\s*([1-9])$", re.I)


def _check_package(data: bytes) -> None:
    """The package inflated within its bounds (rag/ingest/formats/package.py), the main document's
    paragraphs counted on the way (the bounds read at each call: a test may lower them)."""
    paragraphs = Tally(_PARAGRAPH_TAGS, MAX_PARAGRAPHS, "paragraphs")
    check_package(data, Package("Word document", ".docx", _DOCUMENT, MAX_MEMBERS, MAX_EXPANDED),
                  lambda name: paragraphs if name == _DOCUMENT else None)


def _text(paragraph: Paragraph) -> str:
    return " ".join(paragraph.text.split())


def _list_level(paragraph: Paragraph) -> int | None:
    """The list level of a list paragraph (numbering or a List style), else None."""
    p_pr = paragraph._p.pPr
    if p_pr is not None and p_pr.numPr is not None:
        ilvl = p_pr.numPr.ilvl
        return int(ilvl.val) if ilvl is not None and ilvl.val is not None else 0
    style = (paragraph.style.name if paragraph.style is not None else "") or ""
    return 0 if style.lower().startswith("list") else None


def _paragraph(paragraph: Paragraph) -> tuple[str, str]:
    """(kind, Markdown) of one paragraph: kind is heading, title, item or text."""
    text = _text(paragraph)
    if not text:
        return "text", ""
    style = (paragraph.style.name if paragraph.style is not None else "") or ""
    heading = _HEADING_STYLE.match(style)
    if heading:
        return "heading", f"{'#' * min(6, int(heading.group(1)) + 1)} {escape_text(text)}"
    if style.lower() == "title":
        return "title", text
    level = _list_level(paragraph)
    if level is not None:
        return "item", f"{'  ' * min(level, 5)}- {escape_text(text)}"
    return "text", text


def _table(table: Table) -> str:
    rows: list[list[str]] = []
    for row in table.rows:
        cells: list[str] = []
        previous = None
        for tc in row.cells:
            if tc._tc is previous:  # a merged cell repeats itself across the columns it spans
                continue
            previous = tc._tc
            cells.append(cell(tc.text))
        rows.append(cells)
    if rows and max(len(r) for r in rows) == 1:  # a one-column table is a box around text (a note)
        return "\n\n".join(r[0] for r in rows if r[0])
    return markdown_table(rows)


def _title_like(text: str) -> bool:
    """A short first line that is no sentence: the document's title, when no style says so."""
    return len(text) <= 120 and not text.endswith((".", ":", ";", ","))


def parse_docx(data: bytes, fallback_title: str) -> ParsedDocument:
    _check_package(data)
    try:
        document = docx.Document(io.BytesIO(data))
    except Exception:  # python-docx raises a variety (KeyError, XMLSyntaxError, ValueError) for a broken part
        raise UnreadableFile("a damaged Word document that cannot be read") from None
    blocks: list[str] = []
    title = " ".join((document.core_properties.title or "").split())
    for block in document.iter_inner_content():
        if isinstance(block, Table):
            text = _table(block)
            if text:
                blocks.append(text)
            continue
        kind, text = _paragraph(block)
        if not text:
            continue
        if kind == "title" or (not blocks and not title and kind == "text" and _title_like(text)):
            title = title or text
            text = f"# {escape_text(text)}"
        elif kind == "text":
            text = escape_block(text)
        if kind == "item" and blocks and re.match(r"\s*- ", blocks[-1].rsplit("\n", 1)[-1]):
            blocks[-1] += "\n" + text  # one list, not a paragraph per item
        else:
            blocks.append(text)
    content = "\n\n".join(blocks)
    if not content.strip():
        raise UnreadableFile("a Word document with no text")
    title = title or fallback_title
    return ParsedDocument(title=title, body=with_title(escape_text(title), content))
