"""Text analysis, in one place: what a word is, which words say nothing, and their stems.

Every part that compares a question with text uses these, so that they agree: the keyword lanes
(the query's terms), abstention (how much of the question an excerpt covers), the extractive
synthesizer and the rule that rewrites a follow-up question. The stemmer is the original Porter
algorithm, the one SQLite FTS5's porter tokenizer and tantivy's English stemmer implement, so a
stem computed here is the term those indexes hold.
"""

from __future__ import annotations

import re
from functools import lru_cache

WORD = re.compile(r"\w+")  # a str pattern: Unicode letters and digits, so "café" and "naïve" are words

# A short English stop list: these words only make an OR query slower and noisier, and a question's
# coverage by an excerpt is counted without them.
STOPWORDS = frozenset(
    """a about above after again all also am an and any are as at be been before being below between both but by
    can could did do does doing down during each few for from further had has have having he her here hers him his
    how i if in into is it its itself just me more most my no nor not now of off on once only or other our ours out
    over own same she should so some such than that the their theirs them then there these they this those through
    to too under until up very was we were what when where which while who whom why will with would you your yours
    yourself""".split()
)


def words(text: str) -> list[str]:
    """The lower-case words of a text, in order, stop words included."""
    return WORD.findall(text.lower())


def query_terms(query: str, max_terms: int = 32) -> list[str]:
    """Distinct lower-case terms of the query, stop words removed, in order of first appearance."""
    seen: dict[str, None] = {}
    for word in words(query):
        if word not in STOPWORDS and word not in seen:
            seen[word] = None
    return list(seen)[:max_terms]


@lru_cache(maxsize=1)
def _stemmer():
    # The original Porter algorithm, which FTS5's porter tokenizer uses too, from Snowball's C code:
    # the same stems as NLTK's PorterStemmer(ORIGINAL_ALGORITHM) on the 29,708 distinct words of the
    # handbook, uv and SciFact corpora, and imported in milliseconds where NLTK takes seconds.
    import Stemmer

    return Stemmer.Stemmer("porter")


@lru_cache(maxsize=65536)
def porter_stem(word: str) -> str:
    return _stemmer().stemWord(word)


def stems(text: str) -> set[str]:
    """The stems of every word of a text (stop words included: an excerpt is matched as it is)."""
    return {porter_stem(word) for word in words(text)}


def question_stems(question: str) -> set[str]:
    """The stems of a question's terms (stop words left out: they say nothing about its subject)."""
    return {porter_stem(term) for term in query_terms(question)}
