"""Bounded, SSRF-safe HTTP GET for the website connector.

A site's URLs come from its settings and from what it serves (links, sitemaps, redirects), so any
of them may point at the service's own loopback, a private network or a metadata endpoint. Every
request here therefore:

- resolves its host through `rag.sources.addresses.resolve` (which refuses private, loopback,
  link-local and metadata addresses unless the source allows the host by name) and connects to the
  address that was checked: the URL's host is replaced by that address, the `Host` header keeps the
  name, and for https the TLS server name (SNI, and so the certificate's hostname check) keeps it
  too, so a certificate is verified for the name as usual while a second DNS answer cannot swap
  the address;
- follows redirects itself (at most `MAX_REDIRECTS`), checking each new host the same way;
- streams the body and stops past `max_bytes` (a declared Content-Length past it is refused before
  reading), with a per-request timeout and a deadline for the whole request, redirects and
  retries included, checked at every socket read (a body dripping slowly stops at the deadline);
- asks for `Accept-Encoding: gzip, deflate` and decodes the body itself from its raw bytes, one
  layer at most, with a bounded decompressor (`zlib` with `max_length`, 64 KiB of output per
  step): the bytes received and the bytes decoded both count against `max_bytes`, so a small
  compressed body that inflates to gigabytes ("gzip, gzip", a bomb) stops one step past the bound.
  A body in stacked encodings or in any other encoding (br, zstd, compress) is refused by name;
- retries connection errors, timeouts and 5xx answers with tenacity (bounded attempts, exponential
  backoff, never past the deadline); a 4xx is an answer, not retried.

Each host gets its own httpx client (its own connection pool): pooled connections are keyed by the
address connected to, and a connection opened for one name must not carry another name's request.
httpx is told not to read the environment (`trust_env=False`): no proxy or netrc of the service's
environment is used, a connector never reads it.
"""

from __future__ import annotations

import re
import ssl
import threading
import time
import zlib
from dataclasses import dataclass, field
from typing import Callable, Iterable, Iterator, Mapping
from urllib.parse import urljoin

import httpx
from tenacity import RetryCallState, Retrying, retry_if_exception_type, stop_after_attempt, wait_exponential

from rag.sources.addresses import AddressRefused, resolve
from rag.sources.base import BodyTooLarge, BodyTooSlow, read_bounded

MAX_REDIRECTS = 5
_REDIRECTS = {301, 302, 303, 307, 308}
_CHUNK = 64 * 1024
_ACCEPT_ENCODING = "gzip, deflate"  # what `_decoded` reads; httpx would also offer br or zstd when installed
_GZIP = {"gzip", "x-gzip"}
_ENCODINGS = _GZIP | {"deflate"}
_UNSAFE = re.compile(r"[^A-Za-z0-9._+-]")


class FetchFailed(Exception):
    """The request gave no usable answer; the message says why in a user's words (no internals).
    `transient`: a retry later may succeed (a 5xx, a timeout, a refused connection)."""

    def __init__(self, message: str, transient: bool = False) -> None:
        super().__init__(message)
        self.transient = transient


