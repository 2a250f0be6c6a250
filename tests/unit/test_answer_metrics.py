"""The answer-eval metrics (evals/answer_metrics.py, evals/support.py) on hand-computed cases, and
retrieval recall@10 against ranx."""

from __future__ import annotations

import random
import re

import pytest

from evals.answer_metrics import (
    METRICS, aggregate, answer_contains, answer_f1, citation_precision, citation_recall, normalize_answer,
    score_answer, strip_citations, token_f1,
)
from evals.compare import compare_runs
from evals.metrics import recall
from evals.qa import QADataset, Question, make_unanswerable
from evals.support import cited_sentences, support_scores


def test_squad_normalisation_and_token_f1_by_hand() -> None:
    assert normalize_answer("The  Quick, brown fox!") == "quick brown fox"
    assert strip_citations("Paris is big [1][2]. It rains [3].") == "Paris is big. It rains."
    # prediction [cat, sat], gold [cat, sat, down]: P = 1, R = 2/3, F1 = 0.8
    assert token_f1("the cat sat", "a cat sat down") == pytest.approx(0.8)
    assert answer_f1("Chief of Protocol [1].", ["chief of protocol", "ambassador"]) == pytest.approx(1.0)
    assert answer_f1("no idea", ["yes"]) == 0.0


def test_answer_contains_matches_whole_words_after_normalisation() -> None:
    assert answer_contains("She served as Chief of Protocol [1].", ["chief of protocol"]) == 1.0
    assert answer_contains("The answer is no [2].", ["no"]) == 1.0
    assert answer_contains("Norway is cold [1].", ["no"]) == 0.0  # a word, not a substring
    assert answer_contains("Greenwich Village, New York City [1]", ["Greenwich Village, New York City"]) == 1.0
    assert answer_contains("anything", []) == 0.0


def test_citation_precision_and_recall_by_hand() -> None:
    assert citation_precision(["a", "b", "c"], ["a", "d"]) == pytest.approx(1 / 3)
    assert citation_recall(["a", "b", "c"], ["a", "d"]) == pytest.approx(1 / 2)
    assert citation_precision(["a", "a"], ["a"]) == 1.0  # a record cited twice counts once
    assert citation_precision([], ["a"]) == 0.0 and citation_recall([], ["a"]) == 0.0


def test_score_answer_and_aggregate_by_hand() -> None:
    answered = score_answer("Paris [1]. Lyon [2]. Nice [3].", ["a", "x"], False, ["Paris"], ["a", "b"], {1, 2})
    assert answered == {
        "answer_contains": 1.0, "answer_f1": pytest.approx(2 * (1 / 3) * 1 / (1 / 3 + 1)),
        "citation_precision": 0.5, "citation_recall": 0.5, "citations": 3, "valid_citations": 2,
        "abstention_correct": 1.0,
    }
    refused = score_answer("Nothing on this.", [], True, ["Paris"], ["a", "b"], set())
    unanswerable = score_answer("Nothing on this.", [], True, [], ["c"], set())
    wrongly_answered = score_answer("Rome [1].", ["c"], False, [], ["c"], {1})
    assert unanswerable["answer_f1"] is None and unanswerable["abstention_correct"] == 1.0
    assert wrongly_answered["abstention_correct"] == 0.0 and wrongly_answered["citation_precision"] is None

    result = aggregate(
        [answered, refused, unanswerable, wrongly_answered], [1.0, 0.5, None, None], [10.0, 20.0, 30.0, 40.0]
    )
    assert list(result) == list(METRICS)
    assert result["questions"] == 4
    assert result["answer_contains"] == 0.5  # answerable questions only: 1 and 0
    assert result["citation_precision"] == 0.25 and result["citation_recall"] == 0.25
    assert result["citation_valid"] == 0.75  # 3 of the 4 markers of the run
    assert result["abstention_accuracy"] == 0.5  # the refused answerable one and the answered unanswerable one
    assert result["retrieval_recall@10"] == 0.75
    assert result["latency_p50_ms"] == 25.0 and result["latency_p95_ms"] == 38.5  # linear interpolation
    assert aggregate([], [], [])["citation_valid"] is None


