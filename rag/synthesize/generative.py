"""The model's answer: numbered excerpts in, [n] citations validated and renumbered on the way out."""

from __future__ import annotations

from pathlib import Path
from typing import Iterator, Sequence

from rag.models.llm import ChatModel
from rag.retrieve.types import Hit
from rag.synthesize.citations import CitationStream
from rag.synthesize.prompts import format_excerpts, render_prompt
from rag.synthesize.types import Answer, AnswerEvent

EMPTY_ANSWER = "The model returned no answer from these excerpts."


class LLMSynthesizer:
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
            {"role": "system", "content": render_prompt("answer_system", self.prompts_dir)},
            {
                "role": "user",
                "content": render_prompt(
                    "answer_user", self.prompts_dir,
                    excerpts=format_excerpts(hits, self.excerpt_chars), question=question.strip(),
                ),
            },
        ]

    def stream(self, question: str, hits: Sequence[Hit]) -> Iterator[AnswerEvent]:
        citations = CitationStream(hits)
        parts: list[str] = []
        for delta in self.model.stream(self.messages(question, hits)):
            text = citations.feed(delta)
            if text:
                parts.append(text)
                yield AnswerEvent("delta", text=text)
        tail = citations.finish()
        if tail:
            parts.append(tail)
            yield AnswerEvent("delta", text=tail)
        text = "".join(parts)
        if not text:
            text = EMPTY_ANSWER
            yield AnswerEvent("delta", text=text)
        answer = Answer(text=text, sources=citations.sources, synthesizer=self._answered_by(), question=question)
        yield AnswerEvent("sources", answer=answer)
        yield AnswerEvent("done", answer=answer)

    def answer(self, question: str, hits: Sequence[Hit]) -> Answer:
        citations = CitationStream(hits)
        text = citations.process(self.model.complete(self.messages(question, hits))) or EMPTY_ANSWER
        return Answer(text=text, sources=citations.sources, synthesizer=self._answered_by(), question=question)
