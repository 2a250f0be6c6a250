"""Hostile sources against the real connectors (docs/reliability.md, "Hostile input"): a website
server sending compression bombs and encodings stacked or unknown, an IMAP server announcing huge
literals and endless answers, a Git repository with symlinks, a huge blob and a long history.

Each test asserts the bound that stopped the hostile input (the item's or the source's error, in a
user's words) and this process's memory: the peak of Python's allocations (tracemalloc: every
bytes object a decoder or a socket read makes, whatever the process's earlier peak) and the growth
of its resident high-water mark (ru_maxrss), far below what the input would take read whole."""

from __future__ import annotations

import gc
import os
import socketserver
import gzip
import resource
import struct
import subprocess
import threading
import time
import tracemalloc
import zlib
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

import pytest

from rag.sources.base import FetchLimits, Fetched, Item, ItemFailed, NotModified, SourceUnavailable, SyncContext
from rag.sources.git import SKIP_LINK, GitConnector
from rag.sources.git import Config as GitConfig
from rag.sources.gitrun import git_env, pinned, pinned_url
from rag.sources.imap import ImapConnector
from rag.sources.website import Config, WebsiteConnector

from ..support.gitrepo import GitHttpServer
from ..support.site_server import Drip, Redirect, Resource, SiteServer, wrap

MiB = 1024 * 1024
GiB = 1024 * MiB
LIMITS = FetchLimits(max_bytes=2_000_000, timeout_seconds=2.0, total_seconds=8.0, attempts=1, backoff_seconds=0.05,
                     concurrency=4)
HTML = "text/html; charset=utf-8"


# ----- memory -----

@dataclass
class Peak:
    traced: int = 0  # bytes: the peak of Python's allocations inside the block
    rss_growth: int = 0  # bytes: how far the process's resident high-water mark rose inside the block


@contextmanager
def peak() -> Iterator[Peak]:
    gc.collect()
    measured = Peak()
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux
    tracemalloc.start()
    try:
        yield measured
    finally:
        measured.traced = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        measured.rss_growth = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) * 1024


# ----- a hostile website server -----

def gzip_zeros(size: int) -> bytes:
    """`size` zero bytes gzipped (about size / 1000 bytes), built without holding them: one MiB
    deflated and ended with a full flush is a byte-aligned segment that needs no history, so the
    segment repeated is a valid stream."""
    squeeze = zlib.compressobj(9, zlib.DEFLATED, -zlib.MAX_WBITS)
    block = b"\0" * MiB
    segment = squeeze.compress(block) + squeeze.flush(zlib.Z_FULL_FLUSH)
    count = size // MiB
    crc = 0
    for _ in range(count):
        crc = zlib.crc32(block, crc)
    header = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x02\xff"
    return header + segment * count + squeeze.flush() + struct.pack("<II", crc, (count * MiB) & 0xFFFFFFFF)


PAGE = wrap("Encoded", "<p>" + "A page a server sends compressed, as most do, read in full. " * 20 + "</p>", [])


def raw_deflate(data: bytes) -> bytes:
    squeeze = zlib.compressobj(6, zlib.DEFLATED, -zlib.MAX_WBITS)
    return squeeze.compress(data) + squeeze.flush()


@pytest.fixture(scope="module")
def bomb() -> bytes:
    return gzip_zeros(GiB)  # 1 GiB of zeros in about 1 MB


@pytest.fixture()
def hostile_site(bomb: bytes) -> Iterator[SiteServer]:
    pages = {  # path: (body, Content-Encoding)
        "/docs/single.html": (bomb, "gzip"),  # 1 MB on the wire, under max_bytes; 1 GiB decoded
        "/docs/double.html": (gzip.compress(bomb), "gzip, gzip"),  # the 3,477-byte response
        "/docs/triple.html": (gzip.compress(gzip.compress(bomb)), "gzip,gzip ,gzip"),
        "/docs/compress.html": (b"\x1f\x9d\x90" + b"\0" * 100, "compress"),
        "/docs/foo.html": (PAGE, "x-foo"),
        "/docs/br.html": (PAGE, "br"),
        "/docs/gzip.html": (gzip.compress(PAGE), "gzip"),
        "/docs/xgzip.html": (gzip.compress(PAGE), "X-GZIP"),
        "/docs/deflate.html": (zlib.compress(PAGE), "deflate"),
        "/docs/rawdeflate.html": (raw_deflate(PAGE), "deflate"),
        "/docs/identity.html": (PAGE, "identity"),
        "/docs/corrupt.html": (b"\x1f\x8b\x08\x00garbage that is not deflate at all", "gzip"),
    }
    links = [(path, path) for path in pages]
    site = {path: Resource(body, HTML, encoding=encoding) for path, (body, encoding) in pages.items()}
    site["/docs/index.html"] = Resource(wrap("Index", "<p>The hostile pages.</p>", links), HTML)
    site["/robots.txt"] = Resource(b"User-agent: *\nDisallow:\n", "text/plain")
    server = SiteServer(site).start()
    try:
        yield server
    finally:
        server.stop()


