"""The website connector against a real site on 127.0.0.1 (tests/support/site_server.py): the crawl,
main-content extraction in the parse workers, conditional re-syncs, and every bound and refusal.

The connector is tested directly (items() and fetch(), as the sync engine calls them: fetch for
new and changed versions only, from several threads); the end-to-end test through the engine and
the CLI is the lead's."""

from __future__ import annotations

import gzip
import json
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from rag.ingest.formats import supported_suffixes
from rag.ingest.read import parse_bytes
from rag.sources.base import FetchLimits, Fetched, Item, ItemFailed, NotModified, SourceUnavailable, SyncContext
from rag.sources.http import Bounds, FetchFailed, HttpFetcher
from rag.sources.website import Config, WebsiteConnector

from ..support.processes import rag_run as rag
from ..support.site_server import (BOILERPLATE, FOOTER, NAV_LABEL, OFFICE_FILES, Huge, Redirect, SiteServer, Slow,
                                   Status, build_site, page_path, sitemaps, tls_pair, uv_pages, wrap)

LIMITS = FetchLimits(max_bytes=2_000_000, timeout_seconds=1.0, total_seconds=4.0, attempts=3, backoff_seconds=0.05,
                     concurrency=4)
INSTALL = "/docs/concepts/cache.html"


@pytest.fixture()
def site():
    server = SiteServer(build_site()).start()
    try:
        yield server
    finally:
        server.stop()


def connector(site: SiteServer, previous: dict[str, Any] | None = None, limits: FetchLimits = LIMITS,
              workdir: Path | None = None, **settings: Any) -> WebsiteConnector:
    settings.setdefault("start_urls", [site.url("/docs/index.html")])
    context = SyncContext(source_name="docs", workspace="default", previous=previous or {}, limits=limits,
                          allow_hosts=("127.0.0.1",), workdir=workdir)
    return WebsiteConnector(Config(**settings), context)


def sync(conn: WebsiteConnector, stored: dict[str, str]) -> tuple[list[Item], dict[str, Any], dict[str, str]]:
    """What the engine does: list, then fetch what is new or changed from 4 threads. Returns the
    items, each fetched item's outcome (a Fetched, or the exception) and the versions now stored."""
    items = list(conn.items())
    wanted = [i for i in items if not i.skip and not i.failed and stored.get(i.id) != i.version]
    previous = conn.context.previous

    def one(item: Item) -> Any:
        try:
            return conn.fetch(item, previous.get(item.id))
        except (NotModified, ItemFailed) as exc:
            return exc

    with ThreadPoolExecutor(4) as pool:
        outcomes = dict(zip((i.id for i in wanted), pool.map(one, wanted)))
    outcomes.update({i.id: ItemFailed(i.failed) for i in items if i.failed})  # reported, never fetched
    versions = dict(stored)
    for item in wanted:
        if isinstance(outcomes[item.id], Fetched):
            versions[item.id] = outcomes[item.id].version or item.version
    return items, outcomes, versions


def states(outcomes: dict[str, Any], before: dict[str, Any] | None = None) -> dict[str, Any]:
    kept = dict(before or {})
    kept.update({k: v.state for k, v in outcomes.items() if isinstance(v, Fetched)})
    return kept


def test_the_first_listing_finds_the_pages_and_files_inside_the_prefix(site: SiteServer) -> None:
    with connector(site) as conn:
        items = {i.id: i for i in conn.items()}
    pages = [page_path(p) for p in uv_pages()]
    assert set(pages) <= set(items)
    assert {f"/docs/{name}" for name in OFFICE_FILES} <= set(items)
    assert "/blog/post.html" not in items  # outside the prefix (the start URL's directory)
    assert "/docs/private/secret.html" not in items and not site.asked("/docs/private/secret.html")  # robots.txt
    cache = items[INSTALL]
    assert cache.url == site.url(INSTALL) and cache.title is None  # the parser's: trafilatura's reading
    assert cache.path == ("docs", "concepts") and cache.label == site.base[len("http://"):] + INSTALL
    assert cache.filename == "cache.webpage" and cache.version.startswith("sha256:")
    assert items["/docs/files/soo.docx"].filename == "soo.docx"
    assert items["/docs/files/google-doc-example.pdf"].filename == "google-doc-example.pdf"
    # code is read (rag/ingest/formats/code.py), so the link is followed: the server has no such file
    assert "/docs/files/setup.sh" not in items and site.asked("/docs/files/setup.sh")
    assert items["/docs/files/logo.png"].skip and not site.asked("/docs/files/logo.png")  # not downloaded
    assert all(len(site.asked(p)) == 1 for p in pages)  # one request per page in a sync


