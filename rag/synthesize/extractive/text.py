"""How the chosen sentences are written out: each with its citation, a pronoun with whom it means,
a code block or list on lines of its own, a table row as a row of a table under its header. Also
what a sentence is embedded as."""

from __future__ import annotations

import re
from typing import Sequence

from rag.models.embed import SentenceSpan
from rag.retrieve.types import Hit
from rag.synthesize.extractive.documents import QUALIFIER, names_page, prose, says_name, words_of
from rag.synthesize.extractive.draft import Candidate
from rag.synthesize.sentences import sentences as excerpt_sentences

_SUBJECT_PRONOUN = re.compile(r"^(It|He|She|They)\b")


def with_citation(sentence: str, number: int, attachment: str = "") -> str:
    sentence = sentence.rstrip(";,: ")
    sentence = sentence[0].upper() + sentence[1:]  # a list item cut from its lead-in
    if attachment:
        return f"{sentence} [{number}]:\n{attachment}"
    if sentence[-1] in ".!?":
        return f"{sentence[:-1]} [{number}]{sentence[-1]}"
    return f"{sentence} [{number}]."


def cited_row(table: str, number: int, label: str = "") -> str:
    """A table row's sentence as written: the row under its header, the citation at the end of its
    last cell, inside the table (after the closing pipe it would be a cell of its own, which a
    Markdown renderer drops), where the citation parser reads it as any other. A label the answer
    adds to the sentence ("Dundee Canal: ...") goes on a line of its own before the table."""
    head, _, row = table.rpartition("\n")
    row = f"{row.removesuffix('|').rstrip()} [{number}] |"
    label = label.strip().rstrip(":")
    return f"{label}:\n\n{head}\n{row}" if label else f"{head}\n{row}"


def _table_end(text: str) -> list[str]:
    """The lines of the table the text ends with (none when it ends with something else)."""
    lines = text.split("\n")
    start = len(lines)
    while start > 0 and lines[start - 1].startswith("|"):
        start -= 1
    return lines[start:]


def with_referent(c: Candidate, hit: Hit, question_words: str = "") -> str:
    """The sentence, its opening pronoun followed by whom it means when the excerpt is about its
    title: "It supplied hydropower" -> "It (Dundee Canal) supplied hydropower", where the excerpt
    opens with "The Dundee Canal was ...". Quoted alone, "It" names nobody. Given the words of a
    question that names several of the answer's documents by their titles, a sentence of one of
    them that does not name it itself is labelled with it ("Which was released first, A or B?":
    "A: The game system was invented in 1987")."""
    pronoun = _SUBJECT_PRONOUN.match(c.text)
    name = QUALIFIER.sub("", hit.title).strip()
    words = words_of(name).strip()
    if not words or f" {words} " in words_of(c.text):
        return c.text
    if pronoun is None:
        return f"{name}: {c.text}" if question_words and says_name(words, question_words) else c.text
    opening = prose(hit)
    if not (opening.startswith(f" {words} ") or opening.startswith(f" the {words} ")):
        return c.text
    return f"{pronoun.group(1)} ({name}){c.text[pronoun.end():]}"


def referents(chosen: Sequence[Candidate], hits: Sequence[Hit], question_words: str) -> list[str]:
    """Each sentence's text, `with_referent` until its document has been named once in the answer."""
    named: set[str] = set()
    found = []
    for c in chosen:
        hit = hits[c.excerpt - 1]
        text = c.text if c.document in named else with_referent(c, hit, question_words)
        if names_page(hit, words_of(text)):
            named.add(c.document)
        found.append(text)
    return found


def join(parts: list[str]) -> str:
    """Sentences run on; a code block, list or table stands apart, on lines of its own. A table row
    right after another row of the same table (the same header) is written under it, as one table."""
    text = ""
    for part in parts:
        table = _table_end(text)
        if not text:
            text = part
        elif part.startswith("|") and table[:2] == part.split("\n")[:2]:
            text += "\n" + part.rsplit("\n", 1)[-1]
        elif "\n" in part or text.endswith(("```", "\n")) or "\n- " in text[-200:] or table:
            text += "\n\n" + part
        else:
            text += " " + part
    return text


def not_covered(part: str) -> str:
    """The sentence that says a part of the question is not answered by the knowledge base."""
    return f"The knowledge base does not say: \u201c{part.strip().rstrip('?.')}?\u201d"


