"""Notion's "Markdown & CSV" export (kind "notion"): a zip, or the folder it unpacks to.

The layout, as Notion writes it (see tests/data/notion_export/README.md for the sources): every page
is a Markdown file named "<Title> <32-hex page id>.md" that starts with "# <Title>"; a page's
subpages and attachments lie in a folder of the same "<Title> <id>" name beside it; a database is
"<Name> <id>.csv" (newer exports add "<Name> <id>_all.csv", the whole table) with its row pages in
the folder "<Name> <id>/"; links between pages are relative, URL-encoded paths to the target's
file. A big export comes as parts, zips inside the download (rag/sources/exports.py reads them), and
newer exports wrap the tree in an "Export-<uuid>" folder, hold folders named by an id alone, and put
an index.html (a table of contents, not listed) at the top.

Each page's item id is its page id, which Notion keeps when a page is renamed or moved, so a newer
export of the same workspace updates the same documents in place. Its title is the file name's
without the id; its path is the titles of the pages above it (folders with no id, such as a
wrapping "Export-…" or "Private & Shared" folder, are no page and are left out), and its label
reads "Parent/Page" ("notion:Getting Started/VPN Setup"). Its version is the hash of what `fetch`
returns (the listing reads every page, bounded, to know it): a page moved without an edit keeps its
version, and so do the pages linking to it, whose relative links changed but point at the same
page; the engine moves the document. An attachment's version is the CRC-32 the zip keeps of it. Links to other pages (and databases) become links to those pages on Notion (`base_url`, by default
https://www.notion.so, then the id without dashes, which Notion redirects to the page); a link the
export cannot resolve (an attachment, a page left out of the export) is left as its text, since a
relative path means nothing to a reader. Attachments in a format the parsers read become items of
their own under their page's folder (id "<page id>/<file>"); CSV databases and other formats are
listed with the reason they are skipped.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import replace
from pathlib import PurePosixPath
from typing import ClassVar
from urllib.parse import unquote, urlsplit

from rag.sources.base import Item, ItemFailed, SourceConfig, SyncContext
from rag.sources.exports import (
    Export, ExportConfig, ExportConnector, Member, clean_title, folder_name, skip_reason, version_of,
)

_RENDERING = "notion-1"  # changes the versions when what `_render` makes of the bytes changes
_HEX = frozenset("0123456789abcdefABCDEF")
_SUFFIX = re.compile(r"\.[A-Za-z0-9]{1,8}")
# [text](target) and ![alt](target), the target bare or in <...>, an optional "title". No run may
# hold the bracket that opens another link, and every run is bounded: without that, a page of
# unclosed brackets takes quadratic time (16,000 "[a](" took 45 s), and a page is untrusted input.
# (Notion writes brackets inside link text and targets escaped or percent-encoded.)
_LINK = re.compile(r'(!?)\[([^\[\]\n]{0,2000})\]\(\s{0,20}(<[^<>\n]{0,4000}>|[^()\[\]\s<]{1,4000})'
                   r'(?:\s{1,20}"[^"\n]{0,2000}")?\s{0,20}\)')
_EXTERNAL = re.compile(r"^(?:[A-Za-z][A-Za-z0-9+.-]*:|#)")


class NotionConfig(ExportConfig):
    base_url: str | None = "https://www.notion.so"


def _named(part: str) -> tuple[str, str, str, bool] | None:
    r"""(title, id, suffix, whole table) of a name Notion gave an id, else None: "<Title> <id>" with
    an optional "_all" (a database's whole table) and suffix (a dot and 1 to 8 letters or digits);
    Notion puts one space before the id, an untitled page has none before it. One pass from the
    end, as the expression `^(.*?)\s*([0-9a-fA-F]{32})(_all)?(\.[A-Za-z0-9]{1,8})?$` reads it: that
    expression, a name of blanks (a folder's name is untrusted), took time growing with the square
    of its length (16,000 spaces: 2 s, each time the name is read)."""
    body = part[:-1] if part.endswith("\n") else part  # `$` matched before a final newline too
    dot = body.rfind(".")
    ends = [dot] if dot >= 0 and _SUFFIX.fullmatch(body, dot) else []
    for end in [*ends, len(body)]:  # with the suffix first, then without: the earlier id wins
        whole = body.endswith("_all", 0, end)
        start = end - 32 - (4 if whole else 0)
        if start < 0 or not _HEX.issuperset(body[start:start + 32]):
            continue
        title_end = start
        while title_end > 0 and body[title_end - 1].isspace():
            title_end -= 1
        if "\n" in body[:title_end]:
            return None
        title = clean_title(body[:title_end])  # "": a folder named by an id alone, or an untitled page
        return title, body[start:start + 32].lower(), body[end:].lower(), whole
    return None


def _ancestors(folders: tuple[str, ...]) -> list[tuple[str, str]]:
    """(id, title) of the pages a member lies under, outermost first."""
    found = []
    for folder in folders:
        named = _named(folder)
        if named is not None and not named[2] and named[0]:  # an id-only folder is no level of the tree
            found.append((named[1], folder_name(named[0])))
    return found


def _trail(folders: tuple[str, ...]) -> tuple[tuple[str, str] | None, tuple[str, ...]]:
    """The page a member belongs to (its innermost folder with an id) and the folders below it."""
    last = None
    for index, folder in enumerate(folders):
        named = _named(folder)
        if named is not None and not named[2]:
            last = index
    if last is None:
        return None, folders
    named = _named(folders[last])
    assert named is not None
    return (named[1], named[0]), folders[last + 1:]


class NotionExport(ExportConnector):
    kind: ClassVar[str] = "notion"
    provider: ClassVar[str] = "notion"
    Config: ClassVar[type[SourceConfig]] = NotionConfig

    def __init__(self, config: SourceConfig, context: SyncContext) -> None:
        super().__init__(config, context)
        self._urls: dict[str, str] = {}

    def page_url(self, page_id: str) -> str | None:
        base = self.settings.base_url
        return f"{base}/{page_id}" if base else None

    def _list(self, export: Export) -> list[Item]:
        pages: dict[str, Item] = {}
        files: list[Item] = []
        tables: dict[str, tuple[bool, Item]] = {}
        for member in export.members.values():
            named = _named(member.parts[-1])
            if named is not None and named[2] == ".md":
                pages.setdefault(named[1], self._page(member, named[0] or "Untitled", named[1]))
            elif named is not None and named[2] == ".csv":
                item = self._table(member, named[0], named[1])
                if item.id not in tables or named[3] and not tables[item.id][0]:  # the whole table wins
                    tables[item.id] = (named[3], item)
            elif not _table_of_contents(member):
                files.append(self._attachment(member))
        self._urls = {page.id: page.url for page in pages.values() if page.url}
        self._urls |= {table.id.removesuffix(".csv"): table.url for _, table in tables.values() if table.url}
        versioned = [self._versioned(export, page) for page in pages.values()]
        return sorted([*versioned, *(item for _, item in tables.values()), *files], key=lambda item: item.id)

    def _versioned(self, export: Export, page: Item) -> Item:
        """The page with the hash of what `fetch` will return as its version: a page whose links
        moved with their targets (a newer export after a move) reads the same and keeps it."""
        member = export.members[str(page.meta["member"])]
        try:
            rendered = self._rewritten(export.read(member))
        except ItemFailed as exc:
            return replace(page, failed=str(exc))
        salt = "\x1f".join((self.settings.base_url or "", _RENDERING))
        return replace(page, version=hashlib.sha256(rendered + salt.encode()).hexdigest()[:32])

    def _page(self, member: Member, title: str, page_id: str) -> Item:
        path = tuple(name for _, name in _ancestors(member.parts[:-1]))
        return Item(id=page_id, version=version_of(member, self.settings.base_url or "", _RENDERING),
                    filename=f"{page_id}.md", title=title, url=self.page_url(page_id), path=path,
                    label="/".join((*path, folder_name(title))), meta={"member": member.name, "page": True})

    def _table(self, member: Member, title: str, table_id: str) -> Item:
        path = tuple(name for _, name in _ancestors(member.parts[:-1]))
        return Item(id=f"{table_id}.csv", version=version_of(member), filename=f"{table_id}.csv", title=title,
                    url=self.page_url(table_id), path=path, label="/".join((*path, folder_name(title))),
                    skip=skip_reason(f"{table_id}.csv"), meta={"member": member.name})

    def _attachment(self, member: Member) -> Item:
        page, below = _trail(member.parts[:-1])
        path = tuple(name for _, name in _ancestors(member.parts[:-1])) + tuple(map(folder_name, below))
        name = member.parts[-1]
        item_id = f"{page[0]}/{'/'.join((*below, name))}" if page else member.name
        return Item(id=item_id, version=version_of(member), filename=name, title=clean_title(name) or name,
                    url=self.page_url(page[0]) if page else None, path=path, label="/".join((*path, folder_name(name))),
                    skip=skip_reason(name), meta={"member": member.name})

    def _render(self, item: Item, data: bytes) -> bytes:
        if not item.meta.get("page"):  # an attachment: its own bytes, for its own parser
            return data
        return self._rewritten(data)

    def _rewritten(self, data: bytes) -> bytes:
        try:
            text = data.decode("utf-8-sig")
        except UnicodeDecodeError:
            return data  # the Markdown parser says what is wrong with it
        return rewrite_links(text, self._urls).encode("utf-8")


def _table_of_contents(member: Member) -> bool:
    """The index.html Notion puts at an export's top (in no page's folder): no content of its own."""
    return member.parts[-1] == "index.html" and not _ancestors(member.parts[:-1])


def _target_id(target: str) -> str | None:
    """The page id a relative link points at: the id in its last part ("Title <id>.md", a
    database's "Name <id>.csv")."""
    path = unquote(urlsplit(target).path)
    named = _named(PurePosixPath(path).name) if path else None
    return named[1] if named is not None and named[2] in (".md", ".csv", "") else None


def rewrite_links(text: str, urls: dict[str, str]) -> str:
    """Links to pages of the export as links to those pages' URLs; other relative links (and
    images, which have no text to index) as their text; web links as they are."""

    def one(match: re.Match[str]) -> str:
        bang, words, target = match.group(1), match.group(2), match.group(3).strip("<>")
        if _EXTERNAL.match(target):
            return match.group(0)
        page = _target_id(target)
        if not bang and page in urls:
            return f"[{words}]({urls[page]})"
        return words

    return _LINK.sub(one, text)