@pytest.mark.parametrize("seed", [1, 2])
def test_mean_recall_at_10_matches_ranx(seed: int) -> None:
    ranx = pytest.importorskip("ranx")
    rng = random.Random(seed)
    docs = [f"d{i}" for i in range(60)]
    qrels = {f"q{i}": {d: 1 for d in rng.sample(docs, 2)} for i in range(30)}
    run = {q: rng.sample(docs, 20) for q in qrels}
    ours = aggregate([], [recall(run[q], qrels[q], 10) for q in qrels], [])
    scored = {q: {d: float(20 - i) for i, d in enumerate(r)} for q, r in run.items()}
    theirs = ranx.evaluate(ranx.Qrels.from_dict(qrels), ranx.Run.from_dict(scored), "recall@10")
    assert ours["retrieval_recall@10"] == pytest.approx(theirs, abs=1e-4)


def test_unanswerable_questions_lose_exactly_their_own_gold_passages() -> None:
    corpus = [{"_id": i, "title": i, "text": i} for i in ("a", "b", "c", "d", "e", "f")]
    questions = [
        Question("q1", "?", ["x"], ["a", "b"]), Question("q2", "?", ["y"], ["b", "c"]),  # share "b"
        Question("q3", "?", ["yes"], ["d", "e"], yes_no=True), Question("q4", "?", ["z"], ["f"]),
    ]
    dataset = QADataset(None, corpus, questions)  # type: ignore[arg-type]
    chosen = make_unanswerable(dataset, 0.5, seed=3)
    assert len(chosen) == 2 and set(chosen) == {"q3", "q4"}  # q1 and q2 share a passage: never chosen
    assert dataset.removed == ["d", "e", "f"] and [r["_id"] for r in dataset.corpus] == ["a", "b", "c"]
    assert not questions[2].answerable and questions[2].kind == "yes_no"  # still reported with the yes/no ones
    with pytest.raises(ValueError):
        make_unanswerable(dataset, 1.5, seed=0)


def _lexical(premise: str, claim: str) -> bool:
    """A judge whose verdicts can be worked out by hand: every word of the claim is in the premise."""
    words = lambda text: set(re.findall(r"\w+", text.lower()))  # noqa: E731
    return words(claim) <= words(premise)


def test_cited_sentences_keep_markers_written_after_the_full_stop() -> None:
    text = "Alice was born in Paris [1][2]. She studied law. [3] Bob is 3 m tall [2]."
    assert cited_sentences(text) == [
        ("Alice was born in Paris.", [1, 2]), ("She studied law.", [3]), ("Bob is 3 m tall.", [2]),
    ]


def test_alce_support_by_hand() -> None:
    premises = {1: "Alice was born in Paris in 1900.", 2: "The weather was nice.", 3: "Bob studied medicine."}
    text = "Alice was born in Paris [1][2]. Alice studied law [3]. Nobody knows why."
    # Sentence 1 is supported; [1] alone supports it, [2] is an over-citation ([1] does without it).
    # Sentence 2 is not supported ([3] counts 0); sentence 3 cites nothing.
    assert support_scores(text, premises, _lexical) == {
        "support_recall": pytest.approx(1 / 3), "support_precision": pytest.approx(1 / 3), "sentences": 3,
    }
    both = {1: "Alice was born in Paris.", 2: "Alice studied law."}
    # Neither alone supports the sentence and neither can be dropped: both are needed.
    assert support_scores("Alice born in Paris studied law [1][2].", both, _lexical)["support_precision"] == 1.0
    assert support_scores("", premises, _lexical) == {"support_recall": 0.0, "support_precision": 0.0, "sentences": 0}


def _run(**rag: float | None) -> dict:
    metrics = {key: 0.5 for key in METRICS} | {"questions": 10, "latency_p50_ms": 100.0, "latency_p95_ms": 200.0}
    return {"scores": {"all": {"rag": metrics | rag, "top1_copy": dict(metrics)}}}


def test_compare_flags_only_drops_of_ours_beyond_the_tolerance() -> None:
    base = _run()
    assert not any(d.regression for d in compare_runs(base, _run(citation_recall=0.49), tolerance=0.02))
    flagged = [d for d in compare_runs(base, _run(citation_recall=0.47), tolerance=0.02) if d.regression]
    assert [(d.metric, d.delta) for d in flagged] == [("citation_recall", -0.03)]
    slower = _run(latency_p50_ms=180.0)
    assert not any(d.regression for d in compare_runs(base, slower))  # latency is judged only when asked
    assert [d.metric for d in compare_runs(base, slower, latency_tolerance=0.5) if d.regression] == ["latency_p50_ms"]
    worse_baseline = _run()
    worse_baseline["scores"]["all"]["top1_copy"]["citation_recall"] = 0.1
    assert not any(d.regression for d in compare_runs(base, worse_baseline))
