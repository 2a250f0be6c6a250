"""The IMAP mailbox connector (kind "imap", provider "imap"): every message of a few folders of one
account, each message one document read by the mail format (rag/ingest/formats/mail.py).

Why it is built the way it is:
- A message is named by its folder, the folder's UIDVALIDITY and its UID (RFC 3501 2.3.1.1: the
  three together name one message for ever; the server changes UIDVALIDITY when it can no longer
  keep its UIDs). That triple is the item id, `folder/UID` its label, and its URL the RFC 5092 IMAP
  URL `imap://user@host:port/folder;UIDVALIDITY=v/;UID=n`.
- Incremental by UID: each sync asks the folder for its UIDs (`UID SEARCH ALL`: a deleted message
  is one the answer no longer holds, and the engine takes it out of search); a UID whose version
  an earlier sync kept (the state of its fetch) is listed from that alone. Only the UIDs never seen
  are looked at, a batch at a time (`batch` UIDs per `UID FETCH`), for their size and a few header
  fields (Message-ID, Date, From, Subject): the version is a hash of those and the size, the same
  for the same message under any UID. A message's bytes are fetched once.
- A changed UIDVALIDITY makes every UID of the folder a new item: the folder is listed again from
  the start, header fields and all, and each message whose version is that of a document the
  vanished UIDs made keeps that document (the engine's move by version), so nothing is duplicated
  and an unchanged message is not downloaded again; a message that is new is read, one that is
  gone is taken out.
- The mailbox is only read: folders are opened with EXAMINE and bodies fetched with BODY.PEEK, so
  no \\Seen flag changes and nothing is expunged.
- Bounds: a message's size (the sync's max item bytes, or a tighter `max_message_bytes`): one
  listed larger is reported failed without being fetched, and a fetch asks for at most one byte
  more than the bound (`BODY.PEEK[]<0.n>`), so a message that grew is refused without being read
  whole. Each socket read is bounded by the sync's request timeout and one message's fetch by its
  item timeout (reads are made in 64 KB steps, the deadline checked at each).
- A hostile server is bounded too: a literal (`{N}`) announced past one message's bound (plus the
  byte asked for) is refused before a byte of it is read, and the connection closed; every
  command's answer (a listing's SEARCH and header FETCHes, a message's FETCH) is read within the
  item timeout and a budget of one message's bound plus 1 MiB, each line counted with what
  keeping it costs (64 bytes more), so an endless or dripping answer stops at its bound; a header
  FETCH keeps only the UIDs it asked for, so the listing holds at most `max_items` messages.
- Security: `ssl` (TLS from the first byte, port 993) or `starttls` (port 143, then STARTTLS before
  anything is sent); the certificate is verified against the host name, by the system's roots or
  the CA file the source names (a self-signed server). `none` (no TLS: the password in clear) is
  refused for any host but a loopback one. The host is resolved and checked by the address rule
  (rag/sources/addresses.py) and the connection goes to the checked address. The password is the
  source's secret (`context.secret`: RAG_SOURCE_SECRETS__<NAME> or its _FILE form), sent with
  AUTHENTICATE PLAIN (UTF-8) where the server offers it, else LOGIN; it is never in a message.
- Errors say what went wrong in the user's words; no server text is repeated.
"""

from __future__ import annotations

import hashlib
import imaplib
import ipaddress
import re
import socket
import ssl
import threading
import time
from typing import Any, Iterable, Literal, Mapping
from urllib.parse import quote

from pydantic import Field, field_validator, model_validator

from rag.sources.addresses import AddressRefused, narrowed, resolve
from rag.sources.base import (
    AllowHosts,
    Connector,
    Fetched,
    Item,
    ItemFailed,
    SourceConfig,
    SourceUnavailable,
    SyncContext,
    size_words as _size,
)

_CHUNK = 64 * 1024
_HEADER_FIELDS = "MESSAGE-ID DATE FROM SUBJECT"
_RECORD = re.compile(rb"^\d+ \(")
_UID = re.compile(rb"\bUID (\d+)")
_SIZE = re.compile(rb"\bRFC822\.SIZE (\d+)")
_LOOPBACK_NAMES = {"localhost", "localhost.localdomain"}


