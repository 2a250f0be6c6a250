"""The PostgreSQL keyword lane's sum of postings and its choice of the best: the same totals whether
the chunk ids are summed over their dense span or sorted (a sparse span), and ties by chunk id; and
a merge's new blocks of one lexeme."""

from __future__ import annotations

from collections import defaultdict

import numpy as np
import pytest

from rag.retrieve.keyword import _best, _merged_blocks, _summed


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


def packed(ids, tfs, dls):
    return (np.array(ids, dtype=">i8").tobytes(), np.array(tfs, dtype=">i2").tobytes(),
            np.array(dls, dtype=">i2").tobytes())


def test_a_merge_keeps_each_members_posting_of_the_batch_it_is_in(monkeypatch):
    # Batch 1 holds chunks 5, 9 and 12; batch 2 holds 7, and 9 again (9 moved to another knowledge
    # base and back: its posting in batch 1 is dead); 12 was deleted. Members: 5 in batch 1, 7 and 9
    # in batch 2.
    group = [("leav", "kb", 1, 3, *packed([5, 9, 12], [1, 2, 3], [10, 20, 30])),
             ("leav", "kb", 2, 2, *packed([7, 9], [4, 5], [40, 50]))]
    members = (np.array([5, 7, 9]), np.array([1, 2, 2]))
    rows = _merged_blocks("leav", "kb", 8, group, members)
    assert len(rows) == 1
    lexeme, kb, label, part, n, ids, tfs, dls = rows[0]
    assert (lexeme, kb, label, part, n) == ("leav", "kb", 8, 0, 3)
    assert np.frombuffer(ids, ">i8").tolist() == [5, 7, 9]
    assert np.frombuffer(tfs, ">i2").tolist() == [1, 4, 5]
    assert np.frombuffer(dls, ">i2").tolist() == [10, 40, 50]

    monkeypatch.setattr("rag.retrieve.keyword.BLOCK", 2)  # cut again at the block size
    assert [(r[3], np.frombuffer(r[5], ">i8").tolist()) for r in _merged_blocks("leav", "kb", 8, group, members)] == [
        (0, [5, 7]), (1, [9])]
