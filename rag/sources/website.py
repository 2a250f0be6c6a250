"""The website connector: a bounded crawl of a site, each page (and each linked PDF, Word or text
file) one item, kept in sync with conditional requests.

Listing is a breadth-first crawl from the start URLs and the pages a sitemap names (sitemap
indexes followed, at most `_MAX_SITEMAPS` sitemaps), staying inside the prefix (by default each
start URL's directory and the sitemap's site root), obeying robots.txt (RFC 9309: a 4xx means no
rules; a robots.txt that cannot be read stops the listing, since crawling nothing would archive
the whole site), up to `max_pages` URLs (and `limits.max_items`) and `max_depth` links from a start
URL. URLs are normalised (scheme and host in lower case, default port and fragment dropped) and a
redirect's target is the page, so one page is one item.

Why the listing fetches pages. Links are only known from a page's body, so a crawl must read
pages; the listing therefore decides each item's version from what it read: version is a hash of
the body, not the ETag, so a server that changes ETags (or has none) on the same bytes does not
make the engine re-parse and re-embed an unchanged page. Each request is conditional on the ETag
and Last-Modified of the item's previous fetch (`Fetched.state`, which the engine hands back in
`context.previous`) or, where the engine hands none back, of the last listing, which the connector
records in the source's workdir with each page's links inside the prefix (kept there, not in the
store's per-item state, since every page repeats the site's navigation). On a 304 the listing
takes the version and the links from those states, so a re-sync of an unchanged site costs one 304
per page and no parsing at all. The bodies the listing read are kept (up to `_KEEP_BYTES`
together) for `fetch` to return without a second request; past that cap, or in a later sync,
`fetch` asks again conditionally and raises NotModified on a 304.

A page that fails in the listing (a 500 after the retries, a refused redirect, a timeout, a body
past the size bound) is still listed, with `Item.failed` saying why, so that the engine reports it
and its previous document stays (a `fetch` of it raises ItemFailed with the same reason); the
crawl goes on through the links the page had last time. A 404 or 410 drops the page from the
listing (it is gone: the engine archives it). A start URL or a sitemap that fails stops the listing
(SourceUnavailable): a partial listing would archive what it missed.

A page's links are read in a parse worker (`_page_facts`, rag/ingest/formats/webpage.py
`parse_links`: a streaming read that builds no tree), never in the serving process: at most
`MAX_LINKS` hrefs of a page come back, of which the first `_MAX_LINKS` distinct ones inside the
prefix are followed; a page whose links were cut says so in the sync's warnings ("links cut: …").
A sitemap is read in a parse worker too (`_read_sitemap`, `parse_sitemap`): at most
`MAX_SITEMAP_LOCS` URLs of each, and no more nested sitemaps are queued than `_MAX_SITEMAPS`
allows; each cut is one of the listing's warnings (`listing_warnings`).

A page's bytes go to the engine named "<slug>.webpage": the parse worker extracts its main content
(rag/ingest/formats/webpage.py, trafilatura); a linked file keeps its suffix (Content-Type decides
when the URL has none) so the existing parsers read it. Links to other file types are listed as
skipped with the reason, without being downloaded. All HTTP goes through rag/sources/http.py
(SSRF checks on every host and redirect, size, time and retry bounds).
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import os
import re
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping
from urllib.parse import unquote, urljoin, urlsplit, urlunsplit
from urllib.robotparser import RobotFileParser

from pydantic import Field, field_validator, model_validator

from rag.ingest.formats import UnreadableFile, document_suffixes
from rag.ingest.formats.webpage import MAX_LINKS, MAX_SITEMAP_LOCS
from rag.sources.addresses import narrowed
from rag.sources.base import (
    Connector,
    Fetched,
    Item,
    ItemFailed,
    NotModified,
    SourceConfig,
    SourceUnavailable,
    parse_in_worker,
)
from rag.sources.http import Bounds, FetchFailed, HttpFetcher, Response

_KEEP_BYTES = 64 * 1024 * 1024  # bodies the listing keeps for `fetch`, all together
_MAX_SITEMAPS = 50
_MAX_LINKS = 1000  # links of one page the listing keeps (inside the prefix only)
_STOPPED = "the sync was stopped before the site was listed"  # the service stopped while a worker read for it
_ROBOTS_BYTES = 512 * 1024  # RFC 9309 asks crawlers to read at least 500 KiB
_PAGE_TYPES = {"text/html", "application/xhtml+xml"}
_PAGE_SUFFIXES = {"", ".html", ".htm", ".xhtml", ".shtml", ".php", ".asp", ".aspx", ".jsp"}
_FILE_TYPES = {
    "application/pdf": ".pdf", "text/plain": ".txt", "text/markdown": ".md", "text/x-markdown": ".md",
    "application/vnd.openxmlformats-officedocument.wordprocessingml.document": ".docx",
}
_CODE_SUFFIXES = {".py", ".js", ".mjs", ".ts", ".sh", ".json", ".yaml", ".yml", ".toml", ".ini", ".cfg", ".xml",
                  ".css", ".go", ".rs", ".java", ".c", ".h", ".cpp", ".rb", ".ipynb", ".sql"}
_UNSAFE_NAME = re.compile(r"[^A-Za-z0-9._-]+")
_FAILED = "failed"
_STATE_FILE = "website-listing.json"  # in the source's workdir: what the last listing saw


def _file_suffixes() -> set[str]:
    """What a linked file may be: whatever the parsers read, but HTML, which is a page here."""
    return document_suffixes() - {".html", ".htm"}


def _checked_url(value: str, what: str) -> str:
    parts = urlsplit(value.strip())
    if parts.scheme.lower() not in ("http", "https"):
        raise ValueError(f"{what} must be an http or https URL")
    if parts.username is not None or parts.password is not None:
        raise ValueError(f"{what} must not carry credentials")
    try:
        parts.port  # noqa: B018 - raises on a port that is not a number
    except ValueError:
        raise ValueError(f"{what} has an invalid port") from None
    if not parts.hostname:
        raise ValueError(f"{what} has no host")
    return value.strip()


class Config(SourceConfig):
    start_urls: list[str] = Field(default_factory=list, max_length=100)
    sitemap: str | None = None
    prefix: str | None = None  # URLs it stays inside; default: start URLs' directories, the sitemap's site root
    max_pages: int = Field(1000, ge=1, le=100_000)
    max_depth: int = Field(5, ge=0, le=100)
    allow_hosts: list[str] = Field(default_factory=list, max_length=100)  # narrows RAG_SOURCES__ALLOW_HOSTS
    user_agent: str = Field("rag-sync/0.1", min_length=1, max_length=200, pattern=r"^[\x20-\x7e]+$")
    include_files: bool = True  # linked PDF, Word and text files

    @field_validator("start_urls")
    @classmethod
    def _start_urls(cls, value: list[str]) -> list[str]:
        return [_checked_url(url, "a start URL") for url in value]

    @field_validator("sitemap", "prefix")
    @classmethod
    def _one_url(cls, value: str | None) -> str | None:
        return None if value is None else _checked_url(value, "the sitemap and the prefix")

    @model_validator(mode="after")
    def _something_to_crawl(self) -> Config:
        if not self.start_urls and not self.sitemap:
            raise ValueError("a website source needs start_urls, a sitemap, or both")
        return self


def normalize(url: str) -> str | None:
    """The URL one page is known by, or None for what is not an http(s) page URL."""
    try:
        parts = urlsplit(url.strip())
        port = parts.port
    except ValueError:
        return None
    scheme = parts.scheme.lower()
    if scheme not in ("http", "https") or not parts.hostname or parts.username is not None:
        return None
    host = parts.hostname.lower()
    host = f"[{host}]" if ":" in host else host
    netloc = host if port is None or port == {"http": 80, "https": 443}[scheme] else f"{host}:{port}"
    return urlunsplit((scheme, netloc, parts.path or "/", parts.query, ""))


def _directory(url: str) -> str:
    parts = urlsplit(url)
    return urlunsplit((parts.scheme, parts.netloc, parts.path[: parts.path.rfind("/") + 1] or "/", "", ""))


def _suffix(url: str) -> str:
    last = unquote(urlsplit(url).path).rsplit("/", 1)[-1]
    return "." + last.rsplit(".", 1)[1].lower() if "." in last.strip(".") else ""


def _conditional(state: Mapping[str, Any] | None) -> dict[str, str]:
    headers: dict[str, str] = {}
    if state and state.get("etag"):
        headers["If-None-Match"] = str(state["etag"])
    if state and state.get("last_modified"):
        headers["If-Modified-Since"] = str(state["last_modified"])
    return headers


def _complete(state: Mapping[str, Any] | None) -> bool:
    """Whether a state holds what a 304 needs: the version, and a page's links (the engine's state
    has none: they are in the listing's record)."""
    if not state or not state.get("version"):
        return False
    return not str(state.get("filename", "")).endswith(".webpage") or isinstance(state.get("links"), list)


