"""A real Chroma server (`chroma run`, shipped in the chromadb wheel) on a free loopback port."""

from __future__ import annotations

import shutil
import socket
import subprocess
import sys
from pathlib import Path

from benchmarks import wait_started


def start_chroma(path: Path) -> tuple[subprocess.Popen, str]:
    """Start `chroma run` storing in `path`; returns (process, URL) once its heartbeat answers."""
    import chromadb

    exe = shutil.which("chroma") or str(Path(sys.executable).with_name("chroma"))
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen([exe, "run", "--host", "127.0.0.1", "--port", str(port), "--path", str(path)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
    try:
        wait_started(proc, lambda: bool(chromadb.HttpClient(host="127.0.0.1", port=port).heartbeat()),
                     "the Chroma server", 60, errors=(Exception,))
    except RuntimeError:
        proc.kill()
        raise
    return proc, f"http://127.0.0.1:{port}"


def stop_chroma(proc: subprocess.Popen) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
