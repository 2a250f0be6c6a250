"""How an extractive answer's sentences are scored besides their meaning: what they hold of the
question, and what kind of sentence they are.

English cue words, kept here in one place: the answer to a how-to question names a mechanism (a
command, flag, setting or file, often in code); the answer to a "how many" or "when" question holds
a number or a date; a sentence that points elsewhere ("see below") or introduces a page answers
nothing by itself, and one that adds almost nothing to the question's own words restates it.
Every bonus grows with how much of the question the sentence holds: a number about something else
says nothing.
"""

from __future__ import annotations

import math
import re
from typing import TYPE_CHECKING

from rag.retrieve.text import STOPWORDS, WORD, porter_stem, query_terms
from rag.synthesize.subject import DocFreq

if TYPE_CHECKING:
    from rag.synthesize.extractive import Candidate

_HOWTO = re.compile(
    r"^\s*(?:how\b(?! (?:many|much|long|often|far|big|large|old|soon|quickly)\b)|can (?:i|you|we)\b|is (?:there|it possible)\b|what(?:'s| is) the (?:\w+ )?way\b"
    r"|i (?:want|need|would like|have)\b)|\bhow (?:do|can|should|would) (?:i|you|we)\b",
    re.IGNORECASE,
)
_CODE = re.compile(
    r"`[^`]+`|(?<![\w-])--?[a-zA-Z][\w-]*|\b[A-Z][A-Z0-9]*_[A-Z0-9_]+\b"
    r"|\b[\w-]+\.(?:toml|txt|lock|json|ya?ml|cfg|ini|py|sh|ps1|md|env)\b"
)
_ACTION = re.compile(
    r"\b(?:use|using|run|set|add|pass|specify|configure|install|enable|disable|provide|create|invoke"
    r"|define|declare|include|call|with the|via)\b",
    re.IGNORECASE,
)
_POINTER = re.compile(
    # "see" points elsewhere where it opens a sentence or an aside ("See the guide", "(see below)"),
    # not where it is the verb of what the reader does ("to see your user type").
    r"(?:^|[(;:,—–]\s*)see\b|\b(?:please see|see also)\b"
    r"|\bsee (?:the |our )?(?:[\w`'-]+ ){0,4}(?:docs|documentation|guide|page|section|reference)\b"
    r"|\b(?:check out|jump to|refer to|consult|read more|learn more|more (?:details|information)|documented in"
    r"|described in|covered in|discussed in|can be found (?:in|at|on))\b|\b(?:below|above|following)\s*[.:]?$",
    re.IGNORECASE,
)
_INTRO = re.compile(
    r"^(?:this|the following|these|in this) (?:guide|page|section|document|tutorial|chapter|example)s?\b",
    re.IGNORECASE,
)
# What a fact question asks for, and what a sentence holding such an answer looks like.
_NUMBER_WORDS = r"(?:one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|twenty|thirty|hundred|half|twice|once)"
_ASKS = {
    "number": re.compile(r"\bhow (?:many|much|long|often|far|big|large|old)\b|\b(?:minimum|maximum|limit|percentage|rate|cap)\b", re.I),
    "time": re.compile(r"\b(?:when|how soon|how quickly|what time|which day|what day|weekday|deadline|by when)\b", re.I),
    "agent": re.compile(r"\b(?:who|whom|which (?:team|office|person|group)|to whom)\b", re.I),
    "place": re.compile(r"\b(?:where|which (?:site|page|url|address|file|folder|directory|channel))\b", re.I),
}
_HOLDS = {
    "number": re.compile(rf"\d|\b{_NUMBER_WORDS}\b", re.I),
    "time": re.compile(
        r"\d|\b(?:monday|tuesday|wednesday|thursday|friday|saturday|sunday|january|february|march|april|may|june"
        r"|july|august|september|october|november|december|days?|weeks?|months?|years?|hours?|minutes?|daily"
        r"|weekly|monthly|annually|before|after|within|until|immediately)\b", re.I,
    ),
    "agent": re.compile(r"@|(?<=[a-z,;] )[A-Z][\w&-]+"),
    "place": re.compile(r"https?://|www\.|@|/[\w.-]+|`[^`]+`|(?<=[a-z,;] )[A-Z][\w&-]+"),
}
# "How far ahead of my last day ...?", "How much notice ...?": the answer is a span of time before
# something ("at least two weeks before your last day", "three business days in advance"), not any
# number ("within 24 hours of the person ending their work").
_ASKS_LEAD = re.compile(
    r"\bhow (?:far|long|much time|early|many (?:days|weeks|hours|months))\b(?:\s+\w+){0,6}?\s+(?:ahead|in advance|before|beforehand|prior)\b"
    r"|\bhow much (?:advance )?notice\b",
    re.I,
)
_HOLDS_LEAD = re.compile(
    rf"\b(?:\d+|{_NUMBER_WORDS}|an?)\s+(?:(?:full|business|calendar|working|work)\s+)?(?:minutes?|hours?|days?|weeks?|months?|years?)"
    r"(?:'s)?\s+(?:before|in advance|ahead|prior|beforehand|notice|early)\b",
    re.I,
)
_NEGATION = re.compile(r"\b(?:not|no|never|cannot)\b|n't\b", re.IGNORECASE)
_STEP = re.compile(r"^(?:then|next|now|finally|after that|afterwards|once (?:that|this) is done),", re.IGNORECASE)
_STEP_PENALTY = 0.1  # "Then, run it:" leans on the steps before it (0.1 and 0.15 tie on the dev questions)
_TYPE_BONUS = 0.08  # a fact question's sentence that holds the kind of answer it asks for
_CODE_BONUS = 0.06
_HOWTO_BONUS = 0.08  # a how-to question's sentence with code, or one that introduces code
_ACTION_BONUS = 0.03
_POINTER_PENALTY = 0.25
_INTRO_PENALTY = 0.1
_RESTATES_PENALTY = 0.15
_MAX_NEW_WORDS = 3  # a sentence that adds at most this many words to the question's own...
_RESTATED_SHARE = 0.6  # ...while this share of its words are the question's restates it
NEW_PART = 0.2  # another document joins the answer for a part of the question worth this share


