"""PowerPoint (.pptx): slide by slide, its title as a heading, its text, tables and speaker notes.

python-pptx (MIT) reads the deck's XML. The package is a zip, checked first like a Word document's
(rag/ingest/formats/package.py): inflated in bounded steps, a decompression bomb, too many parts,
slides, shapes or table cells refused before python-pptx opens it; the text is counted as it is
read (MAX_CHARS).

The body is Markdown: the deck's title (the first slide's title, else its properties' title, else
the file name: a deck's properties often keep a template's title) as the first heading, then one
section per slide: "## <slide title>" ("## Slide N"
for a slide without one), the slide's text frames in reading order (top to bottom, then left to
right; the paragraphs of a body placeholder as list items by their level), its tables as Markdown
tables (rag/ingest/formats/tables.py), and its speaker notes last, in a paragraph opening "Notes:".
Footers, dates and slide numbers are left out, as are pictures, charts and SmartArt (no text
python-pptx reads). `ParsedDocument.pages` holds each slide's (start, end, slide) span of the body
with `unit` "slide"; the first starts at 0, so the deck's title heading belongs to slide 1. Text
becomes Markdown escaped (rag/ingest/formats/markdown.py).
"""

from __future__ import annotations

import io
import re

import pptx
from pptx.enum.shapes import PP_PLACEHOLDER
from pptx.shapes.group import GroupShape

from rag.ingest.formats import UnreadableFile, too_complex
from rag.ingest.formats.markdown import escape_block, escape_text
from rag.ingest.formats.package import Package, Tally, check_package
from rag.ingest.formats.tables import cell, markdown_table
from rag.ingest.parse import ParsedDocument

MAX_EXPANDED = 200_000_000
MAX_MEMBERS = 10_000
MAX_SLIDES = 2_000
MAX_SHAPES = 50_000  # in all slides together
MAX_TABLE_CELLS = 200_000
MAX_CHARS = 20_000_000  # the text read: a bound on what one deck may put in the store
_NO_TITLE = "PowerPoint Presentation"  # what python-pptx reports for a package without core properties
_MAX_GROUP_DEPTH = 16  # shapes nested deeper in groups are left out

_MAIN = "ppt/presentation.xml"
_SLIDE = re.compile(r"ppt/slides/slide\d+\.xml")
_SHAPE_TAGS = (b"<p:sp>", b"<p:sp ", b"<p:graphicFrame>", b"<p:graphicFrame ", b"<p:pic>", b"<p:pic ",
               b"<p:grpSp>", b"<p:grpSp ", b"<p:cxnSp>", b"<p:cxnSp ")
_CELL_TAGS = (b"<a:tc>", b"<a:tc ")
_TITLES = {PP_PLACEHOLDER.TITLE, PP_PLACEHOLDER.CENTER_TITLE, PP_PLACEHOLDER.VERTICAL_TITLE}
_BOILERPLATE = {PP_PLACEHOLDER.FOOTER, PP_PLACEHOLDER.DATE, PP_PLACEHOLDER.SLIDE_NUMBER, PP_PLACEHOLDER.HEADER}
_LISTS = {PP_PLACEHOLDER.BODY, PP_PLACEHOLDER.OBJECT, PP_PLACEHOLDER.VERTICAL_BODY, PP_PLACEHOLDER.VERTICAL_OBJECT}


class _Budget:
    """The characters read so far, refused past MAX_CHARS."""

    def __init__(self) -> None:
        self.used = 0

    def take(self, text: str) -> str:
        self.used += len(text)
        if self.used > MAX_CHARS:
            raise too_complex("characters", f"more than {MAX_CHARS} of text")
        return text


def _check(data: bytes) -> None:
    """The package within its bounds (read at each call: a test may lower them)."""
    slide = _Both(Tally(_SHAPE_TAGS, MAX_SHAPES, "shapes"), Tally(_CELL_TAGS, MAX_TABLE_CELLS, "table cells"))
    names = check_package(data, Package("PowerPoint presentation", ".pptx", _MAIN, MAX_MEMBERS, MAX_EXPANDED),
                          lambda name: slide if _SLIDE.fullmatch(name) else None)
    slides = sum(1 for name in names if _SLIDE.fullmatch(name))
    if slides > MAX_SLIDES:
        raise too_complex("slides", f"more than {MAX_SLIDES}")


class _Both(Tally):
    """Two tallies fed by one member's bytes (a slide's shapes and its table cells)."""

    def __init__(self, first: Tally, second: Tally) -> None:
        super().__init__(first.tags + second.tags, 0, "")
        self.first, self.second = first, second

    def add(self, window: bytes) -> None:
        self.first.add(window)
        self.second.add(window)


