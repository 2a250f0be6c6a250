"""The embedded default: an answer built from the retrieved sentences themselves, no model at all.

Each sentence of the excerpts is scored by meaning (cosine similarity with the question, from the
local embedder) and by how many of the question's words it holds; the best few that are not
near-duplicates of each other become the answer, each citing its excerpt under the same contract
as a model's answer.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Iterator, Sequence

import numpy as np

from rag.models.embed import Embedder
from rag.retrieve.types import Hit
from rag.settings import AnswerSettings
from rag.synthesize.citations import CitationStream
from rag.synthesize.relevance import question_stems, stems
from rag.synthesize.types import Answer, AnswerEvent

_LIST_ITEM = re.compile(r"^\s*(?:[-*+]|\d+[.)])\s+")
_SENTENCE_END = re.compile(r"(?<=[.!?])[\"'”’)\]]*\s+(?=[\"'“‘(]?[A-Z0-9])")
_LINK = re.compile(r"!?\[([^\]]*)\]\([^)]*\)")
_EMPHASIS = re.compile(r"(\*\*|__|`)")
_MAX_ANSWER_CHARS = 1200


@dataclass
class Candidate:
    excerpt: int  # 1-based number of the excerpt the sentence comes from
    text: str
    context: str = ""  # the section heading it sits under, which says what "it" and "this" are
    position: int = 0  # order within its excerpt
    score: float = 0.0
    similarity: float = 0.0
    vector: np.ndarray | None = None


def _units(text: str) -> Iterator[str]:
    """Paragraphs and list items, with hard-wrapped lines joined; code, tables and headings left out."""
    fenced = False
    current: list[str] = []
    for raw in text.splitlines() + [""]:
        line = raw.strip()
        if line.startswith("```") or line.startswith("~~~"):
            fenced = not fenced
            line = ""
        is_break = fenced or not line or line.startswith("#") or line.count("|") >= 2
        if is_break or _LIST_ITEM.match(raw):
            if current:
                yield " ".join(current)
            current = []
            if is_break:
                continue
            line = _LIST_ITEM.sub("", raw).strip()
        current.append(line.lstrip("> ").strip())


def _clean(sentence: str) -> str:
    sentence = _LINK.sub(r"\1", sentence)
    return _EMPHASIS.sub("", sentence).strip()


def split_sentences(text: str, min_words: int = 5) -> list[str]:
    found = []
    for unit in _units(text):
        for sentence in _SENTENCE_END.split(unit):
            sentence = _clean(sentence)
            if len(sentence.split()) >= min_words and len(sentence) >= 25 and not sentence.endswith(":"):
                found.append(sentence)
    return found


def _with_citation(sentence: str, number: int) -> str:
    sentence = sentence.rstrip(";,: ")
    sentence = sentence[0].upper() + sentence[1:]  # a list item cut from its lead-in
    if sentence[-1] in ".!?":
        return f"{sentence[:-1]} [{number}]{sentence[-1]}"
    return f"{sentence} [{number}]."


def reading_order(chosen: list[Candidate]) -> list[Candidate]:
    """The best sentence's excerpt first; within an excerpt, sentences in the order they are written."""
    first_rank = {}
    for rank, c in enumerate(chosen):
        first_rank.setdefault(c.excerpt, rank)
    return sorted(chosen, key=lambda c: (first_rank[c.excerpt], c.position))


def _jaccard(a: set[str], b: set[str]) -> float:
    return len(a & b) / len(a | b) if a | b else 0.0


class ExtractiveSynthesizer:
    name = "extractive"

    def __init__(self, embedder: Embedder, settings: AnswerSettings) -> None:
        self.embedder = embedder
        self.settings = settings

    def candidates(self, question: str, hits: Sequence[Hit]) -> list[Candidate]:
        def sentences(min_words: int) -> list[Candidate]:
            return [
                Candidate(i, s, hit.heading_path[-1] if hit.heading_path else "", position)
                for i, hit in enumerate(hits, start=1)
                for position, s in enumerate(split_sentences(hit.text, min_words))
            ]

        found = sentences(5) or sentences(2)  # excerpts of lists and short lines only: take what there is
        if not found:
            return []
        query = self.embedder.embed_query(question)
        vectors = self.embedder.embed([f"{c.context}: {c.text}" if c.context else c.text for c in found])
        query = query / (np.linalg.norm(query) or 1.0)
        norms = np.linalg.norm(vectors, axis=1, keepdims=True)
        vectors = vectors / np.where(norms == 0, 1.0, norms)
        similarity = vectors @ query
        wanted = question_stems(question)
        for c, sim, vector in zip(found, similarity, vectors):
            overlap = len(wanted & stems(f"{c.context} {c.text}")) / len(wanted) if wanted else 0.0
            prior = 0.05 * (1 - (c.excerpt - 1) / len(hits))  # the retriever's order breaks near-ties
            c.similarity = float(sim)
            c.score = float(sim) + 0.25 * overlap + prior
            c.vector = vector
        return sorted(found, key=lambda c: -c.score)

    def select(self, ranked: list[Candidate]) -> list[Candidate]:
        chosen: list[Candidate] = []
        used = 0
        for c in ranked:
            if len(chosen) >= self.settings.extractive_sentences:
                break
            if chosen and c.score < 0.75 * chosen[0].score:
                break
            words = stems(c.text)
            if any(
                float(c.vector @ other.vector) > 0.85 or _jaccard(words, stems(other.text)) > 0.6
                for other in chosen
            ):
                continue
            if chosen and used + len(c.text) > _MAX_ANSWER_CHARS:
                continue
            chosen.append(c)
            used += len(c.text)
        return chosen

    def stream(self, question: str, hits: Sequence[Hit]) -> Iterator[AnswerEvent]:
        chosen = reading_order(self.select(self.candidates(question, hits)))
        citations = CitationStream(hits)
        if chosen:
            text = citations.process(" ".join(_with_citation(c.text, c.excerpt) for c in chosen))
        else:
            text = "The retrieved excerpts hold no sentence that answers this; see the search results instead."
        answer = Answer(text=text, sources=citations.sources, synthesizer=self.name, question=question)
        yield AnswerEvent("delta", text=text)
        yield AnswerEvent("sources", answer=answer)
        yield AnswerEvent("done", answer=answer)

    def answer(self, question: str, hits: Sequence[Hit]) -> Answer:
        return final_answer(self.stream(question, hits))


def final_answer(events: Iterator[AnswerEvent]) -> Answer:
    answer = None
    for event in events:
        if event.kind == "done":
            answer = event.answer
    assert answer is not None, "a synthesizer stream always ends with done"
    return answer
