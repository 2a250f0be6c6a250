"""Speed benchmarks that print tables (see benchmarks/README.md)."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path
from typing import Callable

# Quotas off (RAG_QUOTA__*): a benchmark drives all its clients with one token, and measures speed,
# not quotas (`python -m benchmarks.load --phases quota` measures those).
NO_QUOTAS = {f"RAG_QUOTA__{kind}_PER_MINUTE": "0" for kind in ("SEARCH", "ASK", "UPLOAD", "WRITE")} | {
    "RAG_QUOTA__STREAMS_PER_TOKEN": "0"}


def write_json(result: object, dest: str | None) -> None:
    """`--json PATH`: write the result there; '-' prints it to standard output."""
    if not dest:
        return
    text = json.dumps(result, indent=2)
    if dest == "-":
        print(text)
    else:
        Path(dest).parent.mkdir(parents=True, exist_ok=True)
        Path(dest).write_text(text)


def wait_started(process: subprocess.Popen, answers: Callable[[], bool], what: str, seconds: float,
                 log: Callable[[], str] = lambda: "", errors: tuple[type[BaseException], ...] = (OSError,),
                 every: float = 0.2) -> None:
    """Until the server `process` started `answers()` (an exception of `errors` counts as not yet):
    RuntimeError naming `what` and the end of its `log` when it stops first or `seconds` pass. The
    benchmarks' servers and the tests' (tests/support) wait with this."""
    deadline = time.monotonic() + seconds
    while True:
        if process.poll() is not None:
            raise RuntimeError(f"{what} stopped: {log()[-3000:]}")
        try:
            if answers():
                return
        except errors:
            pass
        if time.monotonic() > deadline:
            raise RuntimeError(f"{what} did not answer within {seconds:.0f} s: {log()[-3000:]}")
        time.sleep(every)