def _words(text: str) -> str:
    return " ".join(text.replace("\v", " ").split())


def _kind(shape) -> PP_PLACEHOLDER | None:
    if not shape.is_placeholder:
        return None
    try:
        return shape.placeholder_format.type
    except (ValueError, AttributeError):
        return None


def _position(shape) -> tuple[int, int]:
    try:
        return (shape.top or 0, shape.left or 0)
    except (ValueError, AttributeError, KeyError):  # a placeholder whose layout lacks it
        return (0, 0)


def _shapes(shapes, depth: int = 0) -> list:
    """The slide's shapes in reading order, groups opened (each group in its own place)."""
    ordered = sorted(shapes, key=_position)  # stable: shapes at one position keep the file's order
    found = []
    for shape in ordered:
        if isinstance(shape, GroupShape):  # (shape_type raises for a shape with no geometry)
            if depth < _MAX_GROUP_DEPTH:
                found.extend(_shapes(shape.shapes, depth + 1))
            continue
        found.append(shape)
    return found


def _frame(shape, as_list: bool, budget: _Budget) -> str:
    lines: list[str] = []
    for paragraph in shape.text_frame.paragraphs:
        text = budget.take(_words(paragraph.text))
        if not text:
            continue
        if as_list:
            lines.append(f"{'  ' * min(paragraph.level, 5)}- {escape_text(text)}")
        else:
            lines.append(escape_block(text))
    return ("\n" if as_list else "\n\n").join(lines)


def _table(shape, budget: _Budget) -> str:
    rows = [[cell(budget.take(tc.text)) for tc in row.cells] for row in shape.table.rows]
    if rows and max(len(r) for r in rows) == 1:  # a one-column table is a box around text
        return "\n\n".join(r[0] for r in rows if r[0])
    return markdown_table(rows)


def _notes(slide, budget: _Budget) -> str:
    if not slide.has_notes_slide:
        return ""
    frame = slide.notes_slide.notes_text_frame
    if frame is None:
        return ""
    paragraphs = [escape_text(budget.take(_words(p.text))) for p in frame.paragraphs]
    paragraphs = [p for p in paragraphs if p]
    if not paragraphs:
        return ""
    return "\n\n".join([f"Notes: {paragraphs[0]}", *paragraphs[1:]])


def _slide(slide, budget: _Budget) -> tuple[str, list[str]]:
    """(title, Markdown blocks) of one slide."""
    title = ""
    blocks: list[str] = []
    for shape in _shapes(slide.shapes):
        kind = _kind(shape)
        if kind in _BOILERPLATE:
            continue
        if kind in _TITLES and not title and shape.has_text_frame:
            title = budget.take(_words(shape.text_frame.text))
            if title:
                continue
        if getattr(shape, "has_table", False) and shape.has_table:
            text = _table(shape, budget)
        elif shape.has_text_frame:
            text = _frame(shape, kind in _LISTS, budget)
        else:
            continue
        if text:
            blocks.append(text)
    notes = _notes(slide, budget)
    if notes:
        blocks.append(notes)
    return title, blocks


def parse_pptx(data: bytes, fallback_title: str) -> ParsedDocument:
    _check(data)
    try:
        deck = pptx.Presentation(io.BytesIO(data))
        budget = _Budget()
        slides = [_slide(slide, budget) for slide in deck.slides]
        core_title = _words(deck.core_properties.title or "")
    except UnreadableFile:  # a bound passed as it read
        raise
    except Exception:  # python-pptx raises a variety (KeyError, XMLSyntaxError, ValueError) for a broken part
        raise UnreadableFile("a damaged PowerPoint presentation that cannot be read") from None
    if not any(title or blocks for title, blocks in slides):
        raise UnreadableFile("a PowerPoint presentation with no text")
    opening = slides[0][0]
    if core_title == _NO_TITLE:  # python-pptx's answer for a package without core properties
        core_title = ""
    title = opening or core_title or fallback_title
    body = ""
    pages: list[tuple[int, int, int]] = []
    for number, (heading, blocks) in enumerate(slides, start=1):
        start = len(body)
        if number == 1 and heading == title:  # the first slide's title is the deck's: the body's heading
            head = f"# {escape_text(title)}"
        else:
            head = f"## {escape_text(heading) if heading else f'Slide {number}'}"
            if number == 1:
                head = f"# {escape_text(title)}\n\n{head}"
        body += "\n\n".join([head, *blocks]) + "\n\n"
        pages.append((start, len(body), number))
    body = body[:-1]  # one newline at the end, as every body has
    start, _, number = pages[-1]
    pages[-1] = (start, len(body), number)
    return ParsedDocument(title=title, body=body, pages=pages, unit="slide")

