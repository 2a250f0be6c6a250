"""Documents as the editor shows them: Markdown rendered to HTML that can run nothing.

Two guards, either enough on its own: markdown-it renders with raw HTML off (a `<script>` in a body
is text, escaped), and nh3 (the Rust `ammonia` sanitiser) then keeps only the tags and attributes a
document needs, links with http, https or mailto only. The pages' Content-Security-Policy
(rag/web/pages.py) allows no inline script either.

A cited excerpt is shown inside its version by its character span (`char_start`, `char_end` of the
body): two private-use characters are put at the span's ends before rendering, and the text between
them in the HTML is wrapped in `<mark>`, so the highlight follows the rendered headings, lists and
paragraphs it crosses. The excerpt alone, shown above the document, is rendered the same way
(`render_excerpt`); one cut inside a code block is still code.
"""

from __future__ import annotations

import re

import nh3
from markdown_it import MarkdownIt
from markupsafe import Markup

_md = MarkdownIt("commonmark", {"html": False, "linkify": False, "typographer": False}).enable(
    ["table", "strikethrough"])

_TAGS = {
    "a", "abbr", "b", "blockquote", "br", "code", "del", "em", "h1", "h2", "h3", "h4", "h5", "h6", "hr", "i",
    "img", "li", "mark", "ol", "p", "pre", "s", "strong", "sub", "sup", "table", "tbody", "td", "th", "thead",
    "tr", "ul",
}
_ATTRIBUTES = {
    "a": {"href", "title"}, "img": {"src", "alt", "title"}, "mark": {"id"}, "code": {"class"},
    "th": {"style"}, "td": {"style"}, "ol": {"start"},
}
START, END = "\ue000", "\ue001"
# Block markers at the start of a line: the highlight starts after them, so the line keeps its meaning.
_LINE_MARKERS = re.compile(r"[ \t]*(?:#{1,6}[ \t]+|>[ \t]?|[-*+][ \t]+|\d{1,9}[.)][ \t]+)*")
_TAG = re.compile(r"(<[^>]*>)")


def sanitise(html: str) -> str:
    return nh3.clean(html, tags=_TAGS, attributes=_ATTRIBUTES, url_schemes={"http", "https", "mailto"},
                     link_rel="noopener noreferrer nofollow", strip_comments=True)


def render(body: str, span: tuple[int, int] | None = None) -> Markup:
    """The body as safe HTML; with `span`, those characters of the body marked (the first mark has
    id `hl`, which the page scrolls to)."""
    body = body.replace(START, "\ufffd").replace(END, "\ufffd")  # the same length: offsets still hold
    if span is None:
        return Markup(sanitise(_md.render(body)))
    start, end = max(0, min(span[0], len(body))), max(0, min(span[1], len(body)))
    if start >= end:
        return Markup(sanitise(_md.render(body)))
    if start == 0 or body[start - 1] == "\n":
        start = min(end, start + _LINE_MARKERS.match(body, start).end() - start)
    html = _md.render(body[:start] + START + body[start:end] + END + body[end:])
    return Markup(sanitise(_marked(html)))


def render_excerpt(body: str, span: tuple[int, int]) -> Markup:
    """The characters `span` of the body, alone, as safe HTML. An excerpt that starts inside a fenced
    code block of the body opens with that block's fence, so its code is shown as code, not as text."""
    start, end = max(0, min(span[0], len(body))), max(0, min(span[1], len(body)))
    excerpt = body[start:end]
    if not excerpt:
        return Markup("")
    line = body.count("\n", 0, start)
    for token in _md.parse(body):
        if token.type != "fence" or not token.map or not token.map[0] < line < token.map[1]:
            continue
        if line == token.map[1] - 1 and excerpt.lstrip().startswith(token.markup):  # at its closing fence
            excerpt = excerpt.partition("\n")[2]
        else:
            excerpt = f"{token.markup}{token.info}\n{excerpt}"
        break
    return Markup(sanitise(_md.render(excerpt)))


def _marked(html: str) -> str:
    i, j = html.find(START), html.find(END)
    if i < 0 or j < i or _inside_tag(html, i) or _inside_tag(html, j):  # a sentinel lost, or in a tag
        return html.replace(START, "").replace(END, "")
    parts = _TAG.split(html[i + 1:j])
    first = True
    for k, part in enumerate(parts):
        if k % 2 == 0 and part.strip():
            parts[k] = f'<mark id="hl">{part}</mark>' if first else f"<mark>{part}</mark>"
            first = False
    return (html[:i] + "".join(parts) + html[j + 1:]).replace(START, "").replace(END, "")


def _inside_tag(html: str, at: int) -> bool:
    return html.rfind("<", 0, at) > html.rfind(">", 0, at)
