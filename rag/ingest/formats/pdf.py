"""PDF: each page's text in reading order, headings from the outline (or font sizes), pages kept.

pypdfium2 (PDFium, Apache-2.0/BSD-3, prebuilt wheels) reads the text layer in the order PDFium's
text page gives it, which follows the content stream: columns come one after the other, table rows
stay on a line. Only text inside the page's box counts (text drawn outside it is invisible).

The body is Markdown: the title as its first heading, then page after page. Headings come from the
outline where the PDF has one (an entry's title found as a line of its page), else from font
sizes (a short line set clearly larger than the body text). `ParsedDocument.pages` holds each
page's (start, end, page) span of the body; the first page's span starts at 0, so the title
heading belongs to page 1. Text becomes Markdown escaped (rag/ingest/formats/markdown.py).

A page with no text layer (a scan) that draws something is rendered (300 dpi, grey, at most
`ocr.OCR_PIXELS`) and read by OCR (rag/ingest/formats/ocr.py); its number goes in
`ParsedDocument.ocr`, and a page OCR reads poorly in its warnings. Where OCR is not installed, a
PDF with no text at all is refused saying how to add it, and one with some text is read with a
warning naming the pages left unread.
"""

from __future__ import annotations

import math
import re
from collections import Counter, defaultdict
from typing import NamedTuple

import pypdfium2 as pdfium
import pypdfium2.raw as pdfium_c

from rag.ingest.formats import UnreadableFile
from rag.ingest.formats.markdown import escape_text
from rag.ingest.formats.ocr import DPI, NOT_INSTALLED, OCR_PIXELS, OcrReader, blank
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


class Line(NamedTuple):
    text: str
    size: float  # the type size as set on the page: font size times the text matrix's scale
    top: float  # the top of its first character, in points from the bottom of the page


def _size(textpage: pdfium.PdfTextPage, index: int) -> float:
    """Font size times the scale of the character's matrix (a PDF may set every font at size 1
    and scale it with the text matrix)."""
    size = pdfium_c.FPDFText_GetFontSize(textpage.raw, index)
    matrix = pdfium_c.FS_MATRIX()
    if pdfium_c.FPDFText_GetMatrix(textpage.raw, index, matrix):
        scale = math.sqrt(abs(matrix.a * matrix.d - matrix.b * matrix.c))
        if scale > 0:
            size *= scale
    return float(size)


def _runs(textpage: pdfium.PdfTextPage, raw_line: str, start: int, count: int) -> list[tuple[str, int]]:
    """A text line split where the type size changes by more than a fifth between words (PDFium
    joins text that shares a baseline: a large title beside small table headings), as (text, index
    of its first character)."""
    words = list(re.finditer(r"\S+", raw_line))
    if not words:
        return []
    first, last = start + words[0].start(), start + words[-1].start()
    if last < count:  # one size from its first word to its last: one run (nearly every line; cheap)
        a, b = _size(textpage, first), _size(textpage, last)
        if a and b and max(a, b) <= min(a, b) * 1.2:
            return [(raw_line[words[0].start():], first)]
    runs: list[tuple[str, int]] = []
    size = 0.0
    for match in words:
        index = start + match.start()
        word_size = _size(textpage, index) if index < count else 0.0
        if runs and size and word_size and max(word_size, size) <= min(word_size, size) * 1.2:
            _, first = runs[-1]
            runs[-1] = (raw_line[first - start: match.end()], first)
            continue
        runs.append((match.group(0), index))
        size = word_size
    return runs


def _page_lines(pdf: pdfium.PdfDocument, index: int) -> tuple[list[Line], float]:
    """The page's lines and its height; text outside the page box left out."""
    page = pdf[index]
    textpage = page.get_textpage()
    try:
        height = float(page.get_height())
        if not textpage.get_text_bounded().strip():
            return [], height  # nothing visible (text drawn off the page, or none at all)
        text = textpage.get_text_range()
        count = textpage.count_chars()
        lines: list[Line] = []
        offset = 0
        for raw_line in text.split("\r\n"):
            start = offset
            offset += len(raw_line) + 2
            for run, first in _runs(textpage, raw_line, start, count):
                line = run.replace("\ufffe", "").replace("\x02", "").strip()
                if not line:
                    continue
                size = _size(textpage, first) if first < count else 0.0
                top = textpage.get_charbox(first, loose=True)[3] if first < count else 0.0
                line = _LEADER.sub(" … ", " ".join(line.split()))  # dot leaders of a table or contents line
                lines.append(Line(line, size, float(top)))
        return lines, height
    finally:
        textpage.close()
        page.close()


