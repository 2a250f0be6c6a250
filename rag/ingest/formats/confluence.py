"""A Confluence export's page, read in a parse worker for the confluence connector
(rag/sources/confluence.py, which describes the export's layout).

Two internal suffixes (rag/ingest/formats/__init__.py), so that the serving process never holds a
page's tree (issue 49: lxml builds one of hundreds of MiB from a page of tens of MiB):

- ".confluence" (`parse_page_facts`): what the listing needs of a page, as metadata: the heading's
  text, the breadcrumbs' texts (the space's, the pages' above), the attachments' original names,
  the links of its main content to pages and attachments of the export, and the hash of its main
  content with those links named by id (its version);
- ".confluencepage" (`render_page`): the page as the HTML parser then reads it (the body, a string):
  its main content under its title, its links to pages and attachments as their addresses, the
  export's other relative links as their text only. The bytes are a JSON line
  `{"title": …, "links": {target: address}}` and then the page's file.

Each list comes back cut at `MAX_REFERENCES` entries. lxml parses with its bounds on (no huge
trees, no network).
"""

from __future__ import annotations

import hashlib
import json
import re
from html import escape
from pathlib import PurePosixPath
from urllib.parse import unquote, urlsplit

import lxml.html
from lxml import etree

from rag.ingest.formats import UnreadableFile
from rag.ingest.formats.html import MAX_BYTES, decode_html
from rag.ingest.parse import ParsedDocument

MAX_REFERENCES = 10_000  # breadcrumbs, attachments and link targets of one page, each
PAGE = re.compile(r"^(?:(?P<slug>.*)_)?(?P<id>\d+)\.html?$")
ATTACHMENT = re.compile(r"^attachments/(?P<page>\d+)/(?P<name>[^/]+)$")
_EXTERNAL = re.compile(r"^(?:[A-Za-z][A-Za-z0-9+.-]*:|//)")
_XML_DECLARATION = re.compile(r"\A\s*<\?xml[^>]*\?>")
_FRAME = ("breadcrumb-section", "main-header", "footer", "title-heading")
_PARSER = lxml.html.HTMLParser(huge_tree=False, no_network=True, remove_comments=True, remove_pis=True)


def _text(node: etree._Element) -> str:
    return " ".join(node.text_content().split())


def _parse(data: bytes) -> etree._Element:
    if len(data) > MAX_BYTES:
        raise UnreadableFile("an HTML page larger than this service reads")
    text = _XML_DECLARATION.sub("", decode_html(data), count=1)  # lxml refuses one in a str
    try:
        root = lxml.html.document_fromstring(text, parser=_PARSER)
    except (etree.LxmlError, ValueError, RecursionError):
        raise UnreadableFile("the page's HTML cannot be parsed") from None
    if root is None:
        raise UnreadableFile("the page's HTML is empty")
    return root


def page_id(href: str) -> str | None:
    """The pageId a relative link to another page's file names, else None."""
    if not href or _EXTERNAL.match(href):
        return None
    match = PAGE.match(PurePosixPath(unquote(urlsplit(href).path)).name)
    return match.group("id") if match else None


def target(href: str) -> str | None:
    """The item a relative link of the export points at: a page's id or an attachment's
    "<pageId>/<file>"; None for any other link."""
    if not href or _EXTERNAL.match(href) or href.startswith("#"):
        return None
    attachment = ATTACHMENT.match(unquote(urlsplit(href).path))
    if attachment:
        return f"{attachment.group('page')}/{attachment.group('name')}"
    return page_id(href)


def _canonical(node: etree._Element) -> tuple[str, list[str]]:
    """The content's HTML with its links to pages and attachments named by id (a newer export
    moves files, and so their relative links, without changing what they point at), and those ids."""
    targets = []
    for link in node.xpath(".//a[@href] | .//img[@src]"):
        attribute = "href" if link.tag == "a" else "src"
        found = target(link.get(attribute, ""))
        if found is not None:
            link.set(attribute, f"export:{found}")
            targets.append(found)
    return lxml.html.tostring(node, encoding="unicode"), sorted(set(targets))


