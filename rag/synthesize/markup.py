"""Documentation markup out of what users see: headings, prose and bracketed numbers.

Real documentation (MkDocs Material, GitHub Markdown) carries markup that means nothing as text:
heading anchors and attribute lists (``{ #cors }``, ``{: .class }``), raw HTML (``<abbr>``,
``<br>``, ``<details>``, comments), admonitions (``!!! note``), content tabs (``=== "Windows"``),
link targets, snippet includes (``--8<--``) and YAML front matter. These pure functions take it out
of derived text (titles, heading paths, answer sentences, displayed excerpts). Stored document text
is never changed: citations are character spans of it.

* :func:`clean_heading` -- one line of title text, no markup at all (code and emphasis markers
  included).
* :func:`clean_text` -- prose for display, line structure kept (it runs before sentence splitting):
  fenced code blocks are kept byte for byte (only dedented out of an admonition or tab around them)
  and inline code spans are kept exactly, backticks included, so ``[[tool.uv.index]]`` or
  ``uv python pin`` survive. Emphasis, list markers and heading markers are kept.
* :func:`neutral_brackets` -- bracketed numbers that the citation parser would read
  (``[2]``, ``[1-8]``, ``[1, 3]``, ``[12–14]``) become fullwidth brackets: ``［2］``.

Raw HTML: a tag is removed (its inner words kept) only when it is an HTML element. Command-line docs
write placeholders in angle brackets (``<name>``, ``<version>``, ``<package>``), so names that are
just as likely placeholders (``<source>``, ``<path>``, ``<table>``, ``<name>`` ...) are removed only
when they carry attributes (``<source src="a.mp4">``) or the text also closes them
(``<code>x</code>``); unknown names are never removed.
"""

from __future__ import annotations

import html
import re

from rag.synthesize.citations import GROUP

__all__ = ["clean_heading", "clean_text", "neutral_brackets"]

# ---------------------------------------------------------------------------------------------
# Bracketed numbers
# ---------------------------------------------------------------------------------------------

FULLWIDTH_OPEN = "［"  # U+FF3B
FULLWIDTH_CLOSE = "］"  # U+FF3D


def neutral_brackets(text: str) -> str:
    """Every group the citation parser accepts, with fullwidth brackets: ``[2]`` -> ``［2］``.

    Uses the parser's own pattern (``citations.GROUP``, the body of ``CLUSTER``), so ``[ 2 ]``,
    ``[1-8]``, ``[1, 3]``, ``[12–14]``, ``[0]``, ``[1-2-3]`` and non-ASCII digits (``\\d``) are all
    caught; the numbers and the spacing inside stay as written. Code is neutralised too: the parser
    does not know about code (it scans the raw answer, and a model copies code), so ``xs[1]``
    becomes ``xs［1］`` -- visibly the same indexing to a reader, never a citation. Text that is
    neutral already is unchanged, so applying it twice is harmless.
    """
    if "[" not in text:
        return text
    return GROUP.sub(lambda m: FULLWIDTH_OPEN + m.group(0)[1:-1] + FULLWIDTH_CLOSE, text)


# ---------------------------------------------------------------------------------------------
# Inline markup
# ---------------------------------------------------------------------------------------------

