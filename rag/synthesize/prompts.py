"""Prompt texts live in ``prompts/`` as files, versioned with the code and loaded by name.

A prompt is a ``string.Template``: ``$excerpts`` and ``$question`` are filled with the values as they
are, so braces or dollar signs inside a document never break or change the template.

Excerpts are data: their text cannot open or close an ``<excerpt>`` tag, and their bracketed
numbers (``[2]``, ``[1-3]``) are shown as ``［2］`` (``neutral_brackets``) so that a model never
copies a document's own reference as if it cited excerpt 2. Titles and section paths are cleaned of
markup (``clean_heading``).
"""

from __future__ import annotations

import re
from functools import lru_cache
from pathlib import Path
from string import Template
from typing import Sequence

from rag.errors import InvalidArgument
from rag.retrieve.types import Hit
from rag.synthesize.markup import clean_heading, neutral_brackets

PROMPTS_DIR = Path(__file__).resolve().parents[2] / "prompts"
_NAME = re.compile(r"^[a-z0-9_]+$")
# A document must not be able to close its own excerpt and write outside it.
_TAG = re.compile(r"<(/?)\s*excerpt", re.IGNORECASE)


@lru_cache(maxsize=64)
def _load(directory: Path, name: str) -> Template:
    if not _NAME.match(name):
        raise InvalidArgument(f"invalid prompt name {name!r}")
    path = directory / f"{name}.txt"
    try:
        return Template(path.read_text(encoding="utf-8").strip())
    except FileNotFoundError:
        raise InvalidArgument(f"prompt {name!r} not found in {directory}") from None


def render_prompt(name: str, directory: Path | None = None, **values: str) -> str:
    return _load(directory or PROMPTS_DIR, name).substitute(values)


def _neutral(text: str) -> str:
    return _TAG.sub(lambda m: "‹" + m.group(1) + "excerpt", text)


def _attribute(text: str) -> str:
    return neutral_brackets(_neutral(clean_heading(text))).replace('"', "'").replace("\n", " ")


def format_excerpts(hits: Sequence[Hit], excerpt_chars: int = 2000) -> str:
    """Numbered excerpts as the answer prompt shows them, each fenced so its text stays data."""
    blocks = []
    for number, hit in enumerate(hits, start=1):
        section = " > ".join(part for part in (clean_heading(p) for p in hit.heading_path) if part)
        head = f'<excerpt n="{number}" document="{_attribute(hit.title)}"'
        if section:
            head += f' section="{_attribute(section)}"'
        text = neutral_brackets(_neutral(hit.excerpt(excerpt_chars)))
        blocks.append(f"{head}>\n{text}\n</excerpt>")
    return "\n\n".join(blocks)
