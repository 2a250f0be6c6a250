"""The folder connector: a directory tree on the server's disk, as `rag ingest DIR` has always read it.

What the walk takes: regular files of a format `rag.ingest.formats` reads (Markdown, text, PDF, HTML,
Word), and links to such files that stay inside the folder. An item's id is its path relative to the
folder and its version the SHA-256 of its bytes, so a file is unchanged while its bytes are (a
touched file is not read again, and an edit made through the API to its document survives until
the file itself changes). It never opens anything else, and says so: a link that leaves the folder
(or is broken) is a failure; a hidden name, a link to a directory (never followed, so no loop), a
FIFO, socket or device, a file that looks like a secret (a key, credentials, an environment file,
text holding a private key: rag/ingest/formats/code.py) and any other suffix are skipped with the
reason.

Listing reads each file once to hash it; fetching reads it again and checks it is still the file
the walk found (a file swapped for a FIFO or another file in between is not read).
"""

from __future__ import annotations

import hashlib
import os
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator, Mapping

from rag.ingest.formats import BINARY_PARSERS, supported_suffixes
from rag.ingest.formats.code import secret_reason
from rag.sources.base import Connector, Fetched, Item, ItemFailed, SourceConfig, SourceUnavailable

HIDDEN = "a hidden name (it starts with a dot)"
NOT_READ = "not a file type ingest reads (its formats: docs/service.md)"


class FolderConfig(SourceConfig):
    path: str


class _NotRegular(Exception):
    """Not a regular file (a FIFO, a socket, a device): skipped, never opened for reading."""


class _Refused(Exception):
    """A link that cannot be followed (it leaves the folder, is broken or loops): a failure."""


def _kind(mode: int) -> str:
    for test, name in (
        (stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISSOCK, "a socket"), (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"), (stat.S_ISDIR, "a directory"),
    ):
        if test(mode):
            return f"{name}, not a regular file"
    return "not a regular file"


@dataclass
class _Found:
    """A file the walk will read: `target` is the regular file itself, or a link's target inside the root."""

    path: Path
    rel: str
    target: Path
    identity: tuple[int, int]  # (device, inode) when found: what is read must still be that file

    @classmethod
    def check(cls, root: Path, path: Path) -> _Found:
        """Raises _Refused for a link that cannot be followed, _NotRegular for what is never opened."""
        info = os.lstat(path)
        target = path
        if stat.S_ISLNK(info.st_mode):
            try:
                target = Path(os.path.realpath(path, strict=True))
            except FileNotFoundError:
                raise _Refused("a broken link (its target does not exist)") from None
            except (OSError, RuntimeError):
                raise _Refused("a link that cannot be resolved (a loop of links)") from None
            if not target.is_relative_to(root):
                raise _Refused("a link to a file outside the ingested folder; refused")
            info = os.stat(target)
        if not stat.S_ISREG(info.st_mode):
            raise _NotRegular(_kind(info.st_mode))
        return cls(path, path.relative_to(root).as_posix(), target, (info.st_dev, info.st_ino))

    def read(self) -> bytes:
        """The file's bytes. Opened without blocking and without following a link, then checked
        again: a file swapped for a FIFO, a device or another file since the walk is not read."""
        fd = os.open(self.target, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC)
        with os.fdopen(fd, "rb") as stream:
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode):
                raise _NotRegular(_kind(info.st_mode))
            if (info.st_dev, info.st_ino) != self.identity:
                raise ValueError("it was replaced while the folder was read; run the ingest again")
            return stream.read()


def _entry(rel: str, skip: str | None = None, failed: str | None = None) -> Item:
    """What the walk saw but does not take: reported, never read."""
    return Item(id=rel, version="", filename=Path(rel.rstrip("/")).name, label=rel, skip=skip, failed=failed)


def _message(exc: OSError | ValueError) -> str:
    return exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)


