"""The connector interface: list items, fetch an item's bytes. Nothing here touches the store.

A connector is built from its source's checked settings (`Config`, a pydantic model) and a
`SyncContext` (the secret the source names, what the previous sync left, the bounds). The sync
engine calls `items()` once per sync, compares each item's `version` with what it stored, and
calls `fetch()` for the new and changed items only, from a few threads at once (a connector's
`fetch` must be safe to call concurrently). A connector never reads the environment, never logs a
secret and never puts one in an error's message.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, ClassVar, Iterable, Mapping

from pydantic import AfterValidator, BaseModel, ConfigDict

from rag.ingest.parse import ParsedDocument
from rag.ingest.read import parse_bytes
from rag.ingest.sandbox import ParsingStopped
from rag.sources.addresses import check_allow_hosts


# A source's own list of hosts (names or addresses): it may only narrow RAG_SOURCES__ALLOW_HOSTS.
AllowHosts = Annotated[list[str], AfterValidator(check_allow_hosts)]


class SourceConfig(BaseModel):
    """Base of every connector's settings: unknown keys are refused, so a typo is an error."""

    model_config = ConfigDict(extra="forbid", frozen=True)


@dataclass(frozen=True)
class Item:
    """One thing a source holds, as its listing describes it.

    `id` is stable for the item's life in the source (a page id, an object key, a path) and becomes
    the last part of the document's source id `provider:org:resource:item`. `version` changes
    whenever the content may have (an ETag, a blob id, modification time and size, a hash): an item
    whose version is the one last synced is not fetched again.
    """

    id: str
    version: str
    filename: str  # its suffix chooses the parser (".md", ".html", ".pdf", ...)
    title: str | None = None  # the original's own title; None: the parser's (a heading, the file name)
    url: str | None = None  # where a reader opens the original (http(s) or file), shown with answers
    path: tuple[str, ...] = ()  # folders in the source's own hierarchy, under the source's target folder
    label: str | None = None  # in the connector's words, after "provider:" (default: the path and title)
    moved_from: str | None = None  # the id this item had before, when the listing saw a rename or move
    skip: str | None = None  # listed but not taken, and why (reported as skipped; the item is not archived)
    failed: str | None = None  # listed but unreadable already, and why (reported as a failure)
    meta: Mapping[str, Any] = field(default_factory=dict)  # what `fetch` needs (a blob id, a zip member)


@dataclass
class Fetched:
    """An item's bytes. `state` is kept with the item and handed back as `previous` on the next
    sync (an ETag and Last-Modified for a conditional request). A connector that reads a format
    itself (a web page's main content) returns `parsed`; the engine then skips the parsers."""

    data: bytes
    filename: str | None = None  # a better name than the listing's, once the fetch knows (a content type)
    state: dict[str, Any] = field(default_factory=dict)
    version: str | None = None  # the version the fetch saw, when it differs from the listing's
    parsed: ParsedDocument | None = None
    url: str | None = None  # where it was finally found (after redirects), when not the item's
    warnings: list[str] = field(default_factory=list)  # reported with the item, beside its parse's (links cut)


class BodyTooLarge(Exception):
    """A body past its bound (`read_bounded`)."""


class BodyTooSlow(Exception):
    """A body not read by its deadline (`read_bounded`)."""


def read_bounded(chunks: Iterable[bytes], limit: int, deadline: float) -> bytes:
    """A body from its chunks, stopped one chunk past `limit` bytes (a server may send more than it
    said) and at `deadline` (time.monotonic()): BodyTooLarge, BodyTooSlow."""
    kept: list[bytes] = []
    size = 0
    for chunk in chunks:
        size += len(chunk)
        if size > limit:
            raise BodyTooLarge()
        if time.monotonic() > deadline:
            raise BodyTooSlow()
        kept.append(chunk)
    return b"".join(kept)


def size_words(count: int) -> str:
    """A byte count as an error message says it: "12.3 MB", "2,048 bytes"."""
    return f"{count / 1024 / 1024:.1f} MB" if count >= 1024 * 1024 else f"{count:,} bytes"


class NotModified(Exception):
    """A conditional fetch answered "not modified": the stored document stays as it is."""


class ItemFailed(Exception):
    """One item cannot be fetched (a 404, a body past the size bound, a refused address): the sync
    reports it with this message and goes on. The message names no secret and no internal."""