def question_weights(question: str, doc_freq: DocFreq | None) -> dict[str, float]:
    """Each question stem's weight: its idf in the knowledge base (1.0 each when unknown)."""
    terms = query_terms(question)
    counted = doc_freq(terms) if doc_freq and terms else None
    weights: dict[str, float] = {}
    for term in terms:
        stem = porter_stem(term)
        if len(stem) < 2:
            continue  # the "s" of "what's"
        if counted is None:
            weights[stem] = 1.0
        else:
            df, total = counted
            weights[stem] = max(weights.get(stem, 0.0), math.log((total + 1) / (df.get(term, 0) + 1)) + 1.0)
    return weights


# Where a question with several parts breaks: between sentences, and before a clause that asks
# something else ("..., and what do I change in X?", "... and also log in to Y").
# (not after an initial or an abbreviation: "Gerald R. Ford", "Craig v. Boren")
_SENTENCE_BREAK = re.compile(r"(?:(?<=[?!])|(?<=[a-z]{3}\.))\s+(?=[A-Z])")
_CLAUSE_BREAK = re.compile(
    r",?\s+and\s+(?:also\s+|then\s+)?(?=(?:what|how|where|which|when|who|why|do|does|can|should)\b)"
    r"|,\s+(?:and\s+)?(?:then|also)\s+|\s+and\s+(?:also|then)\s+",
    re.IGNORECASE,
)
_QUESTION_START = re.compile(r"^(?:what|how|where|which|when|who|why|whom|whose|do|does|did|can|could|should|is|are|will)\b", re.I)
_MIN_PART_WORDS = 3  # a part with fewer content words ("How do I set that up?") belongs to the one before


_ASK_START = re.compile(r"^(?:i|we) (?:want|need|would like)\b", re.I)


def _asks(clause: str) -> bool:
    return clause.endswith("?") or bool(_QUESTION_START.search(clause) or _ASK_START.search(clause))


