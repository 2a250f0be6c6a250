"""A web page's main content: what a crawled page says, without its navigation and boilerplate.

A site's page wraps its content in menus, sidebars, breadcrumbs, cookie banners and footers that
repeat on every page; indexed, they would match every question. Rules by hand (drop `<nav>`,
prefer `<main>`, as rag/ingest/formats/html.py does for an HTML *file*) miss the sites that mark
nothing. trafilatura (Apache-2.0, a maintained extractor scored on web-content benchmarks) decides
what the main content is; its structured XML output (headings, paragraphs, lists, tables, code,
quotes) is then written as Markdown here with the project's escaping
(rag/ingest/formats/markdown.py), so a page's text never becomes live markup in a body. When
trafilatura finds nothing (a page that is all table, a tiny page), or loses the headings of a page
whose content is not in a container (see `_structured`), the HTML file parser reads it.

The pseudo-suffix ".webpage" is how the website connector names a page's bytes: it is registered
in BINARY_PARSERS, so the page is parsed in a bounded worker (rag/ingest/sandbox.py) like any
untrusted HTML, and it is an internal suffix, so `rag ingest DIR` does not pick up files named so.
trafilatura is imported on a page's first parse: a worker that never reads a page never loads it.
"""

from __future__ import annotations

import re

from lxml import etree

from rag.ingest.formats import UnreadableFile
from rag.ingest.formats.html import MAX_BYTES, decode_html, parse_html
from rag.ingest.formats.markdown import escape_block, escape_text, fenced
from rag.ingest.formats.tables import cell, markdown_table
from rag.ingest.parse import ParsedDocument, with_title
from rag.synthesize.markup import clean_heading

_HEADING = re.compile(r"h([1-6])")
_HEADING_LINE = re.compile(r"(?m)^#{1,6} ")
_MAX_DEPTH = 200  # nesting this renderer follows; deeper is a hostile page


def _text(node) -> str:
    """A node's text with line breaks (`<lb/>`) kept and nested lists left out."""
    parts: list[str] = [node.text or ""]
    for child in node:
        if child.tag == "lb":
            parts.append("\n")
        elif child.tag not in ("list", "table"):
            parts.append(_text(child))
        parts.append(child.tail or "")
    return "".join(parts)


def _clean(text: str) -> str:
    return " ".join(text.split())


class _Writer:
    """trafilatura's XML (its documented element set: head, p, list/item, table/row/cell, code,
    quote, hi, lb) as Markdown blocks."""

    def __init__(self) -> None:
        self.blocks: list[str] = []

    def paragraph(self, text: str, prefix: str = "") -> None:
        lines = [" ".join(line.split()) for line in text.split("\n")]
        text = "\n".join(line for line in lines if line)
        if text:
            self.blocks.append(prefix + escape_block(text).replace("\n", "\n" + prefix))

    def walk(self, node, depth: int = 0) -> None:
        if depth > _MAX_DEPTH:
            raise UnreadableFile("a web page nested too deeply to read")
        tag = node.tag if isinstance(node.tag, str) else ""
        heading = _HEADING.fullmatch(node.get("rend", "")) if tag == "head" else None
        if tag == "head":
            text = _clean(_text(node))
            if text:
                self.blocks.append(f"{'#' * int(heading.group(1) if heading else 2)} {escape_text(text)}")
        elif tag == "code":
            code = "".join(node.itertext()).strip("\n")
            if code.strip():
                self.blocks.append(fenced(code))
        elif tag == "list":
            self.list(node, 0, depth)
        elif tag == "table":
            self.table(node)
        elif tag == "quote":
            self.paragraph(_text(node), "> ")
        elif tag in ("p", "item", "cell"):
            self.paragraph(_text(node))
        else:
            for child in node:
                self.walk(child, depth + 1)

    def list(self, node, level: int, depth: int) -> None:
        ordered = node.get("rend", "") in ("ol", "1", "a", "i")
        number = 0
        for item in node:
            if item.tag != "item":
                continue
            number += 1
            text = _clean(_text(item))
            if text:
                self.blocks.append(f"{'  ' * level}{f'{number}.' if ordered else '-'} {escape_text(text)}")
            for sub in item:
                if sub.tag == "list" and depth < _MAX_DEPTH:
                    self.list(sub, level + 1, depth + 1)

    def table(self, node) -> None:
        rows = [[cell(_clean(_text(c))) for c in row if c.tag == "cell"] for row in node.iter("row")]
        text = markdown_table(rows)
        if text:
            self.blocks.append(text)


