"""The sentences an extractive answer can quote, read from an excerpt's Markdown.

Prose paragraphs and list items are split into sentences; hard-wrapped lines are joined. Markup is
taken out first (`markup.clean_text`), inline code is kept with its backticks, and bracketed
numbers of the document are neutralised so that the citation parser never reads them.

A sentence that ends with a colon introduces what follows it; it is kept only together with that
(its *attachment*): a code block, a short list, or nothing (then it is dropped). A table row
becomes a sentence of its own ("header: cell; header: cell"). A code block that nothing introduces
is not quoted: without its lead-in nobody can tell what it does.
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
_HEADING = re.compile(r"^\s*(#{1,6})\s+(.*?)\s*#*\s*$")
MAX_ATTACHMENT_LINES = 8
MAX_ATTACHMENT_CHARS = 400
MAX_LIST_ITEMS = 6
MAX_ROW_CHARS = 300
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


@dataclass
class Sentence:
    text: str
    heading: str = ""
    attachment: str = ""  # a code block or short list the sentence introduces, shown after it


def _table_rows(lines: list[str]) -> Iterator[str]:
    """Each body row of a Markdown table as "header: cell; header: cell" (bounded)."""
    rows = [[cell.strip() for cell in line.strip().strip("|").split("|")] for line in lines]
    rows = [row for row in rows if not all(re.fullmatch(r":?-{2,}:?", cell) or not cell for cell in row)]
    if len(rows) < 2:
        return
    header, body = rows[0], rows[1:]
    for row in body:
        pairs = [f"{name}: {cell}" if name else cell for name, cell in zip(header, row) if cell]
        text = "; ".join(pairs)
        if text:
            yield text[:MAX_ROW_CHARS]


def _shortened(item: str) -> str:
    return item if len(item) <= MAX_ITEM_CHARS else item[: MAX_ITEM_CHARS - 1].rstrip() + "…"


def _is_label(text: str) -> bool:
    """A few words and a colon: a content tab's title ("macOS and Linux:"), not a sentence."""
    return text.endswith(":") and len(text.split()) <= 4


def _code_attachment(lines: list[str]) -> str:
    body = [line for line in lines if not line.strip().startswith(("```", "~~~"))]
    body = [line.rstrip() for line in body if line.strip()]
    if not body:
        return ""
    kept: list[str] = []
    used = 0
    for line in body[:MAX_ATTACHMENT_LINES]:
        if used + len(line) > MAX_ATTACHMENT_CHARS and kept:
            break
        kept.append(line)
        used += len(line) + 1
    return "```\n" + "\n".join(kept) + "\n```"


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
            self.units.extend(Unit(row, self.heading) for row in _table_rows(self.table))
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
        if line and not _HEADING.match(raw):
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
        heading = _HEADING.match(raw)
        if not line:
            self.flush()
            return  # a blank line: a loose list goes on after it
        if heading:
            self.flush()
            level = len(heading.group(1))
            self.path = [(lv, h) for lv, h in self.path if lv < level] + [(level, heading.group(2))]
            self.heading = heading.group(2)
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


def sentences(text: str, min_words: int = 5) -> list[Sentence]:
    """The quotable sentences of an excerpt, in the order they are written."""
    found: list[Sentence] = []
    for unit in units(text):
        parts = [_tidy(s) for s in _SENTENCE_END.split(unit.text)]
        for i, part in enumerate(parts):
            last = i == len(parts) - 1
            if part.endswith(":"):
                if last and unit.attachment and (_long_enough(part, 3) or (unit.heading and part.endswith(f"{unit.heading}:"))):
                    found.append(Sentence(part, unit.heading, unit.attachment))
                continue
            if _long_enough(part, min_words) and not part.endswith("?"):  # a document's question answers nothing
                found.append(Sentence(part, unit.heading))
    return found
