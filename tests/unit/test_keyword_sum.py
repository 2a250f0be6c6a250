"""The PostgreSQL keyword lane's sum of postings and its choice of the best: the same totals whether
the chunk ids are summed over their dense span or sorted (a sparse span), and ties by chunk id."""

from __future__ import annotations

from collections import defaultdict

import numpy as np
import pytest

from rag.retrieve.keyword import _best, _summed


@pytest.mark.parametrize("span", [5_000, 10**12])  # a dense span (bincount), a sparse one (np.unique)
def test_postings_sum_to_each_chunks_total(span):
    rng = np.random.default_rng(7)
    ids = rng.integers(1, span, size=3_000) + 10**6
    scores = rng.random(3_000) + 0.01
    chunks, totals = _summed(ids, scores)
    expected: dict[int, float] = defaultdict(float)
    for i, s in zip(ids.tolist(), scores.tolist()):
        expected[i] += s
    assert chunks.tolist() == sorted(expected)
    assert np.allclose(totals, [expected[i] for i in chunks.tolist()], rtol=1e-12)


def test_the_best_are_by_score_then_chunk_id_even_across_the_cut():
    ids = np.array([40, 10, 30, 20, 50])
    scores = np.array([1.0, 2.0, 1.0, 1.0, 0.5])
    assert _best(ids, scores, 2) == [(10, 2.0), (20, 1.0)]  # of the three tied at 1.0, the lowest id
    assert _best(ids, scores, 9) == [(10, 2.0), (20, 1.0), (30, 1.0), (40, 1.0), (50, 0.5)]
    assert _best(ids[:0], scores[:0], 3) == []