class _Headings:
    """Which lines are headings: outline titles found on their page, else clearly larger type."""

    def __init__(self, outline: dict[int, list[tuple[int, str]]], pages: list[list[Line]]) -> None:
        self.outline = outline
        levels = Counter(level for entries in outline.values() for level, _ in entries)
        self.base = min(levels, default=0)
        if levels.get(self.base) == 1 and len(levels) > 1:
            self.base += 1  # one entry above all the others: the document's own title
        sizes: Counter = Counter()
        for lines in pages:
            for text, size, _ in lines:
                sizes[round(size * 2) / 2] += len(text)
        self.body_size = sizes.most_common(1)[0][0] if sizes else 0.0
        big = sorted({s for s in sizes if self.body_size and s >= self.body_size * 1.25}, reverse=True)
        self.size_level = {size: min(2 + i, 4) for i, size in enumerate(big)}

    def for_page(self, index: int, lines: list[Line]) -> dict[int, int]:
        """line number -> Markdown heading level."""
        if self.outline:
            return self._from_outline(self.outline.get(index, []), lines)
        return self._from_sizes(lines)

    def _from_outline(self, entries: list[tuple[int, str]], lines: list[Line]) -> dict[int, int]:
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

    def title_lines(self, pages: list[list[Line]], height: float) -> list[int]:
        """The title: the first page's topmost line set in the largest heading type, in the top
        quarter of the page wherever the content stream puts it, with the lines of that type right
        below it (a title on two lines); a running header (a line most other pages repeat) is not
        one. Empty when the PDF has an outline or no such line."""
        if self.outline:
            return []
        lines, others = pages[0], pages[1:]

        def running_header(text: str) -> bool:  # in a line of most other pages ("... / Proposed Rules 47699")
            text = _norm(text)
            return bool(others) and sum(any(text in _norm(line.text) for line in page) for page in others) * 2 >= len(others)

        largest = [i for i, level in self._from_sizes(lines).items()
                   if level == 2 and lines[i].top >= height * 0.75 and not running_header(lines[i].text)]
        if not largest:
            return []
        chosen = [max(largest, key=lambda i: lines[i].top)]
        while True:
            last = lines[chosen[-1]]
            below = [i for i in largest if i not in chosen and 0 < last.top - lines[i].top <= last.size * 1.6
                     and abs(lines[i].size - last.size) <= last.size * 0.05]
            if not below:
                return sorted(chosen)
            chosen.append(max(below, key=lambda i: lines[i].top))

    def _from_sizes(self, lines: list[Line]) -> dict[int, int]:
        found: dict[int, int] = {}
        for i, (text, size, _) in enumerate(lines):
            level = self.size_level.get(round(size * 2) / 2)
            if level and 2 <= len(text) <= 120 and re.search(r"[A-Za-z]{2}", text) and not text.endswith((",", ";")):
                found[i] = level
        return found


def _is_row(text: str) -> bool:
    """A line of a table: several cells, most of them numbers."""
    tokens = text.split()
    return len(tokens) >= 4 and sum(bool(_NUMERIC_TOKEN.match(t)) for t in tokens) >= len(tokens) * 0.4


def _page_markdown(lines: list[Line], headings: dict[int, int]) -> str:
    blocks: list[str] = []
    paragraph: list[str] = []

    def close() -> None:
        if paragraph:
            blocks.append("\n".join(paragraph))
            paragraph.clear()

    for i, (line, _size, _top) in enumerate(lines):
        text = escape_text(line)
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


def _numbers(indexes: list[int]) -> str:
    numbers = [str(i + 1) for i in indexes]
    return f"page {numbers[0]} has" if len(numbers) == 1 else f"pages {', '.join(numbers)} have"


