"""Handbook pages (../shared/datasets/handbook_18f) as plain Markdown, for the test data that
tests/data/*/make.py writes: front matter and template tags taken out, the first `keep` characters
kept, cut at a paragraph's end."""

from __future__ import annotations

import re
from pathlib import Path

HANDBOOK = Path(__file__).resolve().parents[3] / "shared/datasets/handbook_18f/pages"


def handbook_text(page: str, keep: int = 1800, root: Path = HANDBOOK) -> str:
    text = (root / page).read_text(encoding="utf-8")
    text = re.sub(r"\A---\n.*?\n---\n", "", text, flags=re.S)
    text = re.sub(r"\{%.*?%\}|\{\{.*?\}\}", "", text, flags=re.S)
    text = re.sub(r"\[([^\]]*)\]\(\s*\)", r"\1", text)
    text = re.sub(r"\n{3,}", "\n\n", text).strip()
    cut = text.rfind("\n\n", 0, keep)
    return text[: cut if cut > 0 else keep]
