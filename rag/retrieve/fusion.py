"""Reciprocal rank fusion: score = sum over lanes of weight / (k + rank), ranks 1-based.

The weights are keyed by lane name (`RetrieveSettings.weights`; a lane without one weighs 1). With
k = 60 and weights that sum to 2 (vector 0.8, text 1.2 by default), a chunk ranked first in both
lanes scores 0.8/61 + 1.2/61 ≈ 0.0328. The score depends on ranks only, never on the lanes' raw
scores; each lane's score is kept beside it, for what comes after fusion.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping, Sequence

from rag.retrieve.types import LaneHit


@dataclass
class Fused:
    chunk_id: int
    score: float = 0.0
    lanes: dict[str, int] = field(default_factory=dict)  # lane -> 1-based rank
    lane_scores: dict[str, float] = field(default_factory=dict)


def reciprocal_rank_fusion(
    lanes: Mapping[str, Sequence[LaneHit]], weights: Mapping[str, float], k: int = 60
) -> list[Fused]:
    fused: dict[int, Fused] = {}
    for lane, hits in lanes.items():
        weight = weights.get(lane, 1.0)
        for rank, hit in enumerate(hits, start=1):
            entry = fused.setdefault(hit.chunk_id, Fused(hit.chunk_id))
            if lane in entry.lanes:
                continue
            entry.score += weight / (k + rank)
            entry.lanes[lane] = rank
            entry.lane_scores[lane] = hit.score
    # Ties keep the order of the best single-lane rank, then the chunk id, so results are stable.
    return sorted(fused.values(), key=lambda f: (-f.score, min(f.lanes.values()), f.chunk_id))
