"""The S3-compatible bucket connector (kind "s3", provider "s3"): every object under a prefix of a
bucket on AWS or on any server that speaks the S3 API (MinIO, Ceph, Garage, moto in the tests).

Why it is built the way it is:
- An object's key is its item id (stable for the object's life; a rename in S3 is a copy and a
  delete, so there is no move to report) and its ETag, quotes stripped, is its version: S3 changes
  the ETag whenever the bytes change, so a re-sync fetches only the objects written since.
- The listing is read completely before anything is returned, one page per request with its own
  retries (a paginator would restart the whole listing on a failed page, or stop half-way): a
  listing that fails or passes `limits.max_items` raises SourceUnavailable, never a partial list
  that would make the engine archive the objects it did not reach.
- Credentials: `access_key_id` is a setting (it is not secret); the secret access key is the
  source's secret (`context.secret`). A source that sets no `access_key_id` and names no secret
  reads a public bucket with unsigned requests. So `needs_secret` is False for the kind (the
  interface asks it of the kind, not of one source's settings) and the pairing is checked here,
  before any request. boto3 gets the credentials explicitly, so it never looks for its own
  (environment, ~/.aws, the instance metadata service) and never ignores the source's endpoint.
- Retries, of transient failures only (connections, time-outs, 5xx, throttling), never two layers
  deep: botocore's own are off; a listing page is retried here with tenacity (`limits.attempts`,
  exponential backoff from `limits.backoff_seconds`), as the engine does not retry a listing; a
  fetch raises SourceUnavailable(transient=True), which the engine retries with the same bounds.
  Each request is bounded by `limits.timeout_seconds`, each item by `limits.total_seconds`, each
  body by `limits.max_bytes`: an object listed larger is reported failed without a request, and a
  fetch checks ContentLength, then reads in chunks and stops one chunk past the bound.
- Addresses: each connection botocore opens resolves its host with rag.sources.addresses.resolve
  and connects to the address that was checked (its connection class is swapped for one that does,
  TLS still verified against the host name), so an endpoint on a loopback, private or metadata
  address is refused unless the operator's RAG_SOURCES__ALLOW_HOSTS names it (the source's own
  `allow_hosts` only narrows that list), and a second
  DNS answer cannot swap it. Should a botocore release move the internals this relies on, every
  request's host is checked just before it is sent instead (a `before-send` hook). Proxies from the
  environment are not used: a proxy would do its own lookup, past the check.
- Errors say what went wrong in the user's words: "no such bucket", "the endpoint refused the
  source's credentials", "<key> is 12 MB, past the bound"; no secret, no signature, no server text.
"""

from __future__ import annotations

import re
import string
import threading
import time
from pathlib import PurePosixPath
from typing import Any, Callable, Iterable, Mapping, TypeVar
from urllib.parse import quote, urlsplit

from pydantic import Field, field_validator, model_validator
from tenacity import Retrying, retry_if_exception, stop_after_attempt, stop_after_delay, wait_exponential

from rag.ingest.formats import supported_suffixes
from rag.sources.addresses import AddressRefused, narrowed, resolve
from rag.sources.base import (
    AllowHosts,
    BodyTooLarge,
    BodyTooSlow,
    Connector,
    Fetched,
    Item,
    ItemFailed,
    NotModified,
    SourceConfig,
    SourceUnavailable,
    SyncContext,
    read_bounded,
    size_words as _size,
)

T = TypeVar("T")

# S3's bucket naming rules (docs.aws.amazon.com/AmazonS3/latest/userguide/bucketnamingrules.html),
# which the S3-compatible servers follow too.
_BUCKET = re.compile(r"[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]")
_IPV4 = re.compile(r"\d{1,3}(\.\d{1,3}){3}")
_BUCKET_PREFIXES = ("xn--", "sthree-", "amzn-s3-demo-")
_BUCKET_SUFFIXES = ("-s3alias", "--ol-s3", ".mrap", "--x-s3", "--table-s3")
_REGION = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,62}")
_ACCESS_KEY_ID = re.compile(r"[\x21-\x7e]{1,128}")
_MAX_KEY_BYTES = 1024
_PLACEHOLDERS = frozenset({"endpoint", "bucket", "key", "region"})
_DEFAULT_TEMPLATE = "{endpoint}/{bucket}/{key}"
_PAGE_SIZE = 1000
_CHUNK = 64 * 1024