def website(site: SiteServer, limits: FetchLimits = LIMITS, **settings: Any) -> WebsiteConnector:
    settings.setdefault("start_urls", [site.url("/docs/index.html")])
    context = SyncContext(source_name="hostile", workspace="default", limits=limits, allow_hosts=("127.0.0.1",))
    return WebsiteConnector(Config(**settings), context)


def synced(conn: WebsiteConnector) -> dict[str, Any]:
    """What the engine does: list, then fetch every listed item from 4 threads; each item's outcome
    (a Fetched, or the ItemFailed it was reported with)."""
    items = list(conn.items())

    def one(item: Item) -> Any:
        if item.failed:
            return ItemFailed(item.failed)
        try:
            return conn.fetch(item, None)
        except (NotModified, ItemFailed) as exc:
            return exc

    with ThreadPoolExecutor(4) as pool:
        return dict(zip((i.id for i in items), pool.map(one, items)))


def test_compression_bombs_and_stacked_or_unknown_encodings_fail_their_item_in_bounded_memory(
        hostile_site: SiteServer) -> None:
    with peak() as used, website(hostile_site) as conn:
        outcomes = synced(conn)
    failed = {k: str(v) for k, v in outcomes.items() if isinstance(v, ItemFailed)}
    assert "larger than this source reads (past 2000000 bytes)" in failed["/docs/single.html"]
    assert "a body encoded more than once (gzip, gzip) is refused" in failed["/docs/double.html"]
    assert "(gzip, gzip, gzip)" in failed["/docs/triple.html"]
    assert "an encoding this source does not read (compress)" in failed["/docs/compress.html"]
    assert "an encoding this source does not read (x-foo)" in failed["/docs/foo.html"]
    assert "an encoding this source does not read (br)" in failed["/docs/br.html"]  # no brotli decoder installed
    assert "does not decode as gzip" in failed["/docs/corrupt.html"]
    assert all("Traceback" not in m and "zlib" not in m and "Error" not in m for m in failed.values())
    for name in ("gzip", "xgzip", "deflate", "rawdeflate", "identity"):  # one layer of a known encoding is read
        fetched = outcomes[f"/docs/{name}.html"]
        assert isinstance(fetched, Fetched) and fetched.data == PAGE, name
    assert all(r.headers.get("accept-encoding") == "gzip, deflate" for r in hostile_site.requests)
    # 1 GiB decoded by the single layer, 1 GiB in one piece by the double one, read whole: the bound held
    # the decoded bytes to max_bytes (2 MB) and a 64 KiB step, the bodies kept for fetch included
    assert used.traced < 16 * MiB, used
    assert used.rss_growth < 100 * MiB, used


def test_a_dripping_body_fails_at_the_item_timeout(hostile_site: SiteServer) -> None:
    hostile_site.behaviours["/docs/gzip.html"] = Drip(0.05, lasting=10)  # each byte well inside the 2 s timeout
    limits = FetchLimits(**{**LIMITS.__dict__, "total_seconds": 1.5})
    with website(hostile_site, limits) as conn:
        listed = {i.id: i for i in conn.items()}
    assert listed["/docs/gzip.html"].failed == f"{hostile_site.url('/docs/gzip.html')}: not read within 1.5 seconds"
    assert hostile_site.asked("/docs/gzip.html")[0].status == 200  # it answered, then dripped
    assert hostile_site.dripped < 60  # the client left at its 1.5 s deadline (~30 bytes), not at the body's end (200)