class ImapConfig(SourceConfig):
    """An account's settings; its password is the source's secret."""

    host: str
    port: int | None = Field(None, ge=1, le=65535)  # default: 993 for ssl, 143 otherwise
    security: Literal["ssl", "starttls", "none"] = "ssl"
    username: str = Field(min_length=1, max_length=320)
    folders: list[str] = Field(default_factory=lambda: ["INBOX"], min_length=1, max_length=100)
    ca_file: str | None = None  # a PEM file of the CA (or the self-signed certificate) to trust
    allow_hosts: AllowHosts = Field(default_factory=list)  # narrows RAG_SOURCES__ALLOW_HOSTS
    batch: int = Field(200, ge=1, le=5000)  # UIDs per FETCH while listing
    max_message_bytes: int | None = Field(None, ge=1024)  # tighter than the sync's max item bytes

    @field_validator("host")
    @classmethod
    def _host(cls, value: str) -> str:
        value = value.strip()
        bare = value[1:-1] if value.startswith("[") and value.endswith("]") else value
        if not bare or any(c.isspace() or c in "/@?#[]" for c in bare) or (":" in bare and bare == value):
            raise ValueError("host is a host name or an address (an IPv6 one in brackets), without a port or a scheme")
        return value

    @field_validator("username")
    @classmethod
    def _username(cls, value: str) -> str:
        if _controls(value):
            raise ValueError("username holds no control characters")
        return value

    @field_validator("folders")
    @classmethod
    def _folders(cls, value: list[str]) -> list[str]:
        for folder in value:
            if not folder.strip() or len(folder) > 500 or _controls(folder):
                raise ValueError(f"{folder!r} is not a folder name")
        if len(set(value)) != len(value):
            raise ValueError("a folder is named twice")
        return value

    @model_validator(mode="after")
    def _plain_text(self) -> ImapConfig:
        if self.security == "none" and not _loopback(self.host):
            raise ValueError("security none (no TLS: the password in clear) is for a server on this machine "
                             "only; use ssl or starttls")
        return self

    @property
    def effective_port(self) -> int:
        return self.port or (993 if self.security == "ssl" else 143)


def _controls(text: str) -> bool:
    return any(ord(c) < 32 or c == "\x7f" for c in text)


def _loopback(host: str) -> bool:
    name = host.strip("[]").lower()
    if name in _LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def mailbox_name(folder: str) -> str:
    """A folder's name as IMAP writes it: modified UTF-7 (RFC 3501 5.1.3), quoted."""
    out, pending = [], ""

    def flush() -> None:
        nonlocal pending
        if pending:
            import base64

            encoded = base64.b64encode(pending.encode("utf-16-be")).decode("ascii").rstrip("=")
            out.append("&" + encoded.replace("/", ",") + "-")
            pending = ""

    for ch in folder:
        if 0x20 <= ord(ch) <= 0x7E:
            flush()
            out.append("&-" if ch == "&" else ch)
        else:
            pending += ch
    flush()
    name = "".join(out)
    return '"' + name.replace("\\", "\\\\").replace('"', '\\"') + '"'


def uid_sets(uids: list[int]) -> Iterable[str]:
    """IMAP sequence sets ("3:7,9") of the UIDs, one per run of consecutive ones, joined up to ~900 chars."""
    runs: list[str] = []
    start = previous = None
    for uid in sorted(uids):
        if start is None:
            start = previous = uid
        elif uid == previous + 1:
            previous = uid
        else:
            runs.append(f"{start}:{previous}" if start != previous else str(start))
            start = previous = uid
    if start is not None:
        runs.append(f"{start}:{previous}" if start != previous else str(start))
    line: list[str] = []
    for run in runs:
        if line and sum(len(r) + 1 for r in line) + len(run) > 900:
            yield ",".join(line)
            line = []
        line.append(run)
    if line:
        yield ",".join(line)


def fetch_records(data: list[Any]) -> list[tuple[bytes, bytes | None]]:
    """imaplib's answer to a FETCH as (its item names and values, its literal or None) per message:
    a message's answer is a tuple (the text up to a literal, the literal) and then bytes that go on
    (b" UID 7)"), or plain bytes when it holds no literal."""
    records: list[tuple[bytes, bytes | None]] = []
    for part in data:
        if isinstance(part, tuple):
            records.append((part[0], part[1]))
        elif isinstance(part, bytes):
            if _RECORD.match(part) or not records:
                records.append((part, None))
            else:
                meta, literal = records[-1]
                records[-1] = (meta + b" " + part, literal)
    return records


