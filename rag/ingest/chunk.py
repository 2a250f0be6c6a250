"""Chunking with llama-index-core's node parsers: Markdown sections, then sentence-aware splits.

Every chunk keeps its heading path and its character span in the version's body, so a citation
can point at the exact text (``body[char_start:char_end] == chunk.text``). Heading paths are
derived text: each heading is cleaned of markup (``clean_heading``), the chunk text is not.

A body with a layout (a PDF's pages, a deck's slides, a workbook's sheets: (start, end, n) spans,
rag/ingest/layout.py) is cut at its spans' ends before anything else, and no chunk crosses one: each
chunk lies on one page, which its citation names (``page_start`` = ``page_end``; both None for a body
without pages), or on one slide or sheet, which its `locator` names.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Any, Sequence


from rag.ingest.layout import Layout
from rag.synthesize.markup import clean_heading


def _heading(text: str) -> tuple[int, str] | None:
    """(level, text) of the ATX heading `text` opens with, its closing `#`s and trailing blanks left
    out; None when its first line is no heading. String operations over the first line: a regular
    expression (`[ \\t]+(.+?)[ \\t]*#*[ \\t]*$`) took time cubic in the blanks inside a heading
    (2,000 spaces: 8 s of CPU in the serving process, issue 49)."""
    end = text.find("\n")
    line = text if end < 0 else text[:end]
    words = line.lstrip("#")
    level = len(line) - len(words)
    if not 1 <= level <= 6:
        return None
    title = words.lstrip(" \t")
    if title == words:  # no blank after the marks
        return None
    if not title:  # only blanks: the last of them is the heading's one character
        return (level, words[-1]) if len(words) > 1 else None
    return level, title[:max(1, len(title.rstrip(" \t").rstrip("#").rstrip(" \t")))]


@dataclass(frozen=True)
class ChunkSpec:
    text: str
    heading_path: tuple[str, ...]
    char_start: int
    char_end: int
    page_start: int | None = None
    page_end: int | None = None
    # What the excerpt names beyond its page: a slide, a sheet and rows, OCR (rag/ingest/layout.py).
    locator: dict[str, Any] | None = None

    def indexed_text(self, contextual: bool = True) -> str:
        """What the lanes see: the heading path as context, then the chunk's own text."""
        if not contextual or not self.heading_path:
            return self.text
        first_line = clean_heading(self.text.lstrip().split("\n", 1)[0].lstrip("#").strip())
        path = list(self.heading_path)
        if path and path[-1] == first_line:
            path = path[:-1]  # the chunk already opens with its own heading
        return (" > ".join(path) + "\n\n" + self.text) if path else self.text


@dataclass
class _Section:
    start: int
    end: int
    heading_path: tuple[str, ...]
    page: int | None = None


def _split_at_pages(sections: list[_Section], pages: Sequence[Sequence[int]]) -> list[_Section]:
    """Each section cut where a page ends; the pieces keep the section's heading path."""
    spans = sorted((int(s), int(e), int(p)) for s, e, p in pages)
    cut: list[_Section] = []
    for section in sections:
        pieces = [
            _Section(max(section.start, start), min(section.end, end), section.heading_path, page)
            for start, end, page in spans
            if start < section.end and end > section.start
        ]
        cut.extend(pieces or [section])
    return cut


