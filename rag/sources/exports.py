"""What the Notion and Confluence export connectors share: reading an export, a zip or the folder it
unpacks to, without trusting it.

An export is a file a person downloaded and put on the server's disk, so its zip is untrusted
input: its directory can name thousands of members, claim sizes it does not keep, or hold a
member that inflates a thousandfold (a zip bomb). Nothing is ever extracted to disk; members are
read into memory one at a time, in bounded steps:

- the listing refuses (SourceUnavailable) a zip that cannot be read, that holds more members than
  `ExportBounds.max_members`, whose members claim more than `max_total_bytes` together, or that
  names a member outside the export (an absolute path or a `..` part: a real export never does,
  a crafted one would escape any folder it were unpacked into);
- a member larger than `max_member_bytes` (the source's `limits.max_bytes`), or one that claims a
  compression ratio past `max_ratio`, or that inflates past what its header claims, fails as one
  item (ItemFailed) and the sync goes on; a read past the item's time bound fails the same way.

Notion splits a big export into parts and zips those again ("Export-…-Part-1.zip" inside the
download): a zip member at the export's top level is opened as a part (one level, no deeper), its
members counted against the same bounds and merged into one tree.

A member's `token` is what its version is built from: the CRC-32 the zip keeps of the member's
uncompressed bytes with its size (a hash of the bytes the listing gets without inflating
anything), and for a folder a BLAKE2 hash of the file's bytes. `zipfile` shares one file position
between readers, so every read holds the export's lock: `fetch` is called from several threads.
"""

from __future__ import annotations

import hashlib
import os
import threading
import time
import unicodedata
import zipfile
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any, BinaryIO, ClassVar, Iterable, Iterator, Mapping
from urllib.parse import urlsplit

from pydantic import Field, field_validator

from rag.ingest.formats import document_suffixes
from rag.sources.base import (
    Connector, Fetched, FetchLimits, Item, ItemFailed, SourceConfig, SourceUnavailable, SyncContext,
)

_STEP = 1 << 16
_BIDI_CONTROLS = frozenset("\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")
_DIRECTORY_ENTRY_BYTES = 46 + 1024  # a directory entry's fixed part and room for its name and extras
_CODE_SKIP = "a code or config file of a kind ingest does not read (its suffix is not in the formats list)"
_CODE_SUFFIXES = {
    ".py", ".js", ".ts", ".tsx", ".jsx", ".java", ".go", ".rs", ".c", ".h", ".cpp", ".hpp", ".cs", ".rb",
    ".php", ".sh", ".sql", ".json", ".yaml", ".yml", ".toml", ".ini", ".cfg", ".xml", ".css", ".kt", ".swift",
}
_IMAGE_SUFFIXES = {".png", ".jpg", ".jpeg", ".gif", ".svg", ".webp", ".bmp", ".tif", ".tiff", ".ico", ".heic"}


@dataclass(frozen=True)
class ExportBounds:
    """How much of an export is read. `from_limits` ties them to the source's fetch limits."""

    max_members: int = 500_000
    max_total_bytes: int = 50 * 1024**3
    max_member_bytes: int = 50 * 1024 * 1024
    max_ratio: float = 200.0  # uncompressed / compressed; deflate reaches ~1032 on repeated bytes only
    ratio_floor: int = 1024 * 1024  # smaller members are not ratio-checked (a small text compresses well)
    total_seconds: float = 120.0

    @classmethod
    def from_limits(cls, limits: FetchLimits) -> ExportBounds:
        # Members are pages plus their images and attachments: room for twenty per listed item.
        members = min(cls.max_members, max(100, 20 * limits.max_items))
        return cls(max_members=members, max_total_bytes=min(cls.max_total_bytes, members * limits.max_bytes),
                   max_member_bytes=limits.max_bytes, total_seconds=limits.total_seconds)


@dataclass(frozen=True)
class Member:
    """One file of the export: `name` relative to the export's root, with `/` between parts."""

    name: str
    size: int
    token: str
    refused: str | None = None  # why reading it fails (too large, a suspicious ratio), known from the listing

    @property
    def parts(self) -> tuple[str, ...]:
        return tuple(self.name.split("/"))

    @property
    def suffix(self) -> str:
        return PurePosixPath(self.name).suffix.lower()


