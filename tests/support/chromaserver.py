"""A real Chroma server (`chroma run`, shipped in the chromadb wheel) on a free loopback port."""

from __future__ import annotations

import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path


def start_chroma(path: Path) -> tuple[subprocess.Popen, str]:
    """Start `chroma run` storing in `path`; returns (process, URL) once its heartbeat answers."""
    import chromadb

    exe = shutil.which("chroma") or str(Path(sys.executable).with_name("chroma"))
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen([exe, "run", "--host", "127.0.0.1", "--port", str(port), "--path", str(path)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 60
    while True:
        try:
            chromadb.HttpClient(host="127.0.0.1", port=port).heartbeat()
            return proc, f"http://127.0.0.1:{port}"
        except Exception:
            if proc.poll() is not None or time.monotonic() > deadline:
                proc.kill()
                raise RuntimeError("the Chroma server did not start")
            time.sleep(0.2)


def stop_chroma(proc: subprocess.Popen) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