# every form of a loopback, private, link-local or metadata address a redirect could name (127.0.0.1 is
# allowed by that name only: another spelling of it is refused like any private address)
FORMS = ["http://2130706433:{port}/", "http://0x7f000001:{port}/",
         "http://127.1:{port}/", "http://[::ffff:127.0.0.1]:{port}/", "http://[::1]:{port}/",
         "http://localhost:{port}/", "http://foo.localhost:{port}/", "http://0.0.0.0:{port}/", "http://[::]:{port}/",
         "http://10.0.0.1/", "http://192.168.1.1/", "http://172.16.0.1/", "http://[fd00::1]/", "http://[fe80::1]/",
         "http://169.254.169.254/latest/meta-data/", "http://[fd00:ec2::254]/", "http://metadata.google.internal/",
         "http://100.64.0.1/", "http://user@127.0.0.2:{port}/"]


def test_redirect_chains_to_every_address_form_are_refused(hostile_site: SiteServer) -> None:
    port = hostile_site.base.rsplit(":", 1)[1]
    for n, target in enumerate(FORMS):  # each page: two hops inside the site, then the form
        hostile_site.behaviours[f"/docs/r{n}.html"] = Redirect(f"/docs/r{n}-b.html")
        hostile_site.behaviours[f"/docs/r{n}-b.html"] = Redirect(target.format(port=port), code=307)
    links = [(f"/docs/r{n}.html", str(n)) for n in range(len(FORMS))]
    hostile_site.site["/docs/index.html"] = Resource(wrap("Index", "<p>Redirects.</p>", links), HTML)
    with website(hostile_site) as conn:
        failed = {i.id: i.failed for i in conn.items()}
    for n, target in enumerate(FORMS):
        assert failed[f"/docs/r{n}.html"] and "refused" in failed[f"/docs/r{n}.html"], target
    assert len(hostile_site.requests) == 2 + 2 * len(FORMS)  # robots.txt, the index, two hops each: nothing else


def test_robots_txt_and_sitemaps_are_decoded_under_their_bounds(hostile_site: SiteServer, bomb: bytes) -> None:
    robots_bomb = gzip_zeros(256 * MiB)  # 250 KB on the wire: under robots.txt's 512 KiB, 256 MiB decoded
    hostile_site.site["/robots.txt"] = Resource(robots_bomb, "text/plain", encoding="gzip")
    with peak() as used:
        with website(hostile_site) as conn, pytest.raises(SourceUnavailable, match="robots.txt cannot be read: "
                                                          r"larger than this source reads \(past 524288 bytes\)"):
            list(conn.items())
        hostile_site.site["/robots.txt"] = Resource(gzip.compress(robots_bomb), "text/plain", encoding="gzip, gzip")
        with website(hostile_site) as conn, pytest.raises(SourceUnavailable, match="encoded more than once"):
            list(conn.items())
        hostile_site.site["/robots.txt"] = Resource(gzip.compress(b"User-agent: *\nDisallow: /docs/gzip\n"),
                                                    "text/plain", encoding="gzip")
        hostile_site.site["/sitemap.xml"] = Resource(bomb, "application/xml", encoding="gzip")
        with website(hostile_site, start_urls=[], sitemap=hostile_site.url("/sitemap.xml")) as conn, \
                pytest.raises(SourceUnavailable, match="sitemap .* larger than this source reads"):
            list(conn.items())
        # a gzipped sitemap file sent gzip-encoded: two layers, each read by its own bounded reader
        hostile_site.site["/sitemap.xml.gz"] = Resource(gzip.compress(bomb), "application/gzip", encoding="gzip")
        with website(hostile_site, start_urls=[], sitemap=hostile_site.url("/sitemap.xml.gz")) as conn, \
                pytest.raises(SourceUnavailable, match="sitemap .* larger than this source reads"):
            list(conn.items())
    assert used.traced < 16 * MiB, used
    assert used.rss_growth < 100 * MiB, used
    urls = "".join(f"<url><loc>{hostile_site.url(p)}</loc></url>" for p in ("/docs/gzip.html", "/docs/deflate.html"))
    sitemap = f'<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">{urls}</urlset>'.encode()
    hostile_site.site["/sitemap.xml"] = Resource(gzip.compress(sitemap), "application/xml", encoding="gzip")
    with website(hostile_site, start_urls=[], sitemap=hostile_site.url("/sitemap.xml"), max_depth=0) as conn:
        assert {i.id for i in conn.items()} == {"/docs/deflate.html"}  # the gzip-encoded robots.txt was read too


