"""Scores of one cited answer, and their means over a run.

Answer text is compared SQuAD-style (the official v1.1 script's normalisation: lower case, no
punctuation, no articles, single spaces), with the citation markers taken out first. Citations are
scored as records: the corpus ids of the cited sources against the question's gold passage ids.

Conventions, chosen so that a system cannot score by saying nothing (as in ALCE):
- answer and citation scores are means over the answerable questions; an answer that cites
  nothing has citation precision 0 and recall 0;
- citation_valid is the share of all citation markers of the run that point at a real source
  (None when the run cites nothing);
- abstention_accuracy is over every question: unanswerable ones must be refused with no
  citation, answerable ones must not be refused.
"""

from __future__ import annotations

import re
import string
from collections import Counter
from typing import Iterable, Mapping, Sequence

import numpy as np

METRICS = (
    "questions", "answer_contains", "answer_f1", "citation_precision", "citation_recall", "citation_valid",
    "abstention_accuracy", "retrieval_recall@10", "retrieval_all@10", "latency_p50_ms", "latency_p95_ms",
)
_MARKER = re.compile(r"\[(\d+)\]")
_CLUSTER = re.compile(r"\s*(?:\[\d+\])+")
_ARTICLES = re.compile(r"\b(a|an|the)\b")
_PUNCTUATION = set(string.punctuation)


def normalize_answer(text: str) -> str:
    """The SQuAD v1.1 normalisation."""
    text = "".join(ch for ch in text.lower() if ch not in _PUNCTUATION)
    return " ".join(_ARTICLES.sub(" ", text).split())


def strip_citations(text: str) -> str:
    return _CLUSTER.sub("", text)


def markers(text: str) -> list[int]:
    """The citation numbers written in the text, each occurrence."""
    return [int(n) for n in _MARKER.findall(text)]


def token_f1(prediction: str, gold: str) -> float:
    pred, ref = normalize_answer(prediction).split(), normalize_answer(gold).split()
    common = sum((Counter(pred) & Counter(ref)).values())
    if common == 0:
        return 0.0
    precision, recall = common / len(pred), common / len(ref)
    return 2 * precision * recall / (precision + recall)


def answer_f1(prediction: str, golds: Sequence[str]) -> float:
    return max((token_f1(strip_citations(prediction), g) for g in golds), default=0.0)


def answer_contains(prediction: str, golds: Sequence[str]) -> float:
    """1.0 when some gold answer appears in the answer as whole words, after normalisation."""
    text = f" {normalize_answer(strip_citations(prediction))} "
    return float(any(n and f" {n} " in text for n in (normalize_answer(g) for g in golds)))


def citation_precision(cited: Sequence[str], gold: Iterable[str]) -> float:
    cited_set = set(cited)
    return len(cited_set & set(gold)) / len(cited_set) if cited_set else 0.0


def citation_recall(cited: Sequence[str], gold: Iterable[str]) -> float:
    gold_set = set(gold)
    return len(gold_set & set(cited)) / len(gold_set) if gold_set else 0.0


def score_answer(
    text: str, cited: Sequence[str], refused: bool, answers: Sequence[str], gold: Sequence[str],
    valid_numbers: set[int],
) -> dict[str, float | int | None]:
    """One answer's scores. `cited` are the corpus ids of its sources in citation order, and
    `valid_numbers` the source numbers that point at a real record (see answers.valid_numbers)."""
    written = markers(text)
    answerable = bool(answers)
    return {
        "answer_contains": answer_contains(text, answers) if answerable else None,
        "answer_f1": answer_f1(text, answers) if answerable else None,
        "citation_precision": citation_precision(cited, gold) if answerable else None,
        "citation_recall": citation_recall(cited, gold) if answerable else None,
        "citations": len(written),
        "valid_citations": sum(n in valid_numbers for n in written),
        "abstention_correct": float(refused != answerable),
    }


def _mean(values: Iterable[float | None]) -> float | None:
    kept = [v for v in values if v is not None]
    return round(float(np.mean(kept)), 4) if kept else None


def _percentile(values: Sequence[float], q: float) -> float | None:
    return round(float(np.percentile(values, q)), 1) if values else None


def aggregate(
    scores: Sequence[Mapping[str, float | int | None]], recalls: Sequence[float | None],
    latencies_ms: Sequence[float],
) -> dict[str, float | int | None]:
    """The run's figures under the issue's JSON keys. `recalls` is retrieval recall@10 of each
    question (None for unanswerable ones, or when the system retrieves nothing)."""
    citations = sum(int(s["citations"] or 0) for s in scores)
    valid = sum(int(s["valid_citations"] or 0) for s in scores)
    result: dict[str, float | int | None] = {"questions": len(scores)}
    for key in ("answer_contains", "answer_f1", "citation_precision", "citation_recall"):
        result[key] = _mean(s[key] for s in scores)
    result["citation_valid"] = round(valid / citations, 4) if citations else None
    result["abstention_accuracy"] = _mean(s["abstention_correct"] for s in scores)
    result["retrieval_recall@10"] = _mean(recalls)
    # The share of questions with all their gold passages in the top 10 (a multi-hop question needs both).
    result["retrieval_all@10"] = _mean(None if r is None else float(r >= 1.0 - 1e-9) for r in recalls)
    result["latency_p50_ms"] = _percentile(latencies_ms, 50)
    result["latency_p95_ms"] = _percentile(latencies_ms, 95)
    return result
