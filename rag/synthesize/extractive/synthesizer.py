"""The embedded default: an answer built from the retrieved sentences themselves, no model at all.

The question is analysed once (question.py); the steps (steps.py) score every sentence of the
excerpts by its features (features.py, kinds.py), choose the best few from the documents that
answer, add what a how-to or a comparison lacks, and check that the answer names what the question
is about, or decline with a named reason (rag/synthesize/declines.py). Every number is in
tuning.py. docs/architecture.md states each rule once.
"""

from __future__ import annotations

from typing import Iterator, Sequence

from rag.models.embed import Embedder, SentenceSpan
from rag.retrieve.types import Hit, Query
from rag.settings import AnswerSettings
from rag.synthesize import declines
from rag.synthesize.citations import CitationStream
from rag.synthesize.extractive.draft import Draft
from rag.synthesize.extractive.question import Question
from rag.synthesize.extractive.steps import Env, run
from rag.synthesize.extractive.subject import DocFreq
from rag.synthesize.extractive.text import sentence_spans, write
from rag.synthesize.extractive.tuning import TUNING, Tuning
from rag.synthesize.types import ABSTENTION, Answer, AnswerEvent, final_answer


class ExtractiveSynthesizer:
    name = "extractive"

    def __init__(self, embedder: Embedder, settings: AnswerSettings, doc_freq: DocFreq | None = None,
                 tuning: Tuning = TUNING) -> None:
        self.embedder = embedder
        self.settings = settings
        self.doc_freq = doc_freq  # the knowledge base's vocabulary: how rare each question word is
        self.tuning = tuning

    @staticmethod
    def publish_sentences(indexed: str, text: str, heading_path: Sequence[str]) -> list[SentenceSpan]:
        """What an answer drawing on this chunk embeds: its sentences, which the publisher pools
        out of the chunk's own pass (CachedEmbedder.embed_chunks), so that a question never asked
        before finds their vectors in the embedding cache."""
        return sentence_spans(indexed, text, heading_path, TUNING.min_words)

    def draft(self, question: str | Query, hits: Sequence[Hit]) -> Draft:
        """The answer's draft after every step: `chosen` in reading order, or `declined` with its reason."""
        env = Env(self.embedder, self.settings, self.tuning)
        return run(Draft(Question.analyse(question, self.doc_freq, self.tuning), hits), env)

    def stream(self, question: str | Query, hits: Sequence[Hit]) -> Iterator[AnswerEvent]:
        draft = self.draft(question, hits)
        text = draft.question.text
        if draft.chosen:
            citations = CitationStream(hits)
            written = citations.process(write(draft.chosen, hits, draft.question.words, draft.uncovered))
            answer = Answer(text=written, sources=citations.sources, synthesizer=self.name, question=text)
        else:
            answer = Answer(ABSTENTION, [], synthesizer=self.name, abstained=True, question=text,
                            declined=draft.declined or declines.NO_SENTENCES)
        yield AnswerEvent("delta", text=answer.text)
        yield AnswerEvent("sources", answer=answer)
        yield AnswerEvent("done", answer=answer)

    def answer(self, question: str | Query, hits: Sequence[Hit]) -> Answer:
        return final_answer(self.stream(question, hits))