def discover(root: Path) -> Iterator[Item | _Found]:
    """Walk the tree (links to directories are listed, never entered: os.walk's default): each file
    to read as a _Found, everything skipped or refused as an Item saying why."""
    errors: list[OSError] = []
    for dirpath, dirnames, filenames in os.walk(root, onerror=errors.append):
        while errors:
            exc = errors.pop()
            rel = Path(exc.filename).relative_to(root).as_posix() if exc.filename else "?"
            yield _entry(rel, failed=exc.strerror or "cannot be read")
        here = Path(dirpath)
        entered = []
        for name in sorted(dirnames):
            rel = (here / name).relative_to(root).as_posix() + "/"
            if name.startswith("."):
                yield _entry(rel, skip=HIDDEN)
            elif (here / name).is_symlink():
                yield _entry(rel, skip="a link to a directory (links to directories are not followed)")
            else:
                entered.append(name)
        dirnames[:] = entered
        for name in sorted(filenames):
            yield _file(root, here / name)
    while errors:
        exc = errors.pop()
        yield _entry(Path(exc.filename).relative_to(root).as_posix() if exc.filename else "?",
                     failed=exc.strerror or "cannot be read")


def _file(root: Path, path: Path) -> Item | _Found:
    rel = path.relative_to(root).as_posix()
    secret = secret_reason(path.name)  # .env, id_rsa, *.pem, credentials.json: said, never read
    if secret:
        return _entry(rel, skip=secret)
    if path.name.startswith("."):
        return _entry(rel, skip=HIDDEN)
    if path.suffix.lower() not in supported_suffixes():
        return _entry(rel, skip=NOT_READ)
    try:
        return _Found.check(root, path)
    except _NotRegular as exc:
        return _entry(rel, skip=str(exc))
    except _Refused as exc:
        return _entry(rel, failed=str(exc))
    except OSError as exc:  # gone since the walk listed it, or unreadable metadata
        return _entry(rel, failed=exc.strerror or "cannot be read")


class FolderConnector(Connector):
    kind = "folder"
    provider = "fs"
    Config = FolderConfig
    vanished = "remove"  # as `rag ingest` always did: a file deleted from the folder leaves the knowledge base
    moves_by_version = False  # a renamed file is a new document, as `rag ingest` always made it

    def __init__(self, config: FolderConfig, context, kb_name: str | None = None) -> None:
        super().__init__(config, context)
        self.kb_name = kb_name
        root = Path(config.path).expanduser()
        if not root.exists():
            raise SourceUnavailable(f"{config.path}: no such directory")
        if not root.is_dir():
            raise SourceUnavailable(f"{config.path}: not a directory (rag ingest imports a directory tree)")
        self.root = root.resolve()
        self._found: dict[str, tuple[_Found, bytes | None]] = {}

    @classmethod
    def local_paths(cls, config: FolderConfig) -> dict[str, str]:
        return {"path": config.path}

    def resource(self) -> str:
        """`fs:workspace:knowledge base:path`, the ids `rag ingest` has always given."""
        return self.kb_name or self.context.source_name

    def items(self) -> Iterator[Item]:
        for found in discover(self.root):
            if isinstance(found, Item):
                yield found
                continue
            try:
                data = found.read()
            except _NotRegular as exc:  # it became a FIFO or the like after the walk saw it
                yield _entry(found.rel, skip=str(exc))
                continue
            except (OSError, ValueError) as exc:
                yield _entry(found.rel, failed=_message(exc))
                continue
            secret = None if found.path.suffix.lower() in BINARY_PARSERS else secret_reason(found.path.name, data)
            if secret:  # a text or code file holding a private key
                yield _entry(found.rel, skip=secret)
                continue
            self._found[found.rel] = (found, None)
            yield Item(id=found.rel, version=hashlib.sha256(data).hexdigest(), filename=found.path.name,
                       path=tuple(Path(found.rel).parent.parts), label=found.rel)

    def fetch(self, item: Item, previous: Mapping[str, Any] | None) -> Fetched:
        found, _ = self._found[item.id]
        try:
            data = found.read()
        except (_NotRegular, OSError, ValueError) as exc:
            raise ItemFailed(_message(exc) if not isinstance(exc, _NotRegular) else str(exc)) from None
        version = hashlib.sha256(data).hexdigest()
        return Fetched(data=data, version=version)
