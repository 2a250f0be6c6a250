"""Is anything retrieved about the question at all? The signals that decide when to abstain.

The fused score is rank-only: the best hit of an unrelated question scores as high as the best hit
of a good one. Two signals do mean relevance: the vector lane's cosine similarity between the
question and the excerpt, and how much of the question's own words the excerpt holds.
"""

from __future__ import annotations

from typing import Sequence

from rag.retrieve.text import question_stems, stems
from rag.retrieve.types import Hit
from rag.settings import AnswerSettings


def coverage(wanted: set[str], text: str) -> float:
    """Share of the question's stems (stop words left out) found in the text."""
    if not wanted:
        return 0.0
    return len(wanted & stems(text)) / len(wanted)


def searchable_text(hit: Hit) -> str:
    """The excerpt as the lanes indexed it: its heading path, then its text."""
    return " ".join([*hit.heading_path, hit.text])


def relevant_hits(question: str, hits: Sequence[Hit], settings: AnswerSettings) -> list[Hit]:
    """The hits an answer may draw on, in their ranked order; empty means abstain.

    Two steps. Is the question answerable at all: does some hit pass `min_similarity` or
    `min_coverage`? Then, which hits: those within reach of it, passing `min_excerpt_similarity`
    (lower) or the coverage rule. One threshold for both would either let off-topic questions
    through or drop useful second excerpts of a good answer."""
    wanted = question_stems(question)

    def covered(hit: Hit) -> bool:
        # A question of one or two words is covered by any excerpt that mentions them; coverage
        # alone needs at least three words to mean anything.
        return len(wanted) >= 3 and coverage(wanted, searchable_text(hit)) >= settings.min_coverage

    def similar(hit: Hit, floor: float) -> bool:
        return hit.vector_similarity is not None and hit.vector_similarity >= floor

    if not any(similar(hit, settings.min_similarity) or covered(hit) for hit in hits):
        return []
    return [hit for hit in hits if similar(hit, settings.min_excerpt_similarity) or covered(hit)]
