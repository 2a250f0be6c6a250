"""A question, analysed once: everything the steps ask of it, with one read of the vocabulary.

`Question.analyse` gives its text, its vector (the one retrieval used, when given a `Query`), its
words' rarity weights, its subject terms, the kinds of answer it asks for, its parts, the months it
asks about and its words padded for whole-word matching. The knowledge base's vocabulary is read
once for both the weights and the subject terms.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Sequence

import numpy as np

from rag.retrieve.text import porter_stem, query_terms
from rag.retrieve.types import Query
from rag.synthesize.extractive.documents import words_of
from rag.synthesize.extractive.kinds import FAILURE, asks_for, counted, is_howto
from rag.synthesize.extractive.subject import DocFreq, Term, asked_months, candidate_terms, subject_terms
from rag.synthesize.extractive.tuning import TUNING, Tuning
from rag.synthesize.types import question_text


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
_ASK_START = re.compile(r"^(?:i|we) (?:want|need|would like)\b", re.I)


def _asks(clause: str) -> bool:
    return clause.endswith("?") or bool(_QUESTION_START.search(clause) or _ASK_START.search(clause))


def question_parts(question: str, tuning: Tuning = TUNING) -> list[str]:
    """The parts of a question that asks several things, in order; one part for most questions.
    A sentence that only sets the scene ("Our project depends on a private repository.") goes with
    the part after it, and a part too short to stand alone (under `min_part_words` content words:
    "How do I set that up?") with the one before it, which it refers to."""
    shortest = tuning.min_part_words
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
            if parts and len(query_terms(clause)) < shortest:
                parts[-1] = f"{parts[-1]} {clause}"
            else:
                parts.append(clause)
    if scene:
        parts = [*parts[:-1], f"{parts[-1]} {scene}"] if parts else [scene]
    if len(parts) > 1 and len(query_terms(parts[0])) < shortest:  # "When and where is ...?"
        parts[:2] = [f"{parts[0]} {parts[1]}"]
    return parts if len(parts) > 1 else [question.strip()]


def read_once(doc_freq: DocFreq | None, words: Sequence[str]) -> DocFreq | None:
    """A `DocFreq` answering from one read of `words` (for any subset of them); None when there is
    no vocabulary (or nothing to read)."""
    if doc_freq is None:
        return None
    wanted = sorted(set(words))
    counted = doc_freq(wanted) if wanted else None

    def answer(asked: Sequence[str]) -> tuple[dict[str, int], int] | None:
        if counted is None:
            return doc_freq(asked)  # (nothing was read: a question with no words)
        df, total = counted
        return {w: df[w] for w in asked if w in df}, total

    return answer


@dataclass
class Question:
    text: str
    vector: np.ndarray | None = None  # the vector retrieval embedded it as, when known
    weights: dict[str, float] = field(default_factory=dict)  # stem -> rarity (idf) in the knowledge base
    terms: list[Term] = field(default_factory=list)  # its subject terms (subject.py)
    asks: set[str] = field(default_factory=set)  # the kinds of answer it asks for (kinds.py)
    unit: str | None = None  # the stem of what a "how many" question counts (kinds.counted)
    howto: bool = False
    problem: bool = False  # it describes a failure (an error, something that does not work)
    parts: list[str] = field(default_factory=list)  # several for a question that asks several things
    months: frozenset[str] = frozenset()  # the months it asks about as periods
    words: str = ""  # its lower-case words, padded (documents.words_of)

    @classmethod
    def analyse(cls, question: str | Query, doc_freq: DocFreq | None, tuning: Tuning = TUNING) -> Question:
        text = question_text(question)
        subject_words = [w for _, _, words, _ in candidate_terms(text, everyday=doc_freq is not None) for w in words]
        vocabulary = read_once(doc_freq, [*query_terms(text), *subject_words])
        return cls(
            text=text,
            vector=question.vector if isinstance(question, Query) else None,
            weights=question_weights(text, vocabulary),
            terms=subject_terms(text, vocabulary, tuning.subject_max_share),
            asks=asks_for(text),
            unit=counted(text),
            howto=is_howto(text),
            problem=bool(FAILURE.search(text)),
            parts=question_parts(text, tuning),
            months=asked_months(text),
            words=words_of(text),
        )
