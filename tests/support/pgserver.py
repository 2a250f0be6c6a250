"""A real, throwaway PostgreSQL server for the tests: initdb into a temp dir, start on a free port."""

from __future__ import annotations

import glob
import os
import shutil
import socket
import subprocess
import tempfile
import uuid
from pathlib import Path


def _bindir() -> Path | None:
    if shutil.which("pg_config"):
        out = subprocess.run(["pg_config", "--bindir"], capture_output=True, text=True)
        candidate = Path(out.stdout.strip())
        if (candidate / "initdb").exists():
            return candidate
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
    return Path(found[-1]).parent if found else None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class PgServer:
    """`keep`: a cluster kept in that directory between runs (the benchmarks), durable (fsync on);
    default: a throwaway one in a temp dir, removed on stop. `config`: server settings (`-c name=value`)
    on top of PostgreSQL's defaults, e.g. a benchmark's memory and checkpoint sizes."""

    def __init__(self, keep: Path | None = None, config: dict[str, str] | None = None) -> None:
        bindir = _bindir()
        if bindir is None:
            raise RuntimeError("PostgreSQL server binaries not found (Debian package: postgresql)")
        self.bindir = bindir
        self.keep = keep
        self.config = dict(config or {})
        if keep is not None:
            keep.mkdir(parents=True, exist_ok=True)
        self.base = keep or Path(tempfile.mkdtemp(prefix="rag-pg-"))
        self.port = _free_port()
        self._as: list[str] = []
        if os.geteuid() == 0:  # PostgreSQL refuses to run as root
            shutil.chown(self.base, "postgres", "postgres")
            self._as = ["runuser", "-u", "postgres", "--"]

    def _run(self, *args: str) -> None:
        subprocess.run([*self._as, *args], check=True, capture_output=True, timeout=120)

    def start(self) -> "PgServer":
        data = self.base / "data"
        if not data.exists():
            self._run(str(self.bindir / "initdb"), "-D", str(data), "-U", "postgres", "--auth=trust", "-E", "UTF8")
        options = f"-p {self.port} -k {self.base} -c listen_addresses=127.0.0.1 -c max_connections=200"
        if self.keep is None:
            options += " -c fsync=off -c full_page_writes=off"
        options += "".join(f" -c {name}={value}" for name, value in self.config.items())
        self._run(str(self.bindir / "pg_ctl"), "-D", str(data), "-o", options, "-l", str(self.base / "log"), "-w", "start")
        return self

    def stop(self) -> None:
        try:
            mode = "immediate" if self.keep is None else "fast"
            self._run(str(self.bindir / "pg_ctl"), "-D", str(self.base / "data"), "-m", mode, "stop")
        finally:
            if self.keep is None:
                shutil.rmtree(self.base, ignore_errors=True)

    def url(self, database: str = "postgres") -> str:
        return f"postgresql+psycopg://postgres@127.0.0.1:{self.port}/{database}"

    def new_database(self) -> str:
        return _create_database(f"host=127.0.0.1 port={self.port} user=postgres dbname=postgres", self.url)


class ExternalPg:
    """A server started outside the tests (`.ci/run`), given as a libpq URL of its admin database,
    e.g. postgresql://postgres@127.0.0.1:5432/postgres (RAG_TEST_POSTGRES)."""

    def __init__(self, url: str) -> None:
        from sqlalchemy.engine import make_url

        self.conninfo = url
        self._url = make_url(url).set(drivername="postgresql+psycopg")

    def url(self, database: str = "postgres") -> str:
        return self._url.set(database=database).render_as_string(hide_password=False)

    def new_database(self) -> str:
        return _create_database(self.conninfo, self.url)

    def stop(self) -> None:
        pass  # not ours to stop


def _create_database(conninfo: str, url) -> str:
    import psycopg

    name = f"t_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(conninfo, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    return url(name)
