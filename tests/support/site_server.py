"""A real documentation site on 127.0.0.1 for the website connector's tests.

`build_site()` renders a subset of ../shared/datasets/uv_docs/pages (Markdown, rendered with
markdown-it) into HTML pages under /docs/, each wrapped in the boilerplate a documentation site has
(a header, a navigation bar linking every page, a sidebar, a footer with a cookie notice), with the
pages' own links between them rewritten to the rendered pages. It adds three files of
../shared/datasets/office_docs (a PDF, a .docx, an HTML page) linked from the index, a page
outside /docs/, a page robots.txt disallows, a robots.txt and a sitemap index with its sitemap.

`SiteServer` serves it from a thread (http.server, HTTP/1.1 with keep-alive) on a port the OS
picks. Pages answer conditional GETs for real: an ETag (a hash of the body) and a Last-Modified,
304 on If-None-Match or If-Modified-Since. A test changes a page (`set_page`, a new ETag) or gives
a path a behaviour: `Status(code)`, `Slow(seconds)` (the wait ends at once when the server
stops), `Redirect(location)`, `Huge(size)` (a body streamed without Content-Length, stopped when
the client goes). Every request is recorded (`requests`), so a test asserts what was asked and
answered instead of sleeping.
"""

from __future__ import annotations

import datetime as dt
import email.utils
import hashlib
import re
import ssl
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Union

from markdown_it import MarkdownIt

from tests.support.paths import SHARED

UV_PAGES = SHARED / "datasets" / "uv_docs" / "pages"
OFFICE = SHARED / "datasets" / "office_docs" / "files"
BOILERPLATE = "Cookie settings: this site uses cookies to remember your theme preference."
FOOTER = "Copyright 2025 Example Docs Team. Built with a static site generator."
NAV_LABEL = "Skip to navigation and search the documentation"
OFFICE_FILES = {"files/google-doc-example.pdf": OFFICE / "pdf" / "google-doc-example.pdf",
                "files/soo.docx": OFFICE / "docx" / "usds-digital-service-soo.docx",
                "files/hiring.html": OFFICE / "html" / "18f-hiring-authorities.html"}
