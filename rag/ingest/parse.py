"""Markdown and plain text in, a clean body with its title as the first heading out.

Names, summaries and metadata are never indexed, so what a document is about must be in its body:
the title (front matter ``title``, a corpus record's ``title``, else the first heading or the file
name) becomes the body's first heading. Template tags (``{% … %}``, ``{{ … }}``, ``{# … #}``) are
stripped; YAML front matter becomes the document's metadata.

Text and Markdown are parsed in the serving process (rag/ingest/formats/__init__.py), so every pass
here costs time linear in the text (tests/unit/test_linear_checks.py): template tags and the first
heading are read by string operations, not by regular expressions that backtrack (issue 49).

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
# A template tag's opener (the character after "{") -> its closer. Read by `strip_template_tags`.
_TEMPLATE_CLOSERS = {"%": "%}", "{": "}}", "#": "#}"}
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
    """`text` without its template tags (`{% … %}`, `{{ … }}`, `{# … #}`, each to its first closer).

    One pass: an opener whose closer is nowhere after it means no later opener of its kind closes
    either, so each kind's closer is looked for at most once in vain (a regular expression with a lazy
    `.*?` rescanned the rest of the text from every unclosed opener: quadratic, issue 49)."""
    kept: list[str] = []
    done = at = 0
    unclosed: set[str] = set()
    while (at := text.find("{", at)) >= 0 and at + 1 < len(text):
        kind = text[at + 1]
        closer = _TEMPLATE_CLOSERS.get(kind)
        end = -1 if closer is None or kind in unclosed else text.find(closer, at + 2)
        if end < 0:
            if closer is not None:
                unclosed.add(kind)
            at += 1
            continue
        kept.append(text[done:at])
        done = at = end + 2
    kept.append(text[done:])
    return "".join(kept)


def _tidy(text: str) -> str:
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    lines = [line.rstrip() for line in text.split("\n")]
    return _BLANK_RUNS.sub("\n\n", "\n".join(lines)).strip("\n")


def first_heading(content: str) -> str | None:
    """The text of the level-1 heading `content` opens with (after white space), its closing `#`s and
    trailing white space left out; None when it opens with none.

    String operations, each a pass over the first line: a regular expression (`#\\s+(.+?)\\s*#*\\s*$`)
    took time cubic in the white space inside a heading (2,000 spaces: 21 s of CPU, issue 49)."""
    text = content.lstrip()
    if not text.startswith("#"):
        return None
    after = text[1:]
    words = after.lstrip()
    if words == after:  # "#" then no white space: no level-1 heading
        return None
    if not words:  # nothing but white space to the end: a blank heading
        blank = after[1:].replace("\n", "")
        return blank[-1] if blank else None
    end = words.find("\n")
    line = words if end < 0 else words[:end]
    return line[:max(1, len(line.rstrip().rstrip("#").rstrip()))]


def with_title(title: str, content: str) -> str:
    """The body: the title as its first heading, then the content (unless it already opens so)."""
    content = content.strip("\n")
    heading = first_heading(content)
    if heading is not None and clean_heading(heading).lower() == clean_heading(title).lower():
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
        heading = first_heading(content)
        title = (clean_heading(heading) if heading is not None else "") or fallback_title
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
