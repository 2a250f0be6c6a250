"""EPUB e-books (.epub): the chapters in reading order, their headings kept under the book's title.

An EPUB is a zip (checked like a Word document before anything reads it: rag/ingest/formats/package.py)
of XHTML chapters: META-INF/container.xml names the package document (the OPF), whose manifest
lists the files and whose spine gives the reading order; the title is the OPF's first `dc:title`.
Each chapter in the spine is read by the HTML parser (rag/ingest/formats/html.py: main content,
headings, lists, tables, text escaped), its headings moved down so that its top one is a level-2
heading under the book's title (a chapter with none gets its `<title>`), and a heading that
repeats the book's title (a title page) is left out. EbookLib is AGPL, so lxml (BSD) does the work.

A book whose chapters are encrypted (DRM: META-INF/encryption.xml naming content files) is
refused with words saying so; obfuscated fonts, the one encryption the EPUB standard itself
defines, are no reason to refuse. The XML is read with entities and DTDs off, no network.
Bounds: the package's members and expanded size, the chapters in the spine, the characters of
the text (each past its bound refused with `too_complex`).
"""

from __future__ import annotations

import io
import posixpath
import re
import zipfile
from urllib.parse import unquote, urlsplit

import lxml.html
from lxml import etree

from rag.ingest.formats import UnreadableFile, too_complex
from rag.ingest.formats.html import MarkdownWriter, decode_html, main_element
from rag.ingest.formats.markdown import escape_text
from rag.ingest.formats.package import Package, check_package
from rag.ingest.parse import ParsedDocument, with_title
from rag.synthesize.markup import clean_heading

MAX_MEMBERS = 10_000
MAX_EXPANDED = 200_000_000
MAX_CHAPTERS = 5_000
MAX_CHARACTERS = 10_000_000
CONTAINER = "META-INF/container.xml"
_ENCRYPTION = "META-INF/encryption.xml"
# Font obfuscation (IDPF, Adobe): fonts mangled with the book's id, the text itself readable.
_FONT_OBFUSCATION = {"http://www.idpf.org/2008/embedding", "http://ns.adobe.com/pdf/enc#RC"}
_CHAPTER_TYPES = {"application/xhtml+xml", "text/html", "application/xml+xhtml"}
_HEADING = re.compile(r"(#{1,6}) (.*)", re.S)
_XML_ENCODING = re.compile(rb"""\A(?:\xef\xbb\xbf)?\s*<\?xml[^>]*encoding\s*=\s*["']([A-Za-z0-9_.:-]+)""")
_XML_DECLARATION = re.compile(r"\A\s*<\?xml[^>]*\?>")
_XML = etree.XMLParser(resolve_entities=False, no_network=True, load_dtd=False, huge_tree=False)


def _spec() -> Package:
    return Package("book in EPUB format", ".epub", CONTAINER, MAX_MEMBERS, MAX_EXPANDED)


def _xml(data: bytes, what: str):
    try:
        return etree.fromstring(data, _XML)
    except (etree.XMLSyntaxError, ValueError):
        raise UnreadableFile(f"a damaged EPUB book (its {what} is not well-formed XML)") from None


def _local(root, name: str) -> list:
    """Elements of a local name, whatever namespace (EPUB 2 and 3 spell them alike, some tools without one)."""
    return root.xpath(f"//*[local-name()='{name}']")


def _member_path(base: str, href: str) -> str:
    """A manifest href (relative to the OPF, URL-escaped, maybe with a fragment) as a member name."""
    path = unquote(urlsplit(href).path)
    return posixpath.normpath(posixpath.join(base, path)).lstrip("/")


def _read(package: zipfile.ZipFile, name: str) -> bytes:
    try:
        return package.read(name)
    except KeyError:
        raise UnreadableFile(f"a damaged EPUB book (it names {name[:80]!r}, which it does not hold)") from None


def _refuse_drm(package: zipfile.ZipFile, names: set[str], chapters: list[str]) -> None:
    if "META-INF/rights.xml" in names:  # Adobe ADEPT's licence: the chapters are encrypted to one reader
        raise UnreadableFile("an EPUB book protected by DRM (encrypted for one reader's device); "
                             "it cannot be read without the bookseller's key")
    if _ENCRYPTION not in names:
        return
    root = _xml(_read(package, _ENCRYPTION), "encryption list")
    wanted = set(chapters)
    for data in _local(root, "EncryptedData"):
        methods = {m.get("Algorithm", "") for m in data.xpath(".//*[local-name()='EncryptionMethod']")}
        for reference in data.xpath(".//*[local-name()='CipherReference']"):
            target = _member_path("", reference.get("URI", ""))
            if target in wanted or not methods <= _FONT_OBFUSCATION and not target.lower().endswith(
                    (".ttf", ".otf", ".woff", ".woff2")):
                raise UnreadableFile("an EPUB book protected by DRM (its chapters are encrypted); "
                                     "it cannot be read without the bookseller's key")