def _extract(text: str) -> tuple[str, str] | None:
    """(title, Markdown content) of the page's main content, or None when trafilatura finds none."""
    import trafilatura  # noqa: PLC0415 - loaded by the first page a worker reads (module docstring)

    xml = trafilatura.extract(text, output_format="xml", include_formatting=True, include_tables=True,
                              include_links=False, include_images=False, include_comments=False,
                              with_metadata=True, deduplicate=False, favor_recall=True)
    if not xml:
        return None
    root = etree.fromstring(xml.encode("utf-8"), etree.XMLParser(resolve_entities=False, no_network=True))
    writer = _Writer()
    main = root.find("main")
    writer.walk(main if main is not None else root)
    content = "\n\n".join(writer.blocks)
    if not content.strip():
        return None
    return _clean(root.get("title") or ""), content


def parse_webpage(data: bytes, fallback_title: str) -> ParsedDocument:
    if len(data) > MAX_BYTES:
        raise UnreadableFile("a web page larger than this service reads")
    text = decode_html(data)
    if not text.strip():
        raise UnreadableFile("an empty web page")
    try:
        found = _extract(text)
    except RecursionError:
        raise UnreadableFile("a web page nested too deeply to read") from None
    if found is None:
        return parse_html(data, fallback_title)
    title, content = found
    if not _HEADING_LINE.search(content):
        structured = _structured(data, fallback_title, len(content))
        if structured is not None:
            return structured
    title = clean_heading(title) if title else fallback_title
    return ParsedDocument(title=title, body=with_title(escape_text(title), content),
                          metadata={"extracted_by": "trafilatura"})


def _structured(data: bytes, fallback_title: str, length: int) -> ParsedDocument | None:
    """The HTML parser's reading when trafilatura lost the page's headings and the parser does not
    bring much more text. trafilatura keeps headings when it finds a content container; for a page
    whose content sits directly in `<body>` (what Pandoc and many hand-written pages make) it falls
    back to a paragraphs-only reading, while the parser's rules (navigation, header, footer and
    asides dropped) keep the sections."""
    try:
        parsed = parse_html(data, fallback_title)
    except UnreadableFile:
        return None
    sections = _HEADING_LINE.findall(parsed.body.split("\n", 1)[-1])  # past the title's own heading
    if not sections or len(parsed.body) > 1.5 * length + 500:
        return None
    parsed.metadata = {**parsed.metadata, "extracted_by": "html"}
    return parsed


# ----- a crawled page's links, for the website connector's listing -----

MAX_LINKS = 10_000  # hrefs one page gives the crawl (rag/sources/website.py keeps those inside its prefix)
MAX_LINK_CHARS = 1_000_000  # characters of them all
_MAX_META_CHARS = 2_000  # of the base URL and of the robots meta
_FEED_CHARS = 1 << 16
_URL_BLANKS = str.maketrans("", "", "\t\n\r")  # what a browser takes out of a URL (the WHATWG URL standard)


class _LinkTarget:
    """lxml parser target: the page's hrefs, its first `<base href>` and its robots meta, gathered as
    the parser reads, with no tree built."""

    def __init__(self) -> None:
        self.hrefs: list[str] = []
        self.chars = 0
        self.base: str | None = None
        self.robots = ""
        self.full = False

    def start(self, tag: str, attrib) -> None:
        if tag in ("a", "area"):
            href = attrib.get("href")
            if href is None or self.full:
                return
            href = href.strip().translate(_URL_BLANKS)
            if len(self.hrefs) >= MAX_LINKS or self.chars + len(href) > MAX_LINK_CHARS:
                self.full = True
                return
            self.hrefs.append(href)
            self.chars += len(href) + 1
        elif tag == "base" and self.base is None and attrib.get("href") is not None:
            self.base = attrib["href"].strip()[:_MAX_META_CHARS]
        elif tag == "meta" and (attrib.get("name") or "").lower() == "robots" and len(self.robots) < _MAX_META_CHARS:
            self.robots = f"{self.robots} {attrib.get('content') or ''}"[:_MAX_META_CHARS]

    def close(self) -> None:
        return None


