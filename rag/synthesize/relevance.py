"""Is anything retrieved about the question at all? The signals that decide when to abstain.

The fused score is rank-only: the best hit of an unrelated question scores as high as the best hit
of a good one. Two signals do mean relevance: the vector lane's cosine similarity between the
question and the excerpt, and how much of the question's own words the excerpt holds.
"""

from __future__ import annotations

import re
from typing import Sequence

from rag.retrieve.keyword import porter_stem, query_terms
from rag.retrieve.types import Hit
from rag.settings import AnswerSettings

_WORD = re.compile(r"\w+", re.UNICODE)


def stems(text: str) -> set[str]:
    return {porter_stem(word) for word in _WORD.findall(text.lower())}


def question_stems(question: str) -> set[str]:
    return {porter_stem(term) for term in query_terms(question)}


def coverage(wanted: set[str], text: str) -> float:
    """Share of the question's stems (stop words left out) found in the text."""
    if not wanted:
        return 0.0
    return len(wanted & stems(text)) / len(wanted)


def searchable_text(hit: Hit) -> str:
    """The excerpt as the lanes indexed it: its heading path, then its text."""
    return " ".join([*hit.heading_path, hit.text])


def relevant_hits(question: str, hits: Sequence[Hit], settings: AnswerSettings) -> list[Hit]:
    """The hits that pass either signal, in their ranked order; empty means abstain."""
    wanted = question_stems(question)
    kept = []
    for hit in hits:
        similar = hit.vector_similarity is not None and hit.vector_similarity >= settings.min_similarity
        # A question of one or two words is covered by any excerpt that mentions them; coverage
        # alone needs at least three words to mean anything.
        covered = len(wanted) >= 3 and coverage(wanted, searchable_text(hit)) >= settings.min_coverage
        if similar or covered:
            kept.append(hit)
    return kept