class Chunker:
    def __init__(self, chunk_size: int = 256, chunk_overlap: int = 32, min_section_tokens: int = 48) -> None:
        self.chunk_size = chunk_size
        self.chunk_overlap = chunk_overlap
        self.min_section_tokens = min_section_tokens

    @cached_property
    def _parsers(self):
        """LlamaIndex's Markdown and sentence parsers and its tokenizer, imported on first use: only
        publishing chunks, and importing llama_index.core takes seconds (a CLI search never needs it)."""
        from llama_index.core.node_parser import MarkdownNodeParser, SentenceSplitter
        from llama_index.core.utils import get_tokenizer

        markdown = MarkdownNodeParser(include_metadata=False, include_prev_next_rel=False)
        return markdown, SentenceSplitter(chunk_size=self.chunk_size, chunk_overlap=self.chunk_overlap), get_tokenizer()

    def tokens(self, text: str) -> int:
        return len(self._parsers[2](text))

    def _sections(self, body: str) -> list[_Section]:
        from llama_index.core import Document

        nodes = self._parsers[0].get_nodes_from_documents([Document(text=body)])
        sections: list[_Section] = []
        stack: list[tuple[int, str]] = []
        cursor = 0
        for node in nodes:
            text = node.get_content()
            start = node.start_char_idx if node.start_char_idx is not None else body.find(text, cursor)
            if start is None or start < 0:
                continue
            end = start + len(text)
            cursor = end
            heading = _heading(text)
            if heading:
                level, words = heading
                while stack and stack[-1][0] >= level:
                    stack.pop()
                stack.append((level, clean_heading(words) or words.strip()))
            sections.append(_Section(start, end, tuple(title for _, title in stack)))
        return sections

    def _merged(self, body: str, sections: list[_Section]) -> list[_Section]:
        """Fold small sections (a heading with little under it) into the section that follows."""
        merged: list[_Section] = []
        pending: _Section | None = None
        for section in sections:
            if pending is not None and pending.page != section.page:
                merged.append(pending)
                pending = None
            if pending is not None:
                combined = _Section(pending.start, section.end, section.heading_path, section.page)
                if self.tokens(body[combined.start:combined.end]) <= self.chunk_size:
                    section = combined
                else:
                    merged.append(pending)
                pending = None
            if self.tokens(body[section.start:section.end]) < self.min_section_tokens:
                pending = section
            else:
                merged.append(section)
        if pending is not None:
            last = merged[-1] if merged else None
            if last and last.page == pending.page and self.tokens(body[last.start:pending.end]) <= self.chunk_size:
                merged[-1] = _Section(last.start, pending.end, last.heading_path, last.page)
            else:
                merged.append(pending)
        return merged

    def _packed(self, body: str, section: _Section, records: list[tuple[int, int, int]]) -> list[tuple[int, int]]:
        """A section of records as (start, stop) windows of whole records up to the chunk size; what
        lies before the first record (its headings) opens the first window. A record over the size
        alone is cut by the sentence splitter, as any long text."""
        windows: list[tuple[int, int]] = []
        start, used = section.start, self.tokens(body[section.start:records[0][0]])
        stop = records[0][0]
        for record_start, record_end, _ in records:
            if stop == start:  # nothing in this window yet: it opens with this record
                start = stop = record_start
            size = self.tokens(body[record_start:record_end])
            if stop > start and used + size > self.chunk_size and body[start:stop].strip():
                windows.append((start, stop))
                start, used = record_start, 0
            if size > self.chunk_size:  # one record too long for a chunk: cut, its pieces their own
                windows.extend(self._split(body, start, record_end))
                start = stop = record_end
                used = 0
                continue
            stop, used = record_end, used + size
        if body[start:section.end].strip():
            windows.append((start, section.end))  # the last, with whatever follows the last record
        return windows

    def _split(self, body: str, start: int, end: int) -> list[tuple[int, int]]:
        """body[start:end] cut by the sentence splitter: (start, stop) windows of the body."""
        text = body[start:end]
        windows = []
        cursor = 0
        for piece in self._parsers[1].split_text(text):
            offset = text.find(piece, cursor)
            if offset < 0:  # the splitter normalised whitespace: anchor on the piece's start
                offset = text.find(piece[:40], cursor)
            if offset < 0:
                offset = cursor
            windows.append((start + offset, start + min(len(text), offset + len(piece))))
            cursor = offset + 1
        return windows

    def chunk(self, body: str, pages: "Layout | Sequence[Sequence[int]] | dict[str, Any] | None" = None) -> list[ChunkSpec]:
        """The body's chunks. `pages`, the body's layout (a Layout, or as a version stores it: page
        spans, or rag/ingest/layout.py's object), gives each chunk its page or other locator."""
        layout = pages if isinstance(pages, Layout) or pages is None else Layout.load(pages)
        chunks: list[ChunkSpec] = []
        sections = self._sections(body)
        if layout is not None:
            sections = _split_at_pages(sections, layout.spans)

        def spec(start: int, stop: int, section: _Section) -> ChunkSpec:
            page = section.page if layout is not None and layout.paged else None
            locator = layout.locator(start, stop, section.page) if layout is not None else None
            return ChunkSpec(body[start:stop], section.heading_path, start, stop, page, page, locator)

        for section in self._merged(body, sections):
            text = body[section.start:section.end]
            if not text.strip():
                continue
            if self.tokens(text) <= self.chunk_size:
                chunks.append(spec(section.start, section.end, section))
                continue
            records = layout.rows_within(section.start, section.end) if layout is not None else []
            if records:  # a sheet's records: whole records to a chunk, none cut in two (when one fits)
                chunks.extend(spec(start, stop, section) for start, stop in self._packed(body, section, records))
                continue
            chunks.extend(spec(start, stop, section) for start, stop in self._split(body, section.start, section.end))
        return chunks