def skip_reason(filename: str) -> str | None:
    """None for a format the parsers read, else why an attachment of this name is listed but not taken."""
    suffix = PurePosixPath(filename).suffix.lower()
    if suffix in document_suffixes():
        return None
    if suffix in _CODE_SUFFIXES:
        return _CODE_SKIP
    if suffix in _IMAGE_SUFFIXES:
        return "images are not read (no text to index)"
    return f"the {suffix or 'extensionless'} format is not read"


def clean_title(title: str) -> str:
    """A title as the store takes it: white space folded, control and bidirectional-control
    characters (an untrusted export may hold them) dropped."""
    kept = "".join(ch for ch in title if unicodedata.category(ch) != "Cc" and ch not in _BIDI_CONTROLS)
    return " ".join(kept.split())


def folder_name(title: str) -> str:
    """A title as a folder of the path and a part of the label: `/` and `\\` join those parts, so
    a title's own ("CI/CD") become "-"; "", "." and ".." are no name."""
    name = clean_title(title).replace("/", "-").replace("\\", "-")
    return "Untitled" if name in ("", ".", "..") else name


def version_of(member: Member, *salt: str) -> str:
    """The item's version: the member's token, with what else changes the bytes `fetch` returns
    (the base URL that rewritten links point at)."""
    return hashlib.sha256("\x1f".join((member.token, *salt)).encode()).hexdigest()[:32]


def _safe_name(raw: str) -> str | None:
    """The member's name with `/` separators; None for a folder entry; SourceUnavailable for a name
    outside the export."""
    name = raw.replace("\\", "/")
    if name.endswith("/"):
        return None
    parts = name.split("/")
    if name.startswith("/") or (parts[0].endswith(":") and len(parts[0]) == 2) or ".." in parts or "\x00" in name:
        raise SourceUnavailable(f"the export names a file outside itself ({raw[:80]!r}); refused as unsafe")
    cleaned = "/".join(part for part in parts if part not in ("", "."))
    return cleaned or None


class Export:
    """An export opened for reading: its members, and a bounded read of one."""

    def __init__(self, bounds: ExportBounds) -> None:
        self.bounds = bounds
        self._lock = threading.Lock()
        self.members: dict[str, Member] = {}

    def read(self, member: Member, deadline: float | None = None) -> bytes:
        """The member's bytes, or ItemFailed (past a bound, damaged, gone)."""
        if member.refused:
            raise ItemFailed(member.refused)
        limit = self.bounds.max_member_bytes
        deadline = deadline if deadline is not None else time.monotonic() + self.bounds.total_seconds
        with self._lock:
            try:
                with self._open(member) as stream:
                    return _bounded(stream, min(limit, member.size), deadline)
            except ItemFailed:
                raise
            except Exception:  # noqa: BLE001 (zlib.error, a bad CRC, a file gone: one item, never the sync)
                raise ItemFailed("the file is damaged in the export and cannot be read") from None

    def _open(self, member: Member) -> BinaryIO:
        raise NotImplementedError

    def close(self) -> None:
        return None

    def _add(self, member: Member) -> None:
        if member.name in self.members:  # a name twice (across Notion's parts): the first is kept
            return
        if len(self.members) >= self.bounds.max_members:
            raise SourceUnavailable(f"the export holds more than {self.bounds.max_members} files; refused")
        self.members[member.name] = member

    def _bomb(self, size: int, compressed: int | None) -> bool:
        return compressed is not None and size > self.bounds.ratio_floor and size > self.bounds.max_ratio * max(compressed, 1)

    def _refusal(self, size: int, compressed: int | None) -> str | None:
        if size > self.bounds.max_member_bytes:
            return f"larger than {self.bounds.max_member_bytes} bytes, the bound on one item"
        if self._bomb(size, compressed):
            return "compressed more than any real document is (a zip bomb?); refused"
        return None


def _bounded(stream: BinaryIO, limit: int, deadline: float) -> bytes:
    """At most `limit` bytes: more is a member bigger than it claimed (or than a bound); a read
    still going at `deadline` is stopped."""
    chunks: list[bytes] = []
    total = 0
    while chunk := stream.read(_STEP):
        total += len(chunk)
        if total > limit:
            raise ItemFailed("the file inflates past the size it declares or the bound on one item; refused")
        if time.monotonic() > deadline:
            raise ItemFailed("reading the file took longer than the bound on one item")
        chunks.append(chunk)
    return b"".join(chunks)


