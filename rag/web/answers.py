"""An answer's text as the ask page shows it: the little Markdown an answer holds, as escaped HTML.

Answers quote documents, so their text is untrusted. This is not a Markdown renderer: it knows the
blocks the synthesizers write (paragraphs apart by a blank line, `- item` lists, fenced code blocks
on lines of their own) and, in a paragraph or list item, `inline code` and the citation markers
`[n]`, each a link to source n's first cited excerpt (class `cite`). Everything else is text,
escaped; a marker inside code stays text. rag/web/static/editor.js (`renderAnswer`) draws the same
blocks from the same text while an answer streams in, with DOM nodes and `textContent`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from markupsafe import Markup, escape

CITATION = re.compile(r"\[([0-9]{1,4})\]")
# An opening fence: up to three spaces, three or more backticks or tildes, and an info string
# (a backtick fence's holds no backtick: "```x```" on a line is inline code).
_FENCE = re.compile(r"^( {0,3})(`{3,}|~{3,})(.*)$")
_BULLET = re.compile(r"^ {0,3}[-*+][ \t]+")
_INFO = re.compile(r"[A-Za-z0-9_+#.-]{1,40}")


@dataclass
class Block:
    kind: str  # "p", "ul" or "code"
    lines: list[str] = field(default_factory=list)  # "p": its lines; "code": the code's lines
    items: list[list[str]] = field(default_factory=list)  # "ul": each item's lines
    info: str = ""  # "code": the fence's info string's first word, when it is a plain word


def _opening(line: str) -> re.Match[str] | None:
    fence = _FENCE.match(line)
    if fence is None or (fence.group(2)[0] == "`" and "`" in fence.group(3)):
        return None
    return fence


def _closes(line: str, marker: str) -> bool:
    stripped = line.strip()
    return (len(line) - len(line.lstrip(" ")) <= 3 and len(stripped) >= len(marker)
            and stripped == marker[0] * len(stripped))


def blocks(text: str) -> list[Block]:
    """The answer's blocks, in order. A fence left open (an answer still streaming) runs to the end."""
    found: list[Block] = []
    current: Block | None = None
    lines = text.replace("\r\n", "\n").split("\n")
    i = 0
    while i < len(lines):
        line = lines[i]
        i += 1
        fence = _opening(line)
        if fence is not None:
            indent, marker = len(fence.group(1)), fence.group(2)
            word = fence.group(3).strip().split(" ")[0]
            code = Block("code", info=word if _INFO.fullmatch(word) else "")
            while i < len(lines) and not _closes(lines[i], marker):
                body = lines[i]
                code.lines.append(body[min(indent, len(body) - len(body.lstrip(" "))):])
                i += 1
            i += 1  # the closing fence
            found.append(code)
            current = None
        elif not line.strip():
            current = None
        elif _BULLET.match(line):
            if current is None or current.kind != "ul":
                current = Block("ul")
                found.append(current)
            current.items.append([line[_BULLET.match(line).end():]])
        elif current is not None and current.kind == "ul":
            current.items[-1].append(line.strip())  # a list item's next line, as in Markdown
        else:
            if current is None:
                current = Block("p")
                found.append(current)
            current.lines.append(line)
    return found


def _inline(text: str, links: dict[int, str]) -> Markup:
    """`code` spans as <code>, each known `[n]` a link; the rest escaped text."""
    out: list[Markup] = []
    at = 0
    while at < len(text):
        tick = text.find("`", at)
        if tick < 0:
            out.append(_cited(text[at:], links))
            break
        run = tick
        while run < len(text) and text[run] == "`":
            run += 1
        ticks = text[tick:run]
        close = re.compile(rf"(?<!`){ticks}(?!`)").search(text, run)
        if close is None:  # no closing run of the same length: the backticks are text
            out.append(_cited(text[at:run], links))
            at = run
            continue
        code = text[run:close.start()]
        if len(code) > 2 and code[0] == code[-1] == " " and code.strip():
            code = code[1:-1]
        out += [_cited(text[at:tick], links), Markup("<code>%s</code>") % code]
        at = close.end()
    return Markup("").join(out)


def _cited(text: str, links: dict[int, str]) -> Markup:
    out: list[Markup] = []
    at = 0
    for match in CITATION.finditer(text):
        link = links.get(int(match.group(1)))
        if link is None:
            continue
        out += [escape(text[at:match.start()]), Markup('<a href="%s" class="cite">%s</a>') % (link, match.group(0))]
        at = match.end()
    out.append(escape(text[at:]))
    return Markup("").join(out)


def render_answer(text: str, sources: list[dict[str, Any]]) -> Markup:
    """The answer as HTML in which nothing of its text is markup, each `[n]` of a known source a link."""
    links = {source["number"]: source["link"] for source in sources}
    out: list[Markup] = []
    for block in blocks(text):
        if block.kind == "code":
            language = Markup(' class="language-%s"') % block.info if block.info else Markup("")
            out.append(Markup("<pre><code%s>%s</code></pre>") % (language, "\n".join(block.lines)))
        elif block.kind == "ul":
            items = Markup("").join(Markup("<li>%s</li>") % _inline("\n".join(item), links) for item in block.items)
            out.append(Markup("<ul>%s</ul>") % items)
        else:
            out.append(Markup("<p>%s</p>") % _inline("\n".join(block.lines), links))
    return Markup("").join(out)