class SourceUnavailable(Exception):
    """The source cannot be listed at all (unreachable, refused credentials, a broken export): the
    sync stops without archiving anything, and says this message. `transient` ones are retried."""

    def __init__(self, message: str, transient: bool = False) -> None:
        super().__init__(message)
        self.transient = transient


def parse_in_worker(data: bytes, filename: str, caller: str, stopped: str) -> ParsedDocument:
    """A connector's own reading of untrusted bytes (a page's links, a sitemap, an export's page) by
    an internal suffix, in a parse worker under its bounds, as the sync's `caller` (its fair share,
    SyncContext.parse_caller). UnreadableFile passes through; the service stopping ends the sync as
    a retryable SourceUnavailable saying `stopped`, so nothing is archived."""
    try:
        return parse_bytes(data, filename, caller=caller)
    except ParsingStopped:
        raise SourceUnavailable(stopped, transient=True) from None


@dataclass(frozen=True)
class FetchLimits:
    """Bounds on what one sync may fetch (rag/settings.py SourceSettings)."""

    max_bytes: int = 50 * 1024 * 1024  # one item's body
    timeout_seconds: float = 30.0  # one request: connecting, and each read
    total_seconds: float = 120.0  # one item's fetch, redirects and retries included
    max_items: int = 100_000  # one listing
    concurrency: int = 4  # fetches at once
    attempts: int = 3  # per transient failure (tenacity), with exponential backoff
    backoff_seconds: float = 0.5


@dataclass
class SyncContext:
    """What a connector is given besides its settings."""

    source_name: str
    workspace: str
    secret: str | None = field(default=None, repr=False)  # the secret the source names, from Settings; never stored
    cursor: Mapping[str, Any] = field(default_factory=dict)  # what `cursor()` returned after the last complete sync
    previous: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)  # item id -> its kept `state`
    limits: FetchLimits = field(default_factory=FetchLimits)
    allow_hosts: tuple[str, ...] = ()  # RAG_SOURCES__ALLOW_HOSTS: reachable although private (tests: 127.0.0.1)
    stop: threading.Event = field(default_factory=threading.Event)  # set: finish the item at hand, then stop
    workdir: Path | None = None  # the source's own directory (a clone, a cache), kept between syncs
    parse_caller: str = ""  # whose files the sync has the parse workers read (their fair share, rag/ingest/sandbox.py)


class Connector:
    """Base of every connector. Subclasses set the class attributes and implement `items` and
    `fetch`; the rest has defaults."""

    kind: ClassVar[str]  # the name `rag source add --kind` takes: "website", "git", ...
    provider: ClassVar[str]  # the first part of its documents' source ids and labels: "web", "git", ...
    Config: ClassVar[type[SourceConfig]]
    needs_secret: ClassVar[bool] = False  # True: a source of this kind must name a secret
    # What a vanished item's document becomes: "archive" (its published version archived, the node and
    # its history kept) or "remove" (the folder connector's, as `rag ingest` always did).
    vanished: ClassVar[str] = "archive"

    def __init__(self, config: SourceConfig, context: SyncContext) -> None:
        self.config = config
        self.context = context

    @classmethod
    def local_paths(cls, config: SourceConfig) -> dict[str, str]:
        """The settings of `config` that name a path on this server, by setting (a folder, an
        export, a local repository): the service checks each against the operator's roots
        (rag/service/sources/local.py) and gives the connector the resolved path."""
        return {}

    def resource(self) -> str:
        """The third part of the source ids (`provider:org:resource:item`): by default the source's name."""
        return self.context.source_name

    def items(self) -> Iterable[Item]:
        """Every item the source holds now. Raises SourceUnavailable when it cannot be listed."""
        raise NotImplementedError

    def fetch(self, item: Item, previous: Mapping[str, Any] | None) -> Fetched:
        """The item's bytes. `previous`: the state kept from its last fetch (None the first time).
        Raises NotModified, ItemFailed, or SourceUnavailable(transient=True) for a retryable failure."""
        raise NotImplementedError

    def listing_warnings(self) -> list[tuple[str, str]]:
        """(what, warning) the last `items` found worth reporting without failing (a sitemap cut):
        the engine adds them to the sync's warnings."""
        return []

    def cursor(self) -> dict[str, Any]:
        """Kept after a sync that listed everything, handed back as `context.cursor` next time."""
        return {}

    def close(self) -> None:
        return None

    def __enter__(self) -> Connector:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
