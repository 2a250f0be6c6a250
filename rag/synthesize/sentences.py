"""The sentences an extractive answer can quote, read from an excerpt's Markdown.

Prose paragraphs and list items are split into sentences; hard-wrapped lines are joined. Markup is
taken out first (`markup.clean_text`), inline code is kept with its backticks, and bracketed
numbers of the document are neutralised so that the citation parser never reads them.

A sentence that ends with a colon introduces what follows it; it is kept only together with that
(its *attachment*): a code block, a short list, or nothing (then it is dropped). A code block is
shown whole up to MAX_ATTACHMENT_LINES and MAX_ATTACHMENT_CHARS, with its language on the opening
fence; a longer one is cut where a reader loses least (`_cut_code`), never inside a continued
command, and ends with a marker line (`# …`) saying so. A table row becomes a sentence of its own
("header: cell; header: cell"), which is what is scored and embedded, and carries its `table`: the
row under the table's header, as a Markdown table, which is what an answer shows. A code block that
nothing introduces is not quoted: without its lead-in nobody can tell what it does.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Iterator

from rag.synthesize.markup import clean_text, neutral_brackets

_LIST_ITEM = re.compile(r"^\s*(?:[-*+]|\d+[.)])\s+")
# A sentence ends before a capital, also where bold opens ("offices. **Begin"); not where it closes
# ("**Change the passcode.** It must be ..."): a bold lead-in and what it says go together.
_SENTENCE_END = re.compile(r"(?<=[.!?])[\"'”’)\]]*\s+(?=(?:\*\*?|__?)?[\"'“‘(`]?[A-Z0-9`])")
_EMPHASIS = re.compile(r"(\*\*|__)")


def _heading(raw: str) -> tuple[int, str] | None:
    """(level, text) of a heading line, its closing `#`s and white space left out; None for any
    other line. String operations: the regular expression it replaces (`\\s+(.*?)\\s*#*\\s*$`) took
    time cubic in the blanks inside a heading (1,000 spaces: 1.3 s of CPU, in a chunk of a few tokens;
    issue 49)."""
    marks = raw.lstrip()
    after = marks.lstrip("#")
    level = len(marks) - len(after)
    words = after.lstrip()
    if not 1 <= level <= 6 or words == after:
        return None
    text = words[:len(words.rstrip().rstrip("#").rstrip())]
    return None if "\n" in text else (level, text)
# A code block is shown whole up to these bounds: a pyproject.toml section, a short CI workflow or a
# script of the uv docs is 10-20 lines, and cut at 8 lines (the bound before) such a block lost the
# very keys it was quoted for. A block at the bound takes most of an answer's 1,200 characters
# (tuning.max_answer_chars, which counts the attachment): it is then the lead-in, its code and
# perhaps one short sentence, which is what a "how do I configure" question wants.
MAX_ATTACHMENT_LINES = 20
MAX_ATTACHMENT_CHARS = 1000
MAX_LIST_ITEMS = 6
MAX_ROW_CHARS = 300  # a table row's sentence, and each line of the table it is shown as
MAX_ITEM_CHARS = 200  # a list item shown under its lead-in
# A paragraph that ends mid-sentence, with no closing mark, on a word or a code span: prose, not
# code read as text (a key = value line of an excerpt cut inside a code block is not a lead-in).
_OPEN_END = re.compile(r"(?:\b[a-z]+|`)$")
_ASSIGNMENT = re.compile(r"^[^`]*(?:`[^`]*`[^`]*)*?\s=\s")


@dataclass
class Unit:
    """A paragraph, list item or table row as one line of text, with what it introduces."""

    text: str
    heading: str = ""  # the last heading above it inside the excerpt
    attachment: str = ""
    items: list[str] = field(default_factory=list)  # a list's items, when the unit is a list
    open_end: bool = False  # a paragraph whose last sentence has no closing mark ("with the following contents")
    table: str = ""  # a table row: the row under its header, as a Markdown table


@dataclass
class Sentence:
    text: str
    heading: str = ""
    attachment: str = ""  # a code block or short list the sentence introduces, shown after it
    table: str = ""  # a table row's sentence: the row under its header, as a Markdown table, shown instead


_DELIMITER = re.compile(r":?-+:?")
_CELL_SPLIT = re.compile(r"(?<!\\)\|")  # a pipe, not an escaped one (`a \| b` is one cell)


def _clip(text: str, limit: int) -> str:
    """The text, or as much of it as fits in `limit` with "…" after it: cut after a word, not inside
    a code span (a span longer than the room is cut and closed)."""
    if len(text) <= limit:
        return text
    hard = text[: max(1, limit - 1)]
    cut = hard if text[len(hard)].isspace() or " " not in hard else hard[: hard.rfind(" ")]
    if cut.count("`") % 2:  # an open code span: its text goes, not half of it
        cut = cut[: cut.rfind("`")]
    cut = cut.rstrip(" ;,")
    if not cut:
        cut = hard[:-1] + "`" if hard.count("`") % 2 else hard
    return cut + "…"


def _fit(cells: list[str], room: int) -> list[str]:
    """The cells of one table line, so that together they fit in `room`: the short ones whole, the
    long ones clipped to an equal share of what is left."""
    if sum(map(len, cells)) <= room:
        return cells
    left, cap = room, 0
    for i, length in enumerate(sorted(map(len, cells))):
        cap = left // (len(cells) - i)
        if length > cap:
            break
        left -= length
    return [_clip(cell, max(cap, 4)) for cell in cells]


def _table_line(cells: list[str]) -> str:
    return "| " + " | ".join(cells) + " |"


def _table_rows(lines: list[str]) -> Iterator[tuple[str, str]]:
    """Each body row of a Markdown table: as a sentence, "header: cell; header: cell", and as the
    table it is shown as, the header, its delimiter row and the row (each line bounded)."""
    rows = [[cell.strip() for cell in _CELL_SPLIT.split(line.strip().strip("|"))] for line in lines]
    delimiters = [row for row in rows if all(_DELIMITER.fullmatch(cell) or not cell for cell in row)]
    rows = [row for row in rows if not all(_DELIMITER.fullmatch(cell) or not cell for cell in row)]
    if len(rows) < 2:
        return
    header, body = rows[0], rows[1:]
    width = len(header)
    aligned = (delimiters[0] + [""] * width)[:width] if delimiters else [""] * width
    delimiter = [(":" if d.startswith(":") else "") + "---" + (":" if d.endswith(":") and len(d) > 1 else "")
                 for d in aligned]
    room = MAX_ROW_CHARS - 3 * width - 1  # what the pipes and spaces of a line leave for its cells
    head = _table_line(_fit(header, room))
    for row in body:
        pairs = [f"{name}: {cell}" if name else cell for name, cell in zip(header, row) if cell]
        text = "; ".join(pairs).replace("\\|", "|")
        if text:
            cells = _fit((row + [""] * width)[:width], room)
            yield _clip(text, MAX_ROW_CHARS), "\n".join([head, _table_line(delimiter), _table_line(cells)])


def _shortened(item: str) -> str:
    return item if len(item) <= MAX_ITEM_CHARS else item[: MAX_ITEM_CHARS - 1].rstrip() + "…"


def _is_label(text: str) -> bool:
    """A few words and a colon: a content tab's title ("macOS and Linux:"), not a sentence."""
    return text.endswith(":") and len(text.split()) <= 4