class AnswerRefused(Exception):
    """A server's answer past a bound (its size, announced or read, or its time): the connection is
    dropped unread. Not an OSError nor imaplib's error, so that imaplib passes it through as it is."""


_LINE_COST = 64  # what keeping one line of an answer costs besides its bytes (a bytes object, a list entry)
_SLACK = 1024 * 1024  # an answer's bytes besides its literal: the FETCH's item names, untagged lines


class _Deadline:
    """A connection's reads, bounded: each by `timeout` seconds, each command's answer by
    `command_seconds` and `budget` bytes and a literal by `literal` bytes, all of one task by a
    deadline (`until`)."""

    def __init__(self, timeout: float, command_seconds: float, literal: int) -> None:
        self.timeout = timeout
        self.command_seconds = command_seconds
        self.literal = literal
        self.budget = literal + _SLACK
        self.until: float | None = None
        self.spent = 0
        self.command_until = time.monotonic() + command_seconds

    def command(self) -> None:
        """A command begins: its answer gets the whole budget and time."""
        self.spent = 0
        self.command_until = time.monotonic() + self.command_seconds

    def count(self, size: int) -> None:
        self.spent += size
        if self.spent > self.budget:
            raise AnswerRefused(f"an answer past {_size(self.budget)} (the bound of one message, and 1 MB)")

    def expired(self) -> None:
        """AnswerRefused once the command's time is over (a read that timed out: which bound it was)."""
        if self.command_until <= time.monotonic():
            raise AnswerRefused(f"no complete answer within {self.command_seconds:g} seconds")

    def left(self, sock: socket.socket) -> None:
        self.expired()
        now = time.monotonic()
        remaining = self.command_until - now if self.until is None else min(self.until, self.command_until) - now
        if remaining <= 0:
            raise TimeoutError("past the deadline")
        sock.settimeout(min(self.timeout, remaining))


class _Bounded:
    """What the two IMAP classes below share: connecting to checked addresses, bounded reads."""

    _addresses: list[str]
    deadline: _Deadline
    sock: socket.socket
    file: Any

    def _open_socket(self, host: str, port: int, timeout: float | None) -> socket.socket:
        failure: OSError | None = None
        for address in self._addresses:
            try:
                return socket.create_connection((address, port), timeout)
            except OSError as exc:
                failure = exc
        raise failure or OSError("no address to connect to")

    def _command(self, name: str, *args: Any) -> Any:
        self.deadline.command()
        return super()._command(name, *args)  # type: ignore[misc]

    def read(self, size: int) -> bytes:
        """A literal of `size` bytes (imaplib reads nothing else with it), refused unread past the bound."""
        if size > self.deadline.literal:
            raise AnswerRefused(f"the server announced {_size(size)} at once, past the bound of "
                                f"{_size(self.deadline.literal)}")
        self.deadline.count(size)
        chunks, left = [], size
        while left > 0:
            chunk = self._timed(self.file.read1, min(left, _CHUNK))  # one socket read at most
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
        return b"".join(chunks)

    def readline(self) -> bytes:
        """A line of at most imaplib's `_MAXLINE` bytes, read one socket read at a time, so that the
        deadlines are checked at each (a line dripping a byte at a time within the read timeout too)."""
        parts, size = [], 0
        while True:
            buffered = self._timed(self.file.peek)  # what is buffered, else one socket read's worth
            if not buffered:
                break  # the connection closed: imaplib says so
            end = buffered.find(b"\n")
            part = self.file.read(end + 1 if end >= 0 else len(buffered))  # buffered: no wait
            parts.append(part)
            size += len(part)
            if size > imaplib._MAXLINE:
                raise imaplib.IMAP4.error(f"got more than {imaplib._MAXLINE} bytes")
            if end >= 0:
                break
        self.deadline.count(size + _LINE_COST)
        return b"".join(parts)

    def _timed(self, read: Any, *args: Any) -> bytes:
        self.deadline.left(self.sock)
        try:
            return read(*args)
        except TimeoutError:
            self.deadline.expired()
            raise


