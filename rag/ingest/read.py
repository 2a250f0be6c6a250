"""`parse_bytes`: the one entry point the rest of the service parses a file through (directory
ingest, HTTP uploads, import). A binary format is parsed in a worker process under bounds of memory,
time and output (rag/ingest/sandbox.py); text in this process (rag/ingest/formats/). It sits above
both, so that the formats know nothing of the workers that run them."""

from __future__ import annotations

from pathlib import PurePath

from rag.ingest.formats import BINARY_PARSERS, parse_here
from rag.ingest.parse import ParsedDocument
from rag.ingest.sandbox import shared_pool


def parse_bytes(data: bytes, filename: str, fallback_title: str | None = None, *, caller: str = "",
                upload: bool = False) -> ParsedDocument:
    """Parse one file's bytes by its suffix. Raises UnreadableFile (a ValueError) when it cannot,
    FileTooComplex when it would pass a bound. `caller`: whose file it is, for the workers' fair
    share (rag/ingest/sandbox.py); `upload`: under an upload's OCR budget."""
    if PurePath(filename).suffix.lower() in BINARY_PARSERS:
        return shared_pool().parse(data, filename, fallback_title, caller=caller, upload=upload)
    return parse_here(data, filename, fallback_title)
