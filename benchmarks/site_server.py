"""A site served from a dict of resources on 127.0.0.1, with real conditional GETs: the website
connector's tests (tests/support/site_server.py builds their site) and `python -m benchmarks.sources`
(a site of SciFact abstracts) both serve theirs with it.

`SiteServer` serves from a thread (http.server, HTTP/1.1 with keep-alive) on a port the OS picks.
Resources answer conditional GETs for real: an ETag (a hash of the body) and a Last-Modified, 304
on If-None-Match or If-Modified-Since. A caller changes a page (`set_page`, a new ETag) or gives a
path a behaviour: `Status(code)`, `Slow(seconds)` (the wait ends at once when the server stops),
`Redirect(location)`, `Huge(size)` (a body streamed without Content-Length, stopped when the client
goes), `Drip(seconds, lasting)` (a body of one byte every `seconds`, for `lasting` seconds). A resource's `encoding` is sent as its Content-Encoding, its body as given. Every request is recorded (`requests`), so a test asserts what was asked and answered
instead of sleeping. Nothing here imports rag or tests.
"""

from __future__ import annotations

import email.utils
import hashlib
import ssl
import sys
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Union

TYPES = {".html": "text/html; charset=utf-8", ".pdf": "application/pdf", ".xml": "application/xml",
         ".txt": "text/plain; charset=utf-8",
         ".docx": "application/vnd.openxmlformats-officedocument.wordprocessingml.document"}



@dataclass(frozen=True)
class Status:
    code: int


@dataclass(frozen=True)
class Slow:
    seconds: float


@dataclass(frozen=True)
class Redirect:
    location: str
    code: int = 302


@dataclass(frozen=True)
class Huge:
    size: int  # bytes offered; the client is expected to stop long before


@dataclass(frozen=True)
class Drip:
    seconds: float  # between two bytes of a body
    lasting: float = 30.0  # then the body ends (sooner when the client goes)


Behaviour = Union[Status, Slow, Redirect, Huge, Drip]


@dataclass
class Resource:
    body: bytes
    content_type: str
    modified: float = field(default_factory=lambda: float(int(time.time()) - 3600))
    encoding: str = ""  # sent as Content-Encoding: `body` is already encoded so (a hostile site's "gzip, gzip")

    @property
    def etag(self) -> str:
        return '"' + hashlib.sha256(self.body).hexdigest()[:20] + '"'


@dataclass(frozen=True)
class Request:
    path: str
    status: int
    headers: dict[str, str]


def sitemaps(site: dict[str, Resource], base: str, paths: list[str]) -> None:
    """A sitemap index at /sitemap.xml naming /sitemap-docs.xml, which names `paths`."""
    urls = "".join(f"<url><loc>{base}{p}</loc></url>" for p in paths)
    site["/sitemap-docs.xml"] = Resource(
        f'<?xml version="1.0" encoding="UTF-8"?><urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">'
        f"{urls}</urlset>".encode(), TYPES[".xml"])
    site["/sitemap.xml"] = Resource(
        f'<?xml version="1.0" encoding="UTF-8"?><sitemapindex xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">'
        f"<sitemap><loc>{base}/sitemap-docs.xml</loc></sitemap></sitemapindex>".encode(), TYPES[".xml"])