class _Plain(_Bounded, imaplib.IMAP4):
    def __init__(self, host: str, port: int, addresses: list[str], deadline: _Deadline) -> None:
        self._addresses, self.deadline = addresses, deadline
        imaplib.IMAP4.__init__(self, host, port, deadline.timeout)

    def _create_socket(self, timeout: float | None) -> socket.socket:
        return self._open_socket(self.host, self.port, timeout)


class _Tls(_Bounded, imaplib.IMAP4_SSL):
    def __init__(self, host: str, port: int, addresses: list[str], deadline: _Deadline,
                 context: ssl.SSLContext) -> None:
        self._addresses, self.deadline = addresses, deadline
        imaplib.IMAP4_SSL.__init__(self, host, port, ssl_context=context, timeout=deadline.timeout)

    def _create_socket(self, timeout: float | None) -> socket.socket:
        return self.ssl_context.wrap_socket(self._open_socket(self.host, self.port, timeout),
                                            server_hostname=self.host.strip("[]"))


class ImapConnector(Connector):
    kind = "imap"
    provider = "imap"
    Config = ImapConfig
    needs_secret = True  # the account's password

    def __init__(self, config: ImapConfig, context: SyncContext) -> None:
        super().__init__(config, context)
        self.config: ImapConfig = config
        self._allow = narrowed(context.allow_hosts, config.allow_hosts)  # a source's own list only narrows
        self._local = threading.local()
        self._lock = threading.Lock()
        self._open: list[imaplib.IMAP4] = []
        limit = context.limits.max_bytes
        self.max_bytes = min(limit, config.max_message_bytes) if config.max_message_bytes else limit

    # ----- connections -----

    def _where(self) -> str:
        return f"{self.config.host}:{self.config.effective_port}"

    def _tls_context(self) -> ssl.SSLContext:
        try:
            return ssl.create_default_context(cafile=self.config.ca_file)
        except (OSError, ssl.SSLError):
            raise SourceUnavailable(f"the CA file {self.config.ca_file} cannot be read as PEM certificates") from None

    def _connection(self) -> imaplib.IMAP4:
        """A new, logged-in connection; SourceUnavailable (transient when the server did not answer)."""
        if not self.context.secret:
            raise SourceUnavailable("the source names no secret: the account's password is the source's secret")
        config, timeout = self.config, self.context.limits.timeout_seconds
        try:
            addresses = resolve(config.host, config.effective_port, self._allow)
        except AddressRefused as exc:
            raise SourceUnavailable(f"the server is refused: {exc}") from None
        imap: imaplib.IMAP4 | None = None
        deadline = _Deadline(timeout, self.context.limits.total_seconds, self.max_bytes + 1)
        try:
            if config.security == "ssl":
                imap = _Tls(config.host, config.effective_port, addresses, deadline, self._tls_context())
            else:
                imap = _Plain(config.host, config.effective_port, addresses, deadline)
                if config.security == "starttls":
                    if "STARTTLS" not in imap.capabilities:
                        raise SourceUnavailable(f"{self._where()} does not offer STARTTLS; refused (no password "
                                                "is sent in clear)")
                    imap.starttls(self._tls_context())
            self._login(imap)
        except SourceUnavailable:
            self._drop(imap)
            raise
        except AnswerRefused as exc:
            self._drop(imap)
            raise SourceUnavailable(f"{self._where()}: {exc}; the connection was closed") from None
        except ssl.SSLCertVerificationError:
            self._drop(imap)
            raise SourceUnavailable(f"{self._where()}: its TLS certificate is not trusted for {config.host} "
                                    "(a self-signed server: name its certificate in ca_file)") from None
        except ssl.SSLError:
            self._drop(imap)
            raise SourceUnavailable(f"{self._where()}: the TLS connection failed") from None
        except imaplib.IMAP4.error:
            self._drop(imap)
            raise SourceUnavailable(f"{self._where()} refused the login of {config.username}: check the user "
                                    "name and the password (the source's secret)") from None
        except OSError:
            self._drop(imap)
            raise SourceUnavailable(f"cannot reach {self._where()} (no answer within the time bound, or the "
                                    "connection failed)", transient=True) from None
        with self._lock:
            self._open.append(imap)
        return imap

    def _login(self, imap: imaplib.IMAP4) -> None:
        user, password = self.config.username, self.context.secret or ""
        if "AUTH=PLAIN" in imap.capabilities:
            imap.authenticate("PLAIN", lambda _: f"\0{user}\0{password}".encode("utf-8"))
        elif "LOGINDISABLED" in imap.capabilities:
            raise SourceUnavailable(f"{self._where()} takes no password login on this connection")
        else:
            imap.login(user, password)

    @staticmethod
    def _drop(imap: imaplib.IMAP4 | None) -> None:
        if imap is None:
            return
        try:
            imap.shutdown()
        except OSError:
            pass

    def _close(self, imap: imaplib.IMAP4) -> None:
        with self._lock:
            if imap in self._open:
                self._open.remove(imap)
        try:
            imap.deadline.until = time.monotonic() + 5  # type: ignore[attr-defined]
            imap.logout()
        except (imaplib.IMAP4.error, OSError):
            self._drop(imap)

    def _examine(self, imap: imaplib.IMAP4, folder: str) -> int:
        """Opens the folder read-only; its UIDVALIDITY."""
        typ, _ = imap.select(mailbox_name(folder), readonly=True)
        if typ != "OK":
            raise SourceUnavailable(f"the folder {folder!r} cannot be opened on {self._where()} (no such folder, "
                                    "or not this account's)")
        _, values = imap.response("UIDVALIDITY")
        try:
            return int(values[-1])
        except (TypeError, ValueError, IndexError):
            raise SourceUnavailable(f"{self._where()} gave folder {folder!r} no UIDVALIDITY") from None

    # ----- listing -----

    def items(self) -> Iterable[Item]:
        """Every message of the folders, read to the end first (a partial listing would make the
        engine take out the messages it did not reach)."""
        imap = self._connection()
        try:
            found: list[Item] = []
            for folder in self.config.folders:
                found.extend(self._folder(imap, folder, len(found)))
            return found
        except AnswerRefused as exc:
            self._drop(imap)
            raise SourceUnavailable(f"listing the folders of {self._where()} stopped: {exc}; the connection was "
                                    "closed") from None
        except (imaplib.IMAP4.error, OSError):
            raise SourceUnavailable(f"listing the folders of {self._where()} failed (the connection broke or the "
                                    "server answered what IMAP does not say)", transient=True) from None
        finally:
            self._close(imap)

    def _folder(self, imap: imaplib.IMAP4, folder: str, listed: int) -> list[Item]:
        validity = self._examine(imap, folder)
        typ, data = imap.uid("SEARCH", None, "ALL")
        if typ != "OK":
            raise SourceUnavailable(f"{self._where()} would not list the messages of folder {folder!r}")
        uids = [int(n) for n in b" ".join(d for d in data if d).split()]
        limit = self.context.limits.max_items
        if listed + len(uids) > limit:
            raise SourceUnavailable(f"the folders hold more than {limit:,} messages (the listing bound); "
                                    "name fewer folders")
        known: dict[int, Mapping[str, Any]] = {}
        unseen: list[int] = []
        for uid in uids:
            state = self.context.previous.get(self._id(folder, validity, uid)) or {}
            if state.get("version"):
                known[uid] = state
            else:
                unseen.append(uid)
        items = [self._item(folder, validity, uid, str(state["version"]), int(state.get("size") or 0))
                 for uid, state in known.items()]
        for start in range(0, len(unseen), self.config.batch):
            if self.context.stop.is_set():
                raise SourceUnavailable("the sync was stopped before the listing ended")
            items.extend(self._looked_at(imap, folder, validity, unseen[start:start + self.config.batch]))
        return items

    def _looked_at(self, imap: imaplib.IMAP4, folder: str, validity: int, uids: list[int]) -> list[Item]:
        """Items for UIDs never seen: their sizes and header fields fetched, the version made of them."""
        items: list[Item] = []
        wanted = set(uids)  # a UID not asked for, or given twice, is no message of this listing
        for uid_set in uid_sets(uids):
            typ, data = imap.uid("FETCH", uid_set, f"(UID RFC822.SIZE BODY.PEEK[HEADER.FIELDS ({_HEADER_FIELDS})])")
            if typ != "OK":
                raise SourceUnavailable(f"{self._where()} would not give the headers of folder {folder!r}",
                                        transient=True)
            for meta, literal in fetch_records(data):
                uid, size = _UID.search(meta), _SIZE.search(meta)
                if uid is None or int(uid.group(1)) not in wanted:
                    continue  # an unsolicited FETCH (a flag changed elsewhere)
                wanted.discard(int(uid.group(1)))
                fields = b" ".join((literal or b"").split()).lower()
                length = int(size.group(1)) if size else 0
                version = hashlib.sha256(fields + b"\0" + str(length).encode()).hexdigest()[:40]
                items.append(self._item(folder, validity, int(uid.group(1)), version, length))
        return items

    def _id(self, folder: str, validity: int, uid: int) -> str:
        return f"{folder}/{validity}/{uid}"

    def _item(self, folder: str, validity: int, uid: int, version: str, size: int) -> Item:
        failed = None
        if size > self.max_bytes:
            failed = f"{folder}/{uid} is {_size(size)}, past the bound of {_size(self.max_bytes)} for one message"
        path = () if len(self.config.folders) == 1 else tuple(p for p in folder.replace(".", "/").split("/") if p)
        return Item(id=self._id(folder, validity, uid), version=version, filename=f"{uid}.eml", url=self.url(
            folder, validity, uid), path=path, label=f"{folder}/{uid}", failed=failed,
            meta={"folder": folder, "uidvalidity": validity, "uid": uid, "size": size})

    def url(self, folder: str, validity: int, uid: int) -> str:
        """The message's IMAP URL (RFC 5092)."""
        host = self.config.host
        port = "" if self.config.effective_port == (993 if self.config.security == "ssl" else 143) \
            else f":{self.config.effective_port}"
        scheme = "imaps" if self.config.security == "ssl" else "imap"
        mailbox = quote(mailbox_name(folder)[1:-1].replace('\\"', '"').replace("\\\\", "\\"), safe="/&,-.")
        return f"{scheme}://{quote(self.config.username, safe='')}@{host}{port}/{mailbox};UIDVALIDITY={validity}/;UID={uid}"

    # ----- fetching -----

    def fetch(self, item: Item, previous: Mapping[str, Any] | None) -> Fetched:
        folder, validity, uid = item.meta["folder"], int(item.meta["uidvalidity"]), int(item.meta["uid"])
        imap = self._thread_connection()
        imap.deadline.until = time.monotonic() + self.context.limits.total_seconds  # type: ignore[attr-defined]
        try:
            if getattr(self._local, "folder", None) != (folder, validity):
                self._local.folder = None
                if self._examine(imap, folder) != validity:
                    raise ItemFailed(f"folder {folder!r} was renumbered (its UIDVALIDITY changed) during the sync; "
                                     "the next sync reads it again")
                self._local.folder = (folder, validity)
            typ, data = imap.uid("FETCH", str(uid), f"(UID RFC822.SIZE BODY.PEEK[]<0.{self.max_bytes + 1}>)")
        except AnswerRefused as exc:
            self._forget()
            raise ItemFailed(f"fetching {folder}/{uid} stopped: {exc}; the connection was closed") from None
        except (imaplib.IMAP4.abort, OSError):
            self._forget()
            raise SourceUnavailable(f"fetching {folder}/{uid}: the connection broke or timed out",
                                    transient=True) from None
        except imaplib.IMAP4.error:
            raise ItemFailed(f"{self._where()} would not give message {folder}/{uid}") from None
        finally:
            imap.deadline.until = None  # type: ignore[attr-defined]
        body = next((literal for meta, literal in fetch_records(data) if literal is not None
                     and (m := _UID.search(meta)) and int(m.group(1)) == uid), None) if typ == "OK" else None
        if body is None:
            raise ItemFailed(f"{folder}/{uid} is no longer in folder {folder!r}")
        if len(body) > self.max_bytes:
            raise ItemFailed(f"{folder}/{uid} is larger than the bound of {_size(self.max_bytes)} for one message")
        return Fetched(data=body, state={"version": item.version, "size": len(body)})

    def _thread_connection(self) -> imaplib.IMAP4:
        imap = getattr(self._local, "imap", None)
        if imap is None:
            imap = self._local.imap = self._connection()
            self._local.folder = None
        return imap

    def _forget(self) -> None:
        imap = getattr(self._local, "imap", None)
        self._local.imap = self._local.folder = None
        if imap is not None:
            with self._lock:
                if imap in self._open:
                    self._open.remove(imap)
            self._drop(imap)

    def close(self) -> None:
        with self._lock:
            connections = list(self._open)
        for imap in connections:
            self._close(imap)
