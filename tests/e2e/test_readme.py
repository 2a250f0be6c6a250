"""README.md, run as a new user runs it: its fenced `bash` and `python` blocks, in order, in a fresh
RAG_HOME, from the repository's root.

- The install step (a block that starts with `bash scripts/install.sh`) is the one CI already ran.
- A block that starts `rag serve` runs in the background until /healthz answers; it is stopped at
  the end. Its port is a free one instead of 8000 (`localhost:8000` in every block follows it), so
  the test never meets another server.
- Every other block must exit 0; a `text` block right after one is its output: each of its lines,
  `…` standing for any text, must be a line of what the block printed, in that order.
- Shell variables a block exports are seen by the blocks after it, as in one terminal.
"""

from __future__ import annotations

import os
import re
import shlex
import signal
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.M | re.S)


def readme_blocks() -> list[tuple[str, str, str | None]]:
    """(language, code, expected output) of each bash and python block, in order."""
    text = (ROOT / "README.md").read_text()
    found = list(FENCE.finditer(text))
    blocks = []
    for i, fence in enumerate(found):
        language, code = fence.group(1), fence.group(2)
        if language in ("bash", "python"):
            after = found[i + 1] if i + 1 < len(found) else None
            output = (after is not None and after.group(1) == "text" and language == "bash"
                      and not text[fence.end():after.start()].strip())  # nothing between the two
            blocks.append((language, code, after.group(2) if output else None))
    return blocks


def _matches(expected: str, printed: str) -> bool:
    lines = iter(printed.splitlines())
    for want in expected.strip().splitlines():
        pattern = re.compile(".*".join(map(re.escape, want.split("…"))) + r"\Z")
        if not any(pattern.match(line) for line in lines):
            return False
    return True


def test_readme_blocks_run_in_order(tmp_path):
    from ..support.processes import free_port, wait_for_health

    port = free_port()
    state = tmp_path / "exports.sh"
    state.write_text("")
    server_log = tmp_path / "serve.log"
    env = {k: v for k, v in os.environ.items() if k != "RAG_TOKEN"} | {"RAG_HOME": str(tmp_path / "home")}
    server = None
    ran = 0
    try:
        for language, code, expected in readme_blocks():
            if code.startswith("bash scripts/install.sh"):
                continue
            code = code.replace("localhost:8000", f"localhost:{port}").replace("rag serve", f"rag serve --port {port}")
            if language == "python":
                code = f".venv/bin/python -c {shlex.quote(code)}"
            script = f"set -e\n. {state}\n{code}\nexport -p > {state}\n"
            if f"rag serve --port {port}" in code:
                assert server is None, "a second serving block"
                server = subprocess.Popen(["bash", "-c", script], cwd=ROOT, env=env, text=True, start_new_session=True,
                                          stdout=subprocess.DEVNULL, stderr=server_log.open("w"))
                wait_for_health(f"http://127.0.0.1:{port}", server, server_log.read_text, 900)
                ran += 1
                continue
            done = subprocess.run(["bash", "-c", script], cwd=ROOT, env=env, text=True, capture_output=True,
                                  timeout=600)
            assert done.returncode == 0, f"{code}\nexit {done.returncode}: {done.stderr[-3000:]}"
            if expected is not None:
                assert _matches(expected, done.stdout), f"{code}\nprinted:\n{done.stdout[:3000]}"
            ran += 1
    finally:
        if server is not None and server.poll() is None:
            os.killpg(server.pid, signal.SIGINT)
            server.wait(timeout=120)
    assert server is not None and ran >= 5
    # The first run's token: its secret in a file of the home, the terminal told where, never what.
    token_file = tmp_path / "home" / "admin-token"
    assert f"export RAG_TOKEN=$(cat {token_file})" in server_log.read_text()
    assert token_file.read_text().strip() not in server_log.read_text()