def test_only_the_main_content_is_parsed_in_the_workers(site: SiteServer) -> None:
    with connector(site) as conn:
        items, outcomes, _ = sync(conn, {})
    assert not [k for k, v in outcomes.items() if not isinstance(v, Fetched)]
    fetched = outcomes[INSTALL]
    assert len(site.asked(INSTALL)) == 1  # the listing's body, not a second request
    parsed = parse_bytes(fetched.data, fetched.filename, "fallback")
    assert parsed.title == "Caching" and parsed.metadata.get("extracted_by") == "trafilatura"
    assert "## Dependency caching" in parsed.body  # headings kept
    for boilerplate in (BOILERPLATE, FOOTER, NAV_LABEL, "Configuring projects"):
        assert boilerplate not in parsed.body
    for name in OFFICE_FILES:
        document = outcomes[f"/docs/{name}"]
        assert parse_bytes(document.data, document.filename, name).body.strip()
    hiring = outcomes["/docs/files/hiring.html"]  # content straight in <body>: trafilatura loses its sections
    assert "## Competitive Service" in parse_bytes(hiring.data, hiring.filename, "hiring").body


def test_a_page_that_trafilatura_finds_nothing_in_falls_back_to_the_html_parser() -> None:
    parsed = parse_bytes(b"<html><head><title>T</title></head><body><table><tr><td>a</td><td>b</td></tr>"
                         b"</table></body></html>", "t.webpage", "fallback")
    assert parsed.title == "T" and "| a | b |" in parsed.body
    hostile = wrap("Hostile", "<p>" + "Text about &lt;img src=x onerror=alert(1)&gt; and [x](javascript:alert(1)) "
                   "in a paragraph long enough to be the main content of this page. " * 3 + "</p>", [])
    body = parse_bytes(hostile, "h.webpage", "fallback").body
    assert "<img" not in body and "&lt;img" in body  # the page's text stays text (markdown.py's escaping)
    assert "[x](javascript" not in body and "&#91;x](javascript" in body


def test_a_resync_asks_conditionally_and_fetches_only_the_changed_page(site: SiteServer, tmp_path: Path) -> None:
    with connector(site, workdir=tmp_path) as conn:
        _, first, stored = sync(conn, {})
    kept = states(first)  # what the engine keeps per item (the links are in the workdir's record)
    assert all("links" not in state for state in kept.values())
    changed = "/docs/concepts/index.html"
    site.set_page(changed, wrap("Concepts", "<p>A rewritten overview of the concepts.</p>", []))
    site.clear()
    start = time.monotonic()
    with connector(site, previous=kept, workdir=tmp_path) as conn:
        items, outcomes, _ = sync(conn, stored)
        unchanged = next(i for i in items if i.id == INSTALL)
        assert unchanged.version == stored[INSTALL]
        with pytest.raises(NotModified):  # the engine asking anyway: a real 304
            conn.fetch(unchanged, kept[INSTALL])
    assert time.monotonic() - start < 10
    assert list(outcomes) == [changed]
    assert b"rewritten overview" in outcomes[changed].data and outcomes[changed].version != stored[changed]
    pages = [r for r in site.requests if r.path.startswith("/docs/") and r.status in (200, 304)]
    assert {r.path for r in pages if r.status == 200} == {changed}  # every other page answered 304
    assert all("if-none-match" in r.headers for r in pages)
    assert len({i.id for i in items}) == len(items)
    site.clear()
    with connector(site, previous=kept) as conn:  # the engine's states alone: a 304 has no links to follow
        assert {i.id for i in conn.items()} == {i.id for i in items}
    assert {r.status for r in site.requests if r.path == INSTALL} == {304, 200}  # asked again for its links


def test_without_the_engines_states_the_workdir_keeps_a_resync_conditional(site: SiteServer, tmp_path: Path) -> None:
    with connector(site, workdir=tmp_path) as conn:
        _, _, stored = sync(conn, {})
    site.clear()
    with connector(site, workdir=tmp_path) as conn:  # no `previous`: what the last listing saw
        items, outcomes, _ = sync(conn, stored)
    assert not outcomes and len(items) > 20
    pages = [r for r in site.requests if r.path.startswith("/docs/") and r.status in (200, 304)]
    assert pages and all(r.status == 304 for r in pages)
    (tmp_path / "website-listing.json").write_text("{not json")  # a damaged record: asked unconditionally
    site.clear()
    with connector(site, workdir=tmp_path) as conn:
        _, outcomes, _ = sync(conn, stored)
    pages = [r for r in site.requests if r.path.startswith("/docs/") and r.status in (200, 304)]
    assert not outcomes and pages and all(r.status == 200 for r in pages)


