"""Markdown and plain text in, a clean body with its title as the first heading out.

Names, summaries and metadata are never indexed, so what a document is about must be in its body:
the title (front matter ``title``, a corpus record's ``title``, else the first heading or the file
name) becomes the body's first heading. Template tags (``{% … %}``, ``{{ … }}``, ``{# … #}``) are
stripped; YAML front matter becomes the document's metadata.

Titles are derived text, so they are cleaned of markup (``clean_heading``: heading anchors such as
``{ #cors }``, HTML tags, emphasis, code and link markers); the body keeps its headings as written.
"""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass, field
from typing import Any

from rag.synthesize.markup import clean_heading

MARKDOWN_SUFFIXES = {".md", ".markdown", ".mdx"}
TEXT_SUFFIXES = {".txt", ".text", ".rst"}
SUPPORTED_SUFFIXES = MARKDOWN_SUFFIXES | TEXT_SUFFIXES

_FRONT_MATTER = re.compile(r"\A---[ \t]*\r?\n(.*?)\r?\n(?:---|\.\.\.)[ \t]*(?:\r?\n|\Z)", re.DOTALL)
_TEMPLATE_TAG = re.compile(r"\{%-?.*?-?%\}|\{\{-?.*?-?\}\}|\{#.*?#\}", re.DOTALL)
_FIRST_HEADING = re.compile(r"\A\s*#\s+(.+?)\s*#*\s*(?:\n|\Z)")
_BLANK_RUNS = re.compile(r"\n[ \t]*\n(?:[ \t]*\n)+")


@dataclass
class ParsedDocument:
    title: str
    body: str
    metadata: dict[str, Any] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    # Where each part of the body lies in the original: (start, end, n) character spans of `body`, n
    # 1-based and numbering what `unit` says (a PDF's or a scan's page, a deck's slide, a workbook's
    # sheet); empty for a format with no such parts. No chunk crosses a span's end.
    pages: list[tuple[int, int, int]] = field(default_factory=list)
    unit: str = "page"  # "page" | "slide" | "sheet"
    names: dict[int, str] = field(default_factory=dict)  # sheet: its number -> its name
    # sheet: (start, end, row) spans of the body, one per record, row as the sheet numbers it
    rows: list[tuple[int, int, int]] = field(default_factory=list)
    ocr: list[int] = field(default_factory=list)  # the numbers of the pages read by OCR


def humanize(stem: str) -> str:
    words = re.sub(r"[-_]+", " ", stem).strip()
    return words[:1].upper() + words[1:] if words else stem


def _json_safe(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(k): _json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set)):
        return [_json_safe(v) for v in value]
    if isinstance(value, (dt.date, dt.datetime, dt.time)):
        return value.isoformat()
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    return str(value)


def strip_template_tags(text: str) -> str:
    return _TEMPLATE_TAG.sub("", text)


def _tidy(text: str) -> str:
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    lines = [line.rstrip() for line in text.split("\n")]
    return _BLANK_RUNS.sub("\n\n", "\n".join(lines)).strip("\n")


def with_title(title: str, content: str) -> str:
    """The body: the title as its first heading, then the content (unless it already opens so)."""
    content = content.strip("\n")
    match = _FIRST_HEADING.match(content)
    if match and clean_heading(match.group(1)).lower() == clean_heading(title).lower():
        return content + "\n"
    return f"# {title}\n\n{content}\n" if content else f"# {title}\n"


def parse_markdown(text: str, fallback_title: str) -> ParsedDocument:
    metadata: dict[str, Any] = {}
    warnings: list[str] = []
    match = _FRONT_MATTER.match(text)
    if match:
        import yaml  # here: most commands parse no Markdown, and importing it takes a while

        try:
            loaded = yaml.safe_load(match.group(1))
        except yaml.YAMLError:
            loaded = None
            warnings.append("front matter is not valid YAML; it was left out and the body kept")
        if isinstance(loaded, dict):
            metadata = _json_safe(loaded)
        elif loaded is not None:
            warnings.append("front matter is not a mapping; it was left out")
        text = text[match.end():]
    content = _tidy(strip_template_tags(text))
    title = metadata.get("title")
    title = clean_heading(title) if isinstance(title, str) else ""
    if not title:
        heading = _FIRST_HEADING.match(content)
        title = (clean_heading(heading.group(1)) if heading else "") or fallback_title
    title = " ".join(str(title).split())
    return ParsedDocument(title=title, body=with_title(title, content), metadata=metadata, warnings=warnings)


def parse_text(text: str, fallback_title: str) -> ParsedDocument:
    return ParsedDocument(title=fallback_title, body=with_title(fallback_title, _tidy(text)))


def parse_record(title: str | None, text: str, fallback_title: str) -> ParsedDocument:
    """A corpus record (BEIR / HotpotQA style): its title becomes the first heading."""
    title = " ".join((title or "").split()) or fallback_title
    return ParsedDocument(title=title, body=with_title(title, _tidy(text)))


def parse_file_text(text: str, suffix: str, fallback_title: str) -> ParsedDocument:
    if suffix.lower() in MARKDOWN_SUFFIXES:
        return parse_markdown(text, fallback_title)
    return parse_text(text, fallback_title)