class ZipExport(Export):
    def __init__(self, path: Path, bounds: ExportBounds) -> None:
        super().__init__(bounds)
        self._parts: dict[str, zipfile.ZipFile] = {}
        self._where: dict[str, tuple[zipfile.ZipFile, zipfile.ZipInfo]] = {}
        try:
            with path.open("rb") as stream:
                self._check_directory(stream)
            self._zip = zipfile.ZipFile(path)
            self._list(self._zip, top=True, total=0)
        except SourceUnavailable:
            self.close()
            raise
        except (zipfile.BadZipFile, zipfile.LargeZipFile, OSError, EOFError, ValueError, NotImplementedError):
            self.close()
            raise SourceUnavailable("the export is not a readable zip file (damaged or truncated?)") from None

    def _check_directory(self, stream: BinaryIO) -> None:
        """Refuse a zip whose end record declares more members (or a bigger directory) than the
        bound before zipfile reads its directory, which makes an object of every member: a crafted
        directory of millions would take gigabytes first."""
        end_record = getattr(zipfile, "_EndRecData", None)  # zipfile's own reader of that record
        if end_record is None:
            return
        record = end_record(stream)
        if record is None:
            raise zipfile.BadZipFile("no end record")
        entries, size = int(record[zipfile._ECD_ENTRIES_TOTAL]), int(record[zipfile._ECD_SIZE])
        if entries > self.bounds.max_members or size > self.bounds.max_members * _DIRECTORY_ENTRY_BYTES:
            raise SourceUnavailable(f"the export holds more than {self.bounds.max_members} files; refused")

    def _list(self, archive: zipfile.ZipFile, top: bool, total: int) -> int:
        infos = archive.infolist()
        if len(infos) > self.bounds.max_members:
            raise SourceUnavailable(f"the export holds more than {self.bounds.max_members} files; refused")
        for info in infos:
            name = _safe_name(info.filename)
            if name is None:
                continue
            total += info.file_size
            if total > self.bounds.max_total_bytes:
                raise SourceUnavailable(
                    f"the export's files add up to more than {self.bounds.max_total_bytes} bytes; refused")
            if top and "/" not in name and name.lower().endswith(".zip"):
                total = self._part(archive, info, total)
                continue
            self._where.setdefault(name, (archive, info))
            self._add(Member(name, info.file_size, f"crc32:{info.CRC:08x}:{info.file_size}",
                             self._refusal(info.file_size, info.compress_size)))
        return total

    def _part(self, archive: zipfile.ZipFile, info: zipfile.ZipInfo, total: int) -> int:
        """A part of a split Notion export: a zip inside the zip, read in place (never in memory)."""
        if self._bomb(info.file_size, info.compress_size):
            raise SourceUnavailable("a part of the export is compressed past any real export; refused")
        try:
            stream = archive.open(info)  # a ZipExtFile seeks: the part is never held whole
            self._check_directory(stream)
            part = zipfile.ZipFile(stream)
        except (zipfile.BadZipFile, zipfile.LargeZipFile, OSError, EOFError, ValueError, NotImplementedError):
            raise SourceUnavailable(f"a part of the export ({info.filename[:80]}) is not a readable zip") from None
        self._parts[info.filename] = part
        return self._list(part, top=False, total=total)

    def _open(self, member: Member) -> BinaryIO:
        archive, info = self._where[member.name]
        return archive.open(info)

    def close(self) -> None:
        for part in self._parts.values():
            part.close()
        if getattr(self, "_zip", None) is not None:
            self._zip.close()


class FolderExport(Export):
    """An unpacked export. Links are not followed (a link could point anywhere on the disk)."""

    def __init__(self, root: Path, bounds: ExportBounds) -> None:
        super().__init__(bounds)
        self.root = root
        total = 0
        for path in self._walk():
            size = path.stat().st_size
            total += size
            if total > bounds.max_total_bytes:
                raise SourceUnavailable(f"the export's files add up to more than {bounds.max_total_bytes} bytes; refused")
            refused = self._refusal(size, None)
            name = path.relative_to(root).as_posix()
            self._add(Member(name, size, "" if refused else self._hash(path), refused))

    def _walk(self) -> Iterator[Path]:
        seen = 0
        for directory, folders, files in os.walk(self.root, followlinks=False):
            folders.sort()
            for file in sorted(files):
                path = Path(directory, file)
                if path.is_symlink() or not path.is_file():
                    continue
                seen += 1
                if seen > self.bounds.max_members:
                    raise SourceUnavailable(f"the export holds more than {self.bounds.max_members} files; refused")
                yield path

    def _hash(self, path: Path) -> str:
        digest = hashlib.blake2b(digest_size=16)
        with path.open("rb") as stream:
            while chunk := stream.read(_STEP):
                digest.update(chunk)
        return "blake2b:" + digest.hexdigest()

    def _open(self, member: Member) -> BinaryIO:
        # A file swapped for a link since the listing is not followed out of the export.
        return os.fdopen(os.open(self.root / member.name, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0)), "rb")


