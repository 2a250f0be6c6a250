"""Tables of any format as Markdown tables: the first row is the header, every row as wide as the widest."""

from __future__ import annotations

from rag.ingest.formats.markdown import escape_text


def cell(text: str) -> str:
    """A cell's text on one line, as Markdown text (rag/ingest/formats/markdown.py), its pipes escaped."""
    return escape_text(" ".join(text.split())).replace("|", "\\|")


def markdown_table(rows: list[list[str]]) -> str:
    rows = [row for row in rows if any(row)]
    if not rows:
        return ""
    width = max(len(r) for r in rows)
    rows = [r + [""] * (width - len(r)) for r in rows]
    lines = ["| " + " | ".join(rows[0]) + " |", "|" + " --- |" * width]
    return "\n".join(lines + ["| " + " | ".join(r) + " |" for r in rows[1:]])