# ----- a hostile IMAP server -----

HEADER = b"Message-ID: <m@example.org>\r\nSubject: A message\r\n\r\n"
MESSAGE = HEADER + b"A short body.\r\n"


class HostileImap(socketserver.ThreadingTCPServer):
    """Just enough IMAP on 127.0.0.1 (no TLS) for the connector, and then hostile: `search` is
    "plain" (UIDs 1 to 3), "endless" (untagged SEARCH lines as fast as they go), "drip" (one
    line every 0.1 s, never done) or "bytes" (one byte of a line every 0.05 s); `header_literal` / `body_literal`: the size a header FETCH or a
    message's FETCH announces (then at most `cap` bytes of it are sent, and nothing more);
    `unsolicited`: records for that many UIDs never asked for, with a header FETCH's answer. Every
    hostile stream stops after `cap` bytes or `drip_seconds` (so the code before the bounds
    fails its test instead of hanging)."""

    daemon_threads = True
    allow_reuse_address = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _ImapHandler)
        self.search = "plain"
        self.header_literal: int | None = None
        self.body_literal: int | None = None
        self.unsolicited = 0
        self.cap = 64 * MiB
        self.drip_seconds = 6.0
        self.dripped = 0  # bytes the "bytes" search sent
        self.stopping = threading.Event()
        self.commands: list[str] = []

    def __enter__(self) -> HostileImap:
        threading.Thread(target=self.serve_forever, args=(0.05,), daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stopping.set()
        self.shutdown()
        self.server_close()

    def connector(self, limits: FetchLimits) -> ImapConnector:
        config = ImapConnector.Config.model_validate({"host": "127.0.0.1", "port": self.server_address[1],
                                                      "security": "none", "username": "ada"})
        return ImapConnector(config, SyncContext(source_name="mail", workspace="default", secret="pw",
                                                 limits=limits, allow_hosts=("127.0.0.1",)))


class _ImapHandler(socketserver.StreamRequestHandler):
    server: HostileImap

    def handle(self) -> None:
        self.wfile.write(b"* OK hostile IMAP ready\r\n")
        try:
            while not self.server.stopping.is_set():
                line = self.rfile.readline(10_000)
                if not line:
                    return
                tag, _, rest = line.decode().strip().partition(" ")
                self.server.commands.append(rest.split(" ", 2)[0] + " " + rest.split(" ", 2)[1] if
                                            rest.startswith("UID") else rest.split(" ", 1)[0])
                if not self.answer(tag, rest):
                    return
        except OSError:  # the client closed the connection: that is how a bound ends a hostile answer
            return

    def answer(self, tag: str, command: str) -> bool:
        verb = command.split(" ", 1)[0].upper()
        out = self.wfile.write
        if verb == "CAPABILITY":
            out(b"* CAPABILITY IMAP4rev1\r\n")
        elif verb == "EXAMINE":
            out(b"* 3 EXISTS\r\n* OK [UIDVALIDITY 7] UIDs valid\r\n")
        elif verb == "LOGOUT":
            out(b"* BYE bye\r\n" + f"{tag} OK done\r\n".encode())
            return False
        elif command.upper().startswith("UID SEARCH"):
            return self.searched(tag)
        elif command.upper().startswith("UID FETCH"):
            return self.fetched(tag, command)
        out(f"{tag} OK done\r\n".encode())
        return True

    def searched(self, tag: str) -> bool:
        if self.server.search == "plain":
            self.wfile.write(b"* SEARCH 1 2 3\r\n" + f"{tag} OK done\r\n".encode())
            return True
        line, sent, start = b"* SEARCH " + b" ".join(str(n).encode() for n in range(1, 2000)) + b"\r\n", 0, time.monotonic()
        while sent < self.server.cap and time.monotonic() - start < self.server.drip_seconds:
            if self.server.search == "drip":
                self.wfile.write(b"* SEARCH 1\r\n")
                self.server.stopping.wait(0.1)
            elif self.server.search == "bytes":
                self.wfile.write(line[sent % len(line):][:1])
                self.wfile.flush()
                sent += 1
                self.server.dripped = sent
                self.server.stopping.wait(0.05)
            else:
                self.wfile.write(line)
                sent += len(line)
        self.server.stopping.wait(30)  # and then nothing: never the tagged answer
        return False

    def fetched(self, tag: str, command: str) -> bool:
        listing = "RFC822.SIZE" in command and "HEADER.FIELDS" in command
        announced = self.server.header_literal if listing else self.server.body_literal
        if announced is not None:
            self.wfile.write(b"* 1 FETCH (UID 1 RFC822.SIZE 100 BODY[] {%d}\r\n" % announced)
            self.huge(announced)
            return False
        uids = [1, 2, 3] if listing else [int(command.split()[2])]
        part = "BODY[HEADER.FIELDS (MESSAGE-ID DATE FROM SUBJECT)]" if listing else "BODY[]<0>"
        data = HEADER if listing else MESSAGE
        for uid in uids + (list(range(100, 100 + self.server.unsolicited)) if listing else []):
            self.wfile.write(b"* %d FETCH (UID %d RFC822.SIZE %d %s {%d}\r\n%s)\r\n"
                             % (uid, uid, len(MESSAGE), part.encode(), len(data), data))
        self.wfile.write(f"{tag} OK done\r\n".encode())
        return True

    def huge(self, announced: int) -> None:
        chunk, sent = b"\0" * (64 * 1024), 0
        while sent < min(announced, self.server.cap):
            self.wfile.write(chunk)
            sent += len(chunk)
        self.server.stopping.wait(30)  # and then nothing


IMAP_LIMITS = FetchLimits(max_bytes=1_000_000, timeout_seconds=0.5, total_seconds=2.0, attempts=1,
                          backoff_seconds=0.05)


@pytest.fixture()
def imap() -> Iterator[HostileImap]:
    with HostileImap() as server:
        yield server


def test_a_plain_mailbox_of_the_hostile_imap_server_lists_only_the_uids_asked_for(imap: HostileImap) -> None:
    imap.unsolicited = 5000  # a header FETCH answered with 5,000 records never asked for
    with imap.connector(IMAP_LIMITS) as source:
        items = list(source.items())
        assert sorted(i.meta["uid"] for i in items) == [1, 2, 3]
        assert source.fetch(items[0], None).data == MESSAGE


def test_an_announced_huge_literal_is_refused_unread(imap: HostileImap) -> None:
    imap.header_literal = 2 * GiB  # then 64 MiB of it sent, then nothing
    with peak() as used:
        with imap.connector(IMAP_LIMITS) as source, pytest.raises(SourceUnavailable) as listing:
            source.items()
        imap.header_literal, imap.body_literal = None, 2 * GiB
        with imap.connector(IMAP_LIMITS) as source:
            item = list(source.items())[0]
            with pytest.raises(ItemFailed) as fetching:
                source.fetch(item, None)
    bound = "the server announced 2048.0 MB at once, past the bound of 1,000,001 bytes"
    assert bound in str(listing.value) and "the connection was closed" in str(listing.value)
    assert not listing.value.transient
    assert str(fetching.value) == f"fetching INBOX/{item.meta['uid']} stopped: {bound}; the connection was closed"
    assert used.traced < 8 * MiB, used  # not one 64 KiB step of the literal kept
    assert used.rss_growth < 100 * MiB, used


def test_an_endless_listing_stops_at_its_byte_bound(imap: HostileImap) -> None:
    imap.search = "endless"  # 64 MiB of SEARCH lines, never the tagged end
    with peak() as used, imap.connector(IMAP_LIMITS) as source, pytest.raises(SourceUnavailable) as caught:
        source.items()
    assert "stopped: an answer past 2.0 MB (the bound of one message, and 1 MB)" in str(caught.value)
    assert used.traced < 16 * MiB, used
    assert used.rss_growth < 100 * MiB, used


@pytest.mark.parametrize("drip", ["drip", "bytes"])
def test_a_dripping_listing_stops_at_its_time_bound(imap: HostileImap, drip: str) -> None:
    imap.search = drip  # a line every 0.1 s, or a byte every 0.05 s: each read inside the 0.5 s timeout
    with imap.connector(IMAP_LIMITS) as source, pytest.raises(SourceUnavailable) as caught:
        source.items()
    assert "stopped: no complete answer within 2 seconds" in str(caught.value)
    assert imap.commands[-1] == "UID SEARCH"
    assert imap.dripped < 80  # the client left at its 2 s bound (~40 bytes), not when the drip ended (120)


# ----- a hostile Git repository -----

BIG = 32 * MiB
HISTORY = 10_000
NOTES = 10_000
GIT_LIMITS = FetchLimits(max_bytes=1_000_000, timeout_seconds=30, total_seconds=30, attempts=1, backoff_seconds=0.05,
                         max_items=20_000)


def fast_import(bare: Path, stream: bytes) -> None:
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(bare.parent), "LC_ALL": "C",
           "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": os.devnull}
    for args in (["git", "init", "--quiet", "--bare", "--initial-branch=main", str(bare)],
                 ["git", "--git-dir", str(bare), "fast-import", "--quiet"]):
        done = subprocess.run(args, input=stream if "fast-import" in args else None, env=env, capture_output=True,
                              timeout=120)
        assert done.returncode == 0, done.stderr.decode(errors="replace")


