"""How the chosen sentences are written out: each with its citation, a pronoun with whom it means,
a code block or list on lines of its own, a table row as a row of a table under its header. Also
what a sentence is embedded as."""

from __future__ import annotations

import re
from typing import Sequence

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
