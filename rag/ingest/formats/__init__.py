"""One interface for every file format ingestion reads: bytes and a file name in, a ParsedDocument out.

The rest of the service calls `parse_bytes` (rag/ingest/read.py: directory ingest, HTTP uploads,
import), which runs `parse_here` in a bounded worker for a binary format (rag/ingest/sandbox.py,
which builds on this module). Each format lives in its own module here and returns a ParsedDocument whose body is Markdown
text; a paged format (PDF) also fills `ParsedDocument.pages` with (start, end, page) character spans
of the body, pages 1-based physical indexes. A file that cannot be read raises UnreadableFile with a
message for the caller (it names no internals; the caller adds the file name).
"""

from __future__ import annotations

from importlib import import_module
from pathlib import PurePath
from typing import Callable

from rag.ingest.parse import MARKDOWN_SUFFIXES, TEXT_SUFFIXES, ParsedDocument, humanize, parse_file_text


class UnreadableFile(ValueError):
    """The file cannot be ingested; str(exc) says why in words a user understands."""


class FileTooComplex(UnreadableFile):
    """Reading the file would pass one of the parsers' bounds (`bound`: memory, time, output, or a
    format's own count such as paragraphs); rag/ingest/sandbox.py."""

    def __init__(self, bound: str, message: str) -> None:
        super().__init__(message)
        self.bound = bound

    def __reduce__(self):  # pickled across the worker's pipe with both arguments
        return (type(self), (self.bound, str(self)))


def too_complex(bound: str, detail: str = "") -> FileTooComplex:
    """The refusal of a file that would pass `bound`, in the words every parser uses."""
    words = f"{bound}: {detail}" if detail else bound
    return FileTooComplex(bound, f"the file is too complex to read within this service's limits ({words})")


TEXT_FORMATS = MARKDOWN_SUFFIXES | TEXT_SUFFIXES
# Binary formats register here (suffix -> "module:function" of its parser, imported on first use:
# pypdfium2, lxml and python-docx are no part of a command that reads no such file); the rest of
# ingestion reads this set.
BINARY_PARSERS: dict[str, str] = {
    ".png": "rag.ingest.formats.image:parse_png", ".jpg": "rag.ingest.formats.image:parse_jpeg",
    ".jpeg": "rag.ingest.formats.image:parse_jpeg", ".tif": "rag.ingest.formats.image:parse_tiff",
    ".tiff": "rag.ingest.formats.image:parse_tiff",
    ".pdf": "rag.ingest.formats.pdf:parse_pdf", ".html": "rag.ingest.formats.html:parse_html",
    ".htm": "rag.ingest.formats.html:parse_html", ".docx": "rag.ingest.formats.docx:parse_docx",
    ".webpage": "rag.ingest.formats.webpage:parse_webpage", ".weblinks": "rag.ingest.formats.webpage:parse_links",
    ".sitemap": "rag.ingest.formats.webpage:parse_sitemap",
    ".confluence": "rag.ingest.formats.confluence:parse_page_facts",
    ".confluencepage": "rag.ingest.formats.confluence:render_page",
    ".eml": "rag.ingest.formats.mail:parse_eml", ".mbox": "rag.ingest.formats.mail:parse_mbox",
    ".epub": "rag.ingest.formats.epub:parse_epub", ".ipynb": "rag.ingest.formats.notebook:parse_notebook",
    ".pptx": "rag.ingest.formats.pptx:parse_pptx", ".xlsx": "rag.ingest.formats.spreadsheet:parse_xlsx",
    ".csv": "rag.ingest.formats.spreadsheet:parse_csv", ".tsv": "rag.ingest.formats.spreadsheet:parse_tsv",
}
# Suffixes no file on disk has: a connector names its bytes so to choose a parser (".webpage": a
# crawled page's main content, ".weblinks": its links for the crawl, ".sitemap": a sitemap's URLs, all
# rag/ingest/formats/webpage.py; ".confluence", ".confluencepage": a Confluence export's page, what the
# listing needs of it and its rendering, rag/ingest/formats/confluence.py).
# Parsed like the others, never picked up by a folder walk.
INTERNAL_SUFFIXES = {".webpage", ".weblinks", ".sitemap", ".confluence", ".confluencepage"}


def binary_parser(suffix: str) -> Callable[[bytes, str], ParsedDocument] | None:
    """The parser of a binary format by its suffix (lower case), None for any other."""
    where = BINARY_PARSERS.get(suffix)
    if where is None:
        return None
    module, function = where.split(":")
    return getattr(import_module(module), function)


# Pictures, read through OCR (rag/ingest/formats/image.py).
IMAGE_SUFFIXES = {".png", ".jpg", ".jpeg", ".tif", ".tiff"}
# Why a source of documents (a repository, a site, a wiki export) passes a picture by.
SKIP_IMAGE = ("an image in a repository, site or export illustrates its pages and is not read by OCR "
              "(ingest or upload a scan to read its text)")


def supported_suffixes() -> set[str]:
    """The suffixes of files a folder walk, an upload, a folder or bucket source reads."""
    from rag.ingest.formats.code import LANGUAGES  # here: that module builds on this one

    return (TEXT_FORMATS | set(BINARY_PARSERS) | set(LANGUAGES)) - INTERNAL_SUFFIXES


def document_suffixes() -> set[str]:
    """What a source of documents (Git, a website, a Notion or Confluence export) reads: every format
    but pictures, which there are logos, diagrams and screenshots beside the text (and would cost
    seconds of OCR each, most of them finding no text)."""
    return supported_suffixes() - IMAGE_SUFFIXES


def decode_text(data: bytes) -> str:
    if b"\x00" in data[:8192]:
        raise UnreadableFile("a binary file, not text")
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise UnreadableFile(f"not UTF-8 text (invalid byte at offset {exc.start})") from None
    if "\x00" in text:  # past the first 8 KB: a binary file still, and no store keeps a NUL
        raise UnreadableFile("a binary file, not text")
    return text


def parse_here(data: bytes, filename: str, fallback_title: str | None = None) -> ParsedDocument:
    """Parse in this process, unbounded: only a parse worker (and parse_bytes, rag/ingest/read.py, for
    text) calls this."""
    name = PurePath(filename)
    suffix = name.suffix.lower()
    title = fallback_title or humanize(name.stem)
    parser = binary_parser(suffix)
    if parser is not None:
        return parser(data, title)
    if suffix in TEXT_FORMATS:
        return parse_file_text(decode_text(data), suffix, title)
    from rag.ingest.formats import code  # source code and config: text, never cleaned as prose

    if suffix in code.LANGUAGES:
        return code.parse_code(data, name.name, decode_text(data))
    raise UnreadableFile(f"an unsupported file type ({suffix or 'no extension'})")