def write(chosen: Sequence[Candidate], hits: Sequence[Hit], question_words: str,
          uncovered: Sequence[str] = ()) -> str:
    """The answer's text, before its citations are renumbered. Where the question compares two or
    more pages it names ("A or B?"), each sentence says which it is about; a part of the question
    that nothing answers is named last, uncited."""
    compared = {c.document for c in chosen if names_page(hits[c.excerpt - 1], question_words)}
    label = question_words if len(compared) >= 2 else ""
    return join([cited_row(c.table, c.excerpt, _label(text, c.text)) if c.table
                 else with_citation(text, c.excerpt, c.attachment)
                 for c, text in zip(chosen, referents(chosen, hits, label))] + [not_covered(p) for p in uncovered])


def _label(written: str, sentence: str) -> str:
    """What `with_referent` put before a sentence ("Dundee Canal: "), else nothing."""
    return written[: -len(sentence)] if written != sentence and written.endswith(sentence) else ""


def embedded_text(context: str, sentence: str) -> str:
    """What a sentence is embedded as: with the heading it sits under, which says what "it" is."""
    return f"{context}: {sentence}" if context else sentence


def sentence_texts(text: str, heading_path: Sequence[str], min_words: int) -> list[str]:
    """The texts an answer drawing on this chunk embeds (its sentences of `min_words` or more)."""
    fallback = heading_path[-1] if heading_path else ""
    return [embedded_text(s.heading or fallback, s.text) for s in excerpt_sentences(text, min_words)]


_ANCHOR = 24  # letters and digits at each end of a sentence that locate it when its middle was tidied
_LINK_TARGET = re.compile(r"\]\([^)\s]*(?:\s+\"[^\"]*\")?\)")  # a Markdown link's target: the reader keeps its text only


def _letters(text: str) -> tuple[str, list[int]]:
    """The text's letters and digits, lower case, and where each stands in the text: a sentence
    found in it whatever Markdown marks or spacing the excerpt's reading removed."""
    letters: list[str] = []
    where: list[int] = []
    hidden = {i for m in _LINK_TARGET.finditer(text) for i in range(m.start(), m.end())}
    for i, c in enumerate(text):
        if c.isalnum() and i not in hidden:
            lower = c.lower()  # may be longer than one character ("İ")
            letters.append(lower)
            where.extend([i] * len(lower))
    return "".join(letters), where


def _locate(sentence: str, letters: str, where: list[int], cursor: int) -> tuple[int, int, int] | None:
    """(start, end, next cursor) of the sentence in the text `letters` was read from, searching
    from `cursor`; None when it is not there (a table row written under its header, a sentence
    split in a way the text does not show)."""
    mine, _ = _letters(sentence)
    if not mine:
        return None
    at = letters.find(mine, cursor)
    anchor = max(8, min(_ANCHOR, len(mine) // 4))
    if at >= 0:
        stop = at + len(mine)
    elif len(mine) >= 2 * anchor:
        at = letters.find(mine[:anchor], cursor)
        tail = letters.find(mine[-anchor:], at + anchor) if at >= 0 else -1
        if tail < 0 or tail + anchor - at > 2 * len(mine):
            return None
        stop = tail + anchor
    else:
        return None
    return where[at], where[stop - 1] + 1, stop


def sentence_spans(indexed: str, text: str, heading_path: Sequence[str], min_words: int) -> list[SentenceSpan]:
    """The sentences an answer drawing on this chunk may embed (`sentence_texts`), each with where
    its heading and its words lie in the chunk's indexed text (`indexed`, which ends with `text`):
    their vectors are pooled out of the chunk's own pass at publish time. One not found there has
    no ranges (it is embedded alone)."""
    fallback = heading_path[-1] if heading_path else ""
    offset = len(indexed) - len(text) if indexed.endswith(text) else None
    letters, where = _letters(text)
    spans: list[SentenceSpan] = []
    cursor = 0
    for s in excerpt_sentences(text, min_words):
        heading = s.heading or fallback
        key = embedded_text(heading, s.text)
        found = None if offset is None or s.table else _locate(s.text, letters, where, cursor)
        if found is None:
            spans.append(SentenceSpan(key))
            continue
        start, end, cursor = found
        ranges = [(offset + start, offset + end)]
        before = indexed.rfind(heading, 0, offset + start) if heading else -1
        if before >= 0:
            ranges.insert(0, (before, before + len(heading)))
        spans.append(SentenceSpan(key, tuple(ranges)))
    return spans
