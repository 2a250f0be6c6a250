"""Running the `git` command for the Git connector (rag/sources/git.py), bounded and scrubbed.

Every call has a deadline and a ceiling on what it may print: git runs in a process group of its
own, killed (helpers such as git-remote-https and ssh with it) when either is passed, so no
repository can stall or flood a sync. Its environment is built here rather than inherited: no
system or user git configuration applies (a user's credential helper would store the token, a
`url.*.insteadOf` could send it elsewhere, `core.fsmonitor` could run a command), only the
repository's own transport is allowed (never `ext::`), prompts are off, and the token travels in
an `http.extraHeader` set through the `GIT_CONFIG_*` variables, so it is in no command line that
`ps` shows, in no URL and on no disk. Whatever git says goes through `scrub` before anyone sees it.

git resolves a repository's host itself, after the connector checked it (rag/sources/addresses.py),
and a second DNS answer could name another address (rebinding). `pinned` therefore hands git the
checked addresses: for http and https as `http.curloptResolve` (curl connects to them, while the
Host header and the TLS certificate check keep the name), for ssh as `-o HostName=<address>` with
`-o HostKeyAlias=<name>` (the known host key is still the name's); a git:// URL is given the address
itself (`pinned_url`).
"""

from __future__ import annotations

import base64
import ipaddress
import os
import re
import selectors
import shlex
import shutil
import signal
import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence
from urllib.parse import urlsplit, urlunsplit

_STDERR_KEPT = 16 * 1024  # what a failure's message is taken from; git's useful line is its last
_READ = 64 * 1024


class GitFailed(Exception):
    """A git command failed, passed its deadline or printed more than allowed; the message is scrubbed."""

    def __init__(self, message: str, *, timed_out: bool = False, too_long: bool = False, stderr: str = "",
                 returncode: int | None = None) -> None:
        super().__init__(message)
        self.returncode = returncode
        self.timed_out = timed_out
        self.too_long = too_long
        self.stderr = stderr


@dataclass
class Git:
    """The git command with this connector's environment, and what its messages must not show."""

    executable: str
    env: dict[str, str]
    hidden: dict[str, str] = field(default_factory=dict)  # text -> what a message shows instead

    def scrub(self, text: str) -> str:
        for secret, shown in sorted(self.hidden.items(), key=lambda pair: -len(pair[0])):
            if secret:
                text = text.replace(secret, shown)
        return _USERINFO.sub(r"\1***@", text)

    def run(self, args: Sequence[str], *, timeout: float, max_output: int, stdin: bytes | None = None) -> bytes:
        """git's standard output; GitFailed when it exits non-zero, times out or prints more than
        `max_output` bytes."""
        try:
            proc = subprocess.Popen(
                [self.executable, *args], stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
                stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=self.env, start_new_session=True)
        except OSError:
            raise GitFailed("the git command cannot be run on this machine") from None
        try:
            if stdin is not None:
                threading.Thread(target=_feed, args=(proc, stdin), daemon=True).start()
            out, err = _collect(proc, time.monotonic() + timeout, max_output)
        except _Bound as bound:
            _kill(proc)
            what = f"took longer than {timeout:g} s" if bound.timed_out else f"printed more than {max_output} bytes"
            raise GitFailed(f"git {_name(args)} {what}", timed_out=bound.timed_out,
                            too_long=not bound.timed_out) from None
        finally:
            _kill(proc)
        if proc.returncode != 0:
            stderr = self.scrub(err.decode("utf-8", "replace"))
            words = _message(stderr) or f"git {_name(args)} failed (exit status {proc.returncode})"
            raise GitFailed(words, stderr=stderr, returncode=proc.returncode)
        return out


def _name(args: Sequence[str]) -> str:
    return next((arg for arg in args if not arg.startswith("-")), "")


class _Bound(Exception):
    def __init__(self, timed_out: bool) -> None:
        self.timed_out = timed_out


def _feed(proc: subprocess.Popen, data: bytes) -> None:
    try:
        assert proc.stdin is not None
        proc.stdin.write(data)
        proc.stdin.close()
    except (BrokenPipeError, OSError, ValueError):  # git stopped reading (it failed or was killed)
        pass


def _collect(proc: subprocess.Popen, deadline: float, max_output: int) -> tuple[bytes, bytes]:
    """Both pipes read to their end before the deadline, standard output up to `max_output` bytes."""
    out, err = bytearray(), bytearray()
    with selectors.DefaultSelector() as selector:
        selector.register(proc.stdout, selectors.EVENT_READ, out)  # type: ignore[arg-type]
        selector.register(proc.stderr, selectors.EVENT_READ, err)  # type: ignore[arg-type]
        while selector.get_map():
            left = deadline - time.monotonic()
            if left <= 0:
                raise _Bound(timed_out=True)
            for key, _ in selector.select(left):
                chunk = os.read(key.fd, _READ)
                if not chunk:
                    selector.unregister(key.fileobj)
                elif key.data is out:
                    out += chunk
                    if len(out) > max_output:
                        raise _Bound(timed_out=False)
                else:
                    err += chunk
                    del err[:-_STDERR_KEPT]
    try:
        proc.wait(timeout=max(0.1, deadline - time.monotonic()))
    except subprocess.TimeoutExpired:
        raise _Bound(timed_out=True) from None
    return bytes(out), bytes(err)