def open_export(path: str, limits: FetchLimits, bounds: ExportBounds | None = None) -> Export:
    """The export at `path` (a zip, or the folder it was unpacked to); SourceUnavailable when there
    is none or it cannot be read."""
    where = Path(path).expanduser()
    bounds = bounds or ExportBounds.from_limits(limits)
    try:
        if where.is_dir():
            return FolderExport(where, bounds)
        if where.is_file():
            return ZipExport(where, bounds)
    except OSError:
        raise SourceUnavailable("the export cannot be read from the server's disk") from None
    raise SourceUnavailable(f"no export at {path} (a zip file or an unpacked export folder)")


class ExportConfig(SourceConfig):
    """An export's settings: where it lies on the server's disk, and the workspace's URL."""

    path: str = Field(min_length=1)  # a zip file, or the folder it was unpacked to
    base_url: str | None = None  # the workspace's address, for the links back to each page

    @field_validator("base_url")
    @classmethod
    def _web_address(cls, value: str | None) -> str | None:
        if value is None:
            return None
        if urlsplit(value).scheme not in ("http", "https") or not urlsplit(value).netloc:
            raise ValueError("base_url must be an http(s) address such as https://example.atlassian.net/wiki")
        return value.rstrip("/")


class ExportConnector(Connector):
    """What both export connectors do the same way: open the export once per sync, list it once,
    refuse a listing past `max_items`, and read one member per fetch. Subclasses say how a tree
    of members becomes items (`_list`) and how a member's bytes become what the parsers read
    (`_render`)."""

    Config: ClassVar[type[SourceConfig]] = ExportConfig
    bounds: ClassVar[ExportBounds | None] = None  # None: from the source's limits (ExportBounds.from_limits)

    def __init__(self, config: SourceConfig, context: SyncContext) -> None:
        super().__init__(config, context)
        self._lock = threading.Lock()
        self._export: Export | None = None
        self._items: list[Item] | None = None

    @classmethod
    def local_paths(cls, config: SourceConfig) -> dict[str, str]:
        return {"path": config.path} if isinstance(config, ExportConfig) else {}

    @property
    def settings(self) -> ExportConfig:
        assert isinstance(self.config, ExportConfig)
        return self.config

    def export(self) -> Export:
        with self._lock:
            if self._export is None:
                self._export = open_export(self.settings.path, self.context.limits, self.bounds)
            return self._export

    def listing(self) -> list[Item]:
        """The items, listed once per connector (a fetch before `items()` lists too: links need them)."""
        export = self.export()
        with self._lock:
            if self._items is None:
                items = self._list(export)
                if len(items) > self.context.limits.max_items:
                    raise SourceUnavailable(
                        f"the export holds more than {self.context.limits.max_items} items, this source's bound")
                self._items = items
            return self._items

    def items(self) -> Iterable[Item]:
        return list(self.listing())

    def fetch(self, item: Item, previous: Mapping[str, Any] | None) -> Fetched:
        deadline = time.monotonic() + self.context.limits.total_seconds
        self.listing()
        if item.failed:  # the listing could not read it already
            raise ItemFailed(item.failed)
        export = self.export()
        member = export.members.get(str(item.meta.get("member", "")))
        if member is None:
            raise ItemFailed("the file is no longer in the export")
        data = export.read(member, deadline)
        return Fetched(data=self._render(item, data))

    def close(self) -> None:
        with self._lock:
            if self._export is not None:
                self._export.close()
                self._export = None

    def _list(self, export: Export) -> list[Item]:
        raise NotImplementedError

    def _render(self, item: Item, data: bytes) -> bytes:
        return data