# Elements removed with or without attributes: unmistakably HTML.
_HTML_ELEMENTS = frozenset(
    """a abbr acronym b bdi bdo blockquote br dd details dfn div dl dt em figcaption h1 h2 h3 h4 h5 h6
    hr i iframe img kbd li ol p pre q rp rt s samp span strike strong sub summary sup tbody td tfoot th
    thead tr tt u ul""".split()
)
# HTML elements whose names are also placeholders in documentation (``<name>``, ``<path>``,
# ``<table>``): removed only with attributes, or when the text also closes them (``</code>``).
_AMBIGUOUS_ELEMENTS = frozenset(
    """address area article aside audio base big body button canvas caption center cite code col
    colgroup data del embed figure font footer form head header input ins label link main map mark
    menu meta name nav object option output param path picture ruby section select slot small source
    style svg table template text textarea time title track var video wbr""".split()
)
_TAG = re.compile(r"</?([A-Za-z][A-Za-z0-9-]*)(\s[^<>]*)?/?>")
_COMMENT = re.compile(r"<!--.*?(?:-->|\Z)", re.DOTALL)
_SCRIPT_STYLE = re.compile(r"<(script|style)\b[^>]*>.*?</\1\s*>", re.DOTALL | re.IGNORECASE)
_AUTOLINK = re.compile(r"<((?:https?|ftp)://[^\s<>]+|mailto:[^\s<>]+|[\w.+-]+@[\w-]+(?:\.[\w-]+)+)>")
# Attribute lists (Python-Markdown attr_list / Pandoc): { #id }, {#id}, {: #id .class key="v" }.
_ATTR_ITEM = r"""(?:[#.][^\s{}"'=]+|[\w:-]+=(?:"[^"]*"|'[^']*'|[^\s{}"']+))"""
# (The spaces before one are left to the caller's tidying: a leading [ \t]* would rescan long runs.)
_ATTR_LIST = re.compile(rf"\{{:?[ \t]*{_ATTR_ITEM}(?:[ \t]+{_ATTR_ITEM})*[ \t]*\}}")
_ATTR_EMPTY = re.compile(r"\{:[ \t]*\}")
# Link text: no blank line, one level of nested brackets (``[[tool.uv]](url)``).
_LINK_TEXT = r"((?:[^\[\]\n]|\n(?![ \t]*\n)|\[[^\[\]\n]*\])*)"
_LINK_DEST = r"""[ \t]*(?:<[^<>\n]*>|[^\s()]*(?:\([^\s()]*\)[^\s()]*)*)(?:\s+(?:"[^"\n]*"|'[^'\n]*'|\([^()\n]*\)))?[ \t]*"""
_IMAGE = re.compile(rf"!\[{_LINK_TEXT}\](?:\({_LINK_DEST}\)|\[[^\[\]\n]*\])")
_INLINE_LINK = re.compile(rf"\[{_LINK_TEXT}\]\({_LINK_DEST}\)")
_REF_LINK = re.compile(rf"\[{_LINK_TEXT}\]\[[^\[\]\n]*\]")
_ESCAPED_LINK = re.compile(r"\\\[(?=[^\[\]\n]*\]\()")
# Inline code spans: a run of backticks closed by a run of the same length, no blank line inside.
_CODE_SPAN = re.compile(r"(?<!`)(`+)(?!`)((?:(?!\n[ \t]*\n).)+?)(?<!`)\1(?!`)", re.DOTALL)
_MASK = re.compile("\x00(\\d+)\x00")
# Emphasis: the text inside holds no delimiter of its kind (so each opener scans only as far as
# the next one); nested emphasis (**a *b* c**) comes out over two passes.
_EMPHASIS = re.compile(
    r"(?<![\w\\])(?:(\*{1,3})(?=[^\s*])([^*]+?)(?<=\S)\1(?![\w*])"
    r"|(_{1,3})(?=[^\s_])([^_]+?)(?<=\S)\3(?![\w_])|~~(?=[^\s~])([^~]+?)(?<=\S)~~)"
)
_ESCAPE = re.compile(r"\\([!-/:-@\[-`{-~])")
_SPACES = re.compile(r"(?<=\S)[ \t]{2,}")


def _mask_code(text: str) -> tuple[str, list[str]]:
    spans: list[str] = []

    def keep(match: re.Match[str]) -> str:
        spans.append(match.group(0))
        return f"\x00{len(spans) - 1}\x00"

    return _CODE_SPAN.sub(keep, text.replace("\x00", "")), spans


def _unmask(text: str, spans: list[str], markers: bool = True) -> str:
    def restore(match: re.Match[str]) -> str:
        span = spans[int(match.group(1))]
        if markers:
            return span
        inner = span.strip("`")
        return inner[1:-1] if inner.startswith(" ") and inner.endswith(" ") and inner.strip() else inner

    return _MASK.sub(restore, text)


_CLOSING_TAG = re.compile(r"</([A-Za-z][A-Za-z0-9-]*)\s*>")


def _tag(match: re.Match[str], br: str, closed: set[str]) -> str:
    name = match.group(1).lower()
    has_attributes = bool((match.group(2) or "").strip().rstrip("/").strip())
    if name in _HTML_ELEMENTS or (name in _AMBIGUOUS_ELEMENTS and (has_attributes or name in closed)):
        return br if name in ("br", "hr") else ""
    return match.group(0)


def _inline(text: str, br: str = " ") -> str:
    """Inline markup out of masked text (code spans already replaced by placeholders)."""
    text = _COMMENT.sub("", text)
    text = _SCRIPT_STYLE.sub("", text)
    text = _AUTOLINK.sub(r"\1", text)
    text = _IMAGE.sub("", text)
    text = _ESCAPED_LINK.sub("[", text)  # "\\[text](url)": the escape only kept a templating tool off it
    for _ in range(2):  # a link inside a link's text ([[a](b)](c)) needs a second pass
        text = _INLINE_LINK.sub(r"\1", text)
        text = _REF_LINK.sub(r"\1", text)
    text = _ATTR_LIST.sub("", text)
    text = _ATTR_EMPTY.sub("", text)
    closed = {name.lower() for name in _CLOSING_TAG.findall(text)}
    text = _TAG.sub(lambda m: _tag(m, br, closed), text)
    return html.unescape(text)