def _kill(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        proc.wait()
    for pipe in (proc.stdin, proc.stdout, proc.stderr):
        if pipe is not None:
            try:
                pipe.close()
            except OSError:
                pass


_USERINFO = re.compile(r"([a-z][a-z0-9+.-]*://[^/@\s:]*):[^/@\s]*@", re.I)  # a password in a URL
_NOISE = ("hint:", "warning: redirecting")


def _message(stderr: str) -> str:
    """git's reason in a line: its fatal/error lines (the last ones say why), without the prefixes."""
    lines = [line.strip() for line in stderr.splitlines() if line.strip()]
    lines = [line for line in lines if not line.lower().startswith(_NOISE)]
    wanted = [line for line in lines if line.lower().startswith(("fatal:", "error:", "ssh:"))
              or line.startswith(("Permission denied", "Host key verification failed"))] or lines[-1:]
    words = "; ".join(re.sub(r"^(fatal|error):\s*", "", line, flags=re.I) for line in wanted[-2:])
    return words[:400]


def git_env(*, protocol: str, timeout: float, token: str | None, username: str) -> dict[str, str]:
    """The environment every git command of one connector runs in (see the module's docstring)."""
    folder = str(Path(find_git()).parent)
    config = {
        "gc.auto": "0",  # no repack or prune inside a bounded fetch (nor a detached one after it)
        "maintenance.auto": "false",
        "credential.helper": "",
        "http.followRedirects": "false",  # a redirect could point the fetch (and the token) anywhere
        "http.lowSpeedLimit": "1",  # a transfer stalled for `timeout` seconds is abandoned
        "http.lowSpeedTime": str(max(1, int(timeout))),
        "core.hooksPath": os.devnull,
        "protocol.version": "2",
    }
    if token is not None:
        config["http.extraHeader"] = f"Authorization: Basic {basic_pair(username, token)}"
    env = {
        "PATH": os.pathsep.join((folder, "/usr/local/bin", "/usr/bin", "/bin")),  # git's helpers, ssh; never "."
        "LC_ALL": "C", "LANG": "C",
        "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": os.devnull,
        "GIT_TERMINAL_PROMPT": "0", "GIT_ASKPASS": "true", "SSH_ASKPASS": "true",
        "GIT_ALLOW_PROTOCOL": protocol,
        "GIT_LITERAL_PATHSPECS": "1",  # a listed folder such as ":(top)x" is a folder, not pathspec magic
        "GIT_SSH_COMMAND": f"ssh -o BatchMode=yes -o ConnectTimeout={max(1, int(timeout))}",
        "GIT_CONFIG_COUNT": str(len(config)),
    }
    for index, (key, value) in enumerate(config.items()):
        env[f"GIT_CONFIG_KEY_{index}"] = key
        env[f"GIT_CONFIG_VALUE_{index}"] = value
    return env


def pinned(env: dict[str, str], *, protocol: str, host: str, port: int, addresses: Sequence[str]) -> dict[str, str]:
    """`env` with git told to connect to the checked `addresses` of `host` rather than resolve it again."""
    env = dict(env)
    if not addresses or _literal(host):
        return env
    if protocol in ("http", "https"):
        count = int(env["GIT_CONFIG_COUNT"])
        shown = ",".join(f"[{a}]" if ":" in a else a for a in addresses)
        env[f"GIT_CONFIG_KEY_{count}"] = "http.curloptResolve"
        env[f"GIT_CONFIG_VALUE_{count}"] = f"{host}:{port}:{shown}"
        env["GIT_CONFIG_COUNT"] = str(count + 1)
    elif protocol == "ssh":
        env["GIT_SSH_COMMAND"] += f" -o HostName={shlex.quote(addresses[0])} -o HostKeyAlias={shlex.quote(host)}"
    return env


def pinned_url(url: str, protocol: str, host: str, addresses: Sequence[str]) -> str:
    """A git:// URL with its host replaced by the first checked address (git connects itself, by name)."""
    if protocol != "git" or not addresses or _literal(host):
        return url
    parts = urlsplit(url)
    address = f"[{addresses[0]}]" if ":" in addresses[0] else addresses[0]
    netloc = f"{address}:{parts.port}" if parts.port else address
    return urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))


def _literal(host: str) -> bool:
    try:
        ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return False
    return True


def basic_pair(username: str, token: str) -> str:
    """The credentials of HTTP basic authentication: hidden from messages as the token itself is."""
    return base64.b64encode(f"{username}:{token}".encode()).decode()


def find_git() -> str:
    """The git command's path ("git" when it is not installed: running it then fails with a clear message)."""
    return shutil.which("git") or "git"
