"""An answer in the making: the sentences found, those chosen, and what each step did to them."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

import numpy as np

from rag.retrieve.types import Hit
from rag.synthesize.extractive.question import Question


@dataclass
class Candidate:
    excerpt: int  # 1-based number of the excerpt the sentence comes from
    text: str
    document: str = ""  # node id of the excerpt's document
    context: str = ""  # the section heading it sits under, which says what "it" and "this" are
    position: int = 0  # order within its excerpt
    attachment: str = ""  # a code block or short list the sentence introduces
    table: str = ""  # for a table row: the row under its table's header, as it is written out
    score: float = 0.0
    prior: float = 0.0  # the cheap score every sentence gets before the best few are embedded
    base: float = 0.0  # what its kind and the retriever's order add to its score
    similarity: float = 0.0
    vector: np.ndarray | None = None
    features: dict[str, float] = field(default_factory=dict)  # features.kind_features, with held and rank

    @property
    def size(self) -> int:
        return len(self.text) + len(self.attachment)


@dataclass(frozen=True)
class StepRecord:
    """What one step did: the sentences it added and dropped (their texts), or why it declined."""

    step: str
    added: tuple[str, ...] = ()
    dropped: tuple[str, ...] = ()
    declined: str | None = None


@dataclass
class Draft:
    question: Question
    hits: Sequence[Hit]
    pool: list[Candidate] = field(default_factory=list)  # every sentence of the excerpts
    ranked: list[Candidate] = field(default_factory=list)  # those scored by meaning too, best first
    parts: list[tuple[Candidate, set[int]]] = field(default_factory=list)  # each part's best, and as good
    uncovered: list[str] = field(default_factory=list)  # the parts of the question no sentence answers
    chosen: list[Candidate] = field(default_factory=list)  # the answer's sentences
    declined: str | None = None  # a reason of rag.synthesize.declines; the answer then declines
    trace: list[StepRecord] = field(default_factory=list)

    def record(self, step: str, before: Sequence[Candidate]) -> None:
        was = {id(c) for c in before}
        now = {id(c) for c in self.chosen}
        self.trace.append(StepRecord(
            step,
            added=tuple(c.text for c in self.chosen if id(c) not in was),
            dropped=tuple(c.text for c in before if id(c) not in now),
            declined=self.declined,
        ))
