"""The engines the service parts share, each built once: the search index and its lanes at once
(the keyword index may need repair before the first write; each lane opens its engine on first
use), the model, the retriever and the synthesizer on first use (loading the model takes a few
seconds, and many commands never need it).
"""

from __future__ import annotations

from functools import cached_property
from typing import TYPE_CHECKING, Any

from rag.models.embed import Embedder, build_embedder
from rag.retrieve.index import SearchIndex, build_search_index
from rag.retrieve.retriever import Retriever

if TYPE_CHECKING:
    from rag.models.llm import ChatModel
    from rag.settings import Settings
    from rag.store.db import Database


class Engines:
    def __init__(self, settings: Settings, db: Database, read_only: bool = False) -> None:
        self.settings = settings
        self.db = db
        self.index: SearchIndex = build_search_index(settings, db, lambda: self.embedder, read_only)

    @cached_property
    def embedder(self) -> Embedder:
        return build_embedder(self.settings)

    @property
    def vector(self) -> Any:
        """The vector lane (tests, benchmarks and an import's clash check reach its collections)."""
        return self.index.lane("vector")

    @property
    def keyword(self) -> Any:
        """The keyword lane (tests and benchmarks reach its index)."""
        return self.index.lane("text")

    @cached_property
    def retriever(self) -> Retriever:
        self.index.open()  # Chroma is connected here, at start-up for a server, not in its first search
        return Retriever(self.db, self.embedder, self.index, self.settings.retrieve)

    @cached_property
    def chat_model(self) -> ChatModel | None:
        from rag.models.llm import build_chat_model

        return build_chat_model(self.settings)

    @property
    def synthesizer_class(self) -> Any:
        """The synthesizer's class, known without building it (no model client, no index opened)."""
        if self.settings.llm_model:
            from rag.synthesize.generative import LLMSynthesizer

            return LLMSynthesizer
        from rag.synthesize.extractive import ExtractiveSynthesizer

        return ExtractiveSynthesizer

    @cached_property
    def synthesizer(self) -> Any:
        if self.chat_model is not None:
            from rag.synthesize.generative import LLMSynthesizer

            return LLMSynthesizer(self.chat_model, self.settings.retrieve.excerpt_chars)
        from rag.synthesize.extractive import ExtractiveSynthesizer

        return ExtractiveSynthesizer(self.embedder, self.settings.answer, self.retriever.doc_freq)

    def close(self) -> None:
        self.index.close()  # the keyword index releases its writer's lock
