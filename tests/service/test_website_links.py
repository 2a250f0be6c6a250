"""A link flood against the website connector (issue 49, defect 5): a page of hundreds of thousands
of links, served on 127.0.0.1, crawled by the real connector. Its links are read in a parse worker,
at most MAX_LINKS of them, so the listing's process (here: the test's, as in `rag serve`) holds the
page and a bounded list, never a tree of the page; the cut is reported with the page."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rag.ingest.formats.webpage import MAX_LINKS
from rag.sources.base import FetchLimits
from rag.sources.website import _MAX_LINKS, _page_facts

from ..support.processes import rag_run as rag
from ..support.site_server import Resource, SiteServer, build_site
from .test_source_website import connector

FLOOD = "/docs/flood.html"
LINKS = 400_000  # 10.2 MiB of `<a href=/docs/pN>y</a>`: at 6dc22a4 the listing grew 165 MiB (5.9 s of CPU)


def flood_page(count: int = LINKS) -> bytes:
    anchors = "".join(f"<a href=/docs/p{n}>y</a>" for n in range(count))
    return f"<html><head><title>Links</title></head><body><p>A page of links.</p>{anchors}</body></html>".encode()


@pytest.fixture(scope="module")
def flood_site():
    site = build_site(2)
    site[FLOOD] = Resource(flood_page(), "text/html")
    server = SiteServer(site).start()
    try:
        yield server
    finally:
        server.stop()


def _status(field: str) -> int:
    """This process's VmRSS or VmHWM (its memory high-water mark), in KiB."""
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith(field + ":"))


def test_a_link_flood_is_cut_in_the_worker_and_the_listing_stays_small(flood_site: SiteServer) -> None:
    page = len(flood_site.site[FLOOD].body)
    limits = FetchLimits(max_bytes=32_000_000, timeout_seconds=30.0, total_seconds=120.0, attempts=1,
                         backoff_seconds=0.05, concurrency=2)
    with connector(flood_site, limits=limits, start_urls=[flood_site.url(FLOOD)], max_pages=3, max_depth=1) as conn:
        conn.items()  # the workers started, the code loaded: outside the measure
        try:  # the high-water mark from here on (Linux: writing 5 to clear_refs resets VmHWM)
            Path("/proc/self/clear_refs").write_text("5")
        except OSError:
            pass  # then the mark since the process began: it can only read higher, never lower
        before = _status("VmRSS")
        items = {item.id: item for item in conn.items()}
        grew = (_status("VmHWM") - before) * 1024
        kept = conn._kept.get(FLOOD)
        followed = conn._listed_states[FLOOD]["links"]
    # The page is held as bytes (read in chunks, kept for `fetch`, sent to a worker): about three
    # copies of it (31 MiB measured), never the tree of its 400,000 elements (165 MiB at 6dc22a4).
    assert grew < 3 * page + (32 << 20), f"the listing grew {grew >> 20} MiB for a {page >> 20} MiB page"
    assert FLOOD in items and kept is not None
    assert len(followed) == _MAX_LINKS  # the links followed: the connector's bound
    assert kept.warnings == [f"links cut: only its first {MAX_LINKS:,} links were read; "
                             f"{MAX_LINKS - _MAX_LINKS:,} more links inside the prefix were not followed "
                             f"(at most {_MAX_LINKS:,} a page)"]


def test_the_sync_report_says_the_links_were_cut(flood_site: SiteServer, tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    home = tmp_path / "home"
    monkeypatch.setenv("RAG_SOURCES__ALLOW_HOSTS", "127.0.0.1")  # as an operator allows the site's host
    config = ["-o", f"start_urls={json.dumps([flood_site.url(FLOOD)])}", "-o", "max_pages=3", "-o", "max_depth=1"]
    added = rag(home, "source", "add", "flood", "--kind", "website", *config, "--kb", "web")
    assert added.returncode == 0, added.stderr
    synced = rag(home, "source", "sync", "flood")  # the text report names each warning
    assert synced.returncode == 0 and "added=1 " in synced.stdout, synced.stdout + synced.stderr
    assert f"{FLOOD}: links cut: only its first {MAX_LINKS:,} links were read" in " ".join(synced.stderr.split())


def test_a_pages_links_base_and_robots_meta_are_read_as_before() -> None:
    page = (b'<html><head><meta name="ROBOTS" content="NoIndex"><base href="/docs/guide/">'
            b'<base href="/ignored/"></head><body><a href=" install.html ">a</a><a>no href</a>'
            b'<map><area href="../api.html#top"></map><a href="/docs/a\nb.html">x</a></body></html>')
    facts = _page_facts(page, "http://127.0.0.1:9/docs/index.html")
    assert facts.links == ["http://127.0.0.1:9/docs/guide/install.html", "http://127.0.0.1:9/docs/api.html#top",
                           "http://127.0.0.1:9/docs/ab.html"]
    assert facts.noindex and not facts.nofollow and facts.cut is None
    assert _page_facts(b'<meta name=robots content="none, nofollow"><a href=x>', "http://h/").nofollow
