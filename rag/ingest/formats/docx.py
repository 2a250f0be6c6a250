"""Word (.docx): paragraphs, headings, lists and tables as Markdown, in document order.

python-docx (MIT) reads the document's XML; the package is a zip, so it is checked first without
trusting its headers: every member is decompressed in bounded steps, and a file that would
expand past MAX_EXPANDED bytes (a decompression bomb), holds too many members, or whose document
holds more than MAX_PARAGRAPHS paragraphs (python-docx spends ~150 µs of CPU and a few hundred
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
import zipfile

import docx
from docx.table import Table
from docx.text.paragraph import Paragraph

from rag.ingest.formats import UnreadableFile, too_complex
from rag.ingest.formats.markdown import escape_block, escape_text
from rag.ingest.formats.tables import cell, markdown_table
from rag.ingest.parse import ParsedDocument, with_title

MAX_EXPANDED = 200_000_000
MAX_MEMBERS = 10_000
MAX_PARAGRAPHS = 100_000
_PARAGRAPH_TAGS = (b"<w:p>", b"<w:p ")
_STEP = 1 << 20
_HEADING_STYLE = re.compile(r"^heading\s*([1-9])$", re.I)


def _check_package(data: bytes) -> None:
    if not data.startswith(b"PK\x03\x04"):
        raise UnreadableFile("not a Word document (its content does not match the .docx extension)")
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as package:
            members = package.infolist()
            if len(members) > MAX_MEMBERS:
                raise UnreadableFile(f"a Word document of more than {MAX_MEMBERS} parts")
            if "word/document.xml" not in package.namelist():
                raise UnreadableFile("not a Word document (a zip file without word/document.xml)")
            expanded = 0
            for member in members:
                expanded = _expand(package, member, expanded)
    except (zipfile.BadZipFile, zipfile.LargeZipFile, EOFError, ValueError, NotImplementedError) as exc:
        if isinstance(exc, UnreadableFile):
            raise
        raise UnreadableFile("a damaged or truncated Word document") from None


def _expand(package: zipfile.ZipFile, member: zipfile.ZipInfo, expanded: int) -> int:
    """Inflate one member in bounded steps: the bytes expanded so far, with its own; the main
    document's paragraphs counted on the way."""
    counted = member.filename == "word/document.xml"
    paragraphs, tail = 0, b""
    with package.open(member) as stream:
        while chunk := stream.read(_STEP):
            expanded += len(chunk)
            if expanded > MAX_EXPANDED:
                raise UnreadableFile(f"a Word document that expands to more than {MAX_EXPANDED // 1_000_000} MB "
                                     "(a decompression bomb?); refused")
            if counted:
                window = tail + chunk  # a tag across two steps is counted once, in the later
                paragraphs += sum(window.count(tag) for tag in _PARAGRAPH_TAGS)
                tail = window[-4:]  # shorter than a tag: none is counted twice
                if paragraphs > MAX_PARAGRAPHS:
                    raise too_complex("paragraphs", f"more than {MAX_PARAGRAPHS}")
    return expanded


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
