"""Score fusion: the candidates reciprocal rank fusion brought, ordered by what each lane measured.

RRF reads ranks only: a chunk the vector lane found at cosine 0.71 and one it found at 0.38 count
the same if they are both third. Each lane's own score says more. Scores of different lanes are
not on one scale (cosine similarity, BM25), so each is standardised over this query's candidates
(z = (score - mean) / standard deviation) and the z-scores are added up. A candidate one lane did
not return gets that lane's lowest score among the candidates: it ranked below everything the
lane returned.

Each lane's z-score is weighed with the lane's fusion weight (`RAG_RETRIEVE__WEIGHTS`), so one
setting says how much a lane counts, whichever step orders the candidates. On SciFact's train
queries this beat every RRF weighting (nDCG@10 0.7338 against 0.7184 at the service's depth of 100
per lane), with the weights RRF was tuned to and equal ones within 0.002; on the test queries and
on HotpotQA, which played no part in choosing it, it gains 0.016 and 0.023 (docs/benchmarks.md).
It costs well under a millisecond: the scores are already in hand.

Scores stay on fusion's scale: the candidate now first gets the best fused score, the second the
second best, and so on. So a first place still scores at most 2/61, and scores stay comparable
with other searches' as before (search_knowledge_base merges knowledge bases by score); a z-score
sum, relative to one query's candidates, would not be.
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Mapping

from sqlalchemy.orm import Session

from rag.retrieve.fusion import Fused
from rag.retrieve.types import Query


class ScoreFusion:
    name = "scores"

    def __init__(self, weights: Mapping[str, float] | None = None) -> None:
        self.weights = dict(weights or {})  # lane name -> weight of its z-score; 1.0 for a lane not named

    def rerank(self, session: Session, query: Query, fused: list[Fused], k: int) -> list[Fused]:
        # Per lane: weight / standard deviation, and the score a candidate it did not return gets.
        # The means are left out: subtracting a constant does not change the order.
        scales: list[tuple[str, float, float]] = []
        for lane in sorted({lane for f in fused for lane in f.lane_scores}):
            values = [f.lane_scores[lane] for f in fused if lane in f.lane_scores]
            mean = sum(values) / len(values)
            spread = math.sqrt(sum((v - mean) ** 2 for v in values) / len(values))
            if spread > 0:  # a lane that cannot tell its candidates apart adds nothing
                scales.append((lane, self.weights.get(lane, 1.0) / spread, min(values)))
        if not scales:
            return fused
        totals = {id(f): sum(c * f.lane_scores.get(lane, lowest) for lane, c, lowest in scales) for f in fused}
        # Ties keep fusion's order: the best single-lane rank, then the chunk id.
        ranked = sorted(fused, key=lambda f: (-totals[id(f)], min(f.lanes.values()), f.chunk_id))
        places = sorted((f.score for f in fused), reverse=True)
        return [replace(f, score=score) for f, score in zip(ranked, places)]
