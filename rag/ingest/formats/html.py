"""HTML: the page's main content as Markdown, headings kept, links as their text.

lxml (BSD) parses any HTML a browser would, HTML 4 with uppercase tags included. The bytes are
decoded by the charset the page declares (a BOM, then `<meta charset>` or `http-equiv`), UTF-8
when it declares none. The main content is `<main>`, `<article>` or `role="main"` where the page
marks one, else `<body>`; scripts, styles, navigation, headers, footers, asides and forms are
dropped.

Text becomes Markdown escaped (rag/ingest/formats/markdown.py): a page's text `&lt;img …&gt;` or
`[x](javascript:…)` stays text in the body. A DOCTYPE with an internal subset is taken out before
parsing (an HTML parser ends it at its first `>` and would keep the rest as text).
"""

from __future__ import annotations

import codecs
import re

import lxml.html
from lxml import etree

from rag.ingest.formats import UnreadableFile
from rag.ingest.formats.markdown import escape_block, escape_text, fenced
from rag.ingest.formats.tables import cell, markdown_table
from rag.ingest.parse import ParsedDocument, with_title
from rag.synthesize.markup import clean_heading

MAX_BYTES = 50_000_000
_CHARSET = re.compile(rb"""<meta[^>]+charset\s*=\s*["']?\s*([A-Za-z0-9_.:-]+)""", re.I)
_DROP = ("script", "style", "noscript", "template", "nav", "header", "footer", "aside", "form", "iframe",
         "svg", "button", "select", "object", "embed", "canvas")
_BLOCKS = {"p", "div", "section", "article", "main", "blockquote", "address", "figure", "figcaption", "center",
           "dd", "dt", "dl", "body", "html", "details", "summary", "hr", "caption"}
_FIRST_HEADING = re.compile(r"\A#{1,6} (.+)")
_XML_DECLARATION = re.compile(r"\A\s*<\?xml[^>]*\?>")
# A DOCTYPE up to its end: past an internal subset (`[ … ]`) when it has one.
_DOCTYPE = re.compile(r"\A\s*<!DOCTYPE[^\[>]*(?:\[[^\]]*\][^>]*)?>?", re.I)


def decode_html(data: bytes) -> str:
    for bom, encoding in ((codecs.BOM_UTF8, "utf-8-sig"), (codecs.BOM_UTF16_LE, "utf-16"), (codecs.BOM_UTF16_BE, "utf-16")):
        if data.startswith(bom):
            return data.decode(encoding)
    declared = _CHARSET.search(data[:4096])
    encoding = declared.group(1).decode("ascii").lower() if declared else "utf-8"
    try:
        codecs.lookup(encoding)
    except LookupError:
        encoding = "utf-8"
    if encoding in ("iso-8859-1", "latin-1", "latin1", "us-ascii", "ascii"):
        encoding = "cp1252"  # what browsers read for these labels (the WHATWG encoding standard)
    return data.decode(encoding, errors="replace")


def _inline(node, skip: tuple[str, ...] = ()) -> str:
    """A node's text with links as their text and line breaks kept (`skip`: child tags left out)."""
    parts: list[str] = []
    if node.text:
        parts.append(node.text)
    for child in node:
        if isinstance(child.tag, str):
            if child.tag == "br":
                parts.append("\n")
            elif child.tag not in _DROP and child.tag not in skip:
                parts.append(_inline(child))
        if child.tail:
            parts.append(child.tail)
    return "".join(parts)


def _clean(text: str) -> str:
    return " ".join(text.split())


