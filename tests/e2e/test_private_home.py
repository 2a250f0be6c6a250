"""A private home (issue 27, defect 4): RAG_HOME and everything in it, and the embedding cache
wherever RAG_EMBED_CACHE puts it, are the owner's alone (0700 folders, 0600 files) after the real
CLI ingests, searches and serves; an older home left readable is repaired on open, with one line
saying so; and another local user (`nobody`, through setpriv) can neither read the store nor hold
its lock. The commands run under umask 022, as a login shell's are."""

from __future__ import annotations

import os
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from ..support.api_support import build_home
from ..support.processes import free_port, wait_for_health

NOBODY = 65534
REPAIRED = "made RAG_HOME private"


def _loose_umask() -> None:
    os.umask(0o022)  # what a login shell gives: files 0644, folders 0755


def rag(env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "rag.cli", *args], capture_output=True, text=True, env=env,
                          timeout=600, stdin=subprocess.DEVNULL, preexec_fn=_loose_umask)


def open_to_others(*tops: Path) -> dict[str, str]:
    """Every path under `tops` (themselves included) that a group or other user may use, with its mode."""
    found = {}
    for top in tops:
        for path in [top, *top.rglob("*")]:
            mode = path.lstat().st_mode
            if not stat.S_ISLNK(mode) and stat.S_IMODE(mode) & 0o077:
                found[str(path)] = oct(stat.S_IMODE(mode))
    return found


def as_nobody(*command: str) -> subprocess.CompletedProcess:
    return subprocess.run(["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", *command],
                          capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)


@pytest.fixture(scope="module")
def world():
    """A shared folder the user chose (0755) holding the home and, beside it, the embedding
    cache's folder (0755, the user's own): `rag ingest`, `rag search`, then `rag serve` on it."""
    root = Path(tempfile.mkdtemp(prefix="rag-private-"))
    try:
        root.chmod(0o755)  # others may pass through: only the home's own modes keep them out
        cache_dir = root / "cache"
        cache_dir.mkdir(mode=0o755)
        cache_dir.chmod(0o755)
        home = root / "home"
        pages = build_home(root)
        for path in [root / "pages", root / "cafeteria", *root.rglob("pages/**/*"), *root.rglob("cafeteria/*")]:
            path.chmod(0o755 if path.is_dir() else 0o644)
        env = {**os.environ, "RAG_HOME": str(home), "RAG_EMBED_CACHE": str(cache_dir / "vectors.sqlite")}
        ingest = rag(env, "ingest", str(pages))
        assert ingest.returncode == 0, ingest.stderr
        search = rag(env, "search", "How much annual leave do I earn?", "--limit", "3")
        assert search.returncode == 0 and "leave" in search.stdout.lower(), search.stderr
        yield {"root": root, "home": home, "cache_dir": cache_dir, "env": env, "outputs": [ingest, search]}
    finally:
        shutil.rmtree(root, ignore_errors=True)


def test_a_new_home_and_every_file_in_it_are_private_while_serving_and_after(world):
    home, cache_dir, env = world["home"], world["cache_dir"], world["env"]
    port = free_port()
    server = subprocess.Popen([sys.executable, "-m", "rag.cli", "serve", "--port", str(port)], env=env, text=True,
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, preexec_fn=_loose_umask)
    try:
        wait_for_health(f"http://127.0.0.1:{port}", server, lambda: server.communicate()[1])
        serving = {p.name for p in home.iterdir()}
        assert {"rag.db", "rag.lock", "rag.lock.holder", "rag.lock.secret", "logs", "chroma"} <= serving
        assert open_to_others(home, *cache_dir.iterdir()) == {}
    finally:
        server.send_signal(signal.SIGINT)
        _, stderr = server.communicate(timeout=120)
    assert open_to_others(home, *cache_dir.iterdir()) == {}
    assert (home / "logs" / "rag.log").stat().st_size > 0 and (home / "keyword").is_dir()
    assert sorted(p.name for p in cache_dir.iterdir())[0] == "vectors.sqlite"
    # The folders the user chose keep their modes; nothing said a repair was needed.
    assert stat.S_IMODE(world["root"].stat().st_mode) == 0o755
    assert stat.S_IMODE(cache_dir.stat().st_mode) == 0o755
    assert not any(REPAIRED in out.stderr for out in world["outputs"]) and REPAIRED not in stderr