_TYPES = {".html": "text/html; charset=utf-8", ".pdf": "application/pdf", ".xml": "application/xml",
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


Behaviour = Union[Status, Slow, Redirect, Huge]


@dataclass
class Resource:
    body: bytes
    content_type: str
    modified: float = field(default_factory=lambda: float(int(time.time()) - 3600))

    @property
    def etag(self) -> str:
        return '"' + hashlib.sha256(self.body).hexdigest()[:20] + '"'


@dataclass(frozen=True)
class Request:
    path: str
    status: int
    headers: dict[str, str]


def uv_pages(count: int = 20) -> list[Path]:
    """The first `count` uv pages, the index first, in a stable order."""
    pages = sorted(UV_PAGES.rglob("*.md"), key=lambda p: (p != UV_PAGES / "index.md", str(p)))
    return pages[:count]


def page_path(markdown: Path) -> str:
    return "/docs/" + str(markdown.relative_to(UV_PAGES).with_suffix(".html"))


def wrap(title: str, content: str, nav: list[tuple[str, str]], extra_links: str = "") -> bytes:
    """A page as a documentation site serves it: boilerplate around the content."""
    links = "".join(f'<li><a href="{href}">{text}</a></li>' for href, text in nav)
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{title} - Example Docs</title>
<link rel="stylesheet" href="/assets/site.css"></head>
<body>
<header class="md-header"><a href="/docs/index.html">Example Docs</a>
<span class="skip">{NAV_LABEL}</span></header>
<nav class="md-nav" aria-label="Main"><ul>{links}</ul></nav>
<div class="md-sidebar"><p>{BOILERPLATE}</p><ul>{links}</ul></div>
<main><article class="md-content">{content}{extra_links}</article></main>
<footer class="md-footer"><p>{FOOTER}</p><p><a href="/docs/index.html">Home</a></p></footer>
</body></html>""".encode()


def _title(markdown: str, fallback: str) -> str:
    match = re.search(r"^# (.+)$", markdown, re.M)
    return match.group(1).strip() if match else fallback


def build_site(count: int = 20) -> dict[str, Resource]:
    md = MarkdownIt("commonmark").enable("table")
    sources = uv_pages(count)
    nav = [(page_path(p), _title(p.read_text(), p.stem)) for p in sources]
    site: dict[str, Resource] = {}
    for source in sources:
        text = source.read_text()
        html = md.render(text)
        html = re.sub(r'href="([^"]+?)\.md(#[^"]*)?"', r'href="\1.html\2"', html)  # links between pages
        extra = ""
        if source == UV_PAGES / "index.md":
            extra = ("<p>Files: " + " ".join(f'<a href="/docs/{name}">{name}</a>' for name in OFFICE_FILES)
                     + ' <a href="/docs/private/secret.html">internal</a> <a href="/blog/post.html">blog</a>'
                     + ' <a href="/docs/files/logo.png">logo</a> <a href="/docs/files/setup.sh">setup</a></p>')
        site[page_path(source)] = Resource(wrap(_title(text, source.stem), html, nav, extra), _TYPES[".html"])
    for name, path in OFFICE_FILES.items():
        site[f"/docs/{name}"] = Resource(path.read_bytes(), _TYPES[Path(name).suffix])
    site["/docs/private/secret.html"] = Resource(wrap("Secret", "<p>Internal only.</p>", nav), _TYPES[".html"])
    site["/blog/post.html"] = Resource(wrap("Blog", "<p>A post outside the docs.</p>", nav), _TYPES[".html"])
    site["/robots.txt"] = Resource(b"User-agent: *\nDisallow: /docs/private/\n", _TYPES[".txt"])
    return site


def sitemaps(site: dict[str, Resource], base: str, paths: list[str]) -> None:
    """A sitemap index at /sitemap.xml naming /sitemap-docs.xml, which names `paths`."""
    urls = "".join(f"<url><loc>{base}{p}</loc></url>" for p in paths)
    site["/sitemap-docs.xml"] = Resource(
        f'<?xml version="1.0" encoding="UTF-8"?><urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">'
        f"{urls}</urlset>".encode(), _TYPES[".xml"])
    site["/sitemap.xml"] = Resource(
        f'<?xml version="1.0" encoding="UTF-8"?><sitemapindex xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">'
        f"<sitemap><loc>{base}/sitemap-docs.xml</loc></sitemap></sitemapindex>".encode(), _TYPES[".xml"])


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
        else:
            self._huge(behaviour)

    def _huge(self, behaviour: Huge) -> None:
        self._record(200)
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        self.send_header("Connection", "close")
        self.end_headers()
        self.close_connection = True
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

    def set_page(self, path: str, body: bytes, content_type: str = _TYPES[".html"]) -> None:
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


def tls_pair(name: str) -> tuple[ssl.SSLContext, ssl.SSLContext]:
    """(a server context with a certificate for `name` signed by a throwaway CA, a client context
    trusting only that CA): https on 127.0.0.1 with real certificate checks."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    now = dt.datetime.now(dt.timezone.utc)

    def certificate(subject: str, key, issuer: str, issuer_key, ca: bool):
        builder = (x509.CertificateBuilder().subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, subject)]))
                   .issuer_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, issuer)]))
                   .public_key(key.public_key()).serial_number(x509.random_serial_number())
                   .not_valid_before(now - dt.timedelta(hours=1)).not_valid_after(now + dt.timedelta(days=1))
                   .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True))
        if not ca:
            builder = builder.add_extension(x509.SubjectAlternativeName([x509.DNSName(subject)]), critical=False)
        return builder.sign(issuer_key, hashes.SHA256())

    ca_key, leaf_key = ec.generate_private_key(ec.SECP256R1()), ec.generate_private_key(ec.SECP256R1())
    ca = certificate("Test CA", ca_key, "Test CA", ca_key, True)
    leaf = certificate(name, leaf_key, "Test CA", ca_key, False)
    pem = serialization.Encoding.PEM
    client = ssl.create_default_context(cadata=ca.public_bytes(pem).decode())
    server = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    with tempfile.TemporaryDirectory() as folder:  # ssl loads a chain from files only
        chain, key = Path(folder) / "chain.pem", Path(folder) / "key.pem"
        chain.write_bytes(leaf.public_bytes(pem))
        key.write_bytes(leaf_key.private_bytes(pem, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()))
        server.load_cert_chain(chain, key)
    return server, client
