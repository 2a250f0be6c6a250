"""Git repositories for the Git connector's tests: a work tree that commits and pushes to a bare
"origin" (benchmarks/gitrepo.py's, here with uv documentation pages to copy in), and
`GitHttpServer`, git's own smart-HTTP server (`git http-backend`, run as CGI by a small threaded
HTTP server on 127.0.0.1) that can require a token and fail the first requests with 503, for the
secret and retry paths. Nothing here imports rag."""

from __future__ import annotations

import base64
import os
import shutil
import subprocess
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from benchmarks.gitrepo import GitRepo as BaseGitRepo

from .paths import SHARED

UV_PAGES = SHARED / "datasets" / "uv_docs" / "pages"


class GitRepo(BaseGitRepo):
    """benchmarks/gitrepo.py's repository, which can also copy a uv documentation page in."""

    def copy_page(self, page: str, path: str | None = None) -> None:
        """A page of the uv documentation (../shared/datasets/uv_docs/pages) at `path` (its own by default)."""
        self.write(path or page, (UV_PAGES / page).read_bytes())


def uv_repo(root: Path, pages: list[str]) -> GitRepo:
    """A repository whose work tree holds these uv documentation pages (not committed yet); the
    test is skipped where the shared dataset is missing."""
    import pytest

    if not UV_PAGES.is_dir():
        pytest.skip(f"the uv documentation pages are not at {UV_PAGES}")
    repo = GitRepo(root)
    for page in pages:
        repo.copy_page(page)
    return repo


def lfs_pointer(data: bytes) -> bytes:
    """A Git LFS pointer file as the specification writes one
    (https://github.com/git-lfs/git-lfs/blob/main/docs/spec.md)."""
    import hashlib

    return (f"version https://git-lfs.github.com/spec/v1\noid sha256:{hashlib.sha256(data).hexdigest()}\n"
            f"size {len(data)}\n").encode()


class GitHttpServer:
    """`git http-backend` over HTTP on 127.0.0.1, serving the repositories under `root`.

    `token`: requests without "Authorization: Basic base64(user:token)" get 401. `fail_first`:
    that many requests are answered 503 first (a transient outage). `seen` keeps every request's
    headers, so a test can check what the client sent."""

    def __init__(self, root: Path, token: str | None = None, fail_first: int = 0) -> None:
        self.root = root
        self.token = token
        self.failures_left = fail_first
        self.seen: list[dict[str, str]] = []
        self.lock = threading.Lock()
        self.backend = shutil.which("git") or "git"
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def __enter__(self) -> GitHttpServer:
        self.thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join(timeout=10)

    def refuse(self, headers: dict[str, str]) -> int | None:
        """The status a request is refused with, None to serve it."""
        with self.lock:
            self.seen.append(headers)
            if self.failures_left > 0:
                self.failures_left -= 1
                return 503
        if self.token is not None:
            given = headers.get("authorization", "")
            scheme, _, value = given.partition(" ")
            try:
                password = base64.b64decode(value).decode().partition(":")[2] if scheme.lower() == "basic" else ""
            except ValueError:
                password = ""
            if password != self.token:
                return 401
        return None

    def cgi_env(self, handler: BaseHTTPRequestHandler, length: int) -> dict[str, str]:
        path, _, query = handler.path.partition("?")
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"), "GIT_PROJECT_ROOT": str(self.root),
            "GIT_HTTP_EXPORT_ALL": "1", "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": os.devnull,
            "REQUEST_METHOD": handler.command, "PATH_INFO": path, "QUERY_STRING": query,
            "CONTENT_TYPE": handler.headers.get("Content-Type", ""), "CONTENT_LENGTH": str(length),
            "REMOTE_ADDR": "127.0.0.1", "REMOTE_USER": "test",
        }
        if handler.headers.get("Content-Encoding"):
            env["HTTP_CONTENT_ENCODING"] = handler.headers["Content-Encoding"]
        if handler.headers.get("Git-Protocol"):
            env["GIT_PROTOCOL"] = handler.headers["Git-Protocol"]
        return env


def _handler(server: GitHttpServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base class's name
            return None

        def do_GET(self) -> None:  # noqa: N802 - http.server's naming
            self._serve()

        def do_POST(self) -> None:  # noqa: N802
            self._serve()

        def _serve(self) -> None:
            status = server.refuse({k.lower(): v for k, v in self.headers.items()})
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else b""
            if status is not None:
                self.send_response(status)
                if status == 401:
                    self.send_header("WWW-Authenticate", 'Basic realm="test"')
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            done = subprocess.run([server.backend, "http-backend"], input=body, capture_output=True, timeout=60,
                                  env=server.cgi_env(self, len(body)))
            head, _, payload = done.stdout.partition(b"\r\n\r\n")
            lines = head.decode("latin-1").split("\r\n")
            code = next((int(v.split()[0]) for k, _, v in (line.partition(": ") for line in lines)
                         if k.lower() == "status"), 200)
            self.send_response(code)
            for key, _, value in (line.partition(": ") for line in lines):
                if key and key.lower() != "status":
                    self.send_header(key, value)
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

    return Handler
