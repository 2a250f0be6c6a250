"""Text that becomes Markdown: escaped, so that what a file says as text stays text.

A converted file's body is Markdown, and whoever renders it (the editor, an MCP client, a chat app)
renders its markup. Text of an HTML page, a Word document or a PDF is no markup: the HTML text
`&lt;img src=x onerror=…&gt;` must not become a live `<img>` tag, nor the text
`[x](javascript:…)` a live link. So, in any text a parser writes into a body:

* `<` becomes `&lt;` (no raw HTML, no autolink `<javascript:…>`), and an `&` that would start an
  entity reference becomes `&amp;` (the text `&lt;` stays those four characters);
* a `[` that could open a link, an image or a reference definition (a `]` follows, then `(`, `[`
  or `:`) becomes `&#91;`. CommonMark reads character references as literal text, never as
  structure, whatever precedes them (a backslash escape could itself be escaped);
* a `#` opening a block becomes `\\#` (no heading the file did not have).

Display text (rag.synthesize.markup.clean_text) unescapes the references again, so excerpts and
answers show the file's characters. Converted files make no links (an HTML link becomes its
text), so no target of a file's choosing (`javascript:`, `data:`) reaches a body.
"""

from __future__ import annotations

import re

_ENTITY = re.compile(r"&(?=#?[A-Za-z0-9]+;)")
# `[` with a `]` after it (no other bracket between) followed by what makes it a link: `](`, `][`, `]:`.
_LINK_OPENER = re.compile(r"\[(?=[^\[\]]*\][(\[:])")
_BACKTICKS = re.compile(r"`{3,}")


def escape_text(text: str) -> str:
    """Inline text as Markdown that renders as exactly this text (see the module docstring)."""
    if "&" in text:
        text = _ENTITY.sub("&amp;", text)
    if "<" in text:
        text = text.replace("<", "&lt;")
    if "[" in text:
        text = _LINK_OPENER.sub("&#91;", text)
    return text


def escape_block(text: str) -> str:
    """A paragraph's text: `escape_text`, and a leading `#` that would make it a heading escaped."""
    text = escape_text(text)
    return "\\" + text if text.startswith("#") else text


def fenced(code: str) -> str:
    """A fenced code block holding `code` byte for byte: its fence longer than any run of
    backticks inside, so no line of the code can close it early."""
    longest = max((len(run) for run in _BACKTICKS.findall(code)), default=2)
    fence = "`" * max(3, longest + 1)
    return f"{fence}\n{code}\n{fence}"
