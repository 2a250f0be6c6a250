"""Score fusion as the step after fusion: the candidates reciprocal rank fusion brought, ordered by
what each lane measured (the math, the normalisations and the floor of a missing candidate are in
rag/retrieve/fusion.py, `score_fusion`).

Each lane's normalised score is weighed with the lane's fusion weight (`RAG_RETRIEVE__WEIGHTS`), so
one setting says how much a lane counts, whichever step orders the candidates; the normalisation is
`RAG_RETRIEVE__SCORE_NORM`. It costs well under a millisecond: the scores are already in hand.
Scores stay on fusion's scale: the candidate now first gets the best fused score, the second the
second best, and so on (search_knowledge_base merges knowledge bases by score); a normalised sum,
relative to one query's candidates, would not be comparable across searches. The normalisation
and the weights were chosen with `python -m evals.tune_fusion`.
"""

from __future__ import annotations

from typing import Mapping

from sqlalchemy.orm import Session

from rag.retrieve.fusion import Fused, first_by_scores, score_fusion
from rag.retrieve.types import Query


class ScoreFusion:
    name = "scores"

    def __init__(self, weights: Mapping[str, float] | None = None, method: str = "minmax") -> None:
        self.weights = dict(weights or {})  # lane name -> weight of its normalised score; 1.0 for a lane not named
        self.method = method

    def rerank(self, session: Session, query: Query, fused: list[Fused], k: int) -> list[Fused]:
        if k == 1 and fused:  # the first only (the bridge's question): no need to order the rest
            return [first_by_scores(fused, self.weights, self.method)]
        return score_fusion(fused, self.weights, self.method)
