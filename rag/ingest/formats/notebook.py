"""Jupyter notebooks (.ipynb): Markdown cells as prose, code cells as fenced code, outputs left out.

A notebook is JSON (nbformat 4; nbformat 3's worksheets and heading cells are read too). Markdown
cells are the notebook author's own Markdown and go into the body as written, like a .md file
(no template tags stripped: `{{ }}` in a notebook is content); each code cell becomes a fenced
block tagged with the kernel's language (`metadata.kernelspec.language`, else
`metadata.language_info.name`), its fence longer than any backtick run inside so the code is kept
byte for byte (rag/ingest/formats/markdown.py). Outputs (images, tables, tracebacks) are left out:
they are results, often large, and re-running the notebook makes them again. Raw cells are left
out too. The title is the first level-1 heading of a Markdown cell, else the file's name.

Bounds: the file's size, the JSON's nesting (a document nested past Python's recursion limit is
refused as `depth`), the cells, the characters of the body.
"""

from __future__ import annotations

import json
import re
from typing import Any

from rag.ingest.formats import UnreadableFile, decode_text, too_complex
from rag.ingest.formats.markdown import fenced
from rag.ingest.parse import ParsedDocument, with_title
from rag.synthesize.markup import clean_heading

MAX_BYTES = 100_000_000  # outputs (base64 images) make notebooks large; they are skipped, not read
MAX_CELLS = 20_000
MAX_CHARACTERS = 10_000_000
_FIRST_HEADING = re.compile(r"^#[ \t]+(.+?)[ \t]*#*[ \t]*$", re.M)
_LANGUAGE = re.compile(r"[^A-Za-z0-9_+#.-]")


def _text(value: Any) -> str:
    """A cell's source: a string or a list of lines (nbformat joins them as they are)."""
    if isinstance(value, str):
        return value
    if isinstance(value, list) and all(isinstance(line, str) for line in value):
        return "".join(value)
    if value is None:
        return ""
    raise UnreadableFile("not a Jupyter notebook (a cell's source is not text)")


def _load(data: bytes) -> dict:
    if len(data) > MAX_BYTES:
        raise too_complex("size", f"more than {MAX_BYTES // 1_000_000} MB")
    try:
        notebook = json.loads(decode_text(data))
    except RecursionError:
        raise too_complex("depth", "JSON nested too deeply") from None
    except UnreadableFile:
        raise UnreadableFile("not a Jupyter notebook (it is not UTF-8 JSON text)") from None
    except ValueError as exc:
        raise UnreadableFile(f"not a Jupyter notebook (invalid JSON: {str(exc)[:120]})") from None
    if not isinstance(notebook, dict) or not ("cells" in notebook or "worksheets" in notebook):
        raise UnreadableFile("not a Jupyter notebook (JSON without cells)")
    return notebook


def _cells(notebook: dict) -> list:
    if isinstance(notebook.get("cells"), list):  # nbformat 4
        return notebook["cells"]
    cells: list = []  # nbformat 3: the cells of its worksheets
    for sheet in notebook.get("worksheets") or []:
        if isinstance(sheet, dict) and isinstance(sheet.get("cells"), list):
            cells.extend(sheet["cells"])
    return cells


def _language(notebook: dict) -> str:
    metadata = notebook.get("metadata") if isinstance(notebook.get("metadata"), dict) else {}
    for key, field in (("kernelspec", "language"), ("language_info", "name")):
        value = metadata.get(key)
        if isinstance(value, dict) and isinstance(value.get(field), str):
            return _LANGUAGE.sub("", value[field])[:32].lower()
    return ""


def _block(cell: Any, language: str) -> str:
    """One cell as Markdown ("" for a cell left out)."""
    if not isinstance(cell, dict):
        raise UnreadableFile("not a Jupyter notebook (a cell is not an object)")
    kind = cell.get("cell_type")
    if kind == "markdown":
        return _text(cell.get("source")).strip("\n")
    if kind == "heading":  # nbformat 3
        level = cell.get("level") if isinstance(cell.get("level"), int) else 1
        text = " ".join(_text(cell.get("source")).split())
        return f"{'#' * max(1, min(6, level))} {text}" if text else ""
    if kind == "code":
        code = _text(cell.get("source", cell.get("input"))).strip("\n")  # v3 calls it input
        if not code.strip():
            return ""
        block = fenced(code)
        fence, rest = block.split("\n", 1)
        own = cell.get("language") if isinstance(cell.get("language"), str) else ""  # v3: per cell
        return f"{fence}{_LANGUAGE.sub('', own)[:32].lower() or language}\n{rest}"
    return ""  # raw cells and anything newer: not prose, not code


def parse_notebook(data: bytes, fallback_title: str) -> ParsedDocument:
    notebook = _load(data)
    cells = _cells(notebook)
    if len(cells) > MAX_CELLS:
        raise too_complex("cells", f"more than {MAX_CELLS}")
    language = _language(notebook)
    blocks: list[str] = []
    length = 0
    title = ""
    for cell in cells:
        block = _block(cell, language)
        if not block.strip():
            continue
        length += len(block)
        if length > MAX_CHARACTERS:
            raise too_complex("characters", f"more than {MAX_CHARACTERS} characters of text")
        if not title and cell.get("cell_type") in ("markdown", "heading"):
            heading = _FIRST_HEADING.search(block)
            title = clean_heading(heading.group(1)) if heading else ""
        blocks.append(block)
    if not blocks:
        raise UnreadableFile("a Jupyter notebook with no text or code in its cells")
    title = " ".join((title or fallback_title).split())
    return ParsedDocument(title=title, body=with_title(title, "\n\n".join(blocks)),
                          metadata={"language": language} if language else {})