class MarkdownWriter:
    """An HTML element tree walked into Markdown blocks (the EPUB reader walks its chapters with it)."""

    def __init__(self) -> None:
        self.blocks: list[str] = []

    def paragraph(self, text: str) -> None:
        lines = [" ".join(line.split()) for line in text.split("\n")]
        text = "\n".join(line for line in lines if line)
        if text:
            self.blocks.append(escape_block(text))

    def walk(self, node, depth: int = 0) -> None:
        tag = node.tag if isinstance(node.tag, str) else ""
        if not tag or tag in _DROP:
            return
        if re.fullmatch(r"h[1-6]", tag):
            text = _clean(_inline(node))
            if text:
                self.blocks.append(f"{'#' * int(tag[1])} {escape_text(text)}")
        elif tag == "pre":
            code = node.text_content().strip("\n")
            if code.strip():
                self.blocks.append(fenced(code))
        elif tag in ("ul", "ol"):
            self.list(node, depth)
        elif tag == "table":
            self.table(node)
        elif tag in _BLOCKS or self._has_blocks(node):
            self.mixed(node, depth)
        else:
            self.paragraph(_inline(node))

    def _has_blocks(self, node) -> bool:
        return any(isinstance(c.tag, str) and (c.tag in _BLOCKS or c.tag in ("ul", "ol", "table", "pre")
                   or re.fullmatch(r"h[1-6]", c.tag)) for c in node)

    def mixed(self, node, depth: int) -> None:
        """A block holding both text and blocks: runs of inline content become paragraphs."""
        run: list[str] = [node.text or ""]
        for child in node:
            tag = child.tag if isinstance(child.tag, str) else ""
            if tag and (tag in _BLOCKS or tag in ("ul", "ol", "table", "pre") or re.fullmatch(r"h[1-6]", tag)):
                self.paragraph("".join(run))
                run = []
                self.walk(child, depth)
            elif tag == "br":
                run.append("\n")
            elif tag and tag not in _DROP:
                run.append(_inline(child))
            run.append(child.tail or "")
        self.paragraph("".join(run))

    def list(self, node, depth: int) -> None:
        ordered = node.tag == "ol"
        number = 0
        for item in node:
            if not isinstance(item.tag, str) or item.tag != "li":
                continue
            number += 1
            nested = [c for c in item if isinstance(c.tag, str) and c.tag in ("ul", "ol")]
            text = _clean(_inline(item, skip=("ul", "ol")))
            marker = f"{number}." if ordered else "-"
            if text:
                self.blocks.append(f"{'  ' * depth}{marker} {escape_text(text)}")
            for sub in nested:
                self.list(sub, depth + 1)

    def table(self, node) -> None:
        rows = [[cell(_inline(c)) for c in row if isinstance(c.tag, str) and c.tag in ("td", "th")]
                for row in node.iter("tr")]
        text = markdown_table(rows)
        if text:
            self.blocks.append(text)

    def markdown(self) -> str:
        return "\n\n".join(self.blocks)


def main_element(root):
    """The element holding a page's main content: its one <main>, <article> or role=main, else <body>."""
    for path in ("//main", "//article", "//*[@role='main']"):
        found = root.xpath(path)
        if len(found) == 1:
            return found[0]
    body = root.find("body")
    return body if body is not None else root


def parse_html(data: bytes, fallback_title: str) -> ParsedDocument:
    if len(data) > MAX_BYTES:
        raise UnreadableFile("an HTML page larger than this service reads")
    head = data[:1024].lstrip()
    if head.startswith((b"%PDF-", b"PK\x03\x04")) or b"\x00" in data[:8192] and not data.startswith((b"\xff\xfe", b"\xfe\xff")):
        raise UnreadableFile("not an HTML page (its content does not match the .html extension)")
    text = _DOCTYPE.sub("", _XML_DECLARATION.sub("", decode_html(data)), count=1)
    if not text.strip():
        raise UnreadableFile("an empty HTML page")
    try:
        root = lxml.html.document_fromstring(text)
    except (etree.LxmlError, ValueError):
        raise UnreadableFile("an HTML page that cannot be parsed") from None
    title_node = root.find(".//title")
    title = _clean(title_node.text_content()) if title_node is not None else ""
    for element in root.xpath("//*[@aria-hidden='true' or @hidden or @role='navigation']"):
        if element.getparent() is not None:
            element.drop_tree()
    writer = MarkdownWriter()
    try:
        writer.walk(main_element(root))
    except RecursionError:
        raise UnreadableFile("an HTML page nested too deeply to read") from None
    content = writer.markdown()
    if not content.strip():
        raise UnreadableFile("an HTML page with no text in its main content")
    if not title:
        first = _FIRST_HEADING.match(content)
        title = clean_heading(first.group(1)) if first else ""
    title = title or fallback_title
    return ParsedDocument(title=title, body=with_title(escape_text(title), content))
