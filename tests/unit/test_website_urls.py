"""How the website connector names a page: one normalised URL per page, a stable item id, the
site's directories as folders (rag/sources/website.py). No network: nothing here is fetched."""

from __future__ import annotations

import pytest

from rag.sources.base import SyncContext
from rag.sources.website import Config, WebsiteConnector, normalize


@pytest.mark.parametrize(("url", "normal"), [
    ("HTTP://Docs.Example.ORG:80/guide/install#step-2", "http://docs.example.org/guide/install"),
    ("https://docs.example.org:443", "https://docs.example.org/"),
    ("https://docs.example.org:8443/a?b=1#c", "https://docs.example.org:8443/a?b=1"),
    ("http://[::1]:8080/x", "http://[::1]:8080/x"),
    ("mailto:someone@example.org", None),
    ("javascript:alert(1)", None),
    ("https://user:pw@docs.example.org/", None),
    ("http://docs.example.org:99999/", None),
    ("/relative/only", None),
])
def test_one_page_is_one_url(url: str, normal: str | None) -> None:
    assert normalize(url) == normal


def test_ids_folders_and_labels_follow_the_site() -> None:
    config = Config(start_urls=["https://docs.example.org/guide/index.html"])
    conn = WebsiteConnector(config, SyncContext(source_name="docs", workspace="default"))
    try:
        assert conn.prefixes == ["https://docs.example.org/guide/"]
        assert conn.item_id("https://docs.example.org/guide/install/linux.html") == "/guide/install/linux.html"
        assert conn.item_id("https://docs.example.org/search?q=a") == "/search?q=a"
        assert conn.item_id("https://cdn.example.org/guide/a.pdf") == "//cdn.example.org/guide/a.pdf"
        names = conn._names("https://docs.example.org/guide/install/")
        assert names["path"] == ("guide", "install") and names["label"] == "docs.example.org/guide/install"
        assert conn._filename("https://docs.example.org/guide/Getting%20Started.html", ".webpage") == \
            "Getting_Started.webpage"
        assert conn._filename("https://docs.example.org/guide/", ".webpage") == "index.webpage"
    finally:
        conn.close()


def test_the_sitemaps_site_root_is_the_default_prefix() -> None:
    config = Config(sitemap="https://docs.example.org/sitemaps/main.xml", max_pages=10)
    conn = WebsiteConnector(config, SyncContext(source_name="docs", workspace="default"))
    assert conn.prefixes == ["https://docs.example.org/"]
    conn.close()