# The opening fence: its indent, and the language of its info string ("python" of
# `python title="x.py"`, "yaml" of `{ .yaml }`; none of `title="x.py"` alone).
_FENCE_OPEN = re.compile(r"^( *)(`{3,}|~{3,})\s*\{?\s*\.?(?:([\w+#.-]+)(?![\w+#.=-]))?")
# The marker line that ends a cut block, a comment where the language has one: `# …` in a shell
# session, YAML or TOML reads as "more follows" and still pastes as valid code.
_HASH = frozenset(
    "sh bash shell zsh fish ksh console shell-session sh-session shellsession powershell pwsh ps1 "
    "pwsh-session ps1con python py python3 py3 pycon ipython yaml yml toml ini cfg conf dockerfile "
    "docker make makefile cmake r ruby rb perl pl nix dotenv env properties requirements pip-requirements "
    "gitignore hcl terraform tf julia elixir tcl awk".split())
_SLASH = frozenset(
    "c cpp c++ h hpp cs csharp java javascript js jsx typescript ts tsx go golang rust rs kotlin kt "
    "swift scala dart php groovy jsonc json5 proto protobuf scss less".split())
_DASH = frozenset("sql psql postgresql mysql sqlite plsql lua haskell hs elm ada".split())
_SHELLS = frozenset("sh bash shell zsh fish ksh console shell-session sh-session shellsession".split())
_POWERSHELL = frozenset("powershell pwsh ps1 pwsh-session ps1con".split())
_CONFIG = frozenset("yaml yml toml ini cfg conf".split())
_OPENS = {"(": ")", "[": "]", "{": "}"}