_CODE_SKIP = "a code or config file of a kind ingest does not read (its suffix is not in the formats list)"
_CODE_SUFFIXES = frozenset(
    ".py .pyi .ipynb .js .mjs .cjs .ts .tsx .jsx .java .kt .kts .scala .go .rs .c .h .cc .cpp .hpp .cs .rb .php "
    ".swift .m .sh .bash .zsh .ps1 .bat .sql .r .lua .pl .vue .svelte .css .scss .json .jsonl .yaml .yml .toml "
    ".ini .cfg .conf .env .properties .xml .gradle .tf .proto .graphql .lock".split())

# Error codes of S3 (and its compatibles) that mean the credentials themselves were refused.
_CREDENTIALS_REFUSED = frozenset({
    "InvalidAccessKeyId", "SignatureDoesNotMatch", "InvalidToken", "ExpiredToken", "TokenRefreshRequired",
    "AuthorizationHeaderMalformed", "InvalidSecurity", "InvalidClientTokenId", "RequestTimeTooSkewed"})
_ARCHIVE_CLASSES = frozenset({"GLACIER", "DEEP_ARCHIVE"})
_DENIED = frozenset({"AccessDenied", "AllAccessDisabled", "AccountProblem"})
_THROTTLED = frozenset({"SlowDown", "Throttling", "ThrottlingException", "RequestTimeout", "InternalError",
                        "ServiceUnavailable", "RequestLimitExceeded", "TooManyRequests"})


def _bucket_problem(name: str) -> str | None:
    """What breaks S3's naming rules in `name`, None when it follows them."""
    if not _BUCKET.fullmatch(name):
        return "3 to 63 lower-case letters, digits, dots and hyphens, starting and ending with a letter or digit"
    if ".." in name or ".-" in name or "-." in name:
        return "no two dots in a row, and no dot next to a hyphen"
    if _IPV4.fullmatch(name):
        return "not shaped like an IP address"
    if name.startswith(_BUCKET_PREFIXES) or name.endswith(_BUCKET_SUFFIXES):
        return "none of the prefixes and suffixes S3 reserves"
    return None


def _template_fields(template: str) -> set[str]:
    """The placeholders of a URL template; ValueError for a conversion, a format spec or an
    attribute (`{key.upper}`): only the plain names below are filled in."""
    names = set()
    for _, name, spec, conversion in string.Formatter().parse(template):
        if name is None:
            continue
        if spec or conversion or name not in _PLACEHOLDERS:
            raise ValueError(f"url_template may use only {', '.join(sorted('{' + p + '}' for p in _PLACEHOLDERS))}")
        names.add(name)
    return names


def _pinned_connection(base: type, addresses: Callable[[str, int], list[str]]) -> type:
    """`base` (a urllib3 connection class) connecting to the checked addresses of its host only."""
    from urllib3.exceptions import ConnectTimeoutError, NewConnectionError

    class Pinned(base):  # type: ignore[valid-type, misc]
        def _new_conn(self) -> Any:
            host, failure = self._dns_host, None
            try:
                for address in addresses(self.host, self.port):  # AddressRefused: none is tried
                    self._dns_host = address  # urllib3 connects to this; TLS and Host keep the name
                    try:
                        return super()._new_conn()
                    except (NewConnectionError, ConnectTimeoutError) as exc:
                        failure = exc
            finally:
                self._dns_host = host
            raise failure or NewConnectionError(self, "no address to connect to")

    return Pinned


def _pin_connections(client: Any, addresses: Callable[[str, int], list[str]]) -> bool:
    """Swap the connection classes of the client's pools for pinned ones (before its first request).
    False when this botocore keeps them elsewhere: the caller checks each request instead."""
    try:
        manager = client._endpoint.http_session._manager
        pools = dict(manager.pool_classes_by_scheme)
    except AttributeError:
        return False
    manager.pool_classes_by_scheme = {
        scheme: type(f"Pinned{pool.__name__}", (pool,),
                     {"ConnectionCls": _pinned_connection(pool.ConnectionCls, addresses)})
        for scheme, pool in pools.items()}
    return True