class _Retry(Exception):
    """A transient failure of one attempt, retried while attempts and time remain."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


@dataclass
class Response:
    """The final answer after redirects: its status (2xx, 304 or 4xx), headers and body (None
    unless 2xx)."""

    url: str
    status: int
    headers: Mapping[str, str] = field(default_factory=dict)
    body: bytes | None = None

    def header(self, name: str) -> str | None:
        return self.headers.get(name.lower())

    @property
    def content_type(self) -> str:
        return (self.header("content-type") or "").split(";")[0].strip().lower()


@dataclass(frozen=True)
class Bounds:
    """What one `get` may use (from the source's FetchLimits)."""

    max_bytes: int
    timeout_seconds: float
    total_seconds: float
    attempts: int
    backoff_seconds: float


class HttpFetcher:
    """GET with the rules of the module docstring; thread-safe (one client per host, created under
    a lock; httpx clients are safe to share between threads)."""

    def __init__(self, bounds: Bounds, allow_hosts: tuple[str, ...], user_agent: str,
                 stop: threading.Event | None = None, pool_size: int = 4,
                 verify: ssl.SSLContext | None = None) -> None:
        self.bounds = bounds
        self.verify: ssl.SSLContext | bool = verify if verify is not None else True  # a test's own CA; else certifi
        self.allow_hosts = allow_hosts
        self.user_agent = user_agent
        self.stop = stop or threading.Event()
        self.pool_size = max(1, pool_size)
        self._clients: dict[tuple[str, str], httpx.Client] = {}
        self._lock = threading.Lock()

    def close(self) -> None:
        with self._lock:
            clients, self._clients = list(self._clients.values()), {}
        for client in clients:
            client.close()

    def get(self, url: str, headers: Mapping[str, str] | None = None, max_bytes: int | None = None,
            conditional: Callable[[str], Mapping[str, str]] | None = None) -> Response:
        """The answer to GET `url` after redirects. `conditional(url)`: extra headers for each hop
        (If-None-Match for the URL being asked). Raises FetchFailed."""
        deadline = time.monotonic() + self.bounds.total_seconds
        limit = self.bounds.max_bytes if max_bytes is None else min(max_bytes, self.bounds.max_bytes)
        current = url
        for _ in range(MAX_REDIRECTS + 1):
            extra = dict(headers or {})
            if conditional is not None:
                extra.update(conditional(current))
            response = self._retried(current, extra, limit, deadline)
            if response.status not in _REDIRECTS:
                return response
            location = response.header("location")
            if not location:
                raise FetchFailed(f"a redirect ({response.status}) without a Location")
            current = urljoin(current, location.strip())
            if not current.startswith(("http://", "https://")):
                raise FetchFailed("a redirect to a URL that is not http or https")
        raise FetchFailed(f"more than {MAX_REDIRECTS} redirects")

    def _retried(self, url: str, headers: Mapping[str, str], limit: int, deadline: float) -> Response:
        def stop(state: RetryCallState) -> bool:
            wait = self.bounds.backoff_seconds * 2 ** (state.attempt_number - 1)
            return stop_after_attempt(self.bounds.attempts)(state) or time.monotonic() + wait >= deadline \
                or self.stop.is_set()

        retrying = Retrying(stop=stop, wait=wait_exponential(multiplier=self.bounds.backoff_seconds),
                            retry=retry_if_exception_type(_Retry), sleep=self.stop.wait, reraise=True)
        try:
            return retrying(self._once, url, headers, limit, deadline)
        except _Retry as exc:
            raise FetchFailed(exc.message, transient=True) from None

    def _once(self, url: str, headers: Mapping[str, str], limit: int, deadline: float) -> Response:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise FetchFailed(f"no answer within {self.bounds.total_seconds:g} seconds", transient=True)
        target = httpx.URL(url)
        host, port = target.host, target.port or (443 if target.scheme == "https" else 80)
        if not host:
            raise FetchFailed("a URL without a host")
        try:  # the resolver's own timeouts bound the lookup (rag/sources/addresses.py)
            addresses = resolve(host, port, self.allow_hosts)
        except AddressRefused as exc:
            raise FetchFailed(str(exc)) from None
        for address in addresses[:-1]:  # an address that refuses the connection: the next one
            try:
                return self._at(address, target, url, headers, limit, deadline)
            except _Retry as exc:
                if not isinstance(exc.__cause__, httpx.ConnectError):
                    raise
        return self._at(addresses[-1], target, url, headers, limit, deadline)

    def _at(self, address: str, target: httpx.URL, url: str, headers: Mapping[str, str], limit: int,
            deadline: float) -> Response:
        """One attempt at the checked `address`, the URL's name kept for Host and TLS."""
        timeout = httpx.Timeout(max(0.001, min(self.bounds.timeout_seconds, deadline - time.monotonic())))
        request_headers = {"Host": _netloc(target), "User-Agent": self.user_agent,
                           "Accept-Encoding": _ACCEPT_ENCODING, **headers}
        extensions = {"sni_hostname": target.host} if target.scheme == "https" else {}
        client = self._client(target.scheme, target.host)
        try:
            with client.stream("GET", target.copy_with(host=address), headers=request_headers,
                               timeout=timeout, extensions=extensions) as answer:
                return self._read(url, answer, limit, deadline)
        except httpx.TimeoutException:
            raise _Retry(f"no answer within {self.bounds.timeout_seconds:g} seconds") from None
        except httpx.ConnectError as exc:
            if _certificate_refused(exc):
                raise FetchFailed(f"the TLS certificate of {target.host} could not be verified") from None
            raise _Retry("the connection failed") from exc
        except httpx.TransportError:
            raise _Retry("the connection failed") from None

    def _read(self, url: str, answer: httpx.Response, limit: int, deadline: float) -> Response:
        headers = {k.lower(): v for k, v in answer.headers.items()}
        status = answer.status_code
        if status >= 500:
            raise _Retry(f"the server answered {status}")
        if not 200 <= status < 300:
            return Response(url, status, headers)
        declared = headers.get("content-length", "")
        if declared.isdigit() and int(declared) > limit:
            raise FetchFailed(f"larger than this source reads ({int(declared)} bytes, the bound is {limit})")
        encoding = _encoding(headers.get("content-encoding", ""))
        try:
            # the raw bytes as each socket read gives them (at most 64 KiB): the deadline is checked at every
            # read, so a body dripping a byte at a time within the request timeout stops at the deadline
            body = read_bounded(_decoded(answer.iter_raw(), encoding, limit), limit, deadline)
        except BodyTooLarge:
            raise FetchFailed(f"larger than this source reads (past {limit} bytes)") from None
        except BodyTooSlow:
            raise FetchFailed(f"not read within {self.bounds.total_seconds:g} seconds") from None
        return Response(url, status, headers, body)

    def _client(self, scheme: str, host: str) -> httpx.Client:
        key = (scheme, host)
        with self._lock:
            client = self._clients.get(key)
            if client is None:
                client = httpx.Client(
                    trust_env=False, follow_redirects=False, verify=self.verify,
                    limits=httpx.Limits(max_connections=self.pool_size, max_keepalive_connections=self.pool_size))
                self._clients[key] = client
            return client


def _encoding(header: str) -> str:
    """The one encoding of a body ("" for none) from its Content-Encoding; FetchFailed for stacked
    or unknown ones (named, cut to a few safe characters: the server chose them)."""
    layers = [x.strip().lower() for x in header.split(",") if x.strip() and x.strip().lower() != "identity"]
    named = ", ".join(_UNSAFE.sub("?", x)[:20] for x in layers[:4])
    if len(layers) > 1:
        raise FetchFailed(f"a body encoded more than once ({named}) is refused")
    if layers and layers[0] not in _ENCODINGS:
        raise FetchFailed(f"a body in an encoding this source does not read ({named})")
    return layers[0] if layers else ""


def _decoded(raw: Iterable[bytes], encoding: str, limit: int) -> Iterator[bytes]:
    """The body decoded from its `raw` chunks in steps of at most `_CHUNK` bytes of output, so a
    caller that stops past its bound never holds more than one step; BodyTooLarge once the raw
    bytes pass `limit`; FetchFailed for a body that does not decode."""
    if not encoding:
        yield from raw
        return
    inflater = zlib.decompressobj(zlib.MAX_WBITS | 16) if encoding in _GZIP else None
    received = 0
    for chunk in raw:
        received += len(chunk)
        if received > limit:
            raise BodyTooLarge()
        if inflater is None:  # "deflate" is zlib-wrapped (RFC 9110), but some servers send it raw
            inflater = _deflate_inflater(chunk)
        try:
            yield from _inflate(inflater, chunk)
        except zlib.error:
            raise FetchFailed(f"a body that does not decode as {encoding}") from None


def _inflate(inflater: "zlib._Decompress", chunk: bytes) -> Iterator[bytes]:
    """What `chunk` inflates to, at most `_CHUNK` bytes a step (zlib keeps the rest of the input in
    `unconsumed_tail`, and output it could not give yet inside itself); nothing past the stream's end."""
    while not inflater.eof:
        out = inflater.decompress(chunk, _CHUNK)
        chunk = inflater.unconsumed_tail
        if out:
            yield out
        if not chunk and len(out) < _CHUNK:
            return


def _deflate_inflater(first: bytes) -> "zlib._Decompress":
    """A zlib-wrapped inflater when `first` starts with a zlib header (RFC 1950), else a raw one."""
    wrapped = len(first) >= 2 and first[0] & 0x0F == 8 and (first[0] << 8 | first[1]) % 31 == 0
    return zlib.decompressobj(zlib.MAX_WBITS if wrapped else -zlib.MAX_WBITS)


def _certificate_refused(exc: BaseException) -> bool:
    seen: BaseException | None = exc
    for _ in range(8):  # httpx wraps httpcore's error, which wraps ssl's
        if seen is None:
            return False
        if isinstance(seen, ssl.SSLCertVerificationError):
            return True
        seen = seen.__cause__ or seen.__context__
    return False


def _netloc(url: httpx.URL) -> str:
    host = f"[{url.host}]" if ":" in url.host else url.host
    return f"{host}:{url.port}" if url.port else host
