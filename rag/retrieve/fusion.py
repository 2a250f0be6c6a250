"""Fusion of the lanes' rankings: reciprocal rank fusion, and score fusion over its candidates.

Reciprocal rank fusion: score = sum over lanes of weight / (k + rank), ranks 1-based. The weights
are keyed by lane name (`RetrieveSettings.weights`; a lane without one weighs 1). With k = 60 and
weights that sum to 2 (vector 0.8, text 1.2 by default), a chunk ranked first in both lanes scores
0.8/61 + 1.2/61 ≈ 0.0328. It reads ranks only; each lane's own score is kept beside it. It picks
the candidates and sets the scale of the scores; score fusion (the default step after it) orders them.

Score fusion (`score_fusion`) orders the same candidates by what each lane measured: a chunk the
vector lane found at cosine 0.71 and one it found at 0.38 count the same for RRF if both are
third. Scores of different lanes are not on one scale (cosine similarity, BM25), so each lane's
scores are normalised over this query's candidates (`NORMALISERS`) and combined convexly with
the lane weights. A candidate a lane did not return is put at that lane's floor *after*
normalisation (0 for min-max: no better than the lane's weakest hit), never at a raw score of 0,
which on BM25's unbounded scale or a z-scale means something else. A lane whose hits all score
the same (one keyword hit for a word a single chunk holds) puts them at the top of the common
scale and the rest at its bottom (1 and 0 for min-max): its hits are what it matched, and they
keep the lane's whole weight.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable, Mapping, Sequence

from rag.retrieve.types import LaneHit


@dataclass(slots=True)
class Fused:
    chunk_id: int
    score: float = 0.0
    lanes: dict[str, int] = field(default_factory=dict)  # lane -> 1-based rank
    lane_scores: dict[str, float] = field(default_factory=dict)
    best: int = 0  # the best (lowest) of its ranks in the lanes; 0 when none: the first tie-break


def reciprocal_rank_fusion(
    lanes: Mapping[str, Sequence[LaneHit]], weights: Mapping[str, float], k: int = 60
) -> list[Fused]:
    return rrf_order(rrf_entries(lanes, weights, k))


def rrf_entries(lanes: Mapping[str, Sequence[LaneHit]], weights: Mapping[str, float], k: int = 60,
                entries: dict[int, Fused] | None = None) -> dict[int, Fused]:
    """RRF's sums by chunk id, these lanes added (in order) to `entries` (changed in place) or to
    new ones: fusing lanes A and B, then adding C, gives what fusing A, B, C at once does."""
    fused: dict[int, Fused] = {} if entries is None else entries
    for lane, hits in lanes.items():
        weight = weights.get(lane, 1.0)
        for rank, hit in enumerate(hits, start=1):
            entry = fused.get(hit.chunk_id)
            if entry is None:
                entry = fused[hit.chunk_id] = Fused(hit.chunk_id, 0.0, {}, {}, rank)
            elif lane in entry.lanes:
                continue
            elif rank < entry.best:
                entry.best = rank
            entry.score += weight / (k + rank)
            entry.lanes[lane] = rank
            entry.lane_scores[lane] = hit.score
    return fused


def rrf_order(entries: Mapping[int, Fused]) -> list[Fused]:
    # Ties keep the order of the best single-lane rank, then the chunk id, so results are stable.
    return sorted(entries.values(), key=_tie_order(lambda f: f.score))


# ----- score fusion -----

# A lane's normalisation over its candidates' scores is affine: (v - shift) / spread. Each
# normaliser returns (shift, spread, floor): the floor is what a candidate the lane did not
# return gets, on the normalised scale.
Normaliser = Callable[[Sequence[float]], tuple[float, float, float]]


def _minmax(values: Sequence[float]) -> tuple[float, float, float]:
    low, high = min(values), max(values)
    return low, high - low, 0.0


def _zscore(values: Sequence[float]) -> tuple[float, float, float]:
    mean = sum(values) / len(values)
    spread = math.sqrt(sum((v - mean) ** 2 for v in values) / len(values))
    return mean, spread, (min(values) - mean) / spread


def _by_max(values: Sequence[float]) -> tuple[float, float, float]:
    # For scores whose 0 means "no match" (BM25): the best hit is 1, no match 0, the rest in proportion.
    high = max(values)
    low = min(0.0, min(values))
    return low, high - low, 0.0


# name -> the lane's normalisation over its candidates' scores, and the floor a missing candidate gets
NORMALISERS: dict[str, Normaliser] = {"minmax": _minmax, "zscore": _zscore, "max": _by_max}


def lane_scale(values: Sequence[float], method: str) -> tuple[float, float, float] | None:
    """A lane's normalisation over this query's candidates as (shift, spread, floor): a score v
    becomes (v - shift) / spread, a candidate the lane did not return gets the floor; None for a
    lane whose candidates all score the same."""
    if not values or max(values) - min(values) <= 1e-12 * max(1.0, abs(max(values))):
        return None
    return NORMALISERS[method](values)


def fused_scores(fused: Sequence[Fused], weights: Mapping[str, float], method: str = "minmax") -> dict[int, float]:
    """chunk id -> the convex combination of its lanes' normalised scores (weights keyed by lane,
    1.0 for a lane not named; a lane weighted 0 counts for nothing). A lane that cannot tell its
    hits apart puts them at the top of the other lanes' normalised range and the rest at its
    bottom (1 and 0 for min-max)."""
    values: dict[str, list[float]] = {}
    for f in fused:
        for lane, score in f.lane_scores.items():
            values.setdefault(lane, []).append(score)
    lanes = sorted(values)
    scales = {lane: lane_scale(values[lane], method) for lane in lanes}
    reached = [v for lane, scaled in scales.items() if scaled
               for v in ((min(values[lane]) - scaled[0]) / scaled[1], (max(values[lane]) - scaled[0]) / scaled[1],
                         scaled[2])]
    top, bottom = max(reached, default=1.0), min(reached, default=0.0)
    total = sum(max(0.0, weights.get(lane, 1.0)) for lane in lanes) or 1.0
    # Per lane: (name, weight, shift, spread, what a candidate it returned gets when it cannot
    # tell them apart (None: normalise), what one it did not return gets).
    plan = []
    for lane in lanes:
        weight, scaled = max(0.0, weights.get(lane, 1.0)), scales[lane]
        if scaled is None:
            plan.append((lane, weight, 0.0, 1.0, top, bottom))
        else:
            plan.append((lane, weight, scaled[0], scaled[1], None, scaled[2]))
    out: dict[int, float] = {}
    for f in fused:
        value = 0.0
        got = f.lane_scores
        for lane, weight, shift, spread, flat, floor in plan:
            score = got.get(lane)
            if score is None:
                normalised = floor
            elif flat is None:
                normalised = (score - shift) / spread
            else:
                normalised = flat
            value += weight * normalised
        out[f.chunk_id] = value / total
    return out


def score_fusion(fused: Sequence[Fused], weights: Mapping[str, float], method: str = "minmax") -> list[Fused]:
    """The candidates ordered by `fused_scores`; ties keep RRF's rule (best single-lane rank, then
    chunk id). The scores handed back are the incoming ones by place (the first gets the best), so
    a result's score stays on fusion's scale and comparable with other searches'."""
    if method not in NORMALISERS:
        raise ValueError(f"no score normalisation named {method!r} (known: {', '.join(NORMALISERS)})")
    totals = fused_scores(fused, weights, method)
    ranked = sorted(fused, key=_tie_order(lambda f: totals[f.chunk_id]))
    places = sorted((f.score for f in fused), reverse=True)
    # New entries sharing the lanes' dicts, as dataclasses.replace makes them, at a fraction of its cost.
    return [Fused(f.chunk_id, score, f.lanes, f.lane_scores, f.best) for f, score in zip(ranked, places)]