def _unwrapped(exc: Exception) -> Exception:
    """botocore wraps what a connection raises that it does not know (the address rule's refusal)."""
    from botocore.exceptions import HTTPClientError

    inner = getattr(exc, "kwargs", {}).get("error") if isinstance(exc, HTTPClientError) else None
    return inner if isinstance(inner, AddressRefused) else exc


class S3Config(SourceConfig):
    """A bucket's settings. `endpoint_url` None: AWS itself, `https://s3.<region>.amazonaws.com`."""

    bucket: str
    prefix: str = ""  # only the keys starting with it; its folders are not part of the items' paths
    endpoint_url: str | None = None
    region: str = "us-east-1"
    access_key_id: str | None = None  # None, and no secret named: a public bucket, read unsigned
    allow_hosts: AllowHosts = Field(default_factory=list)  # narrows RAG_SOURCES__ALLOW_HOSTS
    url_template: str | None = None  # the link back: {endpoint} {bucket} {key} {region}

    @field_validator("bucket")
    @classmethod
    def _bucket(cls, value: str) -> str:
        problem = _bucket_problem(value)
        if problem:
            raise ValueError(f"{value!r} is not a bucket name: S3 asks for {problem}")
        return value

    @field_validator("prefix")
    @classmethod
    def _prefix(cls, value: str) -> str:
        if len(value.encode("utf-8")) > _MAX_KEY_BYTES:
            raise ValueError(f"a prefix is at most {_MAX_KEY_BYTES} bytes, as a key is")
        return value

    @field_validator("endpoint_url")
    @classmethod
    def _endpoint(cls, value: str | None) -> str | None:
        if value is None:
            return None
        try:
            parts = urlsplit(value.strip())
            parts.port  # noqa: B018 (a port that is not a number raises here)
        except ValueError:
            raise ValueError("endpoint_url is not a URL") from None
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError("endpoint_url must be an http:// or https:// URL with a host")
        if parts.username or parts.password:
            raise ValueError("endpoint_url must not hold credentials: the secret comes from the source's secret")
        if parts.query or parts.fragment:
            raise ValueError("endpoint_url takes no query and no fragment")
        return value.strip().rstrip("/")

    @field_validator("region")
    @classmethod
    def _region(cls, value: str) -> str:
        if not _REGION.fullmatch(value):
            raise ValueError("region is letters, digits, hyphens and underscores (for example us-east-1)")
        return value

    @field_validator("access_key_id")
    @classmethod
    def _access_key_id(cls, value: str | None) -> str | None:
        if value is not None and not _ACCESS_KEY_ID.fullmatch(value):
            raise ValueError("access_key_id is 1 to 128 printable characters without spaces")
        return value

    @model_validator(mode="after")
    def _template(self) -> S3Config:
        if self.url_template is not None:
            _template_fields(self.url_template)
            sample = self.url_template.format(endpoint=endpoint_of(self), bucket=self.bucket, key="a/b.md",
                                              region=self.region)
            if urlsplit(sample).scheme not in ("http", "https") or not urlsplit(sample).netloc:
                raise ValueError("url_template must make an http:// or https:// URL (start it with {endpoint})")
        return self


def endpoint_of(config: S3Config) -> str:
    return config.endpoint_url or f"https://s3.{config.region}.amazonaws.com"


def skip_reason(filename: str) -> str | None:
    """Why an object of this name is listed but not taken (None: a format the parsers read)."""
    suffix = PurePosixPath(filename).suffix.lower()
    if suffix in supported_suffixes():
        return None
    if suffix in _CODE_SUFFIXES or filename.lower() in {"dockerfile", "makefile", ".gitignore"}:
        return _CODE_SKIP
    if not suffix:
        return "a file without a suffix: its format is unknown"
    return f"the {suffix} format is not read by this service"