def _marker(language: str) -> str:
    if language in _HASH:
        return "# …"
    if language in _SLASH:
        return "// …"
    if language in _DASH:
        return "-- …"
    return "…"


def _continued(line: str, language: str) -> bool:
    """The command goes on on the next line: a trailing backslash (a shell's, Python's, a C macro's),
    a pipe or `&&` in a shell, a backtick in PowerShell. A block is never cut after such a line."""
    line = line.rstrip()
    if line.endswith("\\"):
        return True
    if language in _SHELLS:
        return line.endswith(("|", "&&", "||"))
    return language in _POWERSHELL and line.endswith("`")


def _open_after(lines: list[str], language: str) -> list[bool]:
    """For each line, whether a bracket or a triple-quoted string is still open after it. A rough
    reading (a quote runs to the end of its line, a comment is skipped where `#` or `//` starts
    one): it only ranks the places a block may be cut."""
    comment = "#" if language in _HASH else "//" if language in _SLASH else ""
    depth, triple, found = 0, "", []
    for line in lines:
        i = 0
        while i < len(line):
            if triple:
                end = line.find(triple, i)
                if end < 0:
                    break
                triple, i = "", end + 3
                continue
            ch = line[i]
            if comment and line.startswith(comment, i) and (i == 0 or line[i - 1].isspace()):
                break
            if line.startswith(('"""', "'''"), i):
                triple, i = line[i : i + 3], i + 3
                continue
            if ch in "\"'":
                end = line.find(ch, i + 1)
                if end < 0:
                    break
                i = end + 1
                continue
            if ch in _OPENS:
                depth += 1
            elif ch in _OPENS.values():
                depth = max(0, depth - 1)
            i += 1
        found.append(bool(depth or triple))
    return found


def _is_comment(line: str, language: str) -> bool:
    line = line.lstrip()
    return (language in _HASH and line.startswith("#")) or (language in _SLASH and line.startswith("//"))


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


def _cut_code(body: list[str], language: str, marker: str, closed: bool = True) -> list[str]:
    """The first lines of a block too long to show whole, then the marker; [] when no line can end
    it (its first command runs past the bounds: nothing rather than half a command).

    The cut is at a line boundary within the bounds, never after a continued line. Of the places
    in the second half of the room, the best: not after a line that opens a block (`key:`,
    `run: |`, `def f():`) or a comment (it is about the line after it), outside brackets and strings, before the least indented line (a YAML
    or TOML top-level key, a Python top-level statement), at a blank line or a TOML table, the
    latest. Of a block the excerpt ends inside (not `closed`), the last line is taken only when no
    other will do: what comes after it is unknown."""
    room_lines = MAX_ATTACHMENT_LINES - 1
    room_chars = MAX_ATTACHMENT_CHARS - len(marker) - 1
    fits, used = 0, -1
    for line in body[:room_lines]:
        used += len(line) + 1
        if used > room_chars:
            break
        fits += 1
    if fits == 0:  # one line over the bound: cut inside it, and say so there too
        return [_clip(body[0], room_chars - 1).removesuffix("…") + " …", marker]
    is_open = _open_after(body, language)
    candidates = [j for j in range(1, fits + 1) if body[j - 1] and not _continued(body[j - 1], language)]
    if not candidates:
        return []
    late = [j for j in candidates if 2 * j >= fits] or candidates

    def rank(j: int) -> tuple[bool, bool, bool, int, bool, int]:
        last = body[j - 1].rstrip()
        opens = (last.endswith(":") or (language in _CONFIG and last.endswith(("|", ">", "|-", ">-", "|+", ">+")))
                 or _is_comment(last, language))  # a comment says what the next line does
        following = next((line for line in body[j:] if line), "")
        paragraph = j < len(body) and (not body[j] or (language in _CONFIG and body[j].startswith("[")))
        return closed or j < len(body), not opens, not is_open[j - 1], -_indent(following), paragraph, j

    end = max(late, key=rank)
    return body[:end] + [marker]


