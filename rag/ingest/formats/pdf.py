"""PDF: each page's text in reading order, headings from the outline (or font sizes), pages kept.

pypdfium2 (PDFium, Apache-2.0/BSD-3, prebuilt wheels) reads the text layer in the order PDFium's
text page gives it, which follows the content stream: columns come one after the other, table rows
stay on a line. Only text inside the page's box counts (text drawn outside it is invisible).

The body is Markdown: the title as its first heading, then page after page. Headings come from the
outline where the PDF has one (an entry's title found as a line of its page), else from font
sizes (a short line set clearly larger than the body text). `ParsedDocument.pages` holds each
page's (start, end, page) span of the body; the first page's span starts at 0, so the title
heading belongs to page 1.
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict

import pypdfium2 as pdfium
import pypdfium2.raw as pdfium_c

from rag.ingest.formats import UnreadableFile
from rag.ingest.parse import ParsedDocument

MAX_PAGES = 5000
MAX_CHARS = 20_000_000  # extracted text: a bound on what one file may put in the store
_BULLET = re.compile(r"^[•◦▪●■–]\s*")
_NUMBERED = re.compile(r"^(?:\d+(?:\.\d+)*\.?|[A-Z]\.)\s+")
_NUMERIC_TOKEN = re.compile(r"^[$€£(]?[\d.,%×*-]+[)]?$")
_LEADER = re.compile(r"\s*\.{4,}\s*")
_HEADING_MARK = re.compile(r"^(#{1,6})\s")


def _norm(text: str) -> str:
    return " ".join(text.replace("\u2013", "-").replace("\u2014", "-").split()).lower()


def _open(data: bytes) -> pdfium.PdfDocument:
    if b"%PDF-" not in data[:1024]:
        raise UnreadableFile("not a PDF (its content does not match the .pdf extension)")
    try:
        return pdfium.PdfDocument(data)
    except pdfium.PdfiumError as exc:
        if "password" in str(exc).lower():
            raise UnreadableFile("an encrypted (password-protected) PDF; it cannot be read without its password") from None
        raise UnreadableFile("a damaged or truncated PDF that cannot be opened") from None


def _outline(pdf: pdfium.PdfDocument) -> dict[int, list[tuple[int, str]]]:
    """page index -> [(level, title)] in outline order; levels start at 0."""
    entries: dict[int, list[tuple[int, str]]] = defaultdict(list)
    try:
        for bookmark in pdf.get_toc(max_depth=6):
            dest = bookmark.get_dest()
            title = " ".join((bookmark.get_title() or "").split())
            index = dest.get_index() if dest is not None else None
            if title and index is not None:
                entries[index].append((bookmark.level, title))
    except (pdfium.PdfiumError, ValueError):  # a damaged outline: the text is still worth reading
        return {}
    return entries


def _page_lines(pdf: pdfium.PdfDocument, index: int) -> list[tuple[str, float]]:
    """The page's lines (text, font size of its first character), text outside the page box left out."""
    page = pdf[index]
    textpage = page.get_textpage()
    try:
        if not textpage.get_text_bounded().strip():
            return []  # nothing visible (text drawn off the page, or none at all)
        text = textpage.get_text_range()
        lines: list[tuple[str, float]] = []
        offset = 0
        for raw_line in text.split("\r\n"):
            start = offset
            offset += len(raw_line) + 2
            line = raw_line.replace("\ufffe", "").replace("\x02", "").strip()
            if not line:
                continue
            lead = start + (len(raw_line) - len(raw_line.lstrip()))
            size = pdfium_c.FPDFText_GetFontSize(textpage.raw, lead) if lead < textpage.count_chars() else 0.0
            line = _LEADER.sub(" … ", " ".join(line.split()))  # dot leaders of a table or contents line
            lines.append((line, float(size)))
        return lines
    finally:
        textpage.close()
        page.close()