def test_a_redirect_inside_the_prefix_is_the_page_and_fetch_refetches_past_the_cap(
        site: SiteServer, monkeypatch: pytest.MonkeyPatch) -> None:
    import rag.sources.website as website

    monkeypatch.setattr(website, "_KEEP_BYTES", 0)  # nothing kept: every fetch asks again
    index = site.site["/docs/index.html"]
    site.set_page("/docs/index.html", index.body.replace(b"</article>", b'<a href="/docs/old-cache.html">old</a></article>'))
    site.behaviours["/docs/old-cache.html"] = Redirect("/docs/concepts/cache.html", 301)
    with connector(site) as conn:
        items = list(conn.items())
        listed = len(site.asked(INSTALL))
        fetched = conn.fetch(next(i for i in items if i.id == INSTALL), None)
    assert "/docs/old-cache.html" not in {i.id for i in items} and [i.id for i in items].count(INSTALL) == 1
    assert fetched.url == site.url(INSTALL) and b"Dependency caching" in fetched.data
    assert len(site.asked(INSTALL)) == listed + 1  # nothing kept from the listing: the fetch asked again


def test_a_500_is_retried_then_fails_with_its_reason_and_the_others_go_on(site: SiteServer) -> None:
    site.behaviours["/docs/concepts/cache.html"] = Status(500)
    with connector(site) as conn:
        items, outcomes, _ = sync(conn, {})
    failed = outcomes[INSTALL]
    assert isinstance(failed, ItemFailed) and "500" in str(failed) and "Traceback" not in str(failed)
    assert len(site.asked(INSTALL)) == LIMITS.attempts  # retried in the listing, not again in fetch
    with connector(site) as conn:
        listed = next(i for i in conn.items() if i.id == INSTALL)
        with pytest.raises(ItemFailed, match="500"):  # an engine that asks anyway hears the same reason
            conn.fetch(listed, None)
    assert sum(isinstance(v, Fetched) for v in outcomes.values()) == len(items) - 1 - sum(bool(i.skip) for i in items)


def test_a_404_is_not_retried_and_drops_the_page(site: SiteServer) -> None:
    site.behaviours[INSTALL] = Status(404)
    with connector(site) as conn:
        ids = {i.id for i in conn.items()}
    assert INSTALL not in ids and len(site.asked(INSTALL)) == 1


def test_a_slow_response_fails_within_the_bound(site: SiteServer) -> None:
    site.behaviours[INSTALL] = Slow(30)
    limits = FetchLimits(max_bytes=2_000_000, timeout_seconds=0.3, total_seconds=1.0, attempts=3, backoff_seconds=0.05)
    start = time.monotonic()
    with connector(site, limits=limits) as conn:
        _, outcomes, _ = sync(conn, {})
    elapsed = time.monotonic() - start
    assert isinstance(outcomes[INSTALL], ItemFailed) and "seconds" in str(outcomes[INSTALL])
    assert elapsed < limits.total_seconds + 3  # the listing waited for it once, within its bound


def test_an_oversized_body_is_refused_without_reading_it_all(site: SiteServer) -> None:
    site.behaviours[INSTALL] = Huge(200_000_000)
    with connector(site) as conn:
        _, outcomes, _ = sync(conn, {})
    assert isinstance(outcomes[INSTALL], ItemFailed) and "larger than this source reads" in str(outcomes[INSTALL])
    assert site.huge_sent < 40_000_000  # the client stopped reading near max_bytes (plus socket buffers)
    site.behaviours.clear()
    site.set_page(INSTALL, b"<p>" + b"y" * 3_000_000 + b"</p>")  # a declared Content-Length past the bound
    with connector(site) as conn:
        listed = next(i for i in conn.items() if i.id == INSTALL)
    assert listed.failed and "3000007 bytes" in listed.failed


@pytest.mark.parametrize("target", ["http://10.0.0.1/", "http://169.254.169.254/latest/meta-data/",
                                    "http://localhost:{port}/docs/index.html", "http://[::1]:{port}/docs/index.html"])
