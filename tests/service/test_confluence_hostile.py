"""A hostile page in a Confluence export (issue 49): 12 MiB of links in a page's main content, in a
copy of the fixture export (tests/data/confluence_export), listed and fetched by the real
connector. A page's file is read in the parse workers (rag/ingest/formats/confluence.py), so the
listing's process (here: the test's, as in `rag serve`) holds the page's bytes and bounded lists,
never its tree; its link targets are cut at MAX_REFERENCES."""

from __future__ import annotations

import shutil
from pathlib import Path

from rag.ingest.formats.confluence import MAX_REFERENCES
from rag.ingest.read import parse_bytes
from rag.sources.base import FetchLimits, Item, SyncContext
from rag.sources.confluence import ConfluenceExport

from ..support.exports import CONFLUENCE
from ..support.memory import Growth

LINKS = 300_000  # 12.6 MiB of `<div><a href="Page_N.html">x</a></div>`, no page of the export
FLOOD = "10099"
WIKI = "https://wiki.example.org/wiki"


def flood_page(count: int = LINKS) -> bytes:
    links = "".join(f'<div><a href="Page_{n + 1_000_000}.html">x</a></div>' for n in range(count))
    return ('<html><head><title>18F Handbook : Flood</title></head><body><div id="breadcrumb-section"><ol>'
            '<li><a href="index.html">18F Handbook</a></li><li><a href="Handbook_10001.html">Handbook</a></li>'
            '</ol></div><div id="main-content"><p>A page of links: <a href="Getting-Started_10002.html">start</a>'
            f"</p>{links}</div></body></html>").encode()


def nested_page(depth: int = 2_000_000) -> bytes:
    return ('<html><head><title>18F Handbook : Deep</title></head><body><div id="main-content">'
            f"{'<div>' * depth}deep{'</div>' * depth}</div></body></html>").encode()


def list_and_fetch(tmp_path: Path, page: bytes) -> tuple[dict[str, Item], bytes, tuple[str, ...], int]:
    """The export's items with `page` added as page FLOOD, its rendering, its link targets, and how
    much this process grew (its VmHWM) while listing and fetching."""
    export = tmp_path / "export"
    shutil.copytree(CONFLUENCE, export)
    space = next(index.parent for index in export.glob("*/index.html"))
    (space / f"Flood_{FLOOD}.html").write_bytes(page)
    parse_bytes(b"<p>warm</p>", "warm.html")  # the workers started, lxml loaded: outside the measure
    context = SyncContext("handbook", "default", limits=FetchLimits(max_bytes=32_000_000))
    with ConfluenceExport(ConfluenceExport.Config(path=str(export), base_url=WIKI), context) as source:
        with Growth() as growth:
            items = {item.id: item for item in source.items()}
            rendered = source.fetch(items[FLOOD], None).data
        return items, rendered, source._targets[FLOOD], growth.bytes


def test_a_page_of_links_is_read_in_the_workers_and_the_listing_stays_small(tmp_path: Path) -> None:
    page = flood_page()
    items, rendered, targets, grew = list_and_fetch(tmp_path, page)
    # The page is held as bytes (read, pickled to a worker, its rendering back as JSON, a string and
    # bytes): a few copies of it, never its tree of 600,000 elements. Listing and fetch grew this
    # process 57 MiB; 260 MiB at 6dc22a4, where the trees were built in it.
    assert grew < 3 * len(page) + (48 << 20), f"the listing grew {grew >> 20} MiB for a {len(page) >> 20} MiB page"
    flood = items[FLOOD]
    assert (flood.title, flood.path, flood.failed) == ("Flood", ("Handbook",), None)
    assert len(targets) == MAX_REFERENCES  # its link targets, cut
    assert f'<a href="{WIKI}/pages/viewpage.action?pageId=10002">start</a>' in rendered.decode()
    assert rendered.count(b"<a>x</a>") == LINKS  # links to no page of the export: their text only


def test_a_page_nested_two_million_deep_is_read_in_the_workers(tmp_path: Path) -> None:
    page = nested_page()  # 20 MiB
    items, rendered, targets, grew = list_and_fetch(tmp_path, page)
    assert grew < 3 * len(page) + (48 << 20), f"the listing grew {grew >> 20} MiB for a {len(page) >> 20} MiB page"
    assert (items[FLOOD].title, items[FLOOD].failed, targets) == ("18F Handbook : Deep", None, ())
    assert len(rendered) < 64 * 1024  # lxml keeps 256 levels (no huge trees): the rest is not the page's
