"""The Git connector: the files of one branch of a repository, kept in sync commit by commit.

The repository (an https, http, ssh or git URL, `user@host:path`, a `file://` URL or an absolute
path) is fetched into a bare mirror of the one branch, kept between syncs in a cache directory (the
engine's per-source `context.workdir` when it gives one, else `cache_dir`, else a private folder
under the system's temporary directory), so a re-sync transfers only the new commits. The listing
is the branch's tree (`git ls-tree`): an item per file matching `paths`, its id the file's path and
its version the blob id, so a file whose content did not change is not fetched again whatever
happened around it. The tree is listed whole every time (the engine archives what a listing
leaves out); the diff between the synced commit and the new one (`git diff-tree -M`) adds what a
listing cannot see: which new path is an old one renamed, set as `moved_from` so the document, its
versions and citations follow the file. When the synced commit is not an ancestor of the new one
(a force-push rewrote the history) or is gone, renames are not looked for and the versions alone
decide (a log line says so). `fetch` reads a blob from the mirror, its size checked first (a file
the listing already knows is too large is listed as `failed`, and not fetched at all).

The `git` command does the work (no library: git's own transports, ssh and credentials handling
are what a user expects), every call bounded in time and output and run in an environment that
ignores the machine's git configuration (rag/sources/gitrun.py). The token (the source's secret)
is sent as HTTP basic authentication through git's configuration variables, never in a URL, a
command line or a message. Files the parsers cannot read yet, submodules, symbolic links and Git
LFS pointers are listed with the reason they are skipped.
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
import tempfile
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any, Iterable, Mapping
from urllib.parse import quote, unquote, urlsplit

from pydantic import Field, field_validator

from rag.ingest.formats import IMAGE_SUFFIXES, SKIP_IMAGE, document_suffixes
from rag.ingest.formats.code import secret_reason
from rag.sources.addresses import AddressRefused, resolve
from rag.sources.base import Connector, Fetched, Item, ItemFailed, SourceConfig, SourceUnavailable, SyncContext
from rag.sources.globs import Globs
from rag.sources.gitrun import Git, GitFailed, basic_pair, find_git, git_env, pinned, pinned_url

log = logging.getLogger(__name__)

SKIP_CODE = "a code or config file of a kind ingest does not read (its suffix is not in the formats list)"
SKIP_OTHER = "not a file type ingest reads"
SKIP_SUBMODULE = "a Git submodule: the repository it points at is not followed"
SKIP_LINK = "a symbolic link: only the files themselves are read"
SKIP_NAME = "the file's name is not printable UTF-8 text"
SKIP_LFS = "a Git LFS pointer: the file itself is stored outside the repository, and LFS is not fetched"

CODE_AND_CONFIG = frozenset(
    ".py .pyi .pyx .js .mjs .cjs .ts .tsx .jsx .vue .svelte .go .rs .java .kt .kts .scala .groovy .gradle .c .h "
    ".cc .cpp .cxx .hpp .hh .cs .fs .vb .rb .php .pl .pm .swift .m .mm .r .jl .lua .dart .ex .exs .erl .hs .clj "
    ".elm .zig .nim .sh .bash .zsh .fish .ps1 .bat .cmd .sql .graphql .proto .css .scss .sass .less .json .jsonc "
    ".json5 .yaml .yml .toml .ini .cfg .conf .properties .xml .xsd .plist .env .tf .tfvars .hcl .nix .cmake .mk "
    ".lock .editorconfig .gitignore .gitattributes .gitmodules .dockerignore".split())
CODE_AND_CONFIG_NAMES = frozenset(
    "makefile gnumakefile dockerfile containerfile jenkinsfile vagrantfile rakefile gemfile procfile "
    "justfile cmakelists.txt".split())

_OID = re.compile(r"[0-9a-f]{40}(?:[0-9a-f]{24})?")  # SHA-1, or SHA-256 repositories
_BRANCH = re.compile(r"(?!-)(?!.*\.\.)(?!.*//)[A-Za-z0-9._/+-]+(?<![./])")
_PLACEHOLDER = re.compile(r"\{([^{}]*)\}")
_TEMPLATE_KEYS = {"commit", "branch", "path"}
_DEFAULT_PORTS = {"https": 443, "http": 80, "ssh": 22, "git": 9418}
_SCP = re.compile(r"(?:[A-Za-z0-9._~+-]+@)?(?P<host>[A-Za-z0-9.-]+|\[[0-9A-Fa-f:.]+\]):(?P<path>(?!//).+)")
_LFS_HEADER = b"version https://git-lfs.github.com/spec/"
_LFS_MAX = 1024  # the LFS specification: a pointer file is smaller than this
_LISTING_BYTES_PER_FILE = 1024  # a generous average of one `ls-tree --long` line
_TRANSIENT = (
    "could not resolve host", "temporary failure in name resolution", "connection timed out", "timed out",
    "connection refused", "failed to connect", "connection reset", "remote end hung up unexpectedly",
    "early eof", "rpc failed", "returned error: 5", "operation too slow", "gnutls", "ssl_", "http/2 stream",
    "unexpected disconnect")


@dataclass(frozen=True)
class Remote:
    """A repository setting, understood: what git is given, what messages show, what may be reached."""

    url: str
    protocol: str  # the one transport git may use (GIT_ALLOW_PROTOCOL)
    name: str  # the repository's name, first part of the labels
    host: str | None = None  # checked against the address rule before every fetch
    port: int | None = None
    local: Path | None = None


def parse_repository(text: str) -> Remote:
    """The repository of a setting; ValueError with the reason when it is none git should be given."""
    text = text.strip()
    if not text or text.startswith("-") or "::" in text or any(ch in text for ch in "\0\n\r"):
        raise ValueError("a repository is an https, ssh or file URL, user@host:path, or an absolute path")
    if text.startswith("/"):
        return Remote(url=text, protocol="file", name=_name(text), local=Path(text))
    scheme = re.match(r"([A-Za-z][A-Za-z0-9+.-]*)://", text)
    if scheme:
        return _parse_url(text, scheme.group(1).lower())
    scp = _SCP.fullmatch(text)
    if scp:
        return Remote(url=text, protocol="ssh", name=_name(scp["path"]), host=scp["host"].strip("[]"), port=22)
    raise ValueError(f"{text!r} is not a repository address: give an https, ssh or file URL, user@host:path, "
                     "or an absolute path")


def _parse_url(text: str, scheme: str) -> Remote:
    if scheme not in {"https", "http", "ssh", "git", "file"}:
        raise ValueError(f"the {scheme}:// transport is not one a Git source uses (https, http, ssh, git, file)")
    parts = urlsplit(text)
    if scheme == "file":
        if parts.netloc not in ("", "localhost") or not parts.path.startswith("/"):
            raise ValueError("a file:// repository URL names an absolute path on this machine")
        path = unquote(parts.path)
        return Remote(url=path, protocol="file", name=_name(path), local=Path(path))
    if parts.password is not None:
        raise ValueError("the repository URL holds a password: give the token as the source's secret instead")
    if not parts.hostname:
        raise ValueError(f"the repository URL {text!r} names no host")
    try:
        port = parts.port or _DEFAULT_PORTS[scheme]
    except ValueError:
        raise ValueError(f"the repository URL {text!r} has an invalid port") from None
    return Remote(url=text, protocol=scheme, name=_name(parts.path), host=parts.hostname, port=port)


def _name(path: str) -> str:
    last = next((part for part in reversed(path.replace(":", "/").split("/")) if part), "repository")
    return last[:-4] if last.endswith(".git") and len(last) > 4 else last


class Config(SourceConfig):
    repository: str  # https/ssh/git URL, user@host:path, file:// URL or absolute path
    branch: str | None = None  # None: the repository's default branch (its HEAD)
    paths: list[str] = Field(default_factory=lambda: ["**"])  # globs of the files taken ("docs/**/*.md")
    url_template: str | None = None  # the forge's file URL: {commit}, {branch} and {path} are filled in
    cache_dir: str | None = None  # where the mirror is kept when the engine gives no working directory
    max_file_bytes: int | None = Field(default=None, gt=0)  # a tighter bound than the sync's max_bytes
    fetch_seconds: float = Field(default=600.0, gt=0)  # one `git fetch` (a first clone of a large repository)
    token_username: str = "x-access-token"  # the user name sent with the token (GitHub's; GitLab takes "oauth2")

    @field_validator("repository")
    @classmethod
    def _repository(cls, value: str) -> str:
        parse_repository(value)
        return value.strip()

    @field_validator("branch")
    @classmethod
    def _branch(cls, value: str | None) -> str | None:
        if value is not None and (not _BRANCH.fullmatch(value) or value.endswith(".lock")):
            raise ValueError(f"{value!r} is not a branch name")
        return value

    @field_validator("paths", mode="before")
    @classmethod
    def _one_path(cls, value: Any) -> Any:
        return [value] if isinstance(value, str) else value  # `--option paths=docs/**` gives one string

    @field_validator("paths")
    @classmethod
    def _paths(cls, value: list[str]) -> list[str]:
        Globs(value)  # raises ValueError on an empty list or a broken pattern
        return value

    @field_validator("url_template")
    @classmethod
    def _template(cls, value: str | None) -> str | None:
        if value is None:
            return None
        unknown = set(_PLACEHOLDER.findall(value)) - _TEMPLATE_KEYS
        if unknown:
            raise ValueError(f"the URL template may use {{commit}}, {{branch}} and {{path}}, not {sorted(unknown)}")
        if not re.match(r"https?://[^/{}]", value):
            raise ValueError("the URL template is an http(s) URL with a host, such as "
                             "https://github.com/org/repo/blob/{commit}/{path}")
        return value


@dataclass(frozen=True)
class _Entry:
    mode: str
    type: str
    oid: str
    size: int | None
    path: str


class GitConnector(Connector):
    kind = "git"
    provider = "git"
    Config = Config

    def __init__(self, config: Config, context: SyncContext) -> None:
        super().__init__(config, context)
        self.remote = parse_repository(config.repository)
        self.globs = Globs(config.paths)
        self.mirror = _mirror_dir(config, context)
        limits = context.limits
        env = git_env(protocol=self.remote.protocol, timeout=limits.timeout_seconds, token=context.secret,
                      username=config.token_username)
        hidden = {str(self.mirror): "<cache>"}
        if context.secret:
            hidden[context.secret] = "***"
            hidden[basic_pair(config.token_username, context.secret)] = "***"
        self.git = Git(find_git(), env, hidden)
        self._env = env
        self._remote_url = self.remote.url  # a git:// URL pinned to the checked address (`_check_reachable`)
        self._commit: str | None = None
        self._branch: str | None = None

    @classmethod
    def local_paths(cls, config: Config) -> dict[str, str]:
        """A repository on this machine (an absolute path, a file:// URL) and the cache directory."""
        local = parse_repository(config.repository).local
        paths = {"repository": str(local)} if local is not None else {}
        return {**paths, "cache_dir": config.cache_dir} if config.cache_dir else paths

    # -- the listing ---------------------------------------------------------------------------

    def items(self) -> Iterable[Item]:
        self._check_reachable()
        self._prepare_mirror()
        branch = self.config.branch or self._default_branch()
        commit = self._fetch(branch)
        entries = self._list(commit)
        moves = self._moves(commit, {entry.path for entry in entries})
        pointers = self._lfs_pointers(entries)
        self._commit, self._branch = commit, branch
        return [self._item(entry, commit, branch, moves, pointers) for entry in entries]

    def cursor(self) -> dict[str, Any]:
        return {"commit": self._commit, "branch": self._branch} if self._commit else {}

    def _check_reachable(self) -> None:
        remote = self.remote
        if remote.local is not None:
            if not remote.local.exists():
                raise SourceUnavailable(f"the repository {self.config.repository} does not exist on this machine")
            return
        if self.context.secret and remote.protocol == "http" and remote.host not in self.context.allow_hosts:
            raise SourceUnavailable("the source's token would be sent unencrypted: give the repository as an "
                                    "https:// URL")
        try:
            addresses = resolve(remote.host or "", remote.port or 0, self.context.allow_hosts)
        except AddressRefused as exc:
            raise SourceUnavailable(f"the repository's host is refused: {exc}") from None
        # git would resolve the name again: it is given the addresses just checked (no rebinding)
        self.git.env = pinned(self._env, protocol=remote.protocol, host=remote.host or "", port=remote.port or 0,
                              addresses=addresses)
        self._remote_url = pinned_url(remote.url, remote.protocol, remote.host or "", addresses)

    def _prepare_mirror(self) -> None:
        try:
            if self.context.workdir is None and self.config.cache_dir is None:
                _check_private(self.mirror.parent.parent)
            self.mirror.mkdir(mode=0o700, parents=True, exist_ok=True)
            # A fetch killed midway (kill -9 of the sync) leaves its lock files; one sync at a time per
            # source (the engine's rule) means any lock found here is such a leftover.
            for lock in [*self.mirror.glob("refs/heads/**/*.lock"), *self.mirror.glob("*.lock")][:1000]:
                lock.unlink(missing_ok=True)
        except OSError as exc:
            raise SourceUnavailable(f"the Git connector's cache directory cannot be used ({exc.strerror})") from None
        if not (self.mirror / "HEAD").exists():
            self._local(["init", "--bare", "--quiet", str(self.mirror)], "prepare its cache")

    def _default_branch(self) -> str:
        out = self._network(["ls-remote", "--symref", "--", self._remote_url, "HEAD"],
                            self.context.limits.timeout_seconds, 64 * 1024)
        for line in out.decode("utf-8", "replace").splitlines():
            if line.startswith("ref: refs/heads/") and line.endswith("\tHEAD"):
                return line[len("ref: refs/heads/"):-len("\tHEAD")]
        raise SourceUnavailable(f"the repository {self.config.repository} has no default branch (is it empty?); "
                                "name one in the source's branch setting")

    def _fetch(self, branch: str) -> str:
        ref = f"refs/heads/{branch}"
        self._network([f"--git-dir={self.mirror}", "fetch", "--quiet", "--no-tags", "--force", "--",
                       self._remote_url, f"+{ref}:{ref}"], self.config.fetch_seconds, 1024 * 1024, branch=branch)
        out = self._local(["rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}"], "read the fetched branch")
        return out.decode().strip()

    def _network(self, args: list[str], timeout: float, max_output: int, branch: str | None = None) -> bytes:
        """A git command that reaches the repository, its transient failures retried with backoff."""
        from tenacity import Retrying, retry_if_exception, stop_after_attempt, wait_exponential

        limits = self.context.limits
        retrying = Retrying(
            retry=retry_if_exception(lambda exc: isinstance(exc, SourceUnavailable) and exc.transient),
            wait=wait_exponential(multiplier=limits.backoff_seconds, max=30),
            stop=stop_after_attempt(max(1, limits.attempts)), reraise=True)
        for attempt in retrying:
            with attempt:
                try:
                    return self.git.run(args, timeout=timeout, max_output=max_output)
                except GitFailed as exc:
                    raise self._unavailable(exc, branch) from None
        raise AssertionError("unreachable")  # pragma: no cover

    def _unavailable(self, exc: GitFailed, branch: str | None) -> SourceUnavailable:
        words = str(exc)
        lowered = f"{words} {exc.stderr}".lower()
        if branch is not None and "couldn't find remote ref" in lowered:
            return SourceUnavailable(f"the repository {self.config.repository} has no branch {branch!r}")
        if "authentication failed" in lowered or "returned error: 403" in lowered:
            given = "the source's secret" if self.context.secret else "no secret: the source names none"
            return SourceUnavailable(f"the repository {self.config.repository} refused the credentials ({given})")
        transient = exc.timed_out or any(sign in lowered for sign in _TRANSIENT)
        return SourceUnavailable(f"git cannot reach the repository {self.config.repository}: {words}", transient)

    def _local(self, args: list[str], what: str, max_output: int = 1024 * 1024) -> bytes:
        """A git command on the mirror alone."""
        try:
            return self.git.run(args if args[0] == "init" else [f"--git-dir={self.mirror}", *args],
                                timeout=self.context.limits.timeout_seconds, max_output=max_output)
        except GitFailed as exc:
            raise SourceUnavailable(f"git cannot {what}: {exc}") from None

    def _list(self, commit: str) -> list[_Entry]:
        limit = self.context.limits.max_items
        bound = max(1024 * 1024, (limit + 1) * _LISTING_BYTES_PER_FILE)
        args = ["ls-tree", "-r", "-z", "--long", "--full-tree", commit, "--", *self.globs.prefixes()]
        try:
            out = self.git.run([f"--git-dir={self.mirror}", *args], timeout=self.context.limits.timeout_seconds,
                               max_output=bound)
        except GitFailed as exc:
            if exc.too_long:
                raise SourceUnavailable(f"the repository's file listing is larger than a sync takes "
                                        f"({bound} bytes); narrow the source's paths") from None
            raise SourceUnavailable(f"git cannot list the repository's files: {exc}") from None
        entries: list[_Entry] = []
        for record in out.split(b"\0"):
            entry = _entry(record)
            if entry is None or not self.globs.match(entry.path):
                continue
            if len(entries) >= limit:
                raise SourceUnavailable(f"the repository holds more than {limit} files under the source's paths, "
                                        "more than a sync takes; narrow the source's paths")
            entries.append(entry)
        return entries

    def _moves(self, commit: str, listed: set[str]) -> dict[str, str]:
        """New path -> old path of the files renamed since the synced commit ({} when that cannot be known)."""
        old = self.context.cursor.get("commit")
        if not isinstance(old, str) or not _OID.fullmatch(old) or old == commit:
            return {}
        why = self._not_descendant(old, commit)
        if why is None:
            try:
                out = self.git.run(
                    [f"--git-dir={self.mirror}", "diff-tree", "-r", "-M", "-z", "--name-status", "--no-commit-id",
                     old, commit], timeout=self.context.limits.timeout_seconds,
                    max_output=max(1024 * 1024, 2 * (self.context.limits.max_items + 1) * 1024))
            except GitFailed as exc:
                why = f"they cannot be compared ({exc})"
        if why is not None:
            log.info("git source %s: the synced commit %s %s; renames are not looked for, every file is listed "
                     "and the versions decide what changed", self.context.source_name, old[:12], why)
            return {}
        return self._renames(out.split(b"\0"), listed)

    def _renames(self, fields: list[bytes], listed: set[str]) -> dict[str, str]:
        """The renames in `diff-tree -z --name-status` fields: "R<score>", old path, new path."""
        moves: dict[str, str] = {}
        index = 0
        while index < len(fields) - 1:  # bounded: every turn moves on by at least two fields
            status = fields[index].decode("ascii", "replace")
            if status.startswith("R") and index + 2 < len(fields):
                before, after = (fields[index + 1].decode("utf-8", "surrogateescape"),
                                 fields[index + 2].decode("utf-8", "surrogateescape"))
                if after in listed and self.globs.match(before):
                    moves[after] = before
                index += 3
            else:
                index += 2
        return moves

    def _not_descendant(self, old: str, commit: str) -> str | None:
        """Why the new commit does not simply follow the synced one; None when it does."""
        try:
            self.git.run([f"--git-dir={self.mirror}", "merge-base", "--is-ancestor", old, commit],
                         timeout=self.context.limits.timeout_seconds, max_output=1024)
        except GitFailed as exc:
            if exc.returncode == 1:
                return f"is not an ancestor of {commit[:12]} (a force-push rewrote the history, or the branch changed)"
            return "is not in the repository any more"
        return None

    def _lfs_pointers(self, entries: list[_Entry]) -> set[str]:
        """The blob ids among the small files the parsers would read that are Git LFS pointers."""
        suffixes = document_suffixes()
        small = sorted({entry.oid for entry in entries if entry.type == "blob" and entry.mode != "120000"
                        and entry.size is not None and entry.size < _LFS_MAX
                        and PurePosixPath(entry.path).suffix.lower() in suffixes})
        if not small:
            return set()
        return self._batch(small)

    def _batch(self, oids: list[str]) -> set[str]:
        try:
            out = self.git.run([f"--git-dir={self.mirror}", "cat-file", "--batch"],
                               timeout=self.context.limits.timeout_seconds,
                               max_output=len(oids) * (_LFS_MAX + 200), stdin="".join(f"{o}\n" for o in oids).encode())
        except GitFailed as exc:
            raise SourceUnavailable(f"git cannot read the repository's small files: {exc}") from None
        pointers: set[str] = set()
        at = 0
        for _ in oids:  # each answer: "<oid> blob <size>\n<content>\n"
            end = out.find(b"\n", at)
            if end < 0:
                break
            header = out[at:end].split()
            if len(header) != 3 or not header[2].isdigit():  # "<oid> missing": no content follows
                at = end + 1
                continue
            size = int(header[2])
            if out[end + 1:end + 1 + size].startswith(_LFS_HEADER):
                pointers.add(header[0].decode())
            at = end + 1 + size + 1
        return pointers

    def _item(self, entry: _Entry, commit: str, branch: str, moves: Mapping[str, str], pointers: set[str]) -> Item:
        folders = tuple(entry.path.split("/")[:-1])
        skip = _skip(entry, pointers)
        bound = self._max_bytes()
        failed = _too_big(entry.size, bound) if skip is None and (entry.size or 0) > bound else None
        return Item(
            id=entry.path, version=entry.oid, filename=entry.path.rsplit("/", 1)[-1], title=None,
            url=self._url(entry.path, commit, branch), path=folders, label=f"{self.remote.name}/{entry.path}",
            moved_from=moves.get(entry.path), skip=skip, failed=failed,
            meta={"blob": entry.oid, "size": entry.size})

    def _url(self, path: str, commit: str, branch: str) -> str | None:
        template = self.config.url_template
        if template is not None:
            values = {"commit": commit, "branch": quote(branch, safe="/"), "path": quote(path, safe="/")}
            return _PLACEHOLDER.sub(lambda m: values[m.group(1)], template)
        local = self.remote.local
        if local is not None and (local / ".git").exists():  # a work tree: the file a reader can open
            return (local / path).as_uri()
        return None

    # -- fetching ------------------------------------------------------------------------------

    def fetch(self, item: Item, previous: Mapping[str, Any] | None) -> Fetched:
        oid = str(item.meta.get("blob") or item.version)
        if not _OID.fullmatch(oid):
            raise ItemFailed("the listing gave no blob id for this file")
        bound = self._max_bytes()
        size = item.meta.get("size")
        try:
            if not isinstance(size, int):
                size = int(self._read(["cat-file", "-s", oid], 64))
            if size > bound:
                raise ItemFailed(_too_big(size, bound))
            data = self._read(["cat-file", "blob", oid], bound, self.context.limits.total_seconds)
        except GitFailed as exc:
            raise ItemFailed(f"the file cannot be read from the repository: {exc}") from None
        return Fetched(data=data)

    def _read(self, args: list[str], max_output: int, timeout: float | None = None) -> bytes:
        return self.git.run([f"--git-dir={self.mirror}", *args], max_output=max_output,
                            timeout=timeout or self.context.limits.timeout_seconds)

    def _max_bytes(self) -> int:
        bound = self.context.limits.max_bytes
        return min(bound, self.config.max_file_bytes) if self.config.max_file_bytes else bound


def _too_big(size: int, bound: int) -> str:
    return f"the file is {size} bytes, more than the {bound} bytes a file may have"


def _entry(record: bytes) -> _Entry | None:
    """One `ls-tree -r -z --long` record: "<mode> <type> <oid> <size>\\t<path>"."""
    head, tab, path = record.partition(b"\t")
    fields = head.split()
    if not tab or len(fields) != 4:
        return None
    mode, kind, oid, size = (field.decode("ascii", "replace") for field in fields)
    return _Entry(mode, kind, oid, int(size) if size.isdigit() else None, path.decode("utf-8", "surrogateescape"))


def _skip(entry: _Entry, pointers: set[str]) -> str | None:
    if not entry.path.isprintable():  # undecodable bytes (surrogates) or control characters
        return SKIP_NAME
    if entry.type == "commit":
        return SKIP_SUBMODULE
    if entry.mode == "120000":
        return SKIP_LINK
    name = PurePosixPath(entry.path).name.lower()
    suffix = PurePosixPath(name).suffix
    secret = secret_reason(name)  # .env, keys, credentials.json: never fetched
    if secret:
        return secret
    if suffix in document_suffixes() and name not in CODE_AND_CONFIG_NAMES:
        return SKIP_LFS if entry.oid in pointers else None
    if suffix in IMAGE_SUFFIXES:
        return SKIP_IMAGE
    if suffix in CODE_AND_CONFIG or name in CODE_AND_CONFIG_NAMES or name in CODE_AND_CONFIG:
        return SKIP_CODE
    return SKIP_OTHER


def _mirror_dir(config: Config, context: SyncContext) -> Path:
    """Where this source's mirror lives: the engine's per-source working directory when it gives
    one, else a folder named after the source and repository (two sources never share a mirror, so
    two syncs never fetch into one at once)."""
    if context.workdir is not None:
        return Path(context.workdir) / "mirror.git"
    key = hashlib.sha256("\0".join((context.workspace, context.source_name, config.repository)).encode())
    # Under the shared temporary directory the folder carries the user id and is checked to be this
    # user's alone: a mirror someone else planted could set `core.sshCommand` in its config.
    base = Path(config.cache_dir) if config.cache_dir else Path(tempfile.gettempdir()) / f"rag-git-{os.getuid()}"
    return base / key.hexdigest()[:24] / "mirror.git"


def _check_private(folder: Path) -> None:
    """SourceUnavailable unless `folder` is this user's and nobody else may write in it."""
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    info = folder.stat()
    if info.st_uid != os.getuid() or info.st_mode & 0o022:
        raise SourceUnavailable("the Git connector's cache directory belongs to another user or is writable by "
                                "others; give the source a cache_dir of its own")