def _data(content: bytes) -> bytes:
    return b"data %d\n%s\n" % (len(content), content)


def _commit(number: int, message: str, changes: list[bytes]) -> bytes:
    return (b"commit refs/heads/main\nmark :%d\ncommitter T <t@example.org> %d +0000\n" % (number, 1_700_000_000 + number)
            + _data(message.encode()) + b"".join(changes))


@pytest.fixture(scope="module")
def hostile_repo(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[GitHttpServer, str]]:
    """A bare repository served by git's smart HTTP on 127.0.0.1: a first commit with symbolic links
    out of the repository (a file's, a folder's), a 32 MiB blob, a readme and 10,000 notes, then
    10,000 commits each changing a log, the last one renaming the readme."""
    root = tmp_path_factory.mktemp("hostile-git")
    first = [b"M 100644 :1 big.md\n",
             b"M 120000 inline passwd.md\n" + _data(b"/etc/passwd"),
             b"M 120000 inline up.md\n" + _data(b"../../../secrets.md"),
             b"M 120000 inline root\n" + _data(b"/"),
             b"M 100644 inline readme.md\n" + _data(b"# Readme\n\nThe one page a reader wants.\n"),
             *(b"M 100644 inline notes/n%05d.md\n" % n + _data(b"# Note %d\n" % n) for n in range(NOTES))]
    stream = [b"blob\nmark :1\n" + _data(b"# Big\n\n" + b"a" * (BIG - 7)), _commit(2, "the first commit", first)]
    for n in range(HISTORY):
        changes = [b"M 100644 inline log.md\n" + _data(b"# Log\n\nEntry %d.\n" % n)]
        if n == HISTORY - 1:
            changes.append(b"R readme.md guide/readme.md\n")
        stream.append(_commit(3 + n, f"entry {n}", changes))
    fast_import(root / "origin.git", b"".join(stream))
    with GitHttpServer(root) as server:
        yield server, f"{server.url}/origin.git"