def parse_links(data: bytes, fallback_title: str) -> ParsedDocument:
    """A page's links for the crawl (the internal suffix ".weblinks"): its hrefs (`<a>`, `<area>`), one
    a line of the body, in the page's order, as written (the connector resolves them against the
    page's URL and `metadata["base"]`); `metadata["robots"]`, its robots meta in lower case;
    `metadata["cut"]`, True when the page had more than MAX_LINKS links or MAX_LINK_CHARS characters
    of them and the rest were not read. lxml reads the page as a stream into a target that keeps
    nothing but these, so a page of millions of links costs this worker its CPU time, not a tree of
    them (issue 49: built in the serving process, 3.1 M links took 2.9 GB)."""
    if len(data) > MAX_BYTES:
        raise UnreadableFile("an HTML page larger than this service reads")
    target = _LinkTarget()
    parser = etree.HTMLParser(target=target, recover=True, no_network=True)
    text = decode_html(data)
    try:
        for start in range(0, len(text), _FEED_CHARS):
            parser.feed(text[start:start + _FEED_CHARS])
            if target.full:
                break
        parser.close()
    except (etree.LxmlError, ValueError):
        pass  # what was read before the error stands: links are a crawl's hints
    return ParsedDocument(title=fallback_title, body="\n".join(target.hrefs),
                          metadata={"base": target.base, "robots": target.robots.lower(), "cut": target.full})


# ----- a sitemap's URLs, for the website connector's listing -----

MAX_SITEMAP_LOCS = 50_000  # URLs one sitemap gives the crawl: the sitemap protocol's own limit of a file
MAX_SITEMAP_CHARS = 4_000_000  # characters of them all
_MAX_LOC_CHARS = 4_096  # of one URL; a longer `<loc>` is no URL a crawl follows and is left out


class _SitemapTarget:
    """lxml parser target: a sitemap's `<loc>` texts and whether its root is a `<sitemapindex>`,
    gathered as the parser reads, with no tree built."""

    def __init__(self) -> None:
        self.locs: list[str] = []
        self.chars = 0
        self.root: str | None = None
        self.text: list[str] | None = None  # the `<loc>` being read
        self.text_chars = 0
        self.full = False

    def start(self, tag: str, attrib) -> None:
        name = tag.rpartition("}")[2]
        if self.root is None:
            self.root = name
        if name == "loc":
            self.text, self.text_chars = [], 0

    def data(self, data: str) -> None:
        if self.text is not None and self.text_chars <= _MAX_LOC_CHARS:
            self.text.append(data)
            self.text_chars += len(data)

    def end(self, tag: str) -> None:
        if self.text is None or tag.rpartition("}")[2] != "loc":
            return
        loc = " ".join("".join(self.text).split()) if self.text_chars <= _MAX_LOC_CHARS else ""
        self.text = None
        if not loc:
            return
        if len(self.locs) >= MAX_SITEMAP_LOCS or self.chars + len(loc) > MAX_SITEMAP_CHARS:
            self.full = True
            return
        self.locs.append(loc)
        self.chars += len(loc) + 1

    def close(self) -> None:
        return None


def parse_sitemap(data: bytes, fallback_title: str) -> ParsedDocument:
    """A sitemap's URLs for the crawl (the internal suffix ".sitemap"): the text of each `<loc>`,
    blanks collapsed, one a line of the body, in the sitemap's order; `metadata["index"]`, True when
    its root is a `<sitemapindex>` (the URLs are sitemaps); `metadata["cut"]`, True when it had more
    than MAX_SITEMAP_LOCS URLs or MAX_SITEMAP_CHARS characters of them and the rest were not read.
    lxml reads it as a stream into a target that keeps nothing else (no DTD, no entities, no
    network), so a sitemap of millions of URLs costs this worker CPU time, not a tree (issue 49:
    built in the serving process, a 20 MiB sitemap's tree took hundreds of MiB). Raises
    UnreadableFile when it is not well-formed XML before the cut."""
    if len(data) > MAX_BYTES:
        raise UnreadableFile("a sitemap larger than this service reads")
    target = _SitemapTarget()
    parser = etree.XMLParser(target=target, resolve_entities=False, no_network=True, load_dtd=False,
                             huge_tree=False)
    try:
        for start in range(0, len(data), _FEED_CHARS):
            parser.feed(data[start:start + _FEED_CHARS])
            if target.full:
                break
        else:
            parser.close()
    except (etree.LxmlError, ValueError):
        raise UnreadableFile("not a readable sitemap") from None
    return ParsedDocument(title=fallback_title, body="\n".join(target.locs),
                          metadata={"index": target.root == "sitemapindex", "cut": target.full})