def clean_heading(text: str) -> str:
    """A title or heading as plain words: ``CORS (Cross-Origin Resource Sharing) { #cors }`` ->
    ``CORS (Cross-Origin Resource Sharing)``; ``<abbr title="x">JWT</abbr> tokens`` -> ``JWT tokens``;
    ``The `uv tool` interface`` -> ``The uv tool interface``. Empty when nothing but markup."""
    masked, spans = _mask_code(text)
    masked = _inline(masked)
    for _ in range(2):  # ***both*** and nested **_emphasis_**
        masked = _EMPHASIS.sub(lambda m: m.group(2) or m.group(4) or m.group(5), masked)
    masked = _ESCAPE.sub(r"\1", masked)
    cleaned = _unmask(masked, spans, markers=False)
    return " ".join(cleaned.split())


# ---------------------------------------------------------------------------------------------
# Blocks
# ---------------------------------------------------------------------------------------------

_FENCE = re.compile(r"^[ \t]*(`{3,}|~{3,})")
_ADMONITION = re.compile(
    r"""^([ \t]*)(?:!!!|\?\?\?\+?)[ \t]+([\w-]+)(?:[ \t]+[\w-]+)*?(?:[ \t]+"([^"\n]*)")?[ \t]*$"""
)
_TAB = re.compile(r"""^([ \t]*)===[+!]?[ \t]+"([^"\n]*)"[ \t]*$""")
_SNIPPET = re.compile(r"""^[ \t]*;?--8<--(?:[ \t]+(?:"[^"\n]*"|'[^'\n]*'|\S+))?[ \t]*$""")
_REF_DEFINITION = re.compile(r"""^ {0,3}\[(?!\^)[^\[\]\n]+\]:[ \t]*\S+(?:[ \t]+(?:"[^"\n]*"|'[^'\n]*'|\([^()\n]*\)))?[ \t]*$""")
# A reference definition whose destination is on the next line ("[PAT]:" then "  https://...").
_REF_LABEL = re.compile(r"^ {0,3}\[(?!\^)[^\[\]\n]+\]:[ \t]*$")
_REF_DESTINATION = re.compile(r"""^[ \t]*(?:<[^<>\n]*>|[a-z][\w+.-]*:[^\s]+|[./#][^\s]*)(?:[ \t]+(?:"[^"\n]*"|'[^'\n]*'))?[ \t]*$""")
_ABBREVIATION = re.compile(r"^\*\[[^\[\]\n]+\]:.*$")
# Front matter: only lines YAML would hold (``key: value``, ``- item``, indented, comments, blank).
_FRONT_MATTER = re.compile(
    r"\A---[ \t]*\n((?:(?>[\w.-]+[ \t]*:[^\n]*|-[ \t][^\n]*|[ \t][^\n]*|#[^\n]*)?\n)*?)(?:---|\.\.\.)[ \t]*(?:\n|\Z)"
)
_BLANK_RUNS = re.compile(r"\n[ \t]*\n(?:[ \t]*\n)+")
_JOIN = "\x01"  # ends an untitled admonition label, to be joined with the line after it


def _indent(line: str) -> int:
    expanded = line.expandtabs(4)
    return len(expanded) - len(expanded.lstrip(" "))


def _dedent(line: str, amount: int) -> str:
    """The line without its first ``amount`` columns of indentation (tabs count to the next 4)."""
    column = 0
    for index, char in enumerate(line):
        if column >= amount or char not in " \t":
            return line[index:]
        column = column + 1 if char == " " else column + 4 - column % 4
    return ""


def _dropped(line: str) -> bool:
    return bool(_SNIPPET.match(line) or _REF_DEFINITION.match(line) or _ABBREVIATION.match(line))


def _container_head(line: str) -> str | None:
    """What an admonition or content tab marker line shows, or None for any other line."""
    admonition = _ADMONITION.match(line)
    if admonition:
        indent, kind, title = admonition.groups()
        label = kind.replace("-", " ").replace("_", " ").capitalize()
        title = (title or "").strip()
        return f"{indent}{label}: {title}" if title else f"{indent}{label}:{_JOIN}"
    tab = _TAB.match(line)
    if tab:
        indent, title = tab.groups()
        return f"{indent}{title.strip()}:" if title.strip() else ""
    return None