def question_parts(question: str) -> list[str]:
    """The parts of a question that asks several things, in order; one part for most questions.
    A sentence that only sets the scene ("Our project depends on a private repository.") goes with
    the part after it, and a part too short to stand alone with the one before it, which it refers to."""
    parts: list[str] = []
    scene = ""
    for sentence in _SENTENCE_BREAK.split(question.strip()):
        clauses = [c.strip(" ,;") for c in _CLAUSE_BREAK.split(sentence) if c.strip(" ,;")]
        if not clauses:
            continue
        if scene:
            clauses[0], scene = f"{scene} {clauses[0]}", ""
        if len(clauses) == 1 and not _asks(clauses[0]):
            scene = clauses[0]
            continue
        for clause in clauses:
            if parts and len(query_terms(clause)) < _MIN_PART_WORDS:
                parts[-1] = f"{parts[-1]} {clause}"
            else:
                parts.append(clause)
    if scene:
        parts = [*parts[:-1], f"{parts[-1]} {scene}"] if parts else [scene]
    if len(parts) > 1 and len(query_terms(parts[0])) < _MIN_PART_WORDS:  # "When and where is ...?"
        parts[:2] = [f"{parts[0]} {parts[1]}"]
    return parts if len(parts) > 1 else [question.strip()]


def held_share(weights: dict[str, float], text_stems: set[str]) -> float:
    total = sum(weights.values())
    return sum(w for stem, w in weights.items() if stem in text_stems) / total if total else 0.0


def restates(text: str, question_stems: set[str]) -> bool:
    """Most of the sentence's words are the question's, and it adds at most a few of its own. A
    sentence that denies something ("Term renewals are not automatic") answers a yes/no question."""
    if _NEGATION.search(text):
        return False
    content = {porter_stem(w) for w in WORD.findall(text.lower()) if w not in STOPWORDS}
    new_words = content - question_stems
    return len(new_words) <= _MAX_NEW_WORDS and len(content & question_stems) >= _RESTATED_SHARE * len(content)


def asks_for(question: str) -> set[str]:
    """The kinds of answer a question asks for: "howto", "number", "time", "agent", "place", and
    "lead" (a span of time ahead of something: "How far ahead of my last day ...?")."""
    kinds = {kind for kind, pattern in _ASKS.items() if pattern.search(question)}
    if _ASKS_LEAD.search(question):
        kinds.add("lead")
    if _HOWTO.search(question):
        kinds.add("howto")
    return kinds


def is_howto(question: str) -> bool:
    return bool(_HOWTO.search(question))


def says_how(c: Candidate) -> bool:
    """The sentence names a mechanism: code, a flag, a setting or a file, or it introduces code."""
    return bool(_CODE.search(c.text)) or c.attachment.startswith("```")


def kind_score(c: Candidate, asks: set[str], question_stems: set[str], held: float) -> float:
    """Bonuses and penalties for what kind of sentence this is. The bonuses grow with how much of
    the question the sentence holds: code or a number about something else says nothing."""
    score = 0.0
    relevant = min(1.0, 2.0 * held)
    howto = "howto" in asks
    has_code = says_how(c)
    has_type = any(_HOLDS[kind].search(c.text) for kind in asks if kind in _HOLDS)
    if has_code:
        score += relevant * (_CODE_BONUS + (_HOWTO_BONUS if howto else 0.0))
    if howto and _ACTION.search(c.text):
        score += relevant * _ACTION_BONUS
    if has_type:
        score += relevant * _TYPE_BONUS
    if "lead" in asks and _HOLDS_LEAD.search(c.text):
        score += relevant * _TYPE_BONUS  # the span of time ahead asked for, not only a number
    if _POINTER.search(c.text):
        score -= _POINTER_PENALTY
    if _INTRO.search(c.text):
        score -= _INTRO_PENALTY
    if _STEP.search(c.text):
        score -= _STEP_PENALTY
    if not (c.attachment or has_code or has_type) and restates(c.text, question_stems):
        score -= _RESTATES_PENALTY  # "Wednesday" after the question's own words is the answer, not a restatement
    return score