def git_source(repository: str, tmp_path: Path, limits: FetchLimits = GIT_LIMITS,
               cursor: dict | None = None) -> GitConnector:
    context = SyncContext(source_name="hostile-git", workspace="default", limits=limits, cursor=cursor or {},
                          allow_hosts=("127.0.0.1",))
    return GitConnector(GitConfig(repository=repository, cache_dir=str(tmp_path / "cache")), context)


def test_a_hostile_repository_is_listed_within_its_bounds(hostile_repo: tuple[GitHttpServer, str],
                                                          tmp_path: Path) -> None:
    _, url = hostile_repo
    with peak() as used:
        source = git_source(url, tmp_path)
        items = {item.id: item for item in source.items()}
        link = items["passwd.md"]
        big = items["big.md"]
        fetched = {i: source.fetch(items[i], None) for i in ("guide/readme.md", "log.md")}
        lied = Item(**{**big.__dict__, "failed": None, "meta": {"blob": big.version}})  # no size: asked of git
        with pytest.raises(ItemFailed) as asked:
            source.fetch(lied, None)
        small = Item(**{**big.__dict__, "failed": None, "meta": {"blob": big.version, "size": 10}})
        with pytest.raises(ItemFailed) as read:
            source.fetch(small, None)  # listed small, the blob larger: git is stopped past the bound
    assert len(items) == 6 + NOTES  # the tip's tree: one item per file, whatever the history
    assert link.skip == SKIP_LINK and items["up.md"].skip == SKIP_LINK and items["root"].skip == SKIP_LINK
    assert big.failed == f"the file is {BIG} bytes, more than the 1000000 bytes a file may have"
    assert str(asked.value) == big.failed
    assert str(read.value) == "the file cannot be read from the repository: git cat-file printed more than " \
                              "1000000 bytes"
    assert fetched["guide/readme.md"].data.startswith(b"# Readme")
    assert fetched["log.md"].data == b"# Log\n\nEntry %d.\n" % (HISTORY - 1)
    assert used.traced < 64 * MiB, used  # the 32 MiB blob never held; the 10,006 items are what is kept
    assert used.rss_growth < 100 * MiB, used
    narrow = FetchLimits(**{**GIT_LIMITS.__dict__, "max_items": 5_000})
    with pytest.raises(SourceUnavailable, match="more than 5000 files under the source's paths"):
        git_source(url, tmp_path / "narrow", narrow).items()