def test_a_redirect_to_a_private_address_is_refused(site: SiteServer, target: str) -> None:
    port = site.base.rsplit(":", 1)[1]
    site.behaviours[INSTALL] = Redirect(target.format(port=port))
    with connector(site) as conn:
        _, outcomes, _ = sync(conn, {})
    assert isinstance(outcomes[INSTALL], ItemFailed) and "refused" in str(outcomes[INSTALL])
    assert sum(isinstance(v, Fetched) for v in outcomes.values()) > 20


def test_a_start_url_that_cannot_be_read_makes_the_source_unavailable(site: SiteServer) -> None:
    site.behaviours["/docs/index.html"] = Redirect("http://169.254.169.254/")
    with connector(site) as conn, pytest.raises(SourceUnavailable, match="refused"):
        list(conn.items())
    site.behaviours["/docs/index.html"] = Status(503)
    with connector(site) as conn, pytest.raises(SourceUnavailable, match="503") as raised:
        list(conn.items())
    assert raised.value.transient


def test_a_public_host_is_refused_unless_allowed(site: SiteServer) -> None:
    context = SyncContext(source_name="docs", workspace="default", limits=LIMITS)  # 127.0.0.1 not allowed
    with WebsiteConnector(Config(start_urls=[site.url("/docs/index.html")]), context) as conn:
        with pytest.raises(SourceUnavailable, match="refused"):
            list(conn.items())
    own = Config(start_urls=[site.url("/docs/index.html")], allow_hosts=["127.0.0.1"])
    with WebsiteConnector(own, context) as conn:  # the source's own list never widens the operator's
        with pytest.raises(SourceUnavailable, match="refused"):
            list(conn.items())
    operator = SyncContext(source_name="docs", workspace="default", limits=LIMITS, allow_hosts=("127.0.0.1",))
    with WebsiteConnector(own, operator) as conn:
        assert len(list(conn.items())) > 20
    assert not site.asked("/etc/passwd")


BOUNDS = Bounds(max_bytes=2_000_000, timeout_seconds=2.0, total_seconds=5.0, attempts=2, backoff_seconds=0.05)


def test_https_verifies_the_name_while_connecting_to_the_checked_address() -> None:
    """"localhost" is resolved and checked (allowed by name here), the connection goes to its
    address, and the certificate is still verified for the name (SNI), as for any public host."""
    server_tls, client_tls = tls_pair("localhost")
    with SiteServer(build_site(), tls=server_tls, host="localhost") as site:
        trusting = HttpFetcher(BOUNDS, ("localhost",), "rag-sync/0.1", verify=client_tls)
        try:
            answer = trusting.get(site.url("/docs/index.html"))
        finally:
            trusting.close()
        assert answer.status == 200 and answer.body and b"Example Docs" in answer.body
        assert site.asked("/docs/index.html")[0].headers["host"] == site.base.removeprefix("https://")
        default = HttpFetcher(BOUNDS, ("localhost",), "rag-sync/0.1")  # certifi's roots: the test CA is unknown
        try:
            with pytest.raises(FetchFailed, match="certificate") as raised:
                default.get(site.url("/docs/index.html"))
        finally:
            default.close()
        assert not raised.value.transient
    server_tls, client_tls = tls_pair("docs.example.org")  # a valid certificate, for another name
    with SiteServer(build_site(), tls=server_tls, host="localhost") as site:
        fetcher = HttpFetcher(BOUNDS, ("localhost",), "rag-sync/0.1", verify=client_tls)
        try:
            with pytest.raises(FetchFailed, match="certificate"):
                fetcher.get(site.url("/docs/index.html"))
        finally:
            fetcher.close()
        assert not site.asked("/docs/index.html")


def test_robots_txt_disallow_is_honoured(site: SiteServer) -> None:
    site.set_page("/robots.txt", b"User-agent: rag-sync\nDisallow: /docs/concepts/projects/\n", "text/plain")
    with connector(site) as conn:
        ids = {i.id for i in conn.items()}
    assert not [i for i in ids if i.startswith("/docs/concepts/projects/")]
    assert not [r for r in site.requests if r.path.startswith("/docs/concepts/projects/")]
    assert INSTALL in ids


