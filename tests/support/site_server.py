"""A real documentation site on 127.0.0.1 for the website connector's tests.

`build_site()` renders a subset of ../shared/datasets/uv_docs/pages (Markdown, rendered with
markdown-it) into HTML pages under /docs/, each wrapped in the boilerplate a documentation site has
(a header, a navigation bar linking every page, a sidebar, a footer with a cookie notice), with the
pages' own links between them rewritten to the rendered pages. It adds three files of
../shared/datasets/office_docs (a PDF, a .docx, an HTML page) linked from the index, a page
outside /docs/, a page robots.txt disallows, a robots.txt and a sitemap index with its sitemap.

It is served by `SiteServer` (benchmarks/site_server.py, which `python -m benchmarks.sources` uses
too): real conditional GETs, scripted behaviours (`Status`, `Slow`, `Redirect`, `Huge`, `Drip`) and every
request recorded, re-exported here for the tests.
"""

from __future__ import annotations

import datetime as dt
import re
import ssl
import tempfile
from pathlib import Path

from markdown_it import MarkdownIt

from benchmarks.site_server import TYPES as _TYPES
from benchmarks.site_server import (  # noqa: F401 - the tests import them from here
    Behaviour, Drip, Huge, Redirect, Request, Resource, SiteServer, Slow, Status, sitemaps)
from tests.support.paths import SHARED

UV_PAGES = SHARED / "datasets" / "uv_docs" / "pages"
OFFICE = SHARED / "datasets" / "office_docs" / "files"
BOILERPLATE = "Cookie settings: this site uses cookies to remember your theme preference."
FOOTER = "Copyright 2025 Example Docs Team. Built with a static site generator."
NAV_LABEL = "Skip to navigation and search the documentation"
OFFICE_FILES = {"files/google-doc-example.pdf": OFFICE / "pdf" / "google-doc-example.pdf",
                "files/soo.docx": OFFICE / "docx" / "usds-digital-service-soo.docx",
                "files/hiring.html": OFFICE / "html" / "18f-hiring-authorities.html"}


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