def first_by_scores(fused: Sequence[Fused], weights: Mapping[str, float], method: str = "minmax") -> Fused:
    """`score_fusion(...)[0]` without ordering the others."""
    if method not in NORMALISERS:
        raise ValueError(f"no score normalisation named {method!r} (known: {', '.join(NORMALISERS)})")
    totals = fused_scores(fused, weights, method)
    first = min(fused, key=_tie_order(lambda f: totals[f.chunk_id]))
    return Fused(first.chunk_id, max(f.score for f in fused), first.lanes, first.lane_scores, first.best)


def _tie_order(score: Callable[[Fused], float]) -> Callable[[Fused], tuple[float, int, int]]:
    return lambda f: (-score(f), f.best, f.chunk_id)


# ----- diversity -----

def diversify(keys: Sequence[object], per_key: int, window: int) -> tuple[list[int], bool]:
    """Positions of a ranking (`keys[i]`: the document of result i) reordered so that no document
    has more than `per_key` of the first `window` places, unless fewer documents are there to fill
    them: the results held back then follow, in their order, as does everything after the window.

    Returns (the new order, settled): settled when the window was filled by results the cap let
    through, so a longer ranking would not change the first `window` places. `per_key` 0 keeps
    the order as it is."""
    if per_key <= 0:
        return list(range(len(keys))), True
    counts: dict[object, int] = {}
    taken: list[int] = []
    for i, key in enumerate(keys):
        if len(taken) >= window:
            break
        if counts.get(key, 0) < per_key:
            counts[key] = counts.get(key, 0) + 1
            taken.append(i)
    chosen = set(taken)
    return taken + [i for i in range(len(keys)) if i not in chosen], len(taken) >= window