def test_the_prefix_the_depth_and_max_pages_are_honoured(site: SiteServer) -> None:
    with connector(site, start_urls=[site.url("/docs/concepts/projects/index.html")]) as conn:
        ids = {i.id for i in conn.items()}
    assert ids and all(i.startswith("/docs/concepts/projects/") for i in ids)
    with connector(site, prefix=site.url("/docs/concepts/")) as conn:  # the start URL is outside it
        with pytest.raises(SourceUnavailable, match="outside the prefix"):
            list(conn.items())
    site.clear()
    with connector(site, max_pages=5) as conn:
        assert len(list(conn.items())) == 5
    assert len([r for r in site.requests if r.path != "/robots.txt"]) <= 5
    with connector(site, max_depth=0) as conn:
        assert [i.id for i in conn.items()] == ["/docs/index.html"]
    with connector(site, include_files=False) as conn:
        assert not [i for i in conn.items() if i.id.startswith("/docs/files/") and not i.id.endswith(".html")]


def test_a_sitemap_index_lists_its_pages(site: SiteServer) -> None:
    paths = [page_path(p) for p in uv_pages()[:6]] + ["/blog/post.html", "/docs/private/secret.html"]
    sitemaps(site.site, site.base, paths)
    with connector(site, start_urls=[], sitemap=site.url("/sitemap.xml"), max_depth=0) as conn:
        ids = {i.id for i in conn.items()}
    assert ids == set(paths) - {"/docs/private/secret.html"}  # the site root is the prefix; robots.txt still holds
    site.set_page("/sitemap.xml.gz", gzip.compress(site.site["/sitemap-docs.xml"].body), "application/gzip")
    with connector(site, start_urls=[], sitemap=site.url("/sitemap.xml.gz"), max_depth=0, max_pages=3) as conn:
        assert len(list(conn.items())) == 3  # a gzipped sitemap, and max_pages counts its URLs
    with connector(site, start_urls=[], sitemap=site.url("/missing-sitemap.xml")) as conn:
        with pytest.raises(SourceUnavailable, match="404"):
            list(conn.items())


def test_settings_are_checked() -> None:
    for bad in ({}, {"start_urls": ["ftp://example.org/"]}, {"start_urls": ["https://user:pw@example.org/"]},
                {"sitemap": "file:///etc/passwd"}, {"start_urls": ["https://example.org/"], "max_pages": 0},
                {"start_urls": ["https://example.org/"], "user_agent": "a\r\nX-Injected: 1"},
                {"start_urls": ["https://example.org/"], "typo": 1}):
        with pytest.raises(ValidationError):
            Config(**bad)


def test_a_folder_walk_does_not_read_webpage_files() -> None:
    assert ".webpage" not in supported_suffixes() and ".html" in supported_suffixes()


def test_rag_source_sync_of_a_website_then_a_search_cites_the_page(site: SiteServer, tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """End to end through the CLI and the sync engine, into a fresh RAG_HOME: one directory of the
    site (7 pages; the whole site, files included, is the tests above), synced twice, then searched."""
    home = tmp_path / "home"
    monkeypatch.setenv("RAG_SOURCES__ALLOW_HOSTS", "127.0.0.1")  # as an operator allows the site's host
    start = json.dumps([site.url("/docs/concepts/projects/index.html")])
    added = rag(home, "source", "add", "docs", "--kind", "website", "-o", f"start_urls={start}", "--kb", "web")
    assert added.returncode == 0, added.stderr
    first = rag(home, "source", "sync", "docs", "--json")
    assert first.returncode == 0, first.stderr + first.stdout
    report = json.loads(first.stdout)
    assert report["outcome"] == "ok" and report["added"] == 7 and report["failed"] == 0, report
    site.clear()
    again = rag(home, "source", "sync", "docs", "--json")
    assert again.returncode == 0, again.stderr
    second = json.loads(again.stdout)
    assert second["added"] == 0 and second["updated"] == 0 and second["chunks"] == 0 and second["unchanged"] == 7
    assert all(r.status == 304 for r in site.requests if r.path.startswith("/docs/") and r.status in (200, 304))
    found = rag(home, "search", "How do I export a lockfile to requirements.txt?", "--kb", "web", "--limit", "3",
                "--json")
    assert found.returncode == 0, found.stderr
    results = json.loads(found.stdout)["results"]
    export = "/docs/concepts/projects/export.html"
    assert results[0]["url"] == site.url(export)
    assert results[0]["source_id"].startswith("web:") and results[0]["source_id"].endswith(":" + export)
    assert results[0]["source"] == "web:" + site.base.removeprefix("http://") + export
    assert BOILERPLATE not in json.dumps(results)
