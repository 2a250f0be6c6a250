"""Chunking with llama-index-core's node parsers: Markdown sections, then sentence-aware splits.

Every chunk keeps its heading path and its character span in the version's body, so a citation
can point at the exact text (``body[char_start:char_end] == chunk.text``). Heading paths are
derived text: each heading is cleaned of markup (``clean_heading``), the chunk text is not.

A body with pages (a PDF's: (start, end, page) spans, ``ParsedDocument.pages``) is cut at its page
boundaries before anything else, and no chunk crosses one: each chunk lies on one page, which its
citation names (``page_start`` = ``page_end``; both None for a body without pages).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cached_property
from typing import Sequence


from rag.synthesize.markup import clean_heading

_HEADING = re.compile(r"\A(#{1,6})[ \t]+(.+?)[ \t]*#*[ \t]*$", re.MULTILINE)


@dataclass(frozen=True)
class ChunkSpec:
    text: str
    heading_path: tuple[str, ...]
    char_start: int
    char_end: int
    page_start: int | None = None
    page_end: int | None = None

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
            heading = _HEADING.match(text)
            if heading:
                level = len(heading.group(1))
                while stack and stack[-1][0] >= level:
                    stack.pop()
                stack.append((level, clean_heading(heading.group(2)) or heading.group(2).strip()))
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

    def chunk(self, body: str, pages: Sequence[Sequence[int]] | None = None) -> list[ChunkSpec]:
        """The body's chunks; `pages` ((start, end, page) spans of the body) gives each its page."""
        chunks: list[ChunkSpec] = []
        sections = self._sections(body)
        if pages:
            sections = _split_at_pages(sections, pages)
        for section in self._merged(body, sections):
            text = body[section.start:section.end]
            if not text.strip():
                continue
            if self.tokens(text) <= self.chunk_size:
                chunks.append(
                    ChunkSpec(text, section.heading_path, section.start, section.end, section.page, section.page))
                continue
            cursor = 0
            for piece in self._parsers[1].split_text(text):
                offset = text.find(piece, cursor)
                if offset < 0:  # the splitter normalised whitespace: anchor on the piece's start
                    offset = text.find(piece[:40], cursor)
                if offset < 0:
                    offset = cursor
                end = min(len(text), offset + len(piece))
                start, stop = section.start + offset, section.start + end
                chunks.append(ChunkSpec(body[start:stop], section.heading_path, start, stop, section.page, section.page))
                cursor = offset + 1
        return chunks
