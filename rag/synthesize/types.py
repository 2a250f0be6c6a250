"""What the synthesis stage returns: an answer, its sources in citation order, and stream events."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterator, Literal

from rag.retrieve.types import Hit, Query

# The one sentence an answer that declines gives, from either synthesizer (the answer prompt asks the
# model for exactly this sentence); such an answer cites nothing.
ABSTENTION = "The knowledge base has nothing on this question."


@dataclass
class Source:
    """One cited document. Several cited excerpts of one document share its number."""

    number: int
    hits: list[Hit]  # the cited excerpts of this document, in order of first citation

    @property
    def first(self) -> Hit:
        return self.hits[0]

    @property
    def source_id(self) -> str:
        return self.first.source_id

    @property
    def document_id(self) -> str:
        return self.first.source_id

    @property
    def title(self) -> str:
        return self.first.title

    @property
    def source(self) -> str | None:
        return self.first.source

    @property
    def score(self) -> float:
        return max(hit.score for hit in self.hits)


@dataclass
class Answer:
    text: str
    sources: list[Source] = field(default_factory=list)
    synthesizer: str = "extractive"
    abstained: bool = False
    question: str = ""  # the standalone question retrieval used (after a conversation rewrite)
    declined: str | None = None  # why it abstained: a reason of rag.synthesize.declines


@dataclass
class AnswerEvent:
    """A streamed answer: text deltas, then the sources, then done (carrying the whole answer)."""

    kind: Literal["delta", "sources", "done"]
    text: str = ""
    answer: Answer | None = None


def question_text(question: str | Query) -> str:
    """A synthesizer is given the question as text, or as the `Query` retrieval used (whose vector
    the extractive synthesizer reuses instead of embedding the question again)."""
    return question.text if isinstance(question, Query) else question


def final_answer(events: Iterator[AnswerEvent]) -> Answer:
    """The answer a stream ends with (its `done` event)."""
    answer = None
    for event in events:
        if event.kind == "done":
            answer = event.answer
    assert answer is not None, "a synthesizer stream always ends with done"
    return answer