def _skip_reason(suffix: str, content_type: str = "") -> str:
    if suffix in _CODE_SUFFIXES:
        return "a code or config file of a kind ingest does not read (its suffix is not in the formats list)"
    if suffix == ".csv" or content_type == "text/csv":
        return "CSV files are read once the formats issue (32) lands"
    return f"a file type this service does not read ({suffix or content_type or 'unknown'})"


@dataclass
class _Page:
    """What the listing learned of one URL."""

    url: str
    item: Item | None  # None: nothing to list (gone, outside the prefix, noindex)
    links: list[str] = field(default_factory=list)
    failure: str | None = None  # why it cannot be read now
    transient: bool = False  # that failure may pass (a 5xx, a timeout)
    kept: Fetched | None = None
    state: Mapping[str, Any] | None = None  # what the next listing asks conditionally with


@dataclass
class _Facts:
    """What the listing needs of a page's HTML: its links (absolute, at most MAX_LINKS of the page),
    its robots meta, and why its links were cut (None: none were)."""

    links: list[str]
    noindex: bool = False
    nofollow: bool = False
    cut: str | None = None


def _page_facts(body: bytes, url: str, caller: str = "") -> _Facts:
    """A page's links and robots meta (noindex, nofollow), read in a parse worker (rag/ingest/formats/
    webpage.py `parse_links`, under the workers' bounds of memory, time and output): the serving
    process gets back at most MAX_LINKS hrefs, never the page's tree (issue 49: a 45 MiB page of
    links took it to 2.9 GB). Its title is the parser's (trafilatura's reading of `<title>`,
    `og:title` and the first heading, without the site's name)."""
    try:
        found = parse_in_worker(body, "page.weblinks", caller, _STOPPED)
    except UnreadableFile as exc:  # a page no worker can read for links: listed, its links not followed
        return _Facts([], cut=f"its links were not read ({exc})")
    robots = str(found.metadata.get("robots") or "")
    base = found.metadata.get("base")
    base_url = urljoin(url, base) if isinstance(base, str) and base else url
    links = [urljoin(base_url, href) for href in found.body.split("\n") if href]
    cut = f"only its first {MAX_LINKS:,} links were read" if found.metadata.get("cut") else None
    return _Facts(links, "noindex" in robots, "nofollow" in robots, cut)