def _code_attachment(lines: list[str]) -> str:
    """A fenced block's code as an attachment, its language kept on the opening fence: whole within
    the bounds, else cut (`_cut_code`) and ending with a marker line. A block the excerpt ends inside
    (no closing fence) is cut where it ends, and marked so too."""
    opening = _FENCE_OPEN.match(lines[0])
    indent, language = (len(opening.group(1)), (opening.group(3) or "").lower()) if opening else (0, "")
    closed = len(lines) > 1 and lines[-1].strip().startswith(("```", "~~~"))
    body: list[str] = []
    for raw in lines[1 : len(lines) - 1 if closed else len(lines)]:
        line = raw[min(indent, _indent(raw)) :].rstrip()  # out of the list item or tab it sits in
        if line or (body and body[-1]):  # blank lines inside the block, one of a run
            body.append(line)
    while body and not body[-1]:
        body.pop()
    if not body:
        return ""
    marker = _marker(language)
    whole = len(body) <= MAX_ATTACHMENT_LINES and len("\n".join(body)) <= MAX_ATTACHMENT_CHARS
    if not whole or not closed:
        body = _cut_code(body, language, marker, closed)
        if not body:
            return ""
    return f"```{language}\n" + "\n".join(body) + "\n```"  # no line of it is a fence: that closed it


class _Reader:
    """Lines in, units out: paragraphs joined, list items apart, tables as rows, code attached."""

    def __init__(self) -> None:
        self.units: list[Unit] = []
        self.current: list[str] = []
        self.heading = ""
        self.code: list[str] | None = None
        self.table: list[str] = []
        self.last_list: Unit | None = None  # the lead-in of the list being read
        self.tab_lead: Unit | None = None  # a lead-in followed by content tabs ("Windows:", code)
        self.after_heading = False  # nothing but a heading since the last block
        self.path: list[tuple[int, str]] = []  # the headings above, with their levels
        self.in_item = False  # the lines being read are a list item's
        self.item_of: Unit | None = None  # the lead-in whose last item they are

    def flush(self) -> None:
        if self.current:
            unit = Unit(" ".join(self.current), self.heading)
            unit.open_end = not self.in_item and bool(_OPEN_END.search(unit.text)) and not _ASSIGNMENT.search(unit.text)
            if self.in_item and self.item_of is not None:
                self.item_of.items[-1] = _shortened(unit.text)  # the item with its wrapped lines
            self.item_of = None
            self.units.append(unit)
            self.current = []
            if unit.text.endswith(":") and not _is_label(unit.text):
                self.tab_lead = unit
            elif not unit.text.endswith(":"):
                self.tab_lead = None
        if self.table:
            self.units.extend(Unit(row, self.heading, table=table) for row, table in _table_rows(self.table))
            self.table = []

    def _lead(self) -> Unit | None:
        """The unit before this point, when it ends with a colon and has nothing attached yet."""
        if self.units and self.units[-1].text.rstrip().endswith(":") and not self.units[-1].attachment:
            return self.units[-1]
        return None

    def feed(self, raw: str) -> None:
        line = raw.strip()
        if self.code is not None:
            self.code.append(raw)
            if line.startswith(("```", "~~~")) and len(self.code) > 1:
                self._end_code()
            return
        if line.startswith(("```", "~~~")):
            self.flush()
            self.code = [raw]
            return
        if line and not _heading(raw):
            self.after_heading = False
        self._feed_text(raw, line)

    def _end_code(self) -> None:
        lead = self._lead()
        if lead is None and self.units and self.units[-1].open_end and not self.units[-1].attachment:
            # "create a file called `greet` with the following contents" and then the code: a
            # lead-in whose colon was left out.
            lead = self.units[-1]
            lead.text += ":"
        if lead is None and self.code is not None and self.after_heading and self.heading:
            # Code right under a heading ("Basic usage"): the heading introduces it.
            code = _code_attachment(self.code)
            if code:
                title = " > ".join(h for _, h in self.path[-2:])
                self.units.append(Unit(f"{title}:", self.heading, code))
            self.code = None
            return
        if lead is not None and self.code is not None:
            code = _code_attachment(self.code)
            lead.attachment = code
            if _is_label(lead.text) and self.tab_lead is not None and code:
                # A content tab ("Windows:") under a lead-in: the lead-in, for that tab.
                label = lead.text.rstrip(": ")
                self.units.append(Unit(self.tab_lead.text, f"{self.heading} ({label})".strip(), f"{label}:\n{code}"))
            elif lead is self.tab_lead:
                self.tab_lead = None  # it introduced this code itself: what follows is not its tabs
        self.code = None

    def _feed_text(self, raw: str, line: str) -> None:
        heading = _heading(raw)
        if not line:
            self.flush()
            return  # a blank line: a loose list goes on after it
        if heading:
            self.flush()
            level, text = heading
            self.path = [(lv, h) for lv, h in self.path if lv < level] + [(level, text)]
            self.heading = text
            self.tab_lead = None
            self.after_heading = True
            self.last_list = None
            return
        if line.startswith("|") and line.count("|") >= 2:  # a table row (a pipe in prose or code is not)
            if self.current:
                self.flush()
            self.table.append(line)
            return
        if _LIST_ITEM.match(raw):
            self.flush()
            lead = self._lead() or (self.last_list if self.last_list and self.last_list is not self.units[-1] else None)
            item = _LIST_ITEM.sub("", raw).strip()
            if lead is not None and len(lead.items) < MAX_LIST_ITEMS:
                lead.items.append(item)
                self.last_list = lead
                self.item_of = lead
            self.current = [item]
            self.in_item = True
            return
        if not self.current:
            self.in_item = False
            self.last_list = None  # a paragraph: the list before it is over
        self.current.append(line.lstrip("> ").strip())

    def close(self) -> list[Unit]:
        if self.code is not None:
            self._end_code()
        self.flush()
        return self.units