def _heading(root: etree._Element) -> str:
    for query in ("//*[@id='title-text']", "//*[@id='title-heading']", "//title"):
        found = root.xpath(query)
        if found and _text(found[0]):
            return _text(found[0])
    return ""


def _breadcrumbs(root: etree._Element) -> tuple[str, list[str]]:
    """The space's name (the crumb linking to index.html) and the titles of the pages above."""
    space, ancestors = "", []
    for link in root.xpath("//*[@id='breadcrumb-section']//a[@href]"):
        href = link.get("href", "")
        if PurePosixPath(urlsplit(href).path).name == "index.html":
            space = _text(link)
        elif page_id(href) is not None and _text(link) and len(ancestors) < MAX_REFERENCES:
            ancestors.append(_text(link))
    return space, ancestors


def main_content(root: etree._Element) -> etree._Element:
    """The page's own content: `#main-content`, else `#content` or the body without the frame."""
    found = root.xpath("//*[@id='main-content']")
    if found:
        return found[0]
    found = root.xpath("//*[@id='content']") or root.xpath("//body") or [root]
    node = found[0]
    for junk in node.xpath(".//*[contains(concat(' ', @class, ' '), ' page-metadata ') or "
                           "contains(concat(' ', @class, ' '), ' pageSection ')]"):
        junk.drop_tree()
    for name in _FRAME:
        for junk in node.xpath(f".//*[@id='{name}']"):
            junk.drop_tree()
    return node


def _attachments(root: etree._Element) -> dict[str, str]:
    """Attachment file -> its original name: the attachments section's links first (their text is
    the file's name), then any other link to one (its text may be any words)."""
    named: dict[str, str] = {}
    greybox = "//*[contains(concat(' ', @class, ' '), ' greybox ')]//a[starts-with(@href, 'attachments/')]"
    for link in [*root.xpath(greybox), *root.xpath("//a[starts-with(@href, 'attachments/')]")]:  # in that order
        name = _text(link)
        where = unquote(urlsplit(link.get("href", "")).path)
        if name and ATTACHMENT.match(where) and (where in named or len(named) < MAX_REFERENCES):
            named.setdefault(where, name)
    return named


def parse_page_facts(data: bytes, fallback_title: str) -> ParsedDocument:
    """What the listing reads of a page's file (the internal suffix ".confluence"), as metadata:
    `heading` (the title's text, "" when it has none), `space` and `ancestors` (the breadcrumbs'
    texts), `attachments` (file -> original name), `targets` (the items its main content links to)
    and `content_hash` (of the main content with those links named by id)."""
    root = _parse(data)
    space, ancestors = _breadcrumbs(root)
    attachments = _attachments(root)
    content, targets = _canonical(main_content(root))
    heading = _heading(root)  # after: without a #main-content, the frame's heading is dropped with the frame
    return ParsedDocument(title=fallback_title, body="", metadata={
        "heading": heading, "space": space, "ancestors": ancestors, "attachments": attachments,
        "targets": targets[:MAX_REFERENCES], "content_hash": hashlib.sha256(content.encode()).hexdigest()})


def render_page(data: bytes, fallback_title: str) -> ParsedDocument:
    """The page as the HTML parser reads it (the internal suffix ".confluencepage"; its bytes: the
    JSON line of its title and its links' addresses, then the page's file), in the body."""
    header, _, page = data.partition(b"\n")
    try:
        asked = json.loads(header)
        title, links = str(asked["title"]), dict(asked["links"])
    except (ValueError, KeyError, TypeError):
        raise UnreadableFile("not a page to render") from None
    node = main_content(_parse(page))
    for link in node.xpath(".//a[@href]"):
        href = link.get("href", "")
        if _EXTERNAL.match(href) or href.startswith("#"):
            continue
        key = target(href)
        address = links.get(key) if key else None
        if isinstance(address, str) and address:
            link.set("href", address)
        else:
            del link.attrib["href"]
    body = lxml.html.tostring(node, encoding="unicode")
    title = escape(title)
    return ParsedDocument(title=fallback_title, body=(
        f'<!DOCTYPE html><html><head><meta charset="utf-8"><title>{title}</title></head>'
        f"<body><main><h1>{title}</h1>{body}</main></body></html>"))
