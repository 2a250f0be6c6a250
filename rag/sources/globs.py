"""Path globs as a source's `paths` setting takes them: "docs/**/*.md", "*.md", "handbook/".

`*` and `?` stay inside one folder, `**` crosses folders (`**/` also matches no folder at all, so
"**/*.md" takes "README.md" too), `[...]` is a character class, and a pattern ending in "/" takes
everything under that folder. A pattern is matched against the whole path from the source's root
(as `git ls-files ':(glob)...'` does), so "*.md" means the root's Markdown files only. Python's
fnmatch lets `*` cross folders, and PurePath.full_match arrives only in 3.13.
"""

from __future__ import annotations

import re
from typing import Iterable

_WILD = re.compile(r"[*?\[]")


def _class(pattern: str, start: int) -> tuple[str, int]:
    """The regular expression of the character class at `start` ("[" ...), and where it ends."""
    end = pattern.find("]", start + 2 if pattern[start + 1:start + 2] in ("!", "^") else start + 1)
    if end < 0:
        return re.escape("["), start + 1
    body = pattern[start + 1:end]
    negate = body[:1] in ("!", "^")
    body = body[1:] if negate else body
    return ("[^/" if negate else "[") + body.replace("\\", "\\\\") + "]", end + 1


def translate(pattern: str) -> str:
    """The regular expression (matched whole) of one glob."""
    out: list[str] = []
    index = 0
    while index < len(pattern):  # bounded: every turn consumes at least one character
        if pattern.startswith("**/", index):
            out.append("(?:.*/)?")
            index += 3
        elif pattern.startswith("**", index):
            out.append(".*")
            index += 2
        elif pattern[index] == "*":
            out.append("[^/]*")
            index += 1
        elif pattern[index] == "?":
            out.append("[^/]")
            index += 1
        elif pattern[index] == "[":
            part, index = _class(pattern, index)
            out.append(part)
        else:
            out.append(re.escape(pattern[index]))
            index += 1
    return "".join(out)


def _normal(pattern: str) -> str:
    pattern = pattern.strip().lstrip("/")
    return pattern + "**" if pattern.endswith("/") else pattern


class Globs:
    """A list of globs: a path is taken when any of them matches it."""

    def __init__(self, patterns: Iterable[str]) -> None:
        self.patterns = [_normal(p) for p in patterns]
        if not self.patterns or not all(self.patterns):
            raise ValueError("paths must hold at least one non-empty glob, such as ** or docs/**/*.md")
        try:
            self._regex = re.compile("|".join(f"(?:{translate(p)})" for p in self.patterns), re.S)
        except re.error as exc:
            raise ValueError(f"a glob in paths cannot be read ({exc.msg})") from None

    def match(self, path: str) -> bool:
        return self._regex.fullmatch(path) is not None

    def prefixes(self) -> list[str]:
        """The folders every match lies in, one per pattern ([] when one pattern may match anywhere):
        what a listing may be narrowed to before the globs are applied."""
        folders: list[str] = []
        for pattern in self.patterns:
            wild = _WILD.search(pattern)
            literal = pattern[:wild.start()] if wild else pattern
            folder = literal.rsplit("/", 1)[0] + "/" if "/" in literal else ""
            if not folder:
                return []
            folders.append(folder if wild else literal)
        return sorted(set(folders))