def _draws(pdf: pdfium.PdfDocument, index: int) -> bool:
    """The page draws something (an image, a path, text as curves): a page that draws nothing is blank."""
    page = pdf[index]
    try:
        return pdfium_c.FPDFPage_CountObjects(page.raw) > 0
    finally:
        page.close()


def _ocr(pdf: pdfium.PdfDocument, pages: list[list[Line]]) -> tuple[dict[int, str], list[int], list[str]]:
    """The text OCR reads on the pages that have no text layer and draw something: ({page index:
    Markdown}, the page numbers read, the warnings)."""
    bare = [i for i, lines in enumerate(pages) if not lines and _draws(pdf, i)]
    if not bare:
        return {}, [], []
    if not OcrReader.available():
        if not any(pages):
            raise UnreadableFile(f"a PDF with no extractable text (scanned or image-only); {NOT_INSTALLED}")
        return {}, [], [f"{_numbers(bare)} no text layer and {'was' if len(bare) == 1 else 'were'} not read: "
                        f"{NOT_INSTALLED}"]
    reader = OcrReader()
    reader.check_pages(len(bare))
    texts: dict[int, str] = {}
    for index in bare:
        page = pdf[index]
        try:
            width, height = page.get_size()
            scale = min(DPI / 72, math.sqrt(OCR_PIXELS / max(width * height, 1.0)))
            bitmap = page.render(scale=scale, grayscale=True)
            image = bitmap.to_pil()
            if not blank(image):
                texts[index] = reader.read(image, index + 1, scale * 72)
        except pdfium.PdfiumError:
            raise UnreadableFile(f"a damaged PDF: page {index + 1} cannot be rendered") from None
        finally:
            page.close()
    if not any(pages) and not any(texts.values()):
        raise UnreadableFile(f"a PDF with no text: it has no text layer, and OCR found none on its {len(pages)} "
                             f"page{'s' if len(pages) > 1 else ''}")
    return texts, reader.pages, reader.warnings


def parse_pdf(data: bytes, fallback_title: str) -> ParsedDocument:
    pdf = _open(data)
    try:
        count = len(pdf)
        if count > MAX_PAGES:
            raise UnreadableFile(f"a PDF of {count} pages, more than the {MAX_PAGES} this service reads")
        try:
            read = [_page_lines(pdf, i) for i in range(count)]
        except pdfium.PdfiumError:
            raise UnreadableFile("a damaged PDF: a page of it cannot be read") from None
        pages = [lines for lines, _ in read]
        if sum(len(line.text) for lines in pages for line in lines) > MAX_CHARS:
            raise UnreadableFile("a PDF whose text is larger than this service reads")
        scanned, ocr_pages, warnings = _ocr(pdf, pages)
        if sum(map(len, scanned.values())) > MAX_CHARS:
            raise UnreadableFile("a PDF whose text is larger than this service reads")
        headings = _Headings(_outline(pdf), pages)
        title = _title(pdf, None)
        found = headings.title_lines(pages, read[0][1]) if title is None else []
        if found:  # the title set large on the first page becomes the document's heading
            title = " ".join(pages[0][i].text for i in found)
            pages[0] = [line for i, line in enumerate(pages[0]) if i not in found]
        title = title or fallback_title
    finally:
        pdf.close()
    body = f"# {escape_text(title)}\n\n"
    spans: list[tuple[int, int, int]] = []
    for index, lines in enumerate(pages):
        start = 0 if index == 0 else len(body)
        text = scanned[index] if index in scanned else _page_markdown(lines, headings.for_page(index, lines))
        if text:
            body += text + "\n\n"
        spans.append((start, len(body), index + 1))
    body = body.rstrip("\n") + "\n"
    last_start, _, last_page = spans[-1]
    spans[-1] = (min(last_start, len(body)), len(body), last_page)
    spans = [(s, min(e, len(body)), p) for s, e, p in spans]
    return ParsedDocument(title=title, body=body, pages=spans, ocr=ocr_pages, warnings=warnings)