def _archived(entry: Mapping[str, Any]) -> str | None:
    """Why an object in an archive tier is skipped: GetObject refuses it until someone restores it."""
    storage = str(entry.get("StorageClass") or "")
    if storage in _ARCHIVE_CLASSES:
        return f"archived in {storage}: it is read once it is restored"
    return None


def _code(exc: Exception) -> str:
    """The error code of a ClientError, trimmed to what an error code can be (it is the server's text)."""
    code = str(getattr(exc, "response", {}).get("Error", {}).get("Code", ""))
    return re.sub(r"[^A-Za-z0-9.]", "", code)[:64]


def _status(exc: Exception) -> int:
    return int(getattr(exc, "response", {}).get("ResponseMetadata", {}).get("HTTPStatusCode") or 0)


def _transient(exc: BaseException) -> bool:
    from botocore.exceptions import ClientError, ConnectionError, HTTPClientError, IncompleteReadError, SSLError

    if isinstance(exc, SSLError) or isinstance(_unwrapped(exc), AddressRefused):  # next time the same
        return False
    if isinstance(exc, (ConnectionError, HTTPClientError, IncompleteReadError)):
        return True
    return isinstance(exc, ClientError) and (_status(exc) >= 500 or _code(exc) in _THROTTLED)


class S3Connector(Connector):
    kind = "s3"
    provider = "s3"
    Config = S3Config
    needs_secret = False  # a public bucket needs none; a source with an access_key_id must name one (checked)

    def __init__(self, config: S3Config, context: SyncContext) -> None:
        super().__init__(config, context)
        self.config: S3Config = config
        self._lock = threading.Lock()
        self._s3: Any = None
        self._allow = narrowed(context.allow_hosts, config.allow_hosts)  # a source's own list only narrows
        self._base = config.prefix[: config.prefix.rfind("/") + 1]  # the prefix's folders, left out of paths
        self._template = config.url_template or _DEFAULT_TEMPLATE

    # The client, built once and shared: a botocore client is safe to use from several threads.

    def _client(self) -> Any:
        with self._lock:
            if self._s3 is None:
                self._s3 = self._build_client()
            return self._s3

    def _build_client(self) -> Any:
        import boto3
        from botocore import UNSIGNED
        from botocore.config import Config as BotoConfig

        key_id, secret = self.config.access_key_id, self.context.secret
        if key_id and not secret:
            raise SourceUnavailable("the source sets access_key_id but names no secret: its secret access key "
                                    "is the source's secret")
        if secret and not key_id:
            raise SourceUnavailable("the source names a secret but sets no access_key_id to go with it")
        limits = self.context.limits
        config = BotoConfig(
            connect_timeout=limits.timeout_seconds, read_timeout=limits.timeout_seconds,
            retries={"mode": "standard", "total_max_attempts": 1},  # the listing and the engine retry
            max_pool_connections=max(1, limits.concurrency) + 1,
            ignore_configured_endpoint_urls=True,
            proxies={},  # not the environment's: a proxy would resolve the host itself, past the check
            # The newer default checksums are refused by some S3-compatible servers; S3 needs none for GET.
            request_checksum_calculation="when_required", response_checksum_validation="when_required",
            s3={"addressing_style": "path" if self.config.endpoint_url else "auto"},
            signature_version=None if key_id else UNSIGNED)
        session = boto3.session.Session(aws_access_key_id=key_id, aws_secret_access_key=secret,
                                        region_name=self.config.region)
        client = session.client("s3", endpoint_url=self.config.endpoint_url, config=config)
        if not _pin_connections(client, self._addresses):
            client.meta.events.register("before-send.s3", self._check_request)
        return client

    def _addresses(self, host: str, port: int) -> list[str]:
        return resolve(host, port, self._allow)

    def _check_request(self, request: Any, **_: Any) -> None:
        """botocore's hook before each request goes out: its host must pass the address rule."""
        parts = urlsplit(request.url)
        self._addresses(parts.hostname or "", parts.port or (443 if parts.scheme == "https" else 80))

    def _retrying(self, seconds: float) -> Retrying:
        limits = self.context.limits
        return Retrying(
            stop=stop_after_attempt(max(1, limits.attempts)) | stop_after_delay(seconds),
            wait=wait_exponential(multiplier=limits.backoff_seconds, max=max(limits.backoff_seconds, 30.0)),
            retry=retry_if_exception(_transient), reraise=True)

    def _call(self, function: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        return self._retrying(self.context.limits.total_seconds)(function, *args, **kwargs)

    # The failures that concern the whole source, whether seen listing or fetching.

    def _where(self) -> str:
        return urlsplit(endpoint_of(self.config)).netloc

    def _source_failure(self, exc: Exception) -> SourceUnavailable | None:
        from botocore.exceptions import ClientError, ConnectionError, HTTPClientError, SSLError

        if isinstance(exc, AddressRefused):
            return SourceUnavailable(f"the endpoint is refused: {exc}")
        if isinstance(exc, SSLError):
            return SourceUnavailable(f"{self._where()}: the TLS connection failed (its certificate?)")
        if isinstance(exc, (ConnectionError, HTTPClientError)):
            return SourceUnavailable(f"cannot reach {self._where()} (no answer within the time bound, "
                                     "or the connection failed)", transient=True)
        if not isinstance(exc, ClientError):
            return None
        code = _code(exc)
        if code == "NoSuchBucket":
            return SourceUnavailable(f"no such bucket: {self.config.bucket} at {self._where()}")
        if code in _CREDENTIALS_REFUSED:
            return SourceUnavailable(f"{self._where()} refused the source's credentials ({code}): check its "
                                     "access_key_id and its secret")
        if code in ("PermanentRedirect", "IllegalLocationConstraintException"):
            return SourceUnavailable(f"bucket {self.config.bucket} is in another region than {self.config.region}")
        return None

    # Listing.

    def items(self) -> Iterable[Item]:
        """Every object under the prefix, read to the end first (see the module's docstring)."""
        from botocore.exceptions import BotoCoreError, ClientError

        try:
            return self._listing(self._client())
        except (BotoCoreError, ClientError, AddressRefused) as exc:
            exc = _unwrapped(exc)
            failure = self._source_failure(exc)
            if failure is None and _code(exc) in _DENIED:
                failure = SourceUnavailable(f"listing bucket {self.config.bucket} is denied to these credentials")
            raise (failure or SourceUnavailable(
                f"listing bucket {self.config.bucket} failed ({_code(exc) or type(exc).__name__})",
                transient=_transient(exc))) from None

    def _listing(self, client: Any) -> list[Item]:
        limits, found, seen = self.context.limits, [], 0
        request: dict[str, Any] = {"Bucket": self.config.bucket, "Prefix": self.config.prefix,
                                   "MaxKeys": _PAGE_SIZE}
        # Each page but the last holds at least one key, so max_items + 1 pages are enough.
        for _ in range(limits.max_items + 1):
            page = self._call(client.list_objects_v2, **request)
            for entry in page.get("Contents") or ():
                seen += 1
                if seen > limits.max_items:
                    raise SourceUnavailable(f"bucket {self.config.bucket} holds more than {limits.max_items:,} "
                                            "objects under the prefix (the listing bound); narrow the prefix")
                item = self._item(entry)
                if item is not None:
                    found.append(item)
            token = page.get("NextContinuationToken")
            if not page.get("IsTruncated") or not token:
                return found
            if self.context.stop.is_set():
                raise SourceUnavailable("the sync was stopped before the bucket's listing ended")
            request["ContinuationToken"] = token
        raise SourceUnavailable(f"the listing of bucket {self.config.bucket} did not end")

    def _item(self, entry: Mapping[str, Any]) -> Item | None:
        key = str(entry["Key"])
        if key.endswith("/"):  # a folder marker, made by consoles to show an empty folder
            return None
        etag = str(entry.get("ETag") or "").strip('"')
        # Some S3-compatible servers list no ETag: the modification time and size stand in for it.
        version = etag or f"{entry.get('LastModified')}:{entry.get('Size')}"
        filename = key.rsplit("/", 1)[-1]
        skip = _archived(entry) or skip_reason(filename)
        return Item(id=key, version=version, filename=filename, url=self.url(key), path=self._folders(key),
                    label=f"{self.config.bucket}/{key}", skip=skip,
                    failed=None if skip else self._too_large(key, int(entry.get("Size") or 0)))

    def _too_large(self, key: str, size: int) -> str | None:
        bound = self.context.limits.max_bytes
        return f"{key} is {_size(size)}, past the bound of {_size(bound)} for one item" if size > bound else None

    def _folders(self, key: str) -> tuple[str, ...]:
        """The key's folders below the prefix's; the empty, "." and ".." parts a key may hold are left out,
        as no folder of the knowledge base can be named so."""
        rest = key[len(self._base):] if key.startswith(self._base) else key
        return tuple(part for part in rest.split("/")[:-1] if part not in ("", ".", ".."))

    def url(self, key: str) -> str:
        return self._template.format(endpoint=endpoint_of(self.config), bucket=quote(self.config.bucket),
                                     key=quote(key, safe="/"), region=self.config.region)

    # Fetching.

    def fetch(self, item: Item, previous: Mapping[str, Any] | None) -> Fetched:
        from botocore.exceptions import BotoCoreError, ClientError

        limits = self.context.limits
        deadline = time.monotonic() + limits.total_seconds
        etag = (previous or {}).get("etag")
        try:
            return self._get(self._client(), item, etag, deadline)
        except (BotoCoreError, ClientError, AddressRefused) as exc:
            raise self._fetch_failure(item, _unwrapped(exc)) from None

    def _get(self, client: Any, item: Item, etag: str | None, deadline: float) -> Fetched:
        request = {"Bucket": self.config.bucket, "Key": item.id}
        if etag:  # the engine fetches an unchanged object again after a lost sync: a 304 then saves the body
            request["IfNoneMatch"] = f'"{etag}"'
        answer = client.get_object(**request)
        body = answer["Body"]
        try:
            too_large = self._too_large(item.id, int(answer.get("ContentLength") or 0))
            if too_large:  # it grew since the listing
                raise ItemFailed(too_large)
            data = self._read(body, item, deadline)
        finally:
            body.close()
        seen = str(answer.get("ETag") or "").strip('"')
        return Fetched(data=data, state={"etag": seen} if seen else {},
                       version=seen if seen and seen != item.version else None)

    def _read(self, body: Any, item: Item, deadline: float) -> bytes:
        """The body, in chunks, stopping one chunk past max_bytes (a server may send more than it said)
        and at the item's deadline."""
        limit = self.context.limits.max_bytes
        try:
            return read_bounded(iter(lambda: body.read(_CHUNK), b""), limit, deadline)
        except BodyTooLarge:
            raise ItemFailed(f"{item.id} is larger than the bound of {_size(limit)} for one item") from None
        except BodyTooSlow:
            raise ItemFailed(f"{item.id} took longer than {self.context.limits.total_seconds:g} s to read") from None

    def _fetch_failure(self, item: Item, exc: Exception) -> Exception:
        if _status(exc) == 304:
            return NotModified()
        failure = self._source_failure(exc)
        if failure is not None:
            return failure
        code = _code(exc)
        if _transient(exc):  # the engine retries it
            return SourceUnavailable(f"fetching {item.id}: the server is busy or failing ({code or _status(exc)})",
                                     transient=True)
        if code in ("NoSuchKey", "404") or _status(exc) == 404:
            return ItemFailed(f"{item.id} is no longer in bucket {self.config.bucket}")
        if code == "InvalidObjectState":  # a 403 too, in S3's answers
            return ItemFailed(f"{item.id} is archived: it is read once it is restored")
        if code in _DENIED or _status(exc) == 403:
            return ItemFailed(f"reading {item.id} is denied to these credentials")
        return ItemFailed(f"fetching {item.id} failed ({code or type(exc).__name__})")

    def close(self) -> None:
        with self._lock:
            client, self._s3 = self._s3, None
        if client is not None:
            client.close()
