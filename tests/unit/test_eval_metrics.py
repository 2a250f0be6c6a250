"""Our nDCG@k and Recall@k (evals/metrics.py) against ranx and against hand-computed cases."""

from __future__ import annotations

import math
import random

import pytest

from evals.metrics import evaluate, mean_ndcg, mean_recall, ndcg, recall


def test_binary_case_by_hand() -> None:
    relevant = {"a": 1, "b": 1}
    ranking = ["x", "a", "y", "b"]
    # DCG = 1/log2(3) + 1/log2(5); ideal = 1 + 1/log2(3)
    expected = (1 / math.log2(3) + 1 / math.log2(5)) / (1 + 1 / math.log2(3))
    assert ndcg(ranking, relevant, 10) == pytest.approx(expected)
    assert expected == pytest.approx(0.650921, abs=1e-6)
    assert recall(ranking, relevant, 2) == 0.5
    assert recall(ranking, relevant, 100) == 1.0


def test_graded_case_by_hand() -> None:
    relevant = {"a": 2, "b": 1, "c": 1}
    ranking = ["b", "a", "z", "b"]  # the second "b" counts no more
    # DCG = 1 + 2/log2(3); ideal = 2 + 1/log2(3) + 1/log2(4)
    expected = (1 + 2 / math.log2(3)) / (2 + 1 / math.log2(3) + 0.5)
    assert ndcg(ranking, relevant, 10) == pytest.approx(expected)
    assert expected == pytest.approx(0.722424, abs=1e-6)
    assert ndcg(ranking, relevant, 1) == pytest.approx(0.5)
    assert recall(ranking, relevant, 10) == pytest.approx(2 / 3)


def test_means_skip_unjudged_queries_and_count_missing_runs_as_zero() -> None:
    qrels = {"q1": {"a": 1}, "q2": {"b": 0}, "q3": {"c": 1}}
    run = {"q1": ["a"], "q2": ["b"]}  # q2 has no relevant document; q3 has no run
    assert mean_ndcg(run, qrels, 10) == pytest.approx(0.5)
    assert mean_recall(run, qrels, 100) == pytest.approx(0.5)
    assert evaluate({}, {}) == {"ndcg@10": 0.0, "recall@100": 0.0, "recall@10": 0.0, "all@10": 0.0}


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_matches_ranx_on_random_runs(seed: int) -> None:
    ranx = pytest.importorskip("ranx")
    rng = random.Random(seed)
    docs = [f"d{i}" for i in range(300)]
    qrels: dict[str, dict[str, int]] = {}
    run: dict[str, list[str]] = {}
    for q in range(40):
        qid = f"q{q}"
        qrels[qid] = {d: rng.randint(1, 3) for d in rng.sample(docs, rng.randint(1, 12))}
        pool = list(qrels[qid]) + rng.sample(docs, 150)
        run[qid] = list(dict.fromkeys(rng.sample(pool, len(pool))))[: rng.randint(5, 150)]
    scored = {qid: {d: float(len(r) - i) for i, d in enumerate(r)} for qid, r in run.items()}
    theirs = ranx.evaluate(ranx.Qrels.from_dict(qrels), ranx.Run.from_dict(scored), ["ndcg@10", "recall@100",
                                                                                     "recall@10"])
    ours = evaluate(run, qrels)
    assert ours["ndcg@10"] == pytest.approx(theirs["ndcg@10"], abs=1e-9)
    assert ours["recall@100"] == pytest.approx(theirs["recall@100"], abs=1e-9)
    assert ours["recall@10"] == pytest.approx(theirs["recall@10"], abs=1e-9)