@pytest.mark.skipif(os.geteuid() != 0 or shutil.which("setpriv") is None,
                    reason="needs root and setpriv to act as another local user")
def test_another_local_user_can_neither_read_the_store_nor_hold_its_lock(world):
    home = world["home"]
    for path in (home / "rag.db", home / "logs" / "rag.log", world["cache_dir"] / "vectors.sqlite"):
        refused = as_nobody("cat", str(path))
        assert refused.returncode != 0 and "Permission denied" in refused.stderr, path
    held = as_nobody("flock", "--shared", "--nonblock", str(home / "rag.lock"), "true")
    assert held.returncode != 0 and "Permission denied" in held.stderr
    # The owner's commands still open the store.
    assert rag(world["env"], "search", "leave", "--limit", "1").returncode == 0


def test_an_older_home_left_readable_is_repaired_on_open_and_said_once(world, tmp_path):
    home, env = world["home"], world["env"]
    outside = tmp_path / "outside.txt"  # a link in the home is not followed: its target keeps its mode
    outside.write_text("not the home's")
    outside.chmod(0o644)
    (home / "a-link").symlink_to(outside)
    theirs = home / "theirs.txt"  # another user's file is not this user's to change
    theirs.write_text("x")
    theirs.chmod(0o644)
    os.chown(theirs, NOBODY, NOBODY)
    loose = 0
    for path in [home, *home.rglob("*")]:  # as an older rag left it: 0755 folders, 0644 files
        if not path.is_symlink() and path != theirs:
            path.chmod(0o755 if path.is_dir() else 0o644)
            loose += 1
    first = rag(env, "search", "leave", "--limit", "1")
    assert first.returncode == 0, first.stderr
    said = [line for line in first.stderr.splitlines() if REPAIRED in line]
    assert len(said) == 1 and f": {loose} files and folders in {home} were readable" in said[0], first.stderr
    assert open_to_others(home) == {str(theirs): "0o644"}
    assert stat.S_IMODE(outside.stat().st_mode) == 0o644
    again = rag(env, "search", "leave", "--limit", "1")
    assert again.returncode == 0 and REPAIRED not in again.stderr
    log = (home / "logs" / "rag.log").read_text()
    assert log.count(REPAIRED) == 1
    theirs.unlink()
    (home / "a-link").unlink()


def test_a_link_planted_as_the_lock_is_refused_with_a_message(world, tmp_path):
    home, env = world["home"], world["env"]
    target = tmp_path / "elsewhere"
    target.write_text("")
    lock = home / "rag.lock"
    lock.unlink()
    lock.symlink_to(target)
    try:
        refused = rag(env, "search", "leave", "--limit", "1")
        assert refused.returncode == 3, refused.stderr
        assert "remove it if it is a link" in refused.stderr and "Traceback" not in refused.stderr
    finally:
        lock.unlink()


def test_making_an_open_cache_private_keeps_its_connections_locks(tmp_path: Path) -> None:
    """private_file on a cache this process has open (every new service opens the shared cache
    again) must not open and close the file: that drops the POSIX locks of the open connection, and
    another process closing its own connection then checkpoints and deletes the write-ahead log
    under it (the suite's shared cache turned to "disk I/O error" so)."""
    import sqlite3

    from rag.store.home import private_file

    cache = tmp_path / "cache" / "embeddings.sqlite"
    private_file(cache)
    held = sqlite3.connect(str(cache))
    held.execute("PRAGMA journal_mode=WAL")
    held.execute("CREATE TABLE t (x)")
    held.execute("INSERT INTO t VALUES (1)")
    held.commit()
    assert held.execute("SELECT x FROM t").fetchall() == [(1,)]
    os.chmod(cache, 0o644)
    private_file(cache)  # a second service of this process opens the same cache
    assert stat.S_IMODE(cache.stat().st_mode) == 0o600
    other = f"import sqlite3; c = sqlite3.connect({str(cache)!r}); c.execute('SELECT x FROM t').fetchall(); c.close()"
    subprocess.run([sys.executable, "-c", other], check=True, timeout=60)
    # Our connection's shared lock held: the other process was not the last one, and left the log alone.
    assert Path(f"{cache}-wal").stat().st_size > 0
    held.execute("INSERT INTO t VALUES (2)")
    held.commit()
    assert held.execute("SELECT count(*) FROM t").fetchone() == (2,)
    held.close()
