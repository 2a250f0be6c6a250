"""ask_knowledge: a cited answer from the excerpts a caller may read, or a plain "nothing found"."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Iterator

from rag import telemetry
from rag.errors import RagError
from rag.retrieve.types import Hit, Query
from rag.service.identity.principal import Principal
from rag.service.arguments import check_query
from rag.synthesize.conversation import standalone_question, validate_history
from rag.synthesize import declines
from rag.synthesize.relevance import relevant_hits
from rag.synthesize.types import ABSTENTION, Answer, AnswerEvent

if TYPE_CHECKING:
    from rag.service.identity.access import Access
    from rag.service.activity import ActivityLog
    from rag.service.engines import Engines
    from rag.settings import Settings

NOTHING_FOUND = ABSTENTION


class Answers:
    """The answer is recorded when it is complete (for a stream, at its end), so these calls
    record by hand rather than through @recorded."""

    def __init__(self, settings: Settings, access: Access, activity: ActivityLog, engines: Engines) -> None:
        self.settings = settings
        self.access = access
        self.activity = activity
        self.engines = engines

    def _prepare(self, principal: Principal, query: str, kb_name: str | None, history: Any) -> tuple[Query, list[Hit]]:
        """The standalone question and the retrieved excerpts that are about it (none: abstain).
        The question is a `Query`: the vector retrieval computed for it is the synthesizer's too."""
        try:
            check_query(query)
            messages = validate_history(history)
            self.access.take(principal, "ask")
            scope = self.access.scope(principal, kb_name)
            question = self.engines.retriever.query(standalone_question(query, messages, self.engines.chat_model))
            hits = self.access.shown_hits(
                principal, self.engines.retriever.retrieve(question, scope, self.settings.answer.excerpts))
        except RagError as exc:
            self.activity.record(principal, "ask", kb_name, exc.code)
            raise
        return question, relevant_hits(question.text, hits, self.settings.answer)

    def _abstain(self, question: Query) -> Answer:
        return Answer(
            NOTHING_FOUND, [], synthesizer=self.engines.synthesizer.name, abstained=True, question=question.text,
            declined=declines.OFF_TOPIC)

    def _record(self, principal: Principal, kb_name: str | None, query: str, answer: Answer) -> None:
        telemetry.count(telemetry.ANSWERS, answer.synthesizer, answer.declined or "answered")
        self.activity.record(principal, "ask", kb_name, "ok", {
            "sources": len(answer.sources), "synthesizer": answer.synthesizer,
            "abstained": answer.abstained, "declined": answer.declined, "query_chars": len(query),
        })

    def ask(self, principal: Principal, query: str, kb_name: str | None = None, history: Any = None) -> Answer:
        """A cited answer. Nothing relevant retrieved: the answer says so and no model is called."""
        question, hits = self._prepare(principal, query, kb_name, history)
        try:
            with telemetry.stage("synthesize"):
                answer = self.engines.synthesizer.answer(question, hits) if hits else self._abstain(question)
        except RagError as exc:
            self.activity.record(principal, "ask", kb_name, exc.code)
            raise
        self._record(principal, kb_name, query, answer)
        return answer

    def ask_stream(
        self, principal: Principal, query: str, kb_name: str | None = None, history: Any = None
    ) -> Iterator[AnswerEvent]:
        """The same answer as ask(), as events: deltas, then sources, then done. Bad input raises
        here, before the first event; a failure of the model raises from the iterator."""
        question, hits = self._prepare(principal, query, kb_name, history)

        def events() -> Iterator[AnswerEvent]:
            if not hits:
                answer = self._abstain(question)
                yield AnswerEvent("delta", text=answer.text)
                yield AnswerEvent("sources", answer=answer)
                yield AnswerEvent("done", answer=answer)
                self._record(principal, kb_name, query, answer)
                return
            try:
                for event in self.engines.synthesizer.stream(question, hits):
                    if event.kind == "done" and event.answer is not None:
                        self._record(principal, kb_name, query, event.answer)
                    yield event
            except RagError as exc:
                self.activity.record(principal, "ask", kb_name, exc.code)
                raise

        return events()
