"""nDCG@k and Recall@k for ranked runs against graded qrels, as BEIR (pytrec_eval) computes them,
and the share of queries with all their relevant documents in the top k (multi-passage questions).

A run is `{query id: [doc ids, best first]}`, qrels are `{query id: {doc id: grade}}`. Gains are
linear in the grade with a log2(rank + 1) discount; the ideal ranking comes from the qrels. Means
are over the queries with at least one relevant document; such a query missing from the run
scores 0. Duplicate doc ids in a ranking count once, at their first rank.
"""

from __future__ import annotations

import math
from typing import Mapping, Sequence

Run = Mapping[str, Sequence[str]]
Qrels = Mapping[str, Mapping[str, int]]


def _dedup(ranking: Sequence[str]) -> list[str]:
    return list(dict.fromkeys(ranking))


def ndcg(ranking: Sequence[str], relevant: Mapping[str, int], k: int) -> float:
    dcg = sum(
        relevant.get(doc, 0) / math.log2(rank + 1) for rank, doc in enumerate(_dedup(ranking)[:k], start=1)
        if relevant.get(doc, 0) > 0
    )
    ideal_grades = sorted((g for g in relevant.values() if g > 0), reverse=True)[:k]
    idcg = sum(g / math.log2(rank + 1) for rank, g in enumerate(ideal_grades, start=1))
    return dcg / idcg if idcg > 0 else 0.0


def recall(ranking: Sequence[str], relevant: Mapping[str, int], k: int) -> float:
    wanted = {doc for doc, g in relevant.items() if g > 0}
    if not wanted:
        return 0.0
    return len(wanted.intersection(_dedup(ranking)[:k])) / len(wanted)


def judged(qrels: Qrels) -> list[str]:
    """The query ids that count: those with at least one relevant document."""
    return [qid for qid, docs in qrels.items() if any(g > 0 for g in docs.values())]


def mean_ndcg(run: Run, qrels: Qrels, k: int = 10) -> float:
    qids = judged(qrels)
    return sum(ndcg(run.get(q, ()), qrels[q], k) for q in qids) / len(qids) if qids else 0.0


def mean_recall(run: Run, qrels: Qrels, k: int = 100) -> float:
    qids = judged(qrels)
    return sum(recall(run.get(q, ()), qrels[q], k) for q in qids) / len(qids) if qids else 0.0


def all_found(ranking: Sequence[str], relevant: Mapping[str, int], k: int) -> bool:
    """Every relevant document is in the top k (a multi-hop question needs all of its passages)."""
    wanted = {doc for doc, g in relevant.items() if g > 0}
    return bool(wanted) and wanted.issubset(_dedup(ranking)[:k])


def share_all_found(run: Run, qrels: Qrels, k: int = 10) -> float:
    """The share of judged queries with all their relevant documents in the top k: the figure that
    mean recall@k hides (two questions with one of two passages each read as one with both)."""
    qids = judged(qrels)
    return sum(all_found(run.get(q, ()), qrels[q], k) for q in qids) / len(qids) if qids else 0.0


def evaluate(run: Run, qrels: Qrels) -> dict[str, float]:
    """The figures every report shows: nDCG@10 and Recall@100, then recall@10 and the share of
    queries with all relevant documents in the top 10 (`all@10`)."""
    return {"ndcg@10": mean_ndcg(run, qrels, 10), "recall@100": mean_recall(run, qrels, 100),
            "recall@10": mean_recall(run, qrels, 10), "all@10": share_all_found(run, qrels, 10)}