_FENCE_LINE = re.compile(r"^\s*(?:`{3,}|~{3,})(.*)$")


def _starts_in_code(lines: list[str]) -> bool:
    """An excerpt cut inside a code block: its first fence is bare and the next one has an info
    string ("```toml"), which only an opening fence can have, so the first one closes a block."""
    fences = [m.group(1).strip() for m in map(_FENCE_LINE.match, lines) if m]
    return len(fences) >= 2 and not fences[0] and bool(fences[1])


def units(text: str) -> list[Unit]:
    reader = _Reader()
    lines = neutral_brackets(clean_text(text)).splitlines()
    if _starts_in_code(lines):
        lines.insert(0, "```")  # its head is code, and nothing here introduces it
    for raw in lines:
        reader.feed(raw)
    found = reader.close()
    for unit in found:
        if unit.items and not unit.attachment:
            unit.attachment = "\n".join(f"- {_tidy(item)}" for item in unit.items)
    return found


def _tidy(sentence: str) -> str:
    """Bold and emphasis markers out, except inside inline code (`__init__.py`, `**kwargs`)."""
    parts = re.split(r"(`[^`]*`)", sentence)
    return "".join(p if p.startswith("`") else _EMPHASIS.sub("", p) for p in parts).strip()


def _long_enough(sentence: str, min_words: int) -> bool:
    return len(sentence.split()) >= min_words and len(sentence) >= 20


def cut_head(text: str) -> str:
    """The excerpt's first word when the excerpt begins inside a token, else "". The chunker may
    split after a period inside a file name, a URL or a code span ("`pyproject." | "toml` file is
    ..."), and an excerpt that overlaps the one before may start there: its first words are the
    end of a sentence begun elsewhere ("md#using-the-file-input) option to use the pin"). A word
    that starts in lower case and holds a URL's "#" or "/", an unmatched ")" or "]", or an odd
    backtick is such a tail; "uv run ..." (a name written in lower case) is not."""
    words = text.split(maxsplit=1)
    word = words[0] if words else ""
    if not word[:1].islower():
        return ""
    tail = ("#" in word or "/" in word or word.count("`") % 2 == 1
            or word.count(")") > word.count("(") or word.count("]") > word.count("["))
    return word if tail else ""


def sentences(text: str, min_words: int = 5) -> list[Sentence]:
    """The quotable sentences of an excerpt, in the order they are written; the tail of a sentence
    the excerpt begins inside (`cut_head`) is none."""
    found: list[Sentence] = []
    head = cut_head(text)
    for n, unit in enumerate(units(text)):
        if unit.table:  # a table row is one sentence, however many its cells hold
            row = _tidy(unit.text)
            if _long_enough(row, min_words):
                found.append(Sentence(row, unit.heading, table=unit.table))
            continue
        parts = [_tidy(s) for s in _SENTENCE_END.split(unit.text)]
        if n == 0 and head and unit.text.startswith(head[:3]):
            parts = parts[1:]
        for i, part in enumerate(parts):
            last = i == len(parts) - 1
            if part.endswith(":"):
                if last and unit.attachment and (_long_enough(part, 3) or (unit.heading and part.endswith(f"{unit.heading}:"))):
                    found.append(Sentence(part, unit.heading, unit.attachment))
                continue
            if _long_enough(part, min_words) and not part.endswith("?"):  # a document's question answers nothing
                found.append(Sentence(part, unit.heading))
    return found
