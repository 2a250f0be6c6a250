"""Speed benchmarks that print tables (see benchmarks/README.md)."""

from __future__ import annotations

import json
from pathlib import Path

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