class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    timeout = 10  # an idle keep-alive connection's thread ends
    server: "_Server"

    def log_message(self, format: str, *args: object) -> None:  # quiet
        return None

    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        owner = self.server.owner
        path = self.path.split("?", 1)[0]
        behaviour = owner.behaviours.get(path)
        if behaviour is not None:
            self._behave(behaviour)
            return
        resource = owner.resource(path)
        if resource is None:
            self._answer(404, b"not found", "text/plain")
            return
        if self._not_modified(resource):
            self._record(304)
            self.send_response(304)
            self.send_header("ETag", resource.etag)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        self._answer(200, resource.body, resource.content_type, resource)

    def _not_modified(self, resource: Resource) -> bool:
        tag = self.headers.get("If-None-Match")
        if tag is not None:
            return resource.etag in [t.strip() for t in tag.split(",")]
        since = self.headers.get("If-Modified-Since")
        if since:
            try:
                return email.utils.parsedate_to_datetime(since).timestamp() >= int(resource.modified)
            except (TypeError, ValueError):
                return False
        return False

    def _record(self, status: int) -> None:
        owner = self.server.owner
        with owner.lock:
            owner.requests.append(Request(self.path, status, {k.lower(): v for k, v in self.headers.items()}))

    def _answer(self, status: int, body: bytes, content_type: str, resource: Resource | None = None) -> None:
        self._record(status)
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        if resource is not None and resource.encoding:
            self.send_header("Content-Encoding", resource.encoding)
        if resource is not None:
            self.send_header("ETag", resource.etag)
            self.send_header("Last-Modified", email.utils.formatdate(resource.modified, usegmt=True))
        self.end_headers()
        self.wfile.write(body)

    def _behave(self, behaviour: Behaviour) -> None:
        if isinstance(behaviour, Status):
            self._answer(behaviour.code, f"scripted {behaviour.code}".encode(), "text/plain")
        elif isinstance(behaviour, Redirect):
            self._record(behaviour.code)
            self.send_response(behaviour.code)
            self.send_header("Location", behaviour.location)
            self.send_header("Content-Length", "0")
            self.end_headers()
        elif isinstance(behaviour, Slow):
            self._record(0)
            self.server.owner.stopping.wait(behaviour.seconds)
            self.close_connection = True
        elif isinstance(behaviour, Drip):
            self._drip(behaviour)
        else:
            self._huge(behaviour)

    def _endless_head(self) -> None:
        """The head of a body without a length, which ends with the connection."""
        self._record(200)
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        self.send_header("Connection", "close")
        self.end_headers()
        self.close_connection = True

    def _drip(self, behaviour: Drip) -> None:
        self._endless_head()
        owner, ends = self.server.owner, time.monotonic() + behaviour.lasting
        while not owner.stopping.wait(behaviour.seconds) and time.monotonic() < ends:
            try:
                self.wfile.write(b"x")
                self.wfile.flush()
            except OSError:  # the client gave up
                return
            with owner.lock:
                owner.dripped += 1

    def _huge(self, behaviour: Huge) -> None:
        self._endless_head()
        chunk = b"<p>" + b"x" * 65_530 + b"</p>"
        owner = self.server.owner
        for _ in range(behaviour.size // len(chunk) + 1):
            if owner.stopping.is_set():
                return
            try:
                self.wfile.write(chunk)
            except OSError:  # the client stopped reading: what we sent is the measure
                return
            with owner.lock:
                owner.huge_sent += len(chunk)


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    owner: "SiteServer"

    def handle_error(self, request: object, client_address: object) -> None:
        """A client that closed its keep-alive connection (or stopped reading a huge body) is no error."""
        if not isinstance(sys.exc_info()[1], (ConnectionError, TimeoutError)):
            super().handle_error(request, client_address)


class SiteServer:
    """The site on 127.0.0.1; `start`/`stop` (or a `with` block)."""

    def __init__(self, site: dict[str, Resource], tls: ssl.SSLContext | None = None, host: str = "127.0.0.1") -> None:
        self.site = site
        self.tls = tls  # https with this server context (`tls_pair`); `host`: the name in its URLs
        self.host = host
        self.behaviours: dict[str, Behaviour] = {}
        self.requests: list[Request] = []
        self.huge_sent = 0
        self.dripped = 0  # bytes a `Drip` sent
        self.lock = threading.Lock()
        self.stopping = threading.Event()
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None

    @property
    def base(self) -> str:
        assert self._server is not None
        return f"{'https' if self.tls else 'http'}://{self.host}:{self._server.server_address[1]}"

    def url(self, path: str) -> str:
        return self.base + path

    def resource(self, path: str) -> Resource | None:
        with self.lock:
            return self.site.get(path)

    def set_page(self, path: str, body: bytes, content_type: str = TYPES[".html"]) -> None:
        with self.lock:
            self.site[path] = Resource(body, content_type, float(int(time.time())))

    def asked(self, path: str) -> list[Request]:
        with self.lock:
            return [r for r in self.requests if r.path.split("?", 1)[0] == path]

    def clear(self) -> None:
        with self.lock:
            self.requests.clear()

    def start(self) -> SiteServer:
        self._server = _Server(("127.0.0.1", 0), _Handler)
        self._server.owner = self
        if self.tls is not None:
            self._server.socket = self.tls.wrap_socket(self._server.socket, server_side=True)
        self._thread = threading.Thread(target=self._server.serve_forever, args=(0.05,), name="site-server", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self.stopping.set()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=10)

    def __enter__(self) -> SiteServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
