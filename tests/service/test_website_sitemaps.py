"""Hostile sitemaps against the website connector (issue 49): a sitemap of hundreds of thousands of
URLs and a sitemap index that names thousands of sitemaps, served on 127.0.0.1, listed by the real
connector. A sitemap is read in a parse worker as a stream, at most MAX_SITEMAP_LOCS URLs of it, so
the listing's process (here: the test's, as in `rag serve`) holds the sitemap's bytes and a bounded
list, never its tree; nested sitemaps stop at `_MAX_SITEMAPS`; each cut is in the sync's warnings."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rag.ingest.read import parse_bytes
from rag.sources.base import FetchLimits

from ..support.memory import Growth
from ..support.processes import rag_run as rag
from ..support.site_server import Resource, SiteServer, build_site
from .test_source_website import connector

URLS = 380_000  # a 22 MiB sitemap: at 6dc22a4 reading it grew the listing's process by 317 MiB (now 92 MiB)
NESTED = 10_000  # sitemaps the flooding index names
XML = "application/xml"


def urlset(base: str, paths) -> bytes:
    urls = "".join(f"<url><loc>{base}{p}</loc></url>" for p in paths)
    return (f'<?xml version="1.0" encoding="UTF-8"?><urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">'
            f"{urls}</urlset>").encode()


def sitemapindex(base: str, paths) -> bytes:
    maps = "".join(f"<sitemap><loc>{base}{p}</loc></sitemap>" for p in paths)
    return (f'<?xml version="1.0" encoding="UTF-8"?><sitemapindex xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">'
            f"{maps}</sitemapindex>").encode()


@pytest.fixture(scope="module")
def flood_site():
    server = SiteServer(build_site(2)).start()
    base = server.base
    server.site["/flood.xml"] = Resource(urlset(base, (f"/docs/p{n}.html" for n in range(URLS))), XML)
    # An index naming NESTED sitemaps, each of the first hundred itself an index naming a hundred more.
    server.site["/index.xml"] = Resource(sitemapindex(base, (f"/sm/{n}.xml" for n in range(NESTED))), XML)
    for n in range(100):
        server.site[f"/sm/{n}.xml"] = Resource(sitemapindex(base, (f"/sm/{n}-{k}.xml" for k in range(100))), XML)
    try:
        yield server
    finally:
        server.stop()


LIMITS = FetchLimits(max_bytes=32_000_000, timeout_seconds=30.0, total_seconds=120.0, attempts=1,
                     backoff_seconds=0.05, concurrency=2)


def test_a_sitemap_flood_is_cut_in_the_worker_and_the_listing_stays_small(flood_site: SiteServer) -> None:
    size = len(flood_site.site["/flood.xml"].body)
    assert size > 20 << 20
    parse_bytes(b"<p>warm</p>", "warm.html")  # the workers started, lxml loaded: outside the measure
    with connector(flood_site, limits=LIMITS, start_urls=[], sitemap=flood_site.url("/flood.xml"),
                   max_pages=3, max_depth=0) as conn:
        with Growth() as growth:
            urls = conn._sitemap_urls()
        grew = growth.bytes
        warnings = conn.listing_warnings()
    # The sitemap is held as bytes (read in chunks and joined, pickled to a worker): about three
    # copies of it, and 50,000 URLs back, never the tree of its 760,000 elements (317 MiB at 6dc22a4).
    assert grew < 3 * size + (48 << 20), f"the listing grew {grew >> 20} MiB for a {size >> 20} MiB sitemap"
    assert urls == [flood_site.url(f"/docs/p{n}.html") for n in range(3)]  # max_pages of them
    assert warnings == [(flood_site.url("/flood.xml"), "sitemap cut: only its first 50,000 URLs were read")]


def test_a_sitemap_index_flood_reads_at_most_50_sitemaps(flood_site: SiteServer) -> None:
    flood_site.clear()
    with connector(flood_site, limits=LIMITS, start_urls=[], sitemap=flood_site.url("/index.xml"),
                   max_pages=10, max_depth=0) as conn:
        assert conn._sitemap_urls() == []  # indexes all the way down: no page
        warnings = conn.listing_warnings()
    asked = [r.path for r in flood_site.requests if r.path.endswith(".xml")]
    assert len(asked) == 50 and asked[0] == "/index.xml"  # the index and the first 49 it names
    assert asked[1:] == [f"/sm/{n}.xml" for n in range(49)]
    assert warnings == [(flood_site.url("/index.xml"),
                         f"sitemaps cut: {NESTED - 49 + 49 * 100:,} nested sitemaps were not read "
                         "(at most 50 a listing)")]


def test_the_sync_report_says_the_sitemaps_were_cut(flood_site: SiteServer, tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    home = tmp_path / "home"
    monkeypatch.setenv("RAG_SOURCES__ALLOW_HOSTS", "127.0.0.1")  # as an operator allows the site's host
    config = ["-o", f"start_urls={json.dumps([flood_site.url('/docs/index.html')])}", "-o", "max_pages=3",
              "-o", "max_depth=0", "-o", f"sitemap={flood_site.url('/index.xml')}"]
    added = rag(home, "source", "add", "flood", "--kind", "website", *config, "--kb", "web")
    assert added.returncode == 0, added.stderr
    synced = rag(home, "source", "sync", "flood")  # the text report names each warning
    assert synced.returncode == 0 and "added=1 " in synced.stdout, synced.stdout + synced.stderr
    assert (f"{flood_site.url('/index.xml')}: sitemaps cut: 14,851 nested sitemaps were not read"
            in " ".join(synced.stderr.split())), synced.stderr