class _Blocks:
    """Lines with admonitions, tabs, snippet includes, reference and abbreviation definitions
    resolved, grouped into runs of (is_code, lines); fenced code is only dedented."""

    def __init__(self) -> None:
        self.runs: list[tuple[bool, list[str]]] = []
        self.containers: list[int] = []  # body indentation of each open admonition / tab
        self.fence: str | None = None  # the open fence's marker (```` ``` ````, ``~~~~``)
        self.snippet_block = False
        self.label: str | None = None  # a reference definition's label line, its destination not read yet

    def emit(self, code: bool, line: str) -> None:
        if self.runs and self.runs[-1][0] == code:
            self.runs[-1][1].append(line)
        else:
            self.runs.append((code, [line]))

    def feed(self, raw: str) -> None:
        if self.label is not None:
            label, self.label = self.label, None
            if _REF_DESTINATION.match(raw):
                return  # the definition's second line: both go
            self._feed(label)
        if self.fence is None and _REF_LABEL.match(raw):
            self.label = raw
            return
        self._feed(raw)

    def close(self) -> None:
        if self.label is not None:
            self._feed(self.label)
            self.label = None

    def _feed(self, raw: str) -> None:
        if raw.strip() and self.fence is None:
            while self.containers and _indent(raw) < self.containers[-1]:
                self.containers.pop()
        line = _dedent(raw, self.containers[-1] if self.containers else 0)
        if self.fence is not None:
            self.emit(True, line)
            stripped = line.strip()
            if stripped.startswith(self.fence) and not stripped.strip(self.fence[0]):
                self.fence = None
            return
        opening = _FENCE.match(line)
        if opening and not (opening.group(1)[0] == "`" and "`" in line[opening.end():]):
            self.fence = opening.group(1)
            self.emit(True, line)
            return
        if self.snippet_block or line.strip() == "--8<--":
            if line.strip() == "--8<--":
                self.snippet_block = not self.snippet_block
            return
        if _dropped(line):
            return
        head = _container_head(line)
        if head is not None:
            self.emit(False, head)
            self.containers.append(_indent(raw) + 4)
            return
        self.emit(False, line)


def _blocks(text: str) -> list[tuple[bool, list[str]]]:
    reader = _Blocks()
    for raw in text.split("\n"):
        reader.feed(raw)
    reader.close()
    return reader.runs


_PARAGRAPH_LINE = re.compile(r"[ \t]*(?![-*+][ \t]|\d+[.)][ \t]|[#>|])\S")


def _join_untitled_labels(lines: list[str]) -> list[str]:
    """An untitled admonition's ``Note:`` and its first paragraph line -> ``Note: paragraph line``;
    before a list, a table, a heading or code it stays a line of its own."""
    out: list[str] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.endswith(_JOIN):
            line = line[: -len(_JOIN)]
            j = i + 1
            while j < len(lines) and not lines[j].strip():
                j += 1
            if j < len(lines) and _PARAGRAPH_LINE.match(lines[j]) and not lines[j].endswith(_JOIN):
                out.append(f"{line} {lines[j].strip()}")
                i = j + 1
                continue
        out.append(line)
        i += 1
    return out


def clean_text(text: str) -> str:
    """Prose for display, markup out, line structure and code kept (see the module docstring).

    ``!!! note "Title"`` -> ``Note: Title`` (the body dedented under it); an untitled ``!!! note``
    opens its first paragraph line as ``Note: …``. ``=== "Windows"`` -> ``Windows:``.
    ``[text](url)`` -> ``text``; ``<https://x>`` -> ``https://x``; images, HTML comments,
    snippet includes, reference definitions and front matter are dropped; ``<br>`` is a space.
    Runs of blank lines left behind are folded to one; trailing spaces go.
    """
    if not text:
        return text
    trailing_newline = text.endswith(("\n", "\r"))
    text = text.replace("\r\n", "\n").replace("\r", "\n").replace(_JOIN, "")
    text = _FRONT_MATTER.sub("", text, count=1)
    pieces: list[str] = []
    for code, lines in _blocks(text):
        if code:
            pieces.append("\n".join(lines))
            continue
        masked, spans = _mask_code("\n".join(lines))
        masked = _inline(masked)
        masked = "\n".join(_join_untitled_labels([_SPACES.sub(" ", line).rstrip() for line in masked.split("\n")]))
        # Blank runs left behind are folded, at the piece's edges too (next to code).
        pieces.append(_BLANK_RUNS.sub("\n\n", "\n" + _unmask(masked, spans) + "\n")[1:-1])
    result = "\n".join(pieces).strip("\n")
    return result + "\n" if trailing_newline and result else result