class _Headings:
    """Which lines are headings: outline titles found on their page, else clearly larger type."""

    def __init__(self, outline: dict[int, list[tuple[int, str]]], pages: list[list[tuple[str, float]]]) -> None:
        self.outline = outline
        levels = Counter(level for entries in outline.values() for level, _ in entries)
        self.base = min(levels, default=0)
        if levels.get(self.base) == 1 and len(levels) > 1:
            self.base += 1  # one entry above all the others: the document's own title
        sizes: Counter = Counter()
        for lines in pages:
            for text, size in lines:
                sizes[round(size * 2) / 2] += len(text)
        self.body_size = sizes.most_common(1)[0][0] if sizes else 0.0
        big = sorted({s for s in sizes if self.body_size and s >= self.body_size * 1.25}, reverse=True)
        self.size_level = {size: min(2 + i, 4) for i, size in enumerate(big)}

    def for_page(self, index: int, lines: list[tuple[str, float]]) -> dict[int, int]:
        """line number -> Markdown heading level."""
        if self.outline:
            return self._from_outline(self.outline.get(index, []), lines)
        return self._from_sizes(lines)

    def _from_outline(self, entries: list[tuple[int, str]], lines: list[tuple[str, float]]) -> dict[int, int]:
        found: dict[int, int] = {}
        cursor = 0
        for level, title in entries:
            wanted = {_norm(title), _norm(_NUMBERED.sub("", title))}
            for i in range(cursor, len(lines)):
                if _norm(lines[i][0]) in wanted:
                    found[i] = max(2, min(6, 2 + level - self.base))
                    cursor = i + 1
                    break
        return found

    def title_line(self, lines: list[tuple[str, float]]) -> int | None:
        """The line of the first page set in the largest heading type, near its top: the title."""
        if self.outline:
            return None
        found = self._from_sizes(lines[:4])
        return next((i for i, level in sorted(found.items()) if level == 2), None)

    def _from_sizes(self, lines: list[tuple[str, float]]) -> dict[int, int]:
        found: dict[int, int] = {}
        for i, (text, size) in enumerate(lines):
            level = self.size_level.get(round(size * 2) / 2)
            if level and 2 <= len(text) <= 120 and re.search(r"[A-Za-z]{2}", text) and not text.endswith((",", ";")):
                found[i] = level
        return found


def _is_row(text: str) -> bool:
    """A line of a table: several cells, most of them numbers."""
    tokens = text.split()
    return len(tokens) >= 4 and sum(bool(_NUMERIC_TOKEN.match(t)) for t in tokens) >= len(tokens) * 0.4


def _page_markdown(lines: list[tuple[str, float]], headings: dict[int, int]) -> str:
    blocks: list[str] = []
    paragraph: list[str] = []

    def close() -> None:
        if paragraph:
            blocks.append("\n".join(paragraph))
            paragraph.clear()

    for i, (text, _size) in enumerate(lines):
        if i in headings:
            close()
            previous = blocks[-1] if blocks else ""
            match = _HEADING_MARK.match(previous)
            if match and len(match.group(1)) == headings[i] and i - 1 in headings:
                blocks[-1] = f"{previous} {text}"  # a heading set on two lines
            else:
                blocks.append(f"{'#' * headings[i]} {text}")
            continue
        if text.startswith("#"):
            text = "\\" + text
        if _BULLET.match(text):
            close()
            text = "- " + _BULLET.sub("", text)
        elif _is_row(text):
            close()
            blocks.append(text)
            continue
        paragraph.append(text)
        if text.endswith((".", "!", "?", ":")):
            close()
    close()
    return "\n\n".join(blocks)


def _title(pdf: pdfium.PdfDocument, fallback: str | None) -> str | None:
    try:
        title = " ".join((pdf.get_metadata_value("Title") or "").split())
    except (pdfium.PdfiumError, KeyError, ValueError):
        title = ""
    if len(title) < 4 or re.search(r"\.(docx?|pdf|tex|odt|indd)$|^untitled", title, re.I):
        return fallback
    return title


def parse_pdf(data: bytes, fallback_title: str) -> ParsedDocument:
    pdf = _open(data)
    try:
        count = len(pdf)
        if count > MAX_PAGES:
            raise UnreadableFile(f"a PDF of {count} pages, more than the {MAX_PAGES} this service reads")
        try:
            pages = [_page_lines(pdf, i) for i in range(count)]
        except pdfium.PdfiumError:
            raise UnreadableFile("a damaged PDF: a page of it cannot be read") from None
        if sum(len(t) for lines in pages for t, _ in lines) > MAX_CHARS:
            raise UnreadableFile("a PDF whose text is larger than this service reads")
        if not any(pages):
            raise UnreadableFile("a PDF with no extractable text (scanned or image-only); OCR is not supported")
        headings = _Headings(_outline(pdf), pages)
        title = _title(pdf, None)
        line = headings.title_line(pages[0]) if title is None else None
        if line is not None:  # the title set large on the first page becomes the document's heading
            title = pages[0][line][0]
            pages[0] = pages[0][:line] + pages[0][line + 1:]
        title = title or fallback_title
    finally:
        pdf.close()
    body = f"# {title}\n\n"
    spans: list[tuple[int, int, int]] = []
    for index, lines in enumerate(pages):
        start = 0 if index == 0 else len(body)
        text = _page_markdown(lines, headings.for_page(index, lines))
        if text:
            body += text + "\n\n"
        spans.append((start, len(body), index + 1))
    body = body.rstrip("\n") + "\n"
    last_start, _, last_page = spans[-1]
    spans[-1] = (min(last_start, len(body)), len(body), last_page)
    spans = [(s, min(e, len(body)), p) for s, e, p in spans]
    return ParsedDocument(title=title, body=body, pages=spans)