def _opf(package: zipfile.ZipFile) -> str:
    container = _xml(_read(package, CONTAINER), "container.xml")
    for rootfile in _local(container, "rootfile"):
        path = rootfile.get("full-path")
        media = rootfile.get("media-type", "application/oebps-package+xml")
        if path and media == "application/oebps-package+xml":
            return _member_path("", path)
    raise UnreadableFile("a damaged EPUB book (its container.xml names no package document)")


def _spine(opf, base: str) -> list[str]:
    """The member names of the spine's (X)HTML documents, in reading order."""
    manifest = {item.get("id"): item for item in _local(opf, "item") if item.get("id")}
    chapters: list[str] = []
    for itemref in _local(opf, "itemref"):
        item = manifest.get(itemref.get("idref"))
        if item is None or not item.get("href") or item.get("media-type", "") not in _CHAPTER_TYPES:
            continue  # an image page or a spine entry naming nothing: no text to read
        if len(chapters) >= MAX_CHAPTERS:
            raise too_complex("chapters", f"more than {MAX_CHAPTERS}")
        chapters.append(_member_path(base, item.get("href")))
    return chapters


def _title(opf) -> str:
    for title in _local(opf, "title"):
        if title.getparent() is not None and etree.QName(title.getparent()).localname == "metadata":
            text = " ".join("".join(title.itertext()).split())
            if text:
                return text
    return ""


def _decode(data: bytes) -> str:
    declared = _XML_ENCODING.match(data)
    if declared:
        try:
            return data.decode(declared.group(1).decode("ascii"), errors="replace").lstrip("\ufeff")
        except LookupError:
            pass
    return decode_html(data)


def _blocks(data: bytes) -> tuple[list[str], str]:
    """A chapter's Markdown blocks, by the HTML parser's writer, and its <title>."""
    text = _XML_DECLARATION.sub("", _decode(data), count=1)
    if not text.strip():
        return [], ""
    try:
        root = lxml.html.document_fromstring(text)
    except (etree.LxmlError, ValueError):
        raise UnreadableFile("a damaged EPUB book (a chapter cannot be parsed)") from None
    title_node = root.find(".//title")
    chapter_title = " ".join(title_node.text_content().split()) if title_node is not None else ""
    for element in root.xpath("//*[@aria-hidden='true' or @hidden]"):
        if element.getparent() is not None:
            element.drop_tree()
    for header in root.iter("header"):  # a chapter's header holds its heading: kept, not dropped as a page's
        header.tag = "div"
    writer = MarkdownWriter()
    try:
        writer.walk(main_element(root))
    except RecursionError:
        raise UnreadableFile("an EPUB book with a chapter nested too deeply to read") from None
    return writer.blocks, chapter_title


def _chapter(data: bytes, book_title: str) -> str:
    """One chapter's Markdown: its headings moved under the book's title (its top one at level 2)."""
    found, chapter_title = _blocks(data)
    blocks, top = [], 7
    for block in found:
        heading = _HEADING.fullmatch(block)
        if heading and clean_heading(heading.group(2)).lower() == book_title.lower():
            chapter_title = ""  # a title page: its text stays under the book's title
            continue
        if heading:
            top = min(top, len(heading.group(1)))
        blocks.append(block)
    if not any(block.strip() for block in blocks):
        return ""
    if top == 7:  # no heading of its own: its <title> names it
        return "\n\n".join([f"## {escape_text(chapter_title)}", *blocks] if chapter_title else blocks)
    return "\n\n".join(_moved(block, 2 - top) for block in blocks)


def _moved(block: str, shift: int) -> str:
    heading = _HEADING.fullmatch(block)
    if not heading or not shift:
        return block
    level = max(2, min(6, len(heading.group(1)) + shift))
    return f"{'#' * level} {heading.group(2)}"


def parse_epub(data: bytes, fallback_title: str) -> ParsedDocument:
    names = set(check_package(data, _spec()))
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as package:
            opf_name = _opf(package)
            opf = _xml(_read(package, opf_name), "package document")
            chapters = _spine(opf, posixpath.dirname(opf_name))
            _refuse_drm(package, names, chapters)
            title = _title(opf) or fallback_title
            parts: list[str] = []
            length = 0
            for name in chapters:
                text = _chapter(_read(package, name), title)
                length += len(text)
                if length > MAX_CHARACTERS:
                    raise too_complex("characters", f"more than {MAX_CHARACTERS} characters of text")
                if text:
                    parts.append(text)
    except (zipfile.BadZipFile, EOFError, NotImplementedError, OSError):
        raise UnreadableFile("a damaged or truncated EPUB book") from None
    if not parts:
        raise UnreadableFile("an EPUB book with no text in its chapters")
    return ParsedDocument(title=title, body=with_title(escape_text(title), "\n\n".join(parts)))
