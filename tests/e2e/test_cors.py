"""CORS from RAG_ALLOWED_ORIGINS (rag/api/cors.py): a page in headless Chromium on a listed origin
calls /v1/search with its bearer token and reads the answer; the same page on an unlisted origin
cannot. The preflight's and the response's headers as a browser sees them, over a real socket."""

from __future__ import annotations

import functools
import http.server
import threading
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from rag.service import KnowledgeService
from rag.settings import Settings

from ..support.api_support import LiveServer
from ..support.browser import browser_or_skip

LISTED = "http://127.0.0.1:*"  # any port of 127.0.0.1; http://localhost:<port> is another origin, unlisted

PAGE = """<!doctype html><title>another app</title><body><script>
window.outcome = null;
fetch(API + "/v1/search", {method: "POST", headers: {"Authorization": "Bearer " + TOKEN,
                           "Content-Type": "application/json", "X-Request-ID": "page-1"},
                           body: JSON.stringify({query: "annual leave"})})
  .then(async r => { window.outcome = {status: r.status, id: r.headers.get("X-Request-ID"),
                                       results: (await r.json()).results.length}; })
  .catch(e => { window.outcome = {error: String(e)}; });
</script></body>"""


class Api:
    def __init__(self, url: str, token: str) -> None:
        self.url, self.token = url, token


@pytest.fixture(scope="module")
def api(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Api]:
    root = tmp_path_factory.mktemp("cors")
    with KnowledgeService(Settings(home=root / "home", allowed_origins=[LISTED])) as svc:
        svc.ensure_workspace("default")
        token, _ = svc.create_token("default", "viewer", [], "all")
        with LiveServer(svc) as server:
            yield Api(server.url, token)


def page_server(folder: Path, host: str) -> tuple[http.server.ThreadingHTTPServer, str]:
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(folder))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://{host}:{server.server_address[1]}"


def test_a_page_on_a_listed_origin_reads_the_answer_and_an_unlisted_one_cannot(api: Api, tmp_path: Path) -> None:
    (tmp_path / "index.html").write_text(
        PAGE.replace("API", repr(api.url), 1).replace("TOKEN", repr(api.token), 1), encoding="utf-8")
    driver = browser_or_skip()
    pages, url = page_server(tmp_path, "127.0.0.1")
    try:
        outcomes = {}
        for host in ("127.0.0.1", "localhost"):  # the same page server, reached as two origins
            driver.get(url.replace("127.0.0.1", host, 1) + "/index.html")
            outcomes[host] = _wait(driver)
    finally:
        driver.quit()
        pages.shutdown()
    assert outcomes["127.0.0.1"] == {"status": 200, "id": "page-1", "results": 0}
    assert outcomes["localhost"]["error"].startswith("TypeError")  # the browser refused it: "Failed to fetch"


def _wait(driver) -> dict:
    from selenium.webdriver.support.ui import WebDriverWait

    return WebDriverWait(driver, 60).until(lambda d: d.execute_script("return window.outcome"))


def test_a_preflight_from_a_listed_origin_is_answered_for_every_part_of_the_server(api: Api) -> None:
    origin = "http://127.0.0.1:5173"
    for path in ("/v1/search", "/mcp", "/v1/chat/completions"):
        response = httpx.options(f"{api.url}{path}", headers={
            "Origin": origin, "Access-Control-Request-Method": "POST",
            "Access-Control-Request-Headers": "authorization, content-type"})
        assert response.status_code == 204, path
        assert response.headers["access-control-allow-origin"] == origin
        assert "POST" in response.headers["access-control-allow-methods"]
        assert "Authorization" in response.headers["access-control-allow-headers"]
        assert "access-control-allow-credentials" not in response.headers  # never: a page sends its token
        assert response.headers["vary"] == "Origin"


def test_an_unlisted_origin_gets_no_cors_header_and_its_preflight_is_refused(api: Api) -> None:
    refused = httpx.options(f"{api.url}/v1/search", headers={
        "Origin": "https://evil.example", "Access-Control-Request-Method": "POST"})
    assert refused.status_code == 403 and refused.json()["error"]["code"] == "invalid_origin"
    assert not [name for name in refused.headers if name.startswith("access-control-")]
    search = httpx.post(f"{api.url}/v1/search", json={"query": "leave"}, headers={
        "Origin": "https://evil.example", "Authorization": f"Bearer {api.token}"})
    assert search.status_code == 200 and "access-control-allow-origin" not in search.headers
    listed = httpx.post(f"{api.url}/v1/search", json={"query": "leave"}, headers={
        "Origin": "http://127.0.0.1:3000", "Authorization": f"Bearer {api.token}"})
    assert listed.headers["access-control-allow-origin"] == "http://127.0.0.1:3000"
    assert "X-Request-ID" in listed.headers["access-control-expose-headers"]


def test_an_error_carries_the_cors_headers_so_the_page_can_read_it(api: Api) -> None:
    response = httpx.post(f"{api.url}/v1/search", json={"query": "leave"},
                          headers={"Origin": "http://127.0.0.1:3000"})
    assert response.status_code == 401 and response.headers["access-control-allow-origin"] == "http://127.0.0.1:3000"


def test_without_a_list_every_preflight_is_refused_and_no_cors_header_is_sent(tmp_path: Path) -> None:
    # Issue 49, 8(d): with no list the preflight reached the routes and got 405, not the documented 403.
    with KnowledgeService(Settings(home=tmp_path / "home")) as svc, LiveServer(svc) as server:
        response = httpx.options(f"{server.url}/v1/search", headers={
            "Origin": "http://127.0.0.1:3000", "Access-Control-Request-Method": "POST"})
        search = httpx.post(f"{server.url}/v1/search", json={"query": "leave"},
                            headers={"Origin": "http://127.0.0.1:3000"})
    assert response.status_code == 403 and response.json()["error"]["code"] == "invalid_origin"
    assert not [name for name in response.headers if name.startswith("access-control-")]
    assert search.status_code == 401 and "access-control-allow-origin" not in search.headers