class WebsiteConnector(Connector):
    """Crawl a site within its prefix; see the module docstring."""

    kind = "website"
    provider = "web"
    Config = Config

    def __init__(self, config: Config, context) -> None:
        super().__init__(config, context)
        self.cfg: Config = config
        limits = context.limits
        allow = narrowed(context.allow_hosts, config.allow_hosts)  # a source's own list only narrows
        self.http = HttpFetcher(
            Bounds(limits.max_bytes, limits.timeout_seconds, limits.total_seconds, limits.attempts,
                   limits.backoff_seconds),
            allow, config.user_agent, stop=context.stop, pool_size=limits.concurrency)
        self.starts = [u for u in (normalize(s) for s in config.start_urls) if u]
        sitemap = normalize(config.sitemap) if config.sitemap else None
        self.sitemap = sitemap
        if config.prefix:
            self.prefixes = [normalize(config.prefix) or config.prefix]
        else:
            roots = [_directory(u) for u in self.starts]
            if sitemap:
                roots.append(_directory(urlunsplit((*urlsplit(sitemap)[:2], "/", "", ""))))
            self.prefixes = list(dict.fromkeys(roots))
        self.site = urlsplit((self.starts or [sitemap or ""])[0]).netloc
        self._robots: dict[str, RobotFileParser] = {}
        self._kept: dict[str, Fetched] = {}
        self._kept_bytes = 0
        self._failed: dict[str, str] = {}
        self._warnings: list[tuple[str, str]] = []  # the listing's (a sitemap cut)
        self._listed_states: dict[str, Mapping[str, Any]] = {}
        self._lock = threading.Lock()
        self.previous = self._states()

    def _states(self) -> dict[str, Mapping[str, Any]]:
        """What the listing asks conditionally with: the states the engine kept (`context.previous`),
        over what the last listing saw (kept in the workdir: a re-sync stays conditional where the
        engine hands no states back). Either is safe: a 304 gives the version that state saw, and
        an item whose version differs from the stored one is fetched with the engine's state."""
        states: dict[str, Mapping[str, Any]] = {}
        workdir = self.context.workdir
        if workdir is not None:
            try:
                saved = json.loads((workdir / _STATE_FILE).read_text("utf-8"))
                states.update({k: v for k, v in saved.items() if isinstance(k, str) and isinstance(v, dict)})
            except (OSError, ValueError, AttributeError):
                pass  # none yet, or unreadable: the listing asks unconditionally
        for item_id, state in self.context.previous.items():  # the engine's state, with the links seen last
            states[item_id] = {**states.get(item_id, {}), **state}
        return states

    def _save_states(self, pages: dict[str, Mapping[str, Any]]) -> None:
        workdir = self.context.workdir
        if workdir is None:
            return
        try:
            workdir.mkdir(parents=True, exist_ok=True)
            partial = workdir / (_STATE_FILE + ".partial")
            partial.write_text(json.dumps(pages), "utf-8")
            os.replace(partial, workdir / _STATE_FILE)
        except OSError:
            pass  # the next listing asks unconditionally: slower, not wrong

    def close(self) -> None:
        self.http.close()

    # ----- names -----

    def item_id(self, url: str) -> str:
        """The URL's path and query, with its host in front when it is not the site's."""
        parts = urlsplit(url)
        local = parts.path + (f"?{parts.query}" if parts.query else "")
        return local if parts.netloc == self.site else f"//{parts.netloc}{local}"

    def _names(self, url: str) -> dict[str, Any]:
        parts = urlsplit(url)
        segments = [unquote(s) for s in parts.path.split("/")[1:]]
        folders = tuple(s for s in segments[:-1] if s)
        if parts.netloc != self.site:
            folders = (parts.netloc, *folders)
        label = (parts.netloc + parts.path).rstrip("/") or parts.netloc
        return {"id": self.item_id(url), "url": url, "path": folders,
                "label": label + (f"?{parts.query}" if parts.query else "")}

    def _filename(self, url: str, suffix: str) -> str:
        last = unquote(urlsplit(url).path).rsplit("/", 1)[-1]
        stem = last[: -len(_suffix(url))] if _suffix(url) else last
        stem = _UNSAFE_NAME.sub("_", stem).strip("._")[:100] or "index"
        return stem + suffix

    def _inside(self, url: str) -> bool:
        return any(url.startswith(prefix) for prefix in self.prefixes)

    # ----- robots.txt -----

    def _allowed(self, url: str) -> bool:
        parts = urlsplit(url)
        origin = f"{parts.scheme}://{parts.netloc}"
        robots = self._robots.get(origin)
        if robots is None:
            robots = self._robots[origin] = self._read_robots(origin)
        return robots.can_fetch(self.cfg.user_agent, url)

    def _read_robots(self, origin: str) -> RobotFileParser:
        robots = RobotFileParser()
        try:
            answer = self.http.get(f"{origin}/robots.txt", max_bytes=_ROBOTS_BYTES)
        except FetchFailed as exc:
            raise SourceUnavailable(f"{origin}/robots.txt cannot be read: {exc}", transient=exc.transient) from None
        if answer.status == 200 and answer.body is not None:
            robots.parse(answer.body.decode("utf-8", errors="replace").splitlines())
        else:  # RFC 9309: a 4xx robots.txt means no rules
            robots.parse([])
        return robots

    # ----- sitemaps -----

    def _sitemap_urls(self) -> list[str]:
        """The page URLs the sitemap names, at most the listing's budget of them; nested sitemaps
        (an index's) read breadth first, at most `_MAX_SITEMAPS` in all. What was left out is said
        in the sync's warnings (`listing_warnings`)."""
        if not self.sitemap:
            return []
        budget = min(self.cfg.max_pages, self.context.limits.max_items)
        found: list[str] = []
        queue, read, unread = [self.sitemap], 0, 0
        while queue and len(found) < budget:
            where = queue.pop(0)
            read += 1
            pages, nested = self._read_sitemap(where)
            found.extend(pages[:budget - len(found)])
            room = _MAX_SITEMAPS - read - len(queue)
            queue.extend(nested[:room])
            unread += max(0, len(nested) - room)
        if unread:
            self._warnings.append((self.sitemap, f"sitemaps cut: {unread:,} nested sitemaps were not read "
                                                 f"(at most {_MAX_SITEMAPS} a listing)"))
        return found

    def _read_sitemap(self, url: str) -> tuple[list[str], list[str]]:
        """A sitemap's page URLs and nested sitemaps, read in a parse worker (rag/ingest/formats/
        webpage.py `parse_sitemap`, a streaming read that builds no tree): the serving process gets
        back at most MAX_SITEMAP_LOCS URLs, never the sitemap's tree (issue 49)."""
        try:
            answer = self.http.get(url)
        except FetchFailed as exc:
            raise SourceUnavailable(f"the sitemap {url} cannot be read: {exc}", transient=exc.transient) from None
        if answer.status != 200 or answer.body is None:
            raise SourceUnavailable(f"the sitemap {url} answered {answer.status}")
        body = answer.body
        if body[:2] == b"\x1f\x8b":
            body = self._gunzip(body, url)
        try:
            found = parse_in_worker(body, "sitemap.sitemap", self.context.parse_caller, _STOPPED)
        except UnreadableFile:
            raise SourceUnavailable(f"the sitemap {url} is not a readable sitemap") from None
        del body
        if found.metadata.get("cut"):
            self._warnings.append((url, f"sitemap cut: only its first {MAX_SITEMAP_LOCS:,} URLs were read"))
        urls = [u for u in (normalize(x) for x in found.body.split("\n") if x) if u]
        return ([], urls) if found.metadata.get("index") else (urls, [])

    def listing_warnings(self) -> list[tuple[str, str]]:
        return list(self._warnings)

    def _gunzip(self, body: bytes, url: str) -> bytes:
        limit = self.context.limits.max_bytes
        try:
            with gzip.GzipFile(fileobj=io.BytesIO(body)) as stream:
                data = stream.read(limit + 1)
        except (OSError, EOFError):
            raise SourceUnavailable(f"the sitemap {url} is not a readable gzip file") from None
        if len(data) > limit:
            raise SourceUnavailable(f"the sitemap {url} is larger than this source reads")
        return data

    # ----- the listing -----

    def items(self) -> Iterable[Item]:
        budget = min(self.cfg.max_pages, self.context.limits.max_items)
        frontier: list[tuple[str, int, bool]] = []
        seen: set[str] = set()
        for url, required in [*((u, True) for u in self.starts), *((u, False) for u in self._sitemap_urls())]:
            self._admit(url, 0, required, seen, frontier, budget)
        listed: dict[str, Item] = {}
        self._listed_states: dict[str, Mapping[str, Any]] = {}
        workers = max(1, self.context.limits.concurrency)
        with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="crawl") as pool:
            while frontier:
                if self.context.stop.is_set():
                    raise SourceUnavailable("the sync was stopped before the site was listed", transient=True)
                pages = list(pool.map(lambda entry: self._visit(entry[0]), frontier))
                frontier = self._next(frontier, pages, listed, seen, budget)
        self._save_states(self._listed_states)
        return list(listed.values())

    def _admit(self, url: str, depth: int, required: bool, seen: set[str], frontier: list, budget: int) -> None:
        if url in seen or len(seen) >= budget or not self._inside(url):
            if required and not self._inside(url):
                raise SourceUnavailable(f"the start URL {url} is outside the prefix")
            return
        if not self._allowed(url):
            if required:
                raise SourceUnavailable(f"robots.txt does not allow the start URL {url}")
            return
        seen.add(url)
        frontier.append((url, depth, required))

    def _next(self, frontier: list, pages: list[_Page], listed: dict[str, Item], seen: set[str],
              budget: int) -> list[tuple[str, int, bool]]:
        following: list[tuple[str, int, bool]] = []
        for (url, depth, required), page in zip(frontier, pages):
            if required and (page.failure or (page.item is None and not page.links)):
                raise SourceUnavailable(f"the start URL {url} cannot be read: {page.failure or 'not a page here'}",
                                        transient=page.transient)
            seen.add(page.url)
            refused = page.url != url and not self._allowed(page.url)  # a redirect to where robots.txt says no
            if page.kept is not None and (refused or page.item is None or page.item.id in listed):
                self._reserve(-len(page.kept.data))  # not listed, or an alias of a listed page: its body goes
            if refused:
                continue
            if page.item is not None and page.item.id not in listed:
                self._keep(page)
                listed[page.item.id] = page.item
                if page.state:
                    self._listed_states[page.item.id] = page.state
            if depth < self.cfg.max_depth:
                for link in page.links:
                    self._admit(link, depth + 1, False, seen, following, budget)
        return following

    def _keep(self, page: _Page) -> None:
        """What `fetch` will need of a listed page: its failure, or its body while the cap allows."""
        assert page.item is not None
        with self._lock:
            if page.failure is not None:
                self._failed[page.item.id] = f"{page.url}: {page.failure}"
            elif page.kept is not None:  # its bytes were counted when it was read (`_reserve`)
                self._kept[page.item.id] = page.kept

    def _reserve(self, size: int) -> bool:
        """Whether a body just read may stay in memory for `fetch`: counted at once, from the crawl's
        threads, so that a level of the crawl never holds more than the cap (plus the bodies being
        read); a body past it is dropped and `fetch` asks again."""
        with self._lock:
            if self._kept_bytes + size > _KEEP_BYTES:
                return False
            self._kept_bytes += size
            return True

    def _visit(self, url: str) -> _Page:
        """GET one URL for the listing (conditional on its previous state)."""
        suffix = _suffix(url)
        if suffix not in _PAGE_SUFFIXES and suffix not in _file_suffixes():
            return _Page(url, self._skipped(url, _skip_reason(suffix)) if self.cfg.include_files else None)
        if suffix in _file_suffixes() and not self.cfg.include_files:
            return _Page(url, None)
        previous = self.previous
        try:
            answer = self.http.get(url, conditional=lambda u: _conditional(previous.get(self._id_of(u))))
            if answer.status == 304 and not _complete(previous.get(self._id_of(answer.url))):
                answer = self.http.get(answer.url)  # a 304 tells nothing the listing can use: ask for the body
        except FetchFailed as exc:
            return self._failed_page(url, str(exc), exc.transient)
        return self._answered(url, answer)

    def _id_of(self, url: str) -> str:
        normal = normalize(url)
        return self.item_id(normal) if normal else ""

    def _answered(self, url: str, answer: Response) -> _Page:
        final = normalize(answer.url) or url
        if not self._inside(final):
            return _Page(final, None)
        if answer.status in (404, 410):
            return _Page(final, None)
        if answer.status == 304:
            return self._unchanged(final)
        if answer.status != 200 or answer.body is None:
            return self._failed_page(final, f"the server answered {answer.status}")
        fetched, links, noindex = self._read(final, answer)
        if fetched is None and answer.content_type in _FILE_TYPES:  # a file, and include_files is off
            return _Page(final, None)
        if fetched is None:
            return _Page(final, self._skipped(final, _skip_reason(_suffix(final), answer.content_type)))
        names = self._names(final)
        item = Item(id=names["id"], version=str(fetched.version), filename=str(fetched.filename),
                    url=final, path=names["path"], label=names["label"], meta={"url": final})
        kept = fetched if not noindex and self._reserve(len(fetched.data)) else None
        return _Page(final, None if noindex else item, links, kept=kept, state={**fetched.state, "links": links})

    def _read(self, url: str, answer: Response) -> tuple[Fetched | None, list[str], bool]:
        """A 200 answer as what `fetch` returns, with the page's links and noindex."""
        body = answer.body or b""
        suffix, kind = _suffix(url), answer.content_type
        links: list[str] = []
        noindex = False
        warnings: list[str] = []
        if suffix in _file_suffixes():
            filename = self._filename(url, suffix)
        elif kind in _PAGE_TYPES or (not kind and suffix in (".html", ".htm")):
            facts = _page_facts(body, url, self.context.parse_caller)
            noindex = facts.noindex
            links, dropped = ([], 0) if facts.nofollow else self._inside_links(facts.links)
            cuts = [facts.cut] if facts.cut else []
            if dropped:
                cuts.append(f"{dropped:,} more links inside the prefix were not followed (at most {_MAX_LINKS:,} a page)")
            warnings = [f"links cut: {'; '.join(cuts)}"] if cuts else []
            filename = self._filename(url, ".webpage")
        elif kind in _FILE_TYPES and self.cfg.include_files:
            filename = self._filename(url, _FILE_TYPES[kind])
        else:
            return None, [], False
        version = "sha256:" + hashlib.sha256(body).hexdigest()[:32]
        state = {"etag": answer.header("etag"), "last_modified": answer.header("last-modified"),
                 "version": version, "filename": filename, "url": url}
        fetched = Fetched(data=body, filename=filename, state=state, version=version, url=url, warnings=warnings)
        return fetched, links, noindex

    def _inside_links(self, links: list[str]) -> tuple[list[str], int]:
        """The distinct links inside the prefix, the first `_MAX_LINKS` of them, and how many more there were."""
        kept: dict[str, None] = {}
        dropped: set[str] = set()
        for link in links:
            normal = normalize(link)
            if normal and normal not in kept and self._inside(normal):
                if len(kept) < _MAX_LINKS:
                    kept[normal] = None
                else:
                    dropped.add(normal)
        return list(kept), len(dropped)

    def _unchanged(self, url: str) -> _Page:
        state = self.previous.get(self.item_id(url)) or {}
        names = self._names(url)
        item = Item(id=names["id"], version=str(state.get("version") or _FAILED),
                    filename=str(state.get("filename") or self._filename(url, ".webpage")),
                    url=url, path=names["path"], label=names["label"], meta={"url": url})
        return _Page(url, item, [u for u in state.get("links") or [] if isinstance(u, str)], state=state)

    def _failed_page(self, url: str, reason: str, transient: bool = False) -> _Page:
        state = self.previous.get(self.item_id(url)) or {}
        suffix = _suffix(url)
        names = self._names(url)
        filename = state.get("filename") or self._filename(url, suffix if suffix in _file_suffixes() else ".webpage")
        item = Item(id=names["id"], version=str(state.get("version") or _FAILED), filename=str(filename), url=url,
                    path=names["path"], label=names["label"], failed=f"{url}: {reason}", meta={"url": url})
        links = [u for u in state.get("links") or [] if isinstance(u, str)]
        return _Page(url, item, links, failure=reason, transient=transient, state=state or None)

    def _skipped(self, url: str, reason: str) -> Item:
        names = self._names(url)
        return Item(id=names["id"], version="skipped", filename=self._filename(url, _suffix(url)), url=url,
                    path=names["path"], label=names["label"], skip=reason, meta={"url": url})

    # ----- fetching -----

    def fetch(self, item: Item, previous: Mapping[str, Any] | None) -> Fetched:
        with self._lock:
            kept = self._kept.pop(item.id, None)
            if kept is not None:
                self._kept_bytes -= len(kept.data)
            failure = self._failed.get(item.id)
        if kept is not None:
            return kept
        if failure is not None:
            raise ItemFailed(failure)
        if item.skip:
            raise ItemFailed(item.skip)
        url = str(item.meta.get("url") or item.url)
        try:
            answer = self.http.get(url, headers=_conditional(previous))
        except FetchFailed as exc:
            raise ItemFailed(f"{url}: {exc}") from None
        return self._fetched(url, answer)

    def _fetched(self, url: str, answer: Response) -> Fetched:
        final = normalize(answer.url) or url
        if answer.status == 304:
            raise NotModified(url)
        if not self._inside(final):
            raise ItemFailed(f"{url}: redirects outside this source's prefix")
        if answer.status != 200 or answer.body is None:
            raise ItemFailed(f"{url}: the server answered {answer.status}")
        fetched, _, _ = self._read(final, answer)
        if fetched is None:
            raise ItemFailed(f"{url}: {_skip_reason(_suffix(final), answer.content_type)}")
        return fetched