def test_a_rename_is_found_across_ten_thousand_commits(hostile_repo: tuple[GitHttpServer, str],
                                                       tmp_path: Path) -> None:
    server, url = hostile_repo
    first = subprocess.run(["git", "--git-dir", str(server.root / "origin.git"), "rev-parse", "main~9999"],
                           capture_output=True, check=True, env={"PATH": os.environ.get("PATH", "")}).stdout.decode()
    source = git_source(url, tmp_path, cursor={"commit": first.strip(), "branch": "main"})
    items = {item.id: item for item in source.items()}
    assert items["guide/readme.md"].moved_from == "readme.md"


# ----- git is given the address that was checked -----

def test_git_connects_to_the_checked_address_not_a_second_answer(hostile_repo: tuple[GitHttpServer, str],
                                                                  tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """A name whose first answer (the check's) is 127.0.0.1 and whose next (git's own) would be
    another: ".invalid" never resolves, so git reaches the server only through the pinned address."""
    server, url = hostile_repo
    port = server.httpd.server_address[1]
    asked: list[str] = []

    def first_answer(host: str, port: int, allow_hosts: tuple[str, ...] = ()) -> list[str]:
        asked.append(host)
        return ["127.0.0.1"]

    monkeypatch.setattr("rag.sources.git.resolve", first_answer)
    source = git_source(f"http://rebound.invalid:{port}/origin.git", tmp_path)
    assert "guide/readme.md" in {item.id for item in source.items()}
    assert asked == ["rebound.invalid"]
    assert server.seen[-1]["host"] == f"rebound.invalid:{port}"  # the name kept for the server


def test_the_checked_addresses_are_pinned_for_each_transport() -> None:
    env = git_env(protocol="https", timeout=5, token=None, username="x")
    count = int(env["GIT_CONFIG_COUNT"])
    https = pinned(env, protocol="https", host="forge.example", port=443, addresses=["203.0.113.7", "2001:db8::7"])
    assert https["GIT_CONFIG_COUNT"] == str(count + 1) and env["GIT_CONFIG_COUNT"] == str(count)
    assert https[f"GIT_CONFIG_KEY_{count}"] == "http.curloptResolve"
    assert https[f"GIT_CONFIG_VALUE_{count}"] == "forge.example:443:203.0.113.7,[2001:db8::7]"
    ssh = pinned(git_env(protocol="ssh", timeout=5, token=None, username="x"), protocol="ssh", host="forge.example",
                 port=22, addresses=["203.0.113.7"])
    assert ssh["GIT_SSH_COMMAND"].endswith(" -o HostName=203.0.113.7 -o HostKeyAlias=forge.example")
    assert pinned(env, protocol="https", host="203.0.113.7", port=443, addresses=["203.0.113.7"]) == env  # a literal
    assert pinned_url("git://forge.example:9419/org/repo.git", "git", "forge.example", ["2001:db8::7"]) == \
        "git://[2001:db8::7]:9419/org/repo.git"
    assert pinned_url("git://forge.example/repo.git", "git", "forge.example", ["203.0.113.7"]) == \
        "git://203.0.113.7/repo.git"
    assert pinned_url("https://forge.example/repo.git", "https", "forge.example", ["203.0.113.7"]) == \
        "https://forge.example/repo.git"  # https keeps its name (TLS checks it); curl is given the address
