"""The model's answer: numbered excerpts in, [n] citations validated and renumbered on the way out.

A model that declines answers with the abstention sentence (``ABSTENTION``, which the answer prompt
writes out for it). Such an answer is ``abstained`` and cites nothing, whichever way the model wrote
the sentence: with a citation after it, other trailing punctuation, quotes or emphasis around it,
other letter case or spacing (`declines`). Streamed, the opening of an answer is held back only while
it could still be that sentence, so a declining answer streams as exactly ``ABSTENTION`` and every
other answer streams unchanged: streamed and whole answers stay the same text.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Iterator, Sequence

from rag.models.llm import ChatModel
from rag.retrieve.types import Hit, Query
from rag.synthesize.citations import CLUSTER, CitationStream
from rag.synthesize.declines import MODEL_DECLINED
from rag.synthesize.prompts import format_excerpts, render_prompt
from rag.synthesize.types import question_text, ABSTENTION, Answer, AnswerEvent

EMPTY_ANSWER = "The model returned no answer from these excerpts."


def _words(text: str) -> str:
    """The text's words, citation markers and punctuation left out, lower case, one space apart."""
    return " ".join(re.findall(r"\w+", CLUSTER.sub(" ", text).casefold()))


_ABSTENTION_WORDS = _words(ABSTENTION)


def declines(text: str) -> bool:
    """The answer is the abstention sentence and nothing else (citations and punctuation aside)."""
    return _words(text) == _ABSTENTION_WORDS


def _may_decline(text: str) -> bool:
    """The text so far could still grow into the abstention sentence (its last word may be cut)."""
    return _ABSTENTION_WORDS.startswith(_words(text))


class _DeclineGate:
    """Holds streamed text back while it could still be the abstention sentence."""

    def __init__(self) -> None:
        self.held = ""
        self.open = True  # still holding: everything so far may be the abstention sentence

    def feed(self, text: str) -> str:
        if not self.open:
            return text
        self.held += text
        if _may_decline(self.held):
            return ""
        self.open = False
        released, self.held = self.held, ""
        return released


class LLMSynthesizer:
    publish_sentences = None  # nothing is embedded at publish time for a model's answer
    def __init__(self, model: ChatModel, excerpt_chars: int = 2000, prompts_dir: Path | None = None) -> None:
        self.model = model
        self.excerpt_chars = excerpt_chars
        self.prompts_dir = prompts_dir

    @property
    def name(self) -> str:
        return f"llm:{self.model.name}"

    def _answered_by(self) -> str:
        return f"llm:{self.model.last_model or self.model.name}"

    def messages(self, question: str, hits: Sequence[Hit]) -> list[dict[str, str]]:
        return [
            {"role": "system", "content": render_prompt("answer_system", self.prompts_dir, abstention=ABSTENTION)},
            {
                "role": "user",
                "content": render_prompt(
                    "answer_user", self.prompts_dir, abstention=ABSTENTION,
                    excerpts=format_excerpts(hits, self.excerpt_chars), question=question.strip(),
                ),
            },
        ]

    def _answer(self, question: str, text: str, citations: CitationStream) -> Answer:
        if declines(text):
            return Answer(text=ABSTENTION, sources=[], synthesizer=self._answered_by(), abstained=True,
                          question=question, declined=MODEL_DECLINED)
        return Answer(text=text or EMPTY_ANSWER, sources=citations.sources, synthesizer=self._answered_by(),
                      question=question)

    def stream(self, question: str | Query, hits: Sequence[Hit]) -> Iterator[AnswerEvent]:
        question = question_text(question)
        citations = CitationStream(hits)
        gate = _DeclineGate()
        parts: list[str] = []
        for delta in self.model.stream(self.messages(question, hits)):
            text = citations.feed(delta)
            parts.append(text)
            released = gate.feed(text)
            if released:
                yield AnswerEvent("delta", text=released)
        tail = citations.finish()
        parts.append(tail)
        answer = self._answer(question, "".join(parts), citations)
        # What is still to send: the answer's held-back opening and tail, or the whole answer.
        rest = answer.text if gate.open else tail
        if rest:
            yield AnswerEvent("delta", text=rest)
        yield AnswerEvent("sources", answer=answer)
        yield AnswerEvent("done", answer=answer)

    def answer(self, question: str | Query, hits: Sequence[Hit]) -> Answer:
        question = question_text(question)
        citations = CitationStream(hits)
        return self._answer(question, citations.process(self.model.complete(self.messages(question, hits))), citations)
